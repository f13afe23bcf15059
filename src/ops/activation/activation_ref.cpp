// CPU reference of the activation family: fp64 math, one rounding per output (the test oracle and CPU backend).
#include <cmath>

#include "ops/activation/activation.hpp"

namespace kernelkit::detail {

double activation_reference(Activation act, double v) {
  switch (act) {
    case Activation::gelu: return 0.5 * v * std::erfc(-v / std::sqrt(2.0));  // 1 + erf(x / sqrt 2), not cancelling
    case Activation::gelu_tanh: {
      constexpr double k = 0.7978845608028654;  // sqrt(2 / pi)
      return 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v)));
    }
    case Activation::silu: return v / (1.0 + std::exp(-v));
  }
  return 0;
}

Status elementwise_reference(const ElementwiseArgs& a) {
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t i = 0; i < a.hidden; ++i) {
      double y = activation_reference(a.act, load_as_double(a.a, a.dtype, r * a.a_stride + i));
      if (a.gated) y *= load_as_double(a.b, a.dtype, r * a.b_stride + i);
      store_from_double(a.out, a.dtype, r * a.out_stride + i, y);
    }
  return Status::Ok();
}

}  // namespace kernelkit::detail

// CPU reference of the activation family: fp64 math, one rounding per output (the test oracle and CPU backend); the
// quantizing op rounds y to the dtype first, as silu_and_mul stores it.
#include <cmath>
#include <vector>

#include "ops/activation/activation.hpp"
#include "ops/quant/quant.hpp"

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
  const auto qtype = op_quant_out_dtype(a.op);
  if (qtype && a.static_scale) KK_RETURN_IF_ERROR(check_static_scale(a.op, *a.q_scales));
  std::vector<double> row(qtype ? static_cast<size_t>(a.hidden) : 0);
  for (int64_t r = 0; r < a.rows; ++r) {
    for (int64_t i = 0; i < a.hidden; ++i) {
      double y = activation_reference(a.act, load_as_double(a.a, a.dtype, r * a.a_stride + i));
      if (a.gated) y *= load_as_double(a.b, a.dtype, r * a.b_stride + i);
      if (qtype)
        row[static_cast<size_t>(i)] = round_to_dtype(a.dtype, y);  // what silu_and_mul would store, quantized below
      else
        store_from_double(a.out, a.dtype, r * a.out_stride + i, y);
    }
    if (qtype)  // quantize_per_token(silu_and_mul(x))
      KK_RETURN_IF_ERROR(quantize_row_reference(a.op, r, row.data(), a.hidden, *qtype == DType::f8e4m3, a.static_scale,
                                                a.q_scales + (a.static_scale ? 0 : r),
                                                static_cast<uint8_t*>(a.q) + r * a.hidden));
  }
  return Status::Ok();
}

}  // namespace kernelkit::detail

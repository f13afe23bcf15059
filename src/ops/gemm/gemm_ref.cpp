// The linear reference: fp64 dot products of the stored (rounded) inputs, bias and the tanh-GELU in fp64, one rounding
// to the output dtype.
#include <cmath>

#include "ops/activation/activation.hpp"
#include "ops/gemm/gemm.hpp"

namespace kernelkit::detail {

Status linear_reference(const LinearArgs& a) {
  const auto* x = static_cast<const uint8_t*>(a.x);
  const auto* w = static_cast<const uint8_t*>(a.w);
  const size_t e = dtype_size(a.dtype);
  for (int64_t i = 0; i < a.m; ++i)
    for (int64_t j = 0; j < a.n; ++j) {
      double acc = 0.0;
      for (int64_t l = 0; l < a.k; ++l)
        acc += load_as_double(x + e * static_cast<size_t>(i * a.x_stride), a.dtype, l) *
               load_as_double(w + e * static_cast<size_t>(j * a.w_stride), a.dtype, l);
      if (a.options.accumulate) acc += load_as_double(a.y, a.dtype, i * a.y_stride + j);
      if (a.options.epilogue != LinearEpilogue::none) acc += load_as_double(a.bias, a.dtype, j);
      if (a.options.epilogue == LinearEpilogue::bias_gelu) acc = activation_reference(Activation::gelu_tanh, acc);
      store_from_double(a.y, a.dtype, i * a.y_stride + j, acc);
    }
  return Status::Ok();
}

}  // namespace kernelkit::detail

// Internal: the parameter block of the activation family (gelu, gelu_tanh, silu, their gated forms and
// silu_and_mul_quant), shared by validation, the CPU reference and the CUDA launcher.
#pragma once

#include <cstdint>

#include "kernelkit/op_info.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/profile.hpp"

namespace kernelkit::detail {

struct ElementwiseArgs {
  OpId op{};
  Activation act = Activation::silu;
  bool gated = false;      // out = act(a) * b
  DType dtype{};
  Device device{};
  int64_t rows = 0, hidden = 0;  // hidden: the output width d
  void* out = nullptr;           // [rows, d], row stride out_stride
  const void* a = nullptr;       // [rows, d] activated input, row stride a_stride
  const void* b = nullptr;       // [rows, d] multiplier (gated), row stride b_stride
  int64_t out_stride = 0, a_stride = 0, b_stride = 0;
  // Gated activation + quantization (op_quant_out_dtype(op) is q's dtype): y rounded to the dtype, then quantized.
  void* q = nullptr;          // i8 or f8e4m3 [rows, d], contiguous
  float* q_scales = nullptr;  // f32 [rows] written (one scale a token), or [1] read (static_scale)
  bool static_scale = false;
  int align_bytes = 16;

  OpShape shape() const { return {rows, hidden, 1, align_bytes}; }
};

Status validate_elementwise(const ElementwiseArgs& a, const DeviceProfile* profile);
Status elementwise_reference(const ElementwiseArgs& a);
Status elementwise_cuda(const ElementwiseArgs& a, Stream stream);

// The activation in double precision (the reference) — the kernels' functors compute the same formulas in float.
double activation_reference(Activation act, double v);

}  // namespace kernelkit::detail

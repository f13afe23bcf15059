// Activation ops (src/ops/activation/), part of the op API (kernelkit/ops.hpp): TensorViews in, a Status out;
// CPU tensors run the fp64 reference, CUDA tensors the kernels on the caller's stream.
#pragma once

#include <cstdint>

#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit {

// ---- Activations: one element-wise family parameterised by the activation. Rows of the last dim, strided rows allowed;
//      fp32 math, one rounding per output. out may be x (or a or b) itself, in place, except for the gated form over
//      one [..., 2d] tensor; any other memory it shares with the inputs is refused.

enum class Activation : uint8_t {
  gelu,       // x * Phi(x), exact (erf)
  gelu_tanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  silu,       // x * sigmoid(x)
};

// out = act(x); x, out: [..., d]
Status activation(Activation act, const TensorView& out, const TensorView& x, Stream stream = nullptr);
// out = act(x[..., :d]) * x[..., d:]; x: [..., 2d], out: [..., d] (the vLLM / HF `activation` kernel convention:
// the first half is activated). silu -> silu_and_mul (SwiGLU), gelu -> gelu_and_mul, gelu_tanh -> gelu_tanh_and_mul.
Status gated_activation(Activation act, const TensorView& out, const TensorView& x, Stream stream = nullptr);
// out = act(a) * b with separate tensors (GEGLU with act = gelu); a, b, out: [..., d].
Status gated_activation(Activation act, const TensorView& out, const TensorView& a, const TensorView& b,
                        Stream stream = nullptr);

// SwiGLU + quantization in one pass (vLLM's silu_and_mul_quant, and its dynamic per-token form): y =
// silu_and_mul(x) rounded to x's dtype, then quantized as quantize_per_token does, so q and scales equal
// quantize_per_token_*(silu_and_mul(x)) bit for bit. x [..., 2d] f16 or bf16 (contiguous last dim, any row stride);
// q [..., d] i8 or f8e4m3 (its dtype picks the op: silu_and_mul_quant_int8 / _fp8), contiguous.
// static_scale false: scales f32 [rows] written, s[t] = max|y[t, :]| / qmax (127, or 448 for e4m3); true: scales f32
// [1] holds one scale, read (values beyond it saturate; it must be finite and > 0: the CPU backend refuses another,
// CUDA records it for check_errors). FP8 on CUDA needs a profile with FP8 (sm_89+); the T4 / A100
// profiles refuse it, naming what to use instead. An inf or NaN in a row under a dynamic scale is recorded
// (check_errors).
Status silu_and_mul_quant(const TensorView& q, const TensorView& scales, const TensorView& x, bool static_scale = false,
                          Stream stream = nullptr);

}  // namespace kernelkit

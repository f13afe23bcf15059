// Normalization ops (src/ops/norm/), part of the op API (kernelkit/ops.hpp): TensorViews in, a Status out;
// CPU tensors run the fp64 reference, CUDA tensors the kernels on the caller's stream.
#pragma once

#include <optional>

#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit {

// ---- Normalization: one row-reduction family. x is [..., hidden] with a contiguous last dim; the leading dims must
//      collapse to one row stride. Accumulation is always fp32 (fp64 in the CPU reference); the output is rounded once.
//      An output may be its input x itself (in place); any other memory it shares with the call's tensors is refused
//      (invalid_argument naming both).

// out = x / sqrt(mean(x^2) + eps) * (weight_offset + weight)
//   weight: [hidden] or none (diffusers elementwise_affine=False); weight_offset = 1 gives Gemma's (1 + w).
Status rms_norm(const TensorView& out, const TensorView& x, const std::optional<TensorView>& weight, float eps,
                float weight_offset = 0.0f, Stream stream = nullptr);

// residual = x + residual (rounded to the dtype); x = rms_norm(residual). In place, vLLM semantics.
Status fused_add_rms_norm(const TensorView& x, const TensorView& residual, const std::optional<TensorView>& weight,
                          float eps, float weight_offset = 0.0f, Stream stream = nullptr);

// out = (x - mean) / sqrt(var + eps) * weight + bias; weight and bias optional, biased variance (as torch).
Status layer_norm(const TensorView& out, const TensorView& x, const std::optional<TensorView>& weight,
                  const std::optional<TensorView>& bias, float eps, Stream stream = nullptr);

// DiT / LTX-Video "modulate": out = layer_norm(x) * (1 + scale[b]) + shift[b].
//   x, out: [batch, seq, hidden]; scale, shift: [batch, hidden]; weight/bias optional as in layer_norm.
Status ada_layer_norm(const TensorView& out, const TensorView& x, const TensorView& scale, const TensorView& shift,
                      const std::optional<TensorView>& weight, const std::optional<TensorView>& bias, float eps,
                      Stream stream = nullptr);

// out = gelu_tanh(rms_norm(x) * weight): the seed's fused norm + activation (no intermediate rounding).
Status rms_norm_gelu(const TensorView& out, const TensorView& x, const std::optional<TensorView>& weight, float eps,
                     Stream stream = nullptr);

// ---- Norm + quantization (vLLM's rms_norm_dynamic_per_token_quant and rms_norm_static_fp8_quant, and their fused-add
//      forms): the RMSNorm output feeds a W8A8 / FP8 linear layer without a round trip through memory.
//      y = rms_norm(x) rounded to x's dtype (exactly what rms_norm stores), then quantized as the quantizers do it:
//      q = round_half_even(y / s) clamped to +-127 (q i8) or e4m3(y / s) rounded to nearest even and saturating at
//      +-448 (q f8e4m3), the quotient an IEEE fp32 division; q's dtype picks the op. x f16 or bf16; q contiguous in
//      x's shape; scales f32, contiguous:
//        static_scale = false: one scale a token written, [rows] (or [rows, 1]): s = max|y[t, :]| / 127 or / 448 (an
//          all-zero row gives s = 0 and q = 0), so q and s equal quantize_per_token_*(rms_norm(x)) bit for bit;
//        static_scale = true: one scale read, [1] (a calibrated s > 0), for every token; a scale that is not finite
//          and > 0 is refused by the CPU backend before it writes and recorded by CUDA (check_errors).
//      FP8 q needs a profile with FP8 (sm_89+); the T4 / A100 profiles refuse it, naming what to use instead (i8).
Status rms_norm_quant(const TensorView& q, const TensorView& scales, const TensorView& x,
                      const std::optional<TensorView>& weight, float eps, bool static_scale = false,
                      float weight_offset = 0.0f, Stream stream = nullptr);

// residual = x + residual (rounded to the dtype, as fused_add_rms_norm); q, scales = rms_norm_quant(residual). x is
// only read: the normalized activations leave as q.
Status fused_add_rms_norm_quant(const TensorView& q, const TensorView& scales, const TensorView& x,
                                const TensorView& residual, const std::optional<TensorView>& weight, float eps,
                                bool static_scale = false, float weight_offset = 0.0f, Stream stream = nullptr);

}  // namespace kernelkit

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

}  // namespace kernelkit

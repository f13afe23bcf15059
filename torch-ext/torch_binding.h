// PyTorch binding layer: torch::Tensor <-> kernelkit::TensorView, device guard, current stream, Status -> exception.
// Every op is destination-passing (the Python wrapper allocates `out` when the caller passes none).
#pragma once

#include <ATen/Tensor.h>
#include <c10/util/string_view.h>

#include <optional>

namespace kernelkit::torch_ext {

void rms_norm(at::Tensor& out, const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps,
              double weight_offset);
void fused_add_rms_norm(at::Tensor& x, at::Tensor& residual, const std::optional<at::Tensor>& weight, double eps,
                        double weight_offset);
void layer_norm(at::Tensor& out, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                const std::optional<at::Tensor>& bias, double eps);
void ada_layer_norm(at::Tensor& out, const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps);
void rms_norm_gelu(at::Tensor& out, const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps);

// Activations: act in {"gelu", "gelu_tanh", "silu"}.
void activation(at::Tensor& out, const at::Tensor& x, c10::string_view act);
void act_and_mul(at::Tensor& out, const at::Tensor& x, c10::string_view act);  // act(x[..., :d]) * x[..., d:]
void act_mul(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, c10::string_view act);  // act(a) * b

// softmax over the last dim; causal: x [..., s_q, s_k] with the bottom-right aligned causal mask.
void softmax(at::Tensor& out, const at::Tensor& x, double scale, bool causal);

// RoPE in place on q [tokens, heads, head_dim] and k [tokens, kv_heads, head_dim].
void rotary_embedding_(const at::Tensor& positions, at::Tensor& q, at::Tensor& k, const at::Tensor& cos_sin_cache,
                       bool neox);
void rotary_embedding_cos_sin_(at::Tensor& q, at::Tensor& k, const at::Tensor& cos, const at::Tensor& sin,
                               int64_t rot_dim, bool neox);

}  // namespace kernelkit::torch_ext

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

// Attention (f16 / bf16): out [b, s_q, h, d] (or packed [total_q, h, d] with cu_seqlens), lse f32 or none; scale 0
// means 1 / sqrt(head_dim).
void attention(at::Tensor& out, const std::optional<at::Tensor>& lse, const at::Tensor& q, const at::Tensor& k,
               const at::Tensor& v, double scale, bool causal, const std::optional<at::Tensor>& cu_seqlens_q,
               const std::optional<at::Tensor>& cu_seqlens_k);
void decode_attention(at::Tensor& out, const std::optional<at::Tensor>& lse, const at::Tensor& q,
                      const at::Tensor& k_cache, const at::Tensor& v_cache, const std::optional<at::Tensor>& block_table,
                      const std::optional<at::Tensor>& seqlens_k, double scale, bool causal);

// Quantization: bits 8 -> qweight int8 [n, k], scales f32 [n]; bits 4 -> qweight uint8 [n, k / 2] (kernel layout),
// scales f32 [n, k / group].
void quantize_weight(at::Tensor& qweight, at::Tensor& scales, const at::Tensor& w, int64_t bits, int64_t group);
void linear_weight_only(at::Tensor& out, const at::Tensor& x, const at::Tensor& qweight, const at::Tensor& scales,
                        int64_t bits, int64_t group, const std::optional<at::Tensor>& bias);

}  // namespace kernelkit::torch_ext

// PyTorch ops of attention (src/ops/attention/): f16 / bf16; scale 0 means 1 / sqrt(head_dim).
#include "binding.hpp"
#include "kernelkit/ops/attention.hpp"

namespace kernelkit::torch_ext {
namespace {

void attention(at::Tensor& out, const std::optional<at::Tensor>& lse, const at::Tensor& q, const at::Tensor& k,
               const at::Tensor& v, double scale, bool causal, const std::optional<at::Tensor>& cu_seqlens_q,
               const std::optional<at::Tensor>& cu_seqlens_k) {
  const c10::OptionalDeviceGuard guard(q.device());
  AttentionOptions o;
  o.scale = static_cast<float>(scale);
  o.causal = causal;
  o.cu_seqlens_q = view(cu_seqlens_q, "cu_seqlens_q");
  o.cu_seqlens_k = view(cu_seqlens_k, "cu_seqlens_k");
  raise_if_error(kernelkit::attention(view(out, "out"), view(lse, "lse"), view(q, "q"), view(k, "k"), view(v, "v"), o,
                                      stream_for(q)));
}

void decode_attention(at::Tensor& out, const std::optional<at::Tensor>& lse, const at::Tensor& q,
                      const at::Tensor& k_cache, const at::Tensor& v_cache, const std::optional<at::Tensor>& block_table,
                      const std::optional<at::Tensor>& seqlens_k, double scale, bool causal) {
  const c10::OptionalDeviceGuard guard(q.device());
  KvCache cache;
  cache.k = view(k_cache, "k_cache");
  cache.v = view(v_cache, "v_cache");
  cache.block_table = view(block_table, "block_table");
  cache.seqlens_k = view(seqlens_k, "seqlens_k");
  AttentionOptions o;
  o.scale = static_cast<float>(scale);
  o.causal = causal;
  raise_if_error(kernelkit::decode_attention(view(out, "out"), view(lse, "lse"), view(q, "q"), cache, o,
                                             stream_for(q)));
}

}  // namespace
}  // namespace kernelkit::torch_ext

KK_TORCH_OPS(m) {
  using namespace kernelkit::torch_ext;
  def_op(m, "attention(Tensor(a!) out, Tensor(b!)? lse, Tensor q, Tensor k, Tensor v, float scale, bool causal, "
            "Tensor? cu_seqlens_q, Tensor? cu_seqlens_k) -> ()",
         &attention);
  def_op(m, "decode_attention(Tensor(a!) out, Tensor(b!)? lse, Tensor q, Tensor k_cache, Tensor v_cache, "
            "Tensor? block_table, Tensor? seqlens_k, float scale, bool causal) -> ()",
         &decode_attention);
}

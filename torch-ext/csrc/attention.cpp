// PyTorch ops of attention (src/ops/attention/): f16 / bf16 (KV caches also float8_e4m3fn with k_scale / v_scale);
// scale 0 means 1 / sqrt(head_dim).
#include "binding.hpp"
#include "kernelkit/ops/attention.hpp"

namespace kernelkit::torch_ext {
namespace {

void attention(at::Tensor& out, const std::optional<at::Tensor>& lse, const at::Tensor& q, const at::Tensor& k,
               const at::Tensor& v, double scale, bool causal, const std::optional<at::Tensor>& cu_seqlens_q,
               const std::optional<at::Tensor>& cu_seqlens_k, std::optional<int64_t> max_seqlen_q,
               std::optional<int64_t> max_seqlen_k, int64_t window_left, double softcap,
               const std::optional<at::Tensor>& alibi_slopes, const std::optional<at::Tensor>& k_scale,
               const std::optional<at::Tensor>& v_scale) {
  const Call c("attention", q);
  const TensorView qv = c(q, "q"), kv = c(k, "k"), vv = c(v, "v"), outv = c(out, "out");
  AttentionOptions o;
  o.scale = c.f32(scale, "scale");
  o.causal = causal;
  o.cu_seqlens_q = c(cu_seqlens_q, "cu_seqlens_q");
  o.cu_seqlens_k = c(cu_seqlens_k, "cu_seqlens_k");
  o.max_seqlen_q = max_seqlen_q;
  o.max_seqlen_k = max_seqlen_k;
  o.window_left = window_left;
  o.softcap = c.f32(softcap, "softcap");
  o.alibi_slopes = c(alibi_slopes, "alibi_slopes");
  o.k_scale = c(k_scale, "k_scale");
  o.v_scale = c(v_scale, "v_scale");
  c.check(kernelkit::attention(outv, c(lse, "lse"), qv, kv, vv, o, c.stream()));
}

void decode_attention(at::Tensor& out, const std::optional<at::Tensor>& lse, const at::Tensor& q,
                      const at::Tensor& k_cache, const at::Tensor& v_cache, const std::optional<at::Tensor>& block_table,
                      const std::optional<at::Tensor>& seqlens_k, double scale, bool causal, int64_t window_left,
                      double softcap, const std::optional<at::Tensor>& alibi_slopes,
                      const std::optional<at::Tensor>& k_scale, const std::optional<at::Tensor>& v_scale) {
  const Call c("decode_attention", q);
  const TensorView qv = c(q, "q");
  KvCache cache;
  cache.k = c(k_cache, "k_cache");
  cache.v = c(v_cache, "v_cache");
  cache.block_table = c(block_table, "block_table");
  cache.seqlens_k = c(seqlens_k, "seqlens_k");
  cache.k_scale = c(k_scale, "k_scale");
  cache.v_scale = c(v_scale, "v_scale");
  const TensorView outv = c(out, "out");
  AttentionOptions o;
  o.scale = c.f32(scale, "scale");
  o.causal = causal;
  o.window_left = window_left;
  o.softcap = c.f32(softcap, "softcap");
  o.alibi_slopes = c(alibi_slopes, "alibi_slopes");
  c.check(kernelkit::decode_attention(outv, c(lse, "lse"), qv, cache, o, c.stream()));
}

// k, v into their cache slots; with q (and q_out, positions, cos_sin_cache) RoPE is fused: q rotated into q_out, k
// rotated on its way into the cache.
void write_kv_cache(at::Tensor& k_cache, at::Tensor& v_cache, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& slot_mapping, const std::optional<at::Tensor>& q_out,
                    const std::optional<at::Tensor>& q, const std::optional<at::Tensor>& positions,
                    const std::optional<at::Tensor>& cos_sin_cache, bool neox, const std::optional<at::Tensor>& k_scale,
                    const std::optional<at::Tensor>& v_scale) {
  const Call c("write_kv_cache", k);
  std::optional<KvWriteRope> rope;
  if (q || q_out || positions || cos_sin_cache) {
    if (!(q && q_out && positions && cos_sin_cache))
      raise_if_error(invalid_argument("write_kv_cache: RoPE needs q, q_out, positions and cos_sin_cache together"));
    rope = KvWriteRope{c(*q_out, "q_out"), c(*q, "q"), c(*positions, "positions"), c(*cos_sin_cache, "cos_sin_cache"),
                       neox ? RopeStyle::neox : RopeStyle::gptj};
  }
  c.check(kernelkit::write_kv_cache(c(k_cache, "k_cache"), c(v_cache, "v_cache"), c(k, "k"), c(v, "v"),
                                    c(slot_mapping, "slot_mapping"), rope, c(k_scale, "k_scale"), c(v_scale, "v_scale"),
                                    c.stream()));
}

}  // namespace
}  // namespace kernelkit::torch_ext

KK_TORCH_OPS(m) {
  using namespace kernelkit::torch_ext;
  def_op(m, "attention(Tensor(a!) out, Tensor(b!)? lse, Tensor q, Tensor k, Tensor v, float scale, bool causal, "
            "Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, int? max_seqlen_q=None, int? max_seqlen_k=None, "
            "int window_left=-1, float softcap=0.0, Tensor? alibi_slopes=None, Tensor? k_scale=None, "
            "Tensor? v_scale=None) -> ()",
         &attention);
  def_op(m, "decode_attention(Tensor(a!) out, Tensor(b!)? lse, Tensor q, Tensor k_cache, Tensor v_cache, "
            "Tensor? block_table, Tensor? seqlens_k, float scale, bool causal, int window_left=-1, "
            "float softcap=0.0, Tensor? alibi_slopes=None, Tensor? k_scale=None, Tensor? v_scale=None) -> ()",
         &decode_attention);
  def_op(m,
         "write_kv_cache(Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor k, Tensor v, Tensor slot_mapping, "
         "Tensor(c!)? q_out=None, Tensor? q=None, Tensor? positions=None, Tensor? cos_sin_cache=None, "
         "bool neox=True, Tensor? k_scale=None, Tensor? v_scale=None) -> ()",
         &write_kv_cache);
}

// PyTorch ops of RoPE (src/ops/rope/), in place on q [tokens, heads, head_dim] and k [tokens, kv_heads, head_dim].
#include "binding.hpp"
#include "kernelkit/ops/rope.hpp"

namespace kernelkit::torch_ext {
namespace {

void rotary_embedding_(const at::Tensor& positions, at::Tensor& q, at::Tensor& k, const at::Tensor& cos_sin_cache,
                       bool neox) {
  const Call c("rotary_embedding", q);
  const TensorView qv = c(q, "q"), kv = c(k, "k"), pv = c(positions, "positions"),
                   cv = c(cos_sin_cache, "cos_sin_cache");
  c.check(kernelkit::rotary_embedding(qv, kv, qv, kv, pv, cv, neox ? RopeStyle::neox : RopeStyle::gptj, c.stream()));
}

void rotary_embedding_cos_sin_(at::Tensor& q, at::Tensor& k, const at::Tensor& cos, const at::Tensor& sin,
                               int64_t rot_dim, bool neox) {
  const Call c("rotary_embedding", q);
  const TensorView qv = c(q, "q"), kv = c(k, "k"), cv = c(cos, "cos"), sv = c(sin, "sin");
  c.check(kernelkit::rotary_embedding(qv, kv, qv, kv, cv, sv, rot_dim, neox ? RopeStyle::neox : RopeStyle::gptj,
                                      c.stream()));
}

}  // namespace
}  // namespace kernelkit::torch_ext

KK_TORCH_OPS(m) {
  using namespace kernelkit::torch_ext;
  def_op(m, "rotary_embedding_(Tensor positions, Tensor! q, Tensor! k, Tensor cos_sin_cache, bool neox) -> ()",
         &rotary_embedding_);
  def_op(m, "rotary_embedding_cos_sin_(Tensor! q, Tensor! k, Tensor cos, Tensor sin, int rot_dim, bool neox) -> ()",
         &rotary_embedding_cos_sin_);
}

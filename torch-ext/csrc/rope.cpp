// PyTorch ops of RoPE (src/ops/rope/), in place on q [tokens, heads, head_dim] and k [tokens, kv_heads, head_dim].
#include "binding.hpp"
#include "kernelkit/ops/rope.hpp"

namespace kernelkit::torch_ext {
namespace {

void rotary_embedding_(const at::Tensor& positions, at::Tensor& q, at::Tensor& k, const at::Tensor& cos_sin_cache,
                       bool neox) {
  const c10::OptionalDeviceGuard guard(q.device());
  const TensorView qv = view(q, "q"), kv = view(k, "k");
  raise_if_error(kernelkit::rotary_embedding(qv, kv, qv, kv, view(positions, "positions"),
                                             view(cos_sin_cache, "cos_sin_cache"),
                                             neox ? RopeStyle::neox : RopeStyle::gptj, stream_for(q)));
}

void rotary_embedding_cos_sin_(at::Tensor& q, at::Tensor& k, const at::Tensor& cos, const at::Tensor& sin,
                               int64_t rot_dim, bool neox) {
  const c10::OptionalDeviceGuard guard(q.device());
  const TensorView qv = view(q, "q"), kv = view(k, "k");
  raise_if_error(kernelkit::rotary_embedding(qv, kv, qv, kv, view(cos, "cos"), view(sin, "sin"), rot_dim,
                                             neox ? RopeStyle::neox : RopeStyle::gptj, stream_for(q)));
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

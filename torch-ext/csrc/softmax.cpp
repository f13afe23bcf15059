// PyTorch ops of softmax (src/ops/softmax/): causal takes x [..., s_q, s_k] with the bottom-right aligned mask.
#include "binding.hpp"
#include "kernelkit/ops/softmax.hpp"

namespace kernelkit::torch_ext {
namespace {

void softmax(at::Tensor& out, const at::Tensor& x, double scale, bool causal) {
  const Call c("softmax", x);
  const TensorView xv = c(x, "x"), outv = c(out, "out");
  const auto f = causal ? kernelkit::causal_softmax : kernelkit::softmax;
  c.check(f(outv, xv, c.f32(scale, "scale"), c.stream()));
}

}  // namespace
}  // namespace kernelkit::torch_ext

KK_TORCH_OPS(m) {
  using namespace kernelkit::torch_ext;
  def_op(m, "softmax(Tensor! out, Tensor x, float scale=1., bool causal=False) -> ()", &softmax);
}

// PyTorch ops of softmax (src/ops/softmax/): causal takes x [..., s_q, s_k] with the bottom-right aligned mask.
#include "binding.hpp"
#include "kernelkit/ops/softmax.hpp"

namespace kernelkit::torch_ext {
namespace {

void softmax(at::Tensor& out, const at::Tensor& x, double scale, bool causal) {
  const c10::OptionalDeviceGuard guard(x.device());
  const auto f = causal ? kernelkit::causal_softmax : kernelkit::softmax;
  raise_if_error(f(view(out, "out"), view(x, "x"), static_cast<float>(scale), stream_for(x)));
}

}  // namespace
}  // namespace kernelkit::torch_ext

KK_TORCH_OPS(m) {
  using namespace kernelkit::torch_ext;
  def_op(m, "softmax(Tensor! out, Tensor x, float scale=1., bool causal=False) -> ()", &softmax);
}

// PyTorch ops of the activation family (src/ops/activation/): act is "gelu", "gelu_tanh" or "silu"; and SwiGLU +
// quantization.
#include "binding.hpp"
#include "kernelkit/ops/activation.hpp"

namespace kernelkit::torch_ext {
namespace {

Activation parse_activation(c10::string_view act) {
  if (act == "gelu") return Activation::gelu;
  if (act == "gelu_tanh") return Activation::gelu_tanh;
  if (act == "silu") return Activation::silu;
  TORCH_CHECK_VALUE(false, "kernelkit: activation '", std::string(act), "' is not one of gelu, gelu_tanh, silu");
  return Activation::silu;
}

void activation(at::Tensor& out, const at::Tensor& x, c10::string_view act) {
  const Call c("activation", x);
  const TensorView xv = c(x, "x"), outv = c(out, "out");
  c.check(kernelkit::activation(parse_activation(act), outv, xv, c.stream()));
}

void act_and_mul(at::Tensor& out, const at::Tensor& x, c10::string_view act) {
  const Call c("act_and_mul", x);
  const TensorView xv = c(x, "x"), outv = c(out, "out");
  c.check(kernelkit::gated_activation(parse_activation(act), outv, xv, c.stream()));
}

void act_mul(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, c10::string_view act) {
  const Call c("act_mul", a);
  const TensorView av = c(a, "a"), bv = c(b, "b"), outv = c(out, "out");
  c.check(kernelkit::gated_activation(parse_activation(act), outv, av, bv, c.stream()));
}

void silu_and_mul_quant(at::Tensor& q, at::Tensor& scales, const at::Tensor& x, bool static_scale) {
  const Call c("silu_and_mul_quant", x);
  const TensorView qv = c(q, "q"), sv = c(scales, "scales"), xv = c(x, "x");
  c.check(kernelkit::silu_and_mul_quant(qv, sv, xv, static_scale, c.stream()));
}

}  // namespace
}  // namespace kernelkit::torch_ext

KK_TORCH_OPS(m) {
  using namespace kernelkit::torch_ext;
  def_op(m, "activation(Tensor! out, Tensor x, str act) -> ()", &activation);
  def_op(m, "act_and_mul(Tensor! out, Tensor x, str act) -> ()", &act_and_mul);
  def_op(m, "act_mul(Tensor! out, Tensor a, Tensor b, str act) -> ()", &act_mul);
  // static_scale: scales is only read (one calibrated scale); it is declared written for the dynamic form.
  def_op(m, "silu_and_mul_quant(Tensor! q, Tensor! scales, Tensor x, bool static_scale=False) -> ()",
         &silu_and_mul_quant);
}

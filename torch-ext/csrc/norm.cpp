// PyTorch ops of the norm family (src/ops/norm/).
#include "binding.hpp"
#include "kernelkit/ops/norm.hpp"

namespace kernelkit::torch_ext {
namespace {

void rms_norm(at::Tensor& out, const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps,
              double weight_offset) {
  const Call c("rms_norm", x);
  const TensorView xv = c(x, "x"), outv = c(out, "out");
  const std::optional<TensorView> wv = c(weight, "weight");
  c.check(kernelkit::rms_norm(outv, xv, wv, c.f32(eps, "eps"), c.f32(weight_offset, "weight_offset"), c.stream()));
}

void fused_add_rms_norm(at::Tensor& x, at::Tensor& residual, const std::optional<at::Tensor>& weight, double eps,
                        double weight_offset) {
  const Call c("fused_add_rms_norm", x);
  const TensorView xv = c(x, "x"), rv = c(residual, "residual");
  const std::optional<TensorView> wv = c(weight, "weight");
  c.check(kernelkit::fused_add_rms_norm(xv, rv, wv, c.f32(eps, "eps"), c.f32(weight_offset, "weight_offset"),
                                        c.stream()));
}

void layer_norm(at::Tensor& out, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                const std::optional<at::Tensor>& bias, double eps) {
  const Call c("layer_norm", x);
  const TensorView xv = c(x, "x"), outv = c(out, "out");
  const std::optional<TensorView> wv = c(weight, "weight"), bv = c(bias, "bias");
  c.check(kernelkit::layer_norm(outv, xv, wv, bv, c.f32(eps, "eps"), c.stream()));
}

void ada_layer_norm(at::Tensor& out, const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps) {
  const Call c("ada_layer_norm", x);
  const TensorView xv = c(x, "x"), sv = c(scale, "scale"), hv = c(shift, "shift"), outv = c(out, "out");
  const std::optional<TensorView> wv = c(weight, "weight"), bv = c(bias, "bias");
  c.check(kernelkit::ada_layer_norm(outv, xv, sv, hv, wv, bv, c.f32(eps, "eps"), c.stream()));
}

void rms_norm_gelu(at::Tensor& out, const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  const Call c("rms_norm_gelu", x);
  const TensorView xv = c(x, "x"), outv = c(out, "out");
  const std::optional<TensorView> wv = c(weight, "weight");
  c.check(kernelkit::rms_norm_gelu(outv, xv, wv, c.f32(eps, "eps"), c.stream()));
}

void rms_norm_quant(at::Tensor& q, at::Tensor& scales, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                    double eps, bool static_scale, double weight_offset) {
  const Call c("rms_norm_quant", x);
  const TensorView qv = c(q, "q"), sv = c(scales, "scales"), xv = c(x, "x");
  const std::optional<TensorView> wv = c(weight, "weight");
  c.check(kernelkit::rms_norm_quant(qv, sv, xv, wv, c.f32(eps, "eps"), static_scale,
                                    c.f32(weight_offset, "weight_offset"), c.stream()));
}

void fused_add_rms_norm_quant(at::Tensor& q, at::Tensor& scales, const at::Tensor& x, at::Tensor& residual,
                              const std::optional<at::Tensor>& weight, double eps, bool static_scale,
                              double weight_offset) {
  const Call c("fused_add_rms_norm_quant", x);
  const TensorView qv = c(q, "q"), sv = c(scales, "scales"), xv = c(x, "x"), rv = c(residual, "residual");
  const std::optional<TensorView> wv = c(weight, "weight");
  c.check(kernelkit::fused_add_rms_norm_quant(qv, sv, xv, rv, wv, c.f32(eps, "eps"), static_scale,
                                              c.f32(weight_offset, "weight_offset"), c.stream()));
}

}  // namespace
}  // namespace kernelkit::torch_ext

KK_TORCH_OPS(m) {
  using namespace kernelkit::torch_ext;
  def_op(m, "rms_norm(Tensor! out, Tensor x, Tensor? weight, float eps, float weight_offset=0.) -> ()", &rms_norm);
  def_op(m, "fused_add_rms_norm(Tensor! x, Tensor! residual, Tensor? weight, float eps, float weight_offset=0.) -> ()",
         &fused_add_rms_norm);
  def_op(m, "layer_norm(Tensor! out, Tensor x, Tensor? weight, Tensor? bias, float eps) -> ()", &layer_norm);
  def_op(m, "ada_layer_norm(Tensor! out, Tensor x, Tensor scale, Tensor shift, Tensor? weight, Tensor? bias, "
            "float eps) -> ()",
         &ada_layer_norm);
  def_op(m, "rms_norm_gelu(Tensor! out, Tensor x, Tensor? weight, float eps) -> ()", &rms_norm_gelu);
  // static_scale: scales is only read (one calibrated scale); it is declared written for the dynamic form.
  def_op(m,
         "rms_norm_quant(Tensor! q, Tensor! scales, Tensor x, Tensor? weight, float eps, bool static_scale=False, "
         "float weight_offset=0.) -> ()",
         &rms_norm_quant);
  def_op(m,
         "fused_add_rms_norm_quant(Tensor! q, Tensor! scales, Tensor x, Tensor! residual, Tensor? weight, "
         "float eps, bool static_scale=False, float weight_offset=0.) -> ()",
         &fused_add_rms_norm_quant);
}

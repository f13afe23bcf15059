// PyTorch ops of the norm family (src/ops/norm/).
#include "binding.hpp"
#include "kernelkit/ops/norm.hpp"

namespace kernelkit::torch_ext {
namespace {

void rms_norm(at::Tensor& out, const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps,
              double weight_offset) {
  const c10::OptionalDeviceGuard guard(x.device());
  raise_if_error(kernelkit::rms_norm(view(out, "out"), view(x, "x"), view(weight, "weight"), static_cast<float>(eps),
                                     static_cast<float>(weight_offset), stream_for(x)));
}

void fused_add_rms_norm(at::Tensor& x, at::Tensor& residual, const std::optional<at::Tensor>& weight, double eps,
                        double weight_offset) {
  const c10::OptionalDeviceGuard guard(x.device());
  raise_if_error(kernelkit::fused_add_rms_norm(view(x, "x"), view(residual, "residual"), view(weight, "weight"),
                                               static_cast<float>(eps), static_cast<float>(weight_offset),
                                               stream_for(x)));
}

void layer_norm(at::Tensor& out, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                const std::optional<at::Tensor>& bias, double eps) {
  const c10::OptionalDeviceGuard guard(x.device());
  raise_if_error(kernelkit::layer_norm(view(out, "out"), view(x, "x"), view(weight, "weight"), view(bias, "bias"),
                                       static_cast<float>(eps), stream_for(x)));
}

void ada_layer_norm(at::Tensor& out, const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps) {
  const c10::OptionalDeviceGuard guard(x.device());
  raise_if_error(kernelkit::ada_layer_norm(view(out, "out"), view(x, "x"), view(scale, "scale"), view(shift, "shift"),
                                           view(weight, "weight"), view(bias, "bias"), static_cast<float>(eps),
                                           stream_for(x)));
}

void rms_norm_gelu(at::Tensor& out, const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  const c10::OptionalDeviceGuard guard(x.device());
  raise_if_error(kernelkit::rms_norm_gelu(view(out, "out"), view(x, "x"), view(weight, "weight"),
                                          static_cast<float>(eps), stream_for(x)));
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
}

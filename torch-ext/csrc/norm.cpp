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

void impls(torch::Library& m) {
  m.impl("rms_norm", &rms_norm);
  m.impl("fused_add_rms_norm", &fused_add_rms_norm);
  m.impl("layer_norm", &layer_norm);
  m.impl("ada_layer_norm", &ada_layer_norm);
  m.impl("rms_norm_gelu", &rms_norm_gelu);
}

}  // namespace
}  // namespace kernelkit::torch_ext

KK_TORCH_SCHEMAS(m) {
  m.def("rms_norm(Tensor! out, Tensor x, Tensor? weight, float eps, float weight_offset=0.) -> ()");
  m.def("fused_add_rms_norm(Tensor! x, Tensor! residual, Tensor? weight, float eps, float weight_offset=0.) -> ()");
  m.def("layer_norm(Tensor! out, Tensor x, Tensor? weight, Tensor? bias, float eps) -> ()");
  m.def("ada_layer_norm(Tensor! out, Tensor x, Tensor scale, Tensor shift, Tensor? weight, Tensor? bias, "
        "float eps) -> ()");
  m.def("rms_norm_gelu(Tensor! out, Tensor x, Tensor? weight, float eps) -> ()");
}

KK_TORCH_IMPLS(kernelkit::torch_ext::impls)

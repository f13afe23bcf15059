// PyTorch ops of quantization (src/ops/quant/): bits 8 -> qweight int8 [n, k], scales f32 [n]; bits 4 -> qweight uint8
// [n, k / 2] in the kernel layout, scales f32 [n, k / group].
#include "binding.hpp"
#include "kernelkit/ops/quant.hpp"

namespace kernelkit::torch_ext {
namespace {

void quantize_weight(at::Tensor& qweight, at::Tensor& scales, const at::Tensor& w, int64_t bits, int64_t group) {
  const c10::OptionalDeviceGuard guard(w.device());
  const TensorView qv = view(qweight, "qweight"), sv = view(scales, "scales"), wv = view(w, "w");
  raise_if_error(bits == 4 ? kernelkit::quantize_int4_groupwise(qv, sv, wv, static_cast<int>(group), stream_for(w))
                           : kernelkit::quantize_int8_per_channel(qv, sv, wv, stream_for(w)));
}

void linear_weight_only(at::Tensor& out, const at::Tensor& x, const at::Tensor& qweight, const at::Tensor& scales,
                        int64_t bits, int64_t group, const std::optional<at::Tensor>& bias) {
  const c10::OptionalDeviceGuard guard(x.device());
  raise_if_error(kernelkit::linear_weight_only(view(out, "out"), view(x, "x"), view(qweight, "qweight"),
                                               view(scales, "scales"), static_cast<int>(bits), static_cast<int>(group),
                                               view(bias, "bias"), stream_for(x)));
}

void quantize_per_token(at::Tensor& q, at::Tensor& scales, const at::Tensor& x) {
  const c10::OptionalDeviceGuard guard(x.device());
  raise_if_error(kernelkit::quantize_per_token_int8(view(q, "q"), view(scales, "scales"), view(x, "x"), stream_for(x)));
}

void linear_w8a8(at::Tensor& out, const at::Tensor& xq, const at::Tensor& x_scales, const at::Tensor& qweight,
                 const at::Tensor& w_scales, const std::optional<at::Tensor>& bias) {
  const c10::OptionalDeviceGuard guard(xq.device());
  raise_if_error(kernelkit::linear_w8a8(view(out, "out"), view(xq, "xq"), view(x_scales, "x_scales"),
                                        view(qweight, "qweight"), view(w_scales, "w_scales"), view(bias, "bias"),
                                        stream_for(xq)));
}

}  // namespace
}  // namespace kernelkit::torch_ext

KK_TORCH_OPS(m) {
  using namespace kernelkit::torch_ext;
  def_op(m, "quantize_weight(Tensor! qweight, Tensor(b!) scales, Tensor w, int bits, int group) -> ()",
         &quantize_weight);
  def_op(m, "linear_weight_only(Tensor! out, Tensor x, Tensor qweight, Tensor scales, int bits, int group, "
            "Tensor? bias) -> ()",
         &linear_weight_only);
  def_op(m, "quantize_per_token(Tensor! q, Tensor(b!) scales, Tensor x) -> ()", &quantize_per_token);
  def_op(m, "linear_w8a8(Tensor! out, Tensor xq, Tensor x_scales, Tensor qweight, Tensor w_scales, Tensor? bias) -> ()",
         &linear_w8a8);
}

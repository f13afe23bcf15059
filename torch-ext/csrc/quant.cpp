// PyTorch ops of quantization (src/ops/quant/): bits 8 -> qweight int8 [n, k], scales f32 [n]; bits 4 -> qweight uint8
// [n, k / 2] in the kernel layout, scales f32 [n, k / group]; the FP8 / INT8 span quantizers (per tensor, per token
// group, 128 x 128 blocks) take q's dtype as the op's.
#include "binding.hpp"
#include "kernelkit/ops/quant.hpp"

namespace kernelkit::torch_ext {
namespace {

void quantize_weight(at::Tensor& qweight, at::Tensor& scales, const at::Tensor& w, int64_t bits, int64_t group) {
  const Call c("quantize_weight", w);
  TORCH_CHECK_VALUE(bits == 8 || bits == 4, "kernelkit.quantize_weight: bits must be 8 or 4, got ", bits);
  TORCH_CHECK_VALUE(bits == 4 || group == 0, "kernelkit.quantize_weight: bits 8 is per output channel: group must be "
                    "0, got ", group);
  const TensorView wv = c(w, "w"), qv = c(qweight, "qweight", /*packed_int4=*/bits == 4), sv = c(scales, "scales");
  c.check(bits == 4 ? kernelkit::quantize_int4_groupwise(qv, sv, wv, c.i32(group, "group"), c.stream())
                    : kernelkit::quantize_int8_per_channel(qv, sv, wv, c.stream()));
}

void linear_weight_only(at::Tensor& out, const at::Tensor& x, const at::Tensor& qweight, const at::Tensor& scales,
                        int64_t bits, int64_t group, const std::optional<at::Tensor>& bias,
                        const std::optional<at::Tensor>& zeros, const std::optional<at::Tensor>& perm) {
  const Call c("linear_weight_only", x);
  const TensorView xv = c(x, "x"), qv = c(qweight, "qweight", /*packed_int4=*/true), sv = c(scales, "scales"),
                   outv = c(out, "out");
  c.check(kernelkit::linear_weight_only(outv, xv, qv, sv, c.i32(bits, "bits"), c.i32(group, "group"), c(bias, "bias"),
                                        c.stream(), false, c(zeros, "zeros"), c(perm, "perm")));
}

void quantize_per_token(at::Tensor& q, at::Tensor& scales, const at::Tensor& x) {
  const Call c("quantize_per_token", x);
  const TensorView xv = c(x, "x"), qv = c(q, "q"), sv = c(scales, "scales");
  c.check(kernelkit::quantize_per_token_int8(qv, sv, xv, c.stream()));
}

void quantize_per_token_fp8(at::Tensor& q, at::Tensor& scales, const at::Tensor& x) {
  const Call c("quantize_per_token_fp8", x);
  const TensorView xv = c(x, "x"), qv = c(q, "q"), sv = c(scales, "scales");
  c.check(kernelkit::quantize_per_token_fp8(qv, sv, xv, c.stream()));
}

// The span quantizers: q's dtype (float8_e4m3fn or int8) picks the FP8 or the INT8 op.
void quantize_per_tensor(at::Tensor& q, at::Tensor& scale, const at::Tensor& x, bool static_scale) {
  const Call c("quantize_per_tensor", x);
  const TensorView xv = c(x, "x"), qv = c(q, "q"), sv = c(scale, "scale");
  c.check(qv.dtype == DType::f8e4m3 ? kernelkit::quantize_per_tensor_fp8(qv, sv, xv, static_scale, c.stream())
                                    : kernelkit::quantize_per_tensor_int8(qv, sv, xv, static_scale, c.stream()));
}

void quantize_per_token_group(at::Tensor& q, at::Tensor& scales, const at::Tensor& x, int64_t group,
                              bool column_major_scales) {
  const Call c("quantize_per_token_group", x);
  const TensorView xv = c(x, "x"), qv = c(q, "q"), sv = c(scales, "scales");
  const int g = c.i32(group, "group");
  c.check(qv.dtype == DType::f8e4m3
              ? kernelkit::quantize_per_token_group_fp8(qv, sv, xv, g, column_major_scales, c.stream())
              : kernelkit::quantize_per_token_group_int8(qv, sv, xv, g, column_major_scales, c.stream()));
}

void quantize_blockwise(at::Tensor& qweight, at::Tensor& scales, const at::Tensor& w) {
  const Call c("quantize_blockwise", w);
  const TensorView wv = c(w, "w"), qv = c(qweight, "qweight"), sv = c(scales, "scales");
  c.check(qv.dtype == DType::f8e4m3 ? kernelkit::quantize_blockwise_fp8(qv, sv, wv, c.stream())
                                    : kernelkit::quantize_blockwise_int8(qv, sv, wv, c.stream()));
}

void linear_w8a8(at::Tensor& out, const at::Tensor& xq, const at::Tensor& x_scales, const at::Tensor& qweight,
                 const at::Tensor& w_scales, const std::optional<at::Tensor>& bias) {
  const Call c("linear_w8a8", xq);
  const TensorView xv = c(xq, "xq"), xs = c(x_scales, "x_scales"), qv = c(qweight, "qweight"),
                   ws = c(w_scales, "w_scales"), outv = c(out, "out");
  c.check(kernelkit::linear_w8a8(outv, xv, xs, qv, ws, c(bias, "bias"), c.stream()));
}

void linear_fp8(at::Tensor& out, const at::Tensor& xq, const at::Tensor& x_scales, const at::Tensor& qweight,
                const at::Tensor& w_scales, const std::optional<at::Tensor>& bias, bool fast_accumulation) {
  const Call c("linear_fp8", xq);
  const TensorView xv = c(xq, "xq"), xs = c(x_scales, "x_scales"), qv = c(qweight, "qweight"),
                   ws = c(w_scales, "w_scales"), outv = c(out, "out");
  c.check(kernelkit::linear_fp8(outv, xv, xs, qv, ws, c(bias, "bias"), c.stream(), fast_accumulation));
}

}  // namespace
}  // namespace kernelkit::torch_ext

KK_TORCH_OPS(m) {
  using namespace kernelkit::torch_ext;
  def_op(m, "quantize_weight(Tensor! qweight, Tensor(b!) scales, Tensor w, int bits, int group) -> ()",
         &quantize_weight);
  def_op(m,
         "linear_weight_only(Tensor! out, Tensor x, Tensor qweight, Tensor scales, int bits, int group, "
         "Tensor? bias, Tensor? zeros=None, Tensor? perm=None) -> ()",
         &linear_weight_only);
  def_op(m, "quantize_per_token(Tensor! q, Tensor(b!) scales, Tensor x) -> ()", &quantize_per_token);
  def_op(m, "quantize_per_token_fp8(Tensor! q, Tensor(b!) scales, Tensor x) -> ()", &quantize_per_token_fp8);
  // static_scale: scale is only read (one calibrated scale); it is declared written for the dynamic form.
  def_op(m, "quantize_per_tensor(Tensor! q, Tensor(b!) scale, Tensor x, bool static_scale=False) -> ()",
         &quantize_per_tensor);
  def_op(m,
         "quantize_per_token_group(Tensor! q, Tensor(b!) scales, Tensor x, int group=128, "
         "bool column_major_scales=False) -> ()",
         &quantize_per_token_group);
  def_op(m, "quantize_blockwise(Tensor! qweight, Tensor(b!) scales, Tensor w) -> ()", &quantize_blockwise);
  def_op(m, "linear_w8a8(Tensor! out, Tensor xq, Tensor x_scales, Tensor qweight, Tensor w_scales, Tensor? bias) -> ()",
         &linear_w8a8);
  def_op(m,
         "linear_fp8(Tensor! out, Tensor xq, Tensor x_scales, Tensor qweight, Tensor w_scales, Tensor? bias, "
         "bool fast_accumulation) -> ()",
         &linear_fp8);
}

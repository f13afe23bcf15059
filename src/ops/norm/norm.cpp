// Public norm ops: turn TensorViews into one RowNormArgs, check every argument (naming it and the expectation), then
// run the CPU reference or the CUDA kernels depending on where the tensors live.
#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "runtime/op_args.hpp"
#include "runtime/overlap.hpp"
#include "runtime/text.hpp"
#include "ops/norm/norm.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/runtime.hpp"

namespace kernelkit {
namespace detail {
namespace {

Status run(const RowNormArgs& a, Stream stream) {
  return run_row_op(a, stream, validate_row_norm, row_norm_reference, row_norm_cuda);
}

}  // namespace

Status validate_row_norm(const RowNormArgs& a, const DeviceProfile* profile) {
  const std::string name(op_info(a.op).name);
  KK_RETURN_IF_ERROR(check_float_dtype(name, a.dtype, a.device, nullptr));
  if (a.hidden <= 0 || a.hidden > INT32_MAX)
    return invalid_argument(name + ": hidden size (last dim of x) must be in [1, 2^31), got " +
                            std::to_string(a.hidden));
  if (!std::isfinite(a.eps) || a.eps <= 0.0f)
    return invalid_argument(name + ": eps must be finite and > 0, got " + number(a.eps));
  if (!std::isfinite(a.weight_offset))
    return invalid_argument(name + ": weight_offset must be finite, got " + number(a.weight_offset));
  const auto qtype = op_quant_out_dtype(a.op);
  if (a.rows > 0 && (a.x == nullptr || (qtype ? a.q == nullptr || a.q_scales == nullptr : a.out == nullptr) ||
                     (a.residual_add && a.residual == nullptr)))
    return invalid_argument(name + ": x, " + (qtype ? "q, scales" : "out") + (a.residual_add ? ", residual" : "") +
                            " must not be null");
  if ((op_info(a.op).dtypes & dtype_bit(a.dtype)) == 0)
    return invalid_argument(name + ": x dtype " + dt(a.dtype) + " is not supported (expected f16 or bf16)");
  KK_RETURN_IF_ERROR(check_float_dtype(name, a.dtype, a.device, profile));
  if (qtype && profile && a.device.type == DeviceType::cuda && !profile->supports(*qtype))
    return unsupported(name + ": q dtype " + dt(*qtype) + " " + profile->dtype_refusal(*qtype));
  return Status::Ok();
}

}  // namespace detail

using Builder = detail::Builder<detail::RowNormArgs>;
using detail::check_no_overlap;
using detail::NormType;
using detail::RowNormArgs;

Status rms_norm(const TensorView& out, const TensorView& x, const std::optional<TensorView>& weight, float eps,
                float weight_offset, Stream stream) {
  RowNormArgs a;
  Builder b(OpId::rms_norm, &a);
  KK_RETURN_IF_ERROR(b.activation(x, "x", &a.x_stride, false));
  KK_RETURN_IF_ERROR(b.activation(out, "out", &a.out_stride, true));
  KK_RETURN_IF_ERROR(b.vector(weight, "weight", &a.weight));
  KK_RETURN_IF_ERROR(check_no_overlap("rms_norm", {{&out, "out"}}, {{&x, "x"}, {weight ? &*weight : nullptr, "weight"}},
                                      {{"out", "x"}}));
  a.x = x.data;
  a.out = out.data;
  a.eps = eps;
  a.weight_offset = weight_offset;
  return detail::run(a, stream);
}

Status fused_add_rms_norm(const TensorView& x, const TensorView& residual, const std::optional<TensorView>& weight,
                          float eps, float weight_offset, Stream stream) {
  RowNormArgs a;
  Builder b(OpId::fused_add_rms_norm, &a);
  KK_RETURN_IF_ERROR(b.activation(x, "x", &a.x_stride, true));
  KK_RETURN_IF_ERROR(b.activation(residual, "residual", &a.residual_stride, true));
  KK_RETURN_IF_ERROR(b.vector(weight, "weight", &a.weight));
  KK_RETURN_IF_ERROR(check_no_overlap("fused_add_rms_norm", {{&x, "x"}, {&residual, "residual"}},
                                      {{weight ? &*weight : nullptr, "weight"}}));
  a.residual_add = true;
  a.x = x.data;
  a.out = x.data;  // in place: x is overwritten with the normalized residual
  a.out_stride = a.x_stride;
  a.residual = residual.data;
  a.eps = eps;
  a.weight_offset = weight_offset;
  return detail::run(a, stream);
}

namespace {

// Both norm + quantization ops; residual null: rms_norm_quant. The op's id follows q's dtype.
Status norm_quant(const char* name, OpId int8, OpId fp8, const TensorView& q, const TensorView& scales,
                  const TensorView& x, const TensorView* residual, const std::optional<TensorView>& weight, float eps,
                  bool static_scale, float weight_offset, Stream stream) {
  RowNormArgs a;
  Builder b(q.dtype == DType::f8e4m3 ? fp8 : int8, &a);
  KK_RETURN_IF_ERROR(b.activation(x, "x", &a.x_stride, false));
  if (residual) KK_RETURN_IF_ERROR(b.activation(*residual, "residual", &a.residual_stride, true));
  KK_RETURN_IF_ERROR(b.vector(weight, "weight", &a.weight));
  KK_RETURN_IF_ERROR(detail::quant_outputs(name, q, scales, x, static_scale, &a));
  KK_RETURN_IF_ERROR(check_no_overlap(name, {{residual, "residual"}, {&q, "q"}, {&scales, "scales"}},
                                      {{&x, "x"}, {weight ? &*weight : nullptr, "weight"}}));
  a.residual_add = residual != nullptr;
  a.x = x.data;
  a.residual = residual ? residual->data : nullptr;
  a.eps = eps;
  a.weight_offset = weight_offset;
  return detail::run(a, stream);
}

}  // namespace

Status rms_norm_quant(const TensorView& q, const TensorView& scales, const TensorView& x,
                      const std::optional<TensorView>& weight, float eps, bool static_scale, float weight_offset,
                      Stream stream) {
  return norm_quant("rms_norm_quant", OpId::rms_norm_quant_int8, OpId::rms_norm_quant_fp8, q, scales, x, nullptr,
                    weight, eps, static_scale, weight_offset, stream);
}

Status fused_add_rms_norm_quant(const TensorView& q, const TensorView& scales, const TensorView& x,
                                const TensorView& residual, const std::optional<TensorView>& weight, float eps,
                                bool static_scale, float weight_offset, Stream stream) {
  return norm_quant("fused_add_rms_norm_quant", OpId::fused_add_rms_norm_quant_int8, OpId::fused_add_rms_norm_quant_fp8,
                    q, scales, x, &residual, weight, eps, static_scale, weight_offset, stream);
}

Status layer_norm(const TensorView& out, const TensorView& x, const std::optional<TensorView>& weight,
                  const std::optional<TensorView>& bias, float eps, Stream stream) {
  RowNormArgs a;
  Builder b(OpId::layer_norm, &a);
  KK_RETURN_IF_ERROR(b.activation(x, "x", &a.x_stride, false));
  KK_RETURN_IF_ERROR(b.activation(out, "out", &a.out_stride, true));
  KK_RETURN_IF_ERROR(b.vector(weight, "weight", &a.weight));
  KK_RETURN_IF_ERROR(b.vector(bias, "bias", &a.bias));
  KK_RETURN_IF_ERROR(check_no_overlap(
      "layer_norm", {{&out, "out"}},
      {{&x, "x"}, {weight ? &*weight : nullptr, "weight"}, {bias ? &*bias : nullptr, "bias"}}, {{"out", "x"}}));
  a.norm = NormType::layer;
  a.x = x.data;
  a.out = out.data;
  a.eps = eps;
  return detail::run(a, stream);
}

Status ada_layer_norm(const TensorView& out, const TensorView& x, const TensorView& scale, const TensorView& shift,
                      const std::optional<TensorView>& weight, const std::optional<TensorView>& bias, float eps,
                      Stream stream) {
  RowNormArgs a;
  Builder b(OpId::ada_layer_norm, &a);
  if (x.ndim != 3) return b.err("x", "must have shape [batch, seq, hidden], got " + x.shape_string());
  KK_RETURN_IF_ERROR(b.activation(x, "x", &a.x_stride, false));
  KK_RETURN_IF_ERROR(b.activation(out, "out", &a.out_stride, true));
  KK_RETURN_IF_ERROR(b.vector(weight, "weight", &a.weight));
  KK_RETURN_IF_ERROR(b.vector(bias, "bias", &a.bias));
  int64_t shift_stride = 0;
  KK_RETURN_IF_ERROR(b.per_batch(scale, "scale", x.shape[0], &a.scale, &a.mod_stride));
  KK_RETURN_IF_ERROR(b.per_batch(shift, "shift", x.shape[0], &a.shift, &shift_stride));
  if (shift_stride != a.mod_stride)
    return b.err("shift", "row stride " + std::to_string(shift_stride) + " must equal scale's row stride " +
                              std::to_string(a.mod_stride));
  KK_RETURN_IF_ERROR(check_no_overlap("ada_layer_norm", {{&out, "out"}},
                                      {{&x, "x"}, {&scale, "scale"}, {&shift, "shift"},
                                       {weight ? &*weight : nullptr, "weight"}, {bias ? &*bias : nullptr, "bias"}},
                                      {{"out", "x"}}));
  a.norm = NormType::layer;
  a.batch = x.shape[0];
  a.rows_per_batch = std::max<int64_t>(1, x.shape[1]);
  a.x = x.data;
  a.out = out.data;
  a.eps = eps;
  return detail::run(a, stream);
}

Status rms_norm_gelu(const TensorView& out, const TensorView& x, const std::optional<TensorView>& weight, float eps,
                     Stream stream) {
  RowNormArgs a;
  Builder b(OpId::rms_norm_gelu, &a);
  KK_RETURN_IF_ERROR(b.activation(x, "x", &a.x_stride, false));
  KK_RETURN_IF_ERROR(b.activation(out, "out", &a.out_stride, true));
  KK_RETURN_IF_ERROR(b.vector(weight, "weight", &a.weight));
  KK_RETURN_IF_ERROR(check_no_overlap("rms_norm_gelu", {{&out, "out"}},
                                      {{&x, "x"}, {weight ? &*weight : nullptr, "weight"}}, {{"out", "x"}}));
  a.gelu = true;
  a.x = x.data;
  a.out = out.data;
  a.eps = eps;
  return detail::run(a, stream);
}

}  // namespace kernelkit

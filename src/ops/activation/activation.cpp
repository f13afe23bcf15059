// Public activation ops: TensorViews -> one ElementwiseArgs, checked by the shared row-op builder, then the CPU
// reference or the CUDA kernels.
#include "ops/activation/activation.hpp"

#include "runtime/op_args.hpp"
#include "runtime/overlap.hpp"

namespace kernelkit {
namespace detail {
namespace {

OpId op_for(Activation act, bool gated, bool two_tensors) {
  if (two_tensors) return OpId::geglu;
  switch (act) {
    case Activation::gelu: return gated ? OpId::gelu_and_mul : OpId::gelu;
    case Activation::gelu_tanh: return gated ? OpId::gelu_tanh_and_mul : OpId::gelu_tanh;
    case Activation::silu: return gated ? OpId::silu_and_mul : OpId::silu;
  }
  return OpId::silu;
}

// The multiplier of a gated activation over one [..., 2d] tensor: the second half of each row, at the same row
// stride, d elements further. Its alignment is the pointer's.
void second_half(const TensorView& x, ElementwiseArgs* a) {
  a->b = x.data ? static_cast<const char*>(x.data) + a->hidden * static_cast<int64_t>(dtype_size(a->dtype)) : nullptr;
  a->b_stride = a->a_stride;
  a->align_bytes = std::min(a->align_bytes, pow2_align(reinterpret_cast<uintptr_t>(a->b)));
}

Status run(const ElementwiseArgs& a, Stream stream) {
  return run_row_op(a, stream, validate_elementwise, elementwise_reference, elementwise_cuda);
}

}  // namespace

Status validate_elementwise(const ElementwiseArgs& a, const DeviceProfile* profile) {
  const std::string name(op_info(a.op).name);
  KK_RETURN_IF_ERROR(check_float_dtype(name, a.dtype, a.device, profile));
  const auto qtype = op_quant_out_dtype(a.op);
  if (a.rows > 0 && ((qtype ? a.q == nullptr || a.q_scales == nullptr : a.out == nullptr) || a.a == nullptr ||
                     (a.gated && a.b == nullptr)))
    return invalid_argument(name + ": input and output pointers must not be null");
  if ((op_info(a.op).dtypes & dtype_bit(a.dtype)) == 0)
    return invalid_argument(name + ": x dtype " + dt(a.dtype) + " is not supported (expected f16 or bf16)");
  if (qtype && profile && a.device.type == DeviceType::cuda && !profile->supports(*qtype))
    return unsupported(name + ": q dtype " + dt(*qtype) + " " + profile->dtype_refusal(*qtype));
  return Status::Ok();
}

}  // namespace detail

using detail::ElementwiseArgs;

Status activation(Activation act, const TensorView& out, const TensorView& x, Stream stream) {
  ElementwiseArgs a;
  detail::Builder<ElementwiseArgs> b(detail::op_for(act, false, false), &a);
  KK_RETURN_IF_ERROR(b.activation(x, "x", &a.a_stride, false));
  KK_RETURN_IF_ERROR(b.activation(out, "out", &a.out_stride, true));
  KK_RETURN_IF_ERROR(detail::check_no_overlap(std::string(op_info(a.op).name), {{&out, "out"}}, {{&x, "x"}},
                                              {{"out", "x"}}));
  a.act = act;
  a.a = x.data;
  a.out = out.data;
  return detail::run(a, stream);
}

Status gated_activation(Activation act, const TensorView& out, const TensorView& x, Stream stream) {
  ElementwiseArgs a;
  detail::Builder<ElementwiseArgs> b(detail::op_for(act, true, false), &a);
  KK_RETURN_IF_ERROR(b.activation(x, "x", &a.a_stride, false, /*last_dim_multiple=*/2));
  KK_RETURN_IF_ERROR(b.activation(out, "out", &a.out_stride, true));
  KK_RETURN_IF_ERROR(detail::check_no_overlap(std::string(op_info(a.op).name), {{&out, "out"}}, {{&x, "x"}}));
  a.act = act;
  a.gated = true;
  a.a = x.data;
  detail::second_half(x, &a);
  a.out = out.data;
  return detail::run(a, stream);
}

Status gated_activation(Activation act, const TensorView& out, const TensorView& x, const TensorView& y,
                        Stream stream) {
  ElementwiseArgs a;
  detail::Builder<ElementwiseArgs> b(act == Activation::gelu ? OpId::geglu : detail::op_for(act, true, false), &a);
  KK_RETURN_IF_ERROR(b.activation(x, "a", &a.a_stride, false));
  KK_RETURN_IF_ERROR(b.activation(y, "b", &a.b_stride, false));
  KK_RETURN_IF_ERROR(b.activation(out, "out", &a.out_stride, true));
  KK_RETURN_IF_ERROR(detail::check_no_overlap(std::string(op_info(a.op).name), {{&out, "out"}}, {{&x, "a"}, {&y, "b"}},
                                              {{"out", "a"}, {"out", "b"}}));
  a.act = act;
  a.gated = true;
  a.a = x.data;
  a.b = y.data;
  a.out = out.data;
  return detail::run(a, stream);
}

Status silu_and_mul_quant(const TensorView& q, const TensorView& scales, const TensorView& x, bool static_scale,
                          Stream stream) {
  ElementwiseArgs a;
  detail::Builder<ElementwiseArgs> b(
      q.dtype == DType::f8e4m3 ? OpId::silu_and_mul_quant_fp8 : OpId::silu_and_mul_quant_int8, &a);
  KK_RETURN_IF_ERROR(b.activation(x, "x", &a.a_stride, false, /*last_dim_multiple=*/2));
  KK_RETURN_IF_ERROR(detail::quant_outputs("silu_and_mul_quant", q, scales, x, static_scale, &a));
  KK_RETURN_IF_ERROR(detail::check_no_overlap("silu_and_mul_quant", {{&q, "q"}, {&scales, "scales"}}, {{&x, "x"}}));
  a.act = Activation::silu;
  a.gated = true;
  a.a = x.data;
  detail::second_half(x, &a);
  return detail::run(a, stream);
}

}  // namespace kernelkit

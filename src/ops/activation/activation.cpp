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

Status run(const ElementwiseArgs& a, Stream stream) {
  return run_row_op(a, stream, validate_elementwise, elementwise_reference, elementwise_cuda);
}

}  // namespace

Status validate_elementwise(const ElementwiseArgs& a, const DeviceProfile* profile) {
  const std::string name(op_info(a.op).name);
  KK_RETURN_IF_ERROR(check_float_dtype(name, a.dtype, a.device, profile));
  if (a.rows > 0 && (a.out == nullptr || a.a == nullptr || (a.gated && a.b == nullptr)))
    return invalid_argument(name + ": input and output pointers must not be null");
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
  // The second half of each row: same row stride, d elements further. Its alignment is the pointer's.
  a.b = x.data ? static_cast<const char*>(x.data) + a.hidden * static_cast<int64_t>(dtype_size(a.dtype)) : nullptr;
  a.b_stride = a.a_stride;
  a.align_bytes = std::min(a.align_bytes, detail::pow2_align(reinterpret_cast<uintptr_t>(a.b)));
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

}  // namespace kernelkit

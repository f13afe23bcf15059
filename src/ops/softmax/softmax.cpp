// softmax / causal_softmax: TensorViews -> SoftmaxArgs through the shared row-op builder, then reference or CUDA.
#include "ops/softmax/softmax.hpp"

#include <cmath>

#include "runtime/op_args.hpp"
#include "runtime/overlap.hpp"
#include "runtime/text.hpp"
#include "kernelkit/ops.hpp"

namespace kernelkit {
namespace detail {
namespace {

Status run(const SoftmaxArgs& a, Stream stream) {
  return run_row_op(a, stream, validate_softmax, softmax_reference, softmax_cuda);
}

Status build(OpId op, const TensorView& out, const TensorView& x, float scale, SoftmaxArgs* a) {
  Builder<SoftmaxArgs> b(op, a);
  KK_RETURN_IF_ERROR(b.activation(x, "x", &a->x_stride, false));
  KK_RETURN_IF_ERROR(b.activation(out, "out", &a->out_stride, true));
  a->x = x.data;
  a->out = out.data;
  a->scale = scale;
  return Status::Ok();
}

}  // namespace

Status validate_softmax(const SoftmaxArgs& a, const DeviceProfile* profile) {
  const std::string name(op_info(a.op).name);
  KK_RETURN_IF_ERROR(check_float_dtype(name, a.dtype, a.device, profile));
  if (!std::isfinite(a.scale) || a.scale == 0.0f)
    return invalid_argument(name + ": scale must be finite and non-zero, got " + number(a.scale));
  return Status::Ok();
}

}  // namespace detail

Status softmax(const TensorView& out, const TensorView& x, float scale, Stream stream) {
  detail::SoftmaxArgs a;
  KK_RETURN_IF_ERROR(detail::build(OpId::softmax, out, x, scale, &a));
  KK_RETURN_IF_ERROR(detail::check_no_overlap("softmax", {{&out, "out"}}, {{&x, "x"}}, {{"out", "x"}}));
  return detail::run(a, stream);
}

Status causal_softmax(const TensorView& out, const TensorView& x, float scale, Stream stream) {
  detail::SoftmaxArgs a;
  if (x.ndim < 2)
    return invalid_argument("causal_softmax: x must have shape [..., s_q, s_k], got " + x.shape_string());
  KK_RETURN_IF_ERROR(detail::build(OpId::causal_softmax, out, x, scale, &a));
  KK_RETURN_IF_ERROR(detail::check_no_overlap("causal_softmax", {{&out, "out"}}, {{&x, "x"}}, {{"out", "x"}}));
  a.causal = true;
  a.s_q = std::max<int64_t>(1, x.size(-2));
  return detail::run(a, stream);
}

}  // namespace kernelkit

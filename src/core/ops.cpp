// Public norm ops: turn TensorViews into one RowNormArgs, check every argument (naming it and the expectation), then
// run the CPU reference or the CUDA kernels depending on where the tensors live.
#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "core/row_norm.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/runtime.hpp"

namespace kernelkit {
namespace detail {
namespace {

std::string dt(DType t) { return std::string(dtype_name(t)); }

// Largest power of two (<= 16) dividing v.
int pow2_align(uint64_t v) { return v == 0 ? 16 : static_cast<int>(std::min<uint64_t>(16, v & (~v + 1))); }

class Builder {
 public:
  Builder(OpId op, RowNormArgs* a) : op_(op), name_(op_info(op).name), a_(a) { a_->op = op; }

  // The activation tensor `x` fixes dtype, device, rows and hidden; leading dims must collapse to one row stride.
  Status activation(const TensorView& t, const char* arg, int64_t* row_stride, bool written) {
    if (first_) {
      first_ = false;
      a_->dtype = t.dtype;
      a_->device = t.device;
      if (t.ndim < 1) return err(arg, "must have at least 1 dim, got 0");
      a_->hidden = t.size(-1);
      a_->rows = t.numel() / std::max<int64_t>(1, a_->hidden);
      if (a_->hidden == 0) return err(arg, "hidden size (last dim) must be > 0, got 0");
      shape_ = t;
    } else {
      KK_RETURN_IF_ERROR(same_dtype_device(t, arg));
      if (t.ndim != shape_.ndim || t.shape != shape_.shape)
        return err(arg, "shape " + t.shape_string() + " must equal x shape " + shape_.shape_string());
    }
    if (t.size(-1) > 1 && t.stride(-1) != 1)
      return err(arg, "must have a contiguous last dim (stride 1), got stride " + std::to_string(t.stride(-1)));
    // Collapse the leading dims: each must step by the next one's stride times its size (size-1 dims are free).
    int64_t stride = a_->hidden, expect = -1;
    for (int d = t.ndim - 2; d >= 0; --d) {
      if (t.shape[d] == 1) continue;
      if (expect < 0) stride = t.strides[d];
      else if (t.strides[d] != expect)
        return err(arg, "leading dims must collapse to one row stride; dim " + std::to_string(d) + " has stride " +
                            std::to_string(t.strides[d]) + ", expected " + std::to_string(expect));
      expect = t.strides[d] * t.shape[d];
    }
    if (written && a_->rows > 1 && stride < a_->hidden)
      return err(arg, "rows overlap (row stride " + std::to_string(stride) + " < hidden " +
                          std::to_string(a_->hidden) + ")");
    if (t.data == nullptr && a_->rows > 0) return err(arg, "is a null pointer");
    *row_stride = stride;
    align(t.data, stride);
    return Status::Ok();
  }

  // A [hidden] parameter (weight, bias), or none.
  Status vector(const std::optional<TensorView>& t, const char* arg, const void** ptr) {
    *ptr = nullptr;
    if (!t) return Status::Ok();
    KK_RETURN_IF_ERROR(same_dtype_device(*t, arg));
    if (t->ndim != 1 || t->shape[0] != a_->hidden)
      return err(arg, "must have shape [hidden=" + std::to_string(a_->hidden) + "], got " + t->shape_string());
    if (a_->hidden > 1 && t->strides[0] != 1)
      return err(arg, "must be contiguous (stride 1), got stride " + std::to_string(t->strides[0]));
    if (t->data == nullptr) return err(arg, "is a null pointer");
    *ptr = t->data;
    align(t->data, 0);
    return Status::Ok();
  }

  // A [batch, hidden] per-batch parameter (ada scale/shift).
  Status per_batch(const TensorView& t, const char* arg, int64_t batch, const void** ptr, int64_t* stride) {
    KK_RETURN_IF_ERROR(same_dtype_device(t, arg));
    if (t.ndim != 2 || t.shape[0] != batch || t.shape[1] != a_->hidden)
      return err(arg, "must have shape [batch=" + std::to_string(batch) + ", hidden=" + std::to_string(a_->hidden) +
                          "], got " + t.shape_string());
    if (a_->hidden > 1 && t.strides[1] != 1)
      return err(arg, "must have a contiguous last dim (stride 1), got stride " + std::to_string(t.strides[1]));
    if (t.data == nullptr) return err(arg, "is a null pointer");
    *ptr = t.data;
    *stride = batch > 1 ? t.strides[0] : a_->hidden;
    align(t.data, *stride);
    return Status::Ok();
  }

  Status err(const char* arg, const std::string& what) const {
    return invalid_argument(std::string(name_) + ": " + arg + " " + what);
  }

 private:
  Status same_dtype_device(const TensorView& t, const char* arg) const {
    if (t.dtype != a_->dtype) return err(arg, "dtype " + dt(t.dtype) + " does not match x dtype " + dt(a_->dtype));
    if (!(t.device == a_->device))
      return err(arg, "is on " + to_string(t.device) + " but x is on " + to_string(a_->device) +
                          " (all tensors of one call must be on one device)");
    return Status::Ok();
  }
  void align(const void* p, int64_t stride_elems) {
    const uint64_t bytes = static_cast<uint64_t>(stride_elems) * dtype_size(a_->dtype);
    a_->align_bytes = std::min({a_->align_bytes, pow2_align(reinterpret_cast<uintptr_t>(p)), pow2_align(bytes)});
  }

  OpId op_;
  std::string_view name_;
  RowNormArgs* a_;
  bool first_ = true;
  TensorView shape_;
};

Status run(RowNormArgs& a, Stream stream) {
  if (a.device.type == DeviceType::cpu) {
    KK_RETURN_IF_ERROR(validate_row_norm(a, nullptr));
    return a.rows == 0 ? Status::Ok() : row_norm_reference(a);
  }
  // CUDA tensors: check dtype support against the profile the launch will use. A KERNELKIT_PROFILE override needs no
  // device, so the refusal of bf16 on a T4 profile is the same with or without a GPU.
  std::optional<DeviceProfile> forced;
  KK_RETURN_IF_ERROR(profile_override(&forced));
  if (forced) KK_RETURN_IF_ERROR(validate_row_norm(a, &*forced));
  const std::string name(op_info(a.op).name);
  const int devices = cuda_device_count();
  if (devices == 0)
    return Status(StatusCode::no_device, name + ": tensors are on " + to_string(a.device) +
                                             " but no CUDA device is available" +
                                             (built_with_cuda() ? "" : " (kernelkit was built without CUDA)"));
  if (a.device.index < 0 || a.device.index >= devices)
    return invalid_argument(name + ": tensors are on " + to_string(a.device) + " but this machine has " +
                            std::to_string(devices) + " CUDA device(s)");
  DeviceProfile prof;
  if (forced) prof = *forced;
  else KK_RETURN_IF_ERROR(active_profile(a.device.index, &prof));
  KK_RETURN_IF_ERROR(validate_row_norm(a, &prof));
  if (a.rows == 0) return Status::Ok();
  return row_norm_cuda(a, stream);
}

}  // namespace

Status validate_row_norm(const RowNormArgs& a, const DeviceProfile* profile) {
  const std::string name(op_info(a.op).name);
  if (!is_floating(a.dtype))
    return invalid_argument(name + ": x dtype " + dt(a.dtype) + " is not supported (expected f32, f16 or bf16)");
  if (a.hidden <= 0 || a.hidden > INT32_MAX)
    return invalid_argument(name + ": hidden size (last dim of x) must be in [1, 2^31), got " +
                            std::to_string(a.hidden));
  if (!std::isfinite(a.eps) || a.eps <= 0.0f)
    return invalid_argument(name + ": eps must be finite and > 0, got " + std::to_string(a.eps));
  if (!std::isfinite(a.weight_offset))
    return invalid_argument(name + ": weight_offset must be finite, got " + std::to_string(a.weight_offset));
  if (a.rows > 0 && (a.x == nullptr || a.out == nullptr || (a.residual_add && a.residual == nullptr)))
    return invalid_argument(name + ": x, out" + (a.residual_add ? ", residual" : "") + " must not be null");
  if (profile && a.device.type == DeviceType::cuda && !profile->supports(a.dtype))
    return unsupported(name + ": x dtype " + dt(a.dtype) + " is not supported on profile " + profile->key + " (sm_" +
                       std::to_string(profile->sm) + " has no bf16); use f16");
  return Status::Ok();
}

}  // namespace detail

using detail::Builder;
using detail::NormType;
using detail::RowNormArgs;

Status rms_norm(const TensorView& out, const TensorView& x, const std::optional<TensorView>& weight, float eps,
                float weight_offset, Stream stream) {
  RowNormArgs a;
  Builder b(OpId::rms_norm, &a);
  KK_RETURN_IF_ERROR(b.activation(x, "x", &a.x_stride, false));
  KK_RETURN_IF_ERROR(b.activation(out, "out", &a.out_stride, true));
  KK_RETURN_IF_ERROR(b.vector(weight, "weight", &a.weight));
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
  a.residual_add = true;
  a.x = x.data;
  a.out = x.data;  // in place: x is overwritten with the normalized residual
  a.out_stride = a.x_stride;
  a.residual = residual.data;
  a.eps = eps;
  a.weight_offset = weight_offset;
  return detail::run(a, stream);
}

Status layer_norm(const TensorView& out, const TensorView& x, const std::optional<TensorView>& weight,
                  const std::optional<TensorView>& bias, float eps, Stream stream) {
  RowNormArgs a;
  Builder b(OpId::layer_norm, &a);
  KK_RETURN_IF_ERROR(b.activation(x, "x", &a.x_stride, false));
  KK_RETURN_IF_ERROR(b.activation(out, "out", &a.out_stride, true));
  KK_RETURN_IF_ERROR(b.vector(weight, "weight", &a.weight));
  KK_RETURN_IF_ERROR(b.vector(bias, "bias", &a.bias));
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
  a.gelu = true;
  a.x = x.data;
  a.out = out.data;
  a.eps = eps;
  return detail::run(a, stream);
}

}  // namespace kernelkit

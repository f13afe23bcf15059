// Internal: argument checks shared by the row-wise ops (norms, activations). A Builder fills the common fields of an
// op's argument block (op, dtype, device, rows, hidden, align_bytes) from TensorViews, naming the argument and the
// expectation in every error; run_row_op then checks dtype support on the profile the launch will use and dispatches
// to the CPU reference or the CUDA launcher.
#pragma once

#include <algorithm>
#include <optional>
#include <string>

#include "kernelkit/op_info.hpp"
#include "kernelkit/profile.hpp"
#include "kernelkit/runtime.hpp"
#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"
#include "runtime/device_errors.hpp"

namespace kernelkit::detail {

inline std::string dt(DType t) { return std::string(dtype_name(t)); }

// Largest power of two (<= 16) dividing v.
inline int pow2_align(uint64_t v) { return v == 0 ? 16 : static_cast<int>(std::min<uint64_t>(16, v & (~v + 1))); }

template <typename Args>
class Builder {
 public:
  Builder(OpId op, Args* a) : op_(op), name_(op_info(op).name), a_(a) { a_->op = op; }

  // The first tensor (`x`) fixes dtype, device, rows and hidden (its last dim / `last_dim_multiple`: 2 for the input
  // of a gated activation); later ones must match its leading dims and have hidden x last_dim_multiple elements a row.
  // Leading dims must collapse to one row stride.
  Status activation(const TensorView& t, const char* arg, int64_t* row_stride, bool written,
                    int64_t last_dim_multiple = 1) {
    if (first_) {
      first_ = false;
      a_->dtype = t.dtype;
      a_->device = t.device;
      if (t.ndim < 1) return err(arg, "must have at least 1 dim, got 0");
      if (t.size(-1) == 0) return err(arg, "hidden size (last dim) must be > 0, got 0");
      if (t.size(-1) % last_dim_multiple != 0)
        return err(arg, "last dim must be a multiple of " + std::to_string(last_dim_multiple) + ", got " +
                            std::to_string(t.size(-1)));
      a_->hidden = t.size(-1) / last_dim_multiple;
      a_->rows = t.numel() / t.size(-1);
      shape_ = t;
    } else {
      KK_RETURN_IF_ERROR(same_dtype_device(t, arg));
      bool same = t.ndim == shape_.ndim && t.size(-1) == a_->hidden * last_dim_multiple;
      for (int d = 0; same && d + 1 < t.ndim; ++d) same = t.shape[d] == shape_.shape[d];
      if (!same) {
        TensorView want = shape_;
        want.shape[want.ndim - 1] = a_->hidden * last_dim_multiple;
        return err(arg, "shape " + t.shape_string() + " must be " + want.shape_string());
      }
    }
    if (t.size(-1) > 1 && t.stride(-1) != 1)
      return err(arg, "must have a contiguous last dim (stride 1), got stride " + std::to_string(t.stride(-1)));
    // Collapse the leading dims: each must step by the next one's stride times its size (size-1 dims are free).
    int64_t stride = t.size(-1), expect = -1;
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
  Args* a_;
  bool first_ = true;
  TensorView shape_;
};

// The outputs of a row op fused with quantization (the norm and gated-activation + quantization ops), checked
// after the Builder has read x: q the 1-byte dtype (i8 or f8e4m3) in x's leading dims and `hidden` elements a row,
// contiguous; scales f32, contiguous, one value a row (dynamic) or one in all (static_scale, read). Sets a's q,
// q_scales, static_scale, and bounds align_bytes by q's (the kernels store VEC codes as one access).
template <typename Args>
Status quant_outputs(const std::string& name, const TensorView& q, const TensorView& scales, const TensorView& x,
                     bool static_scale, Args* a) {
  if (q.dtype != DType::i8 && q.dtype != DType::f8e4m3)
    return invalid_argument(name + ": q dtype " + dt(q.dtype) + " must be i8 or f8e4m3");
  TensorView want = x;
  if (want.ndim > 0) want.shape[want.ndim - 1] = a->hidden;
  bool same = q.ndim == x.ndim;
  for (int d = 0; same && d < x.ndim; ++d) same = q.shape[d] == want.shape[d];
  if (!same)
    return invalid_argument(
        name + ": q shape " + q.shape_string() + " must be " +
        (a->hidden == x.size(-1) ? "x's shape " : "x's rows of hidden = " + std::to_string(a->hidden) + ", ") +
        want.shape_string());
  if (!q.is_contiguous()) return invalid_argument(name + ": q must be contiguous");
  if (scales.dtype != DType::f32) return invalid_argument(name + ": scales dtype " + dt(scales.dtype) + " must be f32");
  const int64_t rows = static_scale ? 1 : a->rows;
  if (scales.numel() != rows || !scales.is_contiguous())
    return invalid_argument(name + ": scales must be contiguous with " +
                            (static_scale ? std::string("1 element (the static scale)")
                                          : std::to_string(rows) + " elements (one a row of x)") +
                            ", got shape " + scales.shape_string());
  for (const TensorView* t : {&q, &scales})
    if (!(t->device == x.device))
      return invalid_argument(name + ": " + (t == &q ? "q" : "scales") + " is on " + to_string(t->device) +
                              " but x is on " + to_string(x.device) +
                              " (all tensors of one call must be on one device)");
  if ((q.data == nullptr && q.numel() > 0) || (scales.data == nullptr && rows > 0))
    return invalid_argument(name + ": q and scales must not be null");
  a->q = q.data;
  a->q_scales = static_cast<float*>(scales.data);
  a->static_scale = static_scale;
  a->align_bytes = std::min(a->align_bytes,
                            pow2_align(reinterpret_cast<uintptr_t>(q.data)) * static_cast<int>(dtype_size(a->dtype)));
  return Status::Ok();
}

// Validation that needs no device, then: CPU tensors -> reference; CUDA tensors -> dtype support on the profile the
// launch will use (a KERNELKIT_PROFILE override needs no device, so bf16 is refused on a T4 profile with or without a
// GPU), the device index, then the CUDA launcher cuda(a, stream) and, in debug mode (set_debug_checks), the wait for
// the stream and check_errors. Rows == 0 is a no-op after validation.
// `name` is the op's name in errors; `rows` the work (0: nothing to run).
template <typename Args, typename Validate, typename Reference, typename Cuda>
Status run_op(const std::string& name, const Args& a, int64_t rows, Stream stream, Validate validate,
              Reference reference, Cuda cuda) {
  if (a.device.type == DeviceType::cpu) {
    KK_RETURN_IF_ERROR(validate(a, nullptr));
    return rows == 0 ? Status::Ok() : reference(a);
  }
  std::optional<DeviceProfile> forced;
  KK_RETURN_IF_ERROR(profile_override(&forced));
  if (forced) KK_RETURN_IF_ERROR(validate(a, &*forced));
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
  KK_RETURN_IF_ERROR(validate(a, &prof));
  if (rows == 0) return Status::Ok();
  KK_RETURN_IF_ERROR(cuda(a, stream));
  return debug_checks() ? debug_check(a.device.index, stream) : Status::Ok();
}

// The row ops: named by their op table entry, work = a.rows.
template <typename Args, typename Validate, typename Reference, typename Cuda>
Status run_row_op(const Args& a, Stream stream, Validate validate, Reference reference, Cuda cuda) {
  return run_op(std::string(op_info(a.op).name), a, a.rows, stream, validate, reference, cuda);
}

// The dtype checks every row op shares: a floating dtype, and one the profile supports for CUDA tensors.
inline Status check_float_dtype(const std::string& name, DType dtype, Device device, const DeviceProfile* profile) {
  if (!is_floating(dtype))
    return invalid_argument(name + ": x dtype " + dt(dtype) + " is not supported (expected f32, f16 or bf16)");
  if (profile && device.type == DeviceType::cuda && !profile->supports(dtype))
    return unsupported(name + ": x dtype " + dt(dtype) + " " + profile->dtype_refusal(dtype));
  return Status::Ok();
}

}  // namespace kernelkit::detail

// Quantization ops: TensorViews -> QuantizeArgs / WeightOnlyArgs (every check names the argument and what was
// expected), then the CPU reference or the CUDA launcher through run_op (profile-dependent checks included).
#include "ops/quant/quant.hpp"

#include <algorithm>
#include <string>

#include "runtime/op_args.hpp"
#include "runtime/overlap.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/planner.hpp"
#include "ops/quant/quant_plan.hpp"

namespace kernelkit {
namespace detail {

Status check_int4_shape(const std::string& name, int64_t n, int64_t k) {
  if (n % kInt4TileRows == 0 && k % kInt4RegionValues == 0) return Status::Ok();
  return invalid_argument(name + ": INT4 weights [n, k] need n % " + std::to_string(kInt4TileRows) + " == 0 and k % " +
                          std::to_string(kInt4RegionValues) + " == 0 (the kernel layout's tiles of " +
                          std::to_string(kInt4TileRows) + " rows x " + std::to_string(kInt4RegionValues) +
                          " values), got n = " + std::to_string(n) + ", k = " + std::to_string(k) +
                          " (pad the weights with zero rows / columns)");
}

namespace {

std::string shape_of(std::initializer_list<int64_t> dims) {
  std::string s = "[";
  for (auto it = dims.begin(); it != dims.end(); ++it) s += (it == dims.begin() ? "" : ", ") + std::to_string(*it);
  return s + "]";
}

// Checks of one tensor argument against an expected dtype, exact shape, contiguity (whole tensor, or the last dim only
// when `row_strided`) and device.
class QuantChecker {
 public:
  QuantChecker(OpId op, Device device) : name_(op_info(op).name), device_(device) {}

  Status err(const char* arg, const std::string& what) const {
    return invalid_argument(std::string(name_) + ": " + arg + " " + what);
  }

  // dtype, exact shape, device and a pointer, whatever the strides.
  Status matches(const TensorView& t, const char* arg, DType dtype, std::initializer_list<int64_t> shape) const {
    if (t.dtype != dtype) return err(arg, "dtype " + dt(t.dtype) + " must be " + dt(dtype));
    bool same = t.ndim == static_cast<int>(shape.size());
    int d = 0;
    for (int64_t s : shape) same = same && t.shape[d++] == s;
    if (!same) return err(arg, "shape " + t.shape_string() + " must be " + shape_of(shape));
    if (!(t.device == device_))
      return err(arg, "is on " + to_string(t.device) + " but the first tensor is on " + to_string(device_) +
                          " (all tensors of one call must be on one device)");
    if (t.data == nullptr && t.numel() > 0) return err(arg, "is a null pointer");
    return Status::Ok();
  }

  Status tensor(const TensorView& t, const char* arg, DType dtype, std::initializer_list<int64_t> shape,
                bool row_strided = false) const {
    KK_RETURN_IF_ERROR(matches(t, arg, dtype, shape));
    if (row_strided) {
      if (t.size(-1) > 1 && t.stride(-1) != 1)
        return err(arg, "must have a contiguous last dim (stride 1), got stride " + std::to_string(t.stride(-1)));
      if (t.ndim == 2 && t.shape[0] > 1 && t.strides[0] < t.shape[1])
        return err(
            arg, "rows overlap (row stride " + std::to_string(t.strides[0]) + " < " + std::to_string(t.shape[1]) + ")");
    } else if (!t.is_contiguous()) {
      return err(arg, "must be contiguous, got strides of " + t.shape_string());
    }
    return Status::Ok();
  }

 private:
  std::string_view name_;
  Device device_;
};

Status check_matrix(OpId op, const TensorView& t, const char* arg) {
  const std::string name(op_info(op).name);
  if (t.ndim != 2) return invalid_argument(name + ": " + arg + " must be 2-D [rows, k], got " + t.shape_string());
  if (t.shape[1] == 0) return invalid_argument(name + ": " + arg + " k (last dim) must be > 0, got 0");
  return Status::Ok();
}

int64_t row_stride(const TensorView& t) { return t.shape[0] > 1 ? t.strides[0] : t.shape[1]; }

// The names of a quantizer's tensors in its errors: x / q for activations, w / qweight for weights; scale for the one
// per-tensor scale.
struct QuantizeNames {
  const char *src, *q, *scales;
  explicit QuantizeNames(OpId op)
      : src(quantizes_tokens(op) ? "x" : "w"),
        q(quantizes_tokens(op) ? "q" : "qweight"),
        scales(scale_span(op) == ScaleSpan::tensor ? "scale" : "scales") {}
};

Status build_quantize(OpId op, const TensorView& q, const TensorView& scales, const TensorView& w, int group,
                      bool static_scale, bool column_major_scales, QuantizeArgs* a) {
  const QuantizeNames arg(op);
  KK_RETURN_IF_ERROR(check_matrix(op, w, arg.src));
  a->op = op;
  a->dtype = w.dtype;
  a->device = w.device;
  a->rows = w.shape[0];
  a->hidden = w.shape[1];
  a->group = group;
  a->static_scale = static_scale;
  const std::string name(op_info(op).name);
  if (!is_floating(w.dtype))
    return invalid_argument(name + ": " + arg.src + " dtype " + dt(w.dtype) +
                            " is not supported (expected f32, f16 or bf16)");
  const QuantChecker c(op, w.device);
  KK_RETURN_IF_ERROR(c.tensor(w, arg.src, w.dtype, {a->rows, a->hidden}, true));
  const ScaleSpan span = scale_span(op);
  if (span == ScaleSpan::group) {
    if (group != 64 && group != 128)
      return invalid_argument(name + ": group must be 64 or 128, got " + std::to_string(group));
    if (a->hidden % group != 0)
      return invalid_argument(name + ": k = " + std::to_string(a->hidden) +
                              " must be a multiple of group = " + std::to_string(group));
  }
  if (op == OpId::quantize_int4_groupwise) {
    KK_RETURN_IF_ERROR(check_int4_shape(name, a->rows, a->hidden));
    KK_RETURN_IF_ERROR(c.tensor(q, arg.q, DType::i4x2, {a->rows, a->hidden / 2}));
  } else
    KK_RETURN_IF_ERROR(c.tensor(q, arg.q, op_fp8_dtype(op).value_or(DType::i8), {a->rows, a->hidden}));
  const int64_t block = kQuantBlockSize;
  switch (span) {
    case ScaleSpan::row:
      KK_RETURN_IF_ERROR(c.tensor(scales, arg.scales, DType::f32, {a->rows}));
      break;
    case ScaleSpan::group:
      if (column_major_scales) {  // [k / group, m], any row stride >= m
        KK_RETURN_IF_ERROR(c.tensor(scales, arg.scales, DType::f32, {a->hidden / group, a->rows}, true));
        a->scales_ld = row_stride(scales);
      } else {
        KK_RETURN_IF_ERROR(c.tensor(scales, arg.scales, DType::f32, {a->rows, a->hidden / group}));
      }
      break;
    case ScaleSpan::tensor:
      KK_RETURN_IF_ERROR(c.tensor(scales, arg.scales, DType::f32, {1}));
      break;
    case ScaleSpan::block:  // any row stride >= ceil(k / B): fp8_block_scales_ld(k) for linear_fp8's block scales
      KK_RETURN_IF_ERROR(c.tensor(scales, arg.scales, DType::f32,
                                  {(a->rows + block - 1) / block, (a->hidden + block - 1) / block}, true));
      a->scales_ld = row_stride(scales);
      break;
    case ScaleSpan::none:
      return Status(StatusCode::internal, name + ": not a quantizer");
  }
  a->w = w.data;
  a->w_stride = row_stride(w);
  a->q = q.data;
  a->scales = static_cast<float*>(scales.data);
  // The vector width of the CUDA quantizers is bounded by w's pointer and row stride and by q's pointer (the q row of
  // VEC values is stored as one access).
  a->align_bytes = std::min({pow2_align(reinterpret_cast<uintptr_t>(w.data)),
                             pow2_align(static_cast<uint64_t>(a->w_stride) * dtype_size(w.dtype)),
                             pow2_align(reinterpret_cast<uintptr_t>(q.data))});
  return Status::Ok();
}

// bf16 on a CUDA device needs a profile with bf16 (sm_80+).
Status check_profile_dtype(OpId op, const char* arg, DType dtype, const DeviceProfile& profile) {
  if (profile.supports(dtype)) return Status::Ok();
  return unsupported(std::string(op_info(op).name) + ": " + arg + " dtype " + dt(dtype) + " " +
                     profile.dtype_refusal(dtype));
}

// Builds, checks the outputs against the inputs (a static scale is an input) and runs one quantizer. The work is the
// rows, but for a dynamic per-tensor scale, which an empty x still sets (to 0).
Status quantize(OpId op, const TensorView& q, const TensorView& scales, const TensorView& w, Stream stream,
                int group = 0, bool static_scale = false, bool column_major_scales = false) {
  QuantizeArgs a;
  KK_RETURN_IF_ERROR(build_quantize(op, q, scales, w, group, static_scale, column_major_scales, &a));
  const QuantizeNames arg(op);
  const std::string name(op_info(op).name);
  if (static_scale)
    KK_RETURN_IF_ERROR(check_no_overlap(name, {{&q, arg.q}}, {{&w, arg.src}, {&scales, arg.scales}}));
  else
    KK_RETURN_IF_ERROR(check_no_overlap(name, {{&q, arg.q}, {&scales, arg.scales}}, {{&w, arg.src}}));
  const bool sets_scale = scale_span(op) == ScaleSpan::tensor && !static_scale;
  return run_op(name, a, sets_scale ? std::max<int64_t>(a.rows, 1) : a.rows, stream, validate_quantize,
                quantize_reference, quantize_cuda);
}

}  // namespace

Status validate_quantize(const QuantizeArgs& a, const DeviceProfile* profile) {
  const std::string name(op_info(a.op).name);
  if (profile && a.device.type == DeviceType::cuda) {
    const QuantizeNames arg(a.op);
    KK_RETURN_IF_ERROR(check_profile_dtype(a.op, arg.src, a.dtype, *profile));
    if (const auto fp8 = op_fp8_dtype(a.op))  // FP8 conversions in hardware: sm_89+
      KK_RETURN_IF_ERROR(check_profile_dtype(a.op, arg.q, *fp8, *profile));
    // The group kernel reads 8 values (one INT4 word) a thread as 16-byte vectors and stores their codes in one access.
    if (scale_span(a.op) == ScaleSpan::group && a.align_bytes < 16) {
      return invalid_argument(name + ": on CUDA, " + arg.src + "'s pointer and row stride and " + arg.q +
                              "'s pointer must be 16-byte aligned, got " + std::to_string(a.align_bytes) +
                              "-byte alignment");
    }
  }
  return Status::Ok();
}

Status validate_weight_only(const WeightOnlyArgs& a, const DeviceProfile* profile) {
  const std::string name(op_info(a.op).name);
  if (profile && a.device.type == DeviceType::cuda) {
    KK_RETURN_IF_ERROR(check_profile_dtype(a.op, "x", a.dtype, *profile));
    // 16-byte loads of x (8 values) and of every weight row.
    if (a.align_bytes < 16)
      return invalid_argument(name +
                              ": on CUDA, x's pointer and row stride must be 16-byte aligned (k and the row "
                              "stride multiples of 8), got " +
                              std::to_string(a.align_bytes) + "-byte alignment");
    if (pow2_align(reinterpret_cast<uintptr_t>(a.qweight)) < 16)
      return invalid_argument(name + ": on CUDA, qweight must be 16-byte aligned");
  }
  return Status::Ok();
}

namespace {

// cuBLASLt reads block scales through bare pointers (no strides): x_scales as [k / B][m] (VEC128_32F, of its B
// operand xq) and w_scales as rows of fp8_block_scales_ld(k) (BLK128x128_32F, of its A operand qweight).
Status check_cublaslt_block_scales(const W8A8Args& a) {
  const std::string name(op_info(a.op).name);
  const int64_t k_blocks = a.k / kQuantBlockSize, n_blocks = (a.n + kQuantBlockSize - 1) / kQuantBlockSize;
  const int64_t token = a.x_scales_strides[0], block = a.x_scales_strides[1];
  if (!((a.rows <= 1 || token == 1) && (k_blocks <= 1 || block == a.rows)))
    return invalid_argument(
        name + ": on CUDA, x_scales must be token-major with strides (1, m) = (1, " + std::to_string(a.rows) +
        "): cuBLASLt reads 1 x 128 scales as [k / 128][m] with no leading dimension; got strides (" +
        std::to_string(token) + ", " + std::to_string(block) +
        ") (quantize_per_token_group_fp8 writes it with column_major_scales and ld = m)");
  const int64_t ld = fp8_block_scales_ld(a.k);
  if (n_blocks > 1 && a.w_scales_ld != ld)
    return invalid_argument(name + ": on CUDA, w_scales' rows must be fp8_block_scales_ld(k) = " + std::to_string(ld) +
                            " floats apart: cuBLASLt reads 128 x 128 scales with k / 128 rounded up to a multiple " +
                            "of 4 a row; got a row stride of " + std::to_string(a.w_scales_ld) +
                            " (quantize_blockwise_fp8 writes into such a view)");
  return Status::Ok();
}

}  // namespace

Status check_fp8_linear_profile(OpId op, const DeviceProfile& prof) {
  KK_RETURN_IF_ERROR(check_profile_dtype(op, "xq", DType::f8e4m3, prof));
  if (op == OpId::linear_fp8_blockwise && prof.sm != 90)
    return unsupported(std::string(op_info(op).name) +
                       ": cuBLASLt's block-scaled FP8 matmul (1 x 128 and 128 x 128 scales) runs on Hopper (sm_90) "
                       "only, not on profile " +
                       prof.key + " (sm_" + std::to_string(prof.sm) +
                       "); use per-token x per-channel scales (x_scales [m], w_scales [n])");
  return Status::Ok();
}

Status validate_w8a8(const W8A8Args& a, const DeviceProfile* profile) {
  if (profile && a.device.type == DeviceType::cuda) {
    const std::string name(op_info(a.op).name);
    const bool fp8 = op_fp8_dtype(a.op).has_value();
    KK_RETURN_IF_ERROR(check_profile_dtype(a.op, "out", a.dtype, *profile));
    if (fp8) KK_RETURN_IF_ERROR(check_fp8_linear_profile(a.op, *profile));
    if (a.align_bytes < 16)  // 16-byte copies of xq and qweight rows (cp.async, or cuBLASLt's FP8 kernels)
      return invalid_argument(name + ": on CUDA, xq's pointer and row stride and qweight's pointer" +
                              (fp8 ? ", out's pointer and row stride" : "") + " must be 16-byte aligned, got " +
                              std::to_string(a.align_bytes) + "-byte alignment");
    if (a.op == OpId::linear_fp8_blockwise) KK_RETURN_IF_ERROR(check_cublaslt_block_scales(a));
  }
  return Status::Ok();
}

}  // namespace detail

Status quantize_int8_per_channel(const TensorView& qweight, const TensorView& scales, const TensorView& w,
                                 Stream stream) {
  return detail::quantize(OpId::quantize_int8_per_channel, qweight, scales, w, stream);
}

Status quantize_per_token_int8(const TensorView& q, const TensorView& scales, const TensorView& x, Stream stream) {
  return detail::quantize(OpId::quantize_per_token_int8, q, scales, x, stream);
}

Status quantize_per_token_fp8(const TensorView& q, const TensorView& scales, const TensorView& x, Stream stream) {
  return detail::quantize(OpId::quantize_per_token_fp8, q, scales, x, stream);
}

Status quantize_int4_groupwise(const TensorView& qweight, const TensorView& scales, const TensorView& w, int group,
                               Stream stream) {
  return detail::quantize(OpId::quantize_int4_groupwise, qweight, scales, w, stream, group);
}

Status quantize_per_tensor_fp8(const TensorView& q, const TensorView& scale, const TensorView& x, bool static_scale,
                               Stream stream) {
  return detail::quantize(OpId::quantize_per_tensor_fp8, q, scale, x, stream, 0, static_scale);
}

Status quantize_per_tensor_int8(const TensorView& q, const TensorView& scale, const TensorView& x, bool static_scale,
                                Stream stream) {
  return detail::quantize(OpId::quantize_per_tensor_int8, q, scale, x, stream, 0, static_scale);
}

Status quantize_per_token_group_fp8(const TensorView& q, const TensorView& scales, const TensorView& x, int group,
                                    bool column_major_scales, Stream stream) {
  return detail::quantize(OpId::quantize_per_token_group_fp8, q, scales, x, stream, group, false, column_major_scales);
}

Status quantize_per_token_group_int8(const TensorView& q, const TensorView& scales, const TensorView& x, int group,
                                     bool column_major_scales, Stream stream) {
  return detail::quantize(OpId::quantize_per_token_group_int8, q, scales, x, stream, group, false, column_major_scales);
}

Status quantize_blockwise_fp8(const TensorView& qweight, const TensorView& scales, const TensorView& w, Stream stream) {
  return detail::quantize(OpId::quantize_blockwise_fp8, qweight, scales, w, stream);
}

Status quantize_blockwise_int8(const TensorView& qweight, const TensorView& scales, const TensorView& w,
                               Stream stream) {
  return detail::quantize(OpId::quantize_blockwise_int8, qweight, scales, w, stream);
}

Status linear_weight_only(const TensorView& out, const TensorView& x, const TensorView& qweight,
                          const TensorView& scales, int bits, int group, const std::optional<TensorView>& bias,
                          Stream stream, bool accumulate, const std::optional<TensorView>& zeros,
                          const std::optional<TensorView>& perm) {
  using detail::dt;
  if (bits != 8 && bits != 4)
    return invalid_argument("linear_weight_only: bits must be 8 or 4, got " + std::to_string(bits));
  const OpId op = bits == 8 ? OpId::linear_w8a16 : OpId::linear_w4a16;
  const std::string name(op_info(op).name);
  detail::WeightOnlyArgs a;
  a.op = op;
  a.bits = bits;
  a.group = group;
  a.accumulate = accumulate;
  if (x.ndim != 2) return invalid_argument(name + ": x must be 2-D [m, k], got " + x.shape_string());
  if (x.dtype != DType::f16 && x.dtype != DType::bf16)
    return invalid_argument(name + ": x dtype " + dt(x.dtype) + " is not supported (expected f16 or bf16)");
  a.dtype = x.dtype;
  a.device = x.device;
  a.rows = x.shape[0];
  a.k = x.shape[1];
  if (a.k <= 0) return invalid_argument(name + ": x k (last dim) must be > 0, got " + std::to_string(a.k));
  if (qweight.ndim != 2) return invalid_argument(name + ": qweight must be 2-D, got " + qweight.shape_string());
  a.n = qweight.shape[0];
  if (bits == 8 && group != 0 && group != 32 && group != 64 && group != 128)
    return invalid_argument(name + ": group must be 0 (one scale per output channel), 32, 64 or 128, got " +
                            std::to_string(group));
  if (bits == 4 && group != 32 && group != 64 && group != 128)
    return invalid_argument(name + ": group must be 32, 64 or 128, got " + std::to_string(group));
  if (bits == 8 && a.k % 16 != 0)
    return invalid_argument(name + ": k = " + std::to_string(a.k) + " must be a multiple of 16 (16-byte weight loads)");
  if (group > 0 && a.k % group != 0)
    return invalid_argument(name + ": k = " + std::to_string(a.k) +
                            " must be a multiple of group = " + std::to_string(group));
  if (bits == 4) KK_RETURN_IF_ERROR(detail::check_int4_shape(name, a.n, a.k));
  if (zeros && group == 0)
    return invalid_argument(name + ": zeros need group scales (group 32, 64 or 128), got group 0");
  const detail::QuantChecker c(op, x.device);
  KK_RETURN_IF_ERROR(c.tensor(x, "x", x.dtype, {a.rows, a.k}, true));
  KK_RETURN_IF_ERROR(
      c.tensor(qweight, "qweight", bits == 8 ? DType::i8 : DType::i4x2, {a.n, bits == 8 ? a.k : a.k / 2}));
  if (group == 0)
    KK_RETURN_IF_ERROR(c.tensor(scales, "scales", DType::f32, {a.n}));
  else
    KK_RETURN_IF_ERROR(c.tensor(scales, "scales", DType::f32, {a.n, a.k / group}));
  if (zeros) KK_RETURN_IF_ERROR(c.tensor(*zeros, "zeros", DType::i8, {a.n, a.k / group}));
  if (bias) KK_RETURN_IF_ERROR(c.tensor(*bias, "bias", x.dtype, {a.n}));
  if (perm) {
    if (perm->dtype != DType::i32 && perm->dtype != DType::i64)
      return c.err("perm", "dtype " + dt(perm->dtype) + " must be i32 or i64");
    KK_RETURN_IF_ERROR(c.tensor(*perm, "perm", perm->dtype, {a.k}));
    a.perm = perm->data;
    a.perm_i64 = perm->dtype == DType::i64;
  }
  KK_RETURN_IF_ERROR(c.tensor(out, "out", x.dtype, {a.rows, a.n}, true));
  if (out.data == x.data && a.rows * a.n > 0)
    return invalid_argument(name + ": out must not be x (every output reads all of x's row)");
  a.x = x.data;
  a.x_stride = detail::row_stride(x);
  a.qweight = qweight.data;
  a.scales = static_cast<const float*>(scales.data);
  a.zeros = zeros ? static_cast<const int8_t*>(zeros->data) : nullptr;
  a.bias = bias ? bias->data : nullptr;
  a.out = out.data;
  a.out_stride = detail::row_stride(out);
  a.align_bytes = std::min(detail::pow2_align(reinterpret_cast<uintptr_t>(x.data)),
                           detail::pow2_align(static_cast<uint64_t>(a.x_stride) * dtype_size(x.dtype)));
  if (a.n == 0) a.rows = 0;  // nothing to compute (after validation)
  KK_RETURN_IF_ERROR(detail::check_no_overlap(name, {{&out, "out"}},
                                              {{&x, "x"},
                                               {&qweight, "qweight"},
                                               {&scales, "scales"},
                                               {zeros ? &*zeros : nullptr, "zeros"},
                                               {bias ? &*bias : nullptr, "bias"},
                                               {perm ? &*perm : nullptr, "perm"}}));
  return detail::run_row_op(a, stream, detail::validate_weight_only, detail::weight_only_reference,
                            detail::weight_only_cuda);
}

namespace detail {
namespace {

// The scales of linear_fp8_blockwise (B = kQuantBlockSize; k % B == 0 checked): x_scales [m, k / B] row major or
// token-major (kernelkit/ops/quant.hpp), w_scales [ceil(n / B), k / B] with rows w_scales_ld apart.
Status build_block_scales(const QuantChecker& c, const TensorView& x_scales, const TensorView& w_scales, W8A8Args* a) {
  const int64_t m = a->rows, k_blocks = a->k / kQuantBlockSize;
  KK_RETURN_IF_ERROR(c.matches(x_scales, "x_scales", DType::f32, {m, k_blocks}));
  // A dim of one element has no stride to speak of: either layout takes it.
  const int64_t token = x_scales.strides[0], block = x_scales.strides[1];
  if ((m <= 1 || token == k_blocks) && (k_blocks <= 1 || block == 1)) {
    a->x_scales_strides[0] = k_blocks, a->x_scales_strides[1] = 1;
  } else if ((m <= 1 || token == 1) && (k_blocks <= 1 || block >= m)) {
    a->x_scales_strides[0] = 1, a->x_scales_strides[1] = k_blocks > 1 ? block : m;
  } else {
    return c.err("x_scales", "strides (" + std::to_string(token) + ", " + std::to_string(block) + ") must be (" +
                                 std::to_string(k_blocks) +
                                 ", 1) (row major) or (1, ld) with ld >= m = " + std::to_string(m) +
                                 " (token-major: quantize_per_token_group_fp8's column-major scales)");
  }
  KK_RETURN_IF_ERROR(
      c.tensor(w_scales, "w_scales", DType::f32, {(a->n + kQuantBlockSize - 1) / kQuantBlockSize, k_blocks}, true));
  a->w_scales_ld = row_stride(w_scales);
  return Status::Ok();
}

// linear_w8a8 and linear_fp8* take the same arguments: 1-byte xq and qweight (i8 or e4m3) with fp32 scales.
Status build_scaled_linear(OpId op, const TensorView& out, const TensorView& xq, const TensorView& x_scales,
                           const TensorView& qweight, const TensorView& w_scales, const std::optional<TensorView>& bias,
                           W8A8Args* a) {
  const std::string name(op_info(op).name);
  const bool fp8 = op_fp8_dtype(op).has_value(), block = op == OpId::linear_fp8_blockwise;
  const DType value = fp8 ? DType::f8e4m3 : DType::i8;
  if (xq.ndim != 2) return invalid_argument(name + ": xq must be 2-D [m, k], got " + xq.shape_string());
  if (qweight.ndim != 2) return invalid_argument(name + ": qweight must be 2-D [n, k], got " + qweight.shape_string());
  if (out.dtype != DType::f16 && out.dtype != DType::bf16)
    return invalid_argument(name + ": out dtype " + dt(out.dtype) + " is not supported (expected f16 or bf16)");
  a->op = op;
  a->dtype = out.dtype;
  a->device = xq.device;
  a->rows = xq.shape[0];
  a->k = xq.shape[1];
  a->n = qweight.shape[0];
  if (a->k <= 0 || a->k % 16 != 0 || (!fp8 && a->k > kW8A8MaxK))
    return invalid_argument(
        name + ": k = " + std::to_string(a->k) + " must be a positive multiple of 16 (16-byte " +
        (fp8 ? std::string("rows)") : "int8 copies) and at most " + std::to_string(kW8A8MaxK) + " (exact int32 sums)"));
  if (block && a->k % kQuantBlockSize != 0)
    return invalid_argument(name + ": k = " + std::to_string(a->k) + " must be a multiple of " +
                            std::to_string(kQuantBlockSize) + " (whole 1 x 128 activation scale groups)");
  const QuantChecker c(op, xq.device);
  KK_RETURN_IF_ERROR(c.tensor(xq, "xq", value, {a->rows, a->k}, true));
  if (block) {
    KK_RETURN_IF_ERROR(build_block_scales(c, x_scales, w_scales, a));
  } else {
    if (fp8 &&
        !(x_scales.ndim == 1 && w_scales.ndim == 1 && x_scales.shape[0] == a->rows && w_scales.shape[0] == a->n)) {
      // Not the vectors: both per tensor, or an error naming both shapes.
      if (!(x_scales.ndim == 1 && w_scales.ndim == 1 && x_scales.shape[0] == 1 && w_scales.shape[0] == 1))
        return invalid_argument(name + ": x_scales and w_scales must be both [1] (per tensor), [m] and [n] = [" +
                                std::to_string(a->rows) + "] and [" + std::to_string(a->n) +
                                "] (per token, per output channel), or both 2-D (block scales: [m, k / 128] and "
                                "[ceil(n / 128), k / 128]), got " +
                                x_scales.shape_string() + " and " + w_scales.shape_string());
      a->x_per_tensor = a->w_per_tensor = true;
    }
    KK_RETURN_IF_ERROR(c.tensor(x_scales, "x_scales", DType::f32, {a->x_per_tensor ? 1 : a->rows}));
    KK_RETURN_IF_ERROR(c.tensor(w_scales, "w_scales", DType::f32, {a->w_per_tensor ? 1 : a->n}));
  }
  KK_RETURN_IF_ERROR(c.tensor(qweight, "qweight", value, {a->n, a->k}));
  if (bias) KK_RETURN_IF_ERROR(c.tensor(*bias, "bias", out.dtype, {a->n}));
  KK_RETURN_IF_ERROR(c.tensor(out, "out", out.dtype, {a->rows, a->n}, true));
  a->xq = static_cast<const int8_t*>(xq.data);
  a->x_stride = row_stride(xq);
  a->x_scales = static_cast<const float*>(x_scales.data);
  a->qweight = static_cast<const int8_t*>(qweight.data);
  a->w_scales = static_cast<const float*>(w_scales.data);
  a->bias = bias ? bias->data : nullptr;
  a->out = out.data;
  a->out_stride = row_stride(out);
  a->align_bytes =
      std::min({pow2_align(reinterpret_cast<uintptr_t>(xq.data)), pow2_align(static_cast<uint64_t>(a->x_stride)),
                pow2_align(reinterpret_cast<uintptr_t>(qweight.data))});
  if (fp8)  // cuBLASLt's FP8 kernels also want the output's rows 16-byte aligned
    a->align_bytes = std::min({a->align_bytes, pow2_align(reinterpret_cast<uintptr_t>(out.data)),
                               pow2_align(static_cast<uint64_t>(a->out_stride) * dtype_size(out.dtype))});
  if (a->n == 0) a->rows = 0;  // nothing to compute (after validation)
  return check_no_overlap(name, {{&out, "out"}},
                          {{&xq, "xq"},
                           {&x_scales, "x_scales"},
                           {&qweight, "qweight"},
                           {&w_scales, "w_scales"},
                           {bias ? &*bias : nullptr, "bias"}});
}

}  // namespace
}  // namespace detail

Status linear_w8a8(const TensorView& out, const TensorView& xq, const TensorView& x_scales, const TensorView& qweight,
                   const TensorView& w_scales, const std::optional<TensorView>& bias, Stream stream) {
  detail::W8A8Args a;
  KK_RETURN_IF_ERROR(detail::build_scaled_linear(OpId::linear_w8a8, out, xq, x_scales, qweight, w_scales, bias, &a));
  return detail::run_row_op(a, stream, detail::validate_w8a8, detail::w8a8_reference, detail::w8a8_cuda);
}

Status linear_fp8(const TensorView& out, const TensorView& xq, const TensorView& x_scales, const TensorView& qweight,
                  const TensorView& w_scales, const std::optional<TensorView>& bias, Stream stream,
                  bool fast_accumulation, bool accumulate) {
  // 2-D scales are block scales: a registry op of its own (its bytes, error bound and profiles differ).
  const OpId op = x_scales.ndim == 2 && w_scales.ndim == 2 ? OpId::linear_fp8_blockwise : OpId::linear_fp8;
  detail::W8A8Args a;
  KK_RETURN_IF_ERROR(detail::build_scaled_linear(op, out, xq, x_scales, qweight, w_scales, bias, &a));
  if (op == OpId::linear_fp8_blockwise && fast_accumulation)
    return invalid_argument(
        "linear_fp8_blockwise: fast_accumulation is not available with block scales (cuBLASLt promotes and scales "
        "every 128-wide block's sums in fp32; it refuses fast accumulation for these scale modes)");
  a.fast_accumulation = fast_accumulation;
  a.accumulate = accumulate;
  return detail::run_row_op(a, stream, detail::validate_w8a8, detail::w8a8_reference, detail::fp8_linear_cuda);
}

Status pack_int4(const TensorView& packed, const TensorView& plain) {
  const std::string name = "pack_int4";
  if (packed.device.type != DeviceType::cpu || plain.device.type != DeviceType::cpu)
    return unsupported(name + ": the layout converter runs on CPU tensors only (an offline step); got " +
                       to_string(plain.device) + " and " + to_string(packed.device));
  if (plain.ndim != 2 || packed.ndim != 2)
    return invalid_argument(name + ": plain and packed must be 2-D, got " + plain.shape_string() + " and " +
                            packed.shape_string());
  if (plain.dtype != DType::i8 && plain.dtype != DType::i4x2)
    return invalid_argument(name + ": plain dtype " + detail::dt(plain.dtype) + " must be i8 or i4x2");
  const int64_t n = plain.shape[0], k = plain.dtype == DType::i8 ? plain.shape[1] : 2 * plain.shape[1];
  KK_RETURN_IF_ERROR(detail::check_int4_shape(name, n, k));
  if (!plain.is_contiguous() || !packed.is_contiguous())
    return invalid_argument(name + ": plain and packed must be contiguous");
  if (packed.dtype != DType::i4x2 || packed.shape[0] != n || packed.shape[1] != k / 2)
    return invalid_argument(name + ": packed must be i4x2 [" + std::to_string(n) + ", " + std::to_string(k / 2) +
                            "], got " + detail::dt(packed.dtype) + " " + packed.shape_string());
  KK_RETURN_IF_ERROR(detail::check_no_overlap(name, {{&packed, "packed"}}, {{&plain, "plain"}}));
  if (n * k > 0 && (packed.data == nullptr || plain.data == nullptr)) return invalid_argument(name + ": null pointer");
  const auto* src = static_cast<const uint8_t*>(plain.data);
  auto* dst = static_cast<uint8_t*>(packed.data);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t w = 0; w < k / 8; ++w) {
      uint32_t word = 0;
      for (int j = 0; j < 8; ++j) {
        const int64_t i = r * k + w * 8 + j;
        int v;
        if (plain.dtype == DType::i8) {
          v = static_cast<int8_t>(src[i]);
          if (v < -8 || v > 7)
            return invalid_argument(name + ": plain[" + std::to_string(r) + ", " + std::to_string(w * 8 + j) +
                                    "] = " + std::to_string(v) + " is outside the INT4 range [-8, 7]");
        } else {
          v = (src[i / 2] >> (4 * (i % 2))) & 0xF;
        }
        word |= static_cast<uint32_t>(v & 0xF) << (4 * detail::kInt4Nibble[j]);
      }
      const int64_t at = detail::int4_word_offset(r, w, k);
      for (int b = 0; b < 4; ++b) dst[at + b] = static_cast<uint8_t>(word >> (8 * b));
    }
  return Status::Ok();
}

Status unpack_int4(const TensorView& plain, const TensorView& packed) {
  const std::string name = "unpack_int4";
  if (packed.device.type != DeviceType::cpu || plain.device.type != DeviceType::cpu)
    return unsupported(name + ": the layout converter runs on CPU tensors only (an offline step)");
  if (plain.ndim != 2 || packed.ndim != 2 || packed.dtype != DType::i4x2 ||
      (plain.dtype != DType::i8 && plain.dtype != DType::i4x2))
    return invalid_argument(name + ": expected packed i4x2 [n, k / 2] and plain i8 [n, k] or i4x2 [n, k / 2], got " +
                            detail::dt(packed.dtype) + " " + packed.shape_string() + " and " + detail::dt(plain.dtype) +
                            " " + plain.shape_string());
  const int64_t n = packed.shape[0], k = 2 * packed.shape[1];
  KK_RETURN_IF_ERROR(detail::check_int4_shape(name, n, k));
  if (plain.shape[0] != n || plain.shape[1] != (plain.dtype == DType::i8 ? k : k / 2))
    return invalid_argument(name + ": plain shape " + plain.shape_string() + " does not match packed " +
                            packed.shape_string());
  if (!plain.is_contiguous() || !packed.is_contiguous())
    return invalid_argument(name + ": plain and packed must be contiguous");
  KK_RETURN_IF_ERROR(detail::check_no_overlap(name, {{&plain, "plain"}}, {{&packed, "packed"}}));
  if (n * k > 0 && (packed.data == nullptr || plain.data == nullptr)) return invalid_argument(name + ": null pointer");
  const auto* src = static_cast<const uint8_t*>(packed.data);
  auto* dst = static_cast<uint8_t*>(plain.data);
  if (plain.dtype == DType::i4x2) std::fill(dst, dst + n * k / 2, uint8_t{0});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) {
      const int v = detail::int4_kernel_value(src, r, j, k);
      const int64_t i = r * k + j;
      if (plain.dtype == DType::i8)
        dst[i] = static_cast<uint8_t>(static_cast<int8_t>(v));
      else
        dst[i / 2] |= static_cast<uint8_t>((v & 0xF) << (4 * (i % 2)));
    }
  return Status::Ok();
}

}  // namespace kernelkit

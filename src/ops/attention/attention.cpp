// attention / decode_attention: TensorViews -> AttentionArgs / DecodeArgs with every check naming the argument and the
// expectation, then the CPU reference or the CUDA launcher (through run_row_op: CPU tensors never need a device).
#include "ops/attention/attention.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/device_errors.hpp"
#include "runtime/op_args.hpp"
#include "runtime/overlap.hpp"
#include "runtime/text.hpp"
#include "ops/attention/attention_plan.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/runtime.hpp"

namespace kernelkit {
namespace detail {
namespace {

struct Dim {
  const char* name;
  int64_t size;
};

std::string dims_string(std::initializer_list<Dim> dims) {
  std::string s = "[";
  for (const Dim& d : dims) s += (s.size() > 1 ? ", " : "") + std::string(d.name) + "=" + std::to_string(d.size);
  return s + "]";
}

// Checks of one call's tensors; the first (`q`, named `first`) fixes the dtype and device every other tensor must
// share.
class AttnChecker {
 public:
  AttnChecker(OpId op, const TensorView& q, const char* first = "q")
      : name_(op_info(op).name), first_(first), dtype_(q.dtype), device_(q.device) {}

  Status err(const char* arg, const std::string& what) const {
    return invalid_argument(std::string(name_) + ": " + arg + " " + what);
  }

  // dtype (the activation dtype unless `dtype` is given) and device, the expected shape, a non-null pointer when
  // non-empty and, for head tensors, a contiguous last dim.
  Status tensor(const TensorView& t, const char* arg, std::initializer_list<Dim> want,
                std::optional<DType> dtype = std::nullopt) const {
    const DType expect = dtype.value_or(dtype_);
    if (t.dtype != expect)
      return err(arg, "dtype " + dt(t.dtype) +
                          (dtype ? " must be " + dt(expect)
                                 : " does not match " + std::string(first_) + " dtype " + dt(expect)));
    if (!(t.device == device_))
      return err(arg, "is on " + to_string(t.device) + " but " + first_ + " is on " + to_string(device_) +
                          " (all tensors of one call must be on one device)");
    bool same = t.ndim == static_cast<int>(want.size());
    int i = 0;
    for (const Dim& d : want) same = same && t.shape[i++] == d.size;
    if (!same) return err(arg, "shape " + t.shape_string() + " must be " + dims_string(want));
    if (t.ndim > 0 && t.size(-1) > 1 && t.stride(-1) != 1)
      return err(arg, "must have a contiguous last dim (stride 1), got stride " + std::to_string(t.stride(-1)));
    if (t.data == nullptr && t.numel() > 0) return err(arg, "is a null pointer");
    return Status::Ok();
  }

  // A tensor whose strides must be exactly row-major (lse, cu_seqlens, seqlens).
  Status contiguous(const TensorView& t, const char* arg) const {
    if (!t.is_contiguous()) return err(arg, "must be contiguous, got strides of a view of shape " + t.shape_string());
    return Status::Ok();
  }

 private:
  std::string_view name_;
  const char* first_;
  DType dtype_;
  Device device_;
};

HeadStrides head_strides(const TensorView& t) {
  if (t.ndim == 3) return {0, t.strides[0], t.strides[1]};  // varlen [tokens, heads, d]
  return {t.strides[0], t.strides[1], t.strides[2]};        // [b, s, heads, d]
}

Status check_head_dim(const std::string& name, int64_t d, const char* of = "q") {
  if (d <= 0 || d % 8 != 0 || d > kAttnMaxHeadDim)
    return unsupported(name + ": head_dim (" + of + " last dim) " + std::to_string(d) +
                       " is not supported (expected a multiple of 8 up to " + std::to_string(kAttnMaxHeadDim) + ")");
  return Status::Ok();
}

Status check_heads(const std::string& name, int64_t heads, int64_t kv_heads) {
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0)
    return invalid_argument(name + ": q heads (" + std::to_string(heads) +
                            ") must be a positive multiple of k/v heads (" + std::to_string(kv_heads) +
                            ") for grouped-query attention");
  return Status::Ok();
}

Status resolve_scale(const std::string& name, float scale, int64_t head_dim, float* out) {
  if (!std::isfinite(scale))
    return invalid_argument(name + ": options.scale must be finite (0 for 1/sqrt(head_dim)), got " +
                            number(scale));
  *out = scale != 0.0f ? scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  return Status::Ok();
}

// The sliding window and the soft-cap of `o`, checked, into *window / *softcap (scale: the resolved softmax scale).
Status resolve_masks(const std::string& name, const AttentionOptions& o, float scale, int64_t* window,
                     float* softcap) {
  if (o.window_left < -1)
    return invalid_argument(name + ": options.window_left must be >= 0 (or -1: no window), got " +
                            std::to_string(o.window_left));
  if (!std::isfinite(o.softcap) || o.softcap < 0.0f)
    return invalid_argument(name + ": options.softcap must be finite and >= 0 (0: none), got " + number(o.softcap));
  if (o.softcap > 0.0f && !std::isfinite(scale / o.softcap))  // the kernels scale scores by scale / softcap
    return invalid_argument(name + ": options.softcap " + number(o.softcap) + " is too small for scale " +
                            number(scale) + " (scale / softcap must be a finite float)");
  *window = o.window_left;
  *softcap = o.softcap;
  return Status::Ok();
}

// ALiBi slopes of `o`: f32 [heads] or [batch, heads] on q's device, into *slopes and *batch_stride (0 for [heads]).
Status resolve_alibi(const AttnChecker& c, const AttentionOptions& o, int64_t batch, int64_t heads,
                     const float** slopes, int64_t* batch_stride) {
  if (!o.alibi_slopes) return Status::Ok();
  const TensorView& t = *o.alibi_slopes;
  const Dim b{"batch", batch}, h{"heads", heads};
  if (t.ndim == 2) {
    KK_RETURN_IF_ERROR(c.tensor(t, "options.alibi_slopes", {b, h}, DType::f32));
    *batch_stride = t.strides[0];
  } else {
    KK_RETURN_IF_ERROR(c.tensor(t, "options.alibi_slopes", {h}, DType::f32));
    *batch_stride = 0;
  }
  *slopes = static_cast<const float*>(t.data);
  return Status::Ok();
}

// Checks the values of cu_seqlens (host copy): starts at 0, non-decreasing, ends at `total`. Returns the longest.
Status check_cu_seqlens(const std::string& name, const char* arg, const std::vector<int32_t>& cu, int64_t total,
                        const char* total_name, int64_t* longest) {
  const std::string a(arg);
  if (cu[0] != 0) return invalid_argument(name + ": " + a + "[0] must be 0, got " + std::to_string(cu[0]));
  *longest = 0;
  for (size_t i = 1; i < cu.size(); ++i) {
    if (cu[i] < cu[i - 1])
      return invalid_argument(name + ": " + a + " must be non-decreasing, got " + a + "[" + std::to_string(i) +
                              "] = " + std::to_string(cu[i]) + " < " + a + "[" + std::to_string(i - 1) +
                              "] = " + std::to_string(cu[i - 1]));
    *longest = std::max<int64_t>(*longest, cu[i] - cu[i - 1]);
  }
  if (cu.back() != total)
    return invalid_argument(name + ": " + a + "[batch] must equal " + total_name + " = " + std::to_string(total) +
                            ", got " + std::to_string(cu.back()));
  return Status::Ok();
}

// Reads a small i32 tensor (cu_seqlens) to the host: directly on the CPU, one copy on the stream on CUDA.
Status read_i32(const TensorView& t, Stream stream, std::vector<int32_t>* out) {
  out->resize(static_cast<size_t>(t.numel()));
  if (t.device.type == DeviceType::cpu) {
    const auto* p = static_cast<const int32_t*>(t.data);
    out->assign(p, p + t.numel());
    return Status::Ok();
  }
  return copy_to_host(out->data(), t.data, out->size() * sizeof(int32_t), t.device.index, stream);
}

// A head tensor of a call, for the row checks: its pointer, strides and element size (an e4m3 cache's: 1 byte).
struct RowTensor {
  const char* arg;
  const void* ptr;
  HeadStrides st;
  int64_t elem = 2;
};

// The checks prefill, decode and write_kv_cache share: dtypes the kernels have (named by the first tensor, which fixes
// the call's dtype), the profile's dtypes, and (CUDA) 16-byte rows.
Status check_common(const std::string& name, DType dtype, Device device, const DeviceProfile* profile,
                    std::initializer_list<RowTensor> tensors) {
  const std::string first = tensors.size() ? tensors.begin()->arg : "q";
  if (dtype != DType::f16 && dtype != DType::bf16)
    return invalid_argument(name + ": " + first + " dtype " + dt(dtype) + " is not supported (expected f16 or bf16)");
  if (profile && device.type == DeviceType::cuda && !profile->supports(dtype))
    return unsupported(name + ": " + first + " dtype " + dt(dtype) + " " + profile->dtype_refusal(dtype));
  if (device.type == DeviceType::cuda)
    for (const RowTensor& t : tensors) {
      if (reinterpret_cast<uintptr_t>(t.ptr) % 16 != 0)
        return unsupported(name + ": " + t.arg + " must be 16-byte aligned on CUDA (the kernels copy 16-byte rows)");
      for (int64_t s : {t.st.batch, t.st.token, t.st.head})
        if (s * t.elem % 16 != 0)
          return unsupported(name + ": " + t.arg + " strides must be multiples of " + std::to_string(16 / t.elem) +
                             " elements on CUDA (16-byte rows), got " + std::to_string(s));
    }
  return Status::Ok();
}

// An e4m3 cache (`arg`: the first cache tensor) on CUDA needs a profile with FP8: the dtype refusal of the others.
Status check_fp8_profile(const std::string& name, const char* arg, Device device, const DeviceProfile* profile) {
  if (profile && device.type == DeviceType::cuda && !profile->supports(DType::f8e4m3))
    return unsupported(name + ": " + arg + " dtype f8e4m3 " + profile->dtype_refusal(DType::f8e4m3));
  return Status::Ok();
}

// The cache dtype of a call whose activations are `dtype`: the same, or f8e4m3 (e5m2 is refused as unsupported).
Status cache_dtype(const std::string& name, const char* arg, DType cache, DType dtype, DType* out) {
  if (is_fp8(cache) && cache != DType::f8e4m3)
    return unsupported(name + ": " + arg + " dtype " + dt(cache) +
                       " is not supported (an FP8 cache is f8e4m3, with its k_scale / v_scale)");
  *out = cache == DType::f8e4m3 ? cache : dtype;
  return Status::Ok();
}

// An e4m3 cache's scales (f32 [1] or [kv_heads] on the call's device) into *s and, when asked, their counts into *nk,
// *nv; with an f16 / bf16 cache (`fp8` false) they must be absent. `prefix`: "cache." for decode's KvCache fields.
Status resolve_cache_scales(const AttnChecker& c, const std::string& prefix, bool fp8, const char* cache_arg,
                            const std::optional<TensorView>& k_scale, const std::optional<TensorView>& v_scale,
                            int64_t kv_heads, CacheScales* s, int64_t* nk = nullptr, int64_t* nv = nullptr) {
  for (const auto& [t, which, ptr, stride, count] : {std::tuple{&k_scale, "k_scale", &s->k, &s->k_stride, nk},
                                                     std::tuple{&v_scale, "v_scale", &s->v, &s->v_stride, nv}}) {
    const std::string arg = prefix + which;
    if (!fp8) {
      if (t->has_value())
        return c.err(arg.c_str(), std::string("is for f8e4m3 caches only (") + cache_arg + " is not e4m3)");
      continue;
    }
    if (!t->has_value())
      return c.err(arg.c_str(), std::string("is required with an f8e4m3 cache (stored code * scale = value)"));
    const TensorView& v = **t;
    if (v.ndim != 1 || (v.size(0) != 1 && v.size(0) != kv_heads))
      return c.err(arg.c_str(), "shape " + v.shape_string() + " must be [1] (per tensor) or [kv_heads=" +
                                    std::to_string(kv_heads) + "] (per KV head)");
    KK_RETURN_IF_ERROR(c.tensor(v, arg.c_str(), {{v.size(0) == 1 ? "1" : "kv_heads", v.size(0)}}, DType::f32));
    *ptr = static_cast<const float*>(v.data);
    *stride = v.size(0) == 1 ? 0 : v.strides[0];
    if (count) *count = v.size(0);
  }
  return Status::Ok();
}

// An e4m3 cache on CUDA: a profile with FP8, and head_dim a multiple of 16 (the kernels convert 16 codes at a time).
Status check_fp8_cache(const std::string& name, const char* arg, Device device, const DeviceProfile* profile,
                       int64_t head_dim) {
  KK_RETURN_IF_ERROR(check_fp8_profile(name, arg, device, profile));
  if (device.type == DeviceType::cuda && head_dim % 16 != 0)
    return unsupported(name + ": an e4m3 cache needs head_dim a multiple of 16 on CUDA (rows of 16-byte chunks), got " +
                       std::to_string(head_dim));
  return Status::Ok();
}

}  // namespace

Status validate_attention(const AttentionArgs& a, const DeviceProfile* profile) {
  const std::string name(op_info(a.op).name);
  const auto ce = static_cast<int64_t>(dtype_size(a.kv_dtype));
  KK_RETURN_IF_ERROR(
      check_common(name, a.dtype, a.device, profile,
                   {{"q", a.q, a.q_st}, {"k", a.k, a.k_st, ce}, {"v", a.v, a.v_st, ce}, {"out", a.out, a.o_st}}));
  KK_RETURN_IF_ERROR(check_head_dim(name, a.head_dim));
  if (a.kv_dtype != a.dtype) KK_RETURN_IF_ERROR(check_fp8_cache(name, "k", a.device, profile, a.head_dim));
  return check_heads(name, a.heads, a.kv_heads);
}

Status validate_kv_write(const KvWriteArgs& a, const DeviceProfile* profile) {
  const std::string name(op_info(a.op).name);
  const auto ce = static_cast<int64_t>(dtype_size(a.cache_dtype));
  KK_RETURN_IF_ERROR(check_common(name, a.dtype, a.device, profile,
                                  {{"k", a.k, a.k_st},
                                   {"v", a.v, a.v_st},
                                   {"k_cache", a.k_cache, a.kc_st, ce},
                                   {"v_cache", a.v_cache, a.vc_st, ce}}));
  return a.cache_dtype != a.dtype ? check_fp8_profile(name, "k_cache", a.device, profile) : Status::Ok();
}

Status validate_decode(const DecodeArgs& a, const DeviceProfile* profile) {
  const std::string name(op_info(a.op).name);
  const auto ce = static_cast<int64_t>(dtype_size(a.kv_dtype));
  KK_RETURN_IF_ERROR(check_common(
      name, a.dtype, a.device, profile,
      {{"q", a.q, a.q_st}, {"cache.k", a.k, a.k_st, ce}, {"cache.v", a.v, a.v_st, ce}, {"out", a.out, a.o_st}}));
  KK_RETURN_IF_ERROR(check_head_dim(name, a.head_dim));
  if (a.kv_dtype != a.dtype) KK_RETURN_IF_ERROR(check_fp8_cache(name, "cache.k", a.device, profile, a.head_dim));
  return check_heads(name, a.heads, a.kv_heads);
}

}  // namespace detail

Status attention(const TensorView& out, const std::optional<TensorView>& lse, const TensorView& q, const TensorView& k,
                 const TensorView& v, const AttentionOptions& o, Stream stream) {
  using detail::Dim;
  detail::AttentionArgs a;
  const std::string name = "attention";
  detail::AttnChecker c(OpId::attention, q);
  a.dtype = q.dtype;
  a.device = q.device;
  KK_RETURN_IF_ERROR(detail::cache_dtype(name, "k", k.dtype, q.dtype, &a.kv_dtype));
  const bool fp8 = a.kv_dtype == DType::f8e4m3;
  const std::optional<DType> kv_dtype = fp8 ? std::optional(a.kv_dtype) : std::nullopt;  // else q's, the default
  a.varlen = o.cu_seqlens_q.has_value() || o.cu_seqlens_k.has_value();
  if (o.cu_seqlens_q.has_value() != o.cu_seqlens_k.has_value())
    return c.err(o.cu_seqlens_q ? "options.cu_seqlens_k" : "options.cu_seqlens_q",
                 "is missing: varlen needs both cu_seqlens_q and cu_seqlens_k");
  if (!a.varlen && (o.max_seqlen_q || o.max_seqlen_k))
    return c.err(o.max_seqlen_q ? "options.max_seqlen_q" : "options.max_seqlen_k",
                 "is for packed varlen batches (with cu_seqlens_q / cu_seqlens_k) only");
  const int want_ndim = a.varlen ? 3 : 4;
  if (q.ndim != want_ndim)
    return c.err("q", "must have " + std::to_string(want_ndim) + " dims " +
                          (a.varlen ? "[total_q, heads, head_dim]" : "[batch, s_q, heads, head_dim]") + ", got " +
                          q.shape_string());
  if (k.ndim != want_ndim)
    return c.err("k", "must have " + std::to_string(want_ndim) + " dims " +
                          (a.varlen ? "[total_k, kv_heads, head_dim]" : "[batch, s_k, kv_heads, head_dim]") + ", got " +
                          k.shape_string());
  a.head_dim = q.size(-1);
  a.heads = q.size(-2);
  a.kv_heads = k.size(-2);
  KK_RETURN_IF_ERROR(detail::check_head_dim(name, a.head_dim));
  KK_RETURN_IF_ERROR(detail::check_heads(name, a.heads, a.kv_heads));
  const Dim h{"heads", a.heads}, hk{"kv_heads", a.kv_heads}, d{"head_dim", a.head_dim};
  if (a.varlen) {
    const int64_t total_q = q.size(0), total_k = k.size(0);
    const TensorView& cq = *o.cu_seqlens_q;
    const TensorView& ck = *o.cu_seqlens_k;
    if (cq.ndim != 1 || cq.size(0) < 1)
      return c.err("options.cu_seqlens_q", "must have shape [batch + 1], got " + cq.shape_string());
    a.batch = cq.size(0) - 1;
    const Dim b1{"batch + 1", a.batch + 1};
    KK_RETURN_IF_ERROR(c.tensor(q, "q", {{"total_q", total_q}, h, d}));
    KK_RETURN_IF_ERROR(c.tensor(k, "k", {{"total_k", total_k}, hk, d}, kv_dtype));
    KK_RETURN_IF_ERROR(c.tensor(v, "v", {{"total_k", total_k}, hk, d}, kv_dtype));
    KK_RETURN_IF_ERROR(c.tensor(out, "out", {{"total_q", total_q}, h, d}));
    KK_RETURN_IF_ERROR(c.tensor(cq, "options.cu_seqlens_q", {b1}, DType::i32));
    KK_RETURN_IF_ERROR(c.tensor(ck, "options.cu_seqlens_k", {b1}, DType::i32));
    if (lse) {
      KK_RETURN_IF_ERROR(c.tensor(*lse, "lse", {h, {"total_q", total_q}}, DType::f32));
      KK_RETURN_IF_ERROR(c.contiguous(*lse, "lse"));
    }
    for (const auto& [arg, total] : {std::pair{"q", total_q}, std::pair{"k", total_k}})
      if (total > INT32_MAX)
        return c.err(arg, "has " + std::to_string(total) + " packed tokens, more than int32 cu_seqlens can index");
    if (o.max_seqlen_q.has_value() != o.max_seqlen_k.has_value())
      return c.err(o.max_seqlen_q ? "options.max_seqlen_k" : "options.max_seqlen_q",
                   "is missing: give both max_seqlen_q and max_seqlen_k, or neither");
    const bool given = o.max_seqlen_q.has_value();
    for (const auto& [arg, max, total] : {std::tuple{"options.max_seqlen_q", o.max_seqlen_q, total_q},
                                          std::tuple{"options.max_seqlen_k", o.max_seqlen_k, total_k}}) {
      if (given && *max < 0) return c.err(arg, "= " + std::to_string(*max) + " must be >= 0");
      if (given && total > 0 && (*max == 0 || a.batch == 0))  // the grid would be empty and the tokens unread
        return c.err(arg, "= " + std::to_string(*max) + " with " + std::to_string(a.batch) +
                              " sequences cannot hold " + std::to_string(total) + " packed tokens");
    }
    if (given && a.device.type == DeviceType::cuda) {
      // The kernels check the entries against these on the device; an upper bound past the packed count (a model's
      // longest context, say) sizes the grid by the count.
      a.s_q = std::min(*o.max_seqlen_q, total_q);
      a.s_k = std::min(*o.max_seqlen_k, total_k);
    } else {
      std::vector<int32_t> hq, hk2;
      KK_RETURN_IF_ERROR(detail::read_i32(cq, stream, &hq));
      KK_RETURN_IF_ERROR(detail::read_i32(ck, stream, &hk2));
      KK_RETURN_IF_ERROR(
          detail::check_cu_seqlens(name, "options.cu_seqlens_q", hq, total_q, "total_q (q dim 0)", &a.s_q));
      KK_RETURN_IF_ERROR(
          detail::check_cu_seqlens(name, "options.cu_seqlens_k", hk2, total_k, "total_k (k dim 0)", &a.s_k));
      for (const auto& [arg, max, longest] : {std::tuple{"options.max_seqlen_q", o.max_seqlen_q, a.s_q},
                                              std::tuple{"options.max_seqlen_k", o.max_seqlen_k, a.s_k}})
        if (given && *max < longest)
          return c.err(arg, "= " + std::to_string(*max) + " is less than the longest sequence's " +
                                std::to_string(longest) + " tokens");
    }
    a.cu_q = static_cast<const int32_t*>(cq.data);
    a.cu_k = static_cast<const int32_t*>(ck.data);
    a.rows = total_q;
    a.total_k = total_k;
    a.lse_batch = 0;
    a.lse_head = total_q;
  } else {
    a.batch = q.size(0);
    a.s_q = q.size(1);
    a.s_k = k.size(1);
    const Dim b{"batch", a.batch}, sq{"s_q", a.s_q}, sk{"s_k", a.s_k};
    KK_RETURN_IF_ERROR(c.tensor(q, "q", {b, sq, h, d}));
    KK_RETURN_IF_ERROR(c.tensor(k, "k", {b, sk, hk, d}, kv_dtype));
    KK_RETURN_IF_ERROR(c.tensor(v, "v", {b, sk, hk, d}, kv_dtype));
    KK_RETURN_IF_ERROR(c.tensor(out, "out", {b, sq, h, d}));
    if (lse) {
      KK_RETURN_IF_ERROR(c.tensor(*lse, "lse", {b, h, sq}, DType::f32));
      KK_RETURN_IF_ERROR(c.contiguous(*lse, "lse"));
    }
    a.rows = a.batch * a.s_q;
    a.lse_batch = a.heads * a.s_q;
    a.lse_head = a.s_q;
  }
  a.q = q.data;
  a.k = k.data;
  a.v = v.data;
  a.out = out.data;
  a.lse = lse ? static_cast<float*>(lse->data) : nullptr;
  a.q_st = detail::head_strides(q);
  a.k_st = detail::head_strides(k);
  a.v_st = detail::head_strides(v);
  a.o_st = detail::head_strides(out);
  a.causal = o.causal;
  KK_RETURN_IF_ERROR(
      detail::resolve_cache_scales(c, "options.", fp8, "k", o.k_scale, o.v_scale, a.kv_heads, &a.scales));
  KK_RETURN_IF_ERROR(detail::resolve_scale(name, o.scale, a.head_dim, &a.scale));
  KK_RETURN_IF_ERROR(detail::resolve_masks(name, o, a.scale, &a.window_left, &a.softcap));
  KK_RETURN_IF_ERROR(detail::resolve_alibi(c, o, a.batch, a.heads, &a.alibi, &a.alibi_batch));
  const auto opt = [](const std::optional<TensorView>& t) { return t ? &*t : nullptr; };
  KK_RETURN_IF_ERROR(detail::check_no_overlap(name, {{&out, "out"}, {opt(lse), "lse"}},
                                              {{&q, "q"},
                                               {&k, "k"},
                                               {&v, "v"},
                                               {opt(o.cu_seqlens_q), "options.cu_seqlens_q"},
                                               {opt(o.cu_seqlens_k), "options.cu_seqlens_k"},
                                               {opt(o.alibi_slopes), "options.alibi_slopes"},
                                               {opt(o.k_scale), "options.k_scale"},
                                               {opt(o.v_scale), "options.v_scale"}}));
  return detail::run_row_op(a, stream, detail::validate_attention, detail::attention_reference,
                            detail::attention_cuda);
}

Status decode_attention(const TensorView& out, const std::optional<TensorView>& lse, const TensorView& q,
                        const KvCache& cache, const AttentionOptions& o, Stream stream) {
  using detail::Dim;
  detail::DecodeArgs a;
  const std::string name = "decode_attention";
  detail::AttnChecker c(OpId::decode_attention, q);
  if (o.cu_seqlens_q || o.cu_seqlens_k || o.max_seqlen_q || o.max_seqlen_k)
    return c.err(o.cu_seqlens_q || o.cu_seqlens_k ? "options.cu_seqlens_q/k" : "options.max_seqlen_q/k",
                 "are not used by decode; give each sequence's length in cache.seqlens_k");
  if (o.k_scale || o.v_scale)
    return c.err(o.k_scale ? "options.k_scale" : "options.v_scale",
                 "is for attention's e4m3 k / v; decode's e4m3 cache takes its scales in cache.k_scale / v_scale");
  if (q.ndim != 4) return c.err("q", "must have 4 dims [batch, s_q, heads, head_dim], got " + q.shape_string());
  const TensorView& k = cache.k;
  if (k.ndim != 4)
    return c.err("cache.k", std::string("must have 4 dims ") +
                                (cache.block_table ? "[num_pages, page_size, kv_heads, head_dim]"
                                                   : "[batch, capacity, kv_heads, head_dim]") +
                                ", got " + k.shape_string());
  a.dtype = q.dtype;
  a.device = q.device;
  a.batch = q.size(0);
  a.s_q = q.size(1);
  a.heads = q.size(2);
  a.head_dim = q.size(3);
  a.kv_heads = k.size(2);
  KK_RETURN_IF_ERROR(detail::check_head_dim(name, a.head_dim));
  KK_RETURN_IF_ERROR(detail::check_heads(name, a.heads, a.kv_heads));
  const Dim b{"batch", a.batch}, sq{"s_q", a.s_q}, h{"heads", a.heads}, hk{"kv_heads", a.kv_heads},
      d{"head_dim", a.head_dim};
  KK_RETURN_IF_ERROR(c.tensor(q, "q", {b, sq, h, d}));
  KK_RETURN_IF_ERROR(c.tensor(out, "out", {b, sq, h, d}));
  KK_RETURN_IF_ERROR(detail::cache_dtype(name, "cache.k", k.dtype, q.dtype, &a.kv_dtype));
  const bool fp8 = a.kv_dtype == DType::f8e4m3;
  const std::optional<DType> kv_dtype = fp8 ? std::optional(a.kv_dtype) : std::nullopt;  // else q's, the default
  a.paged = cache.block_table.has_value();
  if (a.paged) {
    const TensorView& bt = *cache.block_table;
    a.num_pages = k.size(0);
    a.page_size = k.size(1);
    if (a.page_size < 1 || a.page_size > KvCache::kMaxPageSize || (a.page_size & (a.page_size - 1)) != 0)
      return unsupported(name + ": cache.k page size (dim 1) must be a power of two up to " +
                         std::to_string(KvCache::kMaxPageSize) + ", got " + std::to_string(a.page_size));
    if (bt.ndim != 2) return c.err("cache.block_table", "must have shape [batch, max_pages], got " + bt.shape_string());
    a.max_pages = bt.size(1);
    KK_RETURN_IF_ERROR(c.tensor(bt, "cache.block_table", {b, {"max_pages", a.max_pages}}, DType::i32));
    a.block_table = static_cast<const int32_t*>(bt.data);
    a.block_table_stride = bt.strides[0];
    a.capacity = a.max_pages * a.page_size;
    const Dim np{"num_pages", a.num_pages}, ps{"page_size", a.page_size};
    KK_RETURN_IF_ERROR(c.tensor(k, "cache.k", {np, ps, hk, d}, kv_dtype));
    KK_RETURN_IF_ERROR(c.tensor(cache.v, "cache.v", {np, ps, hk, d}, kv_dtype));
  } else {
    a.capacity = k.size(1);
    const Dim cap{"capacity", a.capacity};
    KK_RETURN_IF_ERROR(c.tensor(k, "cache.k", {b, cap, hk, d}, kv_dtype));
    KK_RETURN_IF_ERROR(c.tensor(cache.v, "cache.v", {b, cap, hk, d}, kv_dtype));
  }
  KK_RETURN_IF_ERROR(
      detail::resolve_cache_scales(c, "cache.", fp8, "cache.k", cache.k_scale, cache.v_scale, a.kv_heads, &a.scales));
  if (cache.seqlens_k) {
    KK_RETURN_IF_ERROR(c.tensor(*cache.seqlens_k, "cache.seqlens_k", {b}, DType::i32));
    KK_RETURN_IF_ERROR(c.contiguous(*cache.seqlens_k, "cache.seqlens_k"));
    a.seqlens = static_cast<const int32_t*>(cache.seqlens_k->data);
  } else if (a.paged) {
    return c.err("cache.seqlens_k", "is required with a paged cache (block_table)");
  }
  if (lse) {
    KK_RETURN_IF_ERROR(c.tensor(*lse, "lse", {b, h, sq}, DType::f32));
    KK_RETURN_IF_ERROR(c.contiguous(*lse, "lse"));
    a.lse = static_cast<float*>(lse->data);
  }
  // The CPU backend checks every length and page it will read here; the CUDA kernels check them on the device
  // (reading them back would cost a synchronization per decode step) and record a bad one for check_errors.
  if (a.device.type == DeviceType::cpu) {
    for (int64_t i = 0; i < a.batch && a.seqlens; ++i) {
      const int64_t len = a.seqlens[i];
      if (len < 0 || len > a.capacity)
        return detail::device_check_error(OpId::decode_attention, detail::DeviceCheck::seqlens_k, i, -1, len,
                                          a.capacity);
      // The pages from the first key any query sees (first_visible_key: evicted pages before it are never read).
      const int64_t first = detail::first_visible_key(len, a.s_q, o.window_left);
      for (int64_t p = first / std::max<int64_t>(a.page_size, 1); a.paged && p * a.page_size < len; ++p) {
        const int64_t page = a.block_table[i * a.block_table_stride + p];
        if (page < 0 || page >= a.num_pages)
          return detail::device_check_error(OpId::decode_attention, detail::DeviceCheck::block_table, i, p, page,
                                            a.num_pages);
      }
    }
  }
  a.rows = a.batch * a.s_q;
  a.q = q.data;
  a.k = k.data;
  a.v = cache.v.data;
  a.out = out.data;
  a.q_st = detail::head_strides(q);
  a.k_st = detail::head_strides(k);
  a.v_st = detail::head_strides(cache.v);
  a.o_st = detail::head_strides(out);
  a.causal = o.causal;
  KK_RETURN_IF_ERROR(detail::resolve_scale(name, o.scale, a.head_dim, &a.scale));
  KK_RETURN_IF_ERROR(detail::resolve_masks(name, o, a.scale, &a.window_left, &a.softcap));
  KK_RETURN_IF_ERROR(detail::resolve_alibi(c, o, a.batch, a.heads, &a.alibi, &a.alibi_batch));
  const auto opt = [](const std::optional<TensorView>& t) { return t ? &*t : nullptr; };
  KK_RETURN_IF_ERROR(detail::check_no_overlap(name, {{&out, "out"}, {opt(lse), "lse"}},
                                              {{&q, "q"},
                                               {&cache.k, "cache.k"},
                                               {&cache.v, "cache.v"},
                                               {opt(cache.block_table), "cache.block_table"},
                                               {opt(cache.seqlens_k), "cache.seqlens_k"},
                                               {opt(o.alibi_slopes), "options.alibi_slopes"},
                                               {opt(cache.k_scale), "cache.k_scale"},
                                               {opt(cache.v_scale), "cache.v_scale"}}));
  return detail::run_row_op(a, stream, detail::validate_decode, detail::decode_reference,
                            detail::decode_attention_cuda);
}

Status write_kv_cache(const TensorView& k_cache, const TensorView& v_cache, const TensorView& k, const TensorView& v,
                      const TensorView& slot_mapping, const std::optional<KvWriteRope>& rope,
                      const std::optional<TensorView>& k_scale, const std::optional<TensorView>& v_scale,
                      Stream stream) {
  using detail::Dim;
  detail::KvWriteArgs a;
  const std::string name = "write_kv_cache";
  detail::AttnChecker c(OpId::write_kv_cache, k, "k");
  if (k.ndim != 3) return c.err("k", "must have 3 dims [tokens, kv_heads, head_dim], got " + k.shape_string());
  if (k_cache.ndim != 4)
    return c.err("k_cache",
                 "must have 4 dims [batch, capacity, kv_heads, head_dim] or [num_pages, page_size, "
                 "kv_heads, head_dim], got " +
                     k_cache.shape_string());
  a.dtype = k.dtype;
  a.device = k.device;
  a.tokens = k.size(0);
  a.kv_heads = k.size(1);
  a.head_dim = k.size(2);
  KK_RETURN_IF_ERROR(detail::check_head_dim(name, a.head_dim, "k"));
  const Dim t{"tokens", a.tokens}, hk{"kv_heads", a.kv_heads}, d{"head_dim", a.head_dim}, n0{"dim 0", k_cache.size(0)},
      n1{"dim 1", k_cache.size(1)};
  KK_RETURN_IF_ERROR(c.tensor(k, "k", {t, hk, d}));
  KK_RETURN_IF_ERROR(c.tensor(v, "v", {t, hk, d}));
  KK_RETURN_IF_ERROR(detail::cache_dtype(name, "k_cache", k_cache.dtype, k.dtype, &a.cache_dtype));
  const bool fp8 = a.cache_dtype == DType::f8e4m3;
  const std::optional<DType> cache_dtype = fp8 ? std::optional(a.cache_dtype) : std::nullopt;  // else k's
  KK_RETURN_IF_ERROR(c.tensor(k_cache, "k_cache", {n0, n1, hk, d}, cache_dtype));
  KK_RETURN_IF_ERROR(c.tensor(v_cache, "v_cache", {n0, n1, hk, d}, cache_dtype));
  KK_RETURN_IF_ERROR(detail::resolve_cache_scales(c, "", fp8, "k_cache", k_scale, v_scale, a.kv_heads, &a.scales,
                                                  &a.k_scales, &a.v_scales));
  if (slot_mapping.dtype != DType::i32 && slot_mapping.dtype != DType::i64)
    return c.err("slot_mapping", "dtype " + detail::dt(slot_mapping.dtype) + " must be i32 or i64");
  KK_RETURN_IF_ERROR(c.tensor(slot_mapping, "slot_mapping", {t}, slot_mapping.dtype));
  KK_RETURN_IF_ERROR(c.contiguous(slot_mapping, "slot_mapping"));
  a.k = k.data;
  a.v = v.data;
  a.k_st = detail::head_strides(k);
  a.v_st = detail::head_strides(v);
  a.k_cache = k_cache.data;
  a.v_cache = v_cache.data;
  a.kc_st = detail::head_strides(k_cache);
  a.vc_st = detail::head_strides(v_cache);
  a.block = k_cache.size(1);
  a.slots = k_cache.size(0) * k_cache.size(1);
  a.slot_mapping = slot_mapping.data;
  a.slot_dtype = slot_mapping.dtype;
  if (rope) {
    // The rope family's checks (q, q_out, positions, cos_sin_cache against k), named by this op; k is its own k_out
    // there (the rotated k goes to the cache).
    a.rope = true;
    a.r.op = OpId::write_kv_cache;
    KK_RETURN_IF_ERROR(
        detail::rope_cache_args(rope->q_out, k, rope->q, k, rope->positions, rope->cos_sin_cache, rope->style, &a.r));
    a.r.k_out = nullptr;
  }
  // The CPU backend checks every slot here (before writing anything); the CUDA kernel checks them on the device and
  // records a bad one for check_errors.
  if (a.device.type == DeviceType::cpu) {
    for (int64_t i = 0; i < a.tokens; ++i) {
      const int64_t slot = detail::host_slot(a, i);
      if (slot < -1 || slot >= a.slots)
        return detail::device_check_error(OpId::write_kv_cache, detail::DeviceCheck::slot_mapping, i, -1, slot,
                                          a.slots);
    }
    // The e4m3 caches' scales divide every value: finite and > 0 (CUDA records a bad one).
    for (const auto& [scales, n, stride, check] :
         {std::tuple{a.scales.k, a.k_scales, a.scales.k_stride, detail::DeviceCheck::k_scale},
          std::tuple{a.scales.v, a.v_scales, a.scales.v_stride, detail::DeviceCheck::v_scale}})
      for (int64_t i = 0; i < n; ++i)
        if (const float s = scales[i * stride]; !(std::isfinite(s) && s > 0.0f))
          return detail::device_check_error(OpId::write_kv_cache, check, i, -1, std::bit_cast<uint32_t>(s), 0);
  }
  KK_RETURN_IF_ERROR(detail::check_no_overlap(
      name, {{&k_cache, "k_cache"}, {&v_cache, "v_cache"}, {rope ? &rope->q_out : nullptr, "q_out"}},
      {{&k, "k"},
       {&v, "v"},
       {&slot_mapping, "slot_mapping"},
       {rope ? &rope->q : nullptr, "q"},
       {rope ? &rope->positions : nullptr, "positions"},
       {rope ? &rope->cos_sin_cache : nullptr, "cos_sin_cache"},
       {k_scale ? &*k_scale : nullptr, "k_scale"},
       {v_scale ? &*v_scale : nullptr, "v_scale"}},
      {{"q_out", "q"}}));
  return detail::run_op(name, a, detail::kv_write_rows(a), stream, detail::validate_kv_write,
                        detail::kv_write_reference, detail::write_kv_cache_cuda);
}

}  // namespace kernelkit

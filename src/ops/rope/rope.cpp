// rotary_embedding: TensorViews -> one RopeArgs (every argument checked and named), then the CPU reference or the
// CUDA kernel through the shared row-op dispatcher.
#include "ops/rope/rope.hpp"

#include <cmath>

#include "runtime/op_args.hpp"
#include "runtime/overlap.hpp"

namespace kernelkit {
namespace detail {
namespace {

// An error named by the op the arguments are checked for (rotary_embedding, or write_kv_cache's fused RoPE).
Status err(OpId op, const std::string& what) { return invalid_argument(std::string(op_info(op).name) + ": " + what); }

// [tokens, heads, head_dim] with a contiguous last dim; strides of the first two dims are free (fused-qkv slices).
Status head_tensor(OpId op, const TensorView& t, const char* arg, const TensorView* like, int64_t* tok, int64_t* head) {
  if (t.ndim != 3)
    return err(op, std::string(arg) + " must have shape [tokens, heads, head_dim], got " + t.shape_string());
  if (like && (t.shape[0] != like->shape[0] || t.shape[2] != like->shape[2] || t.dtype != like->dtype ||
               !(t.device == like->device)))
    return err(op, std::string(arg) + " " + t.shape_string() + " " + std::string(dtype_name(t.dtype)) + " on " +
                       to_string(t.device) + " must match q in tokens, head_dim, dtype and device (q is " +
                       like->shape_string() + " " + std::string(dtype_name(like->dtype)) + " on " +
                       to_string(like->device) + ")");
  if (t.shape[2] > 1 && t.strides[2] != 1)
    return err(op, std::string(arg) + " must have a contiguous last dim (stride 1), got stride " +
                       std::to_string(t.strides[2]));
  if (t.data == nullptr && t.numel() > 0) return err(op, std::string(arg) + " is a null pointer");
  *tok = t.strides[0];
  *head = t.strides[1];
  return Status::Ok();
}

Status check_cos_sin_dtype(OpId op, const TensorView& t, const char* arg, DType q) {
  if (t.dtype != DType::f32 && t.dtype != q)
    return err(op, std::string(arg) + " dtype " + std::string(dtype_name(t.dtype)) + " must be f32 or q's dtype " +
                       std::string(dtype_name(q)));
  return Status::Ok();
}

// Common part of both overloads: q, k, outputs; fills the geometry and alignment.
Status build_heads(const TensorView& q_out, const TensorView& k_out, const TensorView& q, const TensorView& k,
                   RopeArgs* a) {
  KK_RETURN_IF_ERROR(head_tensor(a->op, q, "q", nullptr, &a->q_tok, &a->q_head));
  KK_RETURN_IF_ERROR(head_tensor(a->op, k, "k", &q, &a->k_tok, &a->k_head));
  KK_RETURN_IF_ERROR(head_tensor(a->op, q_out, "q_out", &q, &a->qo_tok, &a->qo_head));
  KK_RETURN_IF_ERROR(head_tensor(a->op, k_out, "k_out", &q, &a->ko_tok, &a->ko_head));
  if (q_out.shape[1] != q.shape[1])
    return err(a->op,
               "q_out heads " + std::to_string(q_out.shape[1]) + " must equal q's " + std::to_string(q.shape[1]));
  if (k_out.shape[1] != k.shape[1])
    return err(a->op,
               "k_out heads " + std::to_string(k_out.shape[1]) + " must equal k's " + std::to_string(k.shape[1]));
  a->dtype = q.dtype;
  a->device = q.device;
  a->tokens = q.shape[0];
  a->heads = q.shape[1];
  a->kv_heads = k.shape[1];
  a->head_dim = q.shape[2];
  a->rows = a->tokens * (a->heads + a->kv_heads);
  a->q = q.data;
  a->k = k.data;
  a->q_out = q_out.data;
  a->k_out = k_out.data;
  const int64_t e = static_cast<int64_t>(dtype_size(q.dtype));
  for (const void* p : {q.data, k.data, q_out.data, k_out.data})
    a->align_bytes = std::min(a->align_bytes, pow2_align(reinterpret_cast<uintptr_t>(p)));
  for (int64_t s : {a->q_tok, a->q_head, a->k_tok, a->k_head, a->qo_tok, a->qo_head, a->ko_tok, a->ko_head})
    a->align_bytes = std::min(a->align_bytes, pow2_align(static_cast<uint64_t>(s * e)));
  return Status::Ok();
}

Status check_rot_dim(RopeArgs* a) {
  if (a->rot_dim <= 0 || a->rot_dim % 2 != 0 || a->rot_dim > a->head_dim)
    return err(a->op, "rot_dim must be even and in [2, head_dim=" + std::to_string(a->head_dim) + "], got " +
                          std::to_string(a->rot_dim));
  // The unrotated tail is copied by vectors too: its length bounds the alignment.
  const int64_t e = static_cast<int64_t>(dtype_size(a->dtype));
  if (a->rot_dim < a->head_dim)
    a->align_bytes = std::min(a->align_bytes, pow2_align(static_cast<uint64_t>((a->head_dim - a->rot_dim) * e)));
  return Status::Ok();
}

Status run(const RopeArgs& a, Stream stream) {
  return run_row_op(a, stream, validate_rope, rope_reference, rope_cuda);
}

}  // namespace

Status validate_rope(const RopeArgs& a, const DeviceProfile* profile) {
  return check_float_dtype(std::string(op_info(a.op).name), a.dtype, a.device, profile);
}

}  // namespace detail

using detail::RopeArgs;

namespace detail {

Status rope_cache_args(const TensorView& q_out, const TensorView& k_out, const TensorView& q, const TensorView& k,
                       const TensorView& positions, const TensorView& cache, RopeStyle style, RopeArgs* out) {
  RopeArgs& a = *out;
  a.style = style;
  KK_RETURN_IF_ERROR(detail::build_heads(q_out, k_out, q, k, &a));
  if (positions.ndim != 1 || positions.shape[0] != a.tokens)
    return detail::err(
        a.op, "positions must have shape [tokens=" + std::to_string(a.tokens) + "], got " + positions.shape_string());
  if (positions.dtype != DType::i32 && positions.dtype != DType::i64)
    return detail::err(a.op, "positions dtype " + std::string(dtype_name(positions.dtype)) + " must be i32 or i64");
  if (cache.ndim != 2)
    return detail::err(a.op, "cos_sin_cache must have shape [max_position, rot_dim], got " + cache.shape_string());
  KK_RETURN_IF_ERROR(detail::check_cos_sin_dtype(a.op, cache, "cos_sin_cache", a.dtype));
  for (const TensorView* t : {&positions, &cache})
    if (!(t->device == a.device))
      return detail::err(a.op, std::string(t == &positions ? "positions" : "cos_sin_cache") + " is on " +
                                   to_string(t->device) + " but q is on " + to_string(a.device));
  if (positions.shape[0] > 1 && positions.strides[0] != 1) return detail::err(a.op, "positions must be contiguous");
  if (cache.shape[1] > 1 && cache.strides[1] != 1)
    return detail::err(a.op, "cos_sin_cache must have a contiguous last dim");
  if (a.tokens > 0 && (positions.data == nullptr || cache.data == nullptr))
    return detail::err(a.op, "positions and cos_sin_cache must not be null");
  a.rot_dim = cache.shape[1];
  KK_RETURN_IF_ERROR(detail::check_rot_dim(&a));
  a.positions = positions.data;
  a.positions_dtype = positions.dtype;
  a.max_position = cache.shape[0];
  a.cs_dtype = cache.dtype;
  a.cos = cache.data;
  a.sin = cache.data ? static_cast<const char*>(cache.data) + a.rot_dim / 2 * static_cast<int64_t>(dtype_size(cache.dtype))
                     : nullptr;
  a.cs_row = cache.strides[0];
  a.cs_step = 1;
  return Status::Ok();
}

}  // namespace detail

Status rotary_embedding(const TensorView& q_out, const TensorView& k_out, const TensorView& q, const TensorView& k,
                        const TensorView& positions, const TensorView& cache, RopeStyle style, Stream stream) {
  RopeArgs a;
  KK_RETURN_IF_ERROR(detail::rope_cache_args(q_out, k_out, q, k, positions, cache, style, &a));
  KK_RETURN_IF_ERROR(detail::check_no_overlap("rotary_embedding", {{&q_out, "q_out"}, {&k_out, "k_out"}},
                                              {{&q, "q"}, {&k, "k"}, {&positions, "positions"},
                                               {&cache, "cos_sin_cache"}},
                                              {{"q_out", "q"}, {"k_out", "k"}}));
  return detail::run(a, stream);
}

Status rotary_embedding(const TensorView& q_out, const TensorView& k_out, const TensorView& q, const TensorView& k,
                        const TensorView& cos, const TensorView& sin, int64_t rot_dim, RopeStyle style,
                        Stream stream) {
  RopeArgs a;
  a.style = style;
  KK_RETURN_IF_ERROR(detail::build_heads(q_out, k_out, q, k, &a));
  a.rot_dim = rot_dim;
  KK_RETURN_IF_ERROR(detail::check_rot_dim(&a));
  for (const TensorView* t : {&cos, &sin}) {
    const char* arg = t == &cos ? "cos" : "sin";
    if (t->ndim != 2 || t->shape[0] != a.tokens || (t->shape[1] != rot_dim / 2 && t->shape[1] != rot_dim))
      return detail::err(a.op, std::string(arg) + " must have shape [tokens=" + std::to_string(a.tokens) +
                                   ", rot_dim/2=" + std::to_string(rot_dim / 2) +
                                   "] or [tokens, rot_dim=" + std::to_string(rot_dim) + "], got " + t->shape_string());
    KK_RETURN_IF_ERROR(detail::check_cos_sin_dtype(a.op, *t, arg, a.dtype));
    if (!(t->device == a.device))
      return detail::err(a.op,
                         std::string(arg) + " is on " + to_string(t->device) + " but q is on " + to_string(a.device));
    if (t->shape[1] > 1 && t->strides[1] != 1)
      return detail::err(a.op, std::string(arg) + " must have a contiguous last dim");
    if (a.tokens > 0 && t->data == nullptr) return detail::err(a.op, std::string(arg) + " is a null pointer");
  }
  if (cos.shape[1] != sin.shape[1] || cos.dtype != sin.dtype || cos.strides[0] != sin.strides[0])
    return detail::err(a.op, "cos " + cos.shape_string() + " and sin " + sin.shape_string() +
                                 " must have the same shape, dtype and strides");
  a.cs_dtype = cos.dtype;
  a.cos = cos.data;
  a.sin = sin.data;
  a.cs_row = cos.strides[0];
  // Full-width tables repeat each pair's value: neox duplicates the halves (read the first), gptj repeats in pairs.
  a.cs_step = cos.shape[1] == rot_dim && style == RopeStyle::gptj ? 2 : 1;
  KK_RETURN_IF_ERROR(detail::check_no_overlap("rotary_embedding", {{&q_out, "q_out"}, {&k_out, "k_out"}},
                                              {{&q, "q"}, {&k, "k"}, {&cos, "cos"}, {&sin, "sin"}},
                                              {{"q_out", "q"}, {"k_out", "k"}}));
  return detail::run(a, stream);
}

void rope_cos_sin_table(float* table, int64_t max_position, int64_t rot_dim, double theta) {
  const int64_t half = rot_dim / 2;
  for (int64_t m = 0; m < max_position; ++m)
    for (int64_t j = 0; j < half; ++j) {
      const double angle = static_cast<double>(m) * std::pow(theta, -2.0 * static_cast<double>(j) / rot_dim);
      table[m * rot_dim + j] = static_cast<float>(std::cos(angle));
      table[m * rot_dim + half + j] = static_cast<float>(std::sin(angle));
    }
}

}  // namespace kernelkit

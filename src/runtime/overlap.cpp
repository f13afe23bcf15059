#include "runtime/overlap.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace kernelkit::detail {
namespace {

// [lo, hi) in bytes of every element a view can touch.
void extent(const TensorView& t, intptr_t* lo, intptr_t* hi) {
  const auto e = static_cast<intptr_t>(dtype_size(t.dtype));
  intptr_t neg = 0, pos = 0;
  for (int d = 0; d < t.ndim; ++d) {
    const intptr_t span = static_cast<intptr_t>(t.shape[d] - 1) * static_cast<intptr_t>(t.strides[d]) * e;
    (span < 0 ? neg : pos) += span;
  }
  const auto base = reinterpret_cast<intptr_t>(t.data);
  *lo = base + neg;
  *hi = base + pos + e;
}

// rows x width bytes, rows `stride` bytes apart, from `base`: the view's trailing dims as one dense block and its
// leading dims collapsed to one stride. False when the view has no such form.
struct Rows {
  intptr_t base = 0, stride = 0, width = 0;
  int64_t rows = 1;
};
bool as_rows(const TensorView& t, Rows* r) {
  const auto e = static_cast<int64_t>(dtype_size(t.dtype));
  int d = t.ndim - 1;
  int64_t expect = 1, width = 1;
  for (; d >= 0; --d) {  // the dense trailing block
    if (t.shape[d] == 1) continue;
    if (t.strides[d] != expect) break;
    expect *= t.shape[d];
    width *= t.shape[d];
  }
  int64_t rows = 1, stride = 0, next = -1;
  for (; d >= 0; --d) {  // the leading dims: one stride
    if (t.shape[d] == 1) continue;
    if (next < 0) stride = t.strides[d];
    else if (t.strides[d] != next) return false;
    next = t.strides[d] * t.shape[d];
    rows *= t.shape[d];
  }
  if (rows > 1 && (stride <= 0 || stride < width)) return false;  // rows that overlap themselves or run backwards
  *r = {reinterpret_cast<intptr_t>(t.data), static_cast<intptr_t>(stride * e), static_cast<intptr_t>(width * e), rows};
  return true;
}

intptr_t floor_div(intptr_t a, intptr_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Rows a and b share a byte iff some row i of a and j of b meet: with k = i - j and d = b.base - a.base,
// k S - b.width < d < k S + a.width, so k S lies in (d - a.width, d + b.width): at most two multiples of S.
bool rows_meet(const Rows& a, const Rows& b) {
  const intptr_t s = a.rows > 1 ? a.stride : b.stride;
  if (s == 0) return true;  // both one row: their extents met
  const intptr_t d = b.base - a.base;
  for (intptr_t k = floor_div(d - a.width, s) + 1; k * s < d + b.width; ++k)
    if (k > -b.rows && k < a.rows) return true;
  return false;
}

bool same_layout(const TensorView& a, const TensorView& b) {
  if (a.data != b.data || dtype_size(a.dtype) != dtype_size(b.dtype) || a.numel() != b.numel()) return false;
  // Compare the dims of size > 1 (a size-1 dim's stride never moves).
  std::vector<std::pair<int64_t, int64_t>> da, db;
  for (int d = 0; d < a.ndim; ++d)
    if (a.shape[d] != 1) da.emplace_back(a.shape[d], a.strides[d]);
  for (int d = 0; d < b.ndim; ++d)
    if (b.shape[d] != 1) db.emplace_back(b.shape[d], b.strides[d]);
  return da == db;
}

}  // namespace

Overlap memory_overlap(const TensorView& a, const TensorView& b) {
  if (a.data == nullptr || b.data == nullptr || a.numel() == 0 || b.numel() == 0 || !(a.device == b.device))
    return Overlap::none;
  intptr_t alo, ahi, blo, bhi;
  extent(a, &alo, &ahi);
  extent(b, &blo, &bhi);
  if (ahi <= blo || bhi <= alo) return Overlap::none;
  if (same_layout(a, b)) return Overlap::same;
  Rows ra, rb;
  if (as_rows(a, &ra) && as_rows(b, &rb) && (ra.rows == 1 || rb.rows == 1 || ra.stride == rb.stride))
    return rows_meet(ra, rb) ? Overlap::partial : Overlap::none;
  return Overlap::partial;
}

Status check_no_overlap(const std::string& op, std::initializer_list<Named> outputs, std::initializer_list<Named> inputs,
                        std::initializer_list<std::pair<const char*, const char*>> in_place) {
  auto allowed = [&](const char* out, const char* in) {
    return std::any_of(in_place.begin(), in_place.end(), [&](const auto& p) {
      return std::strcmp(p.first, out) == 0 && std::strcmp(p.second, in) == 0;
    });
  };
  auto check = [&](const Named& o, const Named& t) -> Status {
    if (!o.view || !t.view) return Status::Ok();
    const Overlap ov = memory_overlap(*o.view, *t.view);
    if (ov == Overlap::none || (ov == Overlap::same && allowed(o.arg, t.arg))) return Status::Ok();
    return invalid_argument(op + ": " + o.arg + " " +
                            (ov == Overlap::same ? std::string("is ") + t.arg + " (in place), which " + op +
                                                       " does not support; pass a separate output"
                                                 : std::string("partly overlaps ") + t.arg +
                                                       " in memory; an output must be separate from the op's other "
                                                       "tensors (or, where the op allows it, be one of them exactly)"));
  };
  for (auto o = outputs.begin(); o != outputs.end(); ++o) {
    for (const Named& in : inputs) KK_RETURN_IF_ERROR(check(*o, in));
    for (auto o2 = std::next(o); o2 != outputs.end(); ++o2) KK_RETURN_IF_ERROR(check(*o, *o2));
  }
  return Status::Ok();
}

}  // namespace kernelkit::detail

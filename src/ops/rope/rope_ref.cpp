// CPU reference of rotary_embedding: fp64 math on the pairs, one rounding per output; the unrotated tail is copied.
#include <cstring>
#include <vector>

#include "ops/rope/rope.hpp"

namespace kernelkit::detail {

Status rope_reference(const RopeArgs& a) {
  const int64_t half = a.rot_dim / 2;
  std::vector<double> head(static_cast<size_t>(a.head_dim));
  for (int64_t t = 0; t < a.tokens; ++t) {
    int64_t row = t;
    if (a.positions) {
      row = static_cast<int64_t>(load_as_double(a.positions, a.positions_dtype, t));
      if (row < 0 || row >= a.max_position)
        return invalid_argument("rotary_embedding: positions[" + std::to_string(t) + "] = " + std::to_string(row) +
                                " is outside the cache [0, " + std::to_string(a.max_position) + ")");
    }
    for (int64_t h = 0; h < a.heads + a.kv_heads; ++h) {
      const bool is_q = h < a.heads;
      const int64_t hh = is_q ? h : h - a.heads;
      const void* src = is_q ? a.q : a.k;
      void* dst = is_q ? a.q_out : a.k_out;
      const int64_t s = t * (is_q ? a.q_tok : a.k_tok) + hh * (is_q ? a.q_head : a.k_head);
      const int64_t d = t * (is_q ? a.qo_tok : a.ko_tok) + hh * (is_q ? a.qo_head : a.ko_head);
      for (int64_t i = 0; i < a.head_dim; ++i) head[static_cast<size_t>(i)] = load_as_double(src, a.dtype, s + i);
      for (int64_t j = 0; j < half; ++j) {
        const double c = load_as_double(a.cos, a.cs_dtype, row * a.cs_row + j * a.cs_step);
        const double sn = load_as_double(a.sin, a.cs_dtype, row * a.cs_row + j * a.cs_step);
        const int64_t i0 = a.style == RopeStyle::neox ? j : 2 * j;
        const int64_t i1 = a.style == RopeStyle::neox ? j + half : 2 * j + 1;
        const double x0 = head[static_cast<size_t>(i0)], x1 = head[static_cast<size_t>(i1)];
        store_from_double(dst, a.dtype, d + i0, x0 * c - x1 * sn);
        store_from_double(dst, a.dtype, d + i1, x1 * c + x0 * sn);
      }
      for (int64_t i = a.rot_dim; i < a.head_dim; ++i) store_from_double(dst, a.dtype, d + i, head[static_cast<size_t>(i)]);
    }
  }
  return Status::Ok();
}

}  // namespace kernelkit::detail

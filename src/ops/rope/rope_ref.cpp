// CPU reference of rotary_embedding: fp64 math on the pairs, one rounding per output; the unrotated tail is copied.
#include <cstring>
#include <vector>

#include "ops/rope/rope.hpp"
#include "runtime/device_errors.hpp"

namespace kernelkit::detail {

Status rope_reference(const RopeArgs& a) {
  const int64_t half = a.rot_dim / 2;
  std::vector<double> head(static_cast<size_t>(a.head_dim));
  for (int64_t t = 0; t < a.tokens; ++t) {
    int64_t row = t;
    if (a.positions) {
      row = a.positions_dtype == DType::i64 ? static_cast<const int64_t*>(a.positions)[t]
                                            : static_cast<const int32_t*>(a.positions)[t];  // exact, not via double
      if (row < 0 || row >= a.max_position)
        return device_check_error(a.op, DeviceCheck::positions, t, -1, row, a.max_position);
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

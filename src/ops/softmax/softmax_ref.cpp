// CPU reference of softmax / causal_softmax: fp64, exact max subtraction, masked and all -inf rows give zeros.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/softmax/softmax.hpp"

namespace kernelkit::detail {

Status softmax_reference(const SoftmaxArgs& a) {
  std::vector<double> v(static_cast<size_t>(a.hidden));
  for (int64_t r = 0; r < a.rows; ++r) {
    const int64_t limit = a.causal ? r % a.s_q + a.hidden - a.s_q : a.hidden - 1;  // last visible key
    double m = -INFINITY;
    for (int64_t j = 0; j < a.hidden; ++j) {
      const double x = static_cast<double>(a.scale) * load_as_double(a.x, a.dtype, r * a.x_stride + j);
      v[static_cast<size_t>(j)] = j > limit ? -INFINITY : x;
      m = std::max(m, v[static_cast<size_t>(j)]);
    }
    double s = 0;
    if (m != -INFINITY)
      for (double x : v) s += std::exp(x - m);
    for (int64_t j = 0; j < a.hidden; ++j)
      store_from_double(a.out, a.dtype, r * a.out_stride + j,
                        m == -INFINITY ? 0.0 : std::exp(v[static_cast<size_t>(j)] - m) / s);
  }
  return Status::Ok();
}

}  // namespace kernelkit::detail

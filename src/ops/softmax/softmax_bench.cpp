#include "ops/softmax/softmax_bench.hpp"

#include <algorithm>
#include <cmath>

#include "kernelkit/ops/softmax.hpp"

namespace kernelkit::testing {

BenchResult bench_softmax(const DeviceProfile& profile, OpId op, DType dtype, const BenchShape& shape, int runs,
                          int device, double peak_gbps) {
  constexpr float kScale = 0.125f;
  const bool causal = op == OpId::causal_softmax;
  const int64_t d = shape.hidden, rows = shape.rows;
  // causal_softmax: queries per score matrix (the suite's square matrices, or the middle dim of a 3-D shape).
  const int64_t s_q = shape.batch > 1 ? rows / shape.batch : (rows % d == 0 ? d : rows);
  StreamingOp sop;
  sop.run = [=](const TensorView& out, const TensorView& x, const TensorView*, Stream stream) {
    if (!causal) return softmax(out, x, kScale, stream);
    // The device sees [rows / s_q, s_q, d] score matrices.
    const int64_t n = out.shape[0];
    return causal_softmax(TensorView::contiguous(out.data, out.dtype, {n / s_q, s_q, d}, out.device),
                          TensorView::contiguous(x.data, x.dtype, {n / s_q, s_q, d}, x.device), kScale, stream);
  };
  // The reference on the sampled rows: for causal_softmax each row's masked keys are set to -inf and the rows go
  // through the plain softmax reference (the documented equivalence: masked entries are 0, like -inf inputs).
  sop.reference = [=](const TensorView& out, const TensorView& x, const TensorView*, const std::vector<int64_t>& sample) {
    if (causal)
      for (size_t i = 0; i < sample.size(); ++i)
        for (int64_t j = std::max<int64_t>(0, sample[i] % s_q + d - s_q + 1); j < d; ++j)
          store_from_double(x.data, x.dtype, static_cast<int64_t>(i) * d + j, -INFINITY);
    return softmax(out, x, kScale);
  };
  return bench_streaming(profile, op, dtype, shape, runs, device, peak_gbps, sop);
}

}  // namespace kernelkit::testing

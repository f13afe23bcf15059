// The softmax family's benchmark (bench.hpp): the streaming harness at the attention-score scale 1/sqrt(64);
// causal_softmax over square [d, d] score matrices (or the middle dim of a 3-D suite shape).
#pragma once

#include "testing/bench.hpp"

namespace kernelkit::testing {

BenchResult bench_softmax(const DeviceProfile& profile, OpId op, DType dtype, const BenchShape& shape, int runs,
                          int device, double peak_gbps);

}  // namespace kernelkit::testing

// The activation family's benchmark (bench.hpp): the streaming harness over x [rows, d] (or [rows, 2d] gated; a and
// b for geglu) -> out [rows, d].
#pragma once

#include "testing/bench.hpp"

namespace kernelkit::testing {

BenchResult bench_activation(const DeviceProfile& profile, OpId op, DType dtype, const BenchShape& shape, int runs,
                             int device, double peak_gbps);

}  // namespace kernelkit::testing

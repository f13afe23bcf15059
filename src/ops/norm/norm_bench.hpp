// The norm family's benchmark (bench.hpp) and its workload, which `kernelkit profile` also runs.
#pragma once

#include <utility>
#include <vector>

#include "ops/norm/norm_cases.hpp"
#include "testing/bench.hpp"

namespace kernelkit::testing {

// Device buffers for one norm op and shape: `sets` rotating sets of the per-row tensors (x and out; x and residual for
// the fused op), shared parameters, all filled with random values on the device.
class NormWorkload {
 public:
  Status init(OpId op, DType dtype, const BenchShape& shape, int sets, int device);
  const std::vector<NormTensors>& views() const { return views_; }
  Status refill(Stream stream);  // fresh random rotated tensors (in-place ops drift as they are re-run)

 private:
  DType dtype_ = DType::f32;
  Status status_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<NormTensors> views_;
  std::vector<std::pair<void*, int64_t>> rotated_;
};

BenchResult bench_norm(const DeviceProfile& profile, OpId op, DType dtype, const BenchShape& shape, int runs,
                       int device, double peak_gbps);

}  // namespace kernelkit::testing

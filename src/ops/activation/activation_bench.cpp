#include "ops/activation/activation_bench.hpp"

#include "ops/activation/activation_cases.hpp"

namespace kernelkit::testing {

BenchResult bench_activation(const DeviceProfile& profile, OpId op, DType dtype, const BenchShape& shape, int runs,
                             int device, double peak_gbps) {
  StreamingOp sop;
  sop.two_tensors = op == OpId::geglu;
  sop.in_width_multiple = op_info(op).row_tensors_read == 2 && !sop.two_tensors ? 2 : 1;  // gated: [rows, 2d]
  sop.run = [op](const TensorView& out, const TensorView& x, const TensorView* b, Stream stream) {
    return call_activation_op(op, out, x, b, stream);
  };
  sop.reference = [op](const TensorView& out, const TensorView& x, const TensorView* b, const std::vector<int64_t>&) {
    return call_activation_op(op, out, x, b);
  };
  return bench_streaming(profile, op, dtype, shape, runs, device, peak_gbps, sop);
}

}  // namespace kernelkit::testing

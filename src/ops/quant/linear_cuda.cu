// Host entry of the weight-only linear layer on CUDA: device checks, plan (plan_quant), dtype dispatch.
#include "ops/quant/linear.cuh"
#include "runtime/runtime_internal.hpp"

namespace kernelkit::cuda {
extern template Status launch_linear<__half>(const detail::WeightOnlyArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_linear<__nv_bfloat16>(const detail::WeightOnlyArgs&, const LaunchPlan&, cudaStream_t);
}  // namespace kernelkit::cuda

namespace kernelkit::detail {

Status weight_only_cuda(const WeightOnlyArgs& a, Stream stream) {
  return cuda::launch_planned<cuda::KernelTypes::halves>(
      a.op, a.dtype, a.device.index, a.shape(),
      {{a.x, "x"}, {a.qweight, "qweight"}, {a.scales, "scales"}, {a.bias, "bias"}, {a.out, "out"}},
      [&](auto tag, const LaunchPlan& plan, const DeviceProfile&) {
        return cuda::launch_linear<decltype(tag)>(a, plan, stream);
      });
}

}  // namespace kernelkit::detail

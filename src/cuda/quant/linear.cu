// Host entry of the weight-only linear layer on CUDA: device checks, plan (plan_quant), dtype dispatch.
#include "cuda/quant/linear.cuh"
#include "cuda/runtime_internal.hpp"

namespace kernelkit::cuda {
extern template Status launch_linear<__half>(const detail::WeightOnlyArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_linear<__nv_bfloat16>(const detail::WeightOnlyArgs&, const LaunchPlan&, cudaStream_t);
}  // namespace kernelkit::cuda

namespace kernelkit::detail {

Status weight_only_cuda(const WeightOnlyArgs& a, Stream stream) {
  cuda::DeviceGuard guard;
  DeviceProfile prof;
  LaunchPlan plan;
  KK_RETURN_IF_ERROR(
      cuda::prepare_launch(a.op, a.dtype, a.device.index, a.shape(),
                           {{a.x, "x"}, {a.qweight, "qweight"}, {a.scales, "scales"}, {a.bias, "bias"}, {a.out, "out"}},
                           &guard, &prof, &plan));
  switch (a.dtype) {
    case DType::f16:
      return cuda::launch_linear<__half>(a, plan, stream);
    case DType::bf16:
      return cuda::launch_linear<__nv_bfloat16>(a, plan, stream);
    default:
      break;
  }
  return invalid_argument("linear: x dtype " + std::string(dtype_name(a.dtype)) +
                          " has no kernel (expected f16, bf16)");
}

}  // namespace kernelkit::detail

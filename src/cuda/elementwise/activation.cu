// Host entry of the activation family on CUDA: device checks, plan from the active profile, dtype dispatch.
#include "cuda/elementwise/activation.cuh"
#include "cuda/runtime_internal.hpp"
#include "kernelkit/runtime.hpp"

namespace kernelkit::cuda {
extern template Status launch_activation<float>(const detail::ElementwiseArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_activation<__half>(const detail::ElementwiseArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_activation<__nv_bfloat16>(const detail::ElementwiseArgs&, const LaunchPlan&,
                                                        cudaStream_t);
}  // namespace kernelkit::cuda

namespace kernelkit::detail {

Status elementwise_cuda(const ElementwiseArgs& a, Stream stream) {
  const std::string name(op_info(a.op).name);
  cuda::DeviceGuard guard;
  DeviceProfile prof;
  LaunchPlan plan;
  KK_RETURN_IF_ERROR(cuda::prepare_launch(a.op, a.dtype, a.device.index, a.shape(),
                                          {{a.a, "x"}, {a.b, "b"}, {a.out, "out"}}, &guard, &prof, &plan));
  switch (a.dtype) {
    case DType::f32: return cuda::launch_activation<float>(a, plan, stream);
    case DType::f16: return cuda::launch_activation<__half>(a, plan, stream);
    case DType::bf16: return cuda::launch_activation<__nv_bfloat16>(a, plan, stream);
    default: return invalid_argument(name + ": dtype " + std::string(dtype_name(a.dtype)) + " has no CUDA kernel");
  }
}

}  // namespace kernelkit::detail

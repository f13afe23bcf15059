// Host entry of the activation family on CUDA: device checks, plan from the active profile, dtype dispatch.
#include "ops/activation/activation.cuh"
#include "runtime/runtime_internal.hpp"
#include "kernelkit/runtime.hpp"

namespace kernelkit::cuda {
extern template Status launch_activation<float>(const detail::ElementwiseArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_activation<__half>(const detail::ElementwiseArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_activation<__nv_bfloat16>(const detail::ElementwiseArgs&, const LaunchPlan&,
                                                        cudaStream_t);
}  // namespace kernelkit::cuda

namespace kernelkit::detail {

Status elementwise_cuda(const ElementwiseArgs& a, Stream stream) {
  return cuda::launch_planned(a.op, a.dtype, a.device.index, a.shape(), {{a.a, "x"}, {a.b, "b"}, {a.out, "out"}},
                              [&](auto tag, const LaunchPlan& plan, const DeviceProfile&) {
                                return cuda::launch_activation<decltype(tag)>(a, plan, stream);
                              });
}

}  // namespace kernelkit::detail

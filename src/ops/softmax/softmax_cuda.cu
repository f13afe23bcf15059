// Host entry of softmax on CUDA: device checks, plan (the row-norm work split, no staged rows), dtype dispatch.
#include "runtime/runtime_internal.hpp"
#include "ops/softmax/softmax.cuh"

namespace kernelkit::cuda {
extern template Status launch_softmax<float>(const detail::SoftmaxArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_softmax<__half>(const detail::SoftmaxArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_softmax<__nv_bfloat16>(const detail::SoftmaxArgs&, const LaunchPlan&, cudaStream_t);
}  // namespace kernelkit::cuda

namespace kernelkit::detail {

Status softmax_cuda(const SoftmaxArgs& a, Stream stream) {
  return cuda::launch_planned(a.op, a.dtype, a.device.index, a.shape(), {{a.x, "x"}, {a.out, "out"}},
                              [&](auto tag, const LaunchPlan& plan, const DeviceProfile&) {
                                return cuda::launch_softmax<decltype(tag)>(a, plan, stream);
                              });
}

}  // namespace kernelkit::detail

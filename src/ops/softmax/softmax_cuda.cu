// Host entry of softmax on CUDA: device checks, plan (the row-norm work split), dtype dispatch.
#include "runtime/runtime_internal.hpp"
#include "ops/softmax/softmax.cuh"

namespace kernelkit::cuda {
extern template Status launch_softmax<float>(const detail::SoftmaxArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_softmax<__half>(const detail::SoftmaxArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_softmax<__nv_bfloat16>(const detail::SoftmaxArgs&, const LaunchPlan&, cudaStream_t);
extern template Status softmax_occupancy<float>(bool, const LaunchPlan&, int*);
extern template Status softmax_occupancy<__half>(bool, const LaunchPlan&, int*);
extern template Status softmax_occupancy<__nv_bfloat16>(bool, const LaunchPlan&, int*);
}  // namespace kernelkit::cuda

namespace kernelkit::detail {

Status softmax_cuda(const SoftmaxArgs& a, Stream stream) {
  return cuda::launch_planned(
      a.op, a.dtype, a.device.index, a.shape(), {{a.x, "x"}, {a.out, "out"}},
      [&](auto tag, LaunchPlan plan, const DeviceProfile& prof) {
        // As the norms: the compiled kernel's residency re-sizes the grid.
        KK_RETURN_IF_ERROR(cuda::refine_to_residency(a.op, a.dtype, a.device.index, prof, a.rows, &plan));
        return cuda::launch_softmax<decltype(tag)>(a, plan, stream);
      });
}

Status softmax_occupancy(OpId op, DType dtype, const LaunchPlan& plan, int* blocks_per_sm) {
  return cuda::dispatch_float(dtype, [&](auto tag) {
    return cuda::softmax_occupancy<decltype(tag)>(op == OpId::causal_softmax, plan, blocks_per_sm);
  });
}

}  // namespace kernelkit::detail

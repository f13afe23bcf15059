// Host entry of the row-norm family on CUDA: device checks, plan from the active profile, dtype dispatch.
#include "ops/norm/norm.cuh"
#include "runtime/runtime_internal.hpp"

namespace kernelkit::cuda {
extern template Status launch_row_norm<float>(const detail::RowNormArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_row_norm<__half>(const detail::RowNormArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_row_norm<__nv_bfloat16>(const detail::RowNormArgs&, const LaunchPlan&, cudaStream_t);
extern template Status row_norm_occupancy<float>(OpId, const LaunchPlan&, int*);
extern template Status row_norm_occupancy<__half>(OpId, const LaunchPlan&, int*);
extern template Status row_norm_occupancy<__nv_bfloat16>(OpId, const LaunchPlan&, int*);
}  // namespace kernelkit::cuda

namespace kernelkit::detail {

Status row_norm_cuda(const RowNormArgs& a, Stream stream) {
  return cuda::launch_planned(
      a.op, a.dtype, a.device.index, a.shape(),
      {{a.x, "x"}, {a.out, "out"}, {a.residual, "residual"}, {a.weight, "weight"}, {a.bias, "bias"},
       {a.scale, "scale"}, {a.shift, "shift"}},
      [&](auto tag, LaunchPlan plan, const DeviceProfile& prof) {
        // The planner counted registers at the kernels' cap; the compiled kernel's residency re-sizes the grid.
        KK_RETURN_IF_ERROR(cuda::refine_to_residency(a.op, a.dtype, a.device.index, prof, a.rows, &plan));
        return cuda::launch_row_norm<decltype(tag)>(a, plan, stream);
      });
}

}  // namespace kernelkit::detail

namespace kernelkit::detail {

Status row_norm_occupancy(OpId op, DType dtype, const LaunchPlan& plan, int* blocks_per_sm) {
  return cuda::dispatch_float(
      dtype, [&](auto tag) { return cuda::row_norm_occupancy<decltype(tag)>(op, plan, blocks_per_sm); });
}

}  // namespace kernelkit::detail

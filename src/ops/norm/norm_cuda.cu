// Host entry of the row-norm family on CUDA: device checks, plan from the active profile, dtype dispatch.
#include <map>
#include <mutex>
#include <tuple>

#include "ops/norm/norm.cuh"
#include "runtime/runtime_internal.hpp"
#include "kernelkit/runtime.hpp"

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
        int resident = 0;
        KK_RETURN_IF_ERROR(kernel_occupancy(a.op, a.dtype, plan, a.device.index, &resident));
        if (resident == 0)
          return Status(StatusCode::internal, std::string(op_info(a.op).name) + ": the planned block (" +
                                                  plan.to_string() + ") cannot be resident");
        refine_plan_occupancy(prof, resident, a.rows, &plan);
        return cuda::launch_row_norm<decltype(tag)>(a, plan, stream);
      });
}

}  // namespace kernelkit::detail

namespace kernelkit {

Status kernel_occupancy(OpId op, DType dtype, const LaunchPlan& plan, int device, int* blocks_per_sm) {
  // Cached: the answer depends only on the kernel, the block and the shared memory (and the device).
  using Key = std::tuple<int, int, int, int, int, int64_t>;
  static std::mutex mu;
  static std::map<Key, int> cache;
  const Key key{device, static_cast<int>(op), static_cast<int>(dtype), plan.vec, plan.block_threads, plan.smem_bytes};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) {
      *blocks_per_sm = it->second;
      return Status::Ok();
    }
  }
  cuda::DeviceGuard guard;
  KK_RETURN_IF_ERROR(guard.set(device));
  const Status s = cuda::dispatch_float(
      dtype, [&](auto tag) { return cuda::row_norm_occupancy<decltype(tag)>(op, plan, blocks_per_sm); });
  if (s.ok()) {
    std::lock_guard<std::mutex> lock(mu);
    cache[key] = *blocks_per_sm;
  }
  return s;
}

}  // namespace kernelkit

// A LaunchPlan (plain data from the planner, no CUDA types) as the <<<grid, block>>> of a launch.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <string>
#include <tuple>

#include "kernels/common/check.cuh"
#include "kernels/common/scratch.hpp"
#include "kernelkit/planner.hpp"
#include "runtime/plan_rules.hpp"

namespace kernelkit::cuda {

// block: threads_per_row x rows_per_block.
inline dim3 block_of(const LaunchPlan& p) {
  return dim3(static_cast<unsigned>(p.threads_per_row), static_cast<unsigned>(p.rows_per_block));
}
// grid: grid_x x grid / (grid_x k_splits) x k_splits (element-wise plans: blocks across a row x along the rows; row
// reductions: 1-D; the tensor-core weight-only linear: n tiles x m tiles x parts of k).
inline dim3 grid_of(const LaunchPlan& p) {
  return dim3(static_cast<unsigned>(p.grid_x), static_cast<unsigned>(p.grid / (p.grid_x * p.k_splits)),
              static_cast<unsigned>(p.k_splits));
}

// The grid of a one-thread-per-output kernel of kElementwiseThreads-thread blocks over `outputs` outputs.
inline dim3 one_thread_each(int64_t outputs) {
  return dim3(static_cast<unsigned>((outputs + kElementwiseThreads - 1) / kElementwiseThreads));
}

// A fact about `kernel` on the current device (its occupancy at a block size, its PTX version), asked of the runtime
// once per thread and then cached: the eager launch paths need it on every call. `what` and `size` tell one kernel's
// facts apart; query(int*) -> Status asks the runtime.
template <typename Query>
Status kernel_fact(const void* kernel, int what, size_t size, Query&& query, int* out) {
  int device = 0;
  KK_CUDA_RETURN(cudaGetDevice(&device));
  thread_local std::map<std::tuple<const void*, int, int, size_t>, int> cache;
  const auto key = std::make_tuple(kernel, device, what, size);
  auto it = cache.find(key);
  if (it == cache.end()) {
    int v = 0;
    KK_RETURN_IF_ERROR(query(&v));
    it = cache.emplace(key, v).first;
  }
  *out = it->second;
  return Status::Ok();
}

// Resident blocks per SM of `kernel` at `threads` threads and `smem` bytes of dynamic shared memory on the current
// device (cudaOccupancyMaxActiveBlocksPerMultiprocessor).
template <typename Kernel>
Status resident_blocks(Kernel kernel, int threads, size_t smem, int* out) {
  return kernel_fact(reinterpret_cast<const void*>(kernel), threads, smem, [&](int* n) -> Status {
    KK_CUDA_RETURN(cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, kernel, threads, smem));
    return Status::Ok();
  }, out);
}

// Programmatic dependent launch (sm_90): the second kernel of a pair (the decode merge, the split-K reduction) is
// launched while the first is still running, and its threads wait in wait_for_prior_grid() until the first grid has
// completed and its writes are visible, instead of behind the stream's launch gap (a few microseconds, against a
// ~5 us merge). The first kernel's blocks call allow_dependent_launch() when their main loop is done, so the second
// grid's blocks can be placed while the first grid's last blocks finish. Only when the second kernel's own code is
// sm_90+ (its PTX version, from cudaFuncGetAttributes, cached): older code has no wait, so its pairs are launched
// plainly (the attribute off).
__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
template <typename... Params, typename... Args>
Status launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                        const Args&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute programmatic{};
  programmatic.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  programmatic.val.programmaticStreamSerializationAllowed = 1;
  int ptx_version = 0;  // (what = 0: no block size)
  KK_RETURN_IF_ERROR(kernel_fact(reinterpret_cast<const void*>(kernel), 0, 0, [&](int* v) -> Status {
    cudaFuncAttributes attr{};
    KK_CUDA_RETURN(cudaFuncGetAttributes(&attr, kernel));
    *v = attr.ptxVersion;
    return Status::Ok();
  }, &ptx_version));
  if (ptx_version >= 90) config.attrs = &programmatic, config.numAttrs = 1;
  KK_CUDA_RETURN(cudaLaunchKernelEx(&config, kernel, args...));
  return Status::Ok();
}
// kernel<<<grid, block, smem, stream>>>(args...), or as launch_dependent when `dependent` (its threads call
// wait_for_prior_grid() before they read what the kernel before it writes).
template <typename... Params, typename... Args>
Status launch_kernel(bool dependent, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                     const Args&... args) {
  if (dependent) return launch_dependent(kernel, grid, block, smem, stream, args...);
  kernel<<<grid, block, smem, stream>>>(args...);
  KK_CUDA_RETURN(cudaGetLastError());
  return Status::Ok();
}

}  // namespace kernelkit::cuda

// A LaunchPlan (plain data from the planner, no CUDA types) as the <<<grid, block>>> of a launch.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "cuda/common/check.cuh"
#include "kernelkit/planner.hpp"

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

// Runs launch(scratch) with `bytes` of stream-ordered scratch memory (pool-backed: no device synchronization, and
// capturable in a CUDA graph; null when bytes is 0), freed after it on the same stream even when a launch failed.
template <typename F>
Status with_stream_scratch(size_t bytes, cudaStream_t stream, F&& launch) {
  void* scratch = nullptr;
  if (bytes > 0) KK_CUDA_RETURN(cudaMallocAsync(&scratch, bytes, stream));
  const Status s = launch(scratch);
  if (scratch) {
    const cudaError_t e = cudaFreeAsync(scratch, stream);
    if (s.ok() && e != cudaSuccess)
      return Status(StatusCode::cuda_error, std::string("cudaFreeAsync failed: ") + cudaGetErrorString(e));
  }
  return s;
}

}  // namespace kernelkit::cuda

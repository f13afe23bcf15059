// Stream-ordered scratch memory for a launch (host code: also for the cuBLASLt calls compiled by the C++ compiler).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/common/check.cuh"

namespace kernelkit::cuda {

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

// Stream-ordered scratch memory for a launch (host code: also for the cuBLASLt calls compiled by the C++ compiler).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kernelkit/runtime.hpp"
#include "kernels/common/check.cuh"

namespace kernelkit::cuda {

// Runs launch(scratch) with `bytes` of stream-ordered scratch memory (null when bytes is 0), released after it on the
// same stream even when a launch failed: the installed ScratchAllocator's (kernelkit/runtime.hpp), else
// cudaMallocAsync's pool. Either way no device synchronization, and capturable in a CUDA graph.
template <typename F>
Status with_stream_scratch(size_t bytes, cudaStream_t stream, F&& launch) {
  void* scratch = nullptr;
  const ScratchAllocator* allocator = scratch_allocator();
  if (bytes > 0) {
    if (allocator) {
      scratch = allocator->allocate(bytes, stream);
      if (!scratch)
        return Status(StatusCode::cuda_error,
                      "out of device memory allocating " + std::to_string(bytes) + " bytes of scratch");
    } else {
      KK_CUDA_RETURN(cudaMallocAsync(&scratch, bytes, stream));
    }
  }
  const Status s = launch(scratch);
  if (scratch) {
    if (allocator) {
      allocator->release(scratch, stream);
    } else {
      const cudaError_t e = cudaFreeAsync(scratch, stream);
      if (s.ok() && e != cudaSuccess)
        return Status(StatusCode::cuda_error, std::string("cudaFreeAsync failed: ") + cudaGetErrorString(e));
    }
  }
  return s;
}

}  // namespace kernelkit::cuda

// Global -> shared copies that do not hold registers while in flight: cp.async on sm_80+ (4, 8 or 16 bytes), a plain
// load and store elsewhere (sm_75, and 2-byte elements). Completion is per thread: after cp_async_wait<N>() a thread
// sees its own copies; other threads' copies need a barrier as well.
#pragma once

#include "cuda/common/arch.cuh"
#include "cuda/common/vec.cuh"

namespace kernelkit::cuda {

template <int kBytes>
__device__ __forceinline__ void copy_async(void* smem_dst, const void* gmem_src) {
#if KK_DEVICE_HAS_CP_ASYNC
  if constexpr (kBytes == 16 || kBytes == 8 || kBytes == 4) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    if constexpr (kBytes == 16)  // .cg: bypass L1, the row is read once
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem_src) : "memory");
    else
      asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(gmem_src), "n"(kBytes) : "memory");
    return;
  }
#endif
  *static_cast<Raw<kBytes>*>(smem_dst) = *static_cast<const Raw<kBytes>*>(gmem_src);
}

// Closes the group of copies issued since the last commit (every thread commits, so group counts stay uniform).
__device__ __forceinline__ void cp_async_commit() {
#if KK_DEVICE_HAS_CP_ASYNC
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if KK_DEVICE_HAS_CP_ASYNC
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

}  // namespace kernelkit::cuda

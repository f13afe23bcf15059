// Global -> shared copies that do not hold registers while in flight: cp.async on sm_80+ (4, 8 or 16 bytes), a plain
// load and store elsewhere (sm_75, and 2-byte elements). Completion is per thread: after cp_async_wait<N>() a thread
// sees its own copies; other threads' copies need a barrier as well.
#pragma once

#include "kernels/common/arch.cuh"
#include "kernels/common/vec.cuh"

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

// 16 bytes from gmem_src when `valid`, else 16 zero bytes, into smem_dst: one cp.async either way (its source size 0
// reads nothing), so a tile's tail needs no branch; gmem_src must still be a mapped address (pass a valid one).
__device__ __forceinline__ void copy_async_or_zero16(void* smem_dst, const void* gmem_src, bool valid) {
#if KK_DEVICE_HAS_CP_ASYNC
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(valid ? 16 : 0)
               : "memory");
#else
  *static_cast<uint4*>(smem_dst) = valid ? *static_cast<const uint4*>(gmem_src) : make_uint4(0, 0, 0, 0);
#endif
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

// The same for a count known only at run time (a pipeline depth from the planner), 0 to kMax (a larger count waits as
// for kMax).
template <int kMax = 7>
__device__ __forceinline__ void cp_async_wait_dynamic(int pending) {
  if constexpr (kMax > 0)
    if (pending < kMax) return cp_async_wait_dynamic<kMax - 1>(pending);
  cp_async_wait<kMax>();
}

// Copies a tile of ROWS rows x kChunks 16-byte chunks to shared memory, each of THREADS threads taking every THREADS-th
// chunk: chunk c of row r goes from src(r, c) to dst(r, c) asynchronously when r < rows and c < chunks, and is
// zero-filled otherwise (tile tails add nothing to the sums that read them, and no stale value can leak in).
template <int ROWS, int kChunks, int THREADS, typename Src, typename Dst>
__device__ __forceinline__ void copy_tile_async(int tid, int rows, int chunks, Src src, Dst dst) {
  static_assert(ROWS * kChunks % THREADS == 0, "whole chunks per thread");
#pragma unroll
  for (int i = 0; i < ROWS * kChunks / THREADS; ++i) {
    const int idx = tid + i * THREADS, r = idx / kChunks, c = idx % kChunks;
    void* d = dst(r, c);
    if (r < rows && c < chunks)
      copy_async<16>(d, src(r, c));
    else
      *static_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
  }
}

// The k loop of a tiled GEMM with S shared-memory stages: stage s holds k tile kt with kt % S == s; tiles kt + 1 ..
// kt + S - 1 are in flight while tile kt is computed. load(kt, stage) issues a tile's copies, compute(kt, stage)
// reads one after the block barrier that makes every thread's copies visible (the same barrier also retires the stage
// that the next load overwrites).
template <int S, typename Load, typename Compute>
__device__ __forceinline__ void multistage_k_loop(int k_tiles, Load load, Compute compute) {
  static_assert(S >= 2, "at least two stages");
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < k_tiles) load(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<S - 2>();
    __syncthreads();
    if (kt + S - 1 < k_tiles) load(kt + S - 1, (kt + S - 1) % S);
    cp_async_commit();
    compute(kt, kt % S);
  }
  cp_async_wait<0>();
}

}  // namespace kernelkit::cuda

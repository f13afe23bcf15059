// The wgmma probe (sm90a.hpp): one warpgroup, c[64][64] = a b^T from 128-byte-swizzled shared tiles (wgmma.cuh), so
// that one GPU test says whether the descriptors, the swizzle and the accumulator layout are right before an attention
// kernel is built on them. Compiled only for sm_90a (the kernelkit_sm90a object library).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/common/check.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/wgmma.cuh"
#include "runtime/sm90a.hpp"

namespace kernelkit::cuda {
namespace {

constexpr int kTile = 64;             // m = n = k = 64: four k steps of 16
constexpr int kTileBytes = kTile * kTile * 2;
constexpr int kAtomBytes = 1024;      // 8 rows x 128 bytes: the swizzle atom, and the 8-row stride of a descriptor

// Copies a row-major [64][64] tile of 2-byte elements into swz<64> shared memory (16-byte chunks, 128 threads).
__device__ __forceinline__ void stage_tile(unsigned char* s, const uint4* g) {
  for (int c = threadIdx.x; c < kTile * kTile / 8; c += blockDim.x) {
    const int r = c / 8, ch = c % 8;
    *reinterpret_cast<uint4*>(s + 2 * swz<kTile>(r, ch * 8)) = g[c];
  }
}

template <typename T, bool kMnMajorB>
__global__ void __launch_bounds__(128) wgmma_probe_kernel(const uint4* a, const uint4* b, float* c) {
  // Two 8 KB tiles on 1024-byte boundaries (the descriptors' base offset is 0): the dynamic window is padded by 1 KB.
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* sa = smem_raw + ((kAtomBytes - raw % kAtomBytes) % kAtomBytes);
  unsigned char* sb = sa + kTileBytes;
  stage_tile(sa, a);
  stage_tile(sb, b);  // K-major: rows are n; MN-major: rows are k
  // each writer's stores made visible to the async proxy first, then the barrier: any warp may read any tile
  ::cuda::ptx::fence_proxy_async(::cuda::ptx::space_shared);
  __syncthreads();

  const uint32_t a0 = static_cast<uint32_t>(__cvta_generic_to_shared(sa));
  const uint32_t b0 = static_cast<uint32_t>(__cvta_generic_to_shared(sb));
  float d[8][4] = {};
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    // A and K-major B: the k step is 32 bytes inside each 128-byte row; MN-major B: 16 rows of k, 2048 bytes.
    const uint64_t da = wgmma_desc_sw128(a0 + 32 * kk, 16, kAtomBytes);
    const uint64_t db = kMnMajorB ? wgmma_desc_sw128(b0 + 16 * 128 * kk, kAtomBytes, kAtomBytes)
                                  : wgmma_desc_sw128(b0 + 32 * kk, 16, kAtomBytes);
    wgmma_m64n64k16<T, kMnMajorB>(d, da, db, kk > 0);
  }
  wgmma_commit();
  wgmma_wait<0>();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int j = 0; j < kTile / 8; ++j) {
    const int row = 16 * warp + g, col = 8 * j + 2 * t;
    c[row * kTile + col] = d[j][0];
    c[row * kTile + col + 1] = d[j][1];
    c[(row + 8) * kTile + col] = d[j][2];
    c[(row + 8) * kTile + col + 1] = d[j][3];
  }
}

}  // namespace

Status wgmma_probe_launch(const void* a, const void* b, float* c, bool f16, bool b_mn_major, cudaStream_t stream) {
  auto launch = [&](auto kernel) -> Status {
    const int smem = 2 * kTileBytes + kAtomBytes;
    KK_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    kernel<<<1, 128, smem, stream>>>(static_cast<const uint4*>(a), static_cast<const uint4*>(b), c);
    KK_CUDA_RETURN(cudaGetLastError());
    return Status::Ok();
  };
  if (f16) return b_mn_major ? launch(wgmma_probe_kernel<__half, true>) : launch(wgmma_probe_kernel<__half, false>);
  return b_mn_major ? launch(wgmma_probe_kernel<__nv_bfloat16, true>)
                    : launch(wgmma_probe_kernel<__nv_bfloat16, false>);
}

}  // namespace kernelkit::cuda

// The TMA probe (sm90a.hpp): one 64 x 64 box of a 2-byte tensor loaded by the tensor memory accelerator
// (cp.async.bulk.tensor with an mbarrier's transaction count: tma.cuh) into 1024-byte-aligned
// shared memory in the 128-byte swizzle, then the shared bytes copied out as they lie, so that one GPU test says
// whether TMA's swizzle is swz<64> (the layout the wgmma descriptors read: wgmma.cuh), whether out-of-bounds rows and
// columns arrive as zeros (sequence tails) and whether the descriptor encoding is right, before a producer warp is
// built on it (docs/attention-sm90.md). Compiled only for sm_90a (the kernelkit_sm90a object library).
#include "kernels/common/check.cuh"
#include "kernels/common/tma.cuh"
#include "runtime/sm90a.hpp"

namespace kernelkit::cuda {
namespace {

constexpr int kBox = 64;                    // rows and columns of the box
constexpr int kBoxBytes = kBox * kBox * 2;  // 8 KB
constexpr int kAlign = 1024;                // the 128-byte swizzle's atom: TMA's destination alignment for it

__global__ void __launch_bounds__(128) tma_probe_kernel(const __grid_constant__ TmaOperand map, int row0, int col0,
                                                        uint4* out) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t bar;  // the mbarrier: one arrival (the issuing thread) plus the box's bytes
  const auto raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* tile = smem_raw + (kAlign - raw % kAlign) % kAlign;
  if (threadIdx.x == 0) tma::init(&bar, 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    tma::expect(&bar, kBoxBytes);  // the whole box: out-of-bounds elements are written (as zeros) and counted too
    tma::load(map, tile, &bar, col0, row0, 0, 0);
  }
  tma::wait_or_trap(&bar, 0);
  for (int i = threadIdx.x; i < kBoxBytes / 16; i += blockDim.x) out[i] = reinterpret_cast<const uint4*>(tile)[i];
}

}  // namespace

Status tma_probe_launch(const TmaOperand& map, int row0, int col0, void* out, cudaStream_t stream) {
  const int smem = kBoxBytes + kAlign;
  KK_CUDA_RETURN(cudaFuncSetAttribute(tma_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  tma_probe_kernel<<<1, 128, smem, stream>>>(map, row0, col0, static_cast<uint4*>(out));
  KK_CUDA_RETURN(cudaGetLastError());
  return Status::Ok();
}

}  // namespace kernelkit::cuda

// The TMA probe (sm90a.hpp): one 64 x 64 box of a 2-byte tensor loaded by the tensor memory accelerator
// (cp.async.bulk.tensor with an mbarrier's transaction count, libcu++'s cuda::ptx wrappers) into 1024-byte-aligned
// shared memory in the 128-byte swizzle, then the shared bytes copied out as they lie, so that one GPU test says
// whether TMA's swizzle is swz<64> (the layout the wgmma descriptors read: wgmma.cuh), whether out-of-bounds rows and
// columns arrive as zeros (sequence tails) and whether the descriptor encoding is right, before a producer warp is
// built on it (docs/attention-sm90.md). Compiled only for sm_90a (the kernelkit_sm90a object library).
#include <cuda/ptx>

#include "cuda/common/check.cuh"
#include "cuda/sm90a/sm90a.hpp"

namespace kernelkit::cuda {
namespace {

namespace ptx = ::cuda::ptx;  // libcu++'s PTX wrappers (kernelkit::cuda would shadow ::cuda)

constexpr int kBox = 64;                    // rows and columns of the box
constexpr int kBoxBytes = kBox * kBox * 2;  // 8 KB
constexpr int kAlign = 1024;                // the 128-byte swizzle's atom: TMA's destination alignment for it

__global__ void __launch_bounds__(128) tma_probe_kernel(const __grid_constant__ CUtensorMap map, int row0, int col0,
                                                        uint4* out) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t bar;  // the mbarrier: one arrival (the issuing thread) plus the box's bytes
  const auto raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* tile = smem_raw + (kAlign - raw % kAlign) % kAlign;
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&bar, 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);  // the init visible to the async proxy
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    // The transaction count is the whole box: out-of-bounds elements are written (as zeros) and counted too.
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &bar, kBoxBytes);
    const int32_t coords[2] = {col0, row0};  // innermost dimension first
    ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, tile, &map, coords, &bar);
  }
  while (!ptx::mbarrier_try_wait_parity(&bar, 0)) {
  }
  for (int i = threadIdx.x; i < kBoxBytes / 16; i += blockDim.x) out[i] = reinterpret_cast<const uint4*>(tile)[i];
}

}  // namespace

Status tma_probe_launch(const CUtensorMap& map, int row0, int col0, void* out, cudaStream_t stream) {
  const int smem = kBoxBytes + kAlign;
  KK_CUDA_RETURN(cudaFuncSetAttribute(tma_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  tma_probe_kernel<<<1, 128, smem, stream>>>(map, row0, col0, static_cast<uint4*>(out));
  KK_CUDA_RETURN(cudaGetLastError());
  return Status::Ok();
}

}  // namespace kernelkit::cuda

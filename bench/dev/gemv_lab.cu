// Weight-only GEMV lab (an experiment apart from the library, as rows_lab.cu): forms of the library's tensor-core GEMV
// (src/ops/quant/linear.cuh linear_gemv_mma_kernel) over its INT4 kernel layout, row tiles x token tiles x regions a
// batch at any warps along k, whether the planner picks them or not, plus a plain streaming read of the same bytes
// (the read ceiling at that size); timed by gemv_lab.py beside F.linear (and the library's default plan when the
// package is installed) on the same inputs in one process. W4A16, groups of 128 (symmetric), bf16. What wins here moves
// into the library's planner (bench/dev/gemv-lab-call runs it on the GPU machine).
//
// Build: nvcc -O3 -std=c++20 -arch=sm_90a --expt-relaxed-constexpr -shared -Xcompiler -fPIC -I src -I include
// bench/dev/gemv_lab.cu -o gemv_lab.so
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "ops/quant/linear.cuh"

namespace lab {
using namespace kernelkit;
using namespace kernelkit::cuda;
using T = __nv_bfloat16;

struct Form {
  const char* name;
  int tiles, row_tiles, unroll;  // 8-token tiles (NT), 16-row tiles (MT), regions a batch (U)
  const void* kernel;
};

// kAhead: the kernel's kScalesAhead (each region's scales loaded with its weights, a batch ahead).
template <int NT, int MT, int U, bool kAhead = false>
constexpr Form form(const char* name) {
  return {name, NT, MT, U,
          reinterpret_cast<const void*>(linear_gemv_mma_kernel<T, 4, WeightScales::group, NT, false, U, MT, kAhead>)};
}

const Form kForms[] = {
    form<1, 1, 4>("nt1 mt1 u4"),
    form<1, 2, 2>("nt1 mt2 u2"),
    form<2, 1, 2>("nt2 mt1 u2"),
    form<2, 2, 1>("nt2 mt2 u1"),
    form<2, 2, 2>("nt2 mt2 u2"),
    form<2, 4, 1>("nt2 mt4 u1"),
    form<4, 1, 2>("nt4 mt1 u2"),
    form<4, 2, 1>("nt4 mt2 u1"),
    form<1, 1, 4, true>("nt1 mt1 u4 scales ahead"),
    form<1, 2, 2, true>("nt1 mt2 u2 scales ahead"),
    form<2, 2, 1, true>("nt2 mt2 u1 scales ahead"),
    form<2, 1, 2, true>("nt2 mt1 u2 scales ahead"),
};

// A streaming read of `bytes` (a multiple of 16 x kUnroll x blockDim): kUnroll 16-byte loads a thread in flight, a
// grid-stride loop; the xor of everything read goes to *sink only if it equals an unlikely value (the loads stay).
template <int kUnroll>
__global__ void __launch_bounds__(256) read_kernel(const uint4* w, int64_t vecs, unsigned* sink) {
  unsigned acc = 0;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x * kUnroll;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x * kUnroll + threadIdx.x; i < vecs; i += stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      v[u] = i + u * blockDim.x < vecs ? load_weights(reinterpret_cast<const uint8_t*>(w + i + u * blockDim.x))
                                       : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}
}  // namespace lab

extern "C" {
int lab_gemv_count() { return static_cast<int>(std::size(lab::kForms)); }
const char* lab_gemv_name(int i) { return lab::kForms[i].name; }
int lab_gemv_tokens(int i) { return 8 * lab::kForms[i].tiles; }
int lab_gemv_rows(int i) { return 16 * lab::kForms[i].row_tiles; }

// The shared memory of form i at k_warps warps: the warps' partial sums.
int64_t lab_gemv_smem(int i, int k_warps) {
  const lab::Form& f = lab::kForms[i];
  return int64_t{k_warps} * 16 * f.row_tiles * 8 * f.tiles * 4;
}

// out [m, n] = x [m, k] @ dequant(q [n, k / 2], scales [n, k / 128])^T under form i, k split between k_warps warps.
// 0 on success, else the CUDA error code (1000: a shape the form does not take).
int lab_gemv_launch(int i, const void* x, const void* q, const float* scales, void* out, int64_t m, int64_t n,
                    int64_t k, int k_warps, cudaStream_t stream) {
  const lab::Form& f = lab::kForms[i];
  if (m < 1 || m > 8 * f.tiles || k % 128 != 0 || k_warps < 1 || k_warps > 8 || n % 16 != 0) return 1000;
  kernelkit::cuda::LinearParams<lab::T> p{};
  p.x = static_cast<const lab::T*>(x);
  p.qweight = static_cast<const uint8_t*>(q);
  p.scales = scales;
  p.out = static_cast<lab::T*>(out);
  p.m = m, p.n = n, p.k = k, p.x_stride = k, p.out_stride = n;
  p.group_shift = 7;
  p.stages = f.unroll;
  const int64_t smem = lab_gemv_smem(i, k_warps);
  void* args[] = {&p};
  const dim3 grid(static_cast<unsigned>((n + 16 * f.row_tiles - 1) / (16 * f.row_tiles))), block(32, k_warps);
  return cudaLaunchKernel(f.kernel, grid, block, args, static_cast<size_t>(smem), stream);
}

int lab_gemv_registers(int i) {
  cudaFuncAttributes a{};
  return cudaFuncGetAttributes(&a, lab::kForms[i].kernel) == cudaSuccess ? a.numRegs : -1;
}

// The streaming read of `bytes` bytes at w (16-byte aligned, a multiple of 16): blocks of 256 threads, `blocks_per_sm`
// of them an SM, `unroll` 4 or 8.
int lab_read(const void* w, int64_t bytes, int unroll, int blocks_per_sm, unsigned* sink, cudaStream_t stream) {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int64_t vecs = bytes / 16;
  const unsigned grid = static_cast<unsigned>(sms * blocks_per_sm);
  if (unroll == 8)
    lab::read_kernel<8><<<grid, 256, 0, stream>>>(static_cast<const uint4*>(w), vecs, sink);
  else
    lab::read_kernel<4><<<grid, 256, 0, stream>>>(static_cast<const uint4*>(w), vecs, sink);
  return cudaGetLastError();
}
}

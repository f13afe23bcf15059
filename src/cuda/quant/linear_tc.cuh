// W8A16 on tensor cores, for m above the GEMV's range: out [m, n] = (x [m, k] @ q [n, k]^T) * s[n] (+ bias) (+ out).
//   Block: a kLinearTcTileM x kLinearTcTileN output tile (grid x along n, y along m), k in steps of kLinearTcTileK
//   through kLinearTcStages cp.async buffers of x (2-byte values, rows swizzled for ldmatrix) and of the int8 weights
//   (64-byte rows, swz_i8x64). 4 warps split n (32 features each) and all share the block's 64 tokens: per 16-value
//   k-step a warp loads 4 A fragments by ldmatrix and, for each of its 4 n-tiles, the B fragment's 4 int8 values
//   (k 2t, 2t + 1, 8 + 2t, 9 + 2t of row g: two 2-byte shared loads), dequantized exactly (|q| <= 127 is exact in
//   f16 and bf16) and used by 4 MMAs m16n8k16 with fp32 accumulation. The per-channel scale is applied once, in the
//   epilogue, to the fp32 sum (the same math as the GEMV: sum_k x q, times s).
#pragma once

#include <cuda_runtime.h>

#include "core/quant.hpp"
#include "cuda/common/async_copy.cuh"
#include "cuda/common/check.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/vec.cuh"
#include "cuda/quant/quant_common.cuh"
#include "kernelkit/planner.hpp"

namespace kernelkit::cuda {

template <typename T>
struct LinearTcParams {
  const T* x;           // [m, k], row stride x_stride elements (16-byte aligned rows)
  const int8_t* w;      // [n, k], contiguous
  const float* scales;  // [n]
  const T* bias;        // [n] or null
  T* out;               // [m, n], row stride out_stride
  int m, n, k;
  int64_t x_stride, out_stride;
  int accumulate;
};

template <typename T>
__global__ void __launch_bounds__(kLinearTcThreads, 1) linear_w8a16_tc_kernel(const LinearTcParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    constexpr int BM = kLinearTcTileM, BN = kLinearTcTileN, BK = kLinearTcTileK, S = kLinearTcStages;
    constexpr int kXChunks = BK / 8, kWChunks = BK / 16;  // 16-byte chunks a row of x / of the weights
    static_assert(BM == 64 && BN == 32 * (kLinearTcThreads / 32) && BK == 64, "w8a16 tensor-core tile");
    extern __shared__ __align__(16) unsigned char smem[];  // [S][BM][BK] of x, then [S][BN][64 bytes] of weights
    T* const sX = reinterpret_cast<T*>(smem);
    unsigned char* const sW = smem + S * BM * BK * sizeof(T);

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN, wn = warp * 32;
    const int k_tiles = (p.k + BK - 1) / BK;

    // Stage s: rows bm.. of x and bn.. of the weights, k tile kt (chunks past k and rows past m / n zero-filled).
    auto load_stage = [&](int kt, int s) {
      const int k0 = kt * BK;
      copy_tile_async<BM, kXChunks, kLinearTcThreads>(
          tid, p.m - bm, (p.k - k0 + 7) / 8,
          [&](int r, int c) { return p.x + static_cast<int64_t>(bm + r) * p.x_stride + k0 + c * 8; },
          [&](int r, int c) { return sX + s * BM * BK + swz<BK>(r, c * 8); });
      copy_tile_async<BN, kWChunks, kLinearTcThreads>(
          tid, p.n - bn, (p.k - k0 + 15) / 16,
          [&](int r, int c) { return p.w + static_cast<int64_t>(bn + r) * p.k + k0 + c * 16; },
          [&](int r, int c) { return sW + s * BN * BK + swz_i8x64(r, c); });
    };

    float acc[4][4][4] = {};  // [m-tile of 16][n-tile of 8][fragment]

    multistage_k_loop<S>(k_tiles, load_stage, [&](int stage) {
      const T* x_st = sX + stage * BM * BK;
      const unsigned char* w_st = sW + stage * BN * BK;
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        unsigned a[4][4];
#pragma unroll
        for (int mt = 0; mt < 4; ++mt)
          ldmatrix_x4<false>(a[mt], x_st + swz<BK>(mt * 16 + (lane & 15), kk * 16 + (lane >> 4) * 8));
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          // Row g of this n-tile: bytes k = 16 kk + 2t, +1 (b0) and 16 kk + 8 + 2t, +1 (b1), all in chunk kk.
          const unsigned char* row = w_st + swz_i8x64(wn + nt * 8 + g, kk);
          const uint32_t lo = *reinterpret_cast<const unsigned short*>(row + 2 * t);
          const uint32_t hi = *reinterpret_cast<const unsigned short*>(row + 8 + 2 * t);
          float wf[4];
          dequant_i8x4(lo | (hi << 16), wf);
          const unsigned b0 = pack_rounded<T>(wf[0], wf[1]), b1 = pack_rounded<T>(wf[2], wf[3]);  // exact
#pragma unroll
          for (int mt = 0; mt < 4; ++mt) mma_16x8x16<T>(acc[mt][nt], a[mt], b0, b1);
        }
      }
    });

    // Epilogue: the per-channel scale on the fp32 sum, the bias, the residual (accumulate), one rounding.
    const int c0 = bn + wn;
    for_each_acc(acc, lane, p.m - bm, p.n - c0, [&](int r, int c, float v) {
      T* o = p.out + static_cast<int64_t>(bm + r) * p.out_stride + c0 + c;
      float y = v * __ldg(p.scales + c0 + c);
      if (p.bias) y += to_float(p.bias[c0 + c]);
      if (p.accumulate) y += to_float(*o);
      *o = from_float<T>(y);
    });
  }
}

template <typename T>
Status launch_linear_tc(const detail::WeightOnlyArgs& a, const LaunchPlan& plan, cudaStream_t stream) {
  const LinearTcParams<T> p{static_cast<const T*>(a.x),
                            static_cast<const int8_t*>(a.qweight),
                            a.scales,
                            static_cast<const T*>(a.bias),
                            static_cast<T*>(a.out),
                            static_cast<int>(a.rows),
                            static_cast<int>(a.n),
                            static_cast<int>(a.k),
                            a.x_stride,
                            a.out_stride,
                            a.accumulate ? 1 : 0};
  const dim3 grid(static_cast<unsigned>(plan.grid_x), static_cast<unsigned>(plan.grid / plan.grid_x));
  linear_w8a16_tc_kernel<T><<<grid, kLinearTcThreads, static_cast<size_t>(plan.smem_bytes), stream>>>(p);
  KK_CUDA_RETURN(cudaGetLastError());
  return Status::Ok();
}

}  // namespace kernelkit::cuda

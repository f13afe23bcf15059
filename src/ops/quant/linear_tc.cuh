// Weight-only linear on tensor cores, for m above the GEMV's range: out [m, n] = x [m, k] @ (q [n, k] * s)^T (+ bias)
// (+ out), W8A16 (s per output channel) and W4A16 (s per group of 64 or 128 inputs).
//   Block: a (16 MT) x kLinearTcTileN output tile (grid x along n, y along m; MT = 1 up to 16 tokens, else 4), k in
//   steps of kLinearTcTileK through kLinearTcStages cp.async buffers of x (2-byte values, rows swizzled for ldmatrix)
//   and of the quantized weights (64-byte int8 rows, swz_i8x64; or 32-byte int4 rows). 4 warps split n (32 features
//   each) and all share the block's tokens: per 16-value k-step a warp loads MT A fragments by ldmatrix and, for each
//   of its 4 n-tiles,
//   the B fragment of row g (k 2t, 2t + 1, 8 + 2t, 9 + 2t), dequantized exactly (|q| <= 127 is exact in f16 and
//   bf16), for MT MMAs m16n8k16 with fp32 accumulation:
//   - INT8: two 2-byte shared loads, the exact int8 -> float conversion of quant_common.cuh, packed back;
//   - INT4: the kernel layout puts values 2t and 2t + 1 of a word in nibbles t and 4 + t (int4_pair_bits), so with
//     the exponent of 1024 (f16) or 128 (bf16) or'ed in, one packed subtract leaves the pair, already in B's
//     register layout; and a region of a 16-row tile is 32 lanes' 16-byte fragments, slot 4g + s holding k-step s's
//     two words of rows g and g + 8, so a step's B words of two n-tiles are one 16-byte load.
//   Scales (WeightScales): a per-channel scale (INT8, group 0) multiplies the fp32 sum once in the epilogue (the
//   GEMV's math: sum_k x q, times s). With group scales (INT4; INT8 with group > 0) each group's sums go to a second
//   set of accumulators that is scaled by its s[n, g] and added after the group's k-steps: once a tile for groups of
//   64 or 128 (whole k tiles), twice for groups of 32 (kGroupSteps). Zero points (group_zero) are subtracted in the
//   dequantization (q - z, exact in f16 / bf16 for int8 z), a tile's zeros loaded one tile ahead into registers.
//   Split-K (grid.z = k_splits, when the tiles alone leave SMs idle): part z takes k tiles [z, z + 1) x
//   k_tiles_per_split and writes its scaled fp32 sums to partial[z]; linear_splitk_reduce_kernel adds the parts, the
//   bias and the residual, with one rounding.
#pragma once

#include <cuda_runtime.h>

#include "kernelkit/planner.hpp"
#include "kernels/common/async_copy.cuh"
#include "kernels/common/check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/vec.cuh"
#include "ops/quant/quant.hpp"
#include "ops/quant/quant_common.cuh"
#include "ops/quant/quant_plan.hpp"
#include "runtime/plan_rules.hpp"

namespace kernelkit::cuda {

template <typename T>
struct LinearTcParams {
  const T* x;           // [m, k], row stride x_stride elements (16-byte aligned rows)
  const uint8_t* w;     // [n, k * bits / 8], contiguous
  const float* scales;  // [n] (WeightScales::row) or [n, k / group]
  const T* bias;        // [n] or null
  T* out;               // [m, n], row stride out_stride
  int m, n, k;
  int64_t x_stride, out_stride;
  int group;  // the scale group along k: 32, 64 or 128 (0: WeightScales::row)
  int accumulate;
  int k_tiles_per_split;  // k tiles of one grid.z part
  float* partial;         // split-K: [k_splits, m, n] fp32 (scaled sums); null: the epilogue writes out
  const int8_t* zeros;    // [n, k / group] (WeightScales::group_zero), else null
};

// The exponent bits that make a biased INT4 value u (0..15) in a 16-bit half the number 1024 + u (f16: spacing 1 in
// [1024, 2048)) or 128 + u (bf16: spacing 1 in [128, 256)), both exact.
template <typename T>
constexpr uint32_t int4_exponent2() {
  return std::is_same_v<T, __half> ? 0x64006400u : 0x43004300u;
}

// The packed T pair (1024 + u0, 1024 + u1) (f16) or (128 + u0, 128 + u1) (bf16) -> the values u - 8, exactly; kZero:
// less the zero point pair `zero2` (packed T, integers in [-128, 127]: |value - zero| <= 135 is exact in f16 and bf16).
template <typename T, bool kZero = false>
__device__ __forceinline__ unsigned int4_pair_unbias(uint32_t biased, unsigned zero2 = 0) {
  using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
  T2 h;
  if constexpr (std::is_same_v<T, __half>)
    h = __hsub2(*reinterpret_cast<const __half2*>(&biased), __float2half2_rn(1032.0f));
  else
    h = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&biased), __float2bfloat162_rn(136.0f));
  if constexpr (kZero) h = __hsub2(h, *reinterpret_cast<const T2*>(&zero2));
  return *reinterpret_cast<const unsigned*>(&h);
}

// Two biased INT4 values u = value + 8 (bits 0-3 and 16-19 of `pair`) -> the packed T pair of values (less zero2).
template <typename T, bool kZero = false>
__device__ __forceinline__ unsigned int4_pair(uint32_t pair, unsigned zero2 = 0) {
  return int4_pair_unbias<T, kZero>(pair | int4_exponent2<T>(), zero2);
}

// kGroupSteps: the 16-value k-steps of one scale group inside a k tile (4: groups of 64 or 128; 2: groups of 32).
template <typename T, int kBits, int MT, WeightScales kScales, int kGroupSteps>
__global__ void __launch_bounds__(kLinearTcThreads, MT == 1 ? 4 : 1) linear_tc_kernel(const LinearTcParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    constexpr int BM = 16 * MT, BN = kLinearTcTileN, BK = kLinearTcTileK, S = kLinearTcStages;
    constexpr int kRowBytes = BK * kBits / 8;                        // a weight row of one k tile
    constexpr int kXChunks = BK / 8, kWChunks = kRowBytes / 16;      // 16-byte chunks a row of x / of INT8 weights
    static_assert(kBits == 8 || BK == detail::kInt4RegionValues, "an INT4 k tile is one region of the layout");
    static_assert((MT == 1 || MT == 4) && BN == 32 * (kLinearTcThreads / 32) && BK == 64, "weight-only tile");
    static_assert(kGroupSteps == 2 || kGroupSteps == 4, "a scale group covers half a k tile or whole tiles");
    static_assert(kBits == 8 || kScales != WeightScales::row, "INT4 weights have group scales");
    constexpr bool kGroups = kScales != WeightScales::row, kZeros = kScales == WeightScales::group_zero;
    constexpr int kTileGroups = BK / 16 / kGroupSteps;     // scale groups a k tile spans
    extern __shared__ __align__(16) unsigned char smem[];  // [S][BM][BK] of x, then [S][BN][kRowBytes] of weights
    wait_for_prior_grid();  // x written by the kernel before (act-order's gather; launch_linear)
    T* const sX = reinterpret_cast<T*>(smem);
    unsigned char* const sW = smem + S * BM * BK * sizeof(T);

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN, wn = warp * 32;
    const int kt0 = blockIdx.z * p.k_tiles_per_split;  // this part's first k tile
    const int k_tiles = min((p.k + BK - 1) / BK - kt0, p.k_tiles_per_split);

    // Stage s: rows bm.. of x and bn.. of the weights, k tile kt (chunks past k and rows past m / n zero-filled).
    // INT8 rows are swizzled for bank-free reads; INT4 weights arrive as the layout stores them, the stage's 8 row
    // tiles of 16 rows x their region kt0 + kt (a k tile is one region: k % 64 == 0), 512 contiguous bytes each.
    auto load_stage = [&](int kt, int s) {
      const int k0 = (kt0 + kt) * BK;
      copy_tile_async<BM, kXChunks, kLinearTcThreads>(
          tid, p.m - bm, (p.k - k0 + 7) / 8,
          [&](int r, int c) { return p.x + static_cast<int64_t>(bm + r) * p.x_stride + k0 + c * 8; },
          [&](int r, int c) { return sX + s * BM * BK + swz<BK>(r, c * 8); });
      if constexpr (kBits == 8) {
        copy_tile_async<BN, kWChunks, kLinearTcThreads>(
            tid, p.n - bn, (p.k - k0 + 15) / 16,
            [&](int r, int c) { return p.w + static_cast<int64_t>(bn + r) * p.k + k0 + c * 16; },
            [&](int r, int c) { return sW + s * BN * kRowBytes + swz_i8x64(r, c); });
      } else {
        constexpr int kTiles = BN / detail::kInt4TileRows;
        const int64_t regions = p.k / detail::kInt4RegionValues;
        copy_tile_async<kTiles, kWarpSize, kLinearTcThreads>(
            tid, (p.n - bn) / detail::kInt4TileRows, kWarpSize,
            [&](int j, int c) {
              return p.w +
                     ((static_cast<int64_t>(bn / detail::kInt4TileRows + j) * regions + kt0 + kt) * kWarpSize + c) * 16;
            },
            [&](int j, int c) { return sW + s * BN * kRowBytes + (j * kWarpSize + c) * 16; });
      }
    };

    float acc[MT][4][4] = {};  // [m-tile of 16][n-tile of 8][fragment]

    // Group scales: the group of k-step kk of tile kt. Groups of 64 or 128 hold whole tiles; with groups of 32 the
    // second half of a tail tile may lie past k (zero-filled: it adds nothing), its group clamped to the last.
    const int64_t groups = kGroups ? p.k / p.group : 1;
    auto group_of = [&](int kt, int kk) -> int64_t {
      if constexpr (kGroupSteps == 4) return static_cast<int64_t>(kt0 + kt) * BK / p.group;
      return min(static_cast<int64_t>((kt0 + kt) * BK + kk * 16) / p.group, groups - 1);
    };
    // group_zero: the zero points of this thread's B rows (wn + 8 nt + g) for the next tile's groups, loaded while
    // the current tile computes; byte nt of zero_next[i] is n-tile nt's zero of the tile's group i.
    uint32_t zero_next[kTileGroups] = {};
    auto load_zeros = [&](int kt) {
      if constexpr (kZeros) {
#pragma unroll
        for (int i = 0; i < kTileGroups; ++i) {
          zero_next[i] = 0;
#pragma unroll
          for (int nt = 0; nt < 4; ++nt) {
            const int row = min(bn + wn + nt * 8 + g, p.n - 1);  // past n: any valid zero, never stored
            const auto z = static_cast<uint8_t>(__ldg(p.zeros + row * groups + group_of(kt, i * kGroupSteps)));
            zero_next[i] |= static_cast<uint32_t>(z) << (8 * nt);
          }
        }
      }
    };
    if (k_tiles > 0) load_zeros(0);  // (a split past k has no tiles: nothing to load)

    multistage_k_loop<S>(k_tiles, load_stage, [&](int kt, int stage) {
      const T* x_st = sX + stage * BM * BK;
      const unsigned char* w_st = sW + stage * BN * kRowBytes;
      float part[MT][4][4] = {};  // group scales: this group's sums, scaled by its s[n, g] before they join acc
      float(&sums)[MT][4][4] = kGroups ? part : acc;
      uint32_t zeros[kTileGroups];
#pragma unroll
      for (int i = 0; i < kTileGroups; ++i) zeros[i] = zero_next[i];
      if (kZeros && kt + 1 < k_tiles) load_zeros(kt + 1);
      // The zero point of n-tile nt in k-step kk's group, as a float (an exact integer).
      auto zero_of = [&](int kk, int nt) {
        return static_cast<float>(static_cast<int8_t>(zeros[kk / kGroupSteps] >> (8 * nt)));
      };
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        unsigned a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          ldmatrix_x4<false>(a[mt], x_st + swz<BK>(mt * 16 + (lane & 15), kk * 16 + (lane >> 4) * 8));
        // INT4: the warp's row tiles (n-tiles 0-1, 2-3) at this k-step: lane slot 4g + kk holds words 2kk, 2kk + 1
        // (k 16 kk .. 16 kk + 15) of row g of the tile, then of row g + 8 (one 16-byte load, conflict-free: a quarter
        // warp reads two slots 64 bytes apart).
        uint4 tile_words[2];
        if constexpr (kBits == 4)
#pragma unroll
          for (int j = 0; j < 2; ++j)
            tile_words[j] = *reinterpret_cast<const uint4*>(
                w_st + ((wn / detail::kInt4TileRows + j) * kWarpSize + 4 * g + kk) * 16);
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          const int row = wn + nt * 8 + g;
          unsigned b0, b1;
          if constexpr (kBits == 8) {
            // Bytes k = 16 kk + 2t, +1 (b0) and 16 kk + 8 + 2t, +1 (b1), all in chunk kk.
            const unsigned char* w = w_st + swz_i8x64(row, kk);
            const uint32_t lo = *reinterpret_cast<const unsigned short*>(w + 2 * t);
            const uint32_t hi = *reinterpret_cast<const unsigned short*>(w + 8 + 2 * t);
            float wf[4];  // q - z: |.| <= 255, exact in f16 and bf16
            dequant_i8x4(lo | (hi << 16), wf, kZeros ? zero_of(kk, nt) : 0.0f);
            b0 = pack_rounded<T>(wf[0], wf[1]), b1 = pack_rounded<T>(wf[2], wf[3]);  // exact
          } else {
            // Words 2 kk (k 0..7 of the step) and 2 kk + 1 (k 8..15): values 2t, 2t + 1 of each (int4_pair_bits).
            const uint4& v = tile_words[nt / 2];
            const uint2 words = nt % 2 == 0 ? uint2{v.x, v.y} : uint2{v.z, v.w};
            const float z = kZeros ? zero_of(kk, nt) : 0.0f;
            const unsigned zero2 = kZeros ? pack_rounded<T>(z, z) : 0u;  // exact
            b0 = int4_pair<T, kZeros>(int4_pair_bits(words.x, t), zero2);
            b1 = int4_pair<T, kZeros>(int4_pair_bits(words.y, t), zero2);
          }
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) mma_16x8x16<T>(sums[mt][nt], a[mt], b0, b1);
        }
        // Group scales, at the group's last k-step: acc += part * s[n, g] (columns 2t, 2t + 1 of each n-tile).
        if (kGroups && (kk + 1) % kGroupSteps == 0) {
          const int64_t grp = group_of(kt, kk);
#pragma unroll
          for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int col = min(bn + wn + nt * 8 + 2 * t + e, p.n - 1);  // past n: any valid scale, never stored
              const float sc = __ldg(p.scales + col * groups + grp);
#pragma unroll
              for (int mt = 0; mt < MT; ++mt) {
                acc[mt][nt][e] = fmaf(part[mt][nt][e], sc, acc[mt][nt][e]);
                acc[mt][nt][2 + e] = fmaf(part[mt][nt][2 + e], sc, acc[mt][nt][2 + e]);
                part[mt][nt][e] = part[mt][nt][2 + e] = 0.0f;
              }
            }
        }
      }
    });

    allow_dependent_launch();  // the split-K reduction (if any) may be placed now; it waits for this grid to complete
    // Epilogue: INT8's per-channel scale on the fp32 sum; then either this part's sums to the split-K workspace, or the
    // bias, the residual (accumulate) and one rounding.
    const int c0 = bn + wn;
    for_each_acc(acc, lane, p.m - bm, p.n - c0, [&](int r, int c, float v) {
      const float y = kGroups ? v : v * __ldg(p.scales + c0 + c);
      if (p.partial) {
        p.partial[(static_cast<int64_t>(blockIdx.z) * p.m + bm + r) * p.n + c0 + c] = y;
        return;
      }
      T* o = p.out + static_cast<int64_t>(bm + r) * p.out_stride + c0 + c;
      float z = y;
      if (p.bias) z += to_float(p.bias[c0 + c]);
      if (p.accumulate) z += to_float(*o);
      *o = from_float<T>(z);
    });
  }
}

// Split-K: out = the sum of the parts' fp32 partials (in part order) + bias (+ out), one rounding; a thread an output.
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads) linear_splitk_reduce_kernel(const LinearTcParams<T> p,
                                                                                    int k_splits) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();
  } else {
    const int64_t mn = static_cast<int64_t>(p.m) * p.n;
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= mn) return;
    wait_for_prior_grid();  // the parts' partials (launched as the tile kernel's programmatic dependent)
    const int64_t row = i / p.n, col = i % p.n;
    float y = 0.0f;
    for (int z = 0; z < k_splits; ++z) y += p.partial[z * mn + i];
    if (p.bias) y += to_float(p.bias[col]);
    T* o = p.out + row * p.out_stride + col;
    if (p.accumulate) y += to_float(*o);
    *o = from_float<T>(y);
  }
}

// Calls f(bits, scales) with the weights' form as compile-time constants: bits 8 or 4 and their WeightScales (INT4
// always has group scales; zero points make them group_zero).
template <typename F>
Status with_weight_form(const detail::WeightOnlyArgs& a, F f) {
  using S = WeightScales;
  const auto form = [&](auto bits) -> Status {
    if (a.zeros) return f(bits, std::integral_constant<S, S::group_zero>{});
    if (a.group > 0) return f(bits, std::integral_constant<S, S::group>{});
    if constexpr (decltype(bits)::value == 8) return f(bits, std::integral_constant<S, S::row>{});
    return Status(StatusCode::internal, "linear: INT4 weights need a scale group");
  };
  if (a.bits == 8) return form(std::integral_constant<int, 8>{});
  if (a.bits == 4) return form(std::integral_constant<int, 4>{});
  return invalid_argument("linear: bits must be 8 or 4, got " + std::to_string(a.bits));
}

// The kernel for the plan's token tile (16 or 64 tokens) and the weights' form (groups of 32: two a k tile).
template <typename T, int kBits, WeightScales kScales>
void (*linear_tc_kernel_for(int tokens, int group))(LinearTcParams<T>) {
  if constexpr (kScales != WeightScales::row)
    if (group == 32)
      return tokens == 16 ? linear_tc_kernel<T, kBits, 1, kScales, 2> : linear_tc_kernel<T, kBits, 4, kScales, 2>;
  return tokens == 16 ? linear_tc_kernel<T, kBits, 1, kScales, 4> : linear_tc_kernel<T, kBits, 4, kScales, 4>;
}

// Re-splits k for the residency the occupancy API reports for the chosen kernel (refine_linear_tc_splits), then
// launches it and, with several parts, the reduction, the partials in stream-ordered scratch.
template <typename T>
Status launch_linear_tc(const detail::WeightOnlyArgs& a, LaunchPlan plan, cudaStream_t stream) {
  void (*kernel)(LinearTcParams<T>) = nullptr;
  KK_RETURN_IF_ERROR(with_weight_form(a, [&](auto bits, auto scales) -> Status {
    kernel = linear_tc_kernel_for<T, decltype(bits)::value, decltype(scales)::value>(plan.tokens, a.group);
    return Status::Ok();
  }));
  int resident = 0;
  KK_RETURN_IF_ERROR(resident_blocks(kernel, kLinearTcThreads, static_cast<size_t>(plan.smem_bytes), &resident));
  if (resident > 0 && resident < plan.blocks_per_sm) refine_linear_tc_splits(resident, a.rows, a.n, a.k, &plan);
  LinearTcParams<T> p{static_cast<const T*>(a.x),
                      static_cast<const uint8_t*>(a.qweight),
                      a.scales,
                      static_cast<const T*>(a.bias),
                      static_cast<T*>(a.out),
                      static_cast<int>(a.rows),
                      static_cast<int>(a.n),
                      static_cast<int>(a.k),
                      a.x_stride,
                      a.out_stride,
                      a.group,
                      a.accumulate ? 1 : 0,
                      static_cast<int>(plan.k_tiles_per_split),
                      nullptr,
                      a.zeros};
  return with_stream_scratch(static_cast<size_t>(plan.workspace_bytes), stream, [&](void* workspace) -> Status {
    p.partial = static_cast<float*>(workspace);
    // One-dimensional blocks (the kernel indexes threadIdx.x only); the grid from the plan.
    KK_RETURN_IF_ERROR(launch_kernel(a.x_from_prior_grid, kernel, grid_of(plan), dim3(kLinearTcThreads),
                                     static_cast<size_t>(plan.smem_bytes), stream, p));
    if (plan.k_splits > 1) {
      KK_RETURN_IF_ERROR(launch_dependent(linear_splitk_reduce_kernel<T>, one_thread_each(a.rows * a.n),
                                          dim3(kElementwiseThreads), 0, stream, p, plan.k_splits));
    }
    return Status::Ok();
  });
}

}  // namespace kernelkit::cuda

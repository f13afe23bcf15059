// Weight-only quantized linear layer (W8A16 / W4A16) below kLinearTcMinM tokens (INT4: up to the tensor-core GEMV's
// tokens): GEMVs that stream the weights once (beyond them launch_linear hands the plan to the tensor-core tiles of
// linear_tc.cuh). INT4 weights always take the tensor-core GEMV (linear_gemv_mma_kernel, below), whose loads follow
// their fragment-ordered layout; INT8 weights (and linear_fp8's GEMV) the split-K FMA GEMV by default.
//
//   out [m, n] = x [m, k] @ (q [n, k] * s)^T + bias [n], fp32 accumulation, one rounding per output.
//   Bytes ~ n k bits / 8 (weights) + n (k / g) 4 (INT4 scales) + 2 (m k + m n + n); FLOP 2 m n k. At m = 1 this is
//   pure weight streaming (~1 FLOP per weight byte for INT8): the kernels are built to keep HBM busy.
//
// The FMA GEMV (LaunchPlan from plan_quant): a block computes kRows output features x kTokens tokens; its k_warps warps
// (blockDim.y) split k between them (the split-K: warp w takes the 16-byte chunks c = 32 w + lane, stepping by
// 32 k_warps, so each warp reads 512 contiguous bytes of a row a step) and add their sums through shared memory. The
// grid is one-dimensional, token tiles fastest: the blocks that read the same weight rows for different tokens run at
// the same time, so the second read of a row is an L2 hit and HBM sees the weights about once per call.
// Per chunk and row: 16 bytes of weights (16 INT8 values), dequantized exactly to fp32 (quant_common.cuh) once and
// used for all kTokens tokens; x comes through L1 (it is re-read by every block of the SM, the weights bypass L1). The
// weights come through registers (the next chunk loaded before this one is computed) or, for long per-thread loops on
// sm_80+ (plan.stages > 0: the planner's choice from kLinearGemvRingMinVecs chunks a thread, or KERNELKIT_TUNE
// gemv_stages), through a per-thread cp.async ring in shared memory, up to 3 chunks x kRows rows in flight a thread
// without holding registers; planner.hpp (kLinearGemvStages) has the H200 measurements behind that rule.
// Scales (WeightScales): per group of k (when group > 0; groups of 32, 64 or 128): a 16-byte chunk lies inside one
// group, so one scale (and zero point) a row serves the whole chunk, the zero point folded into the exact
// dequantization; per row (group 0): applied to the final sum.
// Act-order (perm): gather_inputs_kernel writes x[:, perm] to scratch first; every kernel here issues its first weight
// loads and only then waits for that grid (wait_for_prior_grid: it is launched as the gather's programmatic
// dependent on sm_90), so the gather overlaps the weights' first round trip instead of adding a launch gap.
// linear_fp8 at m <= 2 (KERNELKIT_TUNE fp8_gemv=1, an experiment: cuBLASLt's row-wise FP8 GEMM takes 27.3 us at m1
// n14336 k4096 on the H100 where the 58.7 MB of weights stream in 19.4 at the copy ceiling): the same kernel (kFp8)
// over e4m3 codes of x and of the weights, each converted exactly to fp32, sums scaled by x's and the weights' scales
// (per tensor, or per token x per channel) at the end.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <iterator>
#include <utility>

#include "kernelkit/planner.hpp"
#include "kernels/common/async_copy.cuh"
#include "kernels/common/check.cuh"
#include "kernels/common/device_check.cuh"
#include "kernels/common/e4m3.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/scratch.hpp"
#include "kernels/common/vec.cuh"
#include "ops/quant/linear_tc.cuh"
#include "ops/quant/quant.hpp"
#include "ops/quant/quant_common.cuh"
#include "ops/quant/quant_plan.hpp"

namespace kernelkit::cuda {

template <typename T>
struct LinearParams {
  const T* x;              // [m, k], row stride x_stride (16-byte aligned rows)
  const uint8_t* qweight;  // [n, k * bits / 8] bytes, contiguous, 16-byte aligned
  const float* scales;     // [n] (WeightScales::row) or [n, k / group]
  const T* bias;           // [n] or null
  T* out;                  // [m, n], row stride out_stride
  int64_t m, n, k, x_stride, out_stride;
  int group_shift;  // log2 of the scale group along k (32, 64 or 128); 0 for WeightScales::row
  int accumulate;  // out += ... (each output is read by the one thread that writes it)
  int stages;      // GEMV: the cp.async ring's depth (2 to 4), 0 for register prefetch
  // linear_fp8 (the kFp8 GEMV): x's e4m3 codes [m, k] (row stride x_stride), its scales x_scales[token * xs_stride],
  // the weights' scales[row * ws_stride] (stride 0: one for the tensor). A kernel reads xq or zeros, never both: one
  // member (a longer parameter block made ptxas reschedule the default GEMV kernels).
  union {  // unnamed in an aggregate initializer: {}, xq = nullptr
    const uint8_t* xq;
    const int8_t* zeros;  // [n, k / group] (WeightScales::group_zero)
  };
  const float* x_scales = nullptr;
  int64_t xs_stride = 0, ws_stride = 1;
};

// Output rows per block of the split-K kernel (the planner's rule, restated for the template).
constexpr int kLinearGemvRows = 4;

// The index in scales / zeros ([n, k / group]) of the group of 16-byte chunk c of `row` (a chunk lies inside one
// group: shifts, not 64-bit divisions).
template <typename T, int kBits>
__device__ __forceinline__ int64_t chunk_group(const LinearParams<T>& p, int64_t row, int64_t c) {
  return row * (p.k >> p.group_shift) + ((c * (128 / kBits)) >> p.group_shift);
}

// acc[r][t] += the dot product of 16-byte weight chunk c of row r (w[r]: 16 INT8 values q, dequantized
// exactly to fp32 q - zero[r]) with the same k range of token t's x. WeightScales::row sums stay unscaled (the row's
// scale multiplies the final sum); group sums are scaled by scale[r], the chunk's group scale of each row, and
// zero[r] is its zero point (group_zero; else 0). kFp8: the weights and x are e4m3 codes (X = uint8_t), their sums
// unscaled.
template <typename T, int kBits, int kTokens, int kRows, WeightScales kScales, bool kFp8 = false, typename X = T>
__device__ __forceinline__ void accumulate_chunk(const uint4 (&w)[kRows], const float (&scale)[kRows],
                                                 const float (&zero)[kRows], const X* const (&xrow)[kTokens], int64_t c,
                                                 float (&acc)[kRows][kTokens]) {
  static_assert(kBits == 8, "INT4 weights take the tensor-core GEMV (their layout is its fragments')");
  constexpr int kPerChunk = 128 / kBits;          // weights a 16-byte chunk
  constexpr int kPieces = 4;                      // 32-bit words a chunk
  constexpr int kPerPiece = kPerChunk / kPieces;  // values a word
  float part[kRows][kTokens];                     // this chunk's sums
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kTokens; ++t) part[r][t] = 0.0f;
#pragma unroll
  for (int piece = 0; piece < kPieces; ++piece) {
    // kPerPiece weights of each row, exact fp32.
    float wf[kRows][kPerPiece];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const uint32_t word = piece == 0 ? w[r].x : piece == 1 ? w[r].y : piece == 2 ? w[r].z : w[r].w;
      if constexpr (kFp8)
        e4m3_to_floats<4>({word}, wf[r]);
      else
        dequant_i8x4(word, wf[r], zero[r]);
    }
    // x [k0, k0 + kPerPiece) of each token: one 8- or 16-byte load.
    const int64_t k0 = c * kPerChunk + piece * kPerPiece;
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      if constexpr (kFp8) {
        float xf[kPerPiece];
        e4m3_to_floats<4>({*reinterpret_cast<const uint32_t*>(xrow[t] + k0)}, xf);
#pragma unroll
        for (int j = 0; j < kPerPiece; ++j)
#pragma unroll
          for (int r = 0; r < kRows; ++r) part[r][t] = fmaf(xf[j], wf[r][j], part[r][t]);
      } else {
        const Vec<T, kPerPiece> xv = Vec<T, kPerPiece>::load(xrow[t] + k0);
#pragma unroll
        for (int j = 0; j < kPerPiece; ++j) {
          const float xf = to_float(xv.v[j]);
#pragma unroll
          for (int r = 0; r < kRows; ++r) part[r][t] = fmaf(xf, wf[r][j], part[r][t]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kTokens; ++t)
      acc[r][t] = kScales != WeightScales::row ? fmaf(part[r][t], scale[r], acc[r][t]) : acc[r][t] + part[r][t];
}

// One output from its fp32 sum over k: the per-row scale of WeightScales::row (kFp8: x's, then the weights'), the
// bias, the residual (accumulate), one rounding.
template <typename T, WeightScales kScales, bool kFp8 = false>
__device__ __forceinline__ void store_output(const LinearParams<T>& p, int64_t row, int64_t token, float y) {
  if constexpr (kFp8)
    y = (y * __ldg(p.x_scales + token * p.xs_stride)) * __ldg(p.scales + row * p.ws_stride);
  else if constexpr (kScales == WeightScales::row)
    y *= __ldg(p.scales + row);
  if (p.bias) y += to_float(p.bias[row]);
  if (p.accumulate) y += to_float(p.out[token * p.out_stride + row]);
  p.out[token * p.out_stride + row] = from_float<T>(y);
}

// kRing: the cp.async ring (p.stages deep) or the register prefetch, chosen at compile time: with one run-time branch
// holding both, ptxas moved the INT8 prefetch loads below the math of the chunk they should overlap (sm_90 SASS).
template <typename T, int kBits, int kTokens, int kRows, bool kRing, WeightScales kScales, bool kFp8 = false>
__global__ void __launch_bounds__(kLinearMaxThreads, kLinearMinBlocks) linear_gemv_kernel(const LinearParams<T> p) {
  if constexpr (!kDeviceHasType<T> || (kFp8 && !KK_DEVICE_HAS_FP8)) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75, FP8 below sm_89
  } else {
    // A GEMV after this one may start its weight loads (quant_plan.hpp kLinearGemvProgrammatic).
    allow_dependent_launch();
    using X = std::conditional_t<kFp8, uint8_t, T>;  // x's elements: T, or e4m3 codes
    constexpr int kPerChunk = 128 / kBits;  // weights a 16-byte chunk
    extern __shared__ __align__(16) unsigned char smem[];
    float* partials = reinterpret_cast<float*>(smem);  // [k_warps][kRows * kTokens]
    const int lane = threadIdx.x, warp = threadIdx.y, k_warps = blockDim.y;
    const unsigned tiles = static_cast<unsigned>((p.m + kTokens - 1) / kTokens);
    const int64_t t0 = static_cast<int64_t>(blockIdx.x % tiles) * kTokens;
    const int64_t n0 = static_cast<int64_t>(blockIdx.x / tiles) * kRows;
    const int64_t row_bytes = p.k * kBits / 8, chunks = p.k / kPerChunk;

    // Rows past n and tokens past m read row n - 1 / token m - 1 (valid memory, no divergence) and are never stored.
    const uint8_t* wrow[kRows];
    int64_t row[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) row[r] = min(n0 + r, p.n - 1), wrow[r] = p.qweight + row[r] * row_bytes;
    const X* xrow[kTokens];
    const X* const x = [&] {
      if constexpr (kFp8)
        return p.xq;
      else
        return p.x;
    }();
#pragma unroll
    for (int t = 0; t < kTokens; ++t) xrow[t] = x + min(t0 + t, p.m - 1) * p.x_stride;

    float acc[kRows][kTokens];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int t = 0; t < kTokens; ++t) acc[r][t] = 0.0f;

    const int64_t c_step = static_cast<int64_t>(k_warps) * kWarpSize;
    const int64_t c_first = static_cast<int64_t>(warp) * kWarpSize + lane;
    auto compute = [&](const uint4(&w)[kRows], int64_t c) {
      float scale[kRows], zero[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int64_t g = kScales == WeightScales::row ? 0 : chunk_group<T, kBits>(p, row[r], c);
        scale[r] = kScales == WeightScales::row ? 1.0f : __ldg(p.scales + g);
        zero[r] = kScales == WeightScales::group_zero ? static_cast<float>(__ldg(p.zeros + g)) : 0.0f;
      }
      accumulate_chunk<T, kBits, kTokens, kRows, kScales, kFp8, X>(w, scale, zero, xrow, c, acc);
    };
    if constexpr (kRing) {
      // The cp.async ring: this thread's chunks land in its own 16-byte slots of shared memory ([stage][row][thread]),
      // so stages - 1 chunks of kRows rows are in flight without holding registers. A thread reads back only its own
      // copies, so waiting for its own groups is enough (no barrier in the loop).
      uint4* const ring = reinterpret_cast<uint4*>(smem);
      const int threads = kWarpSize * k_warps, tid = warp * kWarpSize + lane;
      auto slot = [&](int s, int r) { return ring + (s * kRows + r) * threads + tid; };
      auto issue = [&](int64_t c, int s) {  // one commit group, possibly empty (group counts stay uniform)
        if (c < chunks)
#pragma unroll
          for (int r = 0; r < kRows; ++r) copy_async<16>(slot(s, r), wrow[r] + c * 16);
        cp_async_commit();
      };
      for (int s = 0; s < p.stages - 1; ++s) issue(c_first + s * c_step, s);
      wait_for_prior_grid();  // x written by the kernel before (act-order's gather), the weights already in flight
      int s = 0;  // the slot of chunk c
      for (int64_t c = c_first; c < chunks; c += c_step) {
        // The chunk stages - 1 steps ahead goes into the slot chunk c - c_step used (read back a step ago).
        issue(c + (p.stages - 1) * c_step, s == 0 ? p.stages - 1 : s - 1);
        cp_async_wait_dynamic(p.stages - 1);  // chunk c has landed
        uint4 w[kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r) w[r] = *slot(s, r);
        compute(w, c);
        s = s + 1 == p.stages ? 0 : s + 1;
      }
      cp_async_wait<0>();
      __syncthreads();  // every thread is done with the ring: the partials below reuse its bytes
    } else {
      // Registers (the default): the next chunk's weights are in flight while this one is computed.
      int64_t c = c_first;
      uint4 wcur[kRows];
      if (c < chunks)
#pragma unroll
        for (int r = 0; r < kRows; ++r) wcur[r] = load_weights(wrow[r] + c * 16);
      wait_for_prior_grid();  // as in the ring
      for (; c < chunks; c += c_step) {
        uint4 wnext[kRows];
        const int64_t cn = c + c_step;
        if (cn < chunks)
#pragma unroll
          for (int r = 0; r < kRows; ++r) wnext[r] = load_weights(wrow[r] + cn * 16);
        compute(wcur, c);
#pragma unroll
        for (int r = 0; r < kRows; ++r) wcur[r] = wnext[r];
      }
    }

    // Warp sums (shuffles), then the k_warps partial sums of each output added in a fixed order by one thread.
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        const float v = warp_sum(acc[r][t]);
        if (lane == 0) partials[warp * kRows * kTokens + r * kTokens + t] = v;
      }
    __syncthreads();
    const int i = warp * kWarpSize + lane;
    if (i < kRows * kTokens) {
      const int r = i / kTokens, t = i % kTokens;
      if (n0 + r < p.n && t0 + t < p.m) {
        float y = 0.0f;
        for (int w = 0; w < k_warps; ++w) y += partials[w * kRows * kTokens + i];
        store_output<T, kScales, kFp8>(p, n0 + r, t0 + t, y);
      }
    }
  }
}

// The tensor-core GEMVs' end: each warp's C fragments into shared memory ([k_warps][MT x 16 rows][NT 8 tokens]:
// element e of lane (g, t) in row tile mt and token tile nt is row 16 mt + g + 8 (e / 2), token 8 nt + 2t + e % 2),
// then each output's sum over the warps, stored by store_output.
template <typename T, WeightScales kScales, bool kFp8, int NT, int MT>
__device__ __forceinline__ void mma_gemv_store(const LinearParams<T>& p, const float (&acc)[MT][NT][4], int64_t n0) {
  constexpr int kRows = kLinearMmaGemvRows * MT, kTokens = kLinearMmaGemvTokens * NT;
  extern __shared__ __align__(16) unsigned char smem[];
  float* partials = reinterpret_cast<float*>(smem);
  const int lane = threadIdx.x, warp = threadIdx.y, k_warps = blockDim.y, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        partials[(warp * kRows + kLinearMmaGemvRows * mt + g + 8 * (e / 2)) * kTokens + kLinearMmaGemvTokens * nt +
                 2 * t + e % 2] = acc[mt][nt][e];
  __syncthreads();
  for (int i = warp * kWarpSize + lane; i < kRows * kTokens; i += k_warps * kWarpSize) {
    const int r = i / kTokens, tok = i % kTokens;
    if (n0 + r >= p.n || tok >= p.m) continue;
    float y = 0.0f;
    for (int w = 0; w < k_warps; ++w) y += partials[w * kRows * kTokens + i];
    store_output<T, kScales, kFp8>(p, n0 + r, tok, y);
  }
}

// The A pair of values 2j, 2j + 1 (j = 0..3) of an INT4 word of the kernel layout as packed T, less the zero point
// pair zero2 (kZero): (word >> 4j) & 0x000F000F holds their raw nibbles, and one LOP3 ((a & b) ^ c) both biases them
// (xor 8: u = value + 8) and ors in the exponent of 1024 (f16) / 128 (bf16), then one packed subtract leaves the
// values (int4_pair's arithmetic in two instructions fewer).
template <typename T, bool kZero>
__device__ __forceinline__ unsigned int4_pair_of(uint32_t word, int j, unsigned zero2) {
  uint32_t biased;
  asm("lop3.b32 %0, %1, %2, %3, 0x6a;"
      : "=r"(biased)
      : "r"(word >> (4 * j)), "n"(0x000F000F), "n"(int4_exponent2<T>() ^ 0x00080008u));
  return int4_pair_unbias<T, kZero>(biased, zero2);
}

// The A pair of INT8 values 2j, 2j + 1 (j = 0, 1) of a word (bytes in k order) as packed T, less the zero point z
// (exact: |q - z| <= 255). f16: one byte permute puts the biased bytes (u = q + 128, `biased` = word ^ 0x80808080)
// under the exponent of 1024 and one packed subtract of 1152 + z leaves q - z (z2: that subtrahend as a packed pair);
// bf16's 7-bit mantissa cannot hold u, so its pair goes through fp32 (dequant_i8x4's magic) and one packing.
template <typename T, bool kZero>
__device__ __forceinline__ unsigned int8_pair_of(uint32_t biased, int j, unsigned z2, float z) {
  if constexpr (std::is_same_v<T, __half>) {
    const uint32_t h = byte_perm(biased, 0x64646464u, j == 0 ? 0x4140u : 0x4342u);
    const __half2 v = __hsub2(*reinterpret_cast<const __half2*>(&h), *reinterpret_cast<const __half2*>(&z2));
    return *reinterpret_cast<const unsigned*>(&v);
  } else {
    const float offset = 8388736.0f + (kZero ? z : 0.0f);
    const float lo = float_from_bits(byte_perm(biased, 0x4B000000u, 0x7540u | (2 * j))) - offset;
    const float hi = float_from_bits(byte_perm(biased, 0x4B000000u, 0x7540u | (2 * j + 1))) - offset;
    return pack_rounded<T>(lo, hi);
  }
}

// The tensor-core GEMV (quant_plan.hpp kLinearMmaGemvRows): W4A16 with any group (32, 64, 128) and W8A16 (below), up
// to 32 tokens. Block: MT row tiles of kLinearMmaGemvRows = 16 weight rows (the MMA's M) x NT tiles of 8 tokens (its
// N; lanes of tokens past m read token m - 1 and their columns are dropped), k split between the k_warps warps by
// 64-value regions (warp w takes regions w, w + k_warps, ..., U of them a batch, the next batch's weights loaded while
// one computes); a region's x fragments serve all MT row tiles (quant_plan.hpp kLinearMmaGemvMaxRowTiles).
// INT4: the kernel layout (ops/quant.hpp) stores a row tile's region as the 32 lanes' fragments, so lane (g, t) loads
// its share with one 16-byte load (a warp reads 512 contiguous bytes): words 2t, 2t + 1 of row g (values 16t .. 16t +
// 15), then those of row g + 8; with them 16 values of x at the same k for token g of each tile. The 4 k-steps of a
// region take the values 16t + 4s .. 16t + 4s + 3 of every lane's share, so the A pairs are int4_pair_of the loaded
// words as they are (pair 2 (s % 2) of word s / 2 for labels 2t, 2t + 1; the next pair for 2t + 8, 2t + 9) and the B
// pairs are x's consecutive values. A region's sums are scaled by its group's scales (rows g, g + 8) into fp32
// accumulators; the warps' sums meet in shared memory. kGroups32: groups of 32, two a region: lanes t = 0, 1 hold the
// first group's values and t = 2, 3 the second's, and a quad's MMA sums over its lanes, so each k-step is two MMAs,
// the first with lanes 2 and 3's A pairs zeroed and the second with lanes 0 and 1's, each sum scaled by its own
// group's scales (twice the MMAs of the larger groups; a lane's zero points are its own group's).
// INT8 weights (kBits 8, any WeightScales; rows as they are): a region is 32 values, 2 k-steps; lane (g, t) loads 8
// bytes of rows g and g + 8, values 8t .. 8t + 7 (words .x, .y: k-step s takes word s, its bytes 0-1 for labels 2t,
// 2t + 1 and 2-3 for 2t + 8, 2t + 9) and x's 8 values at the same k; per-channel scales multiply the final sums
// (store_output), group scales each region's. tests/quant/emulation/gemv_mma.py checks this index math.
// kScalesAhead (an experiment, instantiated by bench/dev/gemv_lab.cu only): each region's group scales and zero
// points are loaded with its weights, a batch ahead, instead of at the start of the batch that uses them.
template <typename T, int kBits, WeightScales kScales, int NT, bool kGroups32, int U, int MT = 1,
          bool kScalesAhead = false>
__global__ void __launch_bounds__(kLinearMaxThreads, mma_gemv_min_blocks(NT, MT))
    linear_gemv_mma_kernel(const LinearParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    allow_dependent_launch();  // as in linear_gemv_kernel
    constexpr int kRows = kLinearMmaGemvRows * MT;
    constexpr int kRegion = 256 / kBits, kSteps = kRegion / 16;  // values and k-steps of a 32-byte region
    constexpr bool kZeros = kScales == WeightScales::group_zero, kGroups = kScales != WeightScales::row;
    static_assert(kBits == 4 || !kGroups32, "groups of 32 hold whole INT8 regions");
    static_assert(kBits == 8 || (kLinearMmaGemvRows == detail::kInt4TileRows && kRegion == detail::kInt4RegionValues),
                  "the INT4 layout's tiles and regions are this kernel's");
    const int lane = threadIdx.x, warp = threadIdx.y, k_warps = blockDim.y, g = lane / 4, t = lane % 4;
    const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kRows;
    const int64_t groups = kGroups ? p.k >> p.group_shift : 1;
    // A region's group: r >> region_shift (a region lies in one group but for INT4 groups of 32).
    const int regions = static_cast<int>(p.k / kRegion), region_shift = p.group_shift - (kBits == 4 ? 6 : 5);
    const int x_lane = kBits == 8 ? 8 * t : 16 * t;
    // Row tile mt's rows g (h 0) and g + 8 (h 1) (rows past n: row n - 1, read, never stored), as offsets from row g's
    // scales and zero points (groups) and weights (bytes: INT8 rows h 0 and 1; INT4 the tile's fragments, h 0): 32-bit,
    // since the k of this plan is at most kLinearMmaGemvMaxK, and one base pointer each, so 4 row tiles cost 16
    // registers, not 48.
    const int64_t row0 = min(n0 + g, p.n - 1), tile0 = n0 / kLinearMmaGemvRows;
    const uint8_t* const w0 =
        kBits == 8 ? p.qweight + row0 * p.k + 8 * t : p.qweight + tile0 * kLinearMmaGemvRows * p.k / 2 + 16 * lane;
    const float* const s0 = p.scales + (kGroups ? row0 * groups : 0);
    const int8_t* const z0 = kZeros ? p.zeros + row0 * groups : nullptr;
    int w_off[MT][2], g_off[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int64_t tile = min(tile0 + mt, (p.n - 1) / kLinearMmaGemvRows);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t d = min(n0 + kLinearMmaGemvRows * mt + g + 8 * h, p.n - 1) - row0;
        w_off[mt][h] = static_cast<int>(kBits == 8 ? d * p.k : (tile - tile0) * kLinearMmaGemvRows * p.k / 2);
        g_off[mt][h] = static_cast<int>(d * groups);
      }
    }
    const T* xr[NT];  // token g of each tile, this lane's values of a region on
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      xr[nt] = p.x + min(static_cast<int64_t>(kLinearMmaGemvTokens * nt + g), p.m - 1) * p.x_stride + x_lane;
    const int step = k_warps * U;  // regions between a warp's batches

    float acc[MT][NT][4] = {};  // C of each tile pair: rows g (tokens 2t, 2t + 1) and g + 8 (the same tokens)
    // Region r's MMAs; `real` false for a batch's slots past the last region (r clamped to it): computed alike, their
    // sums dropped, so a batch is straight-line code whose x and scale loads the compiler issues ahead of its MMAs.
    // Guarded per region instead, each region's x and scale loads sat right before their MMAs and warps stalled on
    // them (m1 n11008 k4096 W4A16 on the H100: 0.72 eligible warps a scheduler, half the stalls on L1TEX). Batches
    // whose x exceeds kLinearMmaGemvStraightTiles tile-regions stay guarded.
    constexpr bool kStraightBatch = NT * U <= kLinearMmaGemvStraightTiles;
    constexpr int kParts = kGroups32 ? 2 : 1;  // a region's groups
    // A region's weights (a lane's share) and, with kScalesAhead, its rows' scales and zero points.
    struct Slot {
      uint2 w[MT][2];
      float s[MT][kParts][2], z[MT][2];
    };
    // The group (groups of 32: this lane's; the first of its two for the scales) of region r.
    auto group_of = [&](int r) { return !kGroups ? 0 : kGroups32 ? 2 * r + t / 2 : r >> region_shift; };
    auto first_group_of = [&](int r) { return kGroups32 ? 2 * r : group_of(r); };
    // Row tile mt's row g + 8h: its scale of group grp + q and its zero point of group grp.
    auto scale_at = [&](int mt, int h, int grp, int q) { return kGroups ? __ldg(s0 + g_off[mt][h] + grp + q) : 1.0f; };
    auto zero_at = [&](int mt, int h, int grp) { return __ldg(z0 + g_off[mt][h] + grp); };
    auto load_scales = [&](int r, Slot& slot) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int q = 0; q < kParts; ++q) slot.s[mt][q][h] = scale_at(mt, h, first_group_of(r), q);
          if constexpr (kZeros) slot.z[mt][h] = zero_at(mt, h, group_of(r));
        }
      }
    };
    auto compute = [&](int r, const Slot& slot, bool real) {
      const uint2(&w)[MT][2] = slot.w;
      const int grp = group_of(r), first_grp = first_group_of(r);
      unsigned xs[NT][8];  // pair i: x 2i, 2i + 1 of the lane's 16 (INT8: 8) values (k-step s: pairs 2s, 2s + 1)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const uint4 xa = *reinterpret_cast<const uint4*>(xr[nt] + kRegion * r);
        xs[nt][0] = xa.x, xs[nt][1] = xa.y, xs[nt][2] = xa.z, xs[nt][3] = xa.w;
        if constexpr (kBits == 4) {
          const uint4 xb = *reinterpret_cast<const uint4*>(xr[nt] + kRegion * r + 8);
          xs[nt][4] = xb.x, xs[nt][5] = xb.y, xs[nt][6] = xb.z, xs[nt][7] = xb.w;
        }
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        // INT8: the words biased once (u = q + 128), as int8_pair_of takes them.
        const uint2 b_lo = {w[mt][0].x ^ 0x80808080u, w[mt][0].y ^ 0x80808080u},
                    b_hi = {w[mt][1].x ^ 0x80808080u, w[mt][1].y ^ 0x80808080u};
        float part[kParts][NT][4] = {};
        float zl = 0.0f, zh = 0.0f;  // group_zero: the rows' zero points
        unsigned zl2 = 0, zh2 = 0;   // as the packed T pairs the pair helpers subtract (exact)
        if constexpr (kBits == 8 && std::is_same_v<T, __half>) zl2 = zh2 = pack_rounded<T>(1152.0f, 1152.0f);
        if constexpr (kZeros) {
          zl = kScalesAhead ? slot.z[mt][0] : zero_at(mt, 0, grp);
          zh = kScalesAhead ? slot.z[mt][1] : zero_at(mt, 1, grp);
          if constexpr (kBits == 4)
            zl2 = pack_rounded<T>(zl, zl), zh2 = pack_rounded<T>(zh, zh);
          else if constexpr (std::is_same_v<T, __half>)
            zl2 = pack_rounded<T>(1152.0f + zl, 1152.0f + zl), zh2 = pack_rounded<T>(1152.0f + zh, 1152.0f + zh);
        }
#pragma unroll
        for (int s = 0; s < kSteps; ++s) {
          unsigned a[4];
          if constexpr (kBits == 4) {
            const uint32_t lo = s < 2 ? w[mt][0].x : w[mt][0].y, hi = s < 2 ? w[mt][1].x : w[mt][1].y;
            const int j = 2 * (s % 2);
            a[0] = int4_pair_of<T, kZeros>(lo, j, zl2), a[1] = int4_pair_of<T, kZeros>(hi, j, zh2);
            a[2] = int4_pair_of<T, kZeros>(lo, j + 1, zl2), a[3] = int4_pair_of<T, kZeros>(hi, j + 1, zh2);
          } else {
            const uint32_t lo = s == 0 ? b_lo.x : b_lo.y, hi = s == 0 ? b_hi.x : b_hi.y;
            a[0] = int8_pair_of<T, kZeros>(lo, 0, zl2, zl), a[1] = int8_pair_of<T, kZeros>(hi, 0, zh2, zh);
            a[2] = int8_pair_of<T, kZeros>(lo, 1, zl2, zl), a[3] = int8_pair_of<T, kZeros>(hi, 1, zh2, zh);
          }
#pragma unroll
          for (int q = 0; q < kParts; ++q) {
            // Groups of 32: part q takes the A pairs of the lanes of group q only (zero pairs add nothing).
            const unsigned keep = kGroups32 && (t / 2 != q) ? 0u : ~0u;
            const unsigned aq[4] = {a[0] & keep, a[1] & keep, a[2] & keep, a[3] & keep};
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) mma_16x8x16<T>(part[q][nt], aq, xs[nt][2 * s], xs[nt][2 * s + 1]);
          }
        }
        // acc += part (* the group's scales, rows g and g + 8).
#pragma unroll
        for (int q = 0; q < kParts; ++q) {
          const float sl = kScalesAhead ? slot.s[mt][q][0] : scale_at(mt, 0, first_grp, q),
                      sh = kScalesAhead ? slot.s[mt][q][1] : scale_at(mt, 1, first_grp, q);
          if (real)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
              float(&c)[4] = acc[mt][nt];
              c[0] = fmaf(part[q][nt][0], sl, c[0]), c[1] = fmaf(part[q][nt][1], sl, c[1]);
              c[2] = fmaf(part[q][nt][2], sh, c[2]), c[3] = fmaf(part[q][nt][3], sh, c[3]);
            }
        }
      }
    };
    // A lane's 16 bytes of a row tile's region (INT4) or 8 bytes of each of its rows (INT8), streamed past L1 (and
    // with kScalesAhead the region's scales and zero points).
    auto load = [&](int r0, Slot(&slots)[U]) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int r = r0 + u * k_warps;
        if (r < regions) {
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
            if constexpr (kBits == 4) {
              const uint4 v = load_weights(w0 + w_off[mt][0] + 512 * r);
              slots[u].w[mt][0] = {v.x, v.y}, slots[u].w[mt][1] = {v.z, v.w};
            } else {
              slots[u].w[mt][0] = load_weights8(w0 + w_off[mt][0] + 32 * r);
              slots[u].w[mt][1] = load_weights8(w0 + w_off[mt][1] + 32 * r);
            }
          if constexpr (kScalesAhead) load_scales(r, slots[u]);
        }
      }
    };
    Slot cur[U] = {}, next[U] = {};
    load(warp, cur);
    wait_for_prior_grid();  // x written by the kernel before (act-order's gather), the first batch in flight
    for (int r0 = warp; r0 < regions; r0 += step) {
      load(r0 + step, next);  // the next batch in flight while this one computes
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int r = r0 + u * k_warps;
        if constexpr (kStraightBatch)
          compute(min(r, regions - 1), cur[u], r < regions);
        else if (r < regions)
          compute(r, cur[u], true);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) cur[u] = next[u];
    }

    mma_gemv_store<T, kScales, false>(p, acc, n0);
  }
}

// linear_fp8 (per-tensor or per-token x per-channel scales) for up to 16 tokens on mma.sync m16n8k32 e4m3
// (KERNELKIT_TUNE fp8_gemv=2, an experiment, sm_89+): the tensor-core GEMV's organization with FP8 codes as they are,
// no dequantization. A k-step is 32 values: lane (g, t) loads 8 bytes of rows g and g + 8 and of its token's x at
// 32 s + 8t, the first 4 for the labels 4t .. 4t + 3 (a0, a1, b0), the next 4 for 16 + 4t .. (a2, a3, b1). The warps
// split k by 128-value regions, whose 4 consecutive k-steps chain one MMA partial sum that then joins the fp32
// accumulators: the promotion interval cuBLASLt uses (Hopper's FP8 MMA keeps about 14 bits of a running sum; the
// tests' bound, docs/tolerances.md, models exactly this). Scaled by x's and the weights' scales at the end. (On sm_90
// its MMA is a conversion to f16: see mma_16x8x32_e4m3.)
template <typename T, int NT>
__global__ void __launch_bounds__(kLinearMaxThreads, kLinearMinBlocks)
    linear_fp8_gemv_mma_kernel(const LinearParams<T> p) {
  if constexpr (!kDeviceHasType<T> || !KK_DEVICE_HAS_FP8) {
    __trap();  // unreachable: the host refuses FP8 below sm_89 (and bf16 for kernels built for sm_75)
  } else {
    constexpr int kSteps = 4, kRows = kLinearMmaGemvRows;
    const int lane = threadIdx.x, warp = threadIdx.y, k_warps = blockDim.y, g = lane / 4, t = lane % 4;
    const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kRows;
    const int64_t row_lo = min(n0 + g, p.n - 1), row_hi = min(n0 + g + 8, p.n - 1);  // past n: read, never stored
    const int k = static_cast<int>(p.k), regions = (k + 32 * kSteps - 1) / (32 * kSteps);
    const uint8_t* const w_lo = p.qweight + row_lo * p.k + 8 * t;
    const uint8_t* const w_hi = p.qweight + row_hi * p.k + 8 * t;
    const uint8_t* xr[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      xr[nt] = p.xq + min(static_cast<int64_t>(kLinearMmaGemvTokens * nt + g), p.m - 1) * p.x_stride + 8 * t;

    float acc[1][NT][4] = {};                       // one row tile (mma_gemv_store's MT)
    auto load = [&](int r, uint2(&w)[kSteps][2]) {  // region r's k-steps (those before k)
#pragma unroll
      for (int j = 0; j < kSteps; ++j) {
        const int k0 = 32 * (kSteps * r + j);
        if (r < regions && k0 < k) w[j][0] = load_weights8(w_lo + k0), w[j][1] = load_weights8(w_hi + k0);
      }
    };
    uint2 cur[kSteps][2] = {}, next[kSteps][2] = {};
    load(warp, cur);
    for (int r = warp; r < regions; r += k_warps) {
      load(r + k_warps, next);  // the next region in flight while this one computes
      // The region's x codes first, all in flight before its MMAs (as the tensor-core GEMV's batches: see there).
      uint2 xv[kSteps][NT];
#pragma unroll
      for (int j = 0; j < kSteps; ++j)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int k0 = 32 * (kSteps * r + j);
          xv[j][nt] = k0 < k ? *reinterpret_cast<const uint2*>(xr[nt] + k0) : uint2{0, 0};
        }
      float part[NT][4] = {};
#pragma unroll
      for (int j = 0; j < kSteps; ++j) {
        if (32 * (kSteps * r + j) >= k) continue;
        const unsigned a[4] = {cur[j][0].x, cur[j][1].x, cur[j][0].y, cur[j][1].y};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_16x8x32_e4m3(part[nt], a, xv[j][nt].x, xv[j][nt].y);
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[0][nt][e] += part[nt][e];
#pragma unroll
      for (int j = 0; j < kSteps; ++j) cur[j][0] = next[j][0], cur[j][1] = next[j][1];
    }

    mma_gemv_store<T, WeightScales::row, true>(p, acc, n0);
  }
}

// The GEMV of plan's token tile and weight path (register prefetch or the cp.async ring); one-dimensional grid (token
// tiles fastest, see above), block 32 x k_warps.
template <typename T, int kBits, WeightScales kScales, bool kFp8 = false>
Status launch_gemv(const LinearParams<T>& p, const LaunchPlan& plan, cudaStream_t stream, bool dependent = false) {
  constexpr int kRows = kLinearGemvRows;
  auto launch = [&](auto tokens) -> Status {
    constexpr int kTokens = decltype(tokens)::value;
    if (plan.out_rows != kRows || plan.tokens != kTokens)
      return Status(StatusCode::internal, "linear: plan of " + std::to_string(plan.out_rows) + " rows x " +
                                              std::to_string(plan.tokens) + " tokens has no kernel");
    const auto kernel = plan.stages > 0 ? linear_gemv_kernel<T, kBits, kTokens, kRows, true, kScales, kFp8>
                                        : linear_gemv_kernel<T, kBits, kTokens, kRows, false, kScales, kFp8>;
    return launch_kernel(dependent, kernel, grid_of(plan), block_of(plan), static_cast<size_t>(plan.smem_bytes), stream,
                         p);
  };
  switch (plan.tokens) {
    case 1:
      return launch(std::integral_constant<int, 1>{});
    case 2:
      return launch(std::integral_constant<int, 2>{});
    default:
      break;
  }
  return Status(StatusCode::internal, "linear: no kernel for a tile of " + std::to_string(plan.tokens) + " tokens");
}

// The GEMV's parameters of a weight-only call (for linear_fp8: its weights, scales and output; x set by the caller).
template <typename T>
LinearParams<T> gemv_params(const detail::WeightOnlyArgs& a, const LaunchPlan& plan) {
  return {.x = static_cast<const T*>(a.x),
          .qweight = static_cast<const uint8_t*>(a.qweight),
          .scales = a.scales,
          .bias = static_cast<const T*>(a.bias),
          .out = static_cast<T*>(a.out),
          .m = a.rows,
          .n = a.n,
          .k = a.k,
          .x_stride = a.x_stride,
          .out_stride = a.out_stride,
          .group_shift = a.group > 0 ? std::countr_zero(static_cast<unsigned>(a.group)) : 0,
          .accumulate = a.accumulate ? 1 : 0,
          .stages = plan.stages};
}

// Act-order: xg [m, k] (contiguous) = x[:, perm], one thread per 16 bytes of xg (kVec inputs of one token). An entry of
// perm outside [0, k) is recorded (once, from token 0) and its input reads as 0. The GEMV after it is this grid's
// programmatic dependent: every block lets it launch first thing (it waits for this grid's end before reading xg).
template <typename T, typename Index>
__global__ void __launch_bounds__(kElementwiseThreads)
    gather_inputs_kernel(const T* x, int64_t x_stride, const Index* perm, T* xg, int64_t m, int64_t k,
                         detail::DeviceErrorRecord* err, OpId op) {
  constexpr int kVec = 16 / sizeof(T);
  allow_dependent_launch();
  const int64_t vecs = k / kVec, i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * vecs) return;
  const int64_t t = i / vecs, j0 = (i % vecs) * kVec;
  Vec<T, kVec> v;
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    const int64_t src = perm[j0 + e];
    const bool inside = src >= 0 && src < k;
    if (!inside && t == 0) record_device_error(err, op, detail::DeviceCheck::perm, j0 + e, -1, src, k);
    v.v[e] = inside ? x[t * x_stride + src] : from_float<T>(0.0f);
  }
  v.store(xg + t * k + j0);
}

template <typename T>
Status launch_linear(const detail::WeightOnlyArgs& a, const LaunchPlan& plan, cudaStream_t stream) {
  if (a.perm) {  // x gathered into the weights' k order (stream-ordered scratch), then this call on it
    static_assert(16 % sizeof(T) == 0);
    const int64_t vecs = a.rows * a.k / (16 / sizeof(T));  // k is a multiple of 16 (validate_weight_only)
    detail::DeviceErrorRecord* err = nullptr;
    KK_RETURN_IF_ERROR(device_error_record(a.device.index, &err));
    return with_stream_scratch(static_cast<size_t>(a.rows * a.k) * sizeof(T), stream, [&](void* xg) -> Status {
      const auto gather = [&](auto index) {
        using Index = decltype(index);
        gather_inputs_kernel<T, Index><<<one_thread_each(vecs), kElementwiseThreads, 0, stream>>>(
            static_cast<const T*>(a.x), a.x_stride, static_cast<const Index*>(a.perm), static_cast<T*>(xg), a.rows, a.k,
            err, a.op);
      };
      if (a.perm_i64)
        gather(int64_t{});
      else
        gather(int32_t{});
      KK_CUDA_RETURN(cudaGetLastError());
      detail::WeightOnlyArgs g = a;
      g.x = xg, g.x_stride = a.k, g.perm = nullptr, g.x_from_prior_grid = true;
      return launch_linear<T>(g, plan, stream);
    });
  }
  if (plan.k_warps == 0) return launch_linear_tc<T>(a, plan, stream);  // tensor cores (m >= kLinearTcMinM)
  LinearParams<T> p = gemv_params<T>(a, plan);
  p.zeros = a.zeros;
  const bool dependent = a.x_from_prior_grid || plan.programmatic;
  return with_weight_form(a, [&](auto bits, auto scales) -> Status {
    constexpr WeightScales kScales = decltype(scales)::value;
    constexpr int kBits = decltype(bits)::value;
    if (plan.tokens % kLinearMmaGemvTokens != 0) {
      if constexpr (kBits == 4)
        return Status(StatusCode::internal, "linear: INT4 weights need a tensor-core GEMV plan (tokens a multiple of " +
                                                std::to_string(kLinearMmaGemvTokens) + "), got " +
                                                std::to_string(plan.tokens));
      else
        return launch_gemv<T, kBits, kScales>(p, plan, stream, dependent);
    }
    // The tensor-core GEMV (KERNELKIT_TUNE gemv_mma): 1, 2 or 4 token tiles in batches of plan.stages regions
    // (mma_gemv_unroll); INT4 groups of 32 two MMAs a k-step (kGroups32, one row tile); INT4 with groups of 64 or more
    // also 2 or 4 row tiles a warp (KERNELKIT_TUNE gemv_mma_mtiles).
    const auto none = [&] {
      return Status(StatusCode::internal, "linear: no tensor-core GEMV for " + std::to_string(plan.out_rows) +
                                              " rows x " + std::to_string(plan.tokens) + " tokens in batches of " +
                                              std::to_string(plan.stages) + " regions");
    };
    const auto launch = [&]<int I>(std::integral_constant<int, I>) -> Status {
      constexpr MmaGemvForm kForm = kMmaGemvForms[I];
      constexpr int MT = kForm.row_tiles, NT = kForm.tiles, U = kForm.unroll;
      if constexpr (MT > 1 && kBits != 4) {
        return none();  // row tiles: INT4 only (the planner's rule)
      } else {
        auto kernel = linear_gemv_mma_kernel<T, kBits, kScales, NT, false, U, MT>;
        if (kBits == 4 && a.group == 32) {
          if constexpr (MT > 1)
            return none();
          else
            kernel = linear_gemv_mma_kernel<T, kBits, kScales, NT, kBits == 4, U>;
        }
        return launch_kernel(dependent, kernel, grid_of(plan), block_of(plan), static_cast<size_t>(plan.smem_bytes),
                             stream, p);
      }
    };
    // The plan's form, looked for among kMmaGemvForms from index I on.
    const int form = mma_gemv_form(plan.out_rows, plan.tokens, plan.stages);
    const auto dispatch = [&](const auto& self, auto index) -> Status {
      constexpr int I = decltype(index)::value;
      if constexpr (I == static_cast<int>(std::size(kMmaGemvForms)))
        return none();
      else
        return form == I ? launch(index) : self(self, std::integral_constant<int, I + 1>{});
    };
    return dispatch(dispatch, std::integral_constant<int, 0>{});
  });
}

// linear_fp8 with per-tensor or per-token x per-channel scales on the GEMV (or, for a tensor-core GEMV plan, on
// linear_fp8_gemv_mma_kernel): `w` the weight-only form of the call (its weights, weight scales, bias and output; a
// split-K plan), `a` for x's codes and the scalings.
template <typename T>
Status launch_linear_fp8_gemv(const detail::WeightOnlyArgs& w, const detail::W8A8Args& a, const LaunchPlan& plan,
                              cudaStream_t stream) {
  if (plan.k_warps == 0) return Status(StatusCode::internal, "linear_fp8: the GEMV needs a split-K plan");
  LinearParams<T> p = gemv_params<T>(w, plan);
  p.xq = reinterpret_cast<const uint8_t*>(a.xq);
  p.x_scales = a.x_scales;
  p.xs_stride = a.x_per_tensor ? 0 : 1;
  p.ws_stride = a.w_per_tensor ? 0 : 1;
  if (plan.tokens % kLinearMmaGemvTokens != 0) return launch_gemv<T, 8, WeightScales::row, true>(p, plan, stream);
  // The FP8 tensor-core GEMV (KERNELKIT_TUNE fp8_gemv=2): 1 or 2 token tiles.
  if (plan.tokens != kLinearMmaGemvTokens && plan.tokens != 2 * kLinearMmaGemvTokens)
    return Status(StatusCode::internal,
                  "linear_fp8: no tensor-core GEMV for " + std::to_string(plan.tokens) + " tokens");
  const auto kernel =
      plan.tokens == kLinearMmaGemvTokens ? linear_fp8_gemv_mma_kernel<T, 1> : linear_fp8_gemv_mma_kernel<T, 2>;
  kernel<<<grid_of(plan), block_of(plan), static_cast<size_t>(plan.smem_bytes), stream>>>(p);
  KK_CUDA_RETURN(cudaGetLastError());
  return Status::Ok();
}

}  // namespace kernelkit::cuda

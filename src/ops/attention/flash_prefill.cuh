// Prefill attention, FlashAttention-2 style: one block owns BM query rows of one (sequence, head) and walks the K/V
// tiles of BN keys that those rows can see.
//   S = Q K^T on tensor cores (Q fragments from shared memory, K via ldmatrix), scaled into the log2 domain (with a
//   soft-cap: cap tanh(scale s / cap) first; ALiBi: -slope |i + s_k - s_q - j| added), masked to -inf (keys past the
//   sequence; causal: key j > query i + s_k - s_q; a sliding window: key j < that position - window_left), online
//   softmax in fp32 registers (running max m and sum l per row; exp2_ftz; O rescaled only when a row's max moved,
//   see online_softmax_step), P rounded to T, O += P V on tensor cores (V via ldmatrix.trans, every ldmatrix address
//   a per-lane register plus an immediate: swz_lane_offsets).
//   K/V tiles are staged in shared memory through cp.async with `stages` buffers (2: tile n+1 loads while tile n is
//   computed; 1 when the profile's shared memory has no room for two), so global loads overlap the math on sm_80+
//   (a third buffer measured no faster: kAttnMaxStages).
// Warps: BM / (16 MW), each owning 16 MW query rows for the whole kernel (its rows of Q, S, P and O never leave the
// warp, so the only block barriers are around the shared K/V buffers). Shared memory rows are 16-byte chunks
// XOR-swizzled by (row % 8): the 8 rows an ldmatrix phase reads sit in 8 different bank groups instead of one (rows
// are 128, 256 or 512 bytes: without the swizzle an 8-way conflict). Per (sequence, head): bytes = E (s_q d [q] +
// s_q d [o] + 2 s_k d [k, v]) + 4 s_q [lse]; FLOPs = 4 d x visible pairs.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "ops/attention/attention.hpp"
#include "ops/attention/attention_common.cuh"
#include "ops/attention/mma_softmax.cuh"
#include "kernels/common/async_copy.cuh"
#include "kernels/common/check.cuh"
#include "kernels/common/device_check.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/vec.cuh"
#include "kernelkit/planner.hpp"
#include "ops/attention/attention_plan.hpp"

namespace kernelkit::cuda {

template <typename T>
struct FlashParams {
  AttnTensors<T> t;  // q, out [b, s_q, h, d] or varlen [total_q, h, d]; k, v [b, s_k, h_kv, d] or [total_k, h_kv, d]
  int64_t lse_sb, lse_sh;
  const int* cu_q;  // varlen [b + 1] or null
  const int* cu_k;
  int s_q, s_k;                    // dense lengths (varlen: each sequence's from cu_q / cu_k, at most these)
  int batch, total_q, total_k;     // varlen: what cu_q / cu_k are checked against
  detail::DeviceErrorRecord* err;  // where a bad cu_seqlens entry is recorded (device_check.cuh)
  int group;                       // heads / kv_heads
  ScoreTransform score;            // scale, soft-cap, into the log2 domain
  bool causal;
  int window;  // sliding window: query i sees keys j >= i + s_k - s_q - window; -1: none
  int stages;  // K/V buffers: 1 or 2
  int chunks;  // head_dim / 8: the 16-byte chunks of a row that hold data (the kernel's D / 8 or fewer, see
               // attention_kernel_head_dim: the others are zero-filled in shared memory and never stored)
  AlibiSlopes alibi;
  float rescale_slack;  // the warp-specialized sm_90a kernel's (TilePlan::rescale_slack): 0 rescales at every rise
  // A window, a soft-cap or ALiBi: the launch takes a kMasks kernel variant; so does a negative scale (options.scale
  // may be any finite value), so that the plain variants may take the row max of unscaled scores (score_tile's
  // kUnscaled).
  bool masked() const { return window >= 0 || score.cap_log2 != 0.0f || alibi.slopes || score.scale_in < 0.0f; }
};

// Copies `valid` rows (row stride `stride` elements) of a [ROWS][D] tile into swizzled shared memory; rows past
// `valid` and chunks past `chunks` (a head_dim under D) are zero-filled (never stale data: a NaN in an unused V row
// would survive P = 0 as 0 * NaN). A thread keeps
// one 16-byte chunk column and steps kRowStep rows: a fixed trip count, so the loop unrolls into straight-line copies
// with constant offsets (a loop from threadIdx.x compiled to a counted loop with remainder branches, every tile).
// Layout: [ROWS][D] in swz<D> (ldmatrix's), or with kColumnBlocks D / 64 blocks of [ROWS][64] in swz<64> one after
// the other (wgmma's 128-byte swizzle, wgmma.cuh: every operand row 128 bytes); the same for D = 64.
template <int ROWS, int D, int THREADS, bool kColumnBlocks = false, typename T>
__device__ __forceinline__ void load_tile(T* s, const T* g, int64_t stride, int valid, int chunks) {
  constexpr int kChunks = D / 8, kRowStep = THREADS / kChunks;
  static_assert(THREADS % kChunks == 0 && ROWS % kRowStep == 0, "tile copy: whole rows a pass, whole passes");
  const int ch = threadIdx.x % kChunks, r0 = threadIdx.x / kChunks;
#pragma unroll
  for (int i = 0; i < ROWS / kRowStep; ++i) {
    const int r = r0 + i * kRowStep;
    T* dst = kColumnBlocks ? s + (ch / 8) * ROWS * 64 + swz<64>(r, ch % 8 * 8) : s + swz<D>(r, ch * 8);
    if (r < valid && ch < chunks)
      copy_async<16>(dst, g + r * stride + ch * 8);
    else
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  }
}

// The block setup, masked softmax step and epilogue of a prefill kernel, as functions for the sm_90a kernel
// (flash_prefill_sm90a.cu). flash_prefill_kernel below spells the same steps inline: built on these helpers its SASS
// differs (register allocation and scheduling, not the math), so that move needs a GPU check and timing of its own.
// What a block of BM query rows of one (sequence, head) reads and sees: its rows' and its KV head's pointers, the
// sequence lengths (varlen: from cu_q / cu_k) and the K/V tiles of BN keys any of its rows can see.
template <typename T>
struct FlashBlock {
  const T *q, *k, *v;  // the block's first query row; the sequence's first key / value row of its KV head
  int b, h, q_start, k_start, m0, s_q, s_k;  // q_start, k_start: the sequence's first rows (varlen; else 0)
  int rows;    // query rows of the block inside the sequence (the last tile may be partial)
  int offset;  // causal: query i sees keys j <= i + offset (bottom-right aligned)
  float slope;  // the head's ALiBi slope in the log2 domain (0: none)
  // K/V tiles to walk: tile0 .. tile0 + n_tiles - 1, the tiles of [kv_begin, kv_end), the keys any row sees (the
  // first row's window start, the last row's causal end); tiles outside are skipped, not masked
  int tile0, n_tiles;
};

// Varlen: sequence b's span [cu[b], cu[b + 1]) of one cu_seqlens array, checked (a few compares a block): inside
// [0, total], not decreasing (nor from the previous entry: one decreasing entry skips both sequences beside it), 0
// first and total last, at most max_len long (the grid covers max_len). False for a bad span, recorded once (thread
// 0) and never followed. A bad array never makes a block access outside the tensors, but spans that pass can still
// overlap farther apart (cu = 0 4 8 2 3 10: [3, 10) and [4, 8)): the call's output is then not valid, as
// check_errors says. Uniform over the block (every thread reads the same entries).
__device__ __forceinline__ bool varlen_span(const int* cu, int b, int batch, int total, int max_len,
                                            detail::DeviceCheck cu_arg, detail::DeviceCheck len_arg,
                                            detail::DeviceErrorRecord* err, int& start, int& len) {
  const int lo = cu[b], hi = cu[b + 1];
  int bad = -1, value = 0;
  if (lo < 0 || lo > total || (b == 0 ? lo != 0 : cu[b - 1] > lo))
    bad = b, value = lo;
  else if (hi < lo || hi > total || (b == batch - 1 && hi != total))
    bad = b + 1, value = hi;
  if (bad >= 0) {
    if (threadIdx.x == 0) record_device_error(err, OpId::attention, cu_arg, bad, -1, value, total);
    return false;
  }
  if (hi - lo > max_len) {
    if (threadIdx.x == 0) record_device_error(err, OpId::attention, len_arg, b, -1, hi - lo, max_len);
    return false;
  }
  start = lo, len = hi - lo;
  return true;
}

// The query and key spans of sequence b: dense from the lengths, varlen from cu_q / cu_k (checked). False: skip the
// block (a bad cu_seqlens entry). kVarlen = false: a kernel launched for dense batches only, without the varlen code
// (the TMA-fed wgmma kernel: its SASS with that code in took 10% longer at b1 h32 s4096 d128 on the H200).
template <bool kVarlen = true, typename T>
__device__ __forceinline__ bool sequence_spans(const FlashParams<T>& p, int b, int& q_start, int& s_q, int& k_start,
                                               int& s_k) {
  q_start = 0, s_q = p.s_q, k_start = 0, s_k = p.s_k;
  if (!kVarlen || !p.cu_q) return true;
  using detail::DeviceCheck;
  return varlen_span(p.cu_q, b, p.batch, p.total_q, p.s_q, DeviceCheck::cu_seqlens_q, DeviceCheck::max_seqlen_q, p.err,
                     q_start, s_q) &&
         varlen_span(p.cu_k, b, p.batch, p.total_k, p.s_k, DeviceCheck::cu_seqlens_k, DeviceCheck::max_seqlen_k, p.err,
                     k_start, s_k);
}

// The K/V tiles of BN keys the query rows m0 .. m0 + rows - 1 can see: from the first row's window start (0 without a
// window) to the last row's causal end (s_k without causal); none when that span is empty.
struct KvSpan {
  int tile0, n_tiles;
};
template <int BN, typename T>
__device__ __forceinline__ KvSpan visible_tiles(const FlashParams<T>& p, int m0, int rows, int offset, int s_k) {
  const int kv_end = p.causal ? min(s_k, m0 + rows + offset) : s_k;
  const int kv_begin = p.window >= 0 ? max(0, m0 + offset - p.window) : 0;
  const int tile0 = kv_begin / BN;
  return {tile0, kv_end > kv_begin ? (kv_end + BN - 1) / BN - tile0 : 0};
}

// kMasks: the kernel variant for a sliding window or a soft-cap, kAlibi (with kMasks) the one that adds ALiBi's bias
// too. The plain one compiles without their code: with it in the loop (not taken) the TMA-fed wgmma prefill ran
// 488.6 us against 420 at b1 h32 s4096 d128 causal on the H200, at nearly the same registers (190 vs 186) and 3632
// instructions against 2712; the ALiBi bias adds 152 more instructions and 56 registers to the masked one.

// Whether K/V tile n0 .. n0 + BN - 1 holds a key some row of m0 .. m0 + BM - 1 does not see, so its scores need the
// per-element mask: it crosses the sequence end, the causal diagonal or (kMasks) the window's start.
template <bool kMasks, int BM, int BN, typename T>
__device__ __forceinline__ bool tile_needs_mask(const FlashParams<T>& p, int n0, int m0, int offset, int s_k) {
  return n0 + BN > s_k || (p.causal && n0 + BN - 1 > m0 + offset) ||
         (kMasks && p.window >= 0 && n0 < m0 + BM - 1 + offset - p.window);
}

// The scores of one 16-row tile against K/V keys n0 ..: into the log2 domain (with kMasks the soft-cap, with kAlibi
// the ALiBi bias of `slope`, FlashBlock's, too), masked to -inf where `mask` (tile_needs_mask) and the key is hidden
// from the row, and folded into the rows' running max. row_a: the lane's first row (position in the sequence); its
// second is row_a + 8.
// kUnscaled (plain variants only): the scores stay unscaled (masked, and their max taken, as they are): the caller
// folds the scale into its exponent (online_softmax_factors, one FFMA a score instead of FMUL and FADD).
// kChains: each row's max in that many independent FMNMX chains (kRowChains), each started from its first score
// (not from -inf: an instruction a chain and row), combined at the end and then folded into tile_max.
template <bool kMasks, bool kAlibi, bool kUnscaled = false, int kChains = 1, int NB, typename T>
__device__ __forceinline__ void score_tile(const FlashParams<T>& p, float (&s)[NB][4], bool mask, int n0, int row_a,
                                           int offset, int s_k, float (&tile_max)[2], float slope = 0.0f) {
  static_assert(kMasks || !kAlibi, "ALiBi is a kMasks variant");
  static_assert(!(kMasks && kUnscaled), "the kMasks variants transform the scores first");
  static_assert(NB % kChains == 0, "whole chains");
  const int t = threadIdx.x % 4;
  float chain_max[kChains][2];  // kChains 1: tile_max itself
  if constexpr (kMasks) p.score.apply(s);
  if constexpr (kAlibi) {
    if (slope != 0.0f)  // block-uniform: one head a block
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[nb][e] = alibi_biased(s[nb][e], slope, row_a + 8 * (e / 2) + offset, n0 + nb * 8 + 2 * t + (e & 1));
  }
  // The lane's keys are n0 + 2t + j, j = 8 nb + (e & 1): each row's visible span of j once, then one compare a bound
  // and score against a constant j (a window only in the kMasks variants: without one the lower bound folds away).
  detail::KeySpan span[2] = {};
  if (mask)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      span[r] = detail::visible_key_span(row_a + 8 * r, n0 + 2 * t, s_k, p.causal, offset, kMasks ? p.window : -1);
#pragma unroll
  for (int nb = 0; nb < NB; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float x = kMasks || kUnscaled ? s[nb][e] : s[nb][e] * p.score.scale_in;
      const int j = nb * 8 + (e & 1);
      if (mask && (j > span[e / 2].hi || j < span[e / 2].lo)) x = -INFINITY;
      s[nb][e] = x;
      if constexpr (kChains == 1) {
        tile_max[e / 2] = fmaxf(tile_max[e / 2], x);
      } else {
        float& m = chain_max[nb % kChains][e / 2];
        m = nb < kChains && e % 2 == 0 ? x : fmaxf(m, x);  // the chain's first score of the row starts it
      }
    }
  if constexpr (kChains > 1) {
#pragma unroll
    for (int stride = 1; stride < kChains; stride *= 2)  // a tree: log2(kChains) levels
#pragma unroll
      for (int c = 0; c + stride < kChains; c += 2 * stride)
#pragma unroll
        for (int r = 0; r < 2; ++r) chain_max[c][r] = fmaxf(chain_max[c][r], chain_max[c + stride][r]);
    tile_max[0] = fmaxf(tile_max[0], chain_max[0][0]), tile_max[1] = fmaxf(tile_max[1], chain_max[0][1]);
  }
}

// False for a block with nothing to do (a shorter sequence of a varlen batch: the grid covers the longest; a
// sequence with a bad cu_seqlens entry). The grid is (query tiles, heads, batch), or with kHeadsFirst (heads, query
// tiles, batch): blocks are dispatched in linear order, so then every head's longest causal tile runs before any
// head's second longest (the grid's tail is the shortest tiles of all heads, not a mix).
template <int BM, int BN, bool kVarlen = true, bool kHeadsFirst = false, typename T>
__device__ __forceinline__ bool flash_block(const FlashParams<T>& p, FlashBlock<T>& f) {
  // Causal: the last query tiles see the most keys, so they are scheduled first (tile index 0 is the last tile) and
  // the tail of the grid is the short ones.
  const int m_tile = kHeadsFirst
                         ? (p.causal ? static_cast<int>(gridDim.y) - 1 - static_cast<int>(blockIdx.y) : blockIdx.y)
                         : (p.causal ? static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x) : blockIdx.x);
  f.b = blockIdx.z, f.h = kHeadsFirst ? blockIdx.x : blockIdx.y, f.m0 = m_tile * BM;
  if (!sequence_spans<kVarlen>(p, f.b, f.q_start, f.s_q, f.k_start, f.s_k) || f.m0 >= f.s_q) return false;
  const int hk = f.h / p.group;
  f.q = p.t.q + f.b * p.t.qs.batch + static_cast<int64_t>(f.q_start + f.m0) * p.t.qs.token + f.h * p.t.qs.head;
  f.k = p.t.k + f.b * p.t.ks.batch + static_cast<int64_t>(f.k_start) * p.t.ks.token + hk * p.t.ks.head;
  f.v = p.t.v + f.b * p.t.vs.batch + static_cast<int64_t>(f.k_start) * p.t.vs.token + hk * p.t.vs.head;
  f.rows = min(BM, f.s_q - f.m0);
  f.offset = f.s_k - f.s_q;
  f.slope = p.alibi.log2_slope(f.b, f.h);
  const KvSpan kv = visible_tiles<BN>(p, f.m0, f.rows, f.offset, f.s_k);
  f.tile0 = kv.tile0, f.n_tiles = kv.n_tiles;
  return true;
}

// One 16-row tile's scores of K/V tile `tile` (keys n0 = tile BN ..): into the log2 domain (score), masked to -inf
// (only tiles that cross the sequence end, the causal diagonal or the window start), then the online-softmax step (s
// becomes P, O and l rescaled). row_a: the lane's first row (position in the sequence); its second is row_a + 8.
template <bool kMasks, bool kAlibi, int BM, int BN, int D8, typename T>
__device__ __forceinline__ void mask_and_softmax(const FlashParams<T>& p, const FlashBlock<T>& f, int tile, int row_a,
                                                 float (&s)[BN / 8][4], float (&m_run)[2], float (&l_run)[2],
                                                 float (&acc)[D8][4]) {
  const int n0 = tile * BN;
  float tile_max[2] = {m_run[0], m_run[1]};
  score_tile<kMasks, kAlibi>(p, s, tile_needs_mask<kMasks, BM, BN>(p, n0, f.m0, f.offset, f.s_k), n0, row_a, f.offset,
                             f.s_k, tile_max, f.slope);
  online_softmax_step<true>(s, tile_max, m_run, l_run, acc);
}

// The first half of mask_and_softmax (tile_max: the max of the rows' scores in the tile, unscaled in the plain
// variants: score_tile's kUnscaled) with the mask decided once a tile: score_tile inlined twice, so a tile without a
// hidden key runs no per-element mask code (with `mask` a runtime argument the compiler branched around each
// element's mask test: 64 branches a 128-key tile).
template <bool kMasks, bool kAlibi, int BM, int BN, typename T>
__device__ __forceinline__ void mask_scores(const FlashParams<T>& p, const FlashBlock<T>& f, int tile, int row_a,
                                            float (&s)[BN / 8][4], float (&tile_max)[2]) {
  const int n0 = tile * BN;
  constexpr int kChains = kRowChains<BN / 8>;
  if (tile_needs_mask<kMasks, BM, BN>(p, n0, f.m0, f.offset, f.s_k))
    score_tile<kMasks, kAlibi, !kMasks, kChains>(p, s, true, n0, row_a, f.offset, f.s_k, tile_max, f.slope);
  else
    score_tile<kMasks, kAlibi, !kMasks, kChains>(p, s, false, n0, row_a, f.offset, f.s_k, tile_max, f.slope);
}

// Epilogue of a warp owning rows wr .. wr + 16 MW - 1 of the block: l over the quad, O / l (0 for a row that saw no
// key), lse = ln(sum) = ln2 * m + ln(l) (-inf if none). The rows are staged in the warp's own rows of `stage` (a
// [BM][D] swz<D> area no other warp touches any more), then stored 16 bytes a lane.
template <int MW, int D, typename T>
__device__ __forceinline__ void store_warp_rows(const FlashParams<T>& p, const FlashBlock<T>& f, int wr,
                                                const float (&acc)[MW][D / 8][4], const float (&m_run)[MW][2],
                                                float (&l_run)[MW][2], T* stage) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  __syncwarp();
#pragma unroll
  for (int mi = 0; mi < MW; ++mi) {
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l_run[mi][r] += __shfl_xor_sync(0xffffffffu, l_run[mi][r], 1);
      l_run[mi][r] += __shfl_xor_sync(0xffffffffu, l_run[mi][r], 2);
      inv[r] = l_run[mi][r] > 0.0f ? 1.0f / l_run[mi][r] : 0.0f;
      const int row = f.m0 + wr + 16 * mi + g + 8 * r;
      if (p.t.lse && t == 0 && row < f.s_q)
        p.t.lse[f.b * p.lse_sb + f.h * p.lse_sh + f.q_start + row] =
            l_run[mi][r] > 0.0f ? m_run[mi][r] * kLn2 + logf(l_run[mi][r]) : -INFINITY;
    }
    const int r0 = wr + 16 * mi + g;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      *reinterpret_cast<unsigned*>(stage + swz<D>(r0, i * 8 + 2 * t)) =
          pack_rounded<T>(acc[mi][i][0] * inv[0], acc[mi][i][1] * inv[0]);
      *reinterpret_cast<unsigned*>(stage + swz<D>(r0 + 8, i * 8 + 2 * t)) =
          pack_rounded<T>(acc[mi][i][2] * inv[1], acc[mi][i][3] * inv[1]);
    }
  }
  __syncwarp();
  T* og = p.t.out + f.b * p.t.os.batch + static_cast<int64_t>(f.q_start + f.m0) * p.t.os.token + f.h * p.t.os.head;
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int c = lane; c < 16 * MW * kChunks; c += 32) {
    const int r = wr + c / kChunks, ch = c % kChunks;
    if (r < f.rows && ch < p.chunks)
      *reinterpret_cast<uint4*>(og + r * p.t.os.token + ch * 8) =
          *reinterpret_cast<const uint4*>(stage + swz<D>(r, ch * 8));
  }
}

// __launch_bounds__(threads, 1): one block per SM is enough (the tiles fill shared memory), so ptxas may use up to 255
// registers; without the 1, sm_75 capped the 128-thread kernels at 128 registers and spilled.
// MW: 16-row MMA tiles a warp owns (1 or 2). With 2, each K and V fragment read from shared memory (ldmatrix) feeds
// two independent MMA chains, halving the shared-memory reads per MMA and doubling the work in flight per warp
// (FlashAttention-2's 128-row tile on 4 warps). It doubles the O and S registers, so it is planned for head_dim <= 128
// only. (With MW = 1 everywhere: 173 TFLOP/s for bf16 d128 causal s4096 on the H200, against SDPA flash's 271.)
template <typename T, int D, int BM, int BN, int MW, bool kMasks, bool kAlibi>
__global__ void __launch_bounds__(BM * 2 / MW, 1) flash_prefill_kernel(const FlashParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    static_assert(BM % (16 * MW) == 0 && BN % 16 == 0 && D % 16 == 0 && D >= 64,
                  "tile shapes are multiples of the MMA");
    constexpr int kRowsPerWarp = 16 * MW;
    constexpr int kThreads = BM / kRowsPerWarp * 32;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    T* sQ = reinterpret_cast<T*>(smem_raw);  // [BM][D]
    T* sK = sQ + BM * D;                     // [stages][BN][D]
    T* sV = sK + p.stages * BN * D;          // [stages][BN][D]

    // Causal: the last query tiles see the most keys, so they are scheduled first (blockIdx.x 0 is the last tile) and
    // the tail of the grid is the short ones.
    const int m_tile = p.causal ? static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x) : blockIdx.x;
    const int b = blockIdx.z, h = blockIdx.y, m0 = m_tile * BM;
    int q_start, k_start, s_q, s_k;
    // A shorter sequence of a varlen batch (the grid covers the longest), or one with a bad cu_seqlens entry.
    if (!sequence_spans(p, b, q_start, s_q, k_start, s_k) || m0 >= s_q) return;
    const int hk = h / p.group;
    const T* qg = p.t.q + b * p.t.qs.batch + static_cast<int64_t>(q_start + m0) * p.t.qs.token + h * p.t.qs.head;
    const T* kg = p.t.k + b * p.t.ks.batch + static_cast<int64_t>(k_start) * p.t.ks.token + hk * p.t.ks.head;
    const T* vg = p.t.v + b * p.t.vs.batch + static_cast<int64_t>(k_start) * p.t.vs.token + hk * p.t.vs.head;
    const int rows = min(BM, s_q - m0);
    const int offset = s_k - s_q;  // causal: query i sees keys j <= i + offset (bottom-right aligned)
    const float slope = kAlibi ? p.alibi.log2_slope(b, h) : 0.0f;  // ALiBi (score_tile)
    // The tiles any row of this block can see: tile0 .. tile0 + n_tiles - 1; the others are skipped, not masked.
    const KvSpan kv = visible_tiles<BN>(p, m0, rows, offset, s_k);
    const int tile0 = kv.tile0, n_tiles = kv.n_tiles;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int wr = warp * kRowsPerWarp;  // the warp's first row in the tile
    // The lane's ldmatrix chunks (swz_lane_offsets): Q as A (rows wr + 16 mi + lane % 16, column half lane / 16), K as
    // B (rows 16 nb + lane % 8 + 8 (lane / 16), half lane / 8 % 2), V transposed (rows 16 kk + lane % 8 + 8 (lane / 8
    // % 2), half lane / 16); the 16-row steps are immediates.
    unsigned q_off[4], k_off[4], v_off[4];
    swz_lane_offsets<D>(wr + (lane & 15), lane >> 4, q_off);
    swz_lane_offsets<D>((lane & 7) + (lane >> 4) * 8, (lane >> 3) & 1, k_off);
    swz_lane_offsets<D>((lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4, v_off);
    const unsigned sQa = static_cast<unsigned>(__cvta_generic_to_shared(sQ));
    // This lane's query rows (positions in the sequence): row_of(mi, 0) = row a, row_of(mi, 1) = row b = a + 8.
    auto row_of = [&](int mi, int r) { return m0 + wr + 16 * mi + g + 8 * r; };

    float acc[MW][D / 8][4];  // O: the warp's rows x D, C-fragment layout per 16 rows x 8 columns
#pragma unroll
    for (int mi = 0; mi < MW; ++mi)
#pragma unroll
      for (int i = 0; i < D / 8; ++i) acc[mi][i][0] = acc[mi][i][1] = acc[mi][i][2] = acc[mi][i][3] = 0.0f;
    float m_run[MW][2], l_run[MW][2];  // running max (log2 domain) of rows a, b; this lane's part of the running sum
#pragma unroll
    for (int mi = 0; mi < MW; ++mi) m_run[mi][0] = m_run[mi][1] = -INFINITY, l_run[mi][0] = l_run[mi][1] = 0.0f;

    auto load_kv = [&](int it, int buf) {  // the it-th tile walked: tile0 + it
      const int tile = tile0 + it, valid = min(BN, s_k - tile * BN);
      load_tile<BN, D, kThreads>(sK + buf * BN * D, kg + static_cast<int64_t>(tile) * BN * p.t.ks.token, p.t.ks.token,
                                 valid, p.chunks);
      load_tile<BN, D, kThreads>(sV + buf * BN * D, vg + static_cast<int64_t>(tile) * BN * p.t.vs.token, p.t.vs.token,
                                 valid, p.chunks);
    };

    if (n_tiles > 0) {
      load_tile<BM, D, kThreads>(sQ, qg, p.t.qs.token, rows, p.chunks);
      if (p.stages == 2) load_kv(0, 0);
      cp_async_commit();
    }
    for (int it = 0; it < n_tiles; ++it) {
      int buf = 0;
      if (p.stages == 2) {
        buf = it & 1;
        if (it + 1 < n_tiles) load_kv(it + 1, buf ^ 1);  // into the buffer tile it - 1 used (freed by its barrier)
        cp_async_commit();                               // possibly empty: group counts stay uniform
        cp_async_wait<1>();                              // this tile's group (and Q's) has landed for this thread
      } else {
        load_kv(it, 0);
        cp_async_commit();
        cp_async_wait<0>();
      }
      __syncthreads();  // ... and for every thread
      const unsigned sKb = static_cast<unsigned>(__cvta_generic_to_shared(sK + buf * BN * D));
      const unsigned sVb = static_cast<unsigned>(__cvta_generic_to_shared(sV + buf * BN * D));

      // S = Q K^T for the warp's rows x BN keys: each K fragment serves the warp's MW row tiles.
      float s[MW][BN / 8][4];
#pragma unroll
      for (int mi = 0; mi < MW; ++mi)
#pragma unroll
        for (int i = 0; i < BN / 8; ++i) s[mi][i][0] = s[mi][i][1] = s[mi][i][2] = s[mi][i][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        unsigned a[MW][4];
#pragma unroll
        for (int mi = 0; mi < MW; ++mi) ldmatrix_x4<false>(a[mi], sQa + swz_kstep<D>(q_off, kk) + 2 * 16 * mi * D);
#pragma unroll
        for (int nb = 0; nb < BN / 16; ++nb) {
          unsigned bk[4];  // keys nb*16 + 0..7 and + 8..15, dims kk*16 + 0..7 and + 8..15
          ldmatrix_x4<false>(bk, sKb + swz_kstep<D>(k_off, kk) + 2 * 16 * nb * D);
#pragma unroll
          for (int mi = 0; mi < MW; ++mi) {
            mma_16x8x16<T>(s[mi][2 * nb], a[mi], bk[0], bk[1]);
            mma_16x8x16<T>(s[mi][2 * nb + 1], a[mi], bk[2], bk[3]);
          }
        }
      }

      // Into the log2 domain and masked (only tiles that cross the sequence end, the causal diagonal or the window
      // start).
      const int n0 = (tile0 + it) * BN;
      const bool mask = tile_needs_mask<kMasks, BM, BN>(p, n0, m0, offset, s_k);
#pragma unroll
      for (int mi = 0; mi < MW; ++mi) {
        float tile_max[2] = {m_run[mi][0], m_run[mi][1]};
        score_tile<kMasks, kAlibi>(p, s[mi], mask, n0, row_of(mi, 0), offset, s_k, tile_max, slope);
        online_softmax_step<true>(s[mi], tile_max, m_run[mi], l_run[mi], acc[mi]);
      }

      // O += P V: P's C fragments of keys 16kk..16kk+15 are exactly the A fragment of that k-step; each V fragment
      // serves the warp's MW row tiles.
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        unsigned a[MW][4];
#pragma unroll
        for (int mi = 0; mi < MW; ++mi) p_fragment<T>(s[mi], kk, a[mi]);
#pragma unroll
        for (int db = 0; db < D / 16; ++db) {
          unsigned bv[4];  // keys kk*16 + 0..7 / 8..15 (rows), dims db*16 + 0..7 / 8..15, transposed
          ldmatrix_x4<true>(bv, sVb + swz_kstep<D>(v_off, db) + 2 * 16 * kk * D);
#pragma unroll
          for (int mi = 0; mi < MW; ++mi) {
            mma_16x8x16<T>(acc[mi][2 * db], a[mi], bv[0], bv[1]);
            mma_16x8x16<T>(acc[mi][2 * db + 1], a[mi], bv[2], bv[3]);
          }
        }
      }
      __syncthreads();  // every warp is done with this buffer before a later iteration overwrites it
    }

    // Epilogue: l over the quad, O / l (0 for a row that saw no key), lse = ln(sum) = ln2 * m + ln(l) (-inf if none).
    // The warp's output rows are staged in its own rows of sQ (no other warp reads them), then stored 16 bytes a lane.
    __syncwarp();
#pragma unroll
    for (int mi = 0; mi < MW; ++mi) {
      float inv[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        l_run[mi][r] += __shfl_xor_sync(0xffffffffu, l_run[mi][r], 1);
        l_run[mi][r] += __shfl_xor_sync(0xffffffffu, l_run[mi][r], 2);
        inv[r] = l_run[mi][r] > 0.0f ? 1.0f / l_run[mi][r] : 0.0f;
        const int row = row_of(mi, r);
        if (p.t.lse && t == 0 && row < s_q)
          p.t.lse[b * p.lse_sb + h * p.lse_sh + q_start + row] =
              l_run[mi][r] > 0.0f ? m_run[mi][r] * kLn2 + logf(l_run[mi][r]) : -INFINITY;
      }
      const int r0 = wr + 16 * mi + g;
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        *reinterpret_cast<unsigned*>(sQ + swz<D>(r0, i * 8 + 2 * t)) =
            pack_rounded<T>(acc[mi][i][0] * inv[0], acc[mi][i][1] * inv[0]);
        *reinterpret_cast<unsigned*>(sQ + swz<D>(r0 + 8, i * 8 + 2 * t)) =
            pack_rounded<T>(acc[mi][i][2] * inv[1], acc[mi][i][3] * inv[1]);
      }
    }
    __syncwarp();
    T* og = p.t.out + b * p.t.os.batch + static_cast<int64_t>(q_start + m0) * p.t.os.token + h * p.t.os.head;
    constexpr int kChunks = D / 8;
#pragma unroll
    for (int c = lane; c < kRowsPerWarp * kChunks; c += 32) {
      const int r = wr + c / kChunks, ch = c % kChunks;
      if (r < rows && ch < p.chunks)
        *reinterpret_cast<uint4*>(og + r * p.t.os.token + ch * 8) =
            *reinterpret_cast<const uint4*>(sQ + swz<D>(r, ch * 8));
    }
  }
}

// The (BM, BN, warps) tiles with kernels; the planner's tiles must be among them (a CPU test checks every profile).
// f receives BM, BN and MW (16-row MMA tiles a warp: BM / (16 warps)).
template <typename F>
Status dispatch_attention_tile(int block_m, int block_n, int warps, F&& f) {
  using std::integral_constant;
  const int mw = warps > 0 && block_m % (16 * warps) == 0 ? block_m / (16 * warps) : 0;
  if (block_m == 128 && block_n == 64 && mw == 2)
    return f(integral_constant<int, 128>{}, integral_constant<int, 64>{}, integral_constant<int, 2>{});
  if (block_m == 128 && block_n == 64 && mw == 1)
    return f(integral_constant<int, 128>{}, integral_constant<int, 64>{}, integral_constant<int, 1>{});
  if (block_m == 128 && block_n == 32 && mw == 2)
    return f(integral_constant<int, 128>{}, integral_constant<int, 32>{}, integral_constant<int, 2>{});
  if (block_m == 128 && block_n == 32 && mw == 1)
    return f(integral_constant<int, 128>{}, integral_constant<int, 32>{}, integral_constant<int, 1>{});
  if (block_m == 64 && block_n == 32 && mw == 1)
    return f(integral_constant<int, 64>{}, integral_constant<int, 32>{}, integral_constant<int, 1>{});
  return Status(StatusCode::internal, "attention: no kernel for tile " + std::to_string(block_m) + "x" +
                                          std::to_string(block_n) + " with " + std::to_string(warps) + " warps");
}

// f receives the kernel's head_dim (attention_kernel_head_dim: 64, 128 or 256) for a head_dim up to kAttnMaxHeadDim.
template <typename F>
Status dispatch_head_dim(int64_t d, F&& f) {
  switch (d > 0 && d <= kAttnMaxHeadDim ? attention_kernel_head_dim(d) : 0) {
    case 64:
      return f(std::integral_constant<int, 64>{});
    case 128:
      return f(std::integral_constant<int, 128>{});
    case 256:
      return f(std::integral_constant<int, 256>{});
    default:
      break;
  }
  return unsupported("attention: head_dim " + std::to_string(d) + " has no kernel (expected at most " +
                     std::to_string(kAttnMaxHeadDim) + ")");
}

template <typename T>
Status flash_params(const detail::AttentionArgs& a, int stages, FlashParams<T>* p) {
  detail::DeviceErrorRecord* err = nullptr;
  if (a.cu_q) KK_RETURN_IF_ERROR(device_error_record(a.device.index, &err));
  *p = {attn_tensors<T>(a),
        a.lse_batch,
        a.lse_head,
        a.cu_q,
        a.cu_k,
        static_cast<int>(a.s_q),
        static_cast<int>(a.s_k),
        static_cast<int>(a.batch),
        static_cast<int>(a.rows),
        static_cast<int>(a.total_k),
        err,
        static_cast<int>(a.heads / a.kv_heads),
        score_transform(a.scale, a.softcap),
        a.causal,
        kernel_window(a.window_left, a.s_k),
        stages,
        static_cast<int>(a.head_dim / 8),
        {a.alibi, a.alibi_batch},
        0.0f};
  return Status::Ok();
}

template <typename T>
Status launch_flash_prefill(const detail::AttentionArgs& a, const TilePlan& tile, cudaStream_t stream) {
  FlashParams<T> p;
  KK_RETURN_IF_ERROR(flash_params<T>(a, tile.stages, &p));
  return dispatch_head_dim(a.head_dim, [&](auto d) {
    return dispatch_attention_tile(tile.block_m, tile.block_n, tile.warps, [&](auto bm, auto bn, auto mw) -> Status {
      constexpr int D = decltype(d)::value, BM = decltype(bm)::value, BN = decltype(bn)::value;
      constexpr int MW = decltype(mw)::value;
      // Two row tiles a warp only where O and S fit in registers (ptxas: head_dim 64 and 128; at 128 with 64-key
      // tiles on sm_90 profiles, see kAttnWideKeys); the planner asks for no other (a CPU test checks).
      if constexpr (MW > 1 && D > 128) {
        return Status(StatusCode::internal, "attention: no kernel with 2 row tiles a warp for head_dim " +
                                                std::to_string(D) + " and " + std::to_string(BN) + "-key tiles");
      } else {
        // A window, a soft-cap or ALiBi: the kMasks variants (with ALiBi: kAlibi too).
        auto kernel = p.alibi.slopes ? flash_prefill_kernel<T, D, BM, BN, MW, true, true>
                      : p.masked()   ? flash_prefill_kernel<T, D, BM, BN, MW, true, false>
                                     : flash_prefill_kernel<T, D, BM, BN, MW, false, false>;
        const size_t smem = static_cast<size_t>(tile.smem_bytes);
        if (tile.smem_optin)
          KK_CUDA_RETURN(
              cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
        const dim3 grid(static_cast<unsigned>((a.s_q + BM - 1) / BM), static_cast<unsigned>(a.heads),
                        static_cast<unsigned>(a.batch));
        kernel<<<grid, BM * 2 / MW, smem, stream>>>(p);
        KK_CUDA_RETURN(cudaGetLastError());
        return Status::Ok();
      }
    });
  });
}

}  // namespace kernelkit::cuda

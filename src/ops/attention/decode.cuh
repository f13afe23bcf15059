// Decode attention: a few query tokens per sequence against a long KV cache, split across blocks along the keys.
//   Block (split, (b, kv_head), row group) of kDecodeThreads threads: R query rows (R = 1, 4 or 8 from the planner:
//   the query heads of the KV head's GQA group x the query tokens, in groups of R) over the keys [split * chunk,
//   (split + 1) * chunk) of that sequence, so each KV head's cache is read once for all of its query heads.
//   Each warp walks its own K/V tiles of TK = kDecodeWarpTileElems / D keys (2 KB of K and 2 KB of V), staged by
//   cp.async into a private ring of `stages` buffers (stages - 1 tiles in flight while one is computed): only
//   __syncwarp inside the loop, never a block-wide barrier. In a warp,
//   D / 8 lanes share a key, each holding 8 dims of it, of q (fp32, pre-scaled into the log2 domain) and of the
//   output; 32 / (D / 8) keys are in flight per step. A score is 8 FMAs per lane and a butterfly over the key's lanes;
//   the running max is warp-uniform, sums and O stay per lane (their key slot's keys) until the end.
//   The four warps' (max, sum, O) merge through shared memory; with one split the block writes out and lse, with more
//   fp32 partials (O / l, lse) go to a workspace and decode_merge_kernel combines them:
//   lse = log sum_s exp(lse_s), o = sum_s exp(lse_s - lse) o_s.
//   decode_tc_kernel, the planner's choice at head_dim 64 and 128, does a warp's tile on tensor cores instead (see
//   there); the CUDA-core decode_kernel described above is then the head_dim-256 path and decode_tc=0's.
//   e4m3 caches (kFp8, sm_89+: the variants trap below it): both kernels copy the codes as they are and convert them
//   in registers, exactly (every e4m3 value is an f16 and a bf16); the scales are folded (see DecodeParams::k_scale).
// Bytes: E (2 b s_k h_kv d [k, v] + 2 b s_q h d [q, o]) + partials when split (e4m3 caches: 1 byte a K/V element);
// FLOPs: 4 d per (query row, key).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <type_traits>

#include "kernelkit/planner.hpp"
#include "kernels/common/async_copy.cuh"
#include "kernels/common/check.cuh"
#include "kernels/common/device_check.cuh"
#include "kernels/common/e4m3.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/vec.cuh"
#include "ops/attention/attention.hpp"
#include "ops/attention/attention_common.cuh"
#include "ops/attention/attention_plan.hpp"
#include "ops/attention/mma_softmax.cuh"

namespace kernelkit::cuda {

template <typename T>
struct DecodeParams {
  AttnTensors<T> t;  // q, out [b, s_q, h, d]; k, v contiguous [b, capacity, h_kv, d] or paged [pages, page, h_kv, d]
  const int* block_table;  // paged: [b, max_pages], row stride bt_stride
  int64_t bt_stride;
  int page_shift;      // paged: log2(page size)
  const int* seqlens;  // [b] or null (every sequence holds `capacity` keys)
  int capacity, s_q, heads, kv_heads, group;
  int num_pages;                 // paged: pages in the cache, the bound of every block_table entry
  detail::DeviceErrorRecord* err;  // where a bad seqlens / block_table value is recorded (device_check.cuh)
  int chunk;  // keys per split (a multiple of the block's keys per step)
  int splits;
  ScoreTransform score;  // scale, soft-cap, into the log2 domain
  bool causal;
  int window;  // sliding window: query i (position len - s_q + i) sees keys >= its position - window; -1: none
  float* part_o;    // splits > 1: [splits, b * s_q * h, d], rows ordered as out's (b, token, head)
  float* part_lse;  // splits > 1: [splits, b * s_q * h]
  int stages;       // K/V buffers per warp, 2 to kDecodeMaxStages
  int chunks;       // head_dim / 8: the 16-byte chunks of a row that hold data (the kernel's D / 8 or fewer, see
                    // attention_kernel_head_dim: the others are zeros in q and the K/V tiles and never stored)
  AlibiSlopes alibi;
  // e4m3 caches (the kFp8 kernels; k and v above point at 1-byte codes): KV head h's f32 scales (stored code * scale
  // = value) at k_scale[h * ks_stride] and v_scale[h * vs_stride]. Both are folded rather than multiplied into each
  // code: q k = (q . code) k_scale, so K's scale joins the softmax scale (score.scale_in) once a block, and
  // sum_j p_j v_j = v_scale sum_j p_j code_j, so V's scales the output (and a split's partial O) once a row. That
  // costs no instruction a code, and the tensor cores then multiply the codes themselves, exact in f16 / bf16, where
  // code * scale would be rounded to T: the kernels' rounding points stay those of an f16 / bf16 cache.
  const float *k_scale, *v_scale;
  int64_t ks_stride, vs_stride;
  bool rotate;  // DecodePlan::rotate: each warp's tiles in a rotated order (WarpTiles)
};

// The element type of a cache: T, or the 1-byte e4m3 codes.
template <typename T, bool kFp8>
using CacheElem = std::conditional_t<kFp8, uint8_t, T>;

// The block's warps' states at the end of a split (store_block_rows).
template <int D, int R>
struct DecodeMerge {
  static constexpr int kWarps = kDecodeThreads / 32;
  float o[kWarps][R][D];
  float m[kWarps][R], l[kWarps][R];
};

// Dynamic shared memory: Stage[kWarps][stages] during the K/V loop, then one Merge over the same bytes. e4m3 tiles
// hold as many keys as 16-bit ones (the scores of a tile are registers a key and row), at half the bytes.
template <typename T, int D, int R, bool kFp8 = false>
struct DecodeSmem {
  static constexpr int kWarps = kDecodeThreads / 32, TK = kDecodeWarpTileElems / D;
  using KV = CacheElem<T, kFp8>;
  struct Stage {
    KV k[TK][D];
    KV v[TK][D];
  };
  using Merge = DecodeMerge<D, R>;
};

// Sequence b's length and the keys [kbeg, kend) of split `split` (the splits cover the keys from the first query's
// window start, 0 without a window: the planner sized them for the window), with the index values checked (a compare
// per sequence and per page, not per key): a length outside [0, capacity] is recorded and clamped; with a paged cache, a
// block_table entry under [kbeg, kend) outside [0, num_pages) is recorded and the block takes no keys, so no page
// outside the cache is ever read (the split then adds nothing; with one split the rows come out 0). Block-wide: every
// thread calls it, before any divergence (the page check ends in a barrier).
struct KeyRange {
  int len, kbeg, kend;
};
template <bool kPaged, typename T>
__device__ __forceinline__ KeyRange checked_key_range(const DecodeParams<T>& p, int b, int split) {
  int len = p.capacity;
  if (p.seqlens) {
    const int raw = p.seqlens[b];
    len = min(max(raw, 0), p.capacity);
    if (len != raw && threadIdx.x == 0)
      record_device_error(p.err, OpId::decode_attention, detail::DeviceCheck::seqlens_k, b, -1, raw, p.capacity);
  }
  const int first = static_cast<int>(detail::first_visible_key(len, p.s_q, p.window));
  const int kbeg = first + split * p.chunk;
  int kend = min(len, kbeg + p.chunk);
  if constexpr (kPaged) {
    bool bad = false;
    for (int pg = (kbeg >> p.page_shift) + static_cast<int>(threadIdx.x); (pg << p.page_shift) < kend;
         pg += blockDim.x) {
      const int page = p.block_table[b * p.bt_stride + pg];
      if (page < 0 || page >= p.num_pages) {
        bad = true;
        record_device_error(p.err, OpId::decode_attention, detail::DeviceCheck::block_table, b, pg, page, p.num_pages);
      }
    }
    if (__syncthreads_or(bad)) kend = kbeg;
  }
  return {len, kbeg, kend};
}

// The query at position `pos` (token i of a sequence of len keys: len - s_q + i, computed once a row, outside the
// key loop) does not see `key`: causal, or before its window.
template <typename T>
__device__ __forceinline__ bool decode_key_hidden(const DecodeParams<T>& p, int pos, int key) {
  return (p.causal && key > pos) || (p.window >= 0 && key < pos - p.window);
}

// The tiles of TK keys one warp of a split block walks in [kbeg, kend): tiles warp, warp + warps, warp + 2 warps, ...,
// `count` of them, walked from the one at `first` on, wrapping around. first is 0, or with DecodePlan::rotate a
// multiplicative hash of the sequence b (neighbouring sequences start far apart; the online softmax is order-free).
template <int TK>
struct WarpTiles {
  static constexpr int kWarps = kDecodeThreads / 32;
  int kbeg, warp, count, first;
  __device__ __forceinline__ WarpTiles(int kbeg_, int kend, int warp_, bool rotate, int b) : kbeg(kbeg_), warp(warp_) {
    const int n = kend > kbeg ? (kend - kbeg + TK - 1) / TK : 0;
    count = n > warp ? (n - warp + kWarps - 1) / kWarps : 0;
    first = rotate && count > 0
                ? static_cast<int>((static_cast<unsigned>(b) * 2654435761u) % static_cast<unsigned>(count))
                : 0;
  }
  // The first key of the warp's i-th tile in its walk (i < count).
  __device__ __forceinline__ int key0(int i) const {
    const int j = i + first < count ? i + first : i + first - count;
    return kbeg + (warp + kWarps * j) * TK;
  }
};

// A lane's share of loading a warp tile (TK keys of K and V, head kvh) into shared memory, 16-byte cp.async copies of
// kChunk elements: copy cp is chunk `ch` of row j0 + kStep cp (the order idx = lane + 32 cp of the tile's chunks, row
// by row). What stays across tiles, the chunk and first row, the head's, chunk's (and a contiguous cache's sequence's)
// offset and the step between a lane's rows, is worked out once; a tile adds its first key. Rows past kend, and
// chunks past head_dim, are zero-filled by the same copy (no branch): P = 0 times a stale NaN would still be NaN.
template <bool kPaged, typename T, typename KV, int D, int TK>
struct TileCopies {
  static constexpr int kChunk = 16 / sizeof(KV), kPerRow = D / kChunk, kStep = 32 / kPerRow, kCopies = TK / kStep;
  static_assert(32 % kPerRow == 0 && kCopies * kStep == TK, "decode tile copies");
  const KV *k, *v;         // chunk ch of head kvh (contiguous: of sequence b), key 0
  int64_t k_step, v_step;  // kStep rows (tokens) of K and of V
  int j0, ch;
  bool in_dims;

  __device__ __forceinline__ TileCopies(const DecodeParams<T>& p, int b, int kvh, int lane, int kv_chunks)
      : k_step(kStep * p.t.ks.token),
        v_step(kStep * p.t.vs.token),
        j0(lane / kPerRow),
        ch(lane % kPerRow),
        in_dims(lane % kPerRow < kv_chunks) {
    k = reinterpret_cast<const KV*>(p.t.k) + kvh * p.t.ks.head + ch * kChunk;
    v = reinterpret_cast<const KV*>(p.t.v) + kvh * p.t.vs.head + ch * kChunk;
    if constexpr (!kPaged) k += b * p.t.ks.batch, v += b * p.t.vs.batch;
  }
  // dst(j) -> the shared-memory addresses of row j's chunk ch in the stage's K and V tiles. key0 < kend.
  template <typename Dst>
  __device__ __forceinline__ void load(const DecodeParams<T>& p, int b, int key0, int kend, Dst&& dst) const {
    // Rows stepping through memory from row j0's chunk (kr, vr): a contiguous cache, or a tile inside one page.
    auto strided = [&](const KV* kr, const KV* vr) {
#pragma unroll
      for (int cp = 0; cp < kCopies; ++cp) {
        const bool valid = in_dims && key0 + j0 + kStep * cp < kend;
        const auto [dk, dv] = dst(j0 + kStep * cp);
        copy_async_or_zero16(dk, valid ? static_cast<const void*>(kr) : p.t.k, valid);  // (the cache's first
        copy_async_or_zero16(dv, valid ? static_cast<const void*>(vr) : p.t.v, valid);  //  elements: never read)
        kr += k_step, vr += v_step;
      }
    };
    if constexpr (!kPaged) {
      strided(k + static_cast<int64_t>(key0 + j0) * p.t.ks.token, v + static_cast<int64_t>(key0 + j0) * p.t.vs.token);
    } else {
      const int first = key0 >> p.page_shift, in_page0 = (key0 & ((1 << p.page_shift) - 1)) + j0;
      if (((key0 + TK - 1) >> p.page_shift) == first) {  // warp-uniform: the tile's keys share a page (key0's: checked)
        const int64_t page = p.block_table[b * p.bt_stride + first];
        strided(k + page * p.t.ks.batch + static_cast<int64_t>(in_page0) * p.t.ks.token,
                v + page * p.t.vs.batch + static_cast<int64_t>(in_page0) * p.t.vs.token);
        return;
      }
#pragma unroll
      for (int cp = 0; cp < kCopies; ++cp) {
        // A key past kend reads the entry of kend - 1 (checked, see checked_key_range) and copies nothing.
        const int key = key0 + j0 + kStep * cp, kc = min(key, kend - 1);
        const bool valid = in_dims && key < kend;
        const auto [dk, dv] = dst(j0 + kStep * cp);
        const int64_t page = p.block_table[b * p.bt_stride + (kc >> p.page_shift)];
        const int in_page = kc & ((1 << p.page_shift) - 1);
        const void* ks = k + page * p.t.ks.batch + in_page * p.t.ks.token;
        const void* vs = v + page * p.t.vs.batch + in_page * p.t.vs.token;
        copy_async_or_zero16(dk, valid ? ks : p.t.k, valid);
        copy_async_or_zero16(dv, valid ? vs : p.t.v, valid);
      }
    }
  }
};

// The ring's buffer after `buf` (of `stages` buffers): a compare, not a division by the runtime stage count.
__device__ __forceinline__ int next_slot(int buf, int stages) { return buf + 1 == stages ? 0 : buf + 1; }

// A warp's walk over its `count` tiles through its own ring of `stages` buffers: tiles 0 .. stages - 2 in flight (one
// commit group each, possibly empty: group counts stay uniform); then each step issues tile i + stages - 1 into the
// buffer tile i - 1 used and waits for tile i, with stages - 1 groups still in flight. body(i, stage) runs once tile i
// is visible to the whole warp; the __syncwarp after it frees the buffer for the next refill. load(i, stage) issues
// tile i's copies. Returns with no copy pending.
template <typename Stage, typename Load, typename Body>
__device__ __forceinline__ void walk_warp_ring(Stage* ring, int stages, int count, Load&& load, Body&& body) {
  for (int i = 0; i < stages - 1; ++i) {
    if (i < count) load(i, ring[i]);
    cp_async_commit();
  }
  int buf = 0, ahead_buf = stages - 1;  // tile i's buffer, and tile i + stages - 1's
  for (int i = 0; i < count; ++i, buf = next_slot(buf, stages), ahead_buf = next_slot(ahead_buf, stages)) {
    if (i + stages - 1 < count) load(i + stages - 1, ring[ahead_buf]);
    cp_async_commit();
    cp_async_wait_dynamic(stages - 1);
    __syncwarp();  // every lane's copies (and zero fills) of tile i visible to the warp
    body(i, ring[buf]);
    __syncwarp();  // every lane done reading this buffer before a later step refills it
  }
  cp_async_wait<0>();
}

// The end of a split block: its warps' states in `merge` (O unnormalized and the running max in the log2 domain, the
// sum) merged as M = max_w m_w, L = sum_w l_w 2^(m_w - M), O = sum_w O_w 2^(m_w - M) / L, and stored: the output and
// lse with one split, else the split's fp32 partials for decode_merge_kernel. Row r of the block is query token
// (r0 + r) / group of head kvh * group + (r0 + r) % group. kFp8: O times v_scale (O / L v_scale: V's folded scale).
template <typename T, int D, int R, bool kFp8 = false>
__device__ __forceinline__ void store_block_rows(const DecodeParams<T>& p, const DecodeMerge<D, R>& merge, int b,
                                                 int kvh, int r0, int split, float v_scale = 1.0f) {
  constexpr int kWarps = DecodeMerge<D, R>::kWarps;
  const int rows_total = p.group * p.s_q, tid = threadIdx.x;
  auto row_token = [&](int r) { return (r0 + r) / p.group; };
  auto row_head = [&](int r) { return kvh * p.group + (r0 + r) % p.group; };
  for (int pair = tid; pair < R * (D / 8); pair += kDecodeThreads) {
    const int r = pair / (D / 8), ch = pair % (D / 8);
    if (r0 + r >= rows_total) continue;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, merge.m[w][r]);
    float l = 0.0f, y[8] = {};
    if (mx != -INFINITY)
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float f = exp2f(merge.m[w][r] - mx);  // 0 for a warp that saw nothing (m_w = -inf)
        l = fmaf(merge.l[w][r], f, l);
#pragma unroll
        for (int e = 0; e < 8; ++e) y[e] = fmaf(merge.o[w][r][ch * 8 + e], f, y[e]);
      }
    const float inv = l > 0.0f ? (kFp8 ? v_scale / l : 1.0f / l) : 0.0f;
    const float lse = l > 0.0f ? mx * kLn2 + logf(l) : -INFINITY;
#pragma unroll
    for (int e = 0; e < 8; ++e) y[e] *= inv;
    const int token = row_token(r), head = row_head(r);
    if (p.splits == 1) {
      if (ch < p.chunks)
        store_rounded<T, 8>(p.t.out + b * p.t.os.batch + token * p.t.os.token + head * p.t.os.head + ch * 8, y);
      if (p.t.lse && ch == 0) p.t.lse[(static_cast<int64_t>(b) * p.heads + head) * p.s_q + token] = lse;
    } else {
      const int64_t row = (static_cast<int64_t>(b) * p.s_q + token) * p.heads + head;
      const int64_t rows_all = static_cast<int64_t>(gridDim.y / p.kv_heads) * p.s_q * p.heads;
      float* dst = p.part_o + (split * rows_all + row) * D + ch * 8;
#pragma unroll
      for (int e = 0; e < 8; e += 4)
        *reinterpret_cast<float4*>(dst + e) = make_float4(y[e], y[e + 1], y[e + 2], y[e + 3]);
      if (ch == 0) p.part_lse[split * rows_all + row] = lse;
    }
  }
}

template <typename T, int D, int R, bool kPaged, bool kFp8 = false>
__global__ void __launch_bounds__(kDecodeThreads) decode_kernel(const DecodeParams<T> p) {
  if constexpr (!kDeviceHasType<T> || (kFp8 && !KK_DEVICE_HAS_FP8)) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75, e4m3 caches below sm_89
  } else {
    using Smem = DecodeSmem<T, D, R, kFp8>;
    using KV = typename Smem::KV;
    constexpr int TK = Smem::TK;
    constexpr int kLanesPerKey = D / 8, kKeysPerStep = 32 / kLanesPerKey, kSteps = TK / kKeysPerStep;
    constexpr int kChunk = 16 / sizeof(KV);        // elements a 16-byte copy (8, or 16 codes)
    static_assert(kSteps * kKeysPerStep == TK, "decode warp tile");
    extern __shared__ __align__(16) unsigned char smem_raw[];

    const int split = blockIdx.x, b = blockIdx.y / p.kv_heads, kvh = blockIdx.y % p.kv_heads;
    const int rows_total = p.group * p.s_q, r0 = blockIdx.z * R;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    // This warp's ring of stages (the K/V loop), then the block's merge area over the same bytes.
    typename Smem::Stage* const ring = reinterpret_cast<typename Smem::Stage*>(smem_raw) + warp * p.stages;
    typename Smem::Merge& merge = *reinterpret_cast<typename Smem::Merge*>(smem_raw);
    const int slot = lane / kLanesPerKey, c = lane % kLanesPerKey;  // this lane's key slot and 8-dim chunk
    const KeyRange keys = checked_key_range<kPaged>(p, b, split);
    const int len = keys.len, kbeg = keys.kbeg, kend = keys.kend;
    // Row r of the block: query token i = r / group of head kvh * group + r % group.
    auto row_token = [&](int r) { return (r0 + r) / p.group; };
    auto row_head = [&](int r) { return kvh * p.group + (r0 + r) % p.group; };

    // e4m3: K's scale joins the softmax scale (DecodeParams::k_scale).
    float scale_in = p.score.scale_in;
    if constexpr (kFp8) scale_in *= p.k_scale[kvh * p.ks_stride];
    float q[R][8];  // this lane's 8 dims of each row, times score.scale_in (then only the soft-cap is left to apply)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      Vec<T, 8> qv{};
      if (r0 + r < rows_total && c < p.chunks)
        qv = Vec<T, 8>::load(p.t.q + b * p.t.qs.batch + row_token(r) * p.t.qs.token + row_head(r) * p.t.qs.head +
                             c * 8);
#pragma unroll
      for (int e = 0; e < 8; ++e) q[r][e] = r0 + r < rows_total ? to_float(qv.v[e]) * scale_in : 0.0f;
    }
    const int kv_chunks = kFp8 ? p.chunks / 2 : p.chunks;  // head_dim / kChunk (e4m3: head_dim % 16 == 0)
    // Warp tile i of this warp: keys kbeg + (warp + 4 i) TK ...
    const WarpTiles<TK> tiles(kbeg, kend, warp, p.rotate, b);
    const TileCopies<kPaged, T, KV, D, TK> copies(p, b, kvh, lane, kv_chunks);
    auto load_tile = [&](int i, typename Smem::Stage& st) {
      copies.load(p, b, tiles.key0(i), kend, [&](int j) {
        return std::pair{&st.k[j][copies.ch * kChunk], &st.v[j][copies.ch * kChunk]};
      });
    };

    float acc[R][8], m_run[R], l_part[R];  // m_run: warp-uniform; l_part, acc: this lane's key slot only
    int pos[R];                            // each row's position in the sequence (decode_key_hidden)
    float slope[R];                        // each row's ALiBi slope, log2 domain (0: none)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      pos[r] = len - p.s_q + row_token(r);
      slope[r] = p.alibi.log2_slope(b, row_head(r));
      m_run[r] = -INFINITY, l_part[r] = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[r][e] = 0.0f;
    }

    walk_warp_ring(ring, p.stages, tiles.count, load_tile, [&](int i, typename Smem::Stage& st) {
      // Scores, soft-capped, ALiBi-biased and masked: keys past this split or sequence, padding rows, causal and the
      // window (the s_q queries are the sequence's last positions: query i sees keys <= len - s_q + i, and >= that -
      // window).
      const int key0 = tiles.key0(i);
      float sc[kSteps][R];
#pragma unroll
      for (int stp = 0; stp < kSteps; ++stp) {
        const int j = stp * kKeysPerStep + slot, key = key0 + j;
        float kf[8];
        if constexpr (kFp8) {
          e4m3_to_floats<8>(*reinterpret_cast<const uint32_t(*)[2]>(&st.k[j][c * 8]), kf);
        } else {
          const Vec<T, 8> kv = Vec<T, 8>::load(&st.k[j][c * 8]);
#pragma unroll
          for (int e = 0; e < 8; ++e) kf[e] = to_float(kv.v[e]);
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float dot = 0.0f;
#pragma unroll
          for (int e = 0; e < 8; ++e) dot = fmaf(q[r][e], kf[e], dot);
#pragma unroll
          for (int o = kLanesPerKey / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
          if (p.score.cap_log2 != 0.0f) dot = p.score.cap_log2 * tanh_fast(dot);
          if (p.alibi.slopes) dot = alibi_biased(dot, slope[r], pos[r], key);
          sc[stp][r] = key >= kend || r0 + r >= rows_total || decode_key_hidden(p, pos[r], key)
                           ? -INFINITY
                           : dot;
        }
      }
      // Online softmax over the tile: the new running max (across the key slots), then P and O = O corr + P V.
      float corr[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float mx = m_run[r];
#pragma unroll
        for (int stp = 0; stp < kSteps; ++stp) mx = fmaxf(mx, sc[stp][r]);
#pragma unroll
        for (int o = kLanesPerKey; o < 32; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        const float m_use = mx == -INFINITY ? 0.0f : mx;  // nothing visible yet: never -inf - -inf
        corr[r] = exp2f(m_run[r] - m_use);
        m_run[r] = mx;
        l_part[r] *= corr[r];
#pragma unroll
        for (int stp = 0; stp < kSteps; ++stp) {
          sc[stp][r] = exp2f(sc[stp][r] - m_use);
          l_part[r] += sc[stp][r];
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r][e] *= corr[r];
      }
#pragma unroll
      for (int stp = 0; stp < kSteps; ++stp) {
        if constexpr (kFp8) {
          float vf[8];
          e4m3_to_floats<8>(*reinterpret_cast<const uint32_t(*)[2]>(&st.v[stp * kKeysPerStep + slot][c * 8]), vf);
#pragma unroll
          for (int e = 0; e < 8; ++e)
#pragma unroll
            for (int r = 0; r < R; ++r) acc[r][e] = fmaf(sc[stp][r], vf[e], acc[r][e]);
        } else {
          const Vec<T, 8> vv = Vec<T, 8>::load(&st.v[stp * kKeysPerStep + slot][c * 8]);
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            const float ve = to_float(vv.v[e]);
#pragma unroll
            for (int r = 0; r < R; ++r) acc[r][e] = fmaf(sc[stp][r], ve, acc[r][e]);
          }
        }
      }
    });
    allow_dependent_launch();  // the merge (if any) may be placed now; it waits for this grid to complete

    // Sum the key slots: afterwards the lanes of slot 0 hold the warp's sum and O for their 8 dims.
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int o = kLanesPerKey; o < 32; o <<= 1) {
        l_part[r] += __shfl_xor_sync(0xffffffffu, l_part[r], o);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r][e] += __shfl_xor_sync(0xffffffffu, acc[r][e], o);
      }
    __syncthreads();  // every warp is out of its stages: the shared memory becomes the merge area
    if (slot == 0)
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int e = 0; e < 8; e += 4)
          *reinterpret_cast<float4*>(&merge.o[warp][r][c * 8 + e]) =
              make_float4(acc[r][e], acc[r][e + 1], acc[r][e + 2], acc[r][e + 3]);
        if (lane == 0) merge.m[warp][r] = m_run[r], merge.l[warp][r] = l_part[r];
      }
    __syncthreads();

    if constexpr (kFp8)
      store_block_rows<T, D, R, true>(p, merge, b, kvh, r0, split, p.v_scale[kvh * p.vs_stride]);
    else
      store_block_rows<T, D, R>(p, merge, b, kvh, r0, split);
  }
}

// The tensor-core variant (plan.tensor_cores; the default at head_dim 64 and 128): the same grid, splits, stages and
// block merge, but each warp's tile is kDecodeTcTileKeys = 16 keys (ldmatrix-swizzled in its ring, as in the
// prefill) and the block's R rows are rows 0..R-1 of one 16-row MMA tile (the rest zeros, never stored): per tile,
// S = Q K^T is D / 16 x 2 m16n8k16 MMAs with Q's A fragments held in registers, P is rounded to T as the A fragment of
// O += P V (D / 8 MMAs, V via ldmatrix.trans). The softmax step is the prefill's in its non-lean form (see
// online_softmax_step: the lean one measured slower here), for row g of the quad's lanes only: rows 8-15 of every
// MMA are zeros (R <= 8), and are left so. S^T = K Q^T with the rows on N = 8 would halve the MMA work too (to be
// tried: at b32 it reads K/V at 4.07 TB/s, near the copy ceiling, but at b1 DRAM is at 33% in ncu).
// e4m3 caches (kFp8): tiles of 2 kDecodeTcTileKeys = 32 keys, the bytes of a 16-bit tile (one softmax step over 32
// keys, two P V k-steps). ldmatrix moves 16-bit elements, so each lane reads its fragments' codes itself, from 16-byte
// chunks swizzled by row (swz_codes: every read below is free of bank conflicts at head_dim 128, 2-way at 64), and
// converts them (e4m3x2_as). The reads stay 16-byte ones through two permutations that the MMAs cannot see:
//   S: the sum over dims runs in another order. Logical k = 2t + {0, 1, 8, 9} of k-step kk (the dims lane t holds in
//      A and in B) is physical dim t D / 4 + 4 kk + {0, 1, 2, 3}, in Q's A fragments and K's B fragments alike, so a
//      lane's B fragments of key g are the D / 4 contiguous codes of its row from t D / 4.
//   O: column n of n-block nb is physical dim n D / 8 + nb, so the lane of column g reads D / 8 contiguous codes of
//      each of its 4 keys (2t, 2t + 1, 2t + 8, 2t + 9: the k-step's B rows) and pairs their bytes with a permute;
//      its C fragments c[0..1] = columns 2t, 2t + 1 are dims 2t D / 8 + nb, (2t + 1) D / 8 + nb: contiguous in nb,
//      stored to the merge area as float4s.
template <typename KV, int D, int TK>
struct DecodeTcStage {
  KV k[TK * D];  // [TK][D], 16-byte chunks swizzled by row (swz<D>, swz_codes<D>)
  KV v[TK * D];
};

// Byte offset of 16-byte chunk `chunk` of row `row` in a [rows][D] tile of e4m3 codes: chunks XOR row % (D / 16).
template <int D>
__device__ __forceinline__ int swz_codes(int row, int chunk) {
  return row * D + ((chunk ^ (row & (D / 16 - 1))) << 4);
}

// Row r of a block's R query rows (token (r0 + r) / group of head kvh group + (r0 + r) % group): its q, or null for a
// row the block does not hold (past R or past the KV head's rows).
template <int R, typename T>
__device__ __forceinline__ const T* block_q_row(const DecodeParams<T>& p, int b, int kvh, int r0, int r) {
  if (r >= R || r0 + r >= p.group * p.s_q) return nullptr;
  return p.t.q + b * p.t.qs.batch + static_cast<int64_t>((r0 + r) / p.group) * p.t.qs.token +
         static_cast<int64_t>(kvh * p.group + (r0 + r) % p.group) * p.t.qs.head;
}

// The lane's pairs of one q row for the tensor-core decodes' k-steps: q[kk][0] holds dims 2t, 2t + 1 of k-step kk
// and q[kk][1] dims 2t + 8, 2t + 9 (decode_tc_kernel's a[0] / a[2] of the row, decode_kt_kernel's b0 / b1); e4m3
// caches: the permuted dims t D / 4 + 4 kk + {0, 1} and {2, 3} (see decode_tc_kernel). Zeros for a null row and for
// dims past head_dim.
template <typename T, int D, bool kFp8>
__device__ __forceinline__ void load_q_pairs(const DecodeParams<T>& p, const T* qrow, int t, unsigned (&q)[D / 16][2]) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      // (head_dim % 16 == 0 with e4m3: a pair is all in or all out)
      const int dim = kFp8 ? t * (D / 4) + 4 * kk + 2 * half : kk * 16 + half * 8 + 2 * t;
      q[kk][half] = qrow && dim / 8 < p.chunks ? *reinterpret_cast<const unsigned*>(qrow + dim) : 0u;
    }
}

// bf16 pairs of a q row held by a quad (its 4 lanes) as f16 pairs scaled by 2^e, e putting the row's largest
// |element| at 2^14 (DecodePlan::f16_mma: exact, f16 holds bf16's 8 bits from 2^-17 up, 31 binades below it);
// returns 2^-e, the scores' factor back.
template <int D>
__device__ __forceinline__ float q_pairs_to_f16(unsigned (&q)[D / 16][2]) {
  float amax = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&q[kk][half]));
      amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
    }
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  // (clamped: 2^e and 2^-e stay finite fp32 normals even for a row of bf16 subnormals)
  const int e = amax > 0.0f && isfinite(amax) ? min(14 - ilogbf(amax), 126) : 0;
  const float up = ldexpf(1.0f, e);
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&q[kk][half]));
      q[kk][half] = pack_rounded<__half>(f.x * up, f.y * up);
    }
  return ldexpf(1.0f, -e);
}

// e4m3 V for the P V (O^T) k-step ks of a tile (its keys 16 ks ..): this lane's keys 2t, 2t + 1, 2t + 8, 2t + 9 of the
// step, D / 8 contiguous codes each from dim g D / 8, paired key by key: for word w (dims g D / 8 + 4 w ..),
// pairs[w] = {lo, hi, lo8, hi8}, lo holding bytes 0 and 1 of keys 2t and 2t + 1 interleaved (key 2t's byte first), hi
// bytes 2 and 3, lo8 / hi8 the same of keys 2t + 8 and 2t + 9: each 16-bit half is one B (A) register's code pair.
template <int D>
__device__ __forceinline__ void v_code_pairs(const uint8_t* v, int ks, int g, int t, uint32_t (&pairs)[D / 32][4]) {
  static_assert(D == 64 || D == 128, "the e4m3 tensor-core decodes: head_dim 64 or 128");
  uint32_t rows[4][D / 32];
#pragma unroll
  for (int k4 = 0; k4 < 4; ++k4) {
    const int row = ks * 16 + 2 * t + (k4 & 1) + 8 * (k4 >> 1);
    if constexpr (D == 128) {
      const uint4 x = *reinterpret_cast<const uint4*>(v + swz_codes<D>(row, g));
      rows[k4][0] = x.x, rows[k4][1] = x.y, rows[k4][2] = x.z, rows[k4][3] = x.w;
    } else {
      const uint2 x = *reinterpret_cast<const uint2*>(v + swz_codes<D>(row, g / 2) + 8 * (g % 2));
      rows[k4][0] = x.x, rows[k4][1] = x.y;
    }
  }
#pragma unroll
  for (int w = 0; w < D / 32; ++w) {
    pairs[w][0] = __byte_perm(rows[0][w], rows[1][w], 0x5140);
    pairs[w][1] = __byte_perm(rows[0][w], rows[1][w], 0x7362);
    pairs[w][2] = __byte_perm(rows[2][w], rows[3][w], 0x5140);
    pairs[w][3] = __byte_perm(rows[2][w], rows[3][w], 0x7362);
  }
}

// M: the MMAs' operand type, T, or f16 for bf16 q over an e4m3 cache (DecodePlan::f16_mma): the codes then take one
// conversion a pair (bf16 takes three more, through fp32), q's rows are scaled by a power of two that puts each row's
// largest |element| at 2^14 (exact: f16 holds bf16's 8 bits from 2^-17 up, 31 binades below it; the scores are
// scaled back), and P is rounded to f16 (3 more bits than bf16).
// At least kDecodeTcMinBlocks blocks an SM (a register cap: see there).
template <typename T, int D, int R, bool kPaged, bool kFp8 = false, typename M = T>
__global__ void __launch_bounds__(kDecodeThreads, kDecodeTcMinBlocks) decode_tc_kernel(const DecodeParams<T> p) {
  constexpr bool kQScaled = !std::is_same_v<M, T>;
  if constexpr (!kDeviceHasType<T> || (kFp8 && !KK_DEVICE_HAS_FP8)) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75, e4m3 caches below sm_89
  } else {
    static_assert(R <= 8 && D % 16 == 0, "decode_tc: the block's rows are rows 0..R-1 of the 16-row tile");
    static_assert(!kQScaled || (kFp8 && std::is_same_v<M, __half>), "decode_tc: f16 MMAs for e4m3 caches only");
    using KV = CacheElem<T, kFp8>;
    constexpr int TK = kFp8 ? kDecodeFp8TcTileKeys : kDecodeTcTileKeys, NB = TK / 8;  // keys a tile; its n-blocks of S
    using Stage = DecodeTcStage<KV, D, TK>;
    extern __shared__ __align__(16) unsigned char smem_raw[];

    const int split = blockIdx.x, b = blockIdx.y / p.kv_heads, kvh = blockIdx.y % p.kv_heads;
    const int r0 = blockIdx.z * R;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    Stage* const ring = reinterpret_cast<Stage*>(smem_raw) + warp * p.stages;
    auto& merge = *reinterpret_cast<DecodeMerge<D, R>*>(smem_raw);
    const KeyRange keys = checked_key_range<kPaged>(p, b, split);
    const int len = keys.len, kbeg = keys.kbeg, kend = keys.kend;
    auto row_token = [&](int r) { return (r0 + r) / p.group; };
    auto row_head = [&](int r) { return kvh * p.group + (r0 + r) % p.group; };

    // Q as A fragments (a[0] = row g, dims 2t..; a[1] = row g + 8; a[2], a[3]: dims + 8): row g's pairs, and zeros
    // for row g + 8, never the block's (R <= 8).
    unsigned qg[D / 16][2];
    load_q_pairs<T, D, kFp8>(p, block_q_row<R>(p, b, kvh, r0, g), t, qg);
    const float q_unscale = kQScaled ? q_pairs_to_f16<D>(qg) : 1.0f;
    unsigned qa[D / 16][4];
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) qa[kk][0] = qg[kk][0], qa[kk][1] = 0u, qa[kk][2] = qg[kk][1], qa[kk][3] = 0u;

    const int kv_chunks = kFp8 ? p.chunks / 2 : p.chunks;  // head_dim / kChunk (e4m3: head_dim % 16 == 0)
    const WarpTiles<TK> tiles(kbeg, kend, warp, p.rotate, b);
    const TileCopies<kPaged, T, KV, D, TK> copies(p, b, kvh, lane, kv_chunks);
    auto load_tile = [&](int i, Stage& st) {
      copies.load(p, b, tiles.key0(i), kend, [&](int j) {
        const int at = kFp8 ? swz_codes<D>(j, copies.ch) : swz<D>(j, copies.ch * 8);
        return std::pair{st.k + at, st.v + at};
      });
    };

    float acc[D / 8][4];  // O: 16 rows x D in C fragments
#pragma unroll
    for (int i = 0; i < D / 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // rows g, g + 8 (l: this lane's columns)
    // Row g's position (decode_key_hidden) and ALiBi slope (row g + 8 is never the block's: see below).
    const int pos = len - p.s_q + row_token(g);
    const float slope = p.alibi.log2_slope(b, row_head(g));
    // e4m3: K's scale joins the softmax scale (DecodeParams::k_scale).
    ScoreTransform score_fp8 = p.score;
    if constexpr (kFp8) score_fp8.scale_in *= p.k_scale[kvh * p.ks_stride];

    walk_warp_ring(ring, p.stages, tiles.count, load_tile, [&](int i, const Stage& st) {
      // S = Q K^T: keys 8 nb .. 8 nb + 7 of the tile in s[nb].
      float s[NB][4] = {};
      if constexpr (kFp8) {
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) {
          uint32_t w[D / 16];  // key 8 nb + g's codes from dim t D / 4: word kk holds k-step kk's 4
#pragma unroll
          for (int c = 0; c < D / 64; ++c) {
            const uint4 x = *reinterpret_cast<const uint4*>(st.k + swz_codes<D>(nb * 8 + g, t * (D / 64) + c));
            w[4 * c] = x.x, w[4 * c + 1] = x.y, w[4 * c + 2] = x.z, w[4 * c + 3] = x.w;
          }
#pragma unroll
          for (int kk = 0; kk < D / 16; ++kk)
            mma_16x8x16<M>(s[nb], qa[kk], e4m3x2_as<M>(w[kk]), e4m3x2_as<M>(w[kk] >> 16));
        }
      } else {
        const int q8 = lane >> 3;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          unsigned bk[4];
          ldmatrix_x4<false>(bk, st.k + swz<D>((lane & 7) + (q8 >> 1) * 8, kk * 16 + (q8 & 1) * 8));
          mma_16x8x16<T>(s[0], qa[kk], bk[0], bk[1]);
          mma_16x8x16<T>(s[1], qa[kk], bk[2], bk[3]);
        }
      }
      // Into the log2 domain (with ALiBi's bias) and masked: keys past this split or sequence, causal and the window
      // (the s_q queries are the sequence's last positions: query i sees keys <= len - s_q + i, and >= that - window).
      // Then the online softmax of the prefill.
      // Row g only (elements 0, 1 of each C fragment): the block's rows are rows 0..7 of the tile (see
      // online_softmax_step's kHalves).
      const int key0 = tiles.key0(i);
      if constexpr (kQScaled)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) s[nb][0] *= q_unscale, s[nb][1] *= q_unscale;
      if constexpr (kFp8)
        score_fp8.apply<2>(s);
      else
        p.score.apply<2>(s);
      float tile_max[2] = {m_run[0], m_run[1]};
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = key0 + nb * 8 + 2 * t + e;
          if (p.alibi.slopes) s[nb][e] = alibi_biased(s[nb][e], slope, pos, key);
          if (key >= kend || decode_key_hidden(p, pos, key)) s[nb][e] = -INFINITY;
          tile_max[0] = fmaxf(tile_max[0], s[nb][e]);
        }
      online_softmax_step<false, NB, D / 8, 1>(s, tile_max, m_run, l_run, acc);
      if constexpr (kFp8) {
        // O += P V, one k-step a 16 keys: rows 2t, 2t + 1, 2t + 8, 2t + 9 of the step, this lane's D / 8 codes from
        // dim g D / 8; byte j of a row is n-block (column block) 4 w + j of word w.
#pragma unroll
        for (int ks = 0; ks < TK / 16; ++ks) {
          unsigned pa[4];
          p_fragment<M>(s, ks, pa);
          uint32_t pairs[D / 32][4];
          v_code_pairs<D>(st.v, ks, g, t, pairs);
#pragma unroll
          for (int w = 0; w < D / 32; ++w) {
            // pair j of n-block 4 w + j
            const uint32_t lo = pairs[w][0], hi = pairs[w][1], lo8 = pairs[w][2], hi8 = pairs[w][3];
            mma_16x8x16<M>(acc[4 * w], pa, e4m3x2_as<M>(lo), e4m3x2_as<M>(lo8));
            mma_16x8x16<M>(acc[4 * w + 1], pa, e4m3x2_as<M>(lo >> 16), e4m3x2_as<M>(lo8 >> 16));
            mma_16x8x16<M>(acc[4 * w + 2], pa, e4m3x2_as<M>(hi), e4m3x2_as<M>(hi8));
            mma_16x8x16<M>(acc[4 * w + 3], pa, e4m3x2_as<M>(hi >> 16), e4m3x2_as<M>(hi8 >> 16));
          }
        }
      } else {
        // O += P V: P's C fragments of the 16 keys are the A fragment of one k-step.
        const int q8 = lane >> 3;
        unsigned pa[4];
        p_fragment<T>(s, 0, pa);
#pragma unroll
        for (int db = 0; db < D / 16; ++db) {
          unsigned bv[4];  // keys 0..7 / 8..15 (rows), dims db*16 + 0..7 / 8..15, transposed
          ldmatrix_x4<true>(bv, st.v + swz<D>((lane & 7) + (q8 & 1) * 8, db * 16 + (q8 >> 1) * 8));
          mma_16x8x16<T>(acc[2 * db], pa, bv[0], bv[1]);
          mma_16x8x16<T>(acc[2 * db + 1], pa, bv[2], bv[3]);
        }
      }
    });
    allow_dependent_launch();  // the merge (if any) may be placed now; it waits for this grid to complete

    // The quad's column sums; then the warp's rows 0..R-1 into the merge area (over the ring: after the barrier).
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      l_run[rr] += __shfl_xor_sync(0xffffffffu, l_run[rr], 1);
      l_run[rr] += __shfl_xor_sync(0xffffffffu, l_run[rr], 2);
    }
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int r = g + 8 * rr;
      if (r >= R) continue;
      if constexpr (kFp8) {  // columns 2t + e are dims (2t + e) D / 8 + nb: contiguous in nb
#pragma unroll
        for (int e = 0; e < 2; ++e)
#pragma unroll
          for (int nb = 0; nb < D / 8; nb += 4)
            *reinterpret_cast<float4*>(&merge.o[warp][r][(2 * t + e) * (D / 8) + nb]) = make_float4(
                acc[nb][2 * rr + e], acc[nb + 1][2 * rr + e], acc[nb + 2][2 * rr + e], acc[nb + 3][2 * rr + e]);
      } else {
#pragma unroll
        for (int d8 = 0; d8 < D / 8; ++d8)
          *reinterpret_cast<float2*>(&merge.o[warp][r][d8 * 8 + 2 * t]) =
              make_float2(acc[d8][2 * rr], acc[d8][2 * rr + 1]);
      }
      if (t == 0) merge.m[warp][r] = m_run[rr], merge.l[warp][r] = l_run[rr];
    }
    __syncthreads();
    if constexpr (kFp8)
      store_block_rows<T, D, R, true>(p, merge, b, kvh, r0, split, p.v_scale[kvh * p.vs_stride]);
    else
      store_block_rows<T, D, R>(p, merge, b, kvh, r0, split);
  }
}

// The e4m3 tensor-core decode with the keys on the MMA's M (DecodePlan::keys_on_m, KERNELKIT_TUNE decode_kt=1):
// S^T = K Q^T and O^T = V^T P^T, the block's R <= 8 query rows on N = 8. decode_tc_kernel puts them on M, where
// rows 8..15 of every MMA are zeros; here a 32-key tile takes 2 x D / 16 MMAs for S^T and D / 16 x 2 for O^T, half
// as many, with the same copies, code conversions and byte permutes, and O^T's accumulators are half of O's.
// Lane (g, t) holds the scores of keys g, g + 8 of each 16-key m-block for queries 2t, 2t + 1 (the C layout), so a
// query's max is reduced over the 8 lanes of its column (g) rather than a quad; movmatrix turns P^T's C fragments
// into the B fragments of O^T's k-step. The permuted dims of decode_tc_kernel's e4m3 path, transposed:
//   S^T: K is the A operand, key g's codes from dim t D / 4 (word kk: k-step kk's logical 2t, 2t + 1 | 2t + 8, 2t + 9);
//   O^T: row g (g + 8) of dim block db is physical dim g D / 8 + 2 db (+ 1), so the lane reads D / 8 contiguous codes
//        of each of its keys 2t, 2t + 1, 2t + 8, 2t + 9 from g D / 8, as decode_tc_kernel does, and byte j of word w
//        is dim block 2 w + j / 2.
template <typename T, int D, int R, bool kPaged, typename M = T>
__global__ void __launch_bounds__(kDecodeThreads, kDecodeTcMinBlocks) decode_kt_kernel(const DecodeParams<T> p) {
  constexpr bool kQScaled = !std::is_same_v<M, T>;
  if constexpr (!kDeviceHasType<T> || !KK_DEVICE_HAS_FP8) {
    __trap();  // unreachable: the host refuses e4m3 caches below sm_89
  } else {
    static_assert(R <= 8 && D == 128, "decode_kt: the block's rows are the 8 columns of N; head_dim 128");
    static_assert(std::is_same_v<M, __half>, "decode_kt: f16 MMAs (bf16 q scaled into f16, DecodePlan::f16_mma)");
    constexpr int TK = kDecodeFp8TcTileKeys, MB = TK / 16;  // keys a tile; its m-blocks of S^T (k-steps of O^T)
    using Stage = DecodeTcStage<uint8_t, D, TK>;
    extern __shared__ __align__(16) unsigned char smem_raw[];

    const int split = blockIdx.x, b = blockIdx.y / p.kv_heads, kvh = blockIdx.y % p.kv_heads;
    const int r0 = blockIdx.z * R;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    Stage* const ring = reinterpret_cast<Stage*>(smem_raw) + warp * p.stages;
    auto& merge = *reinterpret_cast<DecodeMerge<D, R>*>(smem_raw);
    const KeyRange keys = checked_key_range<kPaged>(p, b, split);
    const int len = keys.len, kbeg = keys.kbeg, kend = keys.kend;

    // Q^T as B fragments: query g's pairs (the quad of lanes 4g.. holds query g).
    unsigned qb[D / 16][2];
    load_q_pairs<T, D, true>(p, block_q_row<R>(p, b, kvh, r0, g), t, qb);
    const float q_unscale_g = kQScaled ? q_pairs_to_f16<D>(qb) : 1.0f;
    // This lane's queries 2t + e (its C columns): their scale back, position and ALiBi slope.
    float q_unscale[2], slope[2];
    int pos[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int r = 2 * t + e;
      q_unscale[e] = __shfl_sync(0xffffffffu, q_unscale_g, 4 * r);
      pos[e] = len - p.s_q + (r0 + r) / p.group;
      slope[e] = p.alibi.log2_slope(b, kvh * p.group + (r0 + r) % p.group);
    }

    const WarpTiles<TK> tiles(kbeg, kend, warp, p.rotate, b);
    const TileCopies<kPaged, T, uint8_t, D, TK> copies(p, b, kvh, lane, p.chunks / 2);
    auto load_tile = [&](int i, Stage& st) {
      copies.load(p, b, tiles.key0(i), kend, [&](int j) {
        const int at = swz_codes<D>(j, copies.ch);
        return std::pair{st.k + at, st.v + at};
      });
    };

    float acc[D / 16]
             [4];  // O^T: D x 8 queries in C fragments (dim rows g, g + 8 of each dim block; queries 2t, 2t + 1)
#pragma unroll
    for (int i = 0; i < D / 16; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // queries 2t, 2t + 1 (l: this lane's keys)
    ScoreTransform score = p.score;                                    // with K's scale (DecodeParams::k_scale)
    score.scale_in *= p.k_scale[kvh * p.ks_stride];

    walk_warp_ring(ring, p.stages, tiles.count, load_tile, [&](int i, const Stage& st) {
      // S^T = K Q^T: keys 16 mb + g (+ 8) of the tile in s[mb].
      float s[MB][4] = {};
#pragma unroll
      for (int mb = 0; mb < MB; ++mb) {
        uint32_t w[2][D / 16];  // keys 16 mb + g and + 8: their codes from dim t D / 4, word kk k-step kk's 4
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int c = 0; c < D / 64; ++c) {
            const uint4 x = *reinterpret_cast<const uint4*>(st.k + swz_codes<D>(mb * 16 + g + 8 * h, t * (D / 64) + c));
            w[h][4 * c] = x.x, w[h][4 * c + 1] = x.y, w[h][4 * c + 2] = x.z, w[h][4 * c + 3] = x.w;
          }
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          const unsigned a[4] = {e4m3x2_as<M>(w[0][kk]), e4m3x2_as<M>(w[1][kk]), e4m3x2_as<M>(w[0][kk] >> 16),
                                 e4m3x2_as<M>(w[1][kk] >> 16)};
          mma_16x8x16<M>(s[mb], a, qb[kk][0], qb[kk][1]);
        }
      }
      // Into the log2 domain (ALiBi, then the masks as in decode_tc_kernel), then the online softmax of each query
      // column: its max over the column's 8 lanes (g), O^T's columns and this lane's part of the sum rescaled.
      const int key0 = tiles.key0(i);
      if constexpr (kQScaled)
#pragma unroll
        for (int mb = 0; mb < MB; ++mb)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mb][e] *= q_unscale[e & 1];
      score.apply<4>(s);
      float m_use[2];
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        float tile_max = m_run[q];
#pragma unroll
        for (int mb = 0; mb < MB; ++mb)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float& x = s[mb][2 * h + q];
            const int key = key0 + mb * 16 + g + 8 * h;
            if (p.alibi.slopes) x = alibi_biased(x, slope[q], pos[q], key);
            if (key >= kend || decode_key_hidden(p, pos[q], key)) x = -INFINITY;
            tile_max = fmaxf(tile_max, x);
          }
#pragma unroll
        for (int off = 4; off < 32; off *= 2) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, off));
        // A query with nothing visible yet keeps max -inf: subtract 0 (as online_softmax_step does).
        m_use[q] = tile_max == -INFINITY ? 0.0f : tile_max;
        const float corr = exp2f(m_run[q] - m_use[q]);
        m_run[q] = tile_max;
        l_run[q] *= corr;
#pragma unroll
        for (int db = 0; db < D / 16; ++db) acc[db][q] *= corr, acc[db][2 + q] *= corr;
      }
      // P^T (rounded to M) as O^T's B fragments: k-step mb's b0 = keys 2t, 2t + 1 of query g, b1 = keys 2t + 8, + 9.
      unsigned pb[MB][2];
#pragma unroll
      for (int mb = 0; mb < MB; ++mb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[mb][e] = exp2f(s[mb][e] - m_use[e & 1]);
          l_run[e & 1] += s[mb][e];
        }
        pb[mb][0] = movmatrix_trans(pack_rounded<M>(s[mb][0], s[mb][1]));
        pb[mb][1] = movmatrix_trans(pack_rounded<M>(s[mb][2], s[mb][3]));
      }
      // O^T += V^T P^T, one k-step a 16 keys: this lane's keys 2t, 2t + 1, 2t + 8, 2t + 9 of the step, D / 8 codes
      // each from dim g D / 8 (as decode_tc_kernel reads them).
#pragma unroll
      for (int ks = 0; ks < MB; ++ks) {
        uint32_t pairs[D / 32][4];
        v_code_pairs<D>(st.v, ks, g, t, pairs);
#pragma unroll
        for (int w = 0; w < D / 32; ++w) {
          // The low half of lo is dim block 2 w's row g, the high half its row g + 8; hi the same for dim block
          // 2 w + 1.
          const uint32_t lo = pairs[w][0], hi = pairs[w][1], lo8 = pairs[w][2], hi8 = pairs[w][3];
          const unsigned va[4] = {e4m3x2_as<M>(lo), e4m3x2_as<M>(lo >> 16), e4m3x2_as<M>(lo8), e4m3x2_as<M>(lo8 >> 16)};
          const unsigned vb[4] = {e4m3x2_as<M>(hi), e4m3x2_as<M>(hi >> 16), e4m3x2_as<M>(hi8), e4m3x2_as<M>(hi8 >> 16)};
          mma_16x8x16<M>(acc[2 * w], va, pb[ks][0], pb[ks][1]);
          mma_16x8x16<M>(acc[2 * w + 1], vb, pb[ks][0], pb[ks][1]);
        }
      }
    });
    allow_dependent_launch();  // the merge (if any) may be placed now; it waits for this grid to complete

    // The column sums over the 8 lanes of a column; then the warp's queries 0..R-1 into the merge area (over the
    // ring: after the barrier). Query 2t + q's dims g D / 8 + 2 db, + 1 are acc[db][q], acc[db][2 + q].
#pragma unroll
    for (int q = 0; q < 2; ++q)
#pragma unroll
      for (int off = 4; off < 32; off *= 2) l_run[q] += __shfl_xor_sync(0xffffffffu, l_run[q], off);
    __syncthreads();
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int r = 2 * t + q;
      if (r >= R) continue;
#pragma unroll
      for (int db = 0; db < D / 16; db += 2)
        *reinterpret_cast<float4*>(&merge.o[warp][r][g * (D / 8) + 2 * db]) =
            make_float4(acc[db][q], acc[db][2 + q], acc[db + 1][q], acc[db + 1][2 + q]);
      if (g == 0) merge.m[warp][r] = m_run[q], merge.l[warp][r] = l_run[q];
    }
    __syncthreads();
    store_block_rows<T, D, R, true>(p, merge, b, kvh, r0, split, p.v_scale[kvh * p.vs_stride]);
  }
}

// One block per output row (b, token, head) merges the splits' partials by their lse. Warp 0 turns the lse_s into
// weights w_s = exp(lse_s - lse) in shared memory, its lanes sharing the splits; then thread t owns 4 output dims
// (t % (D / 4)) of every G-th split (G = kDecodeThreads / (D / 4) split groups), so a thread walks at most
// ceil(splits / G) splits with independent 16-byte loads, and the G partial sums meet in shared memory. (One warp a
// row walking every split serially, once per 32 dims, was latency-bound: 62 us at b1 h32/8 s4096, 43 splits, H200.)
// A row no split saw (every lse -inf) gets zeros and lse -inf.
template <typename T, int D>
__global__ void __launch_bounds__(kDecodeThreads) decode_merge_kernel(const DecodeParams<T> p, int64_t rows_all) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();
  } else {
    constexpr int kVecs = D / 4, kGroups = kDecodeThreads / kVecs, kPerLane = kDecodeMaxSplits / kWarpSize;
    static_assert(kDecodeMaxSplits % kWarpSize == 0 && kGroups * kVecs == kDecodeThreads, "decode merge");
    __shared__ float w[kDecodeMaxSplits];
    __shared__ __align__(16) float part[kGroups][D];
    __shared__ float row_lse;
    const int64_t row = blockIdx.x;
    const int tid = threadIdx.x;
    wait_for_prior_grid();  // the split kernel's partials (launched as its programmatic dependent)
    if (tid < kWarpSize) {
      float l[kPerLane], m = -INFINITY;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int s = tid + kWarpSize * j;
        l[j] = s < p.splits ? p.part_lse[s * rows_all + row] : -INFINITY;
        m = fmaxf(m, l[j]);
      }
      m = warp_max(m);
      float total = 0.0f;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) total += l[j] == -INFINITY ? 0.0f : expf(l[j] - m);
      total = warp_sum(total);
      const float lse = total > 0.0f ? m + logf(total) : -INFINITY;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int s = tid + kWarpSize * j;
        if (s < p.splits) w[s] = l[j] == -INFINITY ? 0.0f : expf(l[j] - lse);  // 0 for an empty split
      }
      if (tid == 0) row_lse = lse;
    }
    __syncthreads();
    const int v = tid % kVecs, g = tid / kVecs;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4
    for (int s = g; s < p.splits; s += kGroups) {
      const float ws = w[s];
      const float4 x = *reinterpret_cast<const float4*>(p.part_o + (s * rows_all + row) * D + v * 4);
      o = make_float4(fmaf(ws, x.x, o.x), fmaf(ws, x.y, o.y), fmaf(ws, x.z, o.z), fmaf(ws, x.w, o.w));
    }
    *reinterpret_cast<float4*>(&part[g][v * 4]) = o;
    __syncthreads();
    if (tid < kVecs) {
      float y[4] = {};
#pragma unroll
      for (int gg = 0; gg < kGroups; ++gg)
#pragma unroll
        for (int e = 0; e < 4; ++e) y[e] += part[gg][v * 4 + e];
      const int head = static_cast<int>(row % p.heads), token = static_cast<int>((row / p.heads) % p.s_q);
      const int b = static_cast<int>(row / (static_cast<int64_t>(p.heads) * p.s_q));
      if (v < 2 * p.chunks)  // 4 dims a thread
        store_rounded<T, 4>(p.t.out + b * p.t.os.batch + token * p.t.os.token + head * p.t.os.head + v * 4, y);
      if (p.t.lse && tid == 0) p.t.lse[(static_cast<int64_t>(b) * p.heads + head) * p.s_q + token] = row_lse;
    }
  }
}

// The instantiated kernel of (head_dim, rows per block, paged, tensor cores) for a T or e4m3 (kFp8) cache; null for a
// head_dim without one. f16_mma: bf16 q over an e4m3 cache on f16 MMAs (DecodePlan::f16_mma); keys_on_m: the e4m3
// tensor-core kernel with the keys on M (DecodePlan::keys_on_m).
template <typename T, bool kFp8 = false>
void (*decode_kernel_for(int64_t head_dim, int rows, bool paged, bool tensor_cores, bool f16_mma = false,
                         bool keys_on_m = false))(DecodeParams<T>) {
  auto with_rows = [&](auto d) -> void (*)(DecodeParams<T>) {
    constexpr int D = decltype(d)::value;
    auto pick = [&](auto r) -> void (*)(DecodeParams<T>) {
      constexpr int R = decltype(r)::value;
      if constexpr (D <= 128) {
        if (tensor_cores) {
          auto tc = [&](auto m) -> void (*)(DecodeParams<T>) {
            using M = typename decltype(m)::type;
            if constexpr (kFp8 && D == 128 && std::is_same_v<M, __half>)  // (DecodePlan::keys_on_m: the planner's)
              if (keys_on_m) return paged ? decode_kt_kernel<T, D, R, true, M> : decode_kt_kernel<T, D, R, false, M>;
            return paged ? decode_tc_kernel<T, D, R, true, kFp8, M> : decode_tc_kernel<T, D, R, false, kFp8, M>;
          };
          if constexpr (kFp8 && std::is_same_v<T, __nv_bfloat16>)
            if (f16_mma) return tc(std::type_identity<__half>{});
          return tc(std::type_identity<T>{});
        }
      }
      return tensor_cores ? nullptr : paged ? decode_kernel<T, D, R, true, kFp8> : decode_kernel<T, D, R, false, kFp8>;
    };
    switch (rows) {
      case 1: return pick(std::integral_constant<int, 1>{});
      case 4: return pick(std::integral_constant<int, 4>{});
      default: return pick(std::integral_constant<int, 8>{});
    }
  };
  switch (head_dim) {
    case 64: return with_rows(std::integral_constant<int, 64>{});
    case 128: return with_rows(std::integral_constant<int, 128>{});
    case 256: return with_rows(std::integral_constant<int, 256>{});
    default: return nullptr;
  }
}

// Plans (plan_decode, with the residency the occupancy API reports for the chosen kernel: its registers, up to 233 a
// thread at 8 rows, can hold fewer blocks per SM than shared memory alone would, and splits sized for more would
// leave a second, partial wave), then launches the split kernel and, with several splits, the merge. kFp8: an e4m3
// cache (a.kv_dtype).
template <typename T, bool kFp8 = false>
Status launch_decode(const detail::DecodeArgs& a, const DeviceProfile& prof, cudaStream_t stream) {
  const int64_t rows = a.heads / a.kv_heads * a.s_q, rows_all = a.batch * a.s_q * a.heads;
  // A window: the splits cover the s_q + window keys any query of a sequence sees, not the whole cache.
  const int window = kernel_window(a.window_left, a.capacity);
  const int64_t span = window >= 0 ? std::min<int64_t>(a.capacity, window + a.s_q) : a.capacity;
  // The kernel's head_dim (a head_dim between its sizes runs on the next one up): the plan, the partials' rows.
  const int D = attention_kernel_head_dim(a.head_dim);
  DecodePlan plan;
  KK_RETURN_IF_ERROR(plan_decode(prof, D, a.batch, a.kv_heads, rows, rows_all, span, &plan, 0, a.kv_dtype));
  const auto kernel =
      decode_kernel_for<T, kFp8>(D, plan.rows_per_block, a.paged, plan.tensor_cores, plan.f16_mma, plan.keys_on_m);
  if (!kernel) return unsupported("decode_attention: head_dim " + std::to_string(a.head_dim) + " has no kernel");
  if (plan.smem_optin)  // before the occupancy query, which counts the block's dynamic shared memory against it
    KK_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(plan.smem_bytes)));
  int resident = 0;
  KK_RETURN_IF_ERROR(resident_blocks(kernel, kDecodeThreads, static_cast<size_t>(plan.smem_bytes), &resident));
  if (resident > 0 && resident < plan.blocks_per_sm)  // (the same stages: they depend on the profile alone)
    KK_RETURN_IF_ERROR(plan_decode(prof, D, a.batch, a.kv_heads, rows, rows_all, span, &plan, resident, a.kv_dtype));
  if (plan.row_groups > 65535) return unsupported("decode_attention: too many query rows per KV head");
  if (a.batch * a.kv_heads > 65535)  // grid.y
    return unsupported("decode_attention: batch x kv_heads = " + std::to_string(a.batch * a.kv_heads) +
                       " is more than the grid's 65535");
  if (rows_all > INT32_MAX) return unsupported("decode_attention: more than 2^31 - 1 query rows in all");
  if (a.num_pages > INT32_MAX) return unsupported("decode_attention: more than 2^31 - 1 pages in the cache");
  detail::DeviceErrorRecord* err = nullptr;
  KK_RETURN_IF_ERROR(device_error_record(a.device.index, &err));

  // log2 of the page size, a power of two (validate_decode)
  const int page_shift = a.paged ? std::countr_zero(static_cast<uint64_t>(a.page_size)) : 0;
  DecodeParams<T> p{attn_tensors<T>(a),
                    a.block_table,
                    a.block_table_stride,
                    page_shift,
                    a.seqlens,
                    static_cast<int>(a.capacity),
                    static_cast<int>(a.s_q),
                    static_cast<int>(a.heads),
                    static_cast<int>(a.kv_heads),
                    static_cast<int>(a.heads / a.kv_heads),
                    static_cast<int>(a.num_pages),
                    err,
                    static_cast<int>(plan.chunk),
                    plan.splits,
                    score_transform(a.scale, a.softcap),
                    a.causal,
                    window,
                    nullptr,
                    nullptr,
                    plan.stages,
                    static_cast<int>(a.head_dim / 8),
                    {a.alibi, a.alibi_batch},
                    a.scales.k,
                    a.scales.v,
                    a.scales.k_stride,
                    a.scales.v_stride,
                    plan.rotate};
  const dim3 grid(static_cast<unsigned>(plan.splits), static_cast<unsigned>(a.batch * a.kv_heads),
                  static_cast<unsigned>(plan.row_groups));
  return with_stream_scratch(static_cast<size_t>(plan.workspace_bytes), stream, [&](void* workspace) -> Status {
    if (workspace) {  // the partials: o [splits, rows_all, d], then lse [splits, rows_all]
      p.part_o = static_cast<float*>(workspace);
      p.part_lse = p.part_o + plan.splits * rows_all * D;
    }
    kernel<<<grid, kDecodeThreads, static_cast<size_t>(plan.smem_bytes), stream>>>(p);
    KK_CUDA_RETURN(cudaGetLastError());
    if (plan.splits > 1) {  // one block a row (rows_all < 2^31: checked above)
      const auto merge = D == 64    ? decode_merge_kernel<T, 64>
                         : D == 128 ? decode_merge_kernel<T, 128>
                                    : decode_merge_kernel<T, 256>;
      KK_RETURN_IF_ERROR(launch_dependent(merge, dim3(static_cast<unsigned>(rows_all)), dim3(kDecodeThreads), 0,
                                          stream, p, rows_all));
    }
    return Status::Ok();
  });
}

}  // namespace kernelkit::cuda

// Decode attention: a few query tokens per sequence against a long KV cache, split across blocks along the keys.
//   Block (split, (b, kv_head), row group): the kDecodeRows query rows (query heads of the KV head's GQA group x query
//   tokens) of one row group, over the keys [split * chunk, (split + 1) * chunk) of that sequence. Each KV head's
//   cache is read once for all of its query heads (one row group holds up to kDecodeRows = 16 heads x tokens).
//   K/V tiles of BN keys (BN * head_dim = 4096 elements: 8 KB a tile) are staged in shared memory through cp.async,
//   double-buffered, 16 bytes a copy; contiguous caches address key j of sequence b directly, paged caches through
//   block_table[b, j / 16]. Math on CUDA cores in fp32 (decode is memory-bound: ~2 FLOP per cached byte per query
//   row): scores, an online softmax per row (max and sum in fp32), O += P V with P unrounded.
//   With one split the block writes out and lse; with more, fp32 partials (O / l, lse) go to a workspace and
//   decode_merge_kernel combines them: lse = log sum_s exp(lse_s), o = sum_s exp(lse_s - lse) o_s.
// Bytes: E (2 b s_k h_kv d [k, v] + 2 b s_q h d [q, o]) + partials when split; FLOPs: 4 d per (query row, key).
#pragma once

#include <cuda_runtime.h>

#include "core/attention.hpp"
#include "cuda/attention/common.cuh"
#include "cuda/common/async_copy.cuh"
#include "cuda/common/check.cuh"
#include "cuda/common/vec.cuh"
#include "kernelkit/planner.hpp"

namespace kernelkit::cuda {

template <typename T>
struct DecodeParams {
  AttnTensors<T> t;  // q, out [b, s_q, h, d]; k, v contiguous [b, capacity, h_kv, d] or paged [pages, 16, h_kv, d]
  const int* block_table;  // paged: [b, max_pages], row stride bt_stride
  int64_t bt_stride;
  const int* seqlens;  // [b] or null (every sequence holds `capacity` keys)
  int capacity, s_q, heads, kv_heads, group;
  int chunk;  // keys per split (a multiple of BN)
  int splits;
  float scale_log2;
  bool causal;
  float* part_o;    // splits > 1: [splits, b * s_q * h, d], rows ordered as out's (b, token, head)
  float* part_lse;  // splits > 1: [splits, b * s_q * h]
};

template <typename T, int D, bool kPaged>
__global__ void __launch_bounds__(kDecodeThreads) decode_kernel(const DecodeParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    constexpr int R = kDecodeRows, BN = kDecodeTileElems / D, DP = D + 8;  // DP: rows padded by 16 bytes (banks)
    constexpr int kChunks = D / 8, kWarps = kDecodeThreads / 32, kRowsPerWarp = R / kWarps;
    static_assert(R % kWarps == 0 && BN <= 64 && (R * BN) % kDecodeThreads == 0 && (R * kChunks) % kDecodeThreads == 0,
                  "decode work split");
    __shared__ __align__(16) T sQ[R][DP];
    __shared__ __align__(16) T sK[2][BN][DP];
    __shared__ __align__(16) T sV[2][BN][DP];
    __shared__ float sS[R][BN];  // scores, then P
    __shared__ float sCorr[R], sM[R], sL[R];

    const int split = blockIdx.x, b = blockIdx.y / p.kv_heads, kvh = blockIdx.y % p.kv_heads;
    const int rows_total = p.group * p.s_q, r0 = blockIdx.z * R;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int len = p.seqlens ? min(max(p.seqlens[b], 0), p.capacity) : p.capacity;
    const int kbeg = split * p.chunk, kend = min(len, kbeg + p.chunk);
    // Row r of the block: query token i = r / group of head kvh * group + r % group.
    auto row_token = [&](int r) { return (r0 + r) / p.group; };
    auto row_head = [&](int r) { return kvh * p.group + (r0 + r) % p.group; };

    for (int c = tid; c < R * kChunks; c += kDecodeThreads) {
      const int r = c / kChunks, ch = c % kChunks;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (r0 + r < rows_total)
        val = *reinterpret_cast<const uint4*>(p.t.q + b * p.t.qs.batch + row_token(r) * p.t.qs.token +
                                              row_head(r) * p.t.qs.head + ch * 8);
      *reinterpret_cast<uint4*>(&sQ[r][ch * 8]) = val;
    }
    auto key_offset = [&](const detail::HeadStrides& st, int key) -> int64_t {
      if constexpr (kPaged)
        return static_cast<int64_t>(p.block_table[b * p.bt_stride + key / 16]) * st.batch + (key % 16) * st.token;
      else
        return b * st.batch + static_cast<int64_t>(key) * st.token;
    };
    auto load_kv = [&](int key0, int buf) {
      for (int c = tid; c < BN * kChunks; c += kDecodeThreads) {
        const int j = c / kChunks, ch = c % kChunks, key = key0 + j;
        if (key < kend) {
          copy_async<16>(&sK[buf][j][ch * 8], p.t.k + key_offset(p.t.ks, key) + kvh * p.t.ks.head + ch * 8);
          copy_async<16>(&sV[buf][j][ch * 8], p.t.v + key_offset(p.t.vs, key) + kvh * p.t.vs.head + ch * 8);
        } else {  // zeros, not stale rows: P = 0 times a NaN would still be NaN
          *reinterpret_cast<uint4*>(&sK[buf][j][ch * 8]) = make_uint4(0, 0, 0, 0);
          *reinterpret_cast<uint4*>(&sV[buf][j][ch * 8]) = make_uint4(0, 0, 0, 0);
        }
      }
    };

    // Per-thread output chunks: (row, 8 dims) pairs tid, tid + 128, ...
    constexpr int kOut = R * kChunks / kDecodeThreads;
    float acc[kOut][8];
#pragma unroll
    for (int o = 0; o < kOut; ++o)
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[o][e] = 0.0f;
    float m_run[kRowsPerWarp], l_run[kRowsPerWarp];  // the softmax warp's rows, identical in all its lanes
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) m_run[i] = -INFINITY, l_run[i] = 0.0f;

    const int n_tiles = kend > kbeg ? (kend - kbeg + BN - 1) / BN : 0;
    if (n_tiles > 0) load_kv(kbeg, 0);
    cp_async_commit();
    for (int it = 0; it < n_tiles; ++it) {
      const int buf = it & 1, key0 = kbeg + it * BN;
      if (it + 1 < n_tiles) load_kv(key0 + BN, buf ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
      __syncthreads();  // this tile (and sQ) visible to every thread

      // Scores (log2 domain), masked: keys past this split or sequence, padding rows, causal (the s_q queries are
      // the sequence's last positions: query i sees keys <= len - s_q + i).
#pragma unroll
      for (int pi = 0; pi < R * BN / kDecodeThreads; ++pi) {
        const int pair = tid + pi * kDecodeThreads, r = pair / BN, j = pair % BN, key = key0 + j;
        float dot = 0.0f;
#pragma unroll 4
        for (int ch = 0; ch < kChunks; ++ch) {
          const Vec<T, 8> qv = Vec<T, 8>::load(&sQ[r][ch * 8]), kv = Vec<T, 8>::load(&sK[buf][j][ch * 8]);
#pragma unroll
          for (int e = 0; e < 8; ++e) dot = fmaf(to_float(qv.v[e]), to_float(kv.v[e]), dot);
        }
        const bool masked = key >= kend || r0 + r >= rows_total || (p.causal && key > len - p.s_q + row_token(r));
        sS[r][j] = masked ? -INFINITY : dot * p.scale_log2;
      }
      __syncthreads();

      // Online softmax: warp w owns rows w * kRowsPerWarp ...; P replaces the scores, the correction goes to sCorr.
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const int r = warp * kRowsPerWarp + i;
        float mx = m_run[i];
        for (int j = lane; j < BN; j += 32) mx = fmaxf(mx, sS[r][j]);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        const float m_use = mx == -INFINITY ? 0.0f : mx;  // nothing visible yet: never -inf - -inf
        const float corr = exp2f(m_run[i] - m_use);
        float sum = 0.0f;
        for (int j = lane; j < BN; j += 32) {
          const float pj = exp2f(sS[r][j] - m_use);
          sS[r][j] = pj;
          sum += pj;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        m_run[i] = mx;
        l_run[i] = l_run[i] * corr + sum;
        if (lane == 0) sCorr[r] = corr;
      }
      __syncthreads();

      // O = O * corr + P V for this thread's (row, 8 dims) chunks.
#pragma unroll
      for (int o = 0; o < kOut; ++o) {
        const int pair = tid + o * kDecodeThreads, r = pair / kChunks, ch = pair % kChunks;
        const float corr = sCorr[r];
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[o][e] *= corr;
#pragma unroll 4
        for (int j = 0; j < BN; ++j) {
          const float pj = sS[r][j];
          const Vec<T, 8> vv = Vec<T, 8>::load(&sV[buf][j][ch * 8]);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[o][e] = fmaf(pj, to_float(vv.v[e]), acc[o][e]);
        }
      }
      __syncthreads();  // the buffers and sS are rewritten next iteration
    }
    cp_async_wait<0>();

    if (lane == 0)
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        sM[warp * kRowsPerWarp + i] = m_run[i];
        sL[warp * kRowsPerWarp + i] = l_run[i];
      }
    __syncthreads();
#pragma unroll
    for (int o = 0; o < kOut; ++o) {
      const int pair = tid + o * kDecodeThreads, r = pair / kChunks, ch = pair % kChunks;
      if (r0 + r >= rows_total) continue;
      const int token = row_token(r), head = row_head(r);
      const float l = sL[r], inv = l > 0.0f ? 1.0f / l : 0.0f;
      const float lse = l > 0.0f ? sM[r] * kLn2 + logf(l) : -INFINITY;
      float y[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) y[e] = acc[o][e] * inv;
      if (p.splits == 1) {
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
}

// One warp per output row (b, token, head): merges the splits' partials by their lse. A row no split saw (every lse
// -inf) gets zeros and lse -inf.
template <typename T>
__global__ void __launch_bounds__(kDecodeThreads)
    decode_merge_kernel(const DecodeParams<T> p, int64_t rows_all, int d) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();
  } else {
    const int64_t row = static_cast<int64_t>(blockIdx.x) * (kDecodeThreads / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows_all) return;
    float m = -INFINITY;
    for (int s = 0; s < p.splits; ++s) m = fmaxf(m, p.part_lse[s * rows_all + row]);
    float total = 0.0f;
    if (m != -INFINITY)
      for (int s = 0; s < p.splits; ++s) total += expf(p.part_lse[s * rows_all + row] - m);
    const float lse = m == -INFINITY ? -INFINITY : m + logf(total);
    const int head = static_cast<int>(row % p.heads), token = static_cast<int>((row / p.heads) % p.s_q);
    const int b = static_cast<int>(row / (static_cast<int64_t>(p.heads) * p.s_q));
    T* dst = p.t.out + b * p.t.os.batch + token * p.t.os.token + head * p.t.os.head;
    for (int i = lane; i < d; i += 32) {
      float o = 0.0f;
      if (m != -INFINITY)
        for (int s = 0; s < p.splits; ++s) {
          const float w = expf(p.part_lse[s * rows_all + row] - lse);  // 0 for an empty split (lse_s = -inf)
          if (w > 0.0f) o = fmaf(w, p.part_o[(s * rows_all + row) * d + i], o);
        }
      dst[i] = from_float<T>(o);
    }
    if (p.t.lse && lane == 0) p.t.lse[(static_cast<int64_t>(b) * p.heads + head) * p.s_q + token] = lse;
  }
}

template <typename T>
Status launch_decode(const detail::DecodeArgs& a, const DecodePlan& plan, cudaStream_t stream) {
  DecodeParams<T> p{attn_tensors<T>(a),
                    a.block_table,
                    a.block_table_stride,
                    a.seqlens,
                    static_cast<int>(a.capacity),
                    static_cast<int>(a.s_q),
                    static_cast<int>(a.heads),
                    static_cast<int>(a.kv_heads),
                    static_cast<int>(a.heads / a.kv_heads),
                    static_cast<int>(plan.chunk),
                    plan.splits,
                    a.scale * kLog2e,
                    a.causal,
                    nullptr,
                    nullptr};
  const int64_t rows_all = a.batch * a.s_q * a.heads;
  void* workspace = nullptr;
  if (plan.splits > 1) {
    // Stream-ordered temporary for the partials (pool-backed: no device synchronization, capturable in a graph).
    const size_t bytes =
        static_cast<size_t>(plan.splits * rows_all) * static_cast<size_t>(a.head_dim + 1) * sizeof(float);
    KK_CUDA_RETURN(cudaMallocAsync(&workspace, bytes, stream));
    p.part_o = static_cast<float*>(workspace);
    p.part_lse = p.part_o + plan.splits * rows_all * a.head_dim;
  }
  const dim3 grid(static_cast<unsigned>(plan.splits), static_cast<unsigned>(a.batch * a.kv_heads),
                  static_cast<unsigned>(plan.row_groups));
  Status s = [&]() -> Status {
    switch (a.head_dim) {
      case 64:
        a.paged ? decode_kernel<T, 64, true><<<grid, kDecodeThreads, 0, stream>>>(p)
                : decode_kernel<T, 64, false><<<grid, kDecodeThreads, 0, stream>>>(p);
        break;
      case 128:
        a.paged ? decode_kernel<T, 128, true><<<grid, kDecodeThreads, 0, stream>>>(p)
                : decode_kernel<T, 128, false><<<grid, kDecodeThreads, 0, stream>>>(p);
        break;
      case 256:
        a.paged ? decode_kernel<T, 256, true><<<grid, kDecodeThreads, 0, stream>>>(p)
                : decode_kernel<T, 256, false><<<grid, kDecodeThreads, 0, stream>>>(p);
        break;
      default:
        return unsupported("decode_attention: head_dim " + std::to_string(a.head_dim) + " has no kernel");
    }
    KK_CUDA_RETURN(cudaGetLastError());
    if (plan.splits > 1) {
      const int64_t blocks = (rows_all + kDecodeThreads / 32 - 1) / (kDecodeThreads / 32);
      decode_merge_kernel<T>
          <<<static_cast<unsigned>(blocks), kDecodeThreads, 0, stream>>>(p, rows_all, static_cast<int>(a.head_dim));
      KK_CUDA_RETURN(cudaGetLastError());
    }
    return Status::Ok();
  }();
  if (workspace) {
    const cudaError_t e = cudaFreeAsync(workspace, stream);  // freed even when a launch failed
    if (s.ok() && e != cudaSuccess)
      return Status(StatusCode::cuda_error, std::string("cudaFreeAsync failed: ") + cudaGetErrorString(e));
  }
  return s;
}

}  // namespace kernelkit::cuda

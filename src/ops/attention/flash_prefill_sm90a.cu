// Prefill attention on Hopper's warpgroup MMA (the sm_90 default where sm_90a code runs, kAttnWgmmaRows in
// planner.hpp; compiled for sm_90a only, see sm90a.hpp). The same blocks, masks, online softmax and epilogue as
// flash_prefill_kernel (flash_prefill.cuh: flash_block, mask_and_softmax, store_warp_rows), with the two products on
// wgmma.mma_async (issue_qk, issue_pv):
//   Warpgroup w of the consumers owns query rows 64 w .. 64 w + 63 of the block's 128 (wgmma's M), and its warp i rows
//   16 i .. 16 i + 15 of those, so each warp's accumulator fragments are the C fragments the mma.sync kernel's warps
//   hold for their 16 rows (wgmma.cuh): the softmax and the epilogue are shared unchanged.
//   Shared tiles are D / 64 column blocks of [rows][64] in the 128-byte swizzle (load_tile<..., kColumnBlocks>), each
//   block 1024-byte aligned (the descriptors' base offset 0): Q [128][D], and two buffers of K and V [BN][D].
// Two kernels: flash_prefill_wgmma_kernel (two warpgroups that load, compute and meet at a block barrier a tile) and
// flash_prefill_ws_kernel (a producer warpgroup and two consumers, FlashAttention-3's layout; docs/attention-sm90.md).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/attention/flash_prefill.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/common/wgmma.cuh"
#include "runtime/runtime_internal.hpp"
#include "ops/attention/flash_prefill_sm90a.hpp"
#include "runtime/sm90a.hpp"
#include "ops/attention/attention_plan.hpp"

namespace kernelkit::cuda {
namespace {

constexpr int kBM = kAttnWgmmaRows;
constexpr int kThreads = kBM / 64 * 128;  // a warpgroup (128 threads) per 64 query rows
constexpr int kAtom = 1024;               // the 128-byte swizzle's 8-row atom: alignment and 8-row stride
constexpr int kRowBytes = 128;            // a column block's row: 64 two-byte elements

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// kTma: the TMA descriptors of q, k and v ([b, s, h, d] through their strides; dense batches only).
struct WgmmaTma {
  TmaOperand q, k, v;
};

// S = Q K^T for a warpgroup's 64 query rows x BN keys: D / 16 k-steps of m64nBNk16, both operands K-major (the
// probe's layout: k step +32 bytes inside the 128-byte row, column block c at + c rows x 128 bytes). q_base: the
// warpgroup's first row in Q's column block 0 (of BM rows); k_base: the K tile. The caller fences before and commits
// after.
template <typename T, int D, int BN, int BM = kBM>
__device__ __forceinline__ void issue_qk(float (&s)[BN / 8][4], uint32_t q_base, uint32_t k_base) {
  const uint64_t q_desc = wgmma_desc_sw128(q_base, 16, kAtom), k_desc = wgmma_desc_sw128(k_base, 16, kAtom);
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint32_t step = kk % 4 * 32;  // 16 columns inside a column block's 128-byte row
    const uint64_t da = wgmma_desc_add(q_desc, kk / 4 * BM * kRowBytes + step);
    const uint64_t db = wgmma_desc_add(k_desc, kk / 4 * BN * kRowBytes + step);
    if constexpr (BN == 64)
      wgmma_m64n64k16<T, false>(s, da, db, kk > 0);
    else if constexpr (BN == 80)
      wgmma_m64n80k16<T>(s, da, db, kk > 0);
    else if constexpr (BN == 96)
      wgmma_m64n96k16<T>(s, da, db, kk > 0);
    else
      wgmma_m64n128k16<T>(s, da, db, kk > 0);
  }
}

// O += P V for one tile: per 16-key k-step, P from registers (pa: p_fragment's, wgmma's register A layout per
// warp) and B = V MN-major through the transpose (a 16-key step is +2048 bytes): one m64n64k16 per 64 columns of O,
// each column block its own descriptor, or with kWide one m64nDk16 over all column blocks of head_dim D = 128, 192
// or 256 (the descriptor's leading offset = the stride between the blocks, BN rows of 128 bytes). v_base: the V
// tile. The caller fences before and commits after.
template <typename T, int D, int BN, bool kWide = false>
__device__ __forceinline__ void issue_pv(float (&acc)[D / 8][4], const unsigned (&pa)[BN / 16][4], uint32_t v_base) {
  static_assert(!kWide || D == 128 || D == 192 || D == 256, "one MMA over O's columns: head_dim 128, 192 or 256");
  const uint64_t v_desc = wgmma_desc_sw128(v_base, kWide ? BN * kRowBytes : kAtom, kAtom);
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    if constexpr (kWide && D == 128) {
      wgmma_m64n128k16_rs<T, true>(acc, pa[kk], wgmma_desc_add(v_desc, 16 * kRowBytes * kk));
    } else if constexpr (kWide && D == 192) {
      wgmma_m64n192k16_rs<T, true>(acc, pa[kk], wgmma_desc_add(v_desc, 16 * kRowBytes * kk));
    } else if constexpr (kWide) {
      wgmma_m64n256k16_rs<T, true>(acc, pa[kk], wgmma_desc_add(v_desc, 16 * kRowBytes * kk));
    } else {
#pragma unroll
      for (int c = 0; c < D / 64; ++c) {
        const uint64_t dv = wgmma_desc_add(v_desc, c * BN * kRowBytes + 16 * kRowBytes * kk);
        wgmma_m64n64k16_rs<T, true>(*reinterpret_cast<float(*)[8][4]>(acc[8 * c]), pa[kk], dv);
      }
    }
  }
}

// BN: keys a K/V tile, 64 (two blocks an SM: 128 registers; at head_dim 128 ptxas spills 32 bytes, as measured) or
// 128 (KERNELKIT_TUNE attn_bn=128: S on m64n128k16, one block an SM for its 161 KB of shared memory at head_dim 128,
// so up to 255 registers). kTma (attn_wgmma=2): Q and the K/V tiles arrive by TMA (one thread issues a tile's boxes,
// everyone waits on that buffer's mbarrier; zeros past the sequence from the descriptor) instead of every thread's
// cp.async, and the barrier at the top of the loop goes.
template <typename T, int D, int BN, bool kTma, bool kMasks, bool kAlibi>
__global__ void __launch_bounds__(kThreads, BN == 64 ? 2 : 1)
    flash_prefill_wgmma_kernel(const FlashParams<T> p, const __grid_constant__ WgmmaTma tma_ops) {
  static_assert(D % 64 == 0 && (BN == 64 || BN == 128), "whole 64-column blocks; 64- or 128-key tiles");
  constexpr int kBlocks = D / 64;  // column blocks
  extern __shared__ unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw + (kAtom - smem_addr(smem_raw) % kAtom) % kAtom);  // [kBlocks][kBM][64]
  T* sK = sQ + kBM * D;                                                                   // [2][kBlocks][BN][64]
  T* sV = sK + 2 * BN * D;                                                                // [2][kBlocks][BN][64]

  __shared__ uint64_t bars[3];  // kTma: the two K/V buffers' and Q's mbarriers
  FlashBlock<T> f;
  if (!flash_block<kBM, BN, !kTma>(p, f)) return;  // TMA: dense batches only (launch)
  if constexpr (kTma) {
    if (threadIdx.x == 0) tma::init(bars, 3);
    __syncthreads();
  }
  const int warp = threadIdx.x / 32, wg = warp / 4, g = threadIdx.x % 32 / 4;
  const int wr = 16 * warp;  // the warp's first row in the block

  float acc[1][D / 8][4];  // O, one 16-row tile a warp (store_warp_rows' MW = 1)
#pragma unroll
  for (int i = 0; i < D / 8; ++i) acc[0][i][0] = acc[0][i][1] = acc[0][i][2] = acc[0][i][3] = 0.0f;
  float m_run[1][2] = {{-INFINITY, -INFINITY}}, l_run[1][2] = {{0.0f, 0.0f}};

  auto load_kv = [&](int it, int buf) {  // the it-th tile walked: tile0 + it
    const int tile = f.tile0 + it;
    if constexpr (kTma) {
      if (threadIdx.x == 0) {
        tma::expect(&bars[buf], 2 * BN * D * static_cast<uint32_t>(sizeof(T)));
        for (int c = 0; c < kBlocks; ++c) {
          tma::load(tma_ops.k, sK + (buf * kBlocks + c) * BN * 64, &bars[buf], 64 * c, tile * BN, f.h / p.group, f.b);
          tma::load(tma_ops.v, sV + (buf * kBlocks + c) * BN * 64, &bars[buf], 64 * c, tile * BN, f.h / p.group, f.b);
        }
      }
      return;
    }
    const int valid = min(BN, f.s_k - tile * BN);
    load_tile<BN, D, kThreads, true>(sK + buf * BN * D, f.k + static_cast<int64_t>(tile) * BN * p.t.ks.token,
                                     p.t.ks.token, valid, p.chunks);
    load_tile<BN, D, kThreads, true>(sV + buf * BN * D, f.v + static_cast<int64_t>(tile) * BN * p.t.vs.token,
                                     p.t.vs.token, valid, p.chunks);
  };
  if (f.n_tiles > 0) {
    if constexpr (kTma) {
      if (threadIdx.x == 0) {
        tma::expect(&bars[2], kBM * D * static_cast<uint32_t>(sizeof(T)));
        for (int c = 0; c < kBlocks; ++c)
          tma::load(tma_ops.q, sQ + c * kBM * 64, &bars[2], 64 * c, f.m0, f.h, f.b);
      }
    } else {
      load_tile<kBM, D, kThreads, true>(sQ, f.q, p.t.qs.token, f.rows, p.chunks);
    }
    load_kv(0, 0);
    if constexpr (!kTma) cp_async_commit();
  }
  const uint32_t q_base = smem_addr(sQ) + 64 * wg * kRowBytes;  // the warpgroup's 64 rows in column block 0
  for (int it = 0; it < f.n_tiles; ++it) {
    const int buf = it & 1;
    if (it + 1 < f.n_tiles) load_kv(it + 1, buf ^ 1);  // into the buffer tile it - 1 used (freed by its barrier)
    if constexpr (kTma) {
      if (it == 0) tma::wait_or_trap(&bars[2], 0);  // Q
      tma::wait_or_trap(&bars[buf], (it >> 1) & 1);   // the buffer's (it / 2)-th fill
    } else {
      cp_async_commit();
      cp_async_wait<1>();   // this tile's group (and Q's) has landed for this thread ...
      ::cuda::ptx::fence_proxy_async(::cuda::ptx::space_shared);  // ... visible to the async proxy (wgmma) ...
      __syncthreads();      // ... and everyone's
    }
    const uint32_t k_base = smem_addr(sK + buf * BN * D), v_base = smem_addr(sV + buf * BN * D);

    float s[1][BN / 8][4];  // S for the warp's 16 rows x BN keys
    wgmma_fence();
    issue_qk<T, D, BN>(s[0], q_base, k_base);
    wgmma_commit();
    wgmma_wait<0>();

    mask_and_softmax<kMasks, kAlibi, kBM, BN>(p, f, f.tile0 + it, f.m0 + wr + g, s[0], m_run[0], l_run[0], acc[0]);

    unsigned pa[BN / 16][4];  // every k-step's P first: registers a wgmma reads are written before its fence
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) p_fragment<T>(s[0], kk, pa[kk]);
    wgmma_fence();  // acc (rescaled) and P were written by ordinary instructions
    issue_pv<T, D, BN>(acc[0], pa, v_base);
    wgmma_commit();
    wgmma_wait<0>();
    __syncthreads();  // both warpgroups are done with this buffer before a later iteration overwrites it
  }
  store_warp_rows<1, D>(p, f, wr, acc, m_run, l_run, sQ);  // sQ (as [kBM][D] in swz<D>): Q is no longer read
}

// The warp-specialized form (KERNELKIT_TUNE attn_wgmma=3; FlashAttention-3's layout), TMA-fed: dense batches (and
// packed varlen ones, kVarlen below).
// Warpgroup 0 is the producer: it gives registers back (setmaxnreg) and one thread issues the loads, Q once, then
// K(n + 1) before V(n) (the order the consumers use them), into kWsStages buffers each; a buffer has a full mbarrier
// (the TMA's transaction count) and an empty one (one arrival from each consumer warp). Warpgroups 1 .. kConsumers are
// the consumers, query rows 64 (w - 1) .. + 63 each as in the kernel above, with the registers the producer gave
// back. A consumer's step n issues S(n) = Q K(n)^T and then O += P(n - 1) V(n - 1), waits for S(n) only and runs tile
// n's softmax while P V still runs (O's rescale by tile n's factors waits for it: rescale_rows); K(n)'s buffer is
// freed when S(n) is done, V(n - 1)'s when P V is. The consumers take turns issuing their MMAs, in a ring (named
// barrier kSchedBarrier + c: consumer c waits for the previous one's issue before its own), so the softmax of one runs
// under the others' MMAs. No block barrier after the setup: the warpgroups are coupled only through the buffers.
// kConsumers (2, or 3 at head_dim 64: kAttnWsMaxRows) consumer warpgroups of 64 query rows: BM = 64 kConsumers rows a
// block, (kConsumers + 1) x 128 threads. Registers per thread after setmaxnreg (one block an SM; multiples of 8):
// 128 x 24 + 256 x 240 = 64512 with two consumers, 128 x 32 + 384 x 160 = 65536 with three (FlashAttention-3's).
// kVarlen with two consumers: 40 and 224 (62464): the sequence's spans, read from cu_seqlens before the warpgroups
// part, live in registers through the producer's setmaxnreg.dec, and at 24 ptxas spilled 104-116 bytes (for the
// consumers' loop too); 32 / 232 still spilled 8-12.
template <int kConsumers, bool kVarlen = false>
struct WsShape {
  static_assert(kConsumers == 2 || kConsumers == 3, "two or three consumer warpgroups");
  static constexpr int kRows = 64 * kConsumers, kThreads = 128 * (kConsumers + 1);
  static constexpr int kProducerRegs = kConsumers == 3 ? 32 : kVarlen ? 40 : 24;
  static constexpr int kConsumerRegs = kConsumers == 3 ? 160 : kVarlen ? 224 : 240;
};
constexpr int kSchedBarrier = 1;  // consumer c waits on named barrier kSchedBarrier + c before issuing its MMAs
constexpr int kConsumersBarrier = kSchedBarrier + 3;  // all consumers: Q is no longer read (the epilogue stages O)

// BN: attn_ws_keys (128; 96 at head_dim 192 and 80 at 256, plain dense forms) or attn_ws_masked_keys (64 past 128).
// kWidePv: P V as issue_pv's kWide (head_dim 128 and up). kWsStages: K and V buffers each (2, or kAttnWsMaxStages: with
// 128-key tiles at head_dim 128, 64 KB a stage beside Q's 32 KB). kVarlen (attn_ws_varlen; KERNELKIT_TUNE
// attn_varlen_ws=0 turns it off): packed varlen batches too, TMA over the packed tensors. A tile past a sequence's end
// then holds the next sequence's rows: its queries are computed and never stored, its keys masked (P = 0), and its
// value rows zeroed in shared memory by the producer warp before the P V that reads them (0 x a non-finite value of
// another sequence would be NaN).
template <typename T, int D, int BN, bool kMasks, bool kAlibi, bool kWidePv, int kWsStages, int kConsumers,
          bool kVarlen = false>
__global__ void __launch_bounds__(WsShape<kConsumers, kVarlen>::kThreads, 1)
    flash_prefill_ws_kernel(const FlashParams<T> p, const __grid_constant__ WgmmaTma tma_ops) {
  using Shape = WsShape<kConsumers, kVarlen>;
  constexpr int BM = Shape::kRows, kConsumerThreads = 128 * kConsumers;
  static_assert(D % 64 == 0 && BN % 16 == 0 && BN >= 64 && BN <= 128, "whole 64-column blocks; 64- to 128-key tiles");
  constexpr int kBlocks = D / 64;
  constexpr uint32_t kTileBytes = BN * D * sizeof(T);
  extern __shared__ unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw + (kAtom - smem_addr(smem_raw) % kAtom) % kAtom);  // [kBlocks][BM][64]
  T* sK = sQ + BM * D;              // [kWsStages][kBlocks][BN][64]
  T* sV = sK + kWsStages * BN * D;  // [kWsStages][kBlocks][BN][64]
  __shared__ uint64_t full_k[kWsStages], full_v[kWsStages], empty_k[kWsStages], empty_v[kWsStages], full_q;
  __shared__ uint64_t tail_v;  // kVarlen: the last V tile's rows past the sequence are zeros

  FlashBlock<T> f;
  if (!flash_block<BM, BN, kVarlen, true>(p, f)) return;  // grid (heads, tiles, batch)
  const int last = f.n_tiles - 1;
  // kVarlen: whether the last tile's value rows run past the sequence's keys into the packed tensor's next rows.
  const bool zero_tail = kVarlen && f.n_tiles > 0 && f.s_k < (f.tile0 + f.n_tiles) * BN;
  if (threadIdx.x == 0) {
    tma::init(full_k, kWsStages);
    tma::init(full_v, kWsStages);
    tma::init(&full_q, 1);
    if constexpr (kVarlen) tma::init(&tail_v, 1);
    tma::init_counted(empty_k, kWsStages, kConsumerThreads / 32);
    tma::init_counted(empty_v, kWsStages, kConsumerThreads / 32);
  }
  __syncthreads();

  if (threadIdx.x < 128) {  // the producer
    warpgroup_reg_dealloc<Shape::kProducerRegs>();
    if (threadIdx.x >= 32 || f.n_tiles == 0) return;
    if (threadIdx.x == 0) {  // every load
      tma::expect(&full_q, BM * D * static_cast<uint32_t>(sizeof(T)));
      for (int c = 0; c < kBlocks; ++c)
        tma::load(tma_ops.q, sQ + c * BM * 64, &full_q, 64 * c, f.q_start + f.m0, f.h, f.b);
      // The n-th tile into buffer n % kWsStages once its previous fill (round n / kWsStages - 1) has been freed.
      auto load = [&](const TmaOperand& op, T* tiles, uint64_t* full, uint64_t* empty, int n) {
        const int stage = n % kWsStages;
        tma::wait_or_trap(&empty[stage], ((n / kWsStages) & 1) ^ 1);
        tma::expect(&full[stage], kTileBytes);
        for (int c = 0; c < kBlocks; ++c)
          tma::load(op, tiles + (stage * kBlocks + c) * BN * 64, &full[stage], 64 * c, f.k_start + (f.tile0 + n) * BN,
                    f.h / p.group, f.b);
      };
      load(tma_ops.k, sK, full_k, empty_k, 0);
      for (int n = 0; n < f.n_tiles; ++n) {
        if (n + 1 < f.n_tiles) load(tma_ops.k, sK, full_k, empty_k, n + 1);
        load(tma_ops.v, sV, full_v, empty_v, n);
      }
    }
    if (zero_tail) {
      // The warp, once the last V load is issued (so its buffer's barrier is in that fill's phase: every earlier
      // fill of the buffer was consumed before it was issued) and has landed: that tile's rows past the sequence.
      __syncwarp();
      tma::wait_or_trap(&full_v[last % kWsStages], (last / kWsStages) & 1);
      const int valid = f.s_k - (f.tile0 + last) * BN;
      uint4* tile = reinterpret_cast<uint4*>(sV + last % kWsStages * BN * D);  // [kBlocks][BN][64]: 8 chunks a row
      for (int i = threadIdx.x; i < kBlocks * (BN - valid) * 8; i += 32) {
        const int c = i / ((BN - valid) * 8), r = valid + i / 8 % (BN - valid);
        tile[(c * BN + r) * 8 + i % 8] = make_uint4(0, 0, 0, 0);  // whole rows: the swizzle stays inside a row
      }
      ::cuda::ptx::fence_proxy_async(::cuda::ptx::space_shared);  // visible to the consumers' wgmma (async proxy)
      __syncwarp();
      if (threadIdx.x == 0) tma::arrive(&tail_v);
    }
    return;
  }

  warpgroup_reg_alloc<Shape::kConsumerRegs>();
  // Consumer 0 .. kConsumers - 1, through a shuffle from lane 0 so that the compiler knows it warp-uniform: the MMA
  // descriptors derived from it then live in uniform registers (no R2UR a descriptor).
  const int cw = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0) - 1;
  const int warp = threadIdx.x / 32 - 4, g = threadIdx.x % 32 / 4;
  const int wr = 16 * warp;  // the warp's first row in the block
  const int row_a = f.m0 + wr + g;
  const bool lane0 = threadIdx.x % 32 == 0;

  float acc[1][D / 8][4];  // O, one 16-row tile a warp (store_warp_rows' MW = 1)
#pragma unroll
  for (int i = 0; i < D / 8; ++i) acc[0][i][0] = acc[0][i][1] = acc[0][i][2] = acc[0][i][3] = 0.0f;
  float m_run[1][2] = {{-INFINITY, -INFINITY}}, l_run[1][2] = {{0.0f, 0.0f}};

  const int n_tiles = f.n_tiles;
  bool timed_out = false;  // a buffer that never filled (tma::wait_or_flag): the output is NaN
  if (n_tiles > 0) {
    const uint32_t q_base = smem_addr(sQ) + 64 * cw * kRowBytes;  // the consumer's 64 rows in column block 0
    float s[BN / 8][4];       // S(n) for the warp's 16 rows x BN keys, then P(n) in fp32
    unsigned pa[BN / 16][4];  // P(n - 1) rounded to T: the register A of its P V k-steps
    float corr[2];
    auto full_wait = [&](uint64_t* full, int n) {
      tma::wait_or_flag(&full[n % kWsStages], (n / kWsStages) & 1, timed_out);
    };
    auto release = [&](uint64_t* empty, int n) {
      if (lane0) tma::arrive(&empty[n % kWsStages]);
    };
    auto issue_s = [&](int n) {
      issue_qk<T, D, BN, BM>(s, q_base, smem_addr(sK + n % kWsStages * BN * D));
      wgmma_commit();
    };
    auto issue_o = [&](int n) {
      issue_pv<T, D, BN, kWidePv>(acc[0], pa, smem_addr(sV + n % kWsStages * BN * D));
      wgmma_commit();
    };
    // Tile n's scores into P(n) (fp32, in s) and its rows' rescale factors; then P(n) rounded into pa.
    // Plain variants: the max of the unscaled scores, the scale folded into the exponent (p.masked(): scale > 0).
    const float exp_scale = kMasks ? 1.0f : p.score.scale_in;
    auto softmax = [&](int n) {
      float tile_max[2] = {-INFINITY, -INFINITY};
      mask_scores<kMasks, kAlibi, BM, BN>(p, f, f.tile0 + n, row_a, s, tile_max);
      online_softmax_factors(s, tile_max, exp_scale, p.rescale_slack, m_run[0], l_run[0], corr);
    };
    auto round_p = [&] {
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) p_fragment<T>(s, kk, pa[kk]);
    };

    const int next = cw + 1 == kConsumers ? 0 : cw + 1;           // the consumer whose turn follows ours
    if (next == 0) named_barrier_arrive(kSchedBarrier, 2 * 128);  // consumer 0 issues first
    tma::wait_or_flag(&full_q, 0, timed_out);
    full_wait(full_k, 0);
    named_barrier_sync(kSchedBarrier + cw, 2 * 128);
    wgmma_fence();
    issue_s(0);
    named_barrier_arrive(kSchedBarrier + next, 2 * 128);
    wgmma_wait<0>();
    wgmma_pin(s);
    release(empty_k, 0);
    softmax(0);  // O is zeros: nothing to rescale
    round_p();
    for (int n = 1; n < n_tiles; ++n) {
      full_wait(full_k, n);
      full_wait(full_v, n - 1);
      named_barrier_sync(kSchedBarrier + cw, 2 * 128);
      wgmma_pin(acc[0]);
      wgmma_pin(pa);
      wgmma_fence();
      issue_s(n);
      issue_o(n - 1);
      named_barrier_arrive(kSchedBarrier + next, 2 * 128);
      wgmma_wait<1>();  // S(n): committed first, so complete first
      wgmma_pin(s);
      release(empty_k, n);
      softmax(n);
      // The softmax before the wait below: in the PTX (unpinned, the compiler sank it past the wait) and in the
      // SASS (ptxas hoisted the wait above the exponentials), so that it runs under P(n - 1) V(n - 1).
      wgmma_pin(s);
      wgmma_schedule_fence(fminf(l_run[0][0], l_run[0][1]) < 0.0f);  // sums of exponentials: never negative
      wgmma_wait<0>();  // P(n - 1) V(n - 1)
      wgmma_pin(acc[0]);
      release(empty_v, n - 1);
      rescale_rows(acc[0], corr);
      round_p();
    }
    if (zero_tail)
      tma::wait_or_flag(&tail_v, 0, timed_out);  // landed, and its rows past the sequence zeroed
    else
      full_wait(full_v, last);
    wgmma_pin(acc[0]);
    wgmma_pin(pa);
    wgmma_fence();
    issue_o(n_tiles - 1);
    wgmma_wait<0>();
    wgmma_pin(acc[0]);
    if (cw == 0) named_barrier_sync(kSchedBarrier, 2 * 128);  // the last consumer's last turn (balances its arrivals)
  }
  if (timed_out) {
    l_run[0][0] = l_run[0][1] = 1.0f;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) acc[0][i][0] = acc[0][i][1] = acc[0][i][2] = acc[0][i][3] = NAN;
  }
  named_barrier_sync(kConsumersBarrier, kConsumerThreads);  // no consumer reads Q any more
  store_warp_rows<1, D>(p, f, wr, acc, m_run, l_run, sQ);   // sQ (as [BM][D] in swz<D>) stages O
}

// The TMA descriptors of a call: q [b, s_q, h, d] in boxes of block_m rows, k and v [b, s_k, h_kv, d] in boxes of
// block_n rows, each through its strides (elements); 64 columns a box. Packed varlen: q [total_q, h, d] and k, v
// [total_k, h_kv, d] (their batch stride 0 leaves that dimension out).
template <typename T>
Status tma_operands(const detail::AttentionArgs& a, int block_m, int block_n, WgmmaTma* ops) {
  const bool f16 = std::is_same_v<T, __half>;
  auto one = [&](TmaOperand* op, const void* base, const detail::HeadStrides& st, int64_t tokens, int64_t heads,
                 int box) {
    return make_tma_operand(op, base, f16, a.head_dim,
                            {TmaDim{tokens, st.token, box}, TmaDim{heads, st.head, 1}, TmaDim{a.batch, st.batch, 1}});
  };
  const int64_t q_tokens = a.varlen ? a.rows : a.s_q, k_tokens = a.varlen ? a.total_k : a.s_k;
  KK_RETURN_IF_ERROR(one(&ops->q, a.q, a.q_st, q_tokens, a.heads, block_m));
  KK_RETURN_IF_ERROR(one(&ops->k, a.k, a.k_st, k_tokens, a.kv_heads, block_n));
  return one(&ops->v, a.v, a.v_st, k_tokens, a.kv_heads, block_n);
}

template <typename T>
Status launch(const detail::AttentionArgs& a, const TilePlan& tile, cudaStream_t stream, bool* ran) {
  *ran = false;
  FlashParams<T> p;
  KK_RETURN_IF_ERROR(flash_params<T>(a, tile.stages, &p));
  p.rescale_slack = static_cast<float>(tile.rescale_slack);
  // TMA for calls with keys only (no keys: no tile to load) and, packed varlen batches, only under tile.varlen_ws (the
  // warp-specialized kernel's kVarlen: a tile past a sequence holds the next one's rows, which the two-warpgroup
  // kernel would read as keys; its cp.async copy zero-fills them); those, and strides a descriptor cannot express,
  // take the cp.async kernel. The warp-specialized kernel where it runs (TMA; its grid's y dimension, at most 65535,
  // counts the query tiles of tile.block_m rows; varlen: its default forms only), else the two-warpgroup one (kBM
  // rows; head_dim 64 and 128: at 192 and 256 the call is declined, *ran stays false). Three consumers (tile.block_m
  // 192) in the plain variants only: the kMasks ones spill 56-72 bytes at their 160 registers, so a window, a soft-cap
  // or ALiBi takes two.
  const int d = tile.block_k;  // the planned kernel's; columns past head_dim: zeros (TMA's fill, or load_tile)
  const bool varlen = a.cu_q != nullptr;
  const bool plain = !p.alibi.slopes && !p.masked();
  const int block_n = attn_ws_call_keys(d, tile.block_n, plain && !varlen);
  // Varlen through the warp-specialized kernel (tile.varlen_ws: planned only where the head_dim has the form,
  // attn_ws_varlen): its default forms, plain variants (masked varlen calls are rare enough that their forms' compile
  // time is not spent).
  const bool varlen_ws = varlen && tile.varlen_ws && tile.stages == 2 && tile.pv_n == d && plain;
  const bool dense = tile.tma && a.s_k > 0 && (!varlen || varlen_ws);
  const int ws_rows = plain ? tile.block_m : kBM;
  auto tiles_of = [&](int rows) { return static_cast<unsigned>((a.s_q + rows - 1) / rows); };
  const bool ws_fits = tile.warp_specialized && dense && tiles_of(ws_rows) <= 65535;
  const int rows = ws_fits ? ws_rows : kBM;
  WgmmaTma ops{};
  const bool use_tma = dense && (ws_fits || !varlen) && tma_operands<T>(a, rows, block_n, &ops).ok();
  const bool ws = ws_fits && use_tma;
  const unsigned tiles = tiles_of(ws ? rows : kBM), heads = static_cast<unsigned>(a.heads);
  auto go = [&](auto kernel, int threads) -> Status {
    const auto smem = static_cast<size_t>(tile.smem_bytes);
    KK_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    const dim3 grid(ws ? heads : tiles, ws ? tiles : heads, static_cast<unsigned>(a.batch));  // flash_block
    kernel<<<grid, threads, smem, stream>>>(p, ops);
    KK_CUDA_RETURN(cudaGetLastError());
    *ran = true;
    return Status::Ok();
  };
  auto with_masks = [&](auto d, auto bn, auto masks, auto alibi) -> Status {
    constexpr int D = decltype(d)::value, BN = decltype(bn)::value;
    constexpr bool kMasks = decltype(masks)::value, kAlibi = decltype(alibi)::value;
    constexpr bool kWide = D >= 128;  // P V over all of O's columns (the planner's pv_n)
    if constexpr (D > 128 && BN == attn_ws_keys(D)) {  // plain dense calls only (block_n above)
      if constexpr (!kMasks)
        if (ws) return go(flash_prefill_ws_kernel<T, D, BN, false, false, kWide, 2, 2>, WsShape<2>::kThreads);
    } else if constexpr (BN == attn_ws_masked_keys(D)) {
      if constexpr (!kMasks && attn_ws_varlen(D))
        if (ws && varlen) {  // packed varlen (varlen_ws): the default forms
          if constexpr (D == 64)
            if (rows == WsShape<3>::kRows)
              return go(flash_prefill_ws_kernel<T, D, BN, false, false, false, 2, 3, true>, WsShape<3, true>::kThreads);
          return go(flash_prefill_ws_kernel<T, D, BN, false, false, kWide, 2, 2, true>, WsShape<2, true>::kThreads);
        }
      if constexpr (D == 64 && !kMasks)
        if (ws && rows == WsShape<3>::kRows)  // three consumers
          return go(flash_prefill_ws_kernel<T, D, BN, kMasks, kAlibi, false, 2, 3>, WsShape<3>::kThreads);
      if constexpr (D <= 128)
        if (ws && tile.stages == kAttnWsMaxStages)
          return go(flash_prefill_ws_kernel<T, D, BN, kMasks, kAlibi, kWide, kAttnWsMaxStages, 2>,
                    WsShape<2>::kThreads);
      if (ws && tile.pv_n == D)  // one MMA over O's columns a k-step (the default)
        return go(flash_prefill_ws_kernel<T, D, BN, kMasks, kAlibi, kWide, 2, 2>, WsShape<2>::kThreads);
      if constexpr (D <= 128)  // attn_pv_n=64
        if (ws) return go(flash_prefill_ws_kernel<T, D, BN, kMasks, kAlibi, false, 2, 2>, WsShape<2>::kThreads);
    }
    if constexpr (D > 128) {
      return Status::Ok();  // declined
    } else {
      return use_tma ? go(flash_prefill_wgmma_kernel<T, D, BN, true, kMasks, kAlibi>, kThreads)
                     : go(flash_prefill_wgmma_kernel<T, D, BN, false, kMasks, kAlibi>, kThreads);
    }
  };
  auto with_tile = [&](auto d, auto bn) -> Status {
    using std::bool_constant;
    // A window, a soft-cap or ALiBi: the kMasks variants, with ALiBi kAlibi too (flash_prefill.cuh, tile_needs_mask).
    if (p.alibi.slopes) return with_masks(d, bn, bool_constant<true>{}, bool_constant<true>{});
    if (p.masked()) return with_masks(d, bn, bool_constant<true>{}, bool_constant<false>{});
    return with_masks(d, bn, bool_constant<false>{}, bool_constant<false>{});
  };
  using std::integral_constant;
  const bool wide = block_n == 128, dense_tile = d > 128 && block_n == attn_ws_keys(d);
  const bool rows_ok = tile.block_m == kBM || (tile.warp_specialized && d == 64 && tile.block_m == WsShape<3>::kRows);
  if (!rows_ok || (block_n != 64 && block_n != 128 && !dense_tile) || (d > 128 && wide))
    return Status(StatusCode::internal,
                  "attention (wgmma): no kernel for tile " + tile.to_string() + " at head_dim " + std::to_string(d));
  if (d == 64)
    return wide ? with_tile(integral_constant<int, 64>{}, integral_constant<int, 128>{})
                : with_tile(integral_constant<int, 64>{}, integral_constant<int, 64>{});
  if (d == 128)
    return wide ? with_tile(integral_constant<int, 128>{}, integral_constant<int, 128>{})
                : with_tile(integral_constant<int, 128>{}, integral_constant<int, 64>{});
  if (d == 192)
    return dense_tile ? with_tile(integral_constant<int, 192>{}, integral_constant<int, attn_ws_keys(192)>{})
                      : with_tile(integral_constant<int, 192>{}, integral_constant<int, attn_ws_masked_keys(192)>{});
  return dense_tile ? with_tile(integral_constant<int, 256>{}, integral_constant<int, attn_ws_keys(256)>{})
                    : with_tile(integral_constant<int, 256>{}, integral_constant<int, attn_ws_masked_keys(256)>{});
}

}  // namespace

Status flash_prefill_wgmma_launch(const detail::AttentionArgs& a, const TilePlan& tile, cudaStream_t stream,
                                  bool* ran) {
  return dispatch_half("attention", a.dtype, [&](auto tag) { return launch<decltype(tag)>(a, tile, stream, ran); });
}

}  // namespace kernelkit::cuda

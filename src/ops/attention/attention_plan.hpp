// The attention family's launch constants (src/ops/attention/): what the planner (attention_plan.cpp) and the
// kernels (flash_prefill.cuh, flash_prefill_sm90a.cu, decode.cuh) agree on, with the measurements that chose them.
// H200 figures are bf16 CUDA-graph medians with cold L2 (bench/op_baselines.py --tuned times every alternative).
#pragma once

#include "kernelkit/planner.hpp"

namespace kernelkit {

// ---- Head dims

// The kernels are compiled for head_dim 64, 128 and 256 (and 192 on sm_90a: attention_plan_head_dim); any other
// multiple of 8 up to 256 runs on the next one up, its columns past head_dim zero-filled in shared memory and never
// stored (FlashAttention-2's padding): head_dim 80 does the MMA work of 128, and the planner sizes tiles for the
// kernel's head_dim.
constexpr int kAttnMaxHeadDim = 256;
constexpr int attention_kernel_head_dim(int64_t head_dim) { return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256; }
// The head_dim a prefill plan is asked for: the kernel's, except that head dims 136 to 192 ask for 192, which the
// warp-specialized wgmma kernel has (three 64-column blocks: a quarter less MMA work than 256); plan_tile gives the
// mma.sync kernel's 256 wherever it plans that kernel instead.
constexpr int attention_plan_head_dim(int64_t head_dim) {
  return head_dim > 128 && head_dim <= 192 ? 192 : attention_kernel_head_dim(head_dim);
}

// ---- Prefill on mma.sync (sm_75, sm_80, and sm_90 where no sm_90a code runs)

// K/V buffers: 2 (1 where two do not fit). At head_dim 128 a 32-key tile is ~0.5 us of MMA per block on an H200 SM,
// about one global-memory round trip, so 2 buffers might leave the loads exposed; measured, they do not: a ring of 3
// against 2 at b1 h32 s4096 causal 769.6 vs 781.6 us, b4 s2048 1242.1 vs 1250.1, head_dim 64 433.0 vs 429.7 (within
// 1.5%), not worth the ring's 28-byte spill on sm_90, the T4's whole 64 KB and a quarter of the prefill's compile time.
constexpr int kAttnMaxStages = 2;
// Keys a K/V tile at head_dim 128 with two row tiles a warp: FlashAttention-2's 128x64 tile on sm_90 profiles, 32 keys
// elsewhere (KERNELKIT_TUNE attn_bn=32 / 64 forces either). The 64-key tile compiles with 255 registers and 4-16
// bytes of spill outside the loop on sm_90 (12-32 on sm_80) and halves each key's share of the per-tile work
// (barriers, row max and sum shuffles, the O rescale, the copy issue) at 96 KB of shared memory a block (2 blocks an
// SM, as with 32 keys). On the H200: b1 h32 s4096 causal 591.9 vs 628.3 us with 32 keys, b4 s2048 948.4 vs 1017.9
// (head_dim 64, where it is already the tile: 362.8 vs 361.0). Not measured on an A100, whose sm_80 build spills
// more: it keeps 32.
constexpr int kAttnWideKeys = 64;

// ---- Prefill on wgmma (sm_90a)

// The default on sm_90 profiles where it can run (a build with sm_90a code, a compute capability 9.0 GPU; plan_tile's
// sm90a_code), S = Q K^T and O += P V on wgmma.mma_async from 128-byte-swizzled shared tiles
// (flash_prefill_sm90a.cu), kAttnWgmmaRows query rows a block (kAttnWsMaxRows at head_dim 64), wgmma's M = 64 rows
// a warpgroup. The planned form (attn_wgmma=3) is warp-specialized: a producer warpgroup loads K/V tiles of
// attn_ws_keys keys by TMA into two buffers, two or three consumer warpgroups overlap their softmax with MMAs
// (docs/attention-sm90.md). Where it cannot run (packed varlen batches outside attn_ws_varlen, calls without keys,
// strides a TMA descriptor cannot express) the two-warpgroup kernel does at head_dim 64 and 128, its tiles by every
// thread's cp.async (attn_wgmma=1, kAttnWgmmaKeys-key tiles), and the mma.sync kernel above 128; past 65535 query
// tiles, the two-warpgroup kernel by TMA (attn_wgmma=2). attn_bn=64 / 128 forces the two-warpgroup kernel's tile (128:
// S on m64n128k16, 161 KB of shared memory at head_dim 128, one block an SM); attn_wgmma=0 the mma.sync kernel. On the
// H100, b1 h32 s4096 d128 causal: warp-specialized 262.4 us (524 TFLOP/s), two warpgroups by TMA 420.1; b4 s2048 d128
// 500.9 / 723.3; b2 h16 s4096 d64 causal 209.2 / 308.7 (bench/dev/attn_lab, CUDA events; SDPA cuDNN in
// bench/op_baselines.py's run: 263.4, 455.4, 182.3). On the H200, of the two-warpgroup forms, b1 h32 s4096 d128 causal:
// TMA 128 keys 413.4 us, TMA 64 keys 481.7, cp.async 64 keys 547.6, the mma.sync kernel 590.8.
constexpr int kAttnWgmmaRows = 128;
// K/V buffers of the warp-specialized kernel: 2, or 3 under KERNELKIT_TUNE attn_stages=3 (Q and 3 x 64 KB of K/V
// tiles at head_dim 128: 225 KB of the 227 KB a block may have; a tile's load is then issued two steps ahead),
// measured slower on the H100: 270.7 against 262.4 us at b1 h32 s4096 d128 causal, 504.0 against 500.9 at b4 s2048.
constexpr int kAttnWsMaxStages = 3;
// The warp-specialized kernel's lazy rescale (FlashAttention-4's): a row keeps its running max while a tile's max
// exceeds it by at most kAttnMaxRescaleSlack (log2 units) and O is rescaled only past that, so most steps skip the
// rescale; the exponentials reach at most 2^8, which P's f16 / bf16 rounding holds (f16's largest finite value is
// under 2^16; 2^8 leaves room in l and O's fp32 sums). O and l share the stale max, so the result is the same up to
// rounding. KERNELKIT_TUNE attn_slack=0 rescales at every rise. On the H100 (bf16, in one process with cuDNN): 1-5%
// faster at every d64 / d128 shape of bench/op_baselines.py's table, e.g. b4 h32/8 s4096 d128 causal 996.9 against
// 1044.0 us, b1 h24 s4096 d128 379.6 against 392.1 (bench/results/h100/op_baselines_attention.md).
constexpr int kAttnMaxRescaleSlack = 8;
constexpr int kAttnWgmmaKeys = 64;
constexpr int kAttnWgmmaTmaKeys = 128;
// Keys a K/V tile of the warp-specialized kernel: kAttnWgmmaTmaKeys, and at head_dim 192 and 256, where it is the only
// wgmma kernel, 96 and 80 (FlashAttention-3's tile at 256). Head_dim 192: Q's 48 KB and two buffers each of 36 KB K
// and V tiles, 193 KB with the alignment, S 48 registers beside O's 96; head_dim 256: Q's 64 KB and two buffers each
// of 40 KB, 225 KB, S 40 registers beside O's 128 (128-key tiles would need 241 and 320 KB). On the H100 (bf16, b2 h16
// s4096 causal, bench/op_baselines.py --only headdims in one process with SDPA cuDNN): head_dim 160 360.7 us against
// 411.0 with 64-key tiles (cuDNN 374.0), 192 377.3 against 435.2 (388.7), 256 502.0 against 555.7 (492.9).
constexpr int attn_ws_keys(int head_dim) { return head_dim == 192 ? 96 : head_dim == 256 ? 80 : kAttnWgmmaTmaKeys; }
// Keys a K/V tile of the warp-specialized kernel's masked (a window, a soft-cap, ALiBi) and packed varlen forms: 64
// past head_dim 128 (Q and two buffers: 145 KB at 192, 193 KB at 256), whose compile time the wider tiles are not
// spent on; KERNELKIT_TUNE attn_bn=64 gives every call at those head dims these tiles.
constexpr int attn_ws_masked_keys(int head_dim) { return head_dim > 128 ? 64 : kAttnWgmmaTmaKeys; }
// The launch runs those calls with the plan's shared memory, sized for attn_ws_keys' tile.
static_assert(attn_ws_masked_keys(192) <= attn_ws_keys(192) && attn_ws_masked_keys(256) <= attn_ws_keys(256));
// Keys a K/V tile of one call on a warp-specialized plan of `planned_keys`: the plan's, but attn_ws_keys' tile past
// head_dim 128 runs plain dense calls only, so a masked or packed varlen call takes attn_ws_masked_keys'.
constexpr int attn_ws_call_keys(int head_dim, int planned_keys, bool plain_dense) {
  return plain_dense || planned_keys != attn_ws_keys(head_dim) ? planned_keys : attn_ws_masked_keys(head_dim);
}
// Packed varlen batches on the warp-specialized kernel (TMA over the packed tensors; KERNELKIT_TUNE attn_varlen_ws=0
// gives them the two-warpgroup kernel by cp.async, or the mma.sync one past head_dim 128): its plain variants (a
// window, a soft-cap or ALiBi keep the cp.async kernel) at head_dim 64, 128 and 256; 192 has no varlen form (its
// compile time spared: the mma.sync kernel at 256 runs it). On the H100 (bf16, bench/op_baselines.py --only varlen
// --tuned): 4 sequences of 512 / 1024 / 2048 / 512 tokens, h32/8 d128 causal, 121.2 us against 196.5 by cp.async
// (SDPA cuDNN a sequence at a time: 148.7); 32 sequences of 128, 57.5 against 65.0
// (bench/results/h100/op_baselines_headdims_varlen.md).
constexpr bool attn_ws_varlen(int head_dim) { return head_dim != 192; }
// Query rows a block of the warp-specialized kernel: kAttnWgmmaRows (two consumer warpgroups of 64 rows), and at
// head_dim 64 three consumers (kAttnWsMaxRows, FlashAttention-3's tile there; KERNELKIT_TUNE attn_bm=128 forces two):
// a 64-column head's MMAs a step are half of head_dim 128's at the same softmax work, so two consumers cannot keep
// the tensor cores busy under each other's softmax; three share each step's MMA time among three softmaxes.
// Registers: 160 a consumer thread (S 64, P 32, O 32 at 128-key tiles) and 32 for the producer, the whole register
// file. On the H100 (bf16, attn_lab): b2 h16 s4096 d64 causal 175.5 us against 193.2 with two, b8 s1024 100.9
// against 110.1, b4 s4096 582.2 against 709.9; in op_baselines' run with cuDNN 180.5 against 195.2 (cuDNN 180.9).
constexpr int kAttnWsMaxRows = 192;

// ---- Decode

// Memory-bound. Blocks of kDecodeThreads threads own `rows_per_block` (1, 4 or 8) query rows (the query heads x tokens
// of one KV head's group); each of their warps walks its own K/V tiles of kDecodeWarpTileElems / head_dim keys (2 KB
// of K and 2 KB of V in f16/bf16) through a private pipeline of `stages` buffers (stages - 1 tiles in flight while
// one is computed), so a block step covers block_n = kDecodeTileElems / head_dim keys. Stages (plan_decode): 2 for the
// CUDA-core kernel (32 KB a block; 4 stages measured no faster on the H200, h32/8 s4096 d128: 19.0 vs 18.8 us at b1,
// 255 vs 252 us at b32), 2 to kDecodeDeepStages for the tensor-core one. The keys of a sequence are split over `splits`
// blocks when (batch x kv_heads x row groups) alone would not fill the GPU.
constexpr int kDecodeThreads = 128;
constexpr int kDecodeMaxRows = 8;  // rows per block: the register cost is 16 fp32 per row per lane (q and O)
constexpr int kDecodeTileElems = 4096;
constexpr int kDecodeWarpTileElems = kDecodeTileElems / (kDecodeThreads / 32);
constexpr int kDecodeMaxSplits = 128;  // bounds the merge's loop over splits and the partials' workspace
// The deepest ring the planner picks (the tensor-core kernel on a one-wave grid, the CUDA-core kernel over e4m3
// caches), and the deepest KERNELKIT_TUNE decode_stages takes: more bytes in flight an SM where one block an SM is
// all the grid has (6 stages of the tensor-core kernel's 8 KB warp tiles: 192 KB a block, Hopper only).
constexpr int kDecodeDeepStages = 4;
constexpr int kDecodeMaxStages = 6;  // cp_async_wait_dynamic counts up to 7 pending groups
// The tensor-core variant, the default for head_dim 64 and 128 (KERNELKIT_TUNE decode_tc=0 forces the CUDA-core
// kernel): the same blocks, splits and merges, but a warp's tile is kDecodeTcTileKeys keys (one 16-key MMA step for
// P V) and its rows are one 16-row MMA tile (the block's 1 to 8 rows, the rest zeros): S = Q K^T and O += P V on
// mma.sync instead of 8-dim dot products and shuffles per key. 16 keys x 128 dims of K and V: 8 KB a stage, 64 KB a
// block at 2 stages (opt-in). On the H200 (h32/8 s4096 d128): b1 10.5 us against the CUDA-core kernel's 17.4 (cuDNN
// 11.9), b32 131.9 against 251.3 us (4.07 TB/s of K/V; cuDNN 123.7).
constexpr int kDecodeTcTileKeys = 16;
// __launch_bounds__'s resident blocks of decode_tc_kernel, a register cap: at 128 threads at most 255 registers (sm_90
// head_dim 128: 162-181, no spill). Where shared memory holds more blocks (2 stages at head_dim 128 on Hopper, only
// under KERNELKIT_TUNE; head_dim 64 needs 111-124 registers) the registers then hold 2; a cap of 3 (170 registers)
// spilled 8-16 bytes in the f16-MMA e4m3 kernels, the default for bf16 q.
constexpr int kDecodeTcMinBlocks = 2;
// e4m3 caches (KvCache k_scale / v_scale): the tensor-core kernel's tiles keep the bytes of a 16-bit tile, so twice the
// keys (one softmax step over 32 keys, two P V k-steps, the same stages and bytes in flight); the CUDA-core kernel's
// keep their keys (its scores are registers a key and row), at half the bytes in twice the stages (kDecodeDeepStages).
// H100, b16 h32/8 s8192 d128 bf16 (4 stages, one block an SM, f16 MMAs): 95.9 us against the 16-bit cache's 174.4
// (1.82x; 2.8 against 3.1 TB/s; bench/results/h100/op_baselines_decodefp8.md). In 2 stages, 3 blocks an SM, Nsight
// Compute found 47-57% of issue slots busy, the integer pipe the busiest (the code conversions) and DRAM at 75%:
// between a tile's copy and its use a warp spends longer computing than a 16-bit tile takes, so the deeper ring
// (plan_decode) pays. Tiles of 16 keys in 4 stages (the same shared memory, each half the work) measured slower:
// 103.4 us there.
constexpr int kDecodeFp8TcTileKeys = 2 * kDecodeTcTileKeys;

}  // namespace kernelkit

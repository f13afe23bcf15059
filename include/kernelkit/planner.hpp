// The launch planner: pure functions from (profile, op, shape, dtype) to a launch configuration, as data.
// No CUDA calls here: every plan can be printed and unit-tested on a CPU for every profile.
#pragma once

#include <cstdint>
#include <string>

#include "kernelkit/op_info.hpp"
#include "kernelkit/profile.hpp"
#include "kernelkit/status.hpp"

namespace kernelkit {

// Row norms give each thread about this many vectors of its row: enough work per thread to amortize the reduction,
// few enough that a row is spread over many threads. Latency is hidden by the staged copies, not by registers.
constexpr int kRowVecsPerThread = 4;
// Row-norm kernels are compiled with __launch_bounds__(kRowNormMaxThreads), which caps them at kRowNormRegisters
// registers per thread (65536 / 1024); the planner counts blocks per SM with that register budget.
constexpr int kRowNormMaxThreads = 1024;
constexpr int kRowNormRegisters = 64;
// Element-wise kernels (activations, RoPE): 256-thread blocks, __launch_bounds__(256, 4) (so at most 64 registers), a
// 2-D grid (block.x threads and grid.x blocks across a row's vectors, rows along y), each thread loading one vector of
// kElementwiseVecsPerThread rows per step so that many loads are in flight.
constexpr int kElementwiseThreads = 256;
constexpr int kElementwiseMinBlocks = 4;
constexpr int kElementwiseVecsPerThread = 4;
// Weight-only linear (GEMV) kernels, for m below kLinearTcMinM: a block is k_warps warps (the split-K lives inside the
// block: each warp takes every k_warps-th 16-byte chunk of the block's weight rows and the warps add their partial
// sums through shared memory, so no workspace and no second pass). __launch_bounds__(kLinearMaxThreads,
// kLinearMinBlocks) caps them at kLinearRegisters registers (65536 / (256 * 2)). kLinearMaxTokens tokens share each
// weight load.
constexpr int kLinearMaxThreads = 256;
constexpr int kLinearMinBlocks = 2;
constexpr int kLinearRegisters = 128;
constexpr int kLinearMaxTokens = 2;
// The resident warps per SM the linear planner aims for (split-K grows until the grid has this many warps per SM), at
// most what the register cap leaves resident (16 warps at 128 registers). Each thread keeps 2 x rows-per-block 16-byte
// weight loads in flight, so 16 warps hold 32-64 KB per SM in flight: above what HBM3e needs by Little's law
// (~4.3 TB/s x ~1 us / 132 SMs ~ 33 KB).
constexpr int kLinearWarpsPerSm = 32;
// The GEMV's weights: register prefetch, or a cp.async ring of up to kLinearGemvStages slots of 4 rows x 16 bytes per
// thread (within the 48 KB default shared memory: 3 for a 256-thread block; KERNELKIT_TUNE=gemv_stages=N forces
// either). The ring pays a prologue of stages - 1 slots before its first math, so it wins only on long per-thread
// loops: on the H200 (bf16, m1, cold L2, commit 0e9051e) 3 stages took W8A16 n28672 k8192 (8 chunks a thread) from
// 70.0 to 61.2 us (90% of the copy ceiling) and lost at 4 to 6 chunks a thread (W8A16 n11008 k4096 17.4 -> 17.3,
// n4096 k11008 17.0 -> 18.5; every INT4 row, 12.0 -> 14.6, 11.9 -> 15.3, 46.5 -> 53.1). Hence the ring from
// kLinearGemvRingMinVecs chunks a thread on sm_80+ (below sm_80 the ring is a synchronous copy: never the default).
constexpr int kLinearGemvRingMinVecs = 8;
constexpr int kLinearGemvRingStages = 3;
constexpr int kLinearGemvStages = 4;
// From kLinearTcMinM tokens up (any m) the weight-only linear runs on tensor cores instead (the GEMV re-reads x from L1
// for every token and 16 bytes of weights: 81 us at m8 n11008 k4096 on the H200, where the tensor-core tiles took 52 us
// at m16). Blocks of kLinearTcThreads threads own a (16 or kLinearTcTileM tokens) x kLinearTcTileN output tile: one
// m-tile of 16 rows up to 16 tokens, four beyond. k goes in steps of kLinearTcTileK through kLinearTcStages cp.async
// buffers (3 x (64 x 64 x 2 B of x + 128 x 64 B of INT8 weights) = 48 KB at 64 tokens, 36 KB with INT4: within the
// default shared memory of every profile). When the tiles do not fill the GPU, k is split over grid.z (at most
// kLinearTcMaxSplits parts, fp32 partial sums in a stream-ordered workspace, a second kernel adds them).
constexpr int kLinearTcMinM = 3;
constexpr int kLinearTcThreads = 128;
constexpr int kLinearTcTileM = 64;
constexpr int kLinearTcTileN = 128;
constexpr int kLinearTcTileK = 64;
constexpr int kLinearTcStages = 3;
constexpr int kLinearTcMaxSplits = 16;
// W8A8 linear (INT8 tensor cores): blocks of kW8A8Threads threads (8 warps, 2 x 4) own a kW8A8TileM x kW8A8TileN
// output tile and walk k in steps of kW8A8TileK int8 (64-byte rows) through kW8A8Stages cp.async buffers:
// 3 x (128 + 128) x 64 B = 48 KB, the default dynamic shared memory of every profile (T4 included).
constexpr int kW8A8Threads = 256;
constexpr int kW8A8TileM = 128;
constexpr int kW8A8TileN = 128;
constexpr int kW8A8TileK = 64;
constexpr int kW8A8Stages = 3;
constexpr int64_t kW8A8MaxK = 131072;  // |sum| <= 127^2 k stays below 2^31: the int32 accumulation is exact

struct LaunchPlan {
  OpId op{};
  DType dtype{};
  std::string profile;   // profile key the plan was made for
  int vec = 1;           // elements per vector access (16 bytes when hidden and alignment allow: the gcd rule)
  int threads_per_row = 0;  // block.x: threads cooperating on one row
  int rows_per_block = 0;   // block.y
  int block_threads = 0;    // block.x * block.y
  int64_t grid = 0;         // blocks; about one wave of resident blocks whenever the work fills more than one
  int64_t grid_x = 1;       // grid.x (grid.y = grid / grid_x): element-wise plans put blocks across a row there;
                            // row reductions are 1-D (grid_x = grid)
  int vecs_per_thread = 0;  // vectors of a row each thread handles
  bool cached = false;      // rows staged through shared memory (two stages, next row prefetched); else re-read
  int64_t stage_offset = 0; // bytes of reduction scratch before the stages
  int64_t smem_bytes = 0;   // dynamic shared memory per block
  bool smem_optin = false;  // needs cudaFuncSetAttribute (smem above the 48 KB default)
  int sms = 0;              // SM count of the profile the grid is sized for
  int blocks_per_sm = 0;    // resident blocks per SM by threads / smem / block / register limits
  double occupancy = 0;     // expected warps resident / max warps per SM
  // Weight-only linear plans (block = 32 x k_warps, grid = grid_x blocks over n x grid / grid_x over the token tiles):
  int out_rows = 0;  // output features (weight rows) per block
  int tokens = 0;    // tokens per block: each weight load is used for all of them
  int k_warps = 0;   // warps of a block splitting k (the split-K); block.y
  int stages = 0;    // GEMV: depth of each thread's cp.async ring of weight chunks (0: register prefetch, no cp.async)
  // Tensor-core weight-only linear: k split over grid.z (grid counts all of them), fp32 partials in a workspace.
  int k_splits = 1;
  int64_t k_tiles_per_split = 0;
  int64_t workspace_bytes = 0;
  std::string to_string() const;
};

Status plan_op(const DeviceProfile& profile, OpId op, const OpShape& shape, DType dtype, LaunchPlan* out);

// KERNELKIT_TUNE="key=value[,key=value...]" forces planner choices that have a compiled alternative, so that one
// benchmark run can time both (bench/op_baselines.py --tuned): attn_wgmma (0: the mma.sync prefill, 1: the sm_90a
// one fed by cp.async, 2: by TMA, see kAttnWgmmaRows), attn_bn (keys a prefill K/V tile: 64 or 128 for the wgmma
// prefill, 32 or 64 for the mma.sync one, see kAttnWideKeys), and for the mma.sync prefill attn_mw (1 or 2: 16-row
// MMA tiles a warp owns) and attn_stages (1 to kAttnMaxStages); decode_stages (2 to kDecodeMaxStages), decode_splits
// (at most that many splits of the keys, 1 to kDecodeMaxSplits), decode_tc (0 or 1: the CUDA-core or the tensor-core
// decode, see kDecodeTcTileKeys), gemv_stages (0 = register prefetch, or 2 to kLinearGemvStages, sm_80+ code; a
// synchronous copy below), gemv_kwarps (warps splitting k in a GEMV block, 1 to kLinearMaxThreads / 32). Read at
// every plan; a malformed variable, or a value no kernel or no shared memory allows, fails the plan with
// invalid_argument / unsupported naming it. Not for production use: the defaults are the measured choices.

// A tensor-core weight-only plan re-split for the resident blocks per SM the runtime reports for the compiled kernel
// (its registers may hold fewer than shared memory alone): m x n outputs, k inputs.
void refine_linear_tc_splits(int resident_blocks, int64_t m, int64_t n, int64_t k, LaunchPlan* plan);

// The planner counts registers at the kernels' cap (kRowNormRegisters); the compiled kernel may use fewer. Given the
// runtime's resident-block count for the planned block (cudaOccupancyMaxActiveBlocksPerMultiprocessor), re-size the
// grid to that many blocks per SM, never above the profile's thread / shared-memory / block limits.
void refine_plan_occupancy(const DeviceProfile& profile, int resident_blocks, int64_t rows, LaunchPlan* plan);

// Tiles of the compute-bound families, from the seeds' per-arch table (attention 128x64 / 128x64 / 64x32 and
// matmul 128x128 / 128x128 / 64x64 on H100 / A100 / T4), shrunk until they fit the profile's shared memory. Attention
// from sm_80 on gives each warp two 16-row MMA tiles up to head_dim 128 (4 warps for 128 rows; 32-key tiles at 128,
// where 64 spill), one above (8 warps); T4 one (4 warps for 64 rows).
struct TilePlan {
  int block_m = 0, block_n = 0, block_k = 0;
  int stages = 0;  // K/V (or A/B) pipeline depth
  int warps = 0;
  int64_t smem_bytes = 0;
  bool smem_optin = false;
  bool wgmma = false;  // attention: the sm_90a warpgroup-MMA kernel (kAttnWgmmaRows) instead of the mma.sync one
  bool tma = false;    // ... with Q, K and V through TMA (attn_wgmma=2) instead of cp.async
  std::string to_string() const;
};
// Prefill attention's K/V buffers: the planner's 2 (1 where two do not fit), or a ring of kAttnMaxStages through
// KERNELKIT_TUNE attn_stages (at head_dim 128 a 32-key tile is ~0.5 us of MMA per block on an H200 SM, about one
// global-memory round trip, so 2 buffers might leave the loads exposed; measured, bf16 commit 0e9051e, they do not:
// 3 buffers took b1 h32 s4096 causal from 781.6 to 769.6 us, b4 s2048 from 1250.1 to 1242.1, head_dim 64 from 429.7
// to 433.0: within 1.5%, not worth the ring's 28-byte spill on sm_90 and the T4's whole 64 KB).
constexpr int kAttnMaxStages = 3;
// Keys a prefill K/V tile at head_dim 128 with two row tiles a warp: FlashAttention-2's 128x64 tile on sm_90 profiles,
// 32 keys elsewhere (KERNELKIT_TUNE attn_bn=32 / 64 forces either). The 64-key tile compiles with 255 registers and
// 4-16 bytes of spill outside the loop on sm_90 (12-32 on sm_80; ~260 bytes before 5d66259 cut the loop's integer
// work) and halves each key's share of the per-tile work (barriers, row max and sum shuffles, the O rescale, the copy
// issue) at 96 KB of shared memory a block (2 blocks an SM, as with 32 keys). On the H200 (bf16, commit df946b8) it
// took b1 h32 s4096 causal from 628.3 to 591.9 us and b4 s2048 from 1017.9 to 948.4 (head_dim 64, where it is
// already the tile: 362.8 vs 361.0). Not measured on an A100, whose sm_80 build spills more: it keeps 32.
constexpr int kAttnWideKeys = 64;
// The sm_90a prefill, the default on sm_90 profiles at head_dim 64 and 128 where it can run (a build with sm_90a code,
// a compute capability 9.0 GPU; plan_tile's sm90a_code): blocks of two warpgroups, each owning kAttnWgmmaRows / 2
// query rows (wgmma's M = 64), S = Q K^T and O += P V on wgmma.mma_async from 128-byte-swizzled shared tiles
// (src/ops/attention/flash_prefill_sm90a.cu), K/V tiles in two buffers. Fed by TMA (KERNELKIT_TUNE attn_wgmma=2, the
// default: one thread issues a tile's boxes, mbarriers say when they landed) with kAttnWgmmaTmaKeys-key tiles, or by
// every thread's cp.async (attn_wgmma=1) with kAttnWgmmaKeys-key tiles; attn_bn=64 / 128 forces either tile (128:
// S on m64n128k16, 161 KB of shared memory at head_dim 128, one block an SM). Packed varlen batches, calls without
// keys and strides a TMA descriptor cannot express take the cp.async loads (a varlen batch's tail rows must be
// zeros, not the next sequence's). attn_wgmma=0 forces the mma.sync kernel.
// On the H200 (bf16, commit 2da9a78, one run, CUDA-graph medians): b1 h32 s4096 d128 causal: TMA 128 keys 417.5 us
// (329 TFLOP/s), TMA 64 keys 484.0, cp.async 64 keys 548.8, the mma.sync kernel 591.7; b4 s2048 d128: 728.7 / 772.0 /
// 874.6 / 953.0; head_dim 64 causal: 317.2 / 327.4 / 358.9 / 358.3. SDPA flash 506.9 / 789.9 / 295.8, cuDNN 258.7 /
// 421.4 / 182.0 (docs/attention-sm90.md).
constexpr int kAttnWgmmaRows = 128;
constexpr int kAttnWgmmaKeys = 64;
constexpr int kAttnWgmmaTmaKeys = 128;
enum class TileFamily : uint8_t { attention, matmul };
// sm90a_code: whether the sm_90a kernels can run where the plan is used (cuda::sm90a_available for the device); false
// plans the mma.sync prefill on sm_90 profiles and refuses KERNELKIT_TUNE attn_wgmma.
Status plan_tile(const DeviceProfile& profile, TileFamily family, DType dtype, int head_dim, TilePlan* out,
                 bool sm90a_code = true);

// Decode attention (memory-bound; first the CUDA-core kernel, then the tensor-core one, the default): blocks of
// kDecodeThreads threads own `rows_per_block` (1, 4 or 8) query rows (the query heads x tokens of one KV head's
// group); each of their warps walks its own K/V tiles of kDecodeWarpTileElems / head_dim keys (2 KB of K and 2 KB
// of V in f16/bf16) through a private pipeline of `stages` buffers (stages - 1 tiles in flight while one is
// computed), so a block step covers block_n = kDecodeTileElems / head_dim keys. Stages: 2 (32 KB a block); up to
// kDecodeMaxStages (64 KB, opt-in) through KERNELKIT_TUNE, which on the H200 (bf16 h32/8 s4096 d128, commit
// 7a86326) measured no faster: 19.0 vs 18.8 us at b1, 255 vs 252 us at b32 (4 vs 2 stages). The keys of a sequence
// are split over `splits` blocks when (batch x kv_heads x row groups) alone would not fill the GPU.
constexpr int kDecodeThreads = 128;
constexpr int kDecodeMaxRows = 8;  // rows per block: the register cost is 16 fp32 per row per lane (q and O)
constexpr int kDecodeTileElems = 4096;
constexpr int kDecodeWarpTileElems = kDecodeTileElems / (kDecodeThreads / 32);
constexpr int kDecodeMaxSplits = 128;  // bounds the merge's loop over splits and the partials' workspace
constexpr int kDecodeMaxStages = 4;    // cp_async_wait_dynamic counts up to 3 pending groups
// The tensor-core variant, the default for head_dim 64 and 128 (KERNELKIT_TUNE decode_tc=0 forces the CUDA-core
// kernel): the same blocks, splits and merges, but a warp's tile is kDecodeTcTileKeys keys (one 16-key MMA step for
// P V) and its rows are one 16-row MMA tile (the block's 1 to 8 rows, the rest zeros): S = Q K^T and O += P V on
// mma.sync instead of 8-dim dot products and shuffles per key. 16 keys x 128 dims of K and V: 8 KB a stage, 64 KB a
// block at 2 stages (opt-in). On the H200 (bf16 h32/8 s4096 d128, cold L2, commit 0e9051e): b1 10.5 us against the
// CUDA-core kernel's 17.4 (cuDNN 11.9), b32 131.9 against 251.3 us (4.07 TB/s of K/V; cuDNN 123.7).
constexpr int kDecodeTcTileKeys = 16;
struct DecodePlan {
  bool tensor_cores = false;  // the tensor-core variant (see kDecodeTcTileKeys)
  int block_n = 0;           // keys per block step (its warps' tiles together)
  int rows_per_block = 0;    // 1, 4 or 8: the smallest that holds the rows of one KV head, else 8
  int64_t row_groups = 0;    // blocks along the query rows of one KV head
  int splits = 0;            // blocks along the keys of one sequence
  int64_t chunk = 0;         // keys per split (a multiple of block_n)
  int64_t grid = 0;          // splits x batch x kv_heads x row_groups
  int stages = 0;            // K/V buffers per warp (2 to kDecodeMaxStages)
  int64_t smem_bytes = 0;    // dynamic shared memory of the kernel (the stages, reused for the warps' merge)
  bool smem_optin = false;   // above the profile's 48 KB default
  int blocks_per_sm = 0;
  int64_t workspace_bytes = 0;  // fp32 partials (o and lse) when splits > 1
  std::string to_string() const;
};
// `rows` = query rows per KV head (heads / kv_heads x s_q), `rows_all` = every output row (batch x s_q x heads, sizes
// the workspace), `capacity` = the most keys a sequence can hold. `resident_blocks` > 0: the blocks per SM the
// compiled kernel really gets (the occupancy API; its registers), which caps shared memory's estimate.
Status plan_decode(const DeviceProfile& profile, int head_dim, int64_t batch, int64_t kv_heads, int64_t rows,
                   int64_t rows_all, int64_t capacity, DecodePlan* out, int resident_blocks = 0);

// Blocks of `threads` threads using `smem` bytes and `regs` registers per thread that fit on one SM of the profile.
int blocks_per_sm(const DeviceProfile& profile, int threads, int64_t smem, int regs);

}  // namespace kernelkit

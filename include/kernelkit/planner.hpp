// The launch planner: pure functions from (profile, op, shape, dtype) to a launch configuration, as data.
// No CUDA calls here: every plan can be printed and unit-tested on a CPU for every profile. The rules and their
// constants live with each op family (src/ops/<family>/*_plan.*; the shared ones in src/runtime/plan_rules.hpp).
//
// KERNELKIT_TUNE="key=value[,key=value...]" forces planner choices that have a compiled alternative, so that one
// benchmark run can time them side by side (bench/op_baselines.py --tuned; docs/benchmarking.md lists the keys).
// Read at every plan; a malformed variable, or a value no kernel or no shared memory allows, fails the plan with
// invalid_argument / unsupported naming it. Not for production use: the defaults are the measured choices.
#pragma once

#include <cstdint>
#include <string>

#include "kernelkit/op_info.hpp"
#include "kernelkit/profile.hpp"
#include "kernelkit/status.hpp"

namespace kernelkit {

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
  int held = 0;             // norms: vectors of a row each thread holds in registers (0: staged or re-read)
  int waves = 1;            // row reductions and element-wise ops: waves of resident blocks in the grid, each block
                            // looping over row groups; 0: one block a row group (no loop)
  int min_blocks = 1;       // row norms: the kernel's __launch_bounds__ minimum of 1024-thread blocks an SM (2: at
                            // most 32 registers a thread: held bf16 rms_norm rows unless KERNELKIT_TUNE rows_cap=0)
  int lean = 0;  // rows of whole warps held at 2 vectors a thread, one a block (rms_norm, fused_add_rms_norm,
                 // layer_norm, softmax): the lean kernels; for the norms their __launch_bounds__ minimum of 512-thread
                 // blocks (1 uncapped, 3: 40 registers, layer_norm's default; KERNELKIT_TUNE rows_lean)
  bool one_pass = false;    // held norm + quantization rows: y = (x w) rstd, and a dynamic scale's max |y| taken from
                            // the sum of squares' pass, one reduction a row (KERNELKIT_TUNE rows_onepass=1)
  int64_t stage_offset = 0; // bytes of reduction scratch before the stages
  int64_t smem_bytes = 0;   // dynamic shared memory per block
  bool smem_optin = false;  // needs cudaFuncSetAttribute (smem above the 48 KB default)
  int sms = 0;              // SM count of the profile the grid is sized for
  int blocks_per_sm = 0;    // resident blocks per SM by threads / smem / block / register limits
  double occupancy = 0;     // expected warps resident / max warps per SM
  // Weight-only linear plans (block = 32 x k_warps, grid = grid_x blocks over n x grid / grid_x over the token tiles):
  int out_rows = 0;  // output features (weight rows) per block
  int tokens = 0;    // tokens per block: each weight load is used for all of them (8, 16 or 32 with k_warps > 0: the
                     // tensor-core GEMV of KERNELKIT_TUNE gemv_mma)
  int k_warps = 0;   // warps of a block splitting k (the split-K); block.y
  int stages = 0;    // GEMV: depth of each thread's cp.async ring of weight chunks (0: register prefetch, no cp.async);
                     // tensor-core GEMV: the regions a warp's batch holds
  bool programmatic = false;  // GEMVs on sm_90: launched as the previous kernel's programmatic dependent, so their
                              // first weights stream while it finishes (they wait for it before reading x)
  // Tensor-core weight-only linear: k split over grid.z (grid counts all of them), fp32 partials in a workspace.
  int k_splits = 1;
  int64_t k_tiles_per_split = 0;
  int64_t workspace_bytes = 0;
  bool library = false;  // a library (cuBLASLt) chooses the kernel: none of the fields above apply
  std::string to_string() const;
};

Status plan_op(const DeviceProfile& profile, OpId op, const OpShape& shape, DType dtype, LaunchPlan* out);

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
  bool tma = false;    // ... with Q, K and V through TMA (attn_wgmma=2 / 3) instead of cp.async
  bool warp_specialized = false;  // ... and a producer warpgroup with two consumers (attn_wgmma=3, the default)
  int pv_n = 0;  // ... whose P V takes head_dim columns an MMA (m64n128k16 at head_dim 128) or 64 (attn_pv_n=64)
  int rescale_slack = 0;  // ... and O rescaled only where a row's max grew by more than 2^slack (attn_slack)
  bool varlen_ws = false;  // ... and packed varlen batches through it too (the default where it has the form;
                           // attn_varlen_ws=0: the cp.async kernel)
  std::string to_string() const;
};
enum class TileFamily : uint8_t { attention, matmul };
// sm90a_code: whether the sm_90a kernels can run where the plan is used (cuda::sm90a_available for the device); false
// plans the mma.sync prefill on sm_90 profiles and refuses KERNELKIT_TUNE attn_wgmma.
Status plan_tile(const DeviceProfile& profile, TileFamily family, DType dtype, int head_dim, TilePlan* out,
                 bool sm90a_code = true);

// Decode attention: the blocks, the split of each sequence's keys over blocks, and the K/V pipeline depth.
struct DecodePlan {
  bool tensor_cores = false;  // the tensor-core variant (see kDecodeTcTileKeys)
  int block_n = 0;           // keys per block step (its warps' tiles together)
  int rows_per_block = 0;    // 1, 4 or 8: the smallest that holds the rows of one KV head, else 8
  int64_t row_groups = 0;    // blocks along the query rows of one KV head
  int splits = 0;            // blocks along the keys of one sequence
  int64_t chunk = 0;         // keys per split (a multiple of block_n)
  int64_t grid = 0;          // splits x batch x kv_heads x row_groups
  int stages = 0;            // K/V buffers per warp (2 to kDecodeMaxStages)
  bool f16_mma = false;      // e4m3 cache, tensor cores, bf16 q: f16 MMA operands (decode_f16mma=0: bf16 ones)
  bool keys_on_m = false;    // KERNELKIT_TUNE decode_kt=1, e4m3 cache, tensor cores: S^T = K Q^T (decode_kt_kernel)
  bool rotate = false;       // KERNELKIT_TUNE decode_rotate=1: each sequence's blocks start at a tile of its own
  int64_t smem_bytes = 0;    // dynamic shared memory of the kernel (the stages, reused for the warps' merge)
  bool smem_optin = false;   // above the profile's 48 KB default
  int blocks_per_sm = 0;
  int64_t workspace_bytes = 0;  // fp32 partials (o and lse) when splits > 1
  std::string to_string() const;
};
// `rows` = query rows per KV head (heads / kv_heads x s_q), `rows_all` = every output row (batch x s_q x heads, sizes
// the workspace), `capacity` = the most keys a sequence can hold. `resident_blocks` > 0: the blocks per SM the
// compiled kernel really gets (the occupancy API; its registers), which caps shared memory's estimate. `cache_dtype`:
// the K/V cache's element type, f16 / bf16 or f8e4m3 (an e4m3 cache: tiles of the same bytes, so the tensor-core
// kernel's hold twice the keys; the CUDA-core kernel's keep their keys at half the bytes, in 4 stages instead of 2).
Status plan_decode(const DeviceProfile& profile, int head_dim, int64_t batch, int64_t kv_heads, int64_t rows,
                   int64_t rows_all, int64_t capacity, DecodePlan* out, int resident_blocks = 0,
                   DType cache_dtype = DType::f16);

// Blocks of `threads` threads using `smem` bytes and `regs` registers per thread that fit on one SM of the profile.
int blocks_per_sm(const DeviceProfile& profile, int threads, int64_t smem, int regs);

}  // namespace kernelkit

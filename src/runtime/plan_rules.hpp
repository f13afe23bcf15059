// The planner's shared rules and helpers (src/runtime/planner.cpp): the row-reduction and element-wise work splits
// that several families plan with, the grid limits, KERNELKIT_TUNE, and the split of a block's sequential steps. Each
// family's own rules live in its folder (src/ops/<family>/*_plan.*).
#pragma once

#include <cstdint>
#include <string_view>

#include "kernelkit/planner.hpp"

namespace kernelkit {

// Row reductions (norms, softmax, the row quantizers) give each thread about this many vectors of its row: enough
// work per thread to amortize the reduction, few enough that a row is spread over many threads. Latency is hidden by
// the staged copies, not by registers.
constexpr int kRowVecsPerThread = 4;
// Norms whose plan holds rows in registers hold at most this many vectors a thread: x and its residual are loaded at
// once, one round trip to memory a row, as Liger-Kernel's one-row-a-program Triton kernels do. By default the RMS
// norms whose rows take at most kRowHeldMaxThreads threads so (8K bf16 elements) are held (H100, bf16, one block a
// row group: rms_norm 16384 x 5120 116 us held against 128 staged, fused_add 229 against 252; 896 threads a row,
// 4096 x 14336, lost: 107 against 85); the layer norms' held kernel (two reductions, 52 registers) measured slower
// than staging everywhere (65536 x 4096: 432 against 361 us).
constexpr int kRowHeldVecs = 2;
constexpr int kRowHeldMaxThreads = 512;
// Row groups at least this many waves of resident blocks take one block a group: the block scheduler starts the next
// block wherever one finishes, where a wave of blocks looping over the groups alternates each block between loading
// and reducing (H100, bf16, 65536 x 4096: rms_norm 358 against 400 us, layer_norm 361 / 427, softmax 360 / 395,
// fused_add 719 / 752); over about one wave (2048 x 4096 staged: 1.9 waves) the loop was 2-4% ahead.
constexpr int kRowStreamWaves = 4;
// Row-reduction kernels are compiled with __launch_bounds__(kRowNormMaxThreads), which caps them at kRowNormRegisters
// registers per thread (65536 / 1024); the planner counts blocks per SM with that register budget.
constexpr int kRowNormMaxThreads = 1024;
constexpr int kRowNormRegisters = 64;
// A row reduction's value is at most this many floats (softmax's max and sum). Rows that span warps pass one
// value a warp through two alternating halves of shared memory (src/kernels/common/reduce.cuh): the bytes of that
// scratch for `rows` rows of `group` threads each, 16-byte aligned so that staged rows can follow it.
constexpr int kRowReduceValueFloats = 2;
constexpr int64_t row_reduce_scratch_bytes(int rows, int group) {
  const int64_t warps = group > 32 ? group / 32 : 0;
  return (2 * kRowReduceValueFloats * rows * warps * 4 + 15) / 16 * 16;
}
// Element-wise kernels (activations, RoPE): 256-thread blocks, __launch_bounds__(256, 4) (so at most 64 registers), a
// 2-D grid (block.x threads and grid.x blocks across a row's vectors, rows along y), each thread loading one vector of
// kElementwiseVecsPerThread rows per step so that many loads are in flight.
constexpr int kElementwiseThreads = 256;
constexpr int kElementwiseMinBlocks = 4;
constexpr int kElementwiseVecsPerThread = 4;
// The activations' grid: 0 = one block a row group (up to the grid's 65535 rows of blocks), each thread one vector of
// one row, rather than waves of blocks walking down the rows. H100, bf16 silu_and_mul, one process: 65536 x 4096 533
// against 560 us at 4 waves (torch.compile 529), 16384 x 8192 269 against 279 (266), 2 x 4096 x 3072 54.6 against
// 56.0, 16 x 4096 1.68 against 1.80; 2048 x 4096 the same.
constexpr int kActivationWaves = 0;
// The activations' one-row form (KERNELKIT_TUNE ew_one_row=1, off by default until timed): where the grid has a block
// for every row group, each thread loads one vector of one row per input, so the looping kernel's unrolled second row
// only costs registers (52-64 at 16-bit VEC 8 hold 4 blocks an SM). The one-row kernel has no loop and is capped at
// 32 registers, kElementwiseOneRowMinBlocks blocks an SM: twice the threads, and so twice the bytes in flight an SM
// (32 KB -> 64 KB at 16-bit gated rows), which a 4.8 TB/s part needs more than a 3.35 TB/s one.
constexpr int kElementwiseOneRowMinBlocks = 8;
constexpr int kActivationOneRow = 0;

namespace plan {

constexpr int64_t kMaxGridX = 2147483647, kMaxGridY = 65535;  // CUDA's grid limits (x, y)
constexpr int kWarp = 32;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int next_pow2(int64_t v);

// KERNELKIT_TUNE: *value becomes the variable's setting for `key` when it names one (which must lie in [lo, hi]), and
// stays the planner's choice otherwise. The whole variable is parsed on each call, so a malformed one fails every plan
// that reads it instead of being ignored.
Status tune_value(std::string_view key, int lo, int hi, int* value);

// Row reductions: one row (or a few short ones) a block of threads, vectors by the gcd rule, rows staged through
// shared memory in two stages when they fit (the norm family only), about one wave of resident blocks looping over
// the rows.
Status plan_rows(const DeviceProfile& profile, OpId op, const OpShape& shape, DType dtype, LaunchPlan* plan);
// Element-wise ops: threads across a row's vectors, rows along y, about `waves` waves of resident blocks, or (waves 0)
// one block a row group (KERNELKIT_TUNE ew_waves sets them).
// one_row_form: the caller's kernel has the one-row form (kActivationOneRow), planned as one vector a thread.
Status plan_elementwise(const DeviceProfile& profile, const OpShape& shape, DType dtype, LaunchPlan* plan,
                        int waves = 1, bool one_row_form = false);
// A 1-D grid over `rows` / rows_per_block groups: plan->waves waves of resident blocks (a multiple of the SM count)
// looping over the groups, fewer when the rows do not fill them, or (waves 0) one block a group; sets sms, grid,
// grid_x and occupancy.
void size_grid(const DeviceProfile& profile, int64_t rows, LaunchPlan* plan);
// `blocks` blocks of `steps` sequential steps each, `wave` of them resident at once: the steps a part gets when each
// block's steps are split into the count of parts (at most max_parts) that minimises waves x (steps a part +
// `overhead`) (see planner.cpp). past_one_wave: weigh splits also when the blocks alone fill a wave.
int64_t split_steps(int64_t blocks, int64_t wave, int64_t steps, int64_t max_parts, int64_t overhead,
                    bool past_one_wave = false);

}  // namespace plan
}  // namespace kernelkit

// The quant family's launch constants (src/ops/quant/): what the planner (quant_plan.cpp) and the kernels
// (linear.cuh, linear_tc.cuh, w8a8_cuda.cu) agree on, with the measurements that chose them.
#pragma once

#include <cstdint>
#include <iterator>

#include "kernelkit/planner.hpp"

namespace kernelkit {

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
// loops. On the H200 (bf16, m1, cold L2), 3 stages against register prefetch: W8A16 n28672 k8192 (8 chunks a thread)
// 61.2 vs 70.0 us (90% of the copy ceiling); at 4 to 6 chunks a thread the ring loses (W8A16 n4096 k11008 18.5 vs
// 17.0, n11008 k4096 17.3 vs 17.4; INT4 14.6 vs 12.0, 15.3 vs 11.9, 53.1 vs 46.5). Hence the ring from
// kLinearGemvRingMinVecs chunks a thread on sm_80+ (below sm_80 the ring is a synchronous copy: never the default).
constexpr int kLinearGemvRingMinVecs = 8;
constexpr int kLinearGemvRingStages = 3;
constexpr int kLinearGemvStages = 4;
// The GEMVs (FMA and tensor-core) on sm_90: launched as the previous kernel's programmatic dependent (launch.cuh;
// KERNELKIT_TUNE gemv_pdl=0 launches them plainly). Their blocks let their own dependents launch first thing and
// issue their first weight loads before waiting for the grid before them (x may be its output), so back-to-back GEMVs,
// or a GEMV after a kernel that lets it launch early, start streaming weights while that kernel's last blocks finish.
// H100, W4A16 g128 bf16, CUDA-graph replays of back-to-back calls (us, plain / programmatic): m1 n13824 k5120 17.3 /
// 17.0, n28672 k8192 48.5 / 48.1, n5120 k13824 19.5 / 19.0; m16 25.5 / 25.0, 78.9 / 78.6, 29.7 / 29.3; m32 48.7 /
// 48.1, 137.3 / 136.6, 43.8 / 43.5.
constexpr bool kLinearGemvProgrammatic = true;
// The tensor-core GEMV (linear.cuh linear_gemv_mma_kernel): sums on mma.sync m16n8k16 (the weights as A, 16 rows a row
// tile; x as B, a token a column, 8-token tiles sharing each A fragment) instead of fp32 FMAs. INT4 weights always take
// it below kLinearTcMinM tokens (their layout is its fragments'); INT8 under KERNELKIT_TUNE gemv_mma=1 (an experiment,
// up to kLinearMmaGemvMaxTokens tokens). An FMA GEMV of INT4 spent about 155 instructions on a thread's 16 bytes of
// weights at m1 (sm_90 SASS: fp16 dequantization, conversion to fp32, an FMA a weight): 13 B/clk an SM at full issue,
// where HBM3e needs about 18 (61-63% of the copy ceiling on the H200; INT8, half the math a byte, 88-90%). The MMA GEMV
// spends about 78 (the dequantization to packed A pairs, one LOP3 and one packed subtract a pair). Each warp streams
// regions (64 INT4 or 32 INT8 values: one scale group, or two of 32) of its block's 16 rows, kLinearMmaGemvUnroll
// regions a batch, the next batch loaded while this one computes; an INT4 region of a row tile is 512 contiguous bytes,
// a 16-byte load a lane (H100, W4A16 g128 bf16, us, this layout against row-major INT4 read as two 8-byte loads a lane:
// m16 n13824 k5120 19.96 / 24.7, n28672 k8192 56.6 / 78.5, n5120 k13824 23.4 / 29.4; m1 n13824 k5120 17.15 against the
// FMA GEMV's 17.0, n28672 k8192 46.9 / 48.1, n5120 k13824 18.7 / 19.0).
constexpr int kLinearMmaGemvRows = 16;
constexpr int kLinearMmaGemvTokens = 8;  // an MMA's N: the plan's tokens are a multiple
constexpr int kLinearMmaGemvMaxTokens = 16;
constexpr int kLinearMmaGemvUnroll = 4;
// KERNELKIT_TUNE gemv_mma=2: the same GEMV up to kLinearMmaGemvWideTokens tokens (four 8-token tiles, m 17-32), two
// regions a batch: four tiles' x pairs and sums leave 128 registers room for two regions' weights, not four.
// gemv_mma=3: as 2, but two tiles (m 9-16) take batches of two regions, straight-line (below).
constexpr int kLinearMmaGemvWideTokens = 32;
constexpr int kLinearMmaGemvWideUnroll = 2;
// Row tiles (INT4 with groups of 64 or more): each warp takes 1, 2 or 4 row tiles of 16 (a block 16, 32 or 64 rows),
// so each region's x fragments, loaded once, serve that many MMAs' A tiles. At one row tile a warp reads 2 bytes of x
// through L1 for every byte of INT4 weights a token tile (m16: 4, m32: 8), and the GEMV's time grows with m
// accordingly (H100, m1 / m16 / m32 n13824 k5120: about 19 / 27 / 45 us). A batch then holds mma_gemv_unroll / row
// tiles regions (at least one), and row tiles x token tiles stay within kLinearMmaGemvMaxTiles (the accumulators: 4
// registers a tile pair). By default two row tiles at two token tiles (m 9-16), where the 32-row blocks number at
// least kLinearMmaGemvRowTileMinBlocksPerSm an SM; KERNELKIT_TUNE gemv_mma_mtiles=1, 2 or 4 forces a count. H100,
// bf16, bench/dev/ab-gemv (us, one / two row tiles, batches of one region at two): m16 n13824 k5120 26.0 / 23.4,
// n14336 k4096 22.7 / 19.7, n28672 k8192 80.6 / 76.1, n5120 k13824 (160 blocks) 28.4 / 28.8. At four token tiles
// (m 17-32) two row tiles need more than 128 registers (mma_gemv_min_blocks) and lose or tie: m32 n13824 k5120 48.7
// / 45.0 us (two / one), n28672 k8192 137.3 / 136.7. Four row tiles were slower at every shape (m16 27.4, 23.9, 81.6,
// 45.3: fewer blocks, and 64-120 bytes of spills), and neither count beat the FMA GEMV at m1.
constexpr int kLinearMmaGemvMaxRowTiles = 4;
constexpr int kLinearMmaGemvMaxTiles = 8;
constexpr int kLinearMmaGemvRowTileMinBlocksPerSm = 2;
// The __launch_bounds__ minimum of blocks of a tensor-core GEMV form: kLinearMinBlocks (kLinearRegisters a thread),
// but 1 for the forms of kLinearMmaGemvMaxTiles tiles (two row tiles x four token tiles, four x two): their
// accumulators, x pairs and weights do not fit 128 registers (ptxas spilled 64-96 bytes a thread there, and the
// symmetric m32 n28672 k8192 W4A16 GEMV took 175 us on the H100 against 125 for the zero-point form that spilled 4);
// uncapped they take 152-182 registers and no stack, so an SM holds fewer of their blocks than the plan counts.
constexpr int mma_gemv_min_blocks(int token_tiles, int row_tiles) {
  return token_tiles * row_tiles >= kLinearMmaGemvMaxTiles ? 1 : kLinearMinBlocks;
}
// INT4 at one token tile (m <= 8) takes at least kLinearMmaGemvOneTileWarps warps along k even where their blocks
// exceed one wave (split_gemv_k's residency rule alone picks fewer): each warp streams a region at a time, and at one
// tile more warps in flight beat a second partial wave. H200, W4A16 g128 bf16, bench/results/h200/gemv_lab.md (us,
// 1 / 2 / 4 warps): m1 n13824 k5120 21.21 / 16.50 / 15.36 (864 blocks; 528 of 4 warps fit), n28672 k8192 45.79 /
// 43.25 / 42.50 (1792 blocks); H100 (bench/results/h100/gemv_lab.md, this layout): n28672 k8192 and n5120 k13824 best
// at 4 as well.
constexpr int kLinearMmaGemvOneTileWarps = 4;
// The tensor-core GEMV's largest k: its rows' offsets from a block's first are 32-bit (63 rows of k bytes).
constexpr int64_t kLinearMmaGemvMaxK = int64_t{1} << 24;
// By default (no gemv_mma setting) W4A16 with groups of 128 on sm_90 also keeps the tensor-core GEMV up to
// kLinearMmaGemvWideTokens tokens, as gemv_mma=3 plans it, instead of the tensor-core tiles. H100, bf16, one run of
// bench/dev/gemv_sweep.py on row-major INT4 (us, GEMV against tiles): m16 n11008 k4096 20.4 / 23.9, n4096 k11008 16.9
// / 23.1, n28672 k8192 82.1 / 94.0, n13824 k5120 27.3 / 36.0, n5120 k13824 29.7 / 33.3; m32 32.4 / 34.7, 25.6 / 33.4,
// 136 / 162, 45.4 / 56.4 (F.linear 54.6), 44.3 / 51.8; m4 and m8 (one token tile, the form of m3) 15.1 and 15.3 us at
// n11008 k4096 against an FMA GEMV's 22.9 and 23.3. Other groups and the A100 / T4 profiles take the tiles from
// kLinearTcMinM tokens (not measured).
// A batch is straight-line code (its x and scale loads issued ahead of its MMAs) when its x, token tiles x regions of
// 8 registers each, is at most kLinearMmaGemvStraightTiles of them: more spilled 4-40 B (sm_75 / sm_80 / sm_90) and
// stays guarded region by region.
constexpr int kLinearMmaGemvStraightTiles = 4;
// The regions a warp's batch holds for a plan of `tokens` tokens (`short_pairs`: gemv_mma=3's two-region batches for
// two tiles).
constexpr int mma_gemv_unroll(int tokens, bool short_pairs = false) {
  return tokens > kLinearMmaGemvMaxTokens || (short_pairs && tokens > kLinearMmaGemvTokens) ? kLinearMmaGemvWideUnroll
                                                                                            : kLinearMmaGemvUnroll;
}
// The tensor-core GEMV's instantiated forms (linear.cuh's launcher): row tiles a warp, 8-token tiles, regions a batch.
// Every plan of plan_mma_gemv is one of them (QuantPlanner.TensorCoreGemvPlansAreInstantiatedForms checks); row
// tiles past one are INT4 with groups of 64 or more only.
struct MmaGemvForm {
  int row_tiles, tiles, unroll;
};
inline constexpr MmaGemvForm kMmaGemvForms[] = {
    {1, 1, kLinearMmaGemvUnroll},         {1, 2, kLinearMmaGemvUnroll},         {1, 2, kLinearMmaGemvWideUnroll},
    {1, 4, kLinearMmaGemvWideUnroll},     {2, 1, kLinearMmaGemvUnroll / 2},     {2, 2, kLinearMmaGemvUnroll / 2},
    {2, 2, kLinearMmaGemvWideUnroll / 2}, {2, 4, kLinearMmaGemvWideUnroll / 2}, {4, 1, kLinearMmaGemvUnroll / 4},
    {4, 2, kLinearMmaGemvUnroll / 4}};
// The index in kMmaGemvForms of a plan's form (out_rows, tokens, stages), or -1.
constexpr int mma_gemv_form(int out_rows, int tokens, int stages) {
  for (int i = 0; i < static_cast<int>(std::size(kMmaGemvForms)); ++i)
    if (out_rows == kLinearMmaGemvRows * kMmaGemvForms[i].row_tiles &&
        tokens == kLinearMmaGemvTokens * kMmaGemvForms[i].tiles && stages == kMmaGemvForms[i].unroll)
      return i;
  return -1;
}
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

namespace detail {
// The quantizers' and the quantized linear ops' LaunchPlan (plan_op for the quant family).
Status plan_quant(const DeviceProfile& profile, OpId op, const OpShape& shape, DType dtype, LaunchPlan* out);
// The tensor-core GEMV's plan (kLinearMmaGemvRows) for m tokens (up to kLinearMmaGemvWideTokens), n rows and k inputs
// split between a block's warps by regions of `region` values: 64 for W4A16 and 32 for W8A16 (KERNELKIT_TUNE
// gemv_mma=1; k a multiple), 128 for linear_fp8 (fp8_gemv=2; the last region may be partial).
// The plan's `stages` is the regions a warp's batch holds (mma_gemv_unroll; `short_pairs` as there).
// `row_tiles`: 16-row tiles a warp (kLinearMmaGemvMaxRowTiles).
Status plan_mma_gemv(const DeviceProfile& profile, int64_t m, int64_t n, int64_t k, int region, LaunchPlan* out,
                     bool short_pairs = false, int row_tiles = 1);
}  // namespace detail

}  // namespace kernelkit

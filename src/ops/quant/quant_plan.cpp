// The quant family's planner rules (constants and their measurements: quant_plan.hpp).
#include "ops/quant/quant_plan.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "ops/quant/quant.hpp"
#include "runtime/plan_rules.hpp"

namespace kernelkit {

using plan::ceil_div;
using plan::kMaxGridX;
using plan::kMaxGridY;
using plan::kWarp;
using plan::next_pow2;
using plan::tune_value;

namespace detail {

// Quantizers and weight-only linear ops.
//  - Row quantizers (INT8 per channel / per token, FP8 per token) and the per-tensor ones: the row-norm work split (one
//  row max, then the row quantized; per tensor, a max pass over all rows, then the codes).
//  - Group-wise (INT4, per-token-group): one thread per 8 values (one packed word), 256-thread blocks, one wave over
//  all words.
//  - 128 x 128 blocks: a 256-thread block a weight block (its max, then its codes), one wave over the blocks.
//  - linear_fp8: cuBLASLt (library plans, FP8 profiles only); linear_fp8_blockwise too, on sm_90 profiles only.
//  - Linear (GEMV, m < kLinearTcMinM): the split-K kernel (see kLinearMaxThreads). Tokens per block: m (1 or 2);
//    4 rows per block. Split-K (k_warps) starts at 1 warp when its lanes walk the rows in fewer than
//    kLinearGemvRingMinVecs chunks each (the register-prefetch loop), else at 2, and doubles while the grid has fewer
//    warps than half of what can be resident (kLinearWarpsPerSm, the thread and the register limits: at most 16 warps
//    an SM at 128 registers, so 1-warp blocks stay within every profile's blocks-per-SM limit) and every warp still
//    gets a full warp-wide step of 16-byte chunks. One bench/dev/gemv_sweep.py run on the H100 (W4A16, bf16, m1, us, 1
//    / 2 / 4 warps): n13824 k5120 17.7 / 19.8 / 22.8, n14336 k4096 14.6 / 16.2 / 18.1, n11008 k4096 12.8 / 13.1 / 14.6,
//    n4096 k4096 (1024 warps at 1) 6.3 / 6.1 / 7.0, n4096 k11008 16.3 / 12.5 / 12.7; m2 n13824 k5120 20.9 / 25.0
//    / 27.0. Fewer warps, each with a longer loop that keeps its next chunks in flight, beat more warps with a
//    shared-memory reduction as long as the grid holds half the resident warps. (Always splitting 8 ways was measured
//    slower on the H200: W8A16 m1 n11008 k4096 28.3 us against 22.3 us. A warp-per-row kernel without split-K is slower
//    at every m = 1 shape measured on the H200, e.g. W4A16 n11008 k4096 18.5 us against 14.2, n28672 k8192 71.0
//    against 48.1 us.)
namespace {

// The GEMVs' split-K inside a block: k_warps warps (from `first`, doubled while the grid holds fewer warps than half of
// what the GPU keeps resident at kLinearRegisters and each warp still gets `per_warp` of the `units` k units: 16-byte
// chunks, a lane each, or 64-value regions, a warp each (`lanes` units a warp step)), or KERNELKIT_TUNE gemv_kwarps.
// `smem_per_warp` > 0 (the tensor-core GEMV, whose grid of 16-row blocks is a wave or two, each warp's sums
// smem_per_warp bytes of shared memory): instead the most warps, any count, whose blocks all stay resident at once
// (blocks_per_sm at kLinearRegisters, block-granular), else `first`. Past that a second wave of a few blocks costs as
// much as the first: m1 n11008 k4096 W4A16 as 688 blocks x 4 warps where 660 fit took 24.3 us under Nsight Compute
// on the H100 (SMs active 63% of the time), the FMA GEMV 16.2.
Status split_gemv_k(const DeviceProfile& prof, int64_t blocks, int first, int64_t units, int lanes, int per_warp,
                    LaunchPlan* p, int64_t smem_per_warp = 0) {
  const int64_t want_warps = int64_t{prof.sms} * std::min({kLinearWarpsPerSm, prof.max_threads_per_sm / kWarp,
                                                           prof.regs_per_sm / (kLinearRegisters * kWarp)});
  p->k_warps = first;
  if (smem_per_warp > 0) {
    const int most = static_cast<int>(std::min<int64_t>(kLinearMaxThreads / kWarp, units / per_warp));
    for (int w = most; w > first; --w)
      if (blocks <= int64_t{prof.sms} * blocks_per_sm(prof, w * kWarp, w * smem_per_warp, kLinearRegisters)) {
        p->k_warps = w;
        break;
      }
  } else {
    while (p->k_warps * kWarp * 2 <= kLinearMaxThreads && blocks * p->k_warps * 2 < want_warps &&
           int64_t{p->k_warps} * 2 * per_warp <= units)
      p->k_warps *= 2;
  }
  KK_RETURN_IF_ERROR(tune_value("gemv_kwarps", 1, kLinearMaxThreads / kWarp, &p->k_warps));
  p->threads_per_row = kWarp;
  p->rows_per_block = p->k_warps;
  p->block_threads = kWarp * p->k_warps;
  p->vecs_per_thread = static_cast<int>(ceil_div(units, int64_t{lanes} * p->k_warps));
  return Status::Ok();
}

}  // namespace

Status plan_mma_gemv(const DeviceProfile& prof, int64_t m, int64_t n, int64_t k, int region, LaunchPlan* p,
                     bool short_pairs, int row_tiles) {
  // Tokens a multiple of kLinearMmaGemvTokens with k_warps > 0 marks this plan; the block's warps split the regions
  // of k as the FMA GEMV's split its chunks.
  p->vec = region;
  // 1, 2 or 4 tiles of 8 tokens (the kernels' NT; m 17-32 take four).
  p->tokens = m <= kLinearMmaGemvMaxTokens
                  ? static_cast<int>(ceil_div(std::max<int64_t>(m, 1), kLinearMmaGemvTokens)) * kLinearMmaGemvTokens
                  : kLinearMmaGemvWideTokens;
  p->out_rows = kLinearMmaGemvRows * row_tiles;
  const int64_t blocks = ceil_div(n, p->out_rows);
  const int unroll = std::max(1, mma_gemv_unroll(p->tokens, short_pairs) / row_tiles);
  const int64_t sums_bytes = int64_t{p->out_rows} * p->tokens * static_cast<int64_t>(sizeof(float));  // a warp's
  // INT4 at one token tile: at least kLinearMmaGemvOneTileWarps warps (as many as the regions give batches).
  const int64_t batches = ceil_div(k, region) / unroll;
  const int first = region == kInt4RegionValues && p->tokens == kLinearMmaGemvTokens
                        ? static_cast<int>(std::clamp<int64_t>(batches, 1, kLinearMmaGemvOneTileWarps))
                        : 1;
  KK_RETURN_IF_ERROR(split_gemv_k(prof, blocks, first, ceil_div(k, region), 1, unroll, p, sums_bytes));
  p->stages = unroll;
  p->k_splits = 1;  // k is split inside the block (a plan made over another one keeps no split over grid.z)
  p->k_tiles_per_split = p->workspace_bytes = 0;
  p->smem_bytes = p->k_warps * sums_bytes;
  p->smem_optin = false;
  p->grid_x = p->grid = blocks;
  p->blocks_per_sm = blocks_per_sm(prof, p->block_threads, p->smem_bytes, kLinearRegisters);
  const int64_t resident_per_sm = std::min<int64_t>(p->blocks_per_sm, ceil_div(p->grid, prof.sms));
  p->occupancy = static_cast<double>(resident_per_sm * p->block_threads) / prof.max_threads_per_sm;
  return Status::Ok();
}

Status plan_quant(const DeviceProfile& prof, OpId op, const OpShape& s, DType dtype, LaunchPlan* p) {
  const std::string name(op_info(op).name);
  const ScaleSpan span = scale_span(op);
  if (span == ScaleSpan::row || span == ScaleSpan::tensor) return plan::plan_rows(prof, op, s, dtype, p);
  p->sms = prof.sms;
  // The group and block kernels: 256-thread blocks (__launch_bounds__(kElementwiseThreads, kElementwiseMinBlocks)), a
  // 1-D grid of at most one wave looping over `work` blocks' worth.
  const auto one_wave = [&](int64_t work) -> Status {
    p->threads_per_row = p->block_threads = kElementwiseThreads;
    p->rows_per_block = 1;
    p->blocks_per_sm = blocks_per_sm(prof, p->block_threads, 0, 65536 / (kElementwiseThreads * kElementwiseMinBlocks));
    if (p->blocks_per_sm == 0) return unsupported(name + ": a 256-thread block does not fit profile " + prof.key);
    const int64_t wave = int64_t{prof.sms} * p->blocks_per_sm;
    p->grid = std::max<int64_t>(1, std::min<int64_t>(work, wave));
    p->grid_x = p->grid;  // one-dimensional
    const int64_t resident_per_sm = std::min<int64_t>(p->blocks_per_sm, ceil_div(p->grid, prof.sms));
    p->occupancy = static_cast<double>(resident_per_sm * p->block_threads) / prof.max_threads_per_sm;
    return Status::Ok();
  };
  if (span == ScaleSpan::group) {  // one thread a word of 8 values (INT4: one packed word)
    if (s.hidden % 8 != 0)
      return invalid_argument(name + ": k must be a multiple of 8, got " + std::to_string(s.hidden));
    p->vec = 8;
    p->vecs_per_thread = 1;
    return one_wave(ceil_div(s.rows * (s.hidden / 8), kElementwiseThreads));
  }
  if (span == ScaleSpan::block) {  // one thread block a weight block at a time; vectors by the gcd rule
    const int elem = static_cast<int>(dtype_size(dtype));
    const int align_elems = std::max(1, std::min(s.align_bytes, 16) / elem);
    p->vec = std::gcd(static_cast<int>(std::gcd<int64_t, int64_t>(s.hidden, 16 / elem)), align_elems);
    p->vecs_per_thread =
        static_cast<int>(ceil_div(int64_t{kQuantBlockSize} * kQuantBlockSize / p->vec, kElementwiseThreads));
    return one_wave(ceil_div(s.rows, kQuantBlockSize) * ceil_div(s.hidden, kQuantBlockSize));
  }
  if (dtype == DType::f32) return invalid_argument(name + ": x dtype f32 is not supported (expected f16 or bf16)");
  // cuBLASLt's FP8 matmul: its heuristic, not a launch configuration of ours.
  if (op == OpId::linear_fp8 || op == OpId::linear_fp8_blockwise) {
    KK_RETURN_IF_ERROR(check_fp8_linear_profile(op, prof));
    p->library = true;
    return Status::Ok();
  }
  if (op == OpId::linear_w8a8) {  // tensor-core tiles (see kW8A8Threads); grid x along n, y along m
    const int64_t m = s.rows, n = s.out_features > 0 ? s.out_features : s.hidden;
    p->vec = 16;  // int8 values a 16-byte copy
    p->block_threads = kW8A8Threads;
    p->threads_per_row = kWarp;
    p->rows_per_block = kW8A8Threads / kWarp;
    p->out_rows = kW8A8TileN;
    p->tokens = kW8A8TileM;
    p->smem_bytes = int64_t{kW8A8Stages} * (kW8A8TileM + kW8A8TileN) * kW8A8TileK;
    p->smem_optin = p->smem_bytes > prof.smem_per_block_default;
    p->grid_x = std::max<int64_t>(1, ceil_div(n, kW8A8TileN));
    const int64_t grid_y = std::max<int64_t>(1, ceil_div(m, kW8A8TileM));
    if (grid_y > kMaxGridY || m > kMaxGridX || n > kMaxGridX)
      return unsupported(name + ": m = " + std::to_string(m) + " tokens is more than the grid's " +
                         std::to_string(kMaxGridY) + " tiles of " + std::to_string(kW8A8TileM));
    p->grid = p->grid_x * grid_y;
    p->blocks_per_sm = blocks_per_sm(prof, p->block_threads, p->smem_bytes, 0);
    if (p->blocks_per_sm == 0) return unsupported(name + ": a 48 KB tile block does not fit profile " + prof.key);
    const int64_t resident_per_sm = std::min<int64_t>(p->blocks_per_sm, ceil_div(p->grid, prof.sms));
    p->occupancy = static_cast<double>(resident_per_sm * p->block_threads) / prof.max_threads_per_sm;
    return Status::Ok();
  }
  const int bits = op_weight_bits(op);
  const int64_t m = s.rows, k = s.hidden, n = s.out_features > 0 ? s.out_features : s.hidden;
  int mma_gemv = -1;  // unset: the default rule (kLinearMmaGemvWideTokens)
  KK_RETURN_IF_ERROR(tune_value("gemv_mma", 0, 3, &mma_gemv));
  if (mma_gemv == -1) mma_gemv = bits == 4 && s.group == 128 && prof.sm >= 90 && m <= kLinearMmaGemvWideTokens ? 3 : 0;
  // INT4 below the tiles' tokens: the tensor-core GEMV on every profile (the layout is its fragments': there is no FMA
  // GEMV of INT4), as gemv_mma=3 plans it unless a setting says otherwise.
  if (bits == 4 && m < kLinearTcMinM) {
    if (k % kInt4RegionValues != 0)
      return invalid_argument(name + ": INT4 weights need k % " + std::to_string(kInt4RegionValues) +
                              " == 0, got k = " + std::to_string(k));
    if (k > kLinearMmaGemvMaxK)
      return unsupported(name + ": INT4 weights with k = " + std::to_string(k) + " above " +
                         std::to_string(kLinearMmaGemvMaxK) + " inputs (the GEMV's 32-bit row offsets)");
    if (mma_gemv == 0) mma_gemv = 3;
  }
  const int region = 256 / bits;  // the tensor-core GEMV's 32-byte regions: 64 INT4 or 32 INT8 values
  int programmatic = kLinearGemvProgrammatic ? 1 : 0;  // the GEMVs' launch (kLinearGemvProgrammatic)
  KK_RETURN_IF_ERROR(tune_value("gemv_pdl", 0, 1, &programmatic));
  const bool gemv_programmatic = programmatic == 1 && prof.sm >= 90;
  const int64_t mma_tokens = mma_gemv >= 2 ? kLinearMmaGemvWideTokens : kLinearMmaGemvMaxTokens;
  if (mma_gemv && m <= mma_tokens && k % region == 0 && k <= kLinearMmaGemvMaxK) {
    const int64_t tiles = ceil_div(std::max<int64_t>(m, 1), kLinearMmaGemvTokens);
    // Two row tiles a warp at two token tiles, where the 32-row blocks still number two an SM (quant_plan.hpp
    // kLinearMmaGemvRowTileMinBlocksPerSm); one otherwise.
    int row_tiles =
        bits == 4 && s.group >= 64 && tiles == 2 &&
                ceil_div(n, 2 * kLinearMmaGemvRows) >= int64_t{kLinearMmaGemvRowTileMinBlocksPerSm} * prof.sms
            ? 2
            : 1;
    KK_RETURN_IF_ERROR(tune_value("gemv_mma_mtiles", 1, kLinearMmaGemvMaxRowTiles, &row_tiles));
    if (row_tiles > 1 && (bits != 4 || s.group < 64 || (row_tiles & (row_tiles - 1)) != 0 ||
                          row_tiles * next_pow2(tiles) > kLinearMmaGemvMaxTiles))
      return invalid_argument("KERNELKIT_TUNE: gemv_mma_mtiles=" + std::to_string(row_tiles) +
                              " needs INT4 weights with groups of 64 or more, 1, 2 or 4 row tiles, and at most " +
                              std::to_string(kLinearMmaGemvMaxTiles) +
                              " row tiles x 8-token tiles (m = " + std::to_string(m) + ")");
    KK_RETURN_IF_ERROR(plan_mma_gemv(prof, m, n, k, region, p, mma_gemv == 3, row_tiles));
    p->programmatic = gemv_programmatic;
    return Status::Ok();
  }
  if (m >= kLinearTcMinM) {  // tensor cores (see kLinearTcMinM); k_warps 0 marks this plan
    p->vec = 16;
    p->block_threads = kLinearTcThreads;
    p->threads_per_row = kWarp;
    p->rows_per_block = kLinearTcThreads / kWarp;
    p->tokens = m <= 16 ? 16 : kLinearTcTileM;
    p->out_rows = kLinearTcTileN;
    p->k_warps = 0;
    p->smem_bytes = int64_t{kLinearTcStages} * kLinearTcTileK *
                    (p->tokens * static_cast<int64_t>(dtype_size(dtype)) + kLinearTcTileN * bits / 8);
    p->smem_optin = p->smem_bytes > prof.smem_per_block_default;
    p->grid_x = std::max<int64_t>(1, ceil_div(n, kLinearTcTileN));
    const int64_t grid_y = ceil_div(m, p->tokens);
    if (grid_y > kMaxGridY || m > kMaxGridX || n > kMaxGridX)
      return unsupported(name + ": m = " + std::to_string(m) + " tokens is more than the grid's " +
                         std::to_string(kMaxGridY) + " tiles of " + std::to_string(p->tokens));
    p->grid = p->grid_x * grid_y;
    p->blocks_per_sm = blocks_per_sm(prof, p->block_threads, p->smem_bytes, 0);
    if (p->blocks_per_sm == 0) return unsupported(name + ": a 48 KB tile block does not fit profile " + prof.key);
    refine_linear_tc_splits(p->blocks_per_sm, m, n, k, p);
    const int64_t resident_per_sm = std::min<int64_t>(p->blocks_per_sm, ceil_div(p->grid, prof.sms));
    p->occupancy = static_cast<double>(resident_per_sm * p->block_threads) / prof.max_threads_per_sm;
    return Status::Ok();
  }
  p->vec = 128 / bits;  // weights per 16-byte chunk (16 INT8 or 32 INT4)
  p->tokens = static_cast<int>(std::min<int64_t>(next_pow2(std::max<int64_t>(m, 1)), kLinearMaxTokens));
  p->out_rows = 4;
  const int64_t blocks = ceil_div(n, p->out_rows) * ceil_div(std::max<int64_t>(m, 1), p->tokens);
  const int64_t chunks = ceil_div(k, p->vec);
  const int first_warps = ceil_div(chunks, int64_t{kWarp}) < kLinearGemvRingMinVecs ? 1 : 2;
  KK_RETURN_IF_ERROR(split_gemv_k(prof, blocks, first_warps, chunks, kWarp, kWarp, p));
  // Weights: register prefetch (stages 0), or from kLinearGemvRingMinVecs chunks a thread on sm_80+ the cp.async ring
  // of kLinearGemvRingStages (see there); the ring's shared memory is what the warps' partial sums reuse.
  const int64_t slot_bytes = int64_t{p->out_rows} * p->block_threads * 16;  // one stage: 16 bytes a row a thread
  p->stages = prof.sm >= 80 && p->vecs_per_thread >= kLinearGemvRingMinVecs ? kLinearGemvRingStages : 0;
  KK_RETURN_IF_ERROR(tune_value("gemv_stages", 0, kLinearGemvStages, &p->stages));
  if (p->stages == 1 || p->stages * slot_bytes > prof.smem_per_block_default)
    return invalid_argument("KERNELKIT_TUNE: gemv_stages " + std::to_string(p->stages) + " is not 0 or 2 to " +
                            std::to_string(kLinearGemvStages) + " within 48 KB for a " +
                            std::to_string(p->block_threads) + "-thread block");
  p->smem_bytes = std::max(p->stages * slot_bytes,
                           int64_t{p->k_warps} * p->out_rows * p->tokens * static_cast<int64_t>(sizeof(float)));
  p->smem_optin = false;
  p->grid_x = blocks;  // one-dimensional: token tiles fastest (blocks reading the same weight rows run together)
  p->grid = blocks;
  p->programmatic = gemv_programmatic;
  p->blocks_per_sm = blocks_per_sm(prof, p->block_threads, p->smem_bytes, kLinearRegisters);
  if (p->blocks_per_sm == 0)
    return unsupported(name + ": a " + std::to_string(p->block_threads) + "-thread block does not fit profile " +
                       prof.key);
  const int64_t resident_per_sm = std::min<int64_t>(p->blocks_per_sm, ceil_div(p->grid, prof.sms));
  p->occupancy = static_cast<double>(resident_per_sm * p->block_threads) / prof.max_threads_per_sm;
  return Status::Ok();
}

}  // namespace detail

void refine_linear_tc_splits(int resident_blocks, int64_t m, int64_t n, int64_t k, LaunchPlan* p) {
  // Overhead: the pipeline's prologue (stages - 1 tiles in flight before the first MMA) and the epilogue.
  constexpr int64_t kOverheadTiles = kLinearTcStages;
  if (resident_blocks > 0) p->blocks_per_sm = std::min(p->blocks_per_sm, resident_blocks);
  const int64_t tiles = p->grid / std::max(p->k_splits, 1);
  const int64_t k_tiles = ceil_div(std::max<int64_t>(k, 1), kLinearTcTileK);
  p->k_tiles_per_split = plan::split_steps(tiles, int64_t{p->sms} * p->blocks_per_sm, k_tiles, kLinearTcMaxSplits,
                                     kOverheadTiles);
  p->k_splits = static_cast<int>(ceil_div(k_tiles, p->k_tiles_per_split));
  p->grid = tiles * p->k_splits;
  p->workspace_bytes = p->k_splits > 1 ? p->k_splits * m * n * static_cast<int64_t>(sizeof(float)) : 0;
}

}  // namespace kernelkit

// The attention family's planner rules: the prefill tiles (plan_tile) and the decode split (plan_decode); the
// constants and the measurements behind them are in attention_plan.hpp.
#include "ops/attention/attention_plan.hpp"

#include <algorithm>
#include <limits>
#include <sstream>
#include <string>

#include "runtime/plan_rules.hpp"

namespace kernelkit {

using plan::ceil_div;
using plan::tune_value;

namespace {
struct TileSeed {
  int min_sm;
  int attn_m, attn_n, attn_stages;
  int attn_mw;  // 16-row MMA tiles a warp owns (head_dim <= 128; 1 above): warps = attn_m / (16 attn_mw)
  int mm_m, mm_n, mm_k, mm_stages, mm_warps;
};
// The seeds' per-arch table, newest first. sm_75 has no cp.async, so its pipelines are two register-staged buffers.
constexpr TileSeed kTileSeeds[] = {
    {90, 128, 64, 2, 2, 128, 128, 32, 4, 8},
    {80, 128, 64, 2, 2, 128, 128, 32, 3, 8},
    {75, 64, 32, 2, 1, 64, 64, 32, 2, 4},
};
}  // namespace

Status plan_tile(const DeviceProfile& prof, TileFamily family, DType dtype, int head_dim, TilePlan* t,
                 bool sm90a_code) {
  *t = TilePlan{};
  if (dtype != DType::f16 && dtype != DType::bf16)
    return invalid_argument("tile plan: dtype must be f16 or bf16, got " + std::string(dtype_name(dtype)));
  if (!prof.supports(dtype))
    return unsupported("tile plan: " + std::string(dtype_name(dtype)) + " " + prof.dtype_refusal(dtype));
  const TileSeed* seed = nullptr;
  for (const auto& s : kTileSeeds)
    if (prof.sm >= s.min_sm) {
      seed = &s;
      break;
    }
  if (!seed) return unsupported("tile plan: sm_" + std::to_string(prof.sm) + " is older than sm_75");
  const int64_t e = static_cast<int64_t>(dtype_size(dtype));
  int mw = 1, planned_mw = 1;  // attention: 16-row MMA tiles a warp owns (forced by KERNELKIT_TUNE, or planned)
  auto smem = [&](const TilePlan& p) -> int64_t {
    if (family == TileFamily::attention)  // Q tile + `stages` buffers of K and V tiles
      return e * (static_cast<int64_t>(p.block_m) * head_dim + 2LL * p.stages * p.block_n * head_dim);
    return e * p.stages * static_cast<int64_t>(p.block_m + p.block_n) * p.block_k;  // A and B tiles per stage
  };
  if (family == TileFamily::attention) {
    if (head_dim != 64 && head_dim != 128 && head_dim != 192 && head_dim != 256)
      return invalid_argument("tile plan: head_dim must be 64, 128, 192 or 256, got " + std::to_string(head_dim));
    // The warp-specialized wgmma prefill (a producer warpgroup and two consumers, 12 warps, attn_ws_keys-key tiles)
    // is the default where it can run (kAttnWgmmaRows): sm_90 profiles, sm_90a code for the device. attn_wgmma=0 /
    // 1 / 2 / 3 forces the mma.sync kernel, the two-warpgroup wgmma kernel fed by cp.async or by TMA, or the
    // warp-specialized one; attn_bn=64 alone plans the TMA-fed two-warpgroup kernel, the one with 64-key tiles
    // (head_dim 64 and 128: at 192 and 256 the warp-specialized kernel is the only wgmma one, and attn_bn=64 gives
    // its plain calls the masked forms' tiles, attn_ws_masked_keys; the mma.sync kernel takes 192 at 256,
    // attention_plan_head_dim).
    const bool wgmma_here = prof.sm == 90;
    const bool ws_only = head_dim > 128;
    int wgmma = -1, forced_bn = 0;
    KK_RETURN_IF_ERROR(tune_value("attn_wgmma", 0, 3, &wgmma));
    if (wgmma < 0) {  // planned: the range of a forced attn_bn is checked below, with the kernel's message
      KK_RETURN_IF_ERROR(
          tune_value("attn_bn", std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), &forced_bn));
      wgmma = !wgmma_here || !sm90a_code ? 0 : forced_bn == 64 && !ws_only ? 2 : 3;
    }
    if (wgmma) {  // see kAttnWgmmaRows: two warpgroups, two K/V buffers, Q and each buffer 1024-byte aligned
      if (!wgmma_here)
        return unsupported("KERNELKIT_TUNE attn_wgmma: the wgmma prefill runs on sm_90 profiles only, not on profile " +
                           prof.key);
      if (!sm90a_code)
        return unsupported("KERNELKIT_TUNE attn_wgmma: the wgmma prefill needs a build with sm_90a code (arch list "
                           "with 90 or native) on a compute capability 9.0 device");
      if (ws_only && wgmma != 3)
        return unsupported(
            "KERNELKIT_TUNE attn_wgmma: head_dim " + std::to_string(head_dim) +
            " has the warp-specialized wgmma kernel only (attn_wgmma=3), not attn_wgmma=" + std::to_string(wgmma));
      const bool tma = wgmma >= 2, ws = wgmma == 3;
      int bn = ws ? attn_ws_keys(head_dim) : tma ? kAttnWgmmaTmaKeys : kAttnWgmmaKeys;
      KK_RETURN_IF_ERROR(tune_value("attn_bn", 64, 128, &bn));
      const bool ws_bn = ws && (bn == attn_ws_keys(head_dim) || bn == attn_ws_masked_keys(head_dim));
      if (bn != 64 && bn != 128 && !ws_bn)
        return invalid_argument("KERNELKIT_TUNE: attn_bn " + std::to_string(bn) +
                                " is not 64 or 128, the wgmma prefill's tiles (96 at head_dim 192, 80 at 256; "
                                "attn_wgmma=0: the mma.sync kernel's)");
      if (ws && !ws_bn) {
        const int keys = attn_ws_keys(head_dim), masked_keys = attn_ws_masked_keys(head_dim);
        return invalid_argument("KERNELKIT_TUNE: the warp-specialized wgmma prefill (attn_wgmma=3) has " +
                                std::to_string(keys) + "-key tiles" +
                                (masked_keys != keys ? " or " + std::to_string(masked_keys) : std::string(" only")) +
                                " at head_dim " + std::to_string(head_dim) + ", not attn_bn " + std::to_string(bn));
      }
      // Two K/V buffers (the warp-specialized kernel: 2 or kAttnWsMaxStages) and one row tile a warp.
      int stages = 2, rows_a_warp = 0;
      KK_RETURN_IF_ERROR(tune_value("attn_stages", 1, kAttnWsMaxStages, &stages));
      KK_RETURN_IF_ERROR(tune_value("attn_mw", 1, 2, &rows_a_warp));
      if ((stages != 2 && !(ws && stages == kAttnWsMaxStages)) || rows_a_warp > 1)
        return invalid_argument("KERNELKIT_TUNE: the wgmma prefill has 2 K/V buffers (attn_wgmma=3: 2 or " +
                                std::to_string(kAttnWsMaxStages) + ") and one 16-row tile a warp; attn_stages " +
                                std::to_string(stages) +
                                " / attn_mw cannot be forced (attn_wgmma=0: the mma.sync "
                                "kernel)");
      // The warp-specialized kernel's P V: one MMA a k-step over all of O's columns (FlashAttention-3's), or one
      // per 64 columns (attn_pv_n=64, the other kernel's form).
      int pv_n = ws ? head_dim : 64;
      KK_RETURN_IF_ERROR(tune_value("attn_pv_n", 64, kAttnMaxHeadDim, &pv_n));
      if ((pv_n != 64 && !(ws && pv_n == head_dim)) || (ws_only && pv_n != head_dim))
        return invalid_argument("KERNELKIT_TUNE: attn_pv_n " + std::to_string(pv_n) +
                                " is not 64 (head_dim 64 and 128) or, with attn_wgmma=3, the head_dim " +
                                std::to_string(head_dim));
      if (stages != 2 && head_dim > 128)
        return unsupported("KERNELKIT_TUNE: attn_stages " + std::to_string(stages) +
                           " is for head_dim 64 and 128, not " + std::to_string(head_dim));
      if (stages != 2 && pv_n != head_dim)
        return invalid_argument("KERNELKIT_TUNE: attn_stages " + std::to_string(stages) +
                                " takes P V over all of O's columns (attn_pv_n " + std::to_string(head_dim) + ")");
      // The warp-specialized kernel's lazy rescale (kAttnMaxRescaleSlack; KERNELKIT_TUNE attn_slack; FlashParams).
      int slack = ws ? kAttnMaxRescaleSlack : 0;
      KK_RETURN_IF_ERROR(tune_value("attn_slack", 0, kAttnMaxRescaleSlack, &slack));
      if (slack && !ws)
        return invalid_argument("KERNELKIT_TUNE: attn_slack " + std::to_string(slack) +
                                " is the warp-specialized wgmma prefill's (attn_wgmma=3)");
      // The warp-specialized kernel's rows: kAttnWsMaxRows (three consumer warpgroups) at head_dim 64 with two K/V
      // buffers, else kAttnWgmmaRows; attn_bm=128 forces two consumers there.
      int bm = ws && head_dim == 64 && stages == 2 ? kAttnWsMaxRows : kAttnWgmmaRows;
      KK_RETURN_IF_ERROR(tune_value("attn_bm", kAttnWgmmaRows, kAttnWsMaxRows, &bm));
      if (bm != kAttnWgmmaRows && !(bm == kAttnWsMaxRows && ws && head_dim == 64 && stages == 2))
        return invalid_argument("KERNELKIT_TUNE: attn_bm " + std::to_string(bm) + " is not " +
                                std::to_string(kAttnWgmmaRows) +
                                " or, for the warp-specialized wgmma prefill at "
                                "head_dim 64 with two K/V buffers, " +
                                std::to_string(kAttnWsMaxRows));
      // Packed varlen batches through the warp-specialized kernel (attn_ws_varlen; KERNELKIT_TUNE attn_varlen_ws=0:
      // the two-warpgroup kernel by cp.async, or the mma.sync one past head_dim 128).
      int varlen_ws = ws && attn_ws_varlen(head_dim);
      KK_RETURN_IF_ERROR(tune_value("attn_varlen_ws", 0, 1, &varlen_ws));
      if (varlen_ws && !ws)
        return invalid_argument(
            "KERNELKIT_TUNE: attn_varlen_ws is the warp-specialized wgmma prefill's (attn_wgmma=3)");
      if (varlen_ws && !attn_ws_varlen(head_dim))
        return unsupported(
            "KERNELKIT_TUNE: attn_varlen_ws=1: the warp-specialized wgmma prefill has no packed-varlen "
            "form at head_dim " +
            std::to_string(head_dim));
      const int warps = ws ? (bm / 64 + 1) * 4 : 2 * kAttnWgmmaRows / 32;  // a producer warpgroup and the consumers
      *t = {bm, bn, head_dim, stages, warps, 0, false, true, tma, ws, pv_n, slack, varlen_ws == 1};
      t->smem_bytes = e * (int64_t{bm} + 2 * stages * bn) * head_dim + 1024;
      if (t->smem_bytes > prof.smem_per_block_optin)
        return unsupported("tile plan: the wgmma prefill's " + std::to_string(t->smem_bytes) +
                           " bytes exceed profile " + prof.key + "'s " + std::to_string(prof.smem_per_block_optin));
      t->smem_optin = t->smem_bytes > prof.smem_per_block_default;
      return Status::Ok();
    }
    if (head_dim == 192) head_dim = 256;  // the mma.sync kernel's (attention_plan_head_dim)
    *t = {seed->attn_m, seed->attn_n, head_dim, seed->attn_stages, 0, 0, false};
    planned_mw = mw = head_dim <= 128 ? seed->attn_mw : 1;
    KK_RETURN_IF_ERROR(tune_value("attn_mw", 1, 2, &mw));
    // Two row tiles a warp at head_dim 128 hold 2 x 128 fp32 of O per lane: kAttnWideKeys-key tiles on sm_90 (the
    // measured choice), 32 below (S for 64 keys on top spills more there).
    if (mw == 2 && head_dim == 128 && prof.sm < 90) t->block_n = std::min(t->block_n, 32);
  } else {
    *t = {seed->mm_m, seed->mm_n, seed->mm_k, seed->mm_stages, seed->mm_warps, 0, false};
  }
  // Shrink until it fits the opt-in maximum: fewer stages first (keeps the MMA shape), then the N tile, then M.
  while (smem(*t) > prof.smem_per_block_optin) {
    if (t->stages > 1) --t->stages;
    else if (t->block_n > 32) t->block_n /= 2;  // attention kernels exist for block_n 64 and 32
    else if (t->block_m > 64) t->block_m /= 2;
    else if (family == TileFamily::attention) break;  // 64 x 32 is the smallest compiled attention tile
    else if (t->block_n > 16) t->block_n /= 2;
    else if (t->block_m > 16) t->block_m /= 2;
    else break;
  }
  if (smem(*t) > prof.smem_per_block_optin)
    return unsupported("tile plan: no tile fits " + std::to_string(prof.smem_per_block_optin) + " bytes");
  // Attention: a forced K/V depth or key tile must fit as is (the shrinking above is the planner's own); one warp per
  // mw x 16 query rows (the MMA's M), each keeping its rows of S, P and O in registers. Two tiles a warp exist for
  // 128-row blocks at head_dim 64, and 128 with 32-key tiles (the registers: see above) or 64 (kAttnWideKeys).
  if (family == TileFamily::attention) {
    KK_RETURN_IF_ERROR(tune_value("attn_stages", 1, kAttnMaxStages, &t->stages));
    KK_RETURN_IF_ERROR(tune_value("attn_bn", 32, 64, &t->block_n));
    if (t->block_n != 32 && t->block_n != 64)
      return invalid_argument("KERNELKIT_TUNE: attn_bn " + std::to_string(t->block_n) + " is not 32 or 64");
    if (t->block_m == 64 && t->block_n == 64)
      return unsupported("tile plan: no 64x64 attention kernel (profile " + prof.key + "'s 64-row tiles take 32 keys)");
    if (smem(*t) > prof.smem_per_block_optin)
      return unsupported("tile plan: " + std::to_string(t->stages) + " K/V stages of a " + std::to_string(t->block_m) +
                         "x" + std::to_string(t->block_n) + " tile need " + std::to_string(smem(*t)) +
                         " bytes, more than profile " + prof.key + "'s " + std::to_string(prof.smem_per_block_optin));
    if (mw == 2 && t->block_m != 128 && planned_mw == 2) mw = 1;  // the planner's choice, for a tile shrunk below it
    if (mw == 2 && (t->block_m != 128 || head_dim > 128))
      return unsupported("tile plan: no kernel with 2 row tiles a warp for head_dim " + std::to_string(head_dim));
    t->warps = t->block_m / (16 * mw);
  }
  t->smem_bytes = smem(*t);
  t->smem_optin = t->smem_bytes > prof.smem_per_block_default;
  return Status::Ok();
}

Status plan_decode(const DeviceProfile& prof, int head_dim, int64_t batch, int64_t kv_heads, int64_t rows,
                   int64_t rows_all, int64_t capacity, DecodePlan* p, int resident_blocks, DType cache_dtype) {
  *p = DecodePlan{};
  if (head_dim != 64 && head_dim != 128 && head_dim != 256)
    return invalid_argument("decode plan: head_dim must be 64, 128 or 256, got " + std::to_string(head_dim));
  if (cache_dtype != DType::f16 && cache_dtype != DType::bf16 && cache_dtype != DType::f8e4m3)
    return invalid_argument("decode plan: the cache dtype must be f16, bf16 or f8e4m3, got " +
                            std::string(dtype_name(cache_dtype)));
  const bool fp8 = cache_dtype == DType::f8e4m3;
  const int64_t kv_bytes = static_cast<int64_t>(dtype_size(cache_dtype));
  // Tensor cores wherever the variant has a kernel (head_dim 64 and 128): see kDecodeTcTileKeys for the measurement.
  int tc = head_dim <= 128 ? 1 : 0;
  KK_RETURN_IF_ERROR(tune_value("decode_tc", 0, 1, &tc));
  if (tc && head_dim > 128)
    return unsupported("decode plan: the tensor-core variant (decode_tc=1) has head_dim 64 and 128 only, got " +
                       std::to_string(head_dim));
  p->tensor_cores = tc == 1;
  // bf16 q over an e4m3 cache on f16 MMAs (decode_tc_kernel's M): one conversion a code pair instead of four. H100,
  // b16 h32/8 s8192 d128: 98.5 against 102.8 us on bf16 MMAs; b1 13.7 against 14.2, b64 s2048 108.4 against 106.1.
  int f16_mma = 1;
  KK_RETURN_IF_ERROR(tune_value("decode_f16mma", 0, 1, &f16_mma));
  p->f16_mma = f16_mma == 1 && fp8 && p->tensor_cores;
  // KERNELKIT_TUNE decode_kt=1 (an experiment for the e4m3 decode on the H200, 1.47x the 16-bit cache at b16 h32/8
  // s8192 where the H100 reaches 1.82x: issue-bound rather than memory-bound): the keys on the MMA's M, half the MMAs
  // and accumulators (decode_kt_kernel). Compiled for the measured case only (head_dim 128, f16 MMAs), which keeps
  // its build time small while it is an experiment.
  int keys_on_m = 0;
  KK_RETURN_IF_ERROR(tune_value("decode_kt", 0, 1, &keys_on_m));
  if (keys_on_m && !(fp8 && p->tensor_cores && p->f16_mma && head_dim == 128)) {
    std::string got = "a " + std::string(dtype_name(cache_dtype)) + " cache, head_dim " + std::to_string(head_dim);
    if (!p->tensor_cores) got += ", decode_tc=0";
    if (fp8 && p->tensor_cores && !p->f16_mma) got += ", decode_f16mma=0";
    const std::string want = "the tensor-core e4m3 decode's at head_dim 128 on f16 MMAs";
    return unsupported("decode plan: the keys-on-M kernel (decode_kt=1) is " + want + "; got " + got);
  }
  p->keys_on_m = keys_on_m == 1;
  // KERNELKIT_TUNE decode_rotate=1 (an experiment for b64 h32/8 on the H200, where the blocks of a wave start
  // together and walk their sequences' keys in lock step): each warp walks its tiles from one that depends on the
  // sequence (the heads of a sequence keep reading the same rows of the cache together), wrapping around.
  int rotate = 0;
  KK_RETURN_IF_ERROR(tune_value("decode_rotate", 0, 1, &rotate));
  p->rotate = rotate == 1;
  // e4m3 (kDecodeFp8TcTileKeys): the tensor-core tile keeps its bytes (twice the keys), the CUDA-core one its keys.
  const int warp_tile_keys =
      p->tensor_cores ? (fp8 ? kDecodeFp8TcTileKeys : kDecodeTcTileKeys) : kDecodeWarpTileElems / head_dim;
  p->block_n = warp_tile_keys * (kDecodeThreads / 32);
  const int64_t r = std::max<int64_t>(rows, 1);
  p->rows_per_block = r == 1 ? 1 : r <= 4 ? 4 : kDecodeMaxRows;
  p->row_groups = ceil_div(r, p->rows_per_block);
  // Shared memory: `stages` K and V tiles per warp (kv_bytes elements), reused after the loop for the warps' merge
  // (fp32 O, max and sum per row).
  const int64_t warps = kDecodeThreads / 32;
  const int64_t merge = warps * p->rows_per_block * (head_dim + 2) * 4;
  auto smem_for = [&](int stages) {
    return std::max(warps * stages * 2 * warp_tile_keys * head_dim * kv_bytes, merge);
  };
  // Splits: see split_steps (a block's prologue, merge and partial writes count as 2 tile steps).
  constexpr int64_t kDecodeBlockOverheadTiles = 2;
  const int64_t blocks = batch * kv_heads * p->row_groups;
  const int64_t tiles = std::max<int64_t>(1, ceil_div(capacity, p->block_n));
  // KERNELKIT_TUNE decode_waves=1: the split model also past one wave of blocks (an experiment for b64 h32/8 decode,
  // 0.79-0.82x cuDNN in bench/results/h200/op_baselines_attention.md; at 3 stages its 512 blocks are 1.94 waves of 264
  // on the H200, and the model's whole waves keep one split there).
  int past_one_wave = 0;
  KK_RETURN_IF_ERROR(tune_value("decode_waves", 0, 1, &past_one_wave));
  int forced_splits = 0;  // KERNELKIT_TUNE decode_splits: at most that many (tiles are not cut below one a split)
  KK_RETURN_IF_ERROR(tune_value("decode_splits", 1, kDecodeMaxSplits, &forced_splits));
  // The blocks an SM holds with `stages` buffers and the keys a split walks (in tiles) for them.
  auto residency = [&](int stages) {
    int per_sm = blocks_per_sm(prof, kDecodeThreads, smem_for(stages), 0);
    if (resident_blocks > 0) per_sm = std::min(per_sm, resident_blocks);
    return per_sm;
  };
  auto split_tiles = [&](int per_sm) {
    if (forced_splits > 0) return ceil_div(tiles, forced_splits);
    return plan::split_steps(blocks, static_cast<int64_t>(prof.sms) * per_sm, tiles, kDecodeMaxSplits,
                             kDecodeBlockOverheadTiles, past_one_wave == 1);
  };
  // The ring's depth. The tensor-core kernels at head_dim 128 take 3 buffers where an SM holds two such blocks
  // (Hopper's 228 KB), and 4 (one block an SM) where that grid, split, is still one wave: more bytes in flight a warp
  // outweighs more warps, and a second block an SM starts while the first drains. H100, h32/8 bf16, us at 2 / 3 / 4
  // stages, 16-bit cache: b16 s8192 185 / 183 / 180, b64 s2048 184 / 181 / 184, b32 s2048 100 / 93 / 95; e4m3
  // cache: b16 s8192 109 / 108 / 105, b64 s2048 117 / 106 / 114, b32 s2048 64 / 56 / 62. Elsewhere (the A100's and
  // T4's shared memory, head_dim 64, the CUDA-core kernels) 2, and the CUDA-core kernel's e4m3 tiles
  // kDecodeDeepStages, the same shared memory and bytes in flight as its 16-bit ones.
  int stages = fp8 && !p->tensor_cores ? kDecodeDeepStages : 2;
  if (p->tensor_cores && head_dim == 128 && residency(3) >= 2) {
    const int per_sm = residency(kDecodeDeepStages);
    const bool one_wave = per_sm > 0 && ceil_div(tiles, split_tiles(per_sm)) * blocks <= prof.sms * per_sm;
    stages = one_wave ? kDecodeDeepStages : 3;
  }
  if (residency(stages) == 0) return unsupported("decode plan: a decode block does not fit profile " + prof.key);
  p->stages = stages;
  KK_RETURN_IF_ERROR(tune_value("decode_stages", 2, kDecodeMaxStages, &p->stages));
  if (smem_for(p->stages) > prof.smem_per_block_optin)
    return invalid_argument("KERNELKIT_TUNE: decode_stages " + std::to_string(p->stages) + " needs " +
                            std::to_string(smem_for(p->stages)) + " bytes, more than profile " + prof.key + "'s " +
                            std::to_string(prof.smem_per_block_optin));
  p->smem_bytes = smem_for(p->stages);
  p->smem_optin = p->smem_bytes > prof.smem_per_block_default;
  p->blocks_per_sm = residency(p->stages);
  const int64_t chunk_tiles = split_tiles(p->blocks_per_sm);
  p->splits = static_cast<int>(ceil_div(tiles, chunk_tiles));
  p->chunk = chunk_tiles * p->block_n;
  p->grid = p->splits * blocks;
  p->workspace_bytes = p->splits > 1 ? p->splits * rows_all * (head_dim + 1) * static_cast<int64_t>(sizeof(float)) : 0;
  return Status::Ok();
}

std::string DecodePlan::to_string() const {
  std::ostringstream os;
  os << "decode" << (tensor_cores ? f16_mma ? " (tensor cores, f16 MMAs" : " (tensor cores" : "")
     << (tensor_cores ? keys_on_m ? ", keys on M)" : ")" : "") << ": " << splits << " split" << (splits == 1 ? "" : "s")
     << " of " << chunk << " keys, tiles of " << block_n << " keys, " << row_groups << " row group"
     << (row_groups == 1 ? "" : "s") << " of " << rows_per_block << " row" << (rows_per_block == 1 ? "" : "s")
     << ", grid " << grid << ", " << stages << " stages, smem " << smem_bytes << " B" << (smem_optin ? " (opt-in)" : "")
     << ", " << blocks_per_sm << " blocks/SM" << (rotate ? ", tiles rotated per sequence" : "");
  if (workspace_bytes) os << ", workspace " << workspace_bytes << " B";
  return os.str();
}

std::string TilePlan::to_string() const {
  std::ostringstream os;
  os << block_m << "x" << block_n << " (k " << block_k << "), " << stages << " stage" << (stages == 1 ? "" : "s")
     << ", " << warps << " warps"
     << (wgmma ? warp_specialized ? " (wgmma, TMA, producer warpgroup)"
                 : tma            ? " (wgmma, TMA)"
                                  : " (wgmma)"
               : "")
     << ", smem " << smem_bytes / 1024 << " KB" << (smem_optin ? " (opt-in)" : "");
  return os.str();
}

}  // namespace kernelkit

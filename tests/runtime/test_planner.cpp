// The planner's rules, checked for every profile on a CPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>
#include <utility>

#include "kernelkit/planner.hpp"
#include "runtime/plan_rules.hpp"
#include "ops/attention/attention_plan.hpp"

using namespace kernelkit;

namespace {
const std::vector<int64_t> kRows = {1, 7, 83, 4096, 65536};
const std::vector<int64_t> kHidden = {64, 111, 500, 769, 2048, 4096, 5125, 8192, 65536};

DeviceProfile profile(const char* key) {
  auto p = find_profile(key);
  EXPECT_TRUE(p.has_value()) << key;
  return *p;
}
}  // namespace

TEST(Profiles, TableHasTheDesignFacts) {
  const auto t4 = profile("t4");
  EXPECT_EQ(t4.sm, 75);
  EXPECT_EQ(t4.sms, 40);
  EXPECT_EQ(t4.smem_per_sm, 64 * 1024);
  EXPECT_EQ(t4.max_threads_per_sm, 1024);
  EXPECT_EQ(t4.hbm_gbps, 320);
  EXPECT_FALSE(t4.bf16);
  EXPECT_FALSE(t4.tma);
  const auto a100 = profile("a100");
  EXPECT_EQ(a100.key, "a100-80gb");
  EXPECT_EQ(a100.sms, 108);
  EXPECT_EQ(a100.smem_per_block_optin, 163 * 1024);
  EXPECT_TRUE(a100.bf16 && a100.tf32 && !a100.fp8);
  const auto h200 = profile("h200");
  EXPECT_EQ(h200.sms, 132);
  EXPECT_EQ(h200.smem_per_block_optin, 227 * 1024);
  EXPECT_TRUE(h200.fp8 && h200.tma);
  EXPECT_EQ(profile("h100").key, "h100-sxm");
  EXPECT_EQ(profile_table().size(), 7u);
  EXPECT_FALSE(find_profile("v100").has_value());
}

TEST(Profiles, Fp8OnlyWhereTheTensorCoresHaveIt) {
  // FP8 is Ada / Hopper's (sm_89+): the T4 and A100 refuse it with the guides' alternative; bf16's refusal on the T4
  // reads as every op's.
  const DeviceProfile t4 = *find_profile("t4"), a100 = *find_profile("a100"), h200 = *find_profile("h200");
  for (DType t : {DType::f8e4m3, DType::f8e5m2}) {
    EXPECT_TRUE(h200.supports(t));
    EXPECT_EQ(h200.dtype_refusal(t), "");
    EXPECT_FALSE(a100.supports(t));
    EXPECT_EQ(a100.dtype_refusal(t), "is not supported on profile a100-80gb (sm_80 has no FP8 tensor cores); use bf16, "
                                     "or INT8 weights and activations (quantize_weight, linear_w8a8)");
    EXPECT_FALSE(t4.supports(t));
    EXPECT_EQ(t4.dtype_refusal(t), "is not supported on profile t4 (sm_75 has no FP8 tensor cores); use f16, or INT8 "
                                   "weights and activations (quantize_weight, linear_w8a8)");
  }
  EXPECT_EQ(t4.dtype_refusal(DType::bf16), "is not supported on profile t4 (sm_75 has no bf16); use f16");
  EXPECT_EQ(a100.dtype_refusal(DType::bf16), "");
}

TEST(Profiles, MatchDriverNames) {
  EXPECT_EQ(match_profile("NVIDIA H200", 90, 141LL << 30)->key, "h200");
  EXPECT_EQ(match_profile("NVIDIA H100 80GB HBM3", 90, 80LL << 30)->key, "h100-sxm");
  EXPECT_EQ(match_profile("NVIDIA A100-SXM4-40GB", 80, 40LL << 30)->key, "a100-40gb");
  EXPECT_EQ(match_profile("NVIDIA A100-SXM4-80GB", 80, 80LL << 30)->key, "a100-80gb");
  EXPECT_EQ(match_profile("Tesla T4", 75, 16LL << 30)->key, "t4");
  EXPECT_EQ(match_profile("NVIDIA L4", 89, 24LL << 30)->key, "l4");
  // Unknown GPU: the nearest older architecture supplies the facts; a pre-Turing GPU has no profile.
  EXPECT_EQ(match_profile("NVIDIA RTX 4090", 89, 24LL << 30)->key, "sm89");
  EXPECT_FALSE(match_profile("Tesla V100", 70, 16LL << 30).has_value());
}

TEST(Profiles, OverrideFromEnvironment) {
  std::optional<DeviceProfile> p;
  setenv("KERNELKIT_PROFILE", "t4", 1);
  ASSERT_TRUE(profile_override(&p).ok());
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->key, "t4");
  setenv("KERNELKIT_PROFILE", "bogus", 1);
  const Status s = profile_override(&p);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("KERNELKIT_PROFILE='bogus'"), std::string::npos) << s.message();
  setenv("KERNELKIT_PROFILE", "native", 1);
  ASSERT_TRUE(profile_override(&p).ok());
  EXPECT_FALSE(p.has_value());
  unsetenv("KERNELKIT_PROFILE");
}

// Rules that hold for every profile, op, dtype and shape.
TEST(Planner, RowNormRulesOnEveryProfile) {
  for (const DeviceProfile& prof : profile_table())
    for (const OpInfo& op : op_table())
      if (op.family == OpFamily::norm)
      for (DType dt : {DType::f32, DType::f16, DType::bf16})
        for (int64_t rows : kRows)
          for (int64_t hidden : kHidden) {
            LaunchPlan p;
            const Status s = plan_op(prof, op.id, {rows, hidden, 1, 16}, dt, &p);
            SCOPED_TRACE(prof.key + " " + std::string(op.name) + " " + std::string(dtype_name(dt)) + " " +
                         std::to_string(rows) + "x" + std::to_string(hidden));
            if (dt == DType::bf16 && !prof.bf16) {
              EXPECT_EQ(s.code(), StatusCode::unsupported);
              continue;
            }
            ASSERT_TRUE(s.ok()) << s.to_string();
            const int elem = static_cast<int>(dtype_size(dt));
            EXPECT_LE(p.vec * elem, 16);                // vectors are at most 16 bytes
            EXPECT_EQ(hidden % p.vec, 0);               // and divide the row
            if (hidden % (16 / elem) == 0) EXPECT_EQ(p.vec * elem, 16);  // full width whenever possible
            EXPECT_LE(p.block_threads, 1024);
            EXPECT_LE(p.block_threads, prof.max_threads_per_sm);
            EXPECT_GE(p.block_threads, 32);             // whole warps: the shuffles use a full mask
            EXPECT_EQ(p.block_threads % 32, 0);
            EXPECT_EQ(p.threads_per_row * p.rows_per_block, p.block_threads);
            // Every element is covered: threads x vectors per thread >= vectors in the row.
            EXPECT_GE(int64_t{p.threads_per_row} * p.vecs_per_thread * p.vec, hidden);
            EXPECT_LE(p.smem_bytes, prof.smem_per_block_optin);  // never above the opt-in maximum
            EXPECT_LE(p.smem_bytes, prof.smem_per_sm);
            EXPECT_EQ(p.smem_optin, p.smem_bytes > prof.smem_per_block_default);  // opt-in exactly when above 48 KB
            EXPECT_EQ(p.stage_offset % 16, 0);
            if (p.cached) {  // two stages of every row of the block
              const int64_t row_bytes =
                  hidden * elem *
                  (op.id == OpId::fused_add_rms_norm || op.id == OpId::fused_add_rms_norm_quant_int8 ||
                           op.id == OpId::fused_add_rms_norm_quant_fp8
                       ? 2
                       : 1);
              EXPECT_EQ(p.smem_bytes, p.stage_offset + 2 * p.rows_per_block * row_bytes);
            }
            EXPECT_GE(p.blocks_per_sm, 1);
            const int64_t row_groups = (rows + p.rows_per_block - 1) / p.rows_per_block;
            const int64_t wave = int64_t{prof.sms} * p.blocks_per_sm;
            if (p.waves == 0) EXPECT_EQ(p.grid, row_groups);  // a block a row group
            else if (row_groups >= wave) EXPECT_EQ(p.grid % prof.sms, 0) << "grid " << p.grid;  // multiple of SMs
            else EXPECT_EQ(p.grid, row_groups);
            // Held rows, and row groups over kRowStreamWaves waves: a block a group; else looping blocks.
            EXPECT_EQ(p.waves == 0, p.held > 0 || row_groups >= kRowStreamWaves * wave);
            EXPECT_EQ(p.grid_x, p.grid);  // 1-D: the kernels index blockIdx.x over row groups
            EXPECT_GT(p.occupancy, 0.0);
            EXPECT_LE(p.occupancy, 1.0);
          }
}

TEST(Planner, ElementwiseRules) {
  for (const DeviceProfile& prof : profile_table())
    for (OpId op : {OpId::silu_and_mul, OpId::gelu, OpId::geglu})
      for (DType dt : {DType::f32, DType::f16})
        for (int64_t rows : kRows)
          for (int64_t d : kHidden) {
            LaunchPlan p;
            ASSERT_TRUE(plan_op(prof, op, {rows, d, 1, 16}, dt, &p).ok());
            EXPECT_EQ(d % p.vec, 0);
            EXPECT_LE(p.vec * static_cast<int>(dtype_size(dt)), 16);
            if (d % (16 / static_cast<int>(dtype_size(dt))) == 0) EXPECT_EQ(p.vec * dtype_size(dt), 16u);
            EXPECT_EQ(p.block_threads, kElementwiseThreads);
            EXPECT_EQ(p.threads_per_row * p.rows_per_block, kElementwiseThreads);
            EXPECT_EQ(p.smem_bytes, 0);
            // grid.x blocks cover every vector of a row; grid.y blocks: one a row group (kActivationWaves 0), at
            // most 65535.
            const int64_t nvec = d / p.vec, grid_y = p.grid / p.grid_x;
            EXPECT_EQ(p.grid % p.grid_x, 0);
            EXPECT_GE(p.grid_x * p.threads_per_row, nvec);
            EXPECT_LT((p.grid_x - 1) * p.threads_per_row, nvec);
            if (nvec < kElementwiseThreads) EXPECT_GE(p.threads_per_row, nvec);
            const int64_t row_blocks = (rows + p.rows_per_block - 1) / p.rows_per_block;
            const int64_t wave = int64_t{prof.sms} * p.blocks_per_sm;
            EXPECT_EQ(grid_y, std::clamp<int64_t>(row_blocks, 1, 65535));
            if (row_blocks * p.grid_x >= 2 * wave) EXPECT_GT(p.grid, wave / 2) << "grid " << p.grid;  // fills the GPU
          }
}

struct Env {  // sets KERNELKIT_TUNE for a scope
  explicit Env(const char* v) { setenv("KERNELKIT_TUNE", v, 1); }
  ~Env() { unsetenv("KERNELKIT_TUNE"); }
};

// What plan_tile returns for a bf16 attention tile at head_dim d on the H200 profile under KERNELKIT_TUNE=tune.
StatusCode attention_plan_code(const char* tune, int d) {
  Env e(tune);
  TilePlan t;
  return plan_tile(profile("h200"), TileFamily::attention, DType::bf16, d, &t).code();
}

TEST(Planner, T4PlansFitTheT4) {
  const auto t4 = profile("t4");
  for (const OpInfo& op : op_table())
    for (DType dt : {DType::f32, DType::f16}) {
      if (op.family == OpFamily::attention) continue;  // tile plans: TilesFollowTheSeedTableAndFitSharedMemory
      if (op.family == OpFamily::quant) continue;  // their own plans: tests/quant/test_quant.cpp
      LaunchPlan p;
      ASSERT_TRUE(plan_op(t4, op.id, {65536, 4096, 1, 16}, dt, &p).ok());
      const int64_t groups = 65536 / p.rows_per_block;
      if (p.waves == 0)  // a block a row group (the element-wise ops' grid.y: at most 65535)
        EXPECT_EQ(p.grid, op.family == OpFamily::activation && !op_quant_out_dtype(op.id)
                              ? p.grid_x * std::min<int64_t>(groups, 65535)
                              : groups);
      else
        EXPECT_EQ(p.grid % 40, 0);                         // looping blocks: a multiple of the T4's 40 SMs
      EXPECT_LE(p.blocks_per_sm * p.block_threads, 1024);  // 1024 threads per SM on Turing
      EXPECT_LE(p.smem_bytes * p.blocks_per_sm, 64 * 1024);
      LaunchPlan bf;
      EXPECT_EQ(plan_op(t4, op.id, {65536, 4096, 1, 16}, DType::bf16, &bf).code(), StatusCode::unsupported);
    }
}

TEST(Planner, VectorWidthFollowsTheGcdRule) {
  const auto h200 = profile("h200");
  auto vec = [&](DType dt, int64_t hidden, int align) {
    LaunchPlan p;
    EXPECT_TRUE(plan_op(h200, OpId::rms_norm, {16, hidden, 1, align}, dt, &p).ok());
    return p.vec;
  };
  EXPECT_EQ(vec(DType::bf16, 4096, 16), 8);
  EXPECT_EQ(vec(DType::bf16, 500, 16), 4);   // gcd(8, 500) = 4
  EXPECT_EQ(vec(DType::bf16, 111, 16), 1);   // odd hidden: scalar
  EXPECT_EQ(vec(DType::f16, 769, 16), 1);
  EXPECT_EQ(vec(DType::f32, 4096, 16), 4);
  EXPECT_EQ(vec(DType::f32, 4098, 16), 2);
  EXPECT_EQ(vec(DType::bf16, 4096, 4), 2);   // a 4-byte-aligned pointer or stride caps it at 4 bytes
  EXPECT_EQ(vec(DType::f16, 4096, 2), 1);
}

TEST(Planner, RowsAreStagedInSharedMemoryWhenTwoStagesFit) {
  const auto h200 = profile("h200"), t4 = profile("t4");
  LaunchPlan p;
  Env general("rows_lean=0");  // the general kernels (the lean ones hold layer_norm's 4096-element rows)
  ASSERT_TRUE(plan_op(h200, OpId::layer_norm, {4096, 4096, 1, 16}, DType::bf16, &p).ok());  // rows that fill the GPU
  EXPECT_TRUE(p.cached);
  EXPECT_EQ(p.threads_per_row, 128);  // 512 vectors / 4 per thread
  EXPECT_EQ(p.rows_per_block, 2);     // 256-thread blocks
  // Scratch: two halves x 2 rows x 4 warps x a 2-float value; then two stages of 2 rows.
  EXPECT_EQ(p.smem_bytes, 2 * 2 * 4 * 2 * 4 + 2 * 2 * 4096 * 2);
  EXPECT_EQ(p.stage_offset, row_reduce_scratch_bytes(2, 128));
  // 1M bf16 = 2 MB a row: no stages fit, the passes re-read global memory.
  ASSERT_TRUE(plan_op(h200, OpId::layer_norm, {4, 1 << 20, 1, 16}, DType::bf16, &p).ok());
  EXPECT_FALSE(p.cached);
  EXPECT_EQ(p.threads_per_row, kRowNormMaxThreads);
  // The T4's 64 KB: 8192 f32 rows (32 KB) do not fit twice next to the scratch; 4096 do, with the opt-in.
  ASSERT_TRUE(plan_op(t4, OpId::rms_norm, {64, 8192, 1, 16}, DType::f32, &p).ok());
  EXPECT_FALSE(p.cached);
  Env e("rows_held=0");  // staged, not held in registers
  ASSERT_TRUE(plan_op(t4, OpId::fused_add_rms_norm, {64, 4096, 1, 16}, DType::f16, &p).ok());
  EXPECT_TRUE(p.cached);
  EXPECT_LE(p.smem_bytes, 64 * 1024);
}

TEST(Planner, RejectsWhatItCannotPlan) {
  const auto h200 = profile("h200");
  LaunchPlan p;
  EXPECT_EQ(plan_op(h200, OpId::rms_norm, {4, 0, 1, 16}, DType::f16, &p).code(), StatusCode::invalid_argument);
  EXPECT_EQ(plan_op(h200, OpId::rms_norm, {4, 64, 1, 16}, DType::i8, &p).code(), StatusCode::invalid_argument);
  const Status s = plan_op(profile("t4"), OpId::rms_norm, {4, 64, 1, 16}, DType::bf16, &p);
  EXPECT_NE(s.message().find("bf16"), std::string::npos);
  EXPECT_NE(s.message().find("t4"), std::string::npos);
}

TEST(Planner, TilesFollowTheSeedTableAndFitSharedMemory) {
  TilePlan t;
  // sm_90 profiles: the warp-specialized wgmma prefill at head_dim 64 and 128 where sm_90a code runs (TMA, 128-key
  // tiles, P V over all of O's columns).
  for (int d : {64, 128}) {
    ASSERT_TRUE(plan_tile(profile("h200"), TileFamily::attention, DType::bf16, d, &t).ok());
    EXPECT_TRUE(t.wgmma && t.tma && t.warp_specialized);
    const int rows = d == 64 ? kAttnWsMaxRows : kAttnWgmmaRows;  // three consumer warpgroups at head_dim 64
    EXPECT_EQ(t.block_m, rows);
    EXPECT_EQ(t.block_n, kAttnWgmmaTmaKeys);
    EXPECT_EQ(t.warps, 4 * (rows / 64 + 1));  // a producer warpgroup and the consumers
    EXPECT_EQ(t.stages, 2);
    EXPECT_EQ(t.pv_n, d);
    EXPECT_EQ(t.smem_bytes, 2 * (rows + 4 * 128) * d + 1024);  // Q + 2 x (K, V) + the 1024-byte alignment
  }
  // Without sm_90a code (a build for other archs, another GPU): the mma.sync kernel, two 16-row tiles a warp with
  // 64-key tiles (the measured choice on sm_90).
  ASSERT_TRUE(plan_tile(profile("h200"), TileFamily::attention, DType::bf16, 128, &t, false).ok());
  EXPECT_FALSE(t.wgmma);
  EXPECT_EQ(t.block_m, 128);
  EXPECT_EQ(t.block_n, kAttnWideKeys);
  EXPECT_EQ(t.warps, 4);
  ASSERT_TRUE(plan_tile(profile("h200"), TileFamily::attention, DType::bf16, 64, &t, false).ok());
  EXPECT_EQ(t.block_n, 64);
  EXPECT_EQ(t.warps, 4);
  // Head_dim 192 and 256: the warp-specialized kernel with 96- and 80-key tiles (193 and 225 KB), P V one
  // m64n192k16 / m64n256k16 a k-step; without sm_90a code the mma.sync kernel at 256 (192 included), one row tile a
  // warp.
  for (auto [d, keys] : {std::pair{192, 96}, std::pair{256, 80}}) {
    ASSERT_TRUE(plan_tile(profile("h200"), TileFamily::attention, DType::bf16, d, &t).ok());
    EXPECT_TRUE(t.wgmma && t.tma && t.warp_specialized);
    EXPECT_EQ(t.block_k, d);
    EXPECT_EQ(t.block_n, attn_ws_keys(d));
    EXPECT_EQ(t.block_n, keys);
    EXPECT_EQ(t.warps, 12);
    EXPECT_EQ(t.pv_n, d);
    EXPECT_EQ(t.rescale_slack, kAttnMaxRescaleSlack);
    EXPECT_EQ(t.smem_bytes, 2 * (128 + 4 * keys) * d + 1024);
    EXPECT_LE(t.smem_bytes, profile("h200").smem_per_block_optin);
    ASSERT_TRUE(plan_tile(profile("h200"), TileFamily::attention, DType::bf16, d, &t, false).ok());
    EXPECT_FALSE(t.wgmma);
    EXPECT_EQ(t.block_k, 256);
    EXPECT_EQ(t.block_n, 64);
    EXPECT_EQ(t.warps, 8);
    for (const char* refused :
         {"attn_wgmma=1", "attn_wgmma=2", "attn_wgmma=3,attn_bn=128", "attn_wgmma=3,attn_stages=3",
          "attn_wgmma=3,attn_pv_n=128", "attn_wgmma=3,attn_pv_n=64"}) {
      Env e(refused);  // the warp-specialized kernel only, 96 / 80- or 64-key tiles in two buffers, P V over all of O
      const Status s = plan_tile(profile("h200"), TileFamily::attention, DType::bf16, d, &t);
      EXPECT_FALSE(s.ok()) << refused << " d" << d;
      EXPECT_NE(s.message().find("attn_"), std::string::npos) << s.message();
    }
  }
  // attn_bn=64 past head_dim 128: the masked forms' 64-key tiles (attn_ws_masked_keys; 145 and 193 KB) for every
  // call. 96 and 80 keys are refused at every other head_dim and by the two-warpgroup kernel.
  for (auto [d, keys] : {std::pair{192, 96}, std::pair{256, 80}}) {
    {
      Env e("attn_bn=64");
      ASSERT_TRUE(plan_tile(profile("h200"), TileFamily::attention, DType::bf16, d, &t).ok());
      EXPECT_TRUE(t.warp_specialized);
      EXPECT_EQ(t.block_n, attn_ws_masked_keys(d));
      EXPECT_EQ(t.block_n, 64);
      EXPECT_EQ(t.smem_bytes, 2 * (128 + 4 * 64) * d + 1024);
    }
    const std::string setting = "attn_bn=" + std::to_string(keys);
    Env e(setting.c_str());
    ASSERT_TRUE(plan_tile(profile("h200"), TileFamily::attention, DType::bf16, d, &t).ok()) << setting;
    EXPECT_EQ(t.block_n, keys);
    for (int other : {64, 128, 192, 256}) {
      if (other == d) continue;
      const Status s = plan_tile(profile("h200"), TileFamily::attention, DType::bf16, other, &t);
      EXPECT_EQ(s.code(), StatusCode::invalid_argument) << setting << " d" << other;
      EXPECT_NE(s.message().find("attn_bn " + std::to_string(keys)), std::string::npos) << s.message();
    }
    EXPECT_FALSE(plan_tile(profile("a100"), TileFamily::attention, DType::bf16, d, &t).ok());  // mma.sync: 32 / 64
    // A call's tile: the plan's for plain dense calls; 64 keys for masked and packed varlen ones.
    EXPECT_EQ(attn_ws_call_keys(d, keys, true), keys);
    EXPECT_EQ(attn_ws_call_keys(d, keys, false), 64);
    EXPECT_EQ(attn_ws_call_keys(d, 64, true), 64);  // attn_bn=64
    EXPECT_EQ(attn_ws_call_keys(d, 64, false), 64);
  }
  for (int d : {64, 128})  // one tile for every call
    for (bool plain_dense : {false, true}) EXPECT_EQ(attn_ws_call_keys(d, 128, plain_dense), 128);
  EXPECT_EQ(attention_plan_code("attn_wgmma=2,attn_bn=96", 128), StatusCode::invalid_argument);
  // The plan's head_dim for each head_dim: the kernel's, with 136 .. 192 on 192.
  for (int d = 8; d <= kAttnMaxHeadDim; d += 8)
    EXPECT_EQ(attention_plan_head_dim(d), d <= 64 ? 64 : d <= 128 ? 128 : d <= 192 ? 192 : 256) << d;
  ASSERT_TRUE(plan_tile(profile("a100"), TileFamily::attention, DType::f16, 128, &t).ok());
  EXPECT_EQ(t.block_m, 128);
  EXPECT_EQ(t.block_n, 32);  // sm_80: 32-key tiles keep S and O in registers with less spill
  EXPECT_TRUE(t.smem_optin);  // 64 KB: above the 48 KB default
  ASSERT_TRUE(plan_tile(profile("t4"), TileFamily::attention, DType::f16, 128, &t).ok());
  EXPECT_EQ(t.block_m, 64);
  EXPECT_EQ(t.block_n, 32);
  EXPECT_EQ(plan_tile(profile("t4"), TileFamily::attention, DType::bf16, 128, &t).code(), StatusCode::unsupported);
  ASSERT_TRUE(plan_tile(profile("h200"), TileFamily::matmul, DType::bf16, 0, &t).ok());
  EXPECT_EQ(t.block_m, 128);
  EXPECT_EQ(t.block_n, 128);
  ASSERT_TRUE(plan_tile(profile("t4"), TileFamily::matmul, DType::f16, 0, &t).ok());
  EXPECT_EQ(t.block_m, 64);
  EXPECT_EQ(t.block_n, 64);
  EXPECT_EQ(plan_tile(profile("h200"), TileFamily::attention, DType::f16, 96, &t).code(),
            StatusCode::invalid_argument);
  // Every mma.sync tile of every profile fits its opt-in maximum, and asks for the opt-in exactly when above 48 KB.
  // Head_dim 192 plans the kernel at 256 (attention_plan_head_dim).
  for (const auto& prof : profile_table())
    for (int d : {64, 128, 192, 256}) {
      ASSERT_TRUE(plan_tile(prof, TileFamily::attention, DType::f16, d, &t, false).ok()) << prof.key << " d" << d;
      EXPECT_EQ(t.block_k, d == 192 ? 256 : d) << prof.key;
      EXPECT_LE(t.smem_bytes, prof.smem_per_block_optin) << prof.key << " d" << d;
      EXPECT_EQ(t.smem_optin, t.smem_bytes > prof.smem_per_block_default);
      EXPECT_GE(t.stages, 1);
      // The tiles with prefill kernels (cuda/attention/flash_prefill.cuh, dispatch_attention_tile).
      // Two 16-row tiles a warp (4 warps for 128 rows) from sm_80 on up to head_dim 128, else one.
      const int mw = prof.sm >= 80 && d <= 128 ? 2 : 1;
      EXPECT_EQ(t.warps, t.block_m / (16 * mw)) << prof.key << " d" << d;
      const bool has_kernel = (t.block_m == 128 && (t.block_n == 64 || t.block_n == 32)) ||
                              (t.block_m == 64 && t.block_n == 32 && mw == 1);
      // see launch_flash_prefill and kAttnWideKeys: 64-key tiles at head_dim 128 on sm_90 profiles only
      const bool fits_registers = mw == 1 || d == 64 || (d == 128 && (t.block_n == 32 || prof.sm >= 90));
      EXPECT_TRUE(fits_registers) << prof.key << " d" << d << ": " << t.to_string();
      EXPECT_TRUE(has_kernel) << prof.key << " d" << d << ": " << t.to_string();
    }
}


TEST(Planner, DecodeSplitsFillTheGpuAndStagesFitSharedMemory) {
  DecodePlan p;
  for (const auto& prof : profile_table())
    for (int d : {64, 128, 256}) {
      // One sequence, 8 KV heads, GQA 4: 8 blocks alone would idle the GPU, so the keys are split.
      ASSERT_TRUE(plan_decode(prof, d, 1, 8, 4, 32, 32768, &p).ok());
      EXPECT_EQ(p.tensor_cores, d <= 128) << prof.key;  // the tensor-core kernel wherever it has one
      // Deeper rings for the tensor-core kernel at head_dim 128 where an SM holds two 3-stage blocks (96 KB each):
      // 4 stages, one block an SM, as the split grid is then one wave. 2 stages elsewhere.
      const bool deep = d == 128 && prof.smem_per_sm >= 2 * 96 * 1024;
      EXPECT_EQ(p.stages, deep ? 4 : 2) << prof.key << " d" << d;
      EXPECT_EQ(p.blocks_per_sm, deep ? 1 : p.blocks_per_sm) << prof.key;
      EXPECT_LE(p.grid, deep ? prof.sms : p.grid) << prof.key;
      // warps x stages x (K, V) x (16-key tiles, or 1024 elements a warp tile on CUDA cores) x 2 B
      EXPECT_EQ(p.smem_bytes, 4 * p.stages * 2 * (p.tensor_cores ? 16 * d : 1024) * 2) << prof.key;
      EXPECT_LE(p.smem_bytes, prof.smem_per_block_optin) << prof.key;
      EXPECT_EQ(p.smem_optin, p.smem_bytes > prof.smem_per_block_default) << prof.key;
      EXPECT_EQ(p.rows_per_block, 4);  // GQA 4, one token: no padded rows
      EXPECT_EQ(p.row_groups, 1);
      EXPECT_GT(p.splits, 1);
      EXPECT_EQ(p.chunk % p.block_n, 0);
      EXPECT_GE(p.splits * p.chunk, 32768);
      EXPECT_LT((p.splits - 1) * p.chunk, 32768);  // no split is empty for a full cache
      EXPECT_EQ(p.workspace_bytes, p.splits * 32 * (d + 1) * 4);
    }
  // A large batch fills the GPU alone: one split, no workspace; 40 query rows per KV head -> 5 row groups of 8.
  ASSERT_TRUE(plan_decode(profile("h200"), 128, 256, 8, 40, 256 * 320, 4096, &p).ok());
  EXPECT_EQ(p.splits, 1);
  EXPECT_EQ(p.rows_per_block, 8);
  EXPECT_EQ(p.row_groups, 5);
  EXPECT_EQ(p.workspace_bytes, 0);
  EXPECT_EQ(plan_decode(profile("h200"), 96, 1, 1, 1, 1, 16, &p).code(), StatusCode::invalid_argument);
  // The kernel's real residency (registers) caps the estimate: fewer resident blocks, fewer splits (the 2-stage ring,
  // 64 KB: 3 blocks an SM by shared memory).
  DecodePlan wide, capped, b32;
  {
    Env two_stages("decode_stages=2");
    ASSERT_TRUE(plan_decode(profile("h200"), 128, 1, 8, 4, 32, 32768, &wide).ok());
    ASSERT_TRUE(plan_decode(profile("h200"), 128, 1, 8, 4, 32, 32768, &capped, 2).ok());
    EXPECT_EQ(capped.blocks_per_sm, 2);
    EXPECT_LT(capped.splits, wide.splits);
    EXPECT_LE(capped.grid, 2 * profile("h200").sms);
    // b32 h_kv 8, GQA 4, 4096 keys, 3 resident blocks an SM (both kernels' R = 4 registers, and 64 KB of shared memory
    // for the tensor-core one): 256 blocks against waves of 396. Two splits would leave a second wave 30% full; three
    // fill two waves: 768 blocks of 22 tiles of 64 keys (tensor cores) or 43 tiles of 32 (CUDA cores).
    ASSERT_TRUE(plan_decode(profile("h200"), 128, 32, 8, 4, 32 * 32, 4096, &b32, 3).ok());
    EXPECT_EQ(b32.splits, 3);
    EXPECT_EQ(b32.grid, 768);
    EXPECT_EQ(b32.block_n, 64);
    EXPECT_EQ(b32.chunk, 22 * b32.block_n);
  }
  {
    Env cuda_cores("decode_tc=0");
    ASSERT_TRUE(plan_decode(profile("h200"), 128, 32, 8, 4, 32 * 32, 4096, &b32, 3).ok());
    EXPECT_FALSE(b32.tensor_cores);
    EXPECT_EQ(b32.splits, 3);
    EXPECT_EQ(b32.grid, 768);
    EXPECT_EQ(b32.block_n, 32);
    EXPECT_EQ(b32.chunk, 43 * b32.block_n);
  }
  // The planner's own ring there: 3 stages (96 KB), 2 blocks an SM, so the 256 blocks are one wave of 264 unsplit.
  ASSERT_TRUE(plan_decode(profile("h200"), 128, 32, 8, 4, 32 * 32, 4096, &b32, 3).ok());
  EXPECT_EQ(b32.stages, 3);
  EXPECT_EQ(b32.blocks_per_sm, 2);
  EXPECT_EQ(b32.splits, 1);
  EXPECT_EQ(b32.grid, 256);
}

TEST(OpInfo, BytesAndFlopsAreDefinedOnce) {
  const OpShape s{65536, 4096, 1, 16};
  // rms_norm bf16: x read + out written + weight read.
  EXPECT_EQ(op_bytes(OpId::rms_norm, s, DType::bf16), 2ull * (2ull * 65536 * 4096 + 4096));
  // fused add: x and residual read, both written.
  EXPECT_EQ(op_bytes(OpId::fused_add_rms_norm, s, DType::bf16), 2ull * (4ull * 65536 * 4096 + 4096));
  EXPECT_EQ(op_bytes(OpId::ada_layer_norm, {8, 4096, 2, 16}, DType::f32), 4ull * (2ull * 8 * 4096 + 2 * 2 * 4096));
  EXPECT_DOUBLE_EQ(op_flops(OpId::rms_norm, s), 4.0 * 65536 * 4096);
  for (const auto& prof : profile_table()) EXPECT_TRUE(op_memory_bound(OpId::rms_norm_gelu, s, DType::f16, prof));
  EXPECT_EQ(parse_op("layer_norm"), OpId::layer_norm);
  for (const OpInfo& op : op_table()) EXPECT_EQ(op_info(op.id).id, op.id) << op.name;  // the table is indexed by id
  // silu_and_mul bf16 [rows, d]: both halves of [rows, 2d] read, [rows, d] written.
  EXPECT_EQ(op_bytes(OpId::silu_and_mul, {16384, 11008, 1, 16}, DType::bf16), 2ull * 3 * 16384 * 11008);
  EXPECT_FALSE(parse_op("nope").has_value());
}

// KERNELKIT_TUNE forces the choices that have a compiled alternative, and refuses what has none.
TEST(Planner, TuneVariableForcesAlternativesAndRefusesTheRest) {
  const auto h200 = profile("h200");
  TilePlan t;
  DecodePlan d;
  LaunchPlan l;
  OpShape gemv{1, 4096, 1, 16};
  gemv.out_features = 11008;
  {
    Env e("attn_wgmma=0,attn_mw=1,decode_tc=0,decode_stages=4,gemv_stages=3");
    ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).ok());
    EXPECT_EQ(t.warps, 8);  // one row tile a warp: the 128x64 tile of before
    EXPECT_EQ(t.block_n, 64);
    ASSERT_TRUE(plan_decode(h200, 128, 1, 8, 4, 32, 4096, &d).ok());
    EXPECT_EQ(d.stages, 4);
    EXPECT_EQ(d.smem_bytes, 64 * 1024);
    EXPECT_TRUE(d.smem_optin);
    ASSERT_TRUE(plan_op(h200, OpId::linear_w8a16, gemv, DType::bf16, &l).ok());
    EXPECT_EQ(l.stages, 3);
    EXPECT_EQ(l.smem_bytes, 3 * 4 * l.block_threads * 16);  // the ring: 3 x 4 rows x 16 bytes a thread
  }
  {
    // e4m3 caches on tensor cores: 32-key tiles (b16 h_kv 8: 128 blocks, one wave at one block an SM, so 4 stages of
    // 8 KB a warp); 16-bit caches 16-key tiles of the same bytes.
    ASSERT_TRUE(plan_decode(h200, 128, 16, 8, 4, 16 * 32, 8192, &d, 0, DType::f8e4m3).ok());
    EXPECT_EQ(d.block_n, 4 * kDecodeFp8TcTileKeys);
    EXPECT_EQ(d.stages, kDecodeDeepStages);
    EXPECT_EQ(d.smem_bytes, 128 * 1024);
    EXPECT_EQ(d.splits, 1);
    ASSERT_TRUE(plan_decode(h200, 128, 16, 8, 4, 16 * 32, 8192, &d, 0, DType::bf16).ok());
    EXPECT_EQ(d.block_n, 4 * kDecodeTcTileKeys);
    EXPECT_EQ(d.smem_bytes, 128 * 1024);
  }
  {
    Env e("gemv_stages=2");  // the other keys keep the planner's choice
    ASSERT_TRUE(plan_op(h200, OpId::linear_w8a16, gemv, DType::bf16, &l).ok());
    EXPECT_EQ(l.stages, 2);
    ASSERT_TRUE(plan_decode(h200, 128, 1, 8, 4, 32, 4096, &d).ok());
    EXPECT_EQ(d.stages, kDecodeDeepStages);  // one wave of one block an SM (DecodeSplitsFillTheGpu...)
    ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).ok());
    EXPECT_TRUE(t.tma);  // the TMA-fed wgmma prefill
  }
  for (const char* bad : {"attn_mw", "attn_mw=", "attn_mw=x", "warps=2", "attn_mw=2;decode_stages=2", "attn_mw=1x",
                          "attn_mw=99999999999"}) {
    Env e(bad);
    const Status s = plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t);
    EXPECT_EQ(s.code(), StatusCode::invalid_argument) << bad;
    EXPECT_NE(s.message().find("KERNELKIT_TUNE"), std::string::npos) << s.message();
  }
  {
    Env e("attn_wgmma=0,attn_mw=2");  // the mma.sync kernel has one row tile a warp at head_dim 256
    EXPECT_EQ(plan_tile(h200, TileFamily::attention, DType::bf16, 256, &t).code(), StatusCode::unsupported);
  }
  {
    Env e("attn_mw=2");  // the T4's 64-row tiles have no two-tile kernel
    EXPECT_EQ(plan_tile(profile("t4"), TileFamily::attention, DType::f16, 64, &t).code(), StatusCode::unsupported);
  }
  {
    Env e("attn_mw=3");
    EXPECT_EQ(plan_tile(h200, TileFamily::attention, DType::bf16, 64, &t).code(), StatusCode::invalid_argument);
  }
  {
    Env e("decode_stages=7");  // past kDecodeMaxStages
    EXPECT_EQ(plan_decode(h200, 128, 1, 8, 4, 32, 4096, &d).code(), StatusCode::invalid_argument);
  }
  {
    DecodePlan base;  // decode_rotate=1: an order of the tiles; the plan is otherwise the default's
    ASSERT_TRUE(plan_decode(h200, 128, 64, 8, 4, 64 * 32, 2048, &base).ok());
    EXPECT_FALSE(base.rotate);
    {
      Env e("decode_rotate=1");
      ASSERT_TRUE(plan_decode(h200, 128, 64, 8, 4, 64 * 32, 2048, &d).ok());
    }
    EXPECT_TRUE(d.rotate);
    EXPECT_EQ(d.splits, base.splits);
    EXPECT_EQ(d.stages, base.stages);
    EXPECT_NE(d.to_string().find("rotated"), std::string::npos) << d.to_string();
    Env e("decode_rotate=2");
    EXPECT_EQ(plan_decode(h200, 128, 64, 8, 4, 64 * 32, 2048, &d).code(), StatusCode::invalid_argument);
  }
  {
    // decode_kt=1: the e4m3 tensor-core kernel with the keys on M; the plan is otherwise the default's.
    DecodePlan base;
    ASSERT_TRUE(plan_decode(h200, 128, 16, 8, 4, 16 * 32, 8192, &base, 0, DType::f8e4m3).ok());
    EXPECT_FALSE(base.keys_on_m);
    {
      Env e("decode_kt=1");
      ASSERT_TRUE(plan_decode(h200, 128, 16, 8, 4, 16 * 32, 8192, &d, 0, DType::f8e4m3).ok());
      EXPECT_TRUE(d.keys_on_m);
      EXPECT_EQ(d.splits, base.splits);
      EXPECT_EQ(d.stages, base.stages);
      EXPECT_EQ(d.smem_bytes, base.smem_bytes);
      EXPECT_NE(d.to_string().find("keys on M"), std::string::npos) << d.to_string();
      // Only that kernel at head_dim 128 has the variant: a 16-bit cache or head_dim 64 is refused with the reason.
      Status s = plan_decode(h200, 128, 16, 8, 4, 16 * 32, 8192, &d, 0, DType::bf16);
      EXPECT_EQ(s.code(), StatusCode::unsupported);
      EXPECT_NE(s.message().find("decode_kt=1"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find("bf16 cache"), std::string::npos) << s.message();
      s = plan_decode(h200, 64, 16, 8, 4, 16 * 32, 8192, &d, 0, DType::f8e4m3);
      EXPECT_EQ(s.code(), StatusCode::unsupported);
      EXPECT_NE(s.message().find("head_dim 64"), std::string::npos) << s.message();
    }
    for (const char* setting : {"decode_kt=1,decode_tc=0", "decode_kt=1,decode_f16mma=0"}) {  // its MMAs are f16 ones
      Env e(setting);
      const Status s = plan_decode(h200, 128, 16, 8, 4, 16 * 32, 8192, &d, 0, DType::f8e4m3);
      EXPECT_EQ(s.code(), StatusCode::unsupported) << setting;
      EXPECT_NE(s.message().find(std::string(setting).substr(12)), std::string::npos) << s.message();
    }
  }
  {
    Env e("decode_stages=6");  // 6 x 4 warps x 8 KB: Hopper's shared memory holds one such block, the A100's none
    ASSERT_TRUE(plan_decode(h200, 128, 1, 8, 4, 32, 4096, &d).ok());
    EXPECT_EQ(d.smem_bytes, 192 * 1024);
    EXPECT_EQ(d.blocks_per_sm, 1);
    EXPECT_EQ(plan_decode(profile("a100"), 128, 1, 8, 4, 32, 4096, &d).code(), StatusCode::invalid_argument);
  }
  {
    Env e("decode_tc=0,decode_stages=4");  // 64 KB: exactly the T4 profile's opt-in maximum
    EXPECT_TRUE(plan_decode(profile("t4"), 128, 1, 8, 4, 32, 4096, &d).ok());
  }
  {
    Env e("decode_stages=3");  // the tensor-core tiles: 96 KB at head_dim 128, more than the T4's 64 KB
    EXPECT_EQ(plan_decode(profile("t4"), 128, 1, 8, 4, 32, 4096, &d).code(), StatusCode::invalid_argument);
    EXPECT_TRUE(plan_decode(h200, 128, 1, 8, 4, 32, 4096, &d).ok());
  }
  {
    Env e("gemv_stages=1");
    EXPECT_EQ(plan_op(h200, OpId::linear_w8a16, gemv, DType::bf16, &l).code(), StatusCode::invalid_argument);
  }
  {
    // CUDA cores: 128 tiles of 32 keys, 16 splits of 8 tiles; 256-thread GEMV blocks
    Env e("decode_tc=0,decode_splits=16,gemv_kwarps=8");
    ASSERT_TRUE(plan_decode(h200, 128, 1, 8, 4, 32, 4096, &d).ok());
    EXPECT_EQ(d.splits, 16);
    EXPECT_EQ(d.chunk, 256);
    EXPECT_EQ(d.grid, 16 * 8);
    EXPECT_EQ(d.workspace_bytes, 16 * 32 * 129 * 4);
    ASSERT_TRUE(plan_op(h200, OpId::linear_w8a16, gemv, DType::bf16, &l).ok());
    EXPECT_EQ(l.k_warps, 8);
    EXPECT_EQ(l.block_threads, 256);
  }
  {
    Env e("decode_splits=1");  // one split: no workspace, no merge
    ASSERT_TRUE(plan_decode(h200, 128, 1, 8, 4, 32, 4096, &d).ok());
    EXPECT_EQ(d.splits, 1);
    EXPECT_EQ(d.workspace_bytes, 0);
  }
  {
    // b64 h32/8 ctx 2048 in 2 stages: 512 blocks against 396 resident (3 an SM). Unsplit by default; past one wave
    // the model takes 3 splits of 11 of the 32 tiles (4 waves x 13 tile steps against 2 x 34). The default ring (3
    // stages, 2 blocks an SM) leaves it unsplit too.
    ASSERT_TRUE(plan_decode(h200, 128, 64, 8, 4, 64 * 32, 2048, &d).ok());
    EXPECT_EQ(d.stages, 3);
    EXPECT_EQ(d.blocks_per_sm, 2);
    EXPECT_EQ(d.splits, 1);
    Env e("decode_waves=1,decode_stages=2");
    ASSERT_TRUE(plan_decode(h200, 128, 64, 8, 4, 64 * 32, 2048, &d).ok());
    EXPECT_EQ(d.blocks_per_sm, 3);
    EXPECT_EQ(d.splits, 3);
    EXPECT_EQ(d.chunk, 11 * 64);
  }
  {
    Env e("decode_tc=0,decode_splits=100");  // at most 100: 128 tiles in chunks of 2 make 64 splits
    ASSERT_TRUE(plan_decode(h200, 128, 1, 8, 4, 32, 4096, &d).ok());
    EXPECT_EQ(d.splits, 64);
    EXPECT_EQ(d.chunk, 64);
  }
  {
    // The streaming ops' work split: vectors per thread of a row reduction and waves of blocks (row ops, element-wise).
    const OpShape big{65536, 4096, 1, 16};
    LaunchPlan base_rows, base_ew;
    ASSERT_TRUE(plan_op(h200, OpId::softmax, big, DType::bf16, &base_rows).ok());
    ASSERT_TRUE(plan_op(h200, OpId::silu_and_mul, big, DType::bf16, &base_ew).ok());
    EXPECT_EQ(base_rows.vecs_per_thread, 2);
    Env e("rows_vpt=1,rows_waves=3,ew_waves=2");
    ASSERT_TRUE(plan_op(h200, OpId::softmax, big, DType::bf16, &l).ok());
    EXPECT_EQ(l.vecs_per_thread, 1);
    EXPECT_EQ(l.threads_per_row, 2 * base_rows.threads_per_row);  // 512 vectors of 8: 512 threads, 1 each
    EXPECT_EQ(l.grid, 3 * static_cast<int64_t>(h200.sms) * l.blocks_per_sm);
    ASSERT_TRUE(plan_op(h200, OpId::rms_norm, big, DType::bf16, &l).ok());
    EXPECT_EQ(l.vecs_per_thread, 1);
    ASSERT_TRUE(plan_op(h200, OpId::silu_and_mul, big, DType::bf16, &l).ok());
    EXPECT_EQ(l.grid, 2 * static_cast<int64_t>(h200.sms) * l.blocks_per_sm);  // two waves of blocks
    EXPECT_EQ(base_ew.grid, base_ew.grid_x * 65535);  // the default: a block a row (65536 rows, capped at 65535)
    ASSERT_TRUE(plan_op(h200, OpId::rms_norm, OpShape{7, 4096, 1, 16}, DType::bf16, &l).ok());
    EXPECT_EQ(l.grid, plan::ceil_div(7, l.rows_per_block));  // never more blocks than row groups
  }
  {
    // The activations' one-row form: a block for every (row group, column block), also past the 2-D grid's 65535
    // rows of blocks, one vector a thread and twice the blocks an SM; in waves of blocks (ew_waves), the loop.
    LaunchPlan base;
    ASSERT_TRUE(plan_op(h200, OpId::silu_and_mul, OpShape{16384, 4096, 1, 16}, DType::bf16, &base).ok());
    EXPECT_EQ(base.vecs_per_thread, kElementwiseVecsPerThread);
    Env e("ew_one_row=1");
    ASSERT_TRUE(plan_op(h200, OpId::silu_and_mul, OpShape{16384, 4096, 1, 16}, DType::bf16, &l).ok());
    EXPECT_EQ(l.vecs_per_thread, 1);
    EXPECT_EQ(l.blocks_per_sm, kElementwiseOneRowMinBlocks);
    EXPECT_EQ(l.blocks_per_sm, 2 * base.blocks_per_sm);
    EXPECT_EQ(l.grid, base.grid);
    ASSERT_TRUE(plan_op(profile("t4"), OpId::gelu, OpShape{16384, 4096, 1, 16}, DType::f16, &l).ok());
    EXPECT_EQ(l.vecs_per_thread, 1);
    EXPECT_EQ(l.blocks_per_sm, 1024 / kElementwiseThreads);  // the T4's SM holds 1024 threads
    ASSERT_TRUE(plan_op(h200, OpId::silu_and_mul, OpShape{65536, 4096, 1, 16}, DType::bf16, &l).ok());
    EXPECT_EQ(l.vecs_per_thread, 1);
    EXPECT_EQ(l.grid, 65536 * l.grid_x);  // the 2-D default stops at 65535 rows of blocks
    ASSERT_TRUE(plan_op(h200, OpId::rotary_embedding, OpShape{16384, 128, 1, 16}, DType::bf16, &l).ok());
    EXPECT_EQ(l.vecs_per_thread, kElementwiseVecsPerThread);  // RoPE's kernel has no such form
    Env waves("ew_one_row=1,ew_waves=1");
    ASSERT_TRUE(plan_op(h200, OpId::silu_and_mul, OpShape{16384, 4096, 1, 16}, DType::bf16, &l).ok());
    EXPECT_EQ(l.vecs_per_thread, kElementwiseVecsPerThread);
  }
  {
    Env e("softmax_stage=1");  // the norms' two cp.async stages for rows held in registers; not for longer rows
    ASSERT_TRUE(plan_op(h200, OpId::softmax, OpShape{65536, 4096, 1, 16}, DType::bf16, &l).ok());
    EXPECT_TRUE(l.cached);
    EXPECT_EQ(l.smem_bytes, l.stage_offset + 2 * l.rows_per_block * 4096 * 2);
    ASSERT_TRUE(plan_op(h200, OpId::causal_softmax, OpShape{64, 65536, 1, 16}, DType::bf16, &l).ok());
    EXPECT_GT(l.vecs_per_thread, kRowVecsPerThread);
    EXPECT_FALSE(l.cached);
  }
  {
    // The defaults. Softmax: rows straight into registers; row groups over 4 waves of blocks: a block a group.
    ASSERT_TRUE(plan_op(h200, OpId::softmax, OpShape{65536, 4096, 1, 16}, DType::bf16, &l).ok());
    EXPECT_FALSE(l.cached);
    EXPECT_EQ(l.waves, 0);
    EXPECT_EQ(l.grid, plan::ceil_div(65536, l.rows_per_block));
    // RMS norms up to 512 threads a row are held, a block a row group at any row count.
    for (auto [rows, hidden] : {std::pair{16, 4096}, std::pair{65536, 4096}, std::pair{7, 8192}}) {
      ASSERT_TRUE(plan_op(h200, OpId::rms_norm, OpShape{rows, hidden, 1, 16}, DType::bf16, &l).ok());
      EXPECT_EQ(l.held, kRowHeldVecs) << rows << "x" << hidden;
      EXPECT_FALSE(l.cached);
      EXPECT_EQ(l.waves, 0);
      EXPECT_EQ(l.grid, rows);
    }
    // Longer RMS rows and the layer norm rows the lean kernel does not take are staged: a block a group over 4 waves
    // of them, else one wave.
    ASSERT_TRUE(plan_op(h200, OpId::fused_add_rms_norm, OpShape{4096, 14336, 1, 16}, DType::bf16, &l).ok());
    EXPECT_EQ(l.held, 0);
    EXPECT_TRUE(l.cached);
    EXPECT_EQ(l.waves, 0);
    Env general("rows_lean=0");
    ASSERT_TRUE(plan_op(h200, OpId::layer_norm, OpShape{65536, 4096, 1, 16}, DType::bf16, &l).ok());
    EXPECT_EQ(l.held, 0);
    EXPECT_TRUE(l.cached);
    EXPECT_EQ(l.waves, 0);
    EXPECT_EQ(l.grid, plan::ceil_div(65536, l.rows_per_block));
    ASSERT_TRUE(plan_op(h200, OpId::layer_norm, OpShape{2048, 4096, 1, 16}, DType::bf16, &l).ok());
    EXPECT_EQ(l.waves, 1);  // 1024 groups of 2 rows: under 4 waves of 132 x 4 blocks
    EXPECT_EQ(l.grid, static_cast<int64_t>(h200.sms) * l.blocks_per_sm);
    Env e("rows_held=0,rows_waves=1");  // the staged plans, one wave of looping blocks
    ASSERT_TRUE(plan_op(h200, OpId::rms_norm, OpShape{65536, 4096, 1, 16}, DType::bf16, &l).ok());
    EXPECT_EQ(l.held, 0);
    EXPECT_TRUE(l.cached);
    EXPECT_EQ(l.grid, static_cast<int64_t>(h200.sms) * l.blocks_per_sm);
  }
  {
    {
      // The general held bf16 rms_norm kernel capped at 32 registers (rows_cap=0: uncapped); nothing else is.
      Env general("rows_lean=0");
      ASSERT_TRUE(plan_op(h200, OpId::rms_norm, OpShape{65536, 4096, 1, 16}, DType::bf16, &l).ok());
      EXPECT_EQ(l.min_blocks, 2);
      {
        Env uncapped("rows_lean=0,rows_cap=0");
        ASSERT_TRUE(plan_op(h200, OpId::rms_norm, OpShape{65536, 4096, 1, 16}, DType::bf16, &l).ok());
        EXPECT_EQ(l.min_blocks, 1);
      }
      for (OpId op : {OpId::rms_norm_quant_fp8, OpId::fused_add_rms_norm_quant_int8}) {  // rows_cap=2: these too
        ASSERT_TRUE(plan_op(h200, op, OpShape{65536, 4096, 1, 16}, DType::bf16, &l).ok());
        EXPECT_EQ(l.min_blocks, 1);
        Env quant("rows_lean=0,rows_cap=2");
        ASSERT_TRUE(plan_op(h200, op, OpShape{65536, 4096, 1, 16}, DType::bf16, &l).ok());
        EXPECT_EQ(l.min_blocks, 2);
        ASSERT_TRUE(plan_op(h200, op, OpShape{65536, 4096, 1, 16}, DType::f16, &l).ok());
        EXPECT_EQ(l.min_blocks, 1);
      }
      // rows_onepass=1: the held norm + quantization rows only.
      for (OpId op : {OpId::rms_norm_quant_fp8, OpId::fused_add_rms_norm_quant_int8, OpId::rms_norm}) {
        ASSERT_TRUE(plan_op(h200, op, OpShape{65536, 4096, 1, 16}, DType::bf16, &l).ok());
        EXPECT_FALSE(l.one_pass);
        Env one("rows_onepass=1");
        ASSERT_TRUE(plan_op(h200, op, OpShape{65536, 4096, 1, 16}, DType::bf16, &l).ok());
        EXPECT_EQ(l.one_pass, op != OpId::rms_norm);
      }
      for (auto [op, dtype] : {std::pair{OpId::rms_norm, DType::f16}, std::pair{OpId::fused_add_rms_norm, DType::bf16},
                               std::pair{OpId::layer_norm, DType::bf16}}) {
        ASSERT_TRUE(plan_op(h200, op, OpShape{65536, 4096, 1, 16}, dtype, &l).ok());
        EXPECT_EQ(l.min_blocks, 1) << op_info(op).name;
      }
    }
    {
      // The lean kernels: rows of whole warps (256 to 512 threads), one a block, of 16-byte vectors, at most 2 a
      // thread; by default uncapped (1) but for layer_norm (3); rows_lean=N forces N, 0 the general kernels.
      for (auto [op, want] : {std::pair{OpId::rms_norm, 1},
                              {OpId::fused_add_rms_norm, 1},
                              {OpId::layer_norm, 3},
                              {OpId::softmax, 1},
                              {OpId::causal_softmax, 1},
                              {OpId::ada_layer_norm, 0},
                              {OpId::rms_norm_gelu, 0}}) {
        ASSERT_TRUE(plan_op(h200, op, OpShape{65536, 4096, 1, 16}, DType::bf16, &l).ok());
        EXPECT_EQ(l.lean, want) << op_info(op).name;
        EXPECT_EQ(l.min_blocks, 1) << op_info(op).name;
      }
      ASSERT_TRUE(plan_op(h200, OpId::layer_norm, OpShape{65536, 4100, 1, 16}, DType::bf16, &l).ok());
      EXPECT_EQ(l.lean, 0);  // 4-element vectors: staged, as without the lean kernel
      EXPECT_EQ(l.held, 0);
      EXPECT_TRUE(l.cached);
      // 128 threads a row: the lean kernel's one row a block (kRowLeanMinThreads)
      for (OpId op : {OpId::rms_norm, OpId::layer_norm, OpId::softmax}) {
        ASSERT_TRUE(plan_op(h200, op, OpShape{65536, 2048, 1, 16}, DType::bf16, &l).ok());
        EXPECT_EQ(l.lean, op == OpId::layer_norm ? 3 : 1) << op_info(op).name;
        EXPECT_EQ(l.threads_per_row, 128);
        EXPECT_EQ(l.rows_per_block, 1);
        EXPECT_EQ(l.grid, 65536);
      }
      ASSERT_TRUE(plan_op(h200, OpId::rms_norm, OpShape{65536, 1024, 1, 16}, DType::bf16, &l).ok());
      EXPECT_EQ(l.lean, 0);  // 64 threads a row: four rows a block ...
      EXPECT_EQ(l.rows_per_block, 4);
      {
        Env small("rows_lean_min=64");  // ... or, with rows_lean_min=64, the lean kernel
        ASSERT_TRUE(plan_op(h200, OpId::rms_norm, OpShape{65536, 1024, 1, 16}, DType::bf16, &l).ok());
        EXPECT_EQ(l.lean, 1);
        EXPECT_EQ(l.rows_per_block, 1);
        ASSERT_TRUE(plan_op(h200, OpId::rms_norm, OpShape{65536, 512, 1, 16}, DType::bf16, &l).ok());
        EXPECT_EQ(l.lean, 0);  // 32 threads
        EXPECT_EQ(l.rows_per_block, 8);
      }
      {
        Env staged("rows_held=0,rows_vpt=2");  // staged rows keep their blocks of rows
        ASSERT_TRUE(plan_op(h200, OpId::rms_norm, OpShape{65536, 2048, 1, 16}, DType::bf16, &l).ok());
        EXPECT_EQ(l.lean, 0);
        EXPECT_EQ(l.rows_per_block, 2);
      }
      {
        Env general("rows_lean=0");
        ASSERT_TRUE(plan_op(h200, OpId::rms_norm, OpShape{65536, 4096, 1, 16}, DType::bf16, &l).ok());
        EXPECT_EQ(l.lean, 0);
        ASSERT_TRUE(plan_op(h200, OpId::layer_norm, OpShape{65536, 4096, 1, 16}, DType::bf16, &l).ok());
        EXPECT_EQ(l.held, 0);
      }
      Env lean("rows_lean=3");
      for (auto [op, hidden, dtype, want] : {std::tuple{OpId::rms_norm, 4096, DType::bf16, 3},
                                             {OpId::fused_add_rms_norm, 5120, DType::f16, 3},
                                             {OpId::rms_norm, 4096, DType::f32, 3},
                                             {OpId::rms_norm, 8192, DType::f32, 0},  // 1024 threads: staged
                                             {OpId::rms_norm, 2048, DType::bf16, 3},
                                             {OpId::rms_norm, 1024, DType::bf16, 0},  // 64 threads a row
                                             {OpId::rms_norm, 4100, DType::bf16, 0},  // 4-element vectors
                                             {OpId::rms_norm, 256, DType::bf16, 0},   // 16 threads a row
                                             {OpId::layer_norm, 4096, DType::bf16, 3},
                                             {OpId::rms_norm_quant_fp8, 4096, DType::bf16, 0},
                                             {OpId::softmax, 4096, DType::bf16, 3},
                                             {OpId::causal_softmax, 8192, DType::f16, 3},
                                             {OpId::softmax, 16384, DType::bf16, 0}}) {  // 4 vectors a thread
        ASSERT_TRUE(plan_op(h200, op, OpShape{65536, hidden, 1, 16}, dtype, &l).ok());
        EXPECT_EQ(l.lean, want) << op_info(op).name << " " << hidden;
        if (want > 0) {
          EXPECT_EQ(l.rows_per_block, 1);
          EXPECT_EQ(l.grid, 65536);
          EXPECT_EQ(l.min_blocks, 1);
          EXPECT_NE(l.to_string().find("lean kernel"), std::string::npos);
          EXPECT_EQ(l.waves, 0);
        }
      }
      Env looping("rows_lean=1,rows_waves=1");  // a looping grid: the general kernel
      ASSERT_TRUE(plan_op(h200, OpId::rms_norm, OpShape{65536, 4096, 1, 16}, DType::bf16, &l).ok());
      EXPECT_EQ(l.lean, 0);
    }
    // rows_held=1: 65536 x 4096 bf16 as Liger-Kernel splits it, 256 threads of 2 vectors a row, a block a row.
    Env e("rows_held=1");
    for (OpId op : {OpId::rms_norm, OpId::fused_add_rms_norm, OpId::layer_norm, OpId::rms_norm_quant_fp8}) {
      ASSERT_TRUE(plan_op(h200, op, OpShape{65536, 4096, 1, 16}, DType::bf16, &l).ok());
      EXPECT_EQ(l.held, kRowHeldVecs) << op_info(op).name;
      EXPECT_EQ(l.threads_per_row, 256);
      EXPECT_EQ(l.rows_per_block, 1);
      EXPECT_EQ(l.waves, 0);
      EXPECT_EQ(l.grid, 65536);
      EXPECT_EQ(l.smem_bytes, l.stage_offset);  // reduction scratch only
    }
    // The longest held rows: 1024 threads of 2 vectors (16K bf16, 8K fp32); beyond, staged.
    ASSERT_TRUE(plan_op(h200, OpId::rms_norm, OpShape{64, 16384, 1, 16}, DType::bf16, &l).ok());
    EXPECT_EQ(l.held, kRowHeldVecs);
    EXPECT_EQ(l.threads_per_row, kRowNormMaxThreads);
    ASSERT_TRUE(plan_op(h200, OpId::rms_norm, OpShape{64, 8192, 1, 16}, DType::f32, &l).ok());
    EXPECT_EQ(l.held, kRowHeldVecs);
    for (auto [hidden, dtype] : {std::pair{16392, DType::bf16}, std::pair{8200, DType::f32}}) {
      ASSERT_TRUE(plan_op(h200, OpId::layer_norm, OpShape{64, hidden, 1, 16}, dtype, &l).ok());
      EXPECT_EQ(l.held, 0) << hidden;
      EXPECT_TRUE(l.cached);
      EXPECT_EQ(l.waves, 1);
      EXPECT_EQ(l.grid, 64);  // fewer groups than a wave
    }
  }
  {
    Env e("rows_held=1,rows_vpt=4");  // norms of at most kRowHeldVecs vectors a thread hold their rows in registers
    ASSERT_TRUE(plan_op(h200, OpId::rms_norm, OpShape{16, 4096, 1, 16}, DType::bf16, &l).ok());
    EXPECT_EQ(l.held, 0);  // 4 vectors a thread: staged as without it
    EXPECT_TRUE(l.cached);
    ASSERT_TRUE(plan_op(h200, OpId::softmax, OpShape{16, 4096, 1, 16}, DType::bf16, &l).ok());
    EXPECT_EQ(l.held, 0);  // norms only
  }
  {
    // Staged norms over too few rows to fill half the GPU's threads take 2 vectors a thread; softmax always takes 2.
    Env general("rows_lean=0");
    ASSERT_TRUE(plan_op(h200, OpId::layer_norm, OpShape{16, 4096, 1, 16}, DType::bf16, &l).ok());
    EXPECT_EQ(l.vecs_per_thread, 2);
    ASSERT_TRUE(plan_op(h200, OpId::layer_norm, OpShape{2048, 4096, 1, 16}, DType::bf16, &l).ok());
    EXPECT_EQ(l.vecs_per_thread, kRowVecsPerThread);
    ASSERT_TRUE(plan_op(h200, OpId::softmax, OpShape{16, 4096, 1, 16}, DType::bf16, &l).ok());
    EXPECT_EQ(l.vecs_per_thread, 2);
    ASSERT_TRUE(plan_op(h200, OpId::softmax, OpShape{16, 32768, 1, 16}, DType::bf16, &l).ok());
    EXPECT_EQ(l.vecs_per_thread, kRowVecsPerThread);  // 4096 vectors: 1024 threads (a block) of 4
  }
  for (const auto& [bad, op] : {std::pair{"rows_vpt=0", OpId::softmax}, std::pair{"rows_vpt=17", OpId::rms_norm},
                                std::pair{"rows_waves=-1", OpId::layer_norm}, std::pair{"ew_waves=1025", OpId::gelu},
                                std::pair{"softmax_stage=2", OpId::softmax}, std::pair{"rows_held=2", OpId::rms_norm},
                                std::pair{"rows_cap=3", OpId::rms_norm}, std::pair{"rows_lean_min=16", OpId::rms_norm},
                                std::pair{"ew_one_row=2", OpId::gelu}}) {
    Env e(bad);
    EXPECT_EQ(plan_op(h200, op, OpShape{16, 4096, 1, 16}, DType::bf16, &l).code(), StatusCode::invalid_argument) << bad;
  }
  {
    Env e("attn_wgmma=0,attn_stages=1");  // one K/V buffer: 128x32 tiles at head_dim 128 on sm_80
    ASSERT_TRUE(plan_tile(profile("a100"), TileFamily::attention, DType::f16, 128, &t).ok());
    EXPECT_EQ(t.stages, 1);
    EXPECT_EQ(t.smem_bytes, 2 * (128 * 128 + 2 * 32 * 128));  // Q + (K, V), 2-byte elements
    ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).ok());
    EXPECT_EQ(t.smem_bytes, 2 * (128 * 128 + 2 * 64 * 128));  // 128x64 on sm_90
    ASSERT_TRUE(plan_tile(profile("t4"), TileFamily::attention, DType::f16, 256, &t).ok());
    EXPECT_EQ(t.smem_bytes, 64 * 1024);  // 64x32 at head_dim 256: exactly the T4's opt-in maximum
    for (const char* more : {"attn_wgmma=0,attn_stages=3", "attn_wgmma=0,attn_stages=0"}) {
      Env b(more);  // two buffers at most: a third measured no faster (kAttnMaxStages)
      EXPECT_EQ(plan_tile(profile("a100"), TileFamily::attention, DType::f16, 128, &t).code(),
                StatusCode::invalid_argument)
          << more;
    }
  }
  {
    Env e("attn_bn=64");  // FlashAttention-2's 128x64 tile with two row tiles a warp at head_dim 128 (kAttnWideKeys)
    ASSERT_TRUE(plan_tile(profile("a100"), TileFamily::attention, DType::f16, 128, &t).ok());
    EXPECT_EQ(t.block_n, kAttnWideKeys);
    EXPECT_EQ(t.warps, 4);
    EXPECT_EQ(t.smem_bytes, 2 * (128 * 128 + 2 * 2 * 64 * 128));  // Q + 2 x (K, V): 96 KB
    EXPECT_EQ(plan_tile(profile("t4"), TileFamily::attention, DType::f16, 64, &t).code(), StatusCode::unsupported);
  }
  {
    Env e("attn_wgmma=0,attn_bn=32");  // the sm_80 tile on sm_90
    ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).ok());
    EXPECT_EQ(t.block_n, 32);
    EXPECT_EQ(t.warps, 4);
  }
  {
    Env e("attn_wgmma=1");  // the sm_90a prefill: two warpgroups of 64 rows, 64-key tiles, Q + 2 x (K, V) + alignment
    for (int d : {64, 128}) {
      ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, d, &t).ok());
      EXPECT_TRUE(t.wgmma);
      EXPECT_EQ(t.block_m, kAttnWgmmaRows);
      EXPECT_EQ(t.block_n, kAttnWgmmaKeys);
      EXPECT_EQ(t.warps, 8);
      EXPECT_EQ(t.smem_bytes, 2 * (128 + 4 * 64) * d + 1024);
      EXPECT_FALSE(t.tma);
      EXPECT_NE(t.to_string().find("wgmma"), std::string::npos) << t.to_string();
    }
    for (const auto& [key, d] : {std::pair<const char*, int>{"a100", 128}, {"t4", 64}, {"h200", 256}}) {
      const Status s = plan_tile(profile(key), TileFamily::attention, DType::f16, d, &t);
      EXPECT_EQ(s.code(), StatusCode::unsupported) << key << " d" << d;
      EXPECT_NE(s.message().find("attn_wgmma"), std::string::npos) << s.message();
    }
    {
      Env wide("attn_wgmma=1,attn_bn=128");  // 128-key tiles: 161 KB at head_dim 128
      ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).ok());
      EXPECT_TRUE(t.wgmma);
      EXPECT_EQ(t.block_n, 128);
      EXPECT_EQ(t.smem_bytes, 2 * (128 + 4 * 128) * 128 + 1024);
      EXPECT_LE(t.smem_bytes, h200.smem_per_block_optin);
      for (const char* bad : {"attn_wgmma=1,attn_bn=32", "attn_wgmma=1,attn_bn=96", "attn_wgmma=1,attn_stages=3",
                              "attn_wgmma=1,attn_mw=2", "attn_wgmma=1,attn_stages=9"}) {
        Env b(bad);
        EXPECT_EQ(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).code(), StatusCode::invalid_argument)
            << bad;
      }
    }
  }
  {
    Env e("attn_wgmma=2");  // the same kernel fed by TMA: 128-key tiles
    ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).ok());
    EXPECT_TRUE(t.wgmma);
    EXPECT_TRUE(t.tma);
    EXPECT_FALSE(t.warp_specialized);
    EXPECT_EQ(t.warps, 8);
    EXPECT_EQ(t.block_n, kAttnWgmmaTmaKeys);
    EXPECT_EQ(t.smem_bytes, 2 * (128 + 4 * 128) * 128 + 1024);
    EXPECT_NE(t.to_string().find("TMA"), std::string::npos) << t.to_string();
    EXPECT_EQ(plan_tile(profile("a100"), TileFamily::attention, DType::f16, 128, &t).code(), StatusCode::unsupported);
    // Forced where no sm_90a code runs: refused, naming what it needs.
    const Status s = plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t, false);
    EXPECT_EQ(s.code(), StatusCode::unsupported);
    EXPECT_NE(s.message().find("sm_90a"), std::string::npos) << s.message();
    Env narrow("attn_wgmma=2,attn_bn=64");
    ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 64, &t).ok());
    EXPECT_EQ(t.block_n, 64);
    EXPECT_EQ(t.smem_bytes, 2 * (128 + 4 * 64) * 64 + 1024);
  }
  {
    Env e("attn_wgmma=3");  // TMA-fed with a producer warpgroup (the default): three warpgroups, the same tiles and
                            // shared memory
    ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).ok());
    EXPECT_TRUE(t.wgmma && t.tma && t.warp_specialized);
    EXPECT_EQ(t.warps, 12);
    EXPECT_EQ(t.block_n, kAttnWgmmaTmaKeys);
    EXPECT_EQ(t.smem_bytes, 2 * (128 + 4 * 128) * 128 + 1024);
    EXPECT_NE(t.to_string().find("producer"), std::string::npos) << t.to_string();
    EXPECT_EQ(t.pv_n, 128);  // P V: one m64n128k16 a k-step over O's columns
    ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 64, &t).ok());
    EXPECT_EQ(t.pv_n, 64);
    {
      Env two("attn_wgmma=3,attn_pv_n=64");  // two m64n64k16 a k-step at head_dim 128
      ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).ok());
      EXPECT_EQ(t.pv_n, 64);
    }
    for (const char* bad : {"attn_wgmma=3,attn_pv_n=96", "attn_wgmma=2,attn_pv_n=128", "attn_wgmma=3,attn_pv_n=256"})
      EXPECT_EQ(attention_plan_code(bad, 128), StatusCode::invalid_argument) << bad;
    {
      Env two("attn_bm=128");  // two consumer warpgroups at head_dim 64 (the default plans three)
      ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 64, &t).ok());
      EXPECT_TRUE(t.warp_specialized);
      EXPECT_EQ(t.block_m, kAttnWgmmaRows);
      EXPECT_EQ(t.warps, 12);
      EXPECT_EQ(t.smem_bytes, 2 * (128 + 4 * 128) * 64 + 1024);
      Env three("attn_bm=192");
      for (int d : {128, 256})  // two consumers only there
        EXPECT_EQ(plan_tile(h200, TileFamily::attention, DType::bf16, d, &t).code(), StatusCode::invalid_argument) << d;
      Env other_kernel("attn_wgmma=2");  // the two-warpgroup kernel at head_dim 64: 128 rows
      ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 64, &t).ok());
      EXPECT_EQ(t.block_m, kAttnWgmmaRows);
    }
    // Packed varlen batches through the warp-specialized kernel too (attn_ws_varlen), except at head_dim 192;
    // attn_varlen_ws=0 gives them the cp.async two-warpgroup kernel.
    for (int d : {64, 128, 192, 256}) {
      ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, d, &t).ok());
      EXPECT_TRUE(t.warp_specialized) << d;
      EXPECT_EQ(t.varlen_ws, d != 192) << d;
      Env off("attn_varlen_ws=0");
      ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, d, &t).ok());
      EXPECT_FALSE(t.varlen_ws) << d;
    }
    ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t, false).ok());
    EXPECT_FALSE(t.varlen_ws);  // the mma.sync kernel
    for (const char* bad : {"attn_wgmma=2,attn_varlen_ws=1", "attn_varlen_ws=2"})
      EXPECT_EQ(attention_plan_code(bad, 128), StatusCode::invalid_argument) << bad;
    EXPECT_EQ(attention_plan_code("attn_varlen_ws=1", 192), StatusCode::unsupported);
    for (const char* bad : {"attn_bm=160", "attn_bm=256", "attn_wgmma=2,attn_bm=192", "attn_bm=192,attn_stages=3"})
      EXPECT_EQ(attention_plan_code(bad, 64), StatusCode::invalid_argument) << bad;
    {
      Env wide64("attn_wgmma=3,attn_pv_n=128");  // wider than head_dim 64
      EXPECT_EQ(plan_tile(h200, TileFamily::attention, DType::bf16, 64, &t).code(), StatusCode::invalid_argument);
    }
    {
      Env three("attn_wgmma=3,attn_stages=3");  // three K/V buffers: 225 KB at head_dim 128
      ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).ok());
      EXPECT_EQ(t.stages, kAttnWsMaxStages);
      EXPECT_EQ(t.smem_bytes, 2 * (128 + 6 * 128) * 128 + 1024);
      EXPECT_LE(t.smem_bytes, h200.smem_per_block_optin);
    }
    for (const char* bad :
         {"attn_wgmma=2,attn_stages=3", "attn_wgmma=3,attn_stages=1", "attn_wgmma=3,attn_stages=3,attn_pv_n=64"}) {
      Env b(bad);  // three buffers: the warp-specialized kernel's, with P V over all of O's columns
      const Status s = plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t);
      EXPECT_EQ(s.code(), StatusCode::invalid_argument) << bad;
      EXPECT_NE(s.message().find("attn_"), std::string::npos) << s.message();
    }
    // The lazy rescale: the warp-specialized kernel's default, attn_slack=0 rescales at every rise.
    ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).ok());
    EXPECT_TRUE(t.warp_specialized);
    EXPECT_EQ(t.rescale_slack, kAttnMaxRescaleSlack);
    {
      Env exact("attn_slack=0");
      ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).ok());
      EXPECT_TRUE(t.warp_specialized);
      EXPECT_EQ(t.rescale_slack, 0);
      Env two_groups("attn_wgmma=2");  // the other wgmma kernels rescale at every rise
      ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).ok());
      EXPECT_EQ(t.rescale_slack, 0);
    }
    for (const char* bad : {"attn_wgmma=2,attn_slack=8", "attn_slack=9", "attn_slack=-1"})
      EXPECT_EQ(attention_plan_code(bad, 128), StatusCode::invalid_argument) << bad;
    Env narrow("attn_wgmma=3,attn_bn=64");  // its tiles are 128 keys only
    const Status s = plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t);
    EXPECT_EQ(s.code(), StatusCode::invalid_argument);
    EXPECT_NE(s.message().find("attn_wgmma=3"), std::string::npos) << s.message();
  }
  {
    Env e("attn_wgmma=0");  // the mma.sync kernel on sm_90: its 128x64 tile
    ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).ok());
    EXPECT_FALSE(t.wgmma);
    EXPECT_EQ(t.block_n, kAttnWideKeys);
    EXPECT_EQ(t.warps, 4);
  }
  {
    // Keys forced without attn_wgmma on sm_90: those of the warp-specialized kernel keep it, attn_bn=64 takes the
    // TMA-fed two-warpgroup kernel (the one with 64-key tiles).
    Env three("attn_stages=3");
    ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).ok());
    EXPECT_TRUE(t.warp_specialized);
    EXPECT_EQ(t.stages, kAttnWsMaxStages);
    Env narrow("attn_bn=64");
    ASSERT_TRUE(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).ok());
    EXPECT_TRUE(t.wgmma && t.tma);
    EXPECT_FALSE(t.warp_specialized);
    EXPECT_EQ(t.block_n, 64);
    EXPECT_EQ(t.warps, 8);
  }
  for (const char* bad :
       {"attn_stages=0", "attn_stages=4", "attn_bn=48", "attn_bn=16", "attn_wgmma=0,attn_bn=128", "attn_wgmma=4",
        // the mma.sync kernel's keys with the wgmma prefill (the sm_90 default): attn_wgmma=0 must come with them
        "attn_mw=2", "attn_bn=32", "attn_stages=1"}) {
    Env e(bad);
    EXPECT_EQ(plan_tile(h200, TileFamily::attention, DType::bf16, 128, &t).code(), StatusCode::invalid_argument)
        << bad;
  }
  {
    // the tensor-core decode: 16-key warp tiles, 8 KB of K and V a stage at head_dim 128
    Env e("decode_tc=1,decode_stages=2");
    ASSERT_TRUE(plan_decode(h200, 128, 1, 8, 4, 32, 4096, &d).ok());
    EXPECT_TRUE(d.tensor_cores);
    EXPECT_EQ(d.block_n, 4 * kDecodeTcTileKeys);
    EXPECT_EQ(d.chunk % d.block_n, 0);
    EXPECT_EQ(d.smem_bytes, 4 * 2 * 2 * 16 * 128 * 2);  // warps x stages x (K, V) x keys x dims x 2 B: 64 KB, opt-in
    EXPECT_TRUE(d.smem_optin);
    EXPECT_NE(d.to_string().find("tensor cores"), std::string::npos) << d.to_string();
    ASSERT_TRUE(plan_decode(profile("t4"), 128, 1, 8, 4, 32, 4096, &d).ok());  // exactly the T4's 64 KB opt-in
    ASSERT_TRUE(plan_decode(h200, 64, 1, 8, 4, 32, 4096, &d).ok());
    EXPECT_EQ(d.smem_bytes, 32 * 1024);
    EXPECT_EQ(plan_decode(h200, 256, 1, 8, 4, 32, 4096, &d).code(), StatusCode::unsupported);
  }
  ASSERT_TRUE(plan_decode(h200, 128, 1, 8, 4, 32, 4096, &d).ok());
  EXPECT_TRUE(d.tensor_cores);  // the default
  {
    Env e("decode_tc=0");
    ASSERT_TRUE(plan_decode(h200, 128, 1, 8, 4, 32, 4096, &d).ok());
    EXPECT_FALSE(d.tensor_cores);
    EXPECT_EQ(d.to_string().find("tensor cores"), std::string::npos) << d.to_string();
  }
  for (const char* bad :
       {"decode_splits=0", "decode_splits=129", "decode_tc=2", "decode_waves=2", "gemv_kwarps=0", "gemv_kwarps=9"}) {
    Env e(bad);
    const Status sd = plan_decode(h200, 128, 1, 8, 4, 32, 4096, &d);
    const Status sl = plan_op(h200, OpId::linear_w8a16, gemv, DType::bf16, &l);
    EXPECT_EQ((bad[0] == 'd' ? sd : sl).code(), StatusCode::invalid_argument) << bad;
    EXPECT_NE((bad[0] == 'd' ? sd : sl).message().find(std::string(bad).substr(0, std::string(bad).find('='))),
              std::string::npos)
        << bad;
  }
}

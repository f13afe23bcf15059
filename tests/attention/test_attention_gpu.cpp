// attention / decode_attention on the GPU against the fp64 CPU reference, every element of out and lse, outputs
// poisoned first. Run natively (sm_90) and on the PTX paths (KERNELKIT_PROFILE=a100 / t4 with compute_80 / compute_75
// code): lengths 1, 7, 127, 1000, 4097; s_q < s_k and s_q > s_k (fully masked causal rows); GQA ratios 1, 4, 8 and
// MQA; head_dim 64, 128, 256; [b, h, s, d] strides; varlen; large fp16 logits; paged and contiguous caches; sliding
// windows and soft-caps; e4m3 K/V (prefill and decode); bad inputs.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "expect_case.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/planner.hpp"
#include "kernelkit/runtime.hpp"
#include "ops/attention/attention_cases.hpp"
#include "ops/attention/attention_plan.hpp"
#include "runtime/sm90a.hpp"
#include "testing/harness.hpp"

using namespace kernelkit;
using kernelkit::testing::AttentionCase;

namespace {

struct Shape {
  int64_t batch, s_q, s_k, heads, kv_heads;
};

void expect_attention(const AttentionCase& c) {
  kernelkit::testing::expect_case(kernelkit::testing::run_attention_case_cuda(c, 0), c.dtype, c.name());
}

// Whether the active profile runs e4m3 caches; where it does not, a case must come back unsupported (the dtype
// refusal), which is checked here, and the caller skips.
bool fp8_cache_runs(const kernelkit::testing::CaseResult& r, const std::string& name) {
  if (kernelkit::testing::case_profile().supports(DType::f8e4m3)) return true;
  EXPECT_EQ(r.status.code(), StatusCode::unsupported) << name << ": " << r.status.to_string();
  return false;
}

// Lengths 1, 7, 127, 1000, 4097 with GQA 1, 4, 8, s_q < s_k and s_q > s_k, for one (dtype, head_dim, mask).
void expect_grid(DType dt, int d, bool causal) {
  const std::vector<Shape> shapes = {
      {2, 1, 1, 8, 8},        // one token, GQA 1
      {2, 7, 7, 8, 2},        // GQA 4
      {1, 127, 127, 8, 1},    // GQA 8
      {2, 7, 127, 4, 1},      // s_q < s_k: a KV prefix (causal: bottom-right aligned)
      {1, 127, 1000, 4, 2},   // s_q < s_k over several K/V tiles
      {1, 1000, 127, 2, 1},   // s_q > s_k: causal rows before the keys see nothing (zeros, lse -inf)
      {1, 1000, 1000, 2, 2},  // many tiles both ways
      {1, 4097, 4097, 2, 1},  // the longest, odd: partial last tiles
  };
  uint64_t seed = 1;
  for (const Shape& s : shapes) {
    if (d == 256 && s.s_q * s.s_k > 1000 * 1000) continue;  // keep the fp64 reference's time in check
    expect_attention(
        {OpId::attention, dt, s.batch, s.s_q, s.s_k, s.heads, s.kv_heads, d, causal, false, false, false, 1.0, seed++});
  }
}

// [b, h, s, d] strides and packed variable lengths.
void expect_layouts(DType dt, bool causal) {
  // [b, h, s, d] storage through strides.
  expect_attention({OpId::attention, dt, 2, 127, 300, 8, 2, 128, causal, true, false, false, 1.0, 11});
  // Packed sequences (odd ones shorter), GQA 4; with s_q = 1 the odd sequences have no queries at all.
  expect_attention({OpId::attention, dt, 5, 127, 200, 8, 2, 64, causal, false, true, false, 1.0, 12});
  expect_attention({OpId::attention, dt, 4, 1, 33, 4, 4, 128, causal, false, true, false, 1.0, 13});
  expect_attention({OpId::attention, dt, 3, 300, 100, 4, 1, 64, causal, false, true, false, 1.0, 14});
  // K / V as views into storage with 40 NaN rows after each sequence's 130 keys (partial last tiles): a kernel that
  // reads past s_k into the output (a wrong TMA extent, a missing zero fill) turns rows NaN.
  expect_attention({OpId::attention, dt, 2, 100, 130, 8, 2, 128, causal, false, false, false, 1.0, 15, 40});
  // Packed: the odd sequences have no queries and NaN keys / values, which the even ones' partial last tiles reach.
  for (int64_t d : {64, 128}) {
    AttentionCase idle{OpId::attention, dt, 4, 1, 33, 4, 4, d, causal, false, true, false, 1.0, 16};
    idle.nan_idle_kv = true;
    expect_attention(idle);
  }
}

}  // namespace

using PrefillParam = std::tuple<DType, int64_t, bool>;  // dtype, head_dim, causal
class AttentionGrid : public ::testing::TestWithParam<PrefillParam> {};

TEST_P(AttentionGrid, MatchesReference) {
  const auto [dt, d, causal] = GetParam();
  expect_grid(dt, static_cast<int>(d), causal);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionGrid,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16), ::testing::Values(64, 128, 256),
                                            ::testing::Bool()));

// Every sm_90 prefill on the grid's shapes at head_dim 64 and 128, the layouts (once a dtype) and large fp16 logits
// (once): the warp-specialized wgmma kernel (the default, which AttentionGrid runs on the grid too) with its P V and
// buffer alternatives and its lazy rescale (attn_slack), the two-warpgroup wgmma kernel
// (src/ops/attention/flash_prefill_sm90a.cu) fed by TMA with 128- and 64-key tiles (attn_wgmma=2: also the default's
// fallback past 65535 query tiles) and by cp.async with 64- and 128-key tiles (attn_wgmma=1: the default's path for
// packed varlen batches), and the mma.sync kernel (attn_wgmma=0: its 128x64 tile, the sm_90 choice where no sm_90a code
// runs). Skipped where the build has no sm_90a code or the GPU is not compute capability 9.0 (the A100 / T4 paths:
// AttentionGrid runs the mma.sync kernel there).
class AttentionWgmma : public ::testing::TestWithParam<PrefillParam> {};

TEST_P(AttentionWgmma, MatchesReference) {
  DeviceProfile prof;
  KK_SKIP_WITHOUT_WGMMA_PROFILE(prof);
  const auto [dt, d, causal] = GetParam();
  // With TMA (attn_wgmma=2) every dense case goes through TMA descriptors (the [b, h, s, d] layout with its
  // dimensions reordered by stride), packed varlen ones through cp.async.
  std::vector<const char*> settings = {"attn_wgmma=1",
                                       "attn_wgmma=1,attn_bn=128",
                                       "attn_wgmma=2",
                                       "attn_wgmma=2,attn_bn=64",
                                       "attn_wgmma=3",
                                       "attn_wgmma=3,attn_pv_n=64",
                                       "attn_wgmma=3,attn_stages=3",
                                       "attn_wgmma=3,attn_slack=0",
                                       "attn_wgmma=0",
                                       "attn_wgmma=3,attn_varlen_ws=0"};  // packed varlen by cp.async
  if (d == 64) settings.push_back("attn_wgmma=3,attn_bm=128");  // two consumer warpgroups
  for (const char* setting : settings) {
    SCOPED_TRACE(setting);
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", setting);
    TilePlan tile;
    ASSERT_TRUE(plan_tile(prof, TileFamily::attention, dt, static_cast<int>(d), &tile).ok());
    ASSERT_EQ(tile.wgmma, std::string(setting) != "attn_wgmma=0") << tile.to_string();
    const bool ws = std::string(setting).rfind("attn_wgmma=3", 0) == 0;
    ASSERT_EQ(tile.tma, std::string(setting).rfind("attn_wgmma=2", 0) == 0 || ws) << tile.to_string();
    ASSERT_EQ(tile.warp_specialized, ws) << tile.to_string();
    expect_grid(dt, static_cast<int>(d), causal);
    if (d == 128) expect_layouts(dt, causal);
    // One query head (Q's descriptor without its head dimension) over 300 keys, and batch 3 of MQA.
    expect_attention({OpId::attention, dt, 1, 200, 300, 1, 1, d, causal, false, false, false, 1.0, 31});
    expect_attention({OpId::attention, dt, 3, 65, 130, 1, 1, d, causal, true, false, false, 1.0, 32});
    if (dt == DType::f16 && d == 64)  // logits up to about +-70 (see AttentionFp16)
      for (int64_t s : {int64_t{127}, int64_t{1000}})
        expect_attention({OpId::attention, DType::f16, 1, s, s, 4, 1, 64, causal, false, false, false, 8.0, 21});
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionWgmma,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16), ::testing::Values(64, 128),
                                            ::testing::Bool()));

// Head_dim 256 on sm_90a: the warp-specialized kernel (its only wgmma kernel, 64-key tiles; the default) with O
// rescaled at every rise (attn_slack=0) and with packed varlen batches through it (attn_varlen_ws=1), and the
// mma.sync kernel (attn_wgmma=0), on the grid's shapes, the [b, h, s, d] layout, packed varlen batches (which the
// wgmma path declines by default: the mma.sync kernel runs them), NaN-padded K/V views, head_dim 192 (its own
// warp-specialized kernel; the mma.sync one at 256 under attn_wgmma=0) with one query head, and MQA.
class AttentionWgmma256 : public ::testing::TestWithParam<std::tuple<DType, bool>> {};

TEST_P(AttentionWgmma256, MatchesReference) {
  DeviceProfile prof;
  KK_SKIP_WITHOUT_WGMMA_PROFILE(prof);
  const auto [dt, causal] = GetParam();
  for (const char* setting :
       {static_cast<const char*>(nullptr), "attn_slack=0", "attn_wgmma=0", "attn_varlen_ws=0", "attn_bn=64"}) {
    SCOPED_TRACE(setting ? setting : "default");
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", setting);
    TilePlan tile;
    ASSERT_TRUE(plan_tile(prof, TileFamily::attention, dt, 256, &tile).ok());
    ASSERT_EQ(tile.warp_specialized, setting == nullptr || std::string(setting) != "attn_wgmma=0") << tile.to_string();
    expect_grid(dt, 256, causal);
    expect_attention({OpId::attention, dt, 2, 127, 300, 8, 2, 256, causal, true, false, false, 1.0, 51});
    expect_attention({OpId::attention, dt, 5, 127, 200, 8, 2, 256, causal, false, true, false, 1.0, 52});
    expect_attention({OpId::attention, dt, 2, 100, 130, 8, 2, 256, causal, false, false, false, 1.0, 53, 40});
    expect_attention({OpId::attention, dt, 1, 200, 300, 1, 1, 192, causal, false, false, false, 1.0, 54});
    expect_attention({OpId::attention, dt, 3, 65, 130, 1, 1, 256, causal, true, false, false, 1.0, 55});
    AttentionCase idle{OpId::attention, dt, 4, 1, 33, 4, 4, 256, causal, false, true, false, 1.0, 56};
    idle.nan_idle_kv = true;  // packed: the odd sequences' NaN keys / values past the even ones' last tiles
    expect_attention(idle);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionWgmma256,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16), ::testing::Bool()));

// A few small cases of each wgmma setting, for the racecheck run (the grid above is too slow under a sanitizer):
// partial tiles both ways, GQA, causal and not, head_dims 64 and 128 (256: the warp-specialized kernel's settings), and
// the NaN-padded K/V views (the TMA extents).
TEST(AttentionWgmmaSmall, EverySettingMatchesReference) {
  DeviceProfile prof;
  KK_SKIP_WITHOUT_WGMMA_PROFILE(prof);
  uint64_t seed = 41;
  for (const char* setting :
       {"attn_wgmma=1", "attn_wgmma=1,attn_bn=128", "attn_wgmma=2", "attn_wgmma=2,attn_bn=64", "attn_wgmma=3",
        "attn_wgmma=3,attn_pv_n=64", "attn_wgmma=3,attn_stages=3", "attn_wgmma=3,attn_slack=0"}) {
    SCOPED_TRACE(setting);
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", setting);
    for (int64_t d : {64, 128})
      for (bool causal : {false, true})
        expect_attention(
            {OpId::attention, DType::bf16, 1, 130, 200, 4, 2, d, causal, false, false, false, 1.0, seed++});
    expect_attention({OpId::attention, DType::f16, 2, 100, 130, 4, 2, 128, true, false, false, false, 1.0, seed++, 40});
  }
  {  // head_dim 192 / 256 (the warp-specialized kernel only) without the slack tile; the defaults: the loop below
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", "attn_slack=0");
    for (int64_t d : {192, 256})
      for (bool causal : {false, true})
        expect_attention(
            {OpId::attention, DType::bf16, 1, 130, 200, 4, 2, d, causal, false, false, false, 1.0, seed++});
    // head_dim 160 on the 192 kernel: its last 32 columns zeros (the TMA boxes' fill past the tensor).
    expect_attention({OpId::attention, DType::f16, 1, 130, 200, 4, 2, 160, true, false, false, false, 1.0, seed++});
  }
  for (int64_t d : {192, 256}) {
    for (const char* setting : {static_cast<const char*>(nullptr), "attn_bn=64"}) {
      // The plain dense calls' tiles (attn_ws_keys: 96 keys at 192, 80 at 256) or, attn_bn=64, the masked forms'
      // (attn_ws_masked_keys): partial tiles both ways, a narrower head on them, and the calls that take 64-key tiles
      // under either plan: a window (the kMasks variants) and a packed varlen batch. attn_fallback=0: each runs the
      // warp-specialized kernel (a call it declined would fail), but packed varlen at 192, which has no such form.
      SCOPED_TRACE(setting ? setting : "default");
      const std::string strict = setting ? std::string(setting) + ",attn_fallback=0" : "attn_fallback=0";
      const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", strict.c_str());
      for (bool causal : {false, true})
        expect_attention(
            {OpId::attention, DType::bf16, 1, 130, 200, 4, 2, d, causal, false, false, false, 1.0, seed++});
      expect_attention(
          {OpId::attention, DType::f16, 2, 100, 250, 4, 2, d - 32, true, false, false, false, 1.0, seed++});
      AttentionCase windowed{OpId::attention, DType::bf16, 1,     200, 200,   4, 2, d, true,
                             false,           false,       false, 1.0, seed++};
      windowed.window_left = 70;
      expect_attention(windowed);
      const AttentionCase varlen{OpId::attention, DType::f16, 3,     90,  130,   4, 2, d, true,
                                 false,           true,       false, 1.0, seed++};
      if (attn_ws_varlen(d)) {
        expect_attention(varlen);
      } else {
        EXPECT_EQ(kernelkit::testing::run_attention_case_cuda(varlen).status.code(), StatusCode::unsupported);
        const kernelkit::testing::ScopedEnv mma_sync("KERNELKIT_TUNE", setting);  // declined: the mma.sync kernel
        expect_attention(varlen);
      }
    }
  }
  {
    // Two consumers at head_dim 64 (three: the default above), and a window (the kMasks variants take two).
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", "attn_bm=128");
    for (bool causal : {false, true})
      expect_attention({OpId::attention, DType::bf16, 1, 300, 400, 4, 2, 64, causal, false, false, false, 1.0, seed++});
    AttentionCase windowed{OpId::attention, DType::f16, 1, 300, 300, 4, 2, 64, true, false, false, false, 1.0, seed++};
    windowed.window_left = 100;
    expect_attention(windowed);
  }
  {
    // Packed varlen through the warp-specialized kernel: partial tiles, sequences without queries (NaN keys and
    // values past the others' last tiles), each head_dim.
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", "attn_varlen_ws=1");
    for (int64_t d : {64, 128, 256})
      for (bool causal : {false, true}) {
        AttentionCase c{OpId::attention, DType::bf16, 4, 70, 150, 4, 2, d, causal, false, true, false, 1.0, seed++};
        expect_attention(c);
        c.s_q = 1, c.s_k = 33, c.nan_idle_kv = true, c.seed = seed++;
        expect_attention(c);
      }
  }
}

class AttentionLayouts : public ::testing::TestWithParam<DType> {};

TEST_P(AttentionLayouts, BhsdStridesAndVarlen) {
  for (bool causal : {false, true}) expect_layouts(GetParam(), causal);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AttentionLayouts, ::testing::Values(DType::f16, DType::bf16));

TEST(AttentionFp16, LargeMagnitudeLogits) {
  // q, k uniform in [-8, 8] with d 64 (scale 1/8): logits with a standard deviation near 20, up to about +-70, far
  // past exp's fp16 range (e^11) and near fp32's (e^88): the running max must be subtracted before exp2. Larger q, k
  // would make the fp32 accumulation of q.k itself (error ~ 2^-24 sum |q k|, not in the tolerance) the dominant term.
  for (int64_t s : {int64_t{127}, int64_t{1000}})
    for (bool causal : {false, true}) {
      expect_attention({OpId::attention, DType::f16, 1, s, s, 4, 1, 64, causal, false, false, false, 8.0, 21});
      expect_attention({OpId::decode_attention, DType::f16, 2, 1, s, 4, 1, 64, causal, false, false, false, 8.0, 22});
      const kernelkit::testing::ScopedEnv cc("KERNELKIT_TUNE", "decode_tc=0");  // the CUDA-core decode too
      expect_attention({OpId::decode_attention, DType::f16, 2, 1, s, 4, 1, 64, causal, false, false, false, 8.0, 23});
    }
}

// Every shape with the tensor-core decode (the planner's choice up to head_dim 128; the head_dim-256 shape is skipped
// there) and with the CUDA-core kernel (KERNELKIT_TUNE decode_tc=0; the planner's choice at head_dim 256).
using DecodeParam = std::tuple<DType, bool, bool>;  // dtype, paged, tensor cores
class DecodeGrid : public ::testing::TestWithParam<DecodeParam> {};

TEST_P(DecodeGrid, MatchesReference) {
  const auto [dt, paged, tc] = GetParam();
  const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", tc ? "decode_tc=1" : "decode_tc=0");
  struct DecodeShape {
    int64_t batch, s_q, s_k, heads, kv_heads, d;
    bool causal;
  };
  const std::vector<DecodeShape> shapes = {
      {2, 1, 1, 8, 8, 128, false},      // GQA 1, one key
      {3, 1, 7, 8, 2, 128, false},      // GQA 4; sequences of 7, 4 and 2 keys
      {2, 1, 127, 8, 1, 64, false},     // GQA 8
      {2, 4, 1000, 8, 1, 128, true},    // 4 speculative tokens, causal (bottom-right), 32 rows per KV head: 2 groups
      {1, 1, 4097, 32, 1, 128, false},  // MQA: 32 query heads on one KV head, a long cache split over many blocks
      {3, 1, 4097, 4, 4, 256, false},   // head_dim 256
      {4, 2, 1000, 16, 2, 64, true},
      {2, 3, 300, 8, 2, 128, true},     // 12 rows per KV head: blocks of 8 rows, the second half empty
      {2, 1, 300, 6, 2, 64, false},     // GQA 3: blocks of 4 rows, one of them padding
  };
  uint64_t seed = 31;
  for (const DecodeShape& s : shapes)
    if (!tc || s.d <= 128)
      expect_attention({OpId::decode_attention, dt, s.batch, s.s_q, s.s_k, s.heads, s.kv_heads, s.d, s.causal, false,
                        false, paged, 1.0, seed++});
}

INSTANTIATE_TEST_SUITE_P(Caches, DecodeGrid,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16), ::testing::Bool(),
                                            ::testing::Bool()));

// e4m3 caches (KvCache k_scale / v_scale, per tensor and per KV head in turn) through both decode kernels, paged and
// contiguous, with the planner's alternatives (stages, split counts, tile keys, the tensor-core kernel with the keys
// on M) and a window, soft-cap and ALiBi; the reference decodes the dequantized cache in fp64. Profiles without FP8
// (a100, t4) must refuse every case, and skip.
class DecodeGridFp8 : public ::testing::TestWithParam<DecodeParam> {};

TEST_P(DecodeGridFp8, MatchesReference) {
  const auto [dt, paged, tc] = GetParam();
  struct Fp8Shape {
    int64_t batch, s_q, s_k, heads, kv_heads, d;
    bool causal;
    const char* tune;  // appended to decode_tc
  };
  const std::vector<Fp8Shape> shapes = {
      {2, 1, 1, 8, 8, 128, false, ""},
      {3, 1, 7, 8, 2, 128, false, ""},
      {2, 1, 127, 8, 1, 64, false, ""},
      {2, 4, 1000, 8, 1, 128, true, ""},
      {1, 1, 4097, 32, 1, 128, false, ""},
      {3, 1, 4097, 4, 4, 256, false, ""},
      {2, 3, 300, 8, 2, 128, true, ""},
      {2, 1, 300, 6, 2, 64, false, ""},
      {2, 1, 4097, 32, 8, 128, false, ",decode_splits=1"},
      {3, 2, 1000, 8, 2, 64, true, ",decode_splits=7"},
      {2, 1, 1000, 8, 2, 128, false, ",decode_stages=2"},
      {2, 1, 1000, 8, 2, 128, false, ",decode_f16mma=0"},  // bf16 q on bf16 MMAs (the tensor-core kernel)
      {3, 4, 300, 16, 2, 64, true, ",decode_f16mma=0"},
  };
  uint64_t seed = 501;
  bool per_head = false;
  // The tensor-core kernels: rows on M (the default), and keys on M (decode_kt=1: head_dim 128, f16 MMAs).
  const std::vector<std::string> kernels =
      tc ? std::vector<std::string>{"decode_tc=1", "decode_tc=1,decode_kt=1"} : std::vector<std::string>{"decode_tc=0"};
  for (const std::string& kernel : kernels)
    for (const Fp8Shape& s : shapes) {
      if (tc && s.d > 128) continue;
      const std::string tune = kernel + s.tune;
      if (tune.find("decode_kt=1") != std::string::npos &&
          (s.d != 128 || tune.find("decode_f16mma=0") != std::string::npos))
        continue;
      const kernelkit::testing::ScopedEnv env("KERNELKIT_TUNE", tune.c_str());
      AttentionCase c{OpId::decode_attention,
                      dt,
                      s.batch,
                      s.s_q,
                      s.s_k,
                      s.heads,
                      s.kv_heads,
                      s.d,
                      s.causal,
                      false,
                      false,
                      paged,
                      1.0,
                      seed++};
      c.fp8 = true;
      c.scale_per_head = per_head = !per_head;
      const auto r = kernelkit::testing::run_attention_case_cuda(c, 0);
      if (!fp8_cache_runs(r, c.name()))
        GTEST_SKIP() << "profile " << kernelkit::testing::case_profile().key << " has no FP8";
      kernelkit::testing::expect_case(r, dt, c.name() + " " + tune);
    }
  // Masks and score transforms with an e4m3 cache: a sliding window (pages before it never read), soft-cap, ALiBi;
  // the tensor-core kernel also on bf16 MMAs (bf16 q; f16 ones by default).
  for (const char* tune : {"decode_tc=0", "decode_tc=1", "decode_tc=1,decode_f16mma=0", "decode_tc=1,decode_kt=1"}) {
    if ((std::string(tune) != "decode_tc=0") != tc) continue;
    AttentionCase m{OpId::decode_attention, dt, 2, 2, 1000, 8, 2, 128, true, false, false, paged, 4.0, seed++};
    m.fp8 = true, m.window_left = 100, m.softcap = 30.0f, m.alibi = 1;
    const kernelkit::testing::ScopedEnv env("KERNELKIT_TUNE", tune);
    kernelkit::testing::expect_case(kernelkit::testing::run_attention_case_cuda(m, 0), dt, m.name() + " " + tune);
  }
}

INSTANTIATE_TEST_SUITE_P(Caches, DecodeGridFp8,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16), ::testing::Bool(),
                                            ::testing::Bool()));

// attention over e4m3 k / v (options.k_scale / v_scale, per tensor and per KV head in turn): dense and varlen (with and
// without max_seqlen), causal or not, GQA 1 to 8, s_q < s_k and s_q > s_k, one token, k / v seen through a padded
// batch stride (NaN codes in the padding), a window with a soft-cap and ALiBi, and the mma.sync prefill where wgmma
// is the default. The reference attends over the exactly dequantized values in fp64; the bound adds one rounding of
// each K / V value to T (attention_cases.cpp). Profiles without FP8 (a100, t4) must refuse every case, and skip.
using Fp8PrefillParam = std::tuple<DType, int64_t>;  // dtype, head_dim
class AttentionFp8 : public ::testing::TestWithParam<Fp8PrefillParam> {};

TEST_P(AttentionFp8, MatchesReference) {
  const auto [dt, d] = GetParam();
  struct Fp8Case {
    Shape s;
    bool causal, varlen;
    int64_t kv_pad = 0;
    bool max_seqlen = false;
  };
  const std::vector<Fp8Case> cases = {
      {{2, 1, 1, 8, 8}, false, false},             // one token
      {{2, 7, 127, 8, 2}, false, false},           // GQA 4, s_q < s_k
      {{1, 127, 127, 8, 1}, true, false},          // GQA 8
      {{2, 127, 1000, 4, 2}, true, false},         // a KV prefix over many tiles, bottom-right causal
      {{1, 300, 127, 2, 1}, true, false},          // s_q > s_k: rows that see nothing
      {{2, 70, 130, 8, 2}, true, false, 3},        // padded k / v views (NaN codes never read)
      {{3, 127, 300, 8, 2}, false, true},          // varlen, the grid from cu_seqlens read back
      {{3, 300, 300, 4, 1}, true, true, 0, true},  // varlen with max_seqlen: nothing read back
      {{1, 1000, 1000, 4, 2}, true, false},        // many tiles both ways
  };
  uint64_t seed = 801;
  bool per_head = false;
  for (const Fp8Case& f : cases) {
    if (d == 256 && f.s.s_q * f.s.s_k > 300 * 300) continue;  // keep the fp64 reference's time in check
    AttentionCase c{OpId::attention, dt, f.s.batch, f.s.s_q, f.s.s_k, f.s.heads, f.s.kv_heads, d, f.causal};
    c.varlen = f.varlen, c.kv_pad = f.kv_pad, c.max_seqlen = f.max_seqlen, c.seed = seed++;
    c.fp8 = true;
    c.scale_per_head = per_head = !per_head;
    const auto r = kernelkit::testing::run_attention_case_cuda(c, 0);
    if (!fp8_cache_runs(r, c.name()))
      GTEST_SKIP() << "profile " << kernelkit::testing::case_profile().key << " has no FP8";
    kernelkit::testing::expect_case(r, dt, c.name());
  }
  // A window, a soft-cap on large logits and ALiBi over e4m3 k / v.
  AttentionCase m{OpId::attention, dt, 2, 300, 300, 4, 2, d, true};
  m.fp8 = true, m.window_left = 64, m.softcap = 30.0f, m.magnitude = 4.0, m.alibi = 1, m.seed = seed++;
  kernelkit::testing::expect_case(kernelkit::testing::run_attention_case_cuda(m, 0), dt, m.name());
  // The mma.sync prefill (the default below sm_90a) on the dequantized temporary too.
  const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", "attn_wgmma=0");
  AttentionCase n{OpId::attention, dt, 2, 127, 300, 8, 2, d, true};
  n.fp8 = true, n.scale_per_head = true, n.varlen = true, n.seed = seed++;
  kernelkit::testing::expect_case(kernelkit::testing::run_attention_case_cuda(n, 0), dt, n.name() + " attn_wgmma=0");
}

INSTANTIATE_TEST_SUITE_P(HeadDims, AttentionFp8,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16),
                                            ::testing::Values(int64_t{64}, int64_t{128}, int64_t{256})));

// Sliding window, soft-cap and ALiBi, alone and together, with causal and not, GQA, s_q < s_k and s_q > s_k, varlen, the
// head dims; on sm_90a every prefill kernel (the TMA-fed wgmma default, cp.async-fed wgmma, mma.sync; head_dim 256
// has the mma.sync one only) and both
// decode kernels with contiguous and paged caches.
struct MaskShape {
  int64_t batch, s_q, s_k, heads, kv_heads;
  bool causal;
  int64_t window;
  float softcap;
  double magnitude;  // q, k in [-magnitude, magnitude]: 8 gives logits the cap bends hard
  int alibi = 0;     // AttentionCase::alibi
};

AttentionCase masked_case(OpId op, DType dt, const MaskShape& m, int64_t d, uint64_t seed) {
  AttentionCase c{op, dt, m.batch, m.s_q, m.s_k, m.heads, m.kv_heads, d, m.causal};
  c.magnitude = m.magnitude;
  c.seed = seed;
  c.window_left = m.window;
  c.softcap = m.softcap;
  c.alibi = m.alibi;
  return c;
}

using MaskParam = std::tuple<DType, int64_t>;  // dtype, head_dim
class AttentionMasks : public ::testing::TestWithParam<MaskParam> {};

TEST_P(AttentionMasks, PrefillMatchesReference) {
  const auto [dt, d] = GetParam();
  const std::vector<MaskShape> shapes = {
      {1, 1000, 1000, 4, 1, true, 100, 0.0f, 1.0},  // a window over many tiles: tiles skipped on both sides
      {2, 300, 300, 4, 2, true, 0, 0.0f, 1.0},      // window 0: each query sees itself only
      {1, 127, 1000, 2, 1, true, 200, 0.0f, 1.0},   // s_q < s_k: windows from the bottom-right positions
      {1, 1000, 300, 2, 2, true, 64, 0.0f, 1.0},    // s_q > s_k: early rows see nothing
      {1, 1000, 1000, 4, 4, false, 333, 0.0f, 1.0},  // not causal: keys from p - 333 to the end
      {1, 1000, 1000, 4, 1, true, -1, 5.0f, 8.0},   // a soft-cap on large logits: the cap decides the softmax
      {2, 127, 127, 8, 2, false, -1, 50.0f, 1.0},   // Gemma 2's cap of 50 on ordinary logits
      {1, 1000, 1000, 4, 2, true, 128, 30.0f, 4.0},  // both
      {1, 1000, 1000, 4, 2, true, -1, 0.0f, 1.0, 1},    // ALiBi per head: the bias on every tile, masked or not
      {2, 127, 300, 4, 1, false, -1, 0.0f, 1.0, 2},     // per sequence, not causal: keys on both sides of p
      {1, 1000, 1000, 4, 2, true, 128, 30.0f, 4.0, 1},  // window, cap and ALiBi
  };
  std::vector<std::string> settings = {""};
  DeviceProfile prof;
  ASSERT_TRUE(active_profile(0, &prof).ok());
  if (prof.sm == 90 && kernelkit::cuda::sm90a_available(0)) {  // head_dim 256: the warp-specialized kernel or mma.sync
    settings = {"", "attn_slack=0", "attn_wgmma=0", "attn_varlen_ws=0"};
    if (d <= 128) settings.insert(settings.end(), {"attn_wgmma=2", "attn_wgmma=1"});
    if (d == 64) settings.push_back("attn_bm=128");  // two consumers (the default plans three: masks take two)
  }
  for (const std::string& setting : settings) {
    SCOPED_TRACE(setting);
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", setting.c_str());
    uint64_t seed = 81;
    for (const MaskShape& m : shapes) {
      if (d == 256 && m.s_q * m.s_k > 300 * 300) continue;  // keep the fp64 reference's time in check
      expect_attention(masked_case(OpId::attention, dt, m, d, seed++));
    }
    if (d == 256)  // one long window at 256: tiles skipped on both sides of its 64-row blocks
      expect_attention(masked_case(OpId::attention, dt, {1, 1000, 1000, 2, 1, true, 100, 0.0f, 1.0}, d, seed++));
    // Packed sequences (odd ones shorter) with a window, a cap and ALiBi per sequence, and [b, h, s, d] strides.
    AttentionCase c = masked_case(OpId::attention, dt, {3, 300, 500, 8, 2, true, 50, 20.0f, 4.0, 2}, d, seed++);
    c.varlen = true;
    expect_attention(c);
    c.varlen = false, c.bhsd = true, c.seed = seed++;
    expect_attention(c);
  }
}

TEST_P(AttentionMasks, DecodeMatchesReference) {
  const auto [dt, d] = GetParam();
  const std::vector<MaskShape> shapes = {
      {2, 1, 4097, 8, 2, false, 1000, 0.0f, 1.0},  // a window over a long cache: the splits cover the window only
      {2, 4, 1000, 8, 1, true, 100, 0.0f, 1.0},    // speculative tokens, each its own window
      {3, 1, 127, 4, 4, true, 0, 0.0f, 1.0},       // window 0: the last key only
      {3, 1, 300, 4, 4, false, -1, 30.0f, 4.0},    // a soft-cap
      {2, 2, 1000, 16, 2, true, 64, 20.0f, 4.0},   // both
      {2, 4, 1000, 8, 2, true, -1, 0.0f, 1.0, 2},     // ALiBi per sequence, per row of the GQA group
      {2, 1, 4097, 8, 2, false, 1000, 20.0f, 4.0, 1},  // with a window over a long cache and a cap
  };
  uint64_t seed = 91;
  for (bool tc : {true, false}) {
    if (tc && d > 128) continue;  // the tensor-core decode is planned up to head_dim 128
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", tc ? "decode_tc=1" : "decode_tc=0");
    for (bool paged : {false, true})
      for (const MaskShape& m : shapes) {
        AttentionCase c = masked_case(OpId::decode_attention, dt, m, d, seed++);
        c.paged = paged;
        expect_attention(c);
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Masks, AttentionMasks,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16), ::testing::Values(64, 128, 256)));

// Head dims between the kernels' 64, 128 and 256 (each runs on the next one up, its padding columns zeros): prefill
// with GQA, partial tiles, s_q < s_k and s_q > s_k, varlen and a window with a soft-cap and ALiBi; decode on both
// caches and both kernels (the tensor-core one up to 128). On sm_90a also the cp.async-fed wgmma prefill and the mma.sync one.
using HeadDimParam = std::tuple<DType, int64_t>;
class AttentionHeadDims : public ::testing::TestWithParam<HeadDimParam> {};

TEST_P(AttentionHeadDims, PrefillAndDecodeMatchReference) {
  const auto [dt, d] = GetParam();
  std::vector<std::string> settings = {""};
  DeviceProfile prof;
  ASSERT_TRUE(active_profile(0, &prof).ok());
  // Past 128: the warp-specialized kernel (of 192 or 256) or mma.sync.
  if (prof.sm == 90 && kernelkit::cuda::sm90a_available(0)) {
    settings = {"", "attn_slack=0", "attn_wgmma=0"};
    if (d <= 128) settings.insert(settings.end(), {"attn_wgmma=2", "attn_wgmma=1"});
    if (d > 128) settings.push_back("attn_bn=64");  // the masked forms' 64-key tiles for the plain calls too
  }
  uint64_t seed = 101;
  for (const std::string& setting : settings) {
    SCOPED_TRACE(setting);
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", setting.c_str());
    for (bool causal : {false, true}) {
      expect_attention({OpId::attention, dt, 2, 127, 300, 8, 2, d, causal, false, false, false, 1.0, seed++});
      expect_attention({OpId::attention, dt, 1, 300, 127, 4, 1, d, causal, false, false, false, 1.0, seed++});
      expect_attention({OpId::attention, dt, 3, 100, 200, 4, 2, d, causal, false, true, false, 1.0, seed++});
    }
    expect_attention(masked_case(OpId::attention, dt, {1, 300, 300, 4, 2, true, 50, 20.0f, 4.0, 1}, d, seed++));
  }
  for (bool tc : {true, false}) {
    if (tc && d > 128) continue;
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", tc ? "decode_tc=1" : "decode_tc=0");
    for (bool paged : {false, true}) {
      expect_attention({OpId::decode_attention, dt, 2, 1, 1000, 8, 2, d, false, false, false, paged, 1.0, seed++});
      expect_attention({OpId::decode_attention, dt, 3, 2, 300, 8, 1, d, true, false, false, paged, 1.0, seed++});
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HeadDims, AttentionHeadDims,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16),
                                            ::testing::Values(8, 32, 40, 72, 80, 96, 112, 160, 192)));

// Paged caches of every page size (a power of two up to 256; shuffled page tables) on both decode kernels, with
// GQA, speculative causal tokens and a window.
class DecodePages : public ::testing::TestWithParam<DType> {};

TEST_P(DecodePages, EveryPageSizeMatchesReference) {
  uint64_t seed = 121;
  for (bool tc : {true, false}) {
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", tc ? "decode_tc=1" : "decode_tc=0");
    for (int64_t page : {1, 2, 8, 16, 32, 64, 128, 256}) {
      AttentionCase c{OpId::decode_attention, GetParam(), 3, 1, 1000, 8, 2, 128};
      c.paged = true, c.page_size = page, c.seed = seed++;
      expect_attention(c);
      c = masked_case(OpId::decode_attention, GetParam(), {2, 3, 600, 8, 1, true, 100, 0.0f, 1.0}, 64, seed++);
      c.paged = true, c.page_size = page;
      expect_attention(c);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, DecodePages, ::testing::Values(DType::f16, DType::bf16));

// Both decode kernels read only the pages from the first query's window start: with the pages wholly before it
// evicted (block table -1) the output has the bits of the full table's, and no bad page is recorded; without the
// window the -1 entries are found and recorded (never followed).
TEST(DecodePagesGpu, PagesBeforeTheWindowAreNeverRead) {
  using kernelkit::testing::DeviceBuffer;
  using kernelkit::testing::HostBuffer;
  const int64_t B = 2, SQ = 2, H = 8, HK = 2, D = 128, PAGE = 16, MP = 64, W = 100;
  const std::vector<int64_t> lens = {1000, 600};
  std::mt19937_64 rng(61);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  auto filled = [&](int64_t n) {
    HostBuffer h(DType::f16, n);
    for (int64_t i = 0; i < n; ++i) h.set(i, u(rng));
    return h;
  };
  const HostBuffer q = filled(B * SQ * H * D), k = filled(B * MP * PAGE * HK * D), v = filled(k.size());
  HostBuffer table(DType::i32, B * MP), evicted(DType::i32, B * MP), lens_h(DType::i32, B);
  for (int64_t b = 0; b < B; ++b) {
    lens_h.set(b, static_cast<double>(lens[static_cast<size_t>(b)]));
    for (int64_t p = 0; p < MP; ++p) {
      table.set(b * MP + p, static_cast<double>(b * MP + p));
      const bool gone = (p + 1) * PAGE <= lens[static_cast<size_t>(b)] - SQ - W;
      evicted.set(b * MP + p, gone ? -1.0 : static_cast<double>(b * MP + p));
    }
  }
  DeviceBuffer dq, dk, dv, dt, de, dl, dout;
  ASSERT_TRUE(kernelkit::testing::first_error({dq.alloc(q.bytes()), dk.alloc(k.bytes()), dv.alloc(v.bytes()),
                                               dt.alloc(table.bytes()), de.alloc(evicted.bytes()),
                                               dl.alloc(lens_h.bytes()), dout.alloc(q.bytes()), dq.upload(q),
                                               dk.upload(k), dv.upload(v), dt.upload(table), de.upload(evicted),
                                               dl.upload(lens_h)})
                  .ok());
  const Device dev = Device::cuda(0);
  auto run = [&](const DeviceBuffer& bt, int64_t window, HostBuffer* out) {
    AttentionOptions o;
    o.causal = true;
    o.window_left = window;
    const auto pool = [&](const DeviceBuffer& t) {
      return TensorView::contiguous(t.data(), DType::f16, {B * MP, PAGE, HK, D}, dev);
    };
    EXPECT_TRUE(dout.poison().ok());
    const KvCache cache{pool(dk), pool(dv), TensorView::contiguous(bt.data(), DType::i32, {B, MP}, dev),
                        TensorView::contiguous(dl.data(), DType::i32, {B}, dev)};
    const Status s = decode_attention(TensorView::contiguous(dout.data(), DType::f16, {B, SQ, H, D}, dev),
                                      std::nullopt, TensorView::contiguous(dq.data(), DType::f16, {B, SQ, H, D}, dev),
                                      cache, o);
    EXPECT_TRUE(dout.download(out).ok());
    // The GPU test binary runs in debug mode (the call itself reports a recorded index); without it check_errors does.
    const Status recorded = check_errors(0);
    return s.ok() ? recorded : s;
  };
  for (const char* setting : {"decode_tc=1", "decode_tc=0"}) {
    SCOPED_TRACE(setting);
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", setting);
    HostBuffer full(DType::f16, q.size()), gone(DType::f16, q.size());
    ASSERT_TRUE(run(dt, W, &full).ok());
    const Status recorded = run(de, W, &gone);
    EXPECT_TRUE(recorded.ok()) << recorded.to_string();
    EXPECT_EQ(std::memcmp(full.data(), gone.data(), full.bytes()), 0);
    const Status found = run(de, -1, &gone);
    EXPECT_NE(found.message().find("cache.block_table"), std::string::npos) << found.to_string();
  }
}

TEST(AttentionGpu, BadInputsAreRefusedWithTheirNames) {
  // Device cu_seqlens are read back and checked; h % h_kv and dtype mismatches are refused before any launch.
  // Inputs may share memory; the output gets its own (an output overlapping an input is refused first).
  kernelkit::testing::DeviceBuffer buf, out_buf, cu;
  ASSERT_TRUE(buf.alloc(1 << 20).ok());
  ASSERT_TRUE(out_buf.alloc(1 << 20).ok());
  ASSERT_TRUE(cu.alloc(64).ok());
  kernelkit::testing::HostBuffer cuh(DType::i32, 3);
  cuh.set(0, 0);
  cuh.set(1, 5);
  cuh.set(2, 3);
  ASSERT_TRUE(cu.upload(cuh).ok());
  const Device dev = Device::cuda(0);
  auto t = [&](std::initializer_list<int64_t> shape, DType dt = DType::f16) {
    return TensorView::contiguous(buf.data(), dt, shape, dev);
  };
  auto out = [&](std::initializer_list<int64_t> shape) {
    return TensorView::contiguous(out_buf.data(), DType::f16, shape, dev);
  };
  AttentionOptions o;
  o.cu_seqlens_q = TensorView::contiguous(cu.data(), DType::i32, {3}, dev);
  o.cu_seqlens_k = TensorView::contiguous(cu.data(), DType::i32, {3}, dev);
  Status s = attention(out({3, 4, 64}), std::nullopt, t({3, 4, 64}), t({3, 2, 64}), t({3, 2, 64}), o);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.to_string();
  EXPECT_NE(s.message().find("options.cu_seqlens_q must be non-decreasing"), std::string::npos) << s.message();
  s = attention(out({1, 4, 6, 64}), std::nullopt, t({1, 4, 6, 64}), t({1, 4, 4, 64}), t({1, 4, 4, 64}));
  EXPECT_NE(s.message().find("q heads (6) must be a positive multiple of k/v heads (4)"), std::string::npos);
  s = attention(out({1, 4, 4, 64}), std::nullopt, t({1, 4, 4, 64}), t({1, 4, 4, 64}, DType::bf16), t({1, 4, 4, 64}));
  EXPECT_NE(s.message().find("k dtype bf16 does not match q dtype f16"), std::string::npos) << s.message();
  s = attention(out({1, 4, 4, 100}), std::nullopt, t({1, 4, 4, 100}), t({1, 4, 4, 100}), t({1, 4, 4, 100}));
  EXPECT_EQ(s.code(), StatusCode::unsupported) << s.to_string();
  // e4m3 k / v with head_dim 72 (rows of codes padded to 80 bytes): refused for the head_dim where the profile has
  // FP8, else as FP8.
  AttentionOptions f8;
  f8.k_scale = f8.v_scale = TensorView::contiguous(buf.data(), DType::f32, {1}, dev);
  const auto kv8 = TensorView::strided(buf.data(), DType::f8e4m3, {1, 4, 4, 72}, {4 * 4 * 80, 4 * 80, 80, 1}, dev);
  s = attention(out({1, 4, 4, 72}), std::nullopt, t({1, 4, 4, 72}), kv8, kv8, f8);
  EXPECT_EQ(s.code(), StatusCode::unsupported) << s.to_string();
  EXPECT_NE(s.message().find(kernelkit::testing::case_profile().supports(DType::f8e4m3)
                                 ? "attention: an e4m3 cache needs head_dim a multiple of 16 on CUDA"
                                 : "attention: k dtype f8e4m3 is not supported on profile"),
            std::string::npos)
      << s.message();
  // A host pointer passed as device memory.
  std::vector<uint16_t> host(4 * 64);
  s = attention(out({1, 1, 4, 64}), std::nullopt, TensorView::contiguous(host.data(), DType::f16, {1, 1, 4, 64}, dev),
                t({1, 1, 4, 64}), t({1, 1, 4, 64}));
  EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.to_string();
  EXPECT_NE(s.message().find("attention: q"), std::string::npos) << s.message();
}

// The planner's compiled alternatives (KERNELKIT_TUNE, which bench/op_baselines.py --tuned times against the
// defaults) stay correct on every path, so a default can be flipped back on a measurement: the mma.sync prefill
// (attn_wgmma=0: the default below sm_90a) with its profile's tile, one 16-row tile a warp, the 3-buffer K/V ring
// (64 KB on the T4 profile: its opt-in maximum) and 32-key tiles at head_dim 128; 64-key tiles (the wgmma kernel's on
// sm_90a, the mma.sync kernel's elsewhere; not on the T4 profile); the wgmma prefill fed by cp.async and by TMA
// (where it runs); 3 or 4 CUDA-core decode stages (64 KB) with forced split counts (one split: no merge; 7: uneven
// chunks), and the tensor-core decode with the same split counts. f16: valid on every profile.
TEST(PlannerAlternatives, TunedAttentionAndDecodeMatchReference) {
  uint64_t seed = 71;
  DeviceProfile prof;
  ASSERT_TRUE(active_profile(0, &prof).ok());
  for (const char* setting :
       {"attn_wgmma=0", "attn_wgmma=0,attn_mw=1", "attn_wgmma=0,attn_stages=1", "attn_wgmma=0,attn_bn=32", "attn_bn=64",
        "attn_wgmma=1", "attn_wgmma=1,attn_bn=128", "attn_wgmma=2", "attn_wgmma=3", "attn_wgmma=3,attn_pv_n=64",
        "attn_wgmma=3,attn_stages=3", "attn_wgmma=3,attn_slack=0"}) {
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", setting);
    // The planner refuses exactly these: 64-key tiles for the T4 profile's 64-row blocks, wgmma below sm_90
    // profiles (checked, so that a refusal elsewhere fails instead of skipping); the wgmma kernel also needs sm_90a
    // code and a compute capability 9.0 GPU (attn_bn=64 is the wgmma kernel's 64-key tile where that is the default).
    const bool wgmma = std::string(setting).rfind("attn_wgmma=1", 0) == 0 || std::string(setting) == "attn_wgmma=2" ||
                       std::string(setting).rfind("attn_wgmma=3", 0) == 0;
    const bool refused = (std::string(setting) == "attn_bn=64" && prof.sm < 80) || (wgmma && prof.sm != 90);
    TilePlan tile;
    const Status planned = plan_tile(prof, TileFamily::attention, DType::f16, 128, &tile);
    if (refused) {
      EXPECT_EQ(planned.code(), StatusCode::unsupported) << setting << " on profile " << prof.key;
      continue;
    }
    ASSERT_TRUE(planned.ok()) << setting << ": " << planned.to_string();
    if (wgmma && !kernelkit::cuda::sm90a_available(0)) continue;
    for (int64_t d : {64, 128})
      for (bool causal : {false, true})
        expect_attention(
            {OpId::attention, DType::f16, 2, 127, 1000, 8, 2, d, causal, false, false, false, 1.0, seed++});
    // Fewer K/V tiles than the ring has buffers: one key, and 40 keys (two 32-key tiles).
    expect_attention({OpId::attention, DType::f16, 1, 1, 1, 4, 4, 64, false, false, false, false, 1.0, seed++});
    expect_attention({OpId::attention, DType::f16, 2, 7, 40, 8, 2, 128, true, false, false, false, 1.0, seed++});
  }
  // decode_rotate=1: each sequence's tiles from another one on (with 7 uneven splits, paged and contiguous caches).
  for (const char* setting :
       {"decode_tc=0,decode_stages=3,decode_splits=1", "decode_tc=0,decode_stages=4,decode_splits=7", "decode_splits=1",
        "decode_splits=7", "decode_rotate=1", "decode_rotate=1,decode_splits=7",
        "decode_tc=0,decode_rotate=1,decode_splits=7"}) {
    const kernelkit::testing::ScopedEnv decode("KERNELKIT_TUNE", setting);
    expect_attention({OpId::decode_attention, DType::f16, 2, 1, 4097, 32, 8, 128, false, false, false, false, 1.0,
                      seed++});
    expect_attention({OpId::decode_attention, DType::f16, 3, 2, 1000, 8, 2, 64, true, false, false, true, 1.0, seed++});
  }
  // The deepest rings (kDecodeMaxStages): 192 KB a block on tensor cores (Hopper's shared memory only), 96 KB on CUDA
  // cores (not the T4's 64 KB); refused where the profile's shared memory cannot hold them.
  for (const char* setting : {"decode_stages=6", "decode_tc=0,decode_stages=6"}) {
    const kernelkit::testing::ScopedEnv decode("KERNELKIT_TUNE", setting);
    // 6 stages x warps x (K, V) x a warp tile's f16 elements (head_dim 128) x 2 bytes
    const int64_t warp_tile =
        std::string(setting) == "decode_stages=6" ? kDecodeTcTileKeys * 128 : kDecodeWarpTileElems;
    const int64_t ring = int64_t{6} * (kDecodeThreads / 32) * 2 * warp_tile * 2;
    DecodePlan plan;
    const Status planned = plan_decode(prof, 128, 2, 8, 4, 2 * 32, 4097, &plan);
    if (ring > prof.smem_per_block_optin) {
      EXPECT_EQ(planned.code(), StatusCode::invalid_argument) << setting << " on profile " << prof.key;
      continue;
    }
    ASSERT_TRUE(planned.ok()) << setting << ": " << planned.to_string();
    EXPECT_EQ(plan.smem_bytes, ring);
    expect_attention(
        {OpId::decode_attention, DType::f16, 2, 1, 4097, 32, 8, 128, false, false, false, false, 1.0, seed++});
    expect_attention({OpId::decode_attention, DType::f16, 3, 2, 1000, 8, 2, 64, true, false, false, true, 1.0, seed++});
  }
  {  // Splits past one wave of blocks: b64 h32/8 is 512 blocks, 1536 in 3 splits, more than the 264 an H200 holds at
     // once (3 stages, two blocks an SM); the split model past one wave (decode_waves=1) keeps one split there.
    const kernelkit::testing::ScopedEnv decode("KERNELKIT_TUNE", "decode_waves=1,decode_splits=3");
    expect_attention(
        {OpId::decode_attention, DType::f16, 64, 1, 520, 32, 8, 128, false, false, false, false, 1.0, seed++});
  }
}

// write_kv_cache: caches of several blocks x block sizes (a paged pool, a contiguous-shaped one, pages of 1), RoPE
// neox / gptj (full and partial), q in place and into q_out, i32 and i64 slots, many tokens (a grid of several
// blocks) and one, GQA and MHA; every element of both caches (bit-exact without RoPE) and of q against the CPU.
class WriteKvCacheGpu : public ::testing::TestWithParam<DType> {};

TEST_P(WriteKvCacheGpu, MatchesTheCpuBackend) {
  using kernelkit::testing::KvWriteCase;
  const DType dt = GetParam();
  uint64_t seed = 131;
  const KvWriteCase cases[] = {
      {dt, 1000, 8, 2, 128, 64, 16, 0, 0, true, true, seed++},
      {dt, 300, 8, 8, 64, 3, 128, 0, 0, false, true, seed++},
      {dt, 70, 4, 4, 256, 100, 1, 0, 0, true, true, seed++},
      {dt, 1000, 32, 8, 128, 64, 16, 1, 0, true, true, seed++},
      {dt, 257, 8, 2, 128, 32, 16, 1, 0, false, false, seed++},
      {dt, 129, 8, 2, 128, 16, 16, 2, 0, true, true, seed++},
      {dt, 129, 8, 2, 128, 16, 16, 2, 64, true, false, seed++},
      {dt, 65, 16, 2, 80, 8, 16, 1, 32, true, true, seed++},
      {dt, 33, 4, 1, 64, 4, 16, 1, 8, true, true, seed++},
      {dt, 1, 32, 8, 128, 1, 16, 1, 0, true, true, seed++},
  };
  for (const KvWriteCase& c : cases) {
    SCOPED_TRACE(c.name());
    kernelkit::testing::expect_case(kernelkit::testing::run_kv_write_case_cuda(c), dt, c.name());
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, WriteKvCacheGpu, ::testing::Values(DType::f16, DType::bf16));

// ---- e4m3 KV caches (KvCache k_scale / v_scale): skipped on profiles without FP8, where they must be refused

// write_kv_cache into e4m3 caches: codes byte for byte against the CPU backend (the quantizers' rounding: saturating,
// subnormal and zero codes), with RoPE neox / gptj (partial), scales per tensor and per head, i32 / i64 slots,
// pages of 1 and 16, many tokens and one; with RoPE the rotated k may round one T ulp apart (its code one e4m3
// step).
TEST_P(WriteKvCacheGpu, E4m3CachesMatchTheCpuBackend) {
  using kernelkit::testing::KvWriteCase;
  const DType dt = GetParam();
  uint64_t seed = 151;
  const KvWriteCase cases[] = {
      {dt, 1000, 8, 2, 128, 64, 16, 0, 0, true, true, seed++},
      {dt, 300, 8, 8, 64, 3, 128, 0, 0, false, true, seed++},
      {dt, 70, 4, 4, 256, 100, 1, 0, 0, true, true, seed++},
      {dt, 1000, 32, 8, 128, 64, 16, 1, 0, true, true, seed++},
      {dt, 129, 8, 2, 128, 16, 16, 2, 64, true, false, seed++},
      {dt, 65, 16, 2, 80, 8, 16, 1, 32, true, true, seed++},
      {dt, 33, 4, 1, 96, 4, 16, 2, 8, false, true, seed++},
      {dt, 1, 32, 8, 128, 1, 16, 1, 0, true, true, seed++},
  };
  bool per_head = false;
  for (KvWriteCase c : cases) {
    c.fp8 = true;
    c.scale_per_head = per_head = !per_head;
    SCOPED_TRACE(c.name());
    const auto r = kernelkit::testing::run_kv_write_case_cuda(c);
    if (!fp8_cache_runs(r, c.name()))
      GTEST_SKIP() << "profile " << kernelkit::testing::case_profile().key << " has no FP8";
    kernelkit::testing::expect_case(r, dt, c.name());
  }
}

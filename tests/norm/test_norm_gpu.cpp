// Every norm kernel against the fp64 CPU reference: fresh random inputs, poisoned outputs, every element checked.
// Runs under whatever profile is active (KERNELKIT_PROFILE=t4|a100 for the T4/A100 paths): dtypes the profile lacks
// must be refused with `unsupported`, never run.
#include <gtest/gtest.h>

#include "expect_case.hpp"
#include "ops/norm/norm_cases.hpp"
#include "random_cases.hpp"

using namespace kernelkit;

namespace {

// The FP8 quantizing ops are refused (and the test skipped) on profiles without FP8.
void check(const kernelkit::testing::NormCase& c) {
  kernelkit::testing::expect_case(kernelkit::testing::run_norm_case_cuda(c, 0), c.op, c.dtype, c.name());
}

std::string dname(DType t) { return std::string(dtype_name(t)); }

// Norm + quantization takes 16-bit activations only.
const auto kQuantOps = ::testing::Values(OpId::rms_norm_quant_int8, OpId::rms_norm_quant_fp8,
                                         OpId::fused_add_rms_norm_quant_int8, OpId::fused_add_rms_norm_quant_fp8);
const auto kHalfDtypes = ::testing::Values(DType::f16, DType::bf16);

}  // namespace

using GridParam = std::tuple<OpId, DType, int64_t, int64_t>;
class NormGrid : public ::testing::TestWithParam<GridParam> {};

TEST_P(NormGrid, MatchesReference) {
  const auto [op, dt, rows, hidden] = GetParam();
  kernelkit::testing::NormCase c;
  c.op = op;
  c.dtype = dt;
  c.rows = rows;
  c.hidden = hidden;
  c.seed = static_cast<uint64_t>(::testing::UnitTest::GetInstance()->random_seed()) + rows * 7919 + hidden;
  check(c);
}

const auto kGridRows = ::testing::Values(1, 7, 83, 4096);
const auto kGridHidden = ::testing::Values(64, 111, 500, 769, 2048, 4096, 5125, 8192);
std::string grid_name(const ::testing::TestParamInfo<GridParam>& i) {
  return std::string(op_info(std::get<0>(i.param)).name) + "_" + dname(std::get<1>(i.param)) + "_" +
         std::to_string(std::get<2>(i.param)) + "x" + std::to_string(std::get<3>(i.param));
}

INSTANTIATE_TEST_SUITE_P(AllShapes, NormGrid,
                         ::testing::Combine(::testing::Values(OpId::rms_norm, OpId::fused_add_rms_norm,
                                                              OpId::layer_norm, OpId::ada_layer_norm,
                                                              OpId::rms_norm_gelu),
                                            ::testing::Values(DType::f32, DType::f16, DType::bf16), kGridRows,
                                            kGridHidden),
                         grid_name);
INSTANTIATE_TEST_SUITE_P(Quant, NormGrid, ::testing::Combine(kQuantOps, kHalfDtypes, kGridRows, kGridHidden),
                         grid_name);

// Strided rows (views into a wider buffer, e.g. a slice of a fused projection), including widths that break
// 16-byte alignment of every row but the first.
class NormVariants : public ::testing::TestWithParam<std::tuple<OpId, DType>> {};

TEST_P(NormVariants, StridedRows) {
  const auto [op, dt] = GetParam();
  for (int64_t pad : {1, 8, 13})
    for (int64_t hidden : {111, 2048, 4096}) {
      kernelkit::testing::NormCase c;
      c.op = op;
      c.dtype = dt;
      c.rows = 83;
      c.hidden = hidden;
      c.row_pad = pad;
      c.seed = 17 + pad;
      check(c);
    }
}

TEST_P(NormVariants, WithoutWeightOrBiasAndGemmaOffset) {
  const auto [op, dt] = GetParam();
  kernelkit::testing::NormCase c;
  c.op = op;
  c.dtype = dt;
  c.rows = 83;
  c.hidden = 4096;
  c.weight = false;
  c.bias = false;
  check(c);
  c.weight = true;
  c.weight_offset =
      op == OpId::rms_norm || op == OpId::fused_add_rms_norm || op_quant_out_dtype(op).has_value() ? 1.0f : 0.0f;
  check(c);
}

TEST_P(NormVariants, LongRowsTakeSeveralChunks) {
  const auto [op, dt] = GetParam();
  kernelkit::testing::NormCase c;
  c.op = op;
  c.dtype = dt;
  c.rows = 5;
  c.hidden = 100003;  // odd and longer than 1024 threads' registers: scalar path, several passes
  check(c);
  c.hidden = 131072;  // vectorized, several passes
  check(c);
}

TEST_P(NormVariants, Fp16NearMaxStaysFinite) {
  const auto [op, dt] = GetParam();
  if (dt != DType::f16) GTEST_SKIP() << "fp16-specific";
  kernelkit::testing::NormCase c;
  c.op = op;
  c.dtype = dt;
  c.rows = 83;
  c.hidden = 4096;
  c.magnitude = 60000;  // sum of squares overflows fp16 by far; fp32 accumulation must not
  check(c);
  c.hidden = 769;
  check(c);
}

// Constant 16-bit rows (one element, too) normalize to 0: the output is the bias, within the plain tolerance. The
// one-FFMA normalize, v rstd - mean rstd, would leave |mean| rstd 2^-24 (0.37 at a constant 20000 with eps 1e-5), and
// a mean taken as sum * (1 / hidden) an ulp of the mean times rstd (hidden 7). Only 16-bit: a sum of equal fp32
// values is not exact, so an fp32 constant row keeps the fp32-terms allowance of the grid tests.
TEST(NormConstantRows, LayerNormGivesTheBias) {
  for (DType dt : {DType::f16, DType::bf16})
    for (int64_t hidden : {1, 7, 64, 4096})
      for (double magnitude : {20000.0, 300.0, 1.0}) {
        kernelkit::testing::NormCase c;
        c.op = OpId::layer_norm;
        c.dtype = dt;
        c.rows = 9;
        c.hidden = hidden;
        c.eps = 1e-5f;
        c.magnitude = magnitude;
        c.constant_rows = true;
        check(c);
      }
}

std::string op_dtype_name(const ::testing::TestParamInfo<std::tuple<OpId, DType>>& i) {
  return std::string(op_info(std::get<0>(i.param)).name) + "_" + dname(std::get<1>(i.param));
}

INSTANTIATE_TEST_SUITE_P(AllOps, NormVariants,
                         ::testing::Combine(::testing::Values(OpId::rms_norm, OpId::fused_add_rms_norm,
                                                              OpId::layer_norm, OpId::ada_layer_norm,
                                                              OpId::rms_norm_gelu),
                                            ::testing::Values(DType::f32, DType::f16, DType::bf16)),
                         op_dtype_name);
INSTANTIATE_TEST_SUITE_P(Quant, NormVariants, ::testing::Combine(kQuantOps, kHalfDtypes), op_dtype_name);

// A static scale (calibrated offline): read, never written; values past qmax * scale saturate.
class NormQuantStatic : public ::testing::TestWithParam<std::tuple<OpId, DType>> {};

TEST_P(NormQuantStatic, ReadsTheScale) {
  const auto [op, dt] = GetParam();
  for (const auto& [rows, hidden] : {std::pair{1, 64}, {83, 769}, {4096, 4096}, {7, 8192}}) {
    kernelkit::testing::NormCase c{.op = op,
                                   .dtype = dt,
                                   .rows = rows,
                                   .hidden = hidden,
                                   .seed = static_cast<uint64_t>(41 + rows),
                                   .static_scale = true};
    check(c);
    c.magnitude = 100;  // the sums only: y is still about unit RMS
    c.row_pad = 8;
    check(c);
  }
}

INSTANTIATE_TEST_SUITE_P(Quant, NormQuantStatic, ::testing::Combine(kQuantOps, kHalfDtypes), op_dtype_name);

// Seeded random cases (random_norm_case: shapes, dtypes, strides and magnitudes off the grid) against the reference.
// FP8 cases on a profile without FP8 must be refused (not skipped: the other cases still count).
TEST(NormRandom, MatchesReference) {
  kernelkit::testing::for_random_cases(60, kernelkit::testing::random_norm_case, [](const auto& c) {
    const auto r = kernelkit::testing::run_norm_case_cuda(c, 0);
    if (const auto fp8 = op_fp8_dtype(c.op); fp8 && !kernelkit::testing::case_profile().supports(*fp8))
      EXPECT_EQ(r.status.code(), StatusCode::unsupported) << c.name() << ": " << r.status.to_string();
    else
      kernelkit::testing::expect_case(r, c.dtype, c.name());
  });
}

// The row reductions' KERNELKIT_TUNE work splits (vectors a thread, waves of blocks) stay correct.
TEST(PlannerAlternatives, TunedNormsMatchReference) {
  uint64_t seed = 93;
  for (const char* setting :
       {"rows_vpt=1", "rows_vpt=2,rows_waves=3", "rows_vpt=16", "rows_held=1", "rows_held=1,rows_waves=1",
        "rows_held=0", "rows_held=0,rows_waves=1", "rows_held=1,rows_vpt=1,rows_waves=2", "rows_lean=0",
        "rows_lean=0,rows_cap=0", "rows_cap=2", "rows_onepass=1"}) {
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", setting);
    for (OpId op :
         {OpId::rms_norm, OpId::fused_add_rms_norm, OpId::layer_norm, OpId::ada_layer_norm, OpId::rms_norm_gelu,
          OpId::rms_norm_quant_int8, OpId::rms_norm_quant_fp8, OpId::fused_add_rms_norm_quant_fp8})
      for (DType dt : {DType::f32, DType::bf16})
        for (const auto& [rows, hidden] : {std::pair{333, 4096}, {8, 5125}}) {
          if (!(op_info(op).dtypes & dtype_bit(dt))) continue;
          kernelkit::testing::NormCase c{.op = op, .dtype = dt, .rows = rows, .hidden = hidden, .seed = seed++};
          if (const auto fp8 = op_fp8_dtype(op); fp8 && !kernelkit::testing::case_profile().supports(*fp8)) continue;
          kernelkit::testing::expect_case(kernelkit::testing::run_norm_case_cuda(c, 0), dt, c.name() + " " + setting);
        }
  }
}

// The lean held kernel (KERNELKIT_TUNE rows_lean=N) at every register cap: rows of whole warps (256, 288 of them with a
// partial second vector, 320, 512), with and without a weight (and bias), Gemma's 1 + w, strided rows and fp16's
// extremes.
TEST(PlannerAlternatives, LeanNormsMatchReference) {
  uint64_t seed = 211;
  for (const char* setting : {"rows_lean=1", "rows_lean=2", "rows_lean=3", "rows_lean=4", "rows_lean_min=32"}) {
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", setting);
    for (OpId op : {OpId::rms_norm, OpId::fused_add_rms_norm, OpId::layer_norm})
      for (DType dt : {DType::f32, DType::f16, DType::bf16})
        for (const auto& [rows, hidden] : {std::pair{333, 4096},
                                           {65, 4160},
                                           {40, 5120},
                                           {17, 8192},
                                           {70, 2048},
                                           {9, 520}})  // the last two: 128 (bf16: lean by default) and 64 threads
          for (int form = 0; form < 4; ++form) {
            kernelkit::testing::NormCase c{.op = op, .dtype = dt, .rows = rows, .hidden = hidden, .seed = seed++};
            c.weight = c.bias = form != 1;
            c.weight_offset = form == 2 && op != OpId::layer_norm ? 1.0f : 0.0f;  // Gemma: the RMS norms
            c.row_pad = form == 3 ? 8 : 0;
            if (form == 3 && dt == DType::f16 && op == OpId::rms_norm) c.magnitude = 3e4;  // sum of squares past fp16
            kernelkit::testing::expect_case(kernelkit::testing::run_norm_case_cuda(c, 0), dt, c.name() + " " + setting);
          }
  }
}

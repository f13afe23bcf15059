// Every activation kernel against the fp64 CPU reference: fresh random inputs, poisoned outputs, every element; the
// dtypes the active profile lacks must be refused.
#include <gtest/gtest.h>

#include "expect_case.hpp"
#include "ops/activation/activation_cases.hpp"
#include "random_cases.hpp"

using namespace kernelkit;

namespace {
void check(const kernelkit::testing::ActivationCase& c) {
  kernelkit::testing::expect_case(kernelkit::testing::run_activation_case_cuda(c, 0), c.dtype, c.name());
}
}  // namespace

using ActParam = std::tuple<OpId, DType, int64_t, int64_t>;
class ActivationGrid : public ::testing::TestWithParam<ActParam> {};

TEST_P(ActivationGrid, MatchesReference) {
  const auto [op, dt, rows, d] = GetParam();
  check({op, dt, rows, d, 0, 3.0, static_cast<uint64_t>(rows * 31 + d)});
  if (rows == 83) check({op, dt, rows, d, 13, 3.0, static_cast<uint64_t>(d)});  // strided, misaligned rows
}

INSTANTIATE_TEST_SUITE_P(
    AllShapes, ActivationGrid,
    ::testing::Combine(::testing::Values(OpId::gelu, OpId::gelu_tanh, OpId::silu, OpId::gelu_and_mul,
                                         OpId::gelu_tanh_and_mul, OpId::silu_and_mul, OpId::geglu),
                       ::testing::Values(DType::f32, DType::f16, DType::bf16), ::testing::Values(1, 7, 83, 4096),
                       ::testing::Values(64, 111, 500, 769, 2048, 4096, 5125, 8192)),
    [](const ::testing::TestParamInfo<ActParam>& i) {
      return std::string(op_info(std::get<0>(i.param)).name) + "_" + std::string(dtype_name(std::get<1>(i.param))) +
             "_" + std::to_string(std::get<2>(i.param)) + "x" + std::to_string(std::get<3>(i.param));
    });

TEST(ActivationExtremes, Fp16LargeInputsStayFinite) {
  // |x| up to 60000: silu(x) ~ x and gelu(x) ~ x stay finite; the gated product may overflow exactly as the
  // reference does (both are compared, inf to inf).
  for (OpId op : {OpId::silu, OpId::gelu, OpId::gelu_tanh}) check({op, DType::f16, 83, 4096, 0, 60000.0, 5});
}

// silu_and_mul_quant (16-bit activations only): q * s and the scales against the reference's, dynamic and static
// scales; widths past 32K bf16 read the inputs again for the codes instead of holding y. The FP8 op is refused (and
// the test skipped) on profiles without FP8.
class ActivationQuantGrid : public ::testing::TestWithParam<ActParam> {};

TEST_P(ActivationQuantGrid, MatchesReference) {
  const auto [op, dt, rows, d] = GetParam();
  for (bool static_scale : {false, true}) {
    const kernelkit::testing::ActivationCase c{op,          dt, rows, d, 0, 3.0, static_cast<uint64_t>(rows * 37 + d),
                                               static_scale};
    kernelkit::testing::expect_case(kernelkit::testing::run_activation_case_cuda(c, 0), op, dt, c.name());
  }
  if (rows == 83) {  // strided, misaligned rows
    const kernelkit::testing::ActivationCase c{op, dt, rows, d, 13, 3.0, static_cast<uint64_t>(d), false};
    kernelkit::testing::expect_case(kernelkit::testing::run_activation_case_cuda(c, 0), op, dt, c.name());
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllShapes, ActivationQuantGrid,
    ::testing::Combine(::testing::Values(OpId::silu_and_mul_quant_int8, OpId::silu_and_mul_quant_fp8),
                       ::testing::Values(DType::f16, DType::bf16), ::testing::Values(1, 7, 83, 4096),
                       ::testing::Values(64, 111, 500, 769, 2048, 4096, 5125, 14336, 40000)),
    [](const ::testing::TestParamInfo<ActParam>& i) {
      return std::string(op_info(std::get<0>(i.param)).name) + "_" + std::string(dtype_name(std::get<1>(i.param))) +
             "_" + std::to_string(std::get<2>(i.param)) + "x" + std::to_string(std::get<3>(i.param));
    });

// Seeded random cases (random_activation_case: shapes, dtypes, strides and magnitudes off the grid) against the
// reference. FP8 cases on a profile without FP8 must be refused (not skipped: the other cases still count).
TEST(ActivationRandom, MatchesReference) {
  kernelkit::testing::for_random_cases(40, kernelkit::testing::random_activation_case, [](const auto& c) {
    const auto r = kernelkit::testing::run_activation_case_cuda(c, 0);
    if (const auto fp8 = op_fp8_dtype(c.op); fp8 && !kernelkit::testing::case_profile().supports(*fp8))
      EXPECT_EQ(r.status.code(), StatusCode::unsupported) << c.name() << ": " << r.status.to_string();
    else
      kernelkit::testing::expect_case(r, c.dtype, c.name());
  });
}

// The element-wise ops' KERNELKIT_TUNE grid (waves of blocks) and the one-row kernel stay correct.
TEST(PlannerAlternatives, TunedActivationsMatchReference) {
  uint64_t seed = 95;
  for (const char* setting : {"ew_waves=1", "ew_waves=64", "ew_one_row=1"}) {
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", setting);
    for (OpId op : {OpId::silu_and_mul, OpId::gelu_tanh})
      for (DType dt : {DType::f32, DType::bf16})
        for (const auto& [rows, d] : {std::pair{2049, 4096}, {7, 5125}}) {
          const kernelkit::testing::ActivationCase c{op, dt, rows, d, 0, 3.0, seed++};
          kernelkit::testing::expect_case(kernelkit::testing::run_activation_case_cuda(c, 0), dt,
                                          c.name() + " " + setting);
        }
  }
}

// silu_and_mul_quant under the row reductions' KERNELKIT_TUNE splits: one vector a thread, and 16 (past the held
// bound: the re-reading path), and more waves of blocks.
TEST(PlannerAlternatives, TunedActivationQuantMatchesReference) {
  uint64_t seed = 97;
  for (const char* setting : {"rows_vpt=1", "rows_vpt=16", "rows_vpt=2,rows_waves=3"}) {
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", setting);
    for (OpId op : {OpId::silu_and_mul_quant_int8, OpId::silu_and_mul_quant_fp8}) {
      if (const auto fp8 = op_fp8_dtype(op); fp8 && !kernelkit::testing::case_profile().supports(*fp8)) continue;
      for (const auto& [rows, d] : {std::pair{2049, 4096}, {7, 5125}}) {
        const kernelkit::testing::ActivationCase c{op, DType::bf16, rows, d, 0, 3.0, seed++, false};
        kernelkit::testing::expect_case(kernelkit::testing::run_activation_case_cuda(c, 0), DType::bf16,
                                        c.name() + " " + setting);
      }
    }
  }
}

// rotary_embedding on the GPU against the fp64 CPU reference: both styles, partial rotary, in place and out of place,
// q/k as strided slices of a fused qkv buffer, every dtype the profile allows.
#include <gtest/gtest.h>

#include "expect_case.hpp"
#include "ops/rope/rope_cases.hpp"
#include "random_cases.hpp"

using namespace kernelkit;

namespace {
// (head_dim, rot_dim): full rotary at 64 and 128, half rotary, and an odd-multiple partial one (24 of 96).
constexpr int64_t kDims[][2] = {{64, 64}, {128, 128}, {128, 64}, {96, 24}};
}  // namespace

using RopeParam = std::tuple<DType, RopeStyle, int, bool>;
class RopeGrid : public ::testing::TestWithParam<RopeParam> {};

TEST_P(RopeGrid, MatchesReference) {
  const auto [dt, style, dims, in_place] = GetParam();
  for (int64_t tokens : {1, 7, 1000}) {
    const kernelkit::testing::RopeCase c{dt,          tokens, 32, 8, kDims[dims][0], kDims[dims][1], style,
                                         in_place, static_cast<uint64_t>(tokens)};
    kernelkit::testing::expect_case(kernelkit::testing::run_rope_case_cuda(c, 0), dt, c.name());
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeGrid,
                         ::testing::Combine(::testing::Values(DType::f32, DType::f16, DType::bf16),
                                            ::testing::Values(RopeStyle::neox, RopeStyle::gptj),
                                            ::testing::Values(0, 1, 2, 3), ::testing::Bool()));

// Seeded random cases (random_rope_case: shapes, dtypes, strides and magnitudes off the grid) against the reference.
TEST(RopeRandom, MatchesReference) {
  kernelkit::testing::for_random_cases(40, kernelkit::testing::random_rope_case, [](const auto& c) {
    kernelkit::testing::expect_case(kernelkit::testing::run_rope_case_cuda(c, 0), c.dtype, c.name());
  });
}

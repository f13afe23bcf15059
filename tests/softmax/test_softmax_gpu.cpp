// softmax / causal_softmax on the GPU against the fp64 CPU reference: odd and long rows (online statistics), strided
// rows, causal with s_q < s_k, all -inf rows, fp16 near 65504.
#include <gtest/gtest.h>

#include <tuple>

#include "expect_case.hpp"
#include "ops/softmax/softmax_cases.hpp"
#include "random_cases.hpp"

using namespace kernelkit;

using SoftmaxParam = std::tuple<OpId, DType, int64_t, int64_t>;
class SoftmaxGrid : public ::testing::TestWithParam<SoftmaxParam> {};

TEST_P(SoftmaxGrid, MatchesReference) {
  const auto [op, dt, rows, hidden] = GetParam();
  // causal: s_q = rows / 4 queries per head against `hidden` keys (s_q < s_k for the long rows).
  const int64_t s_q = op == OpId::causal_softmax && rows % 4 == 0 ? rows / 4 : 1;
  for (int64_t pad : {int64_t{0}, int64_t{8}}) {
    const kernelkit::testing::SoftmaxCase c{op, dt, rows, hidden, s_q, 0.125f, 8.0, pad,
                                            static_cast<uint64_t>(rows + hidden)};
    kernelkit::testing::expect_case(kernelkit::testing::run_softmax_case_cuda(c, 0), dt, c.name());
  }
  if (dt == DType::f16) {
    const kernelkit::testing::SoftmaxCase c{op, dt, rows, hidden, s_q, 1.0f, 60000.0, 0, 7};
    kernelkit::testing::expect_case(kernelkit::testing::run_softmax_case_cuda(c, 0), dt, c.name());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SoftmaxGrid,
    ::testing::Combine(::testing::Values(OpId::softmax, OpId::causal_softmax),
                       ::testing::Values(DType::f32, DType::f16, DType::bf16), ::testing::Values(1, 7, 84, 4096),
                       ::testing::Values(64, 111, 769, 4096, 32768)));

// Seeded random cases (random_softmax_case: shapes, dtypes, strides and magnitudes off the grid) against the reference.
TEST(SoftmaxRandom, MatchesReference) {
  kernelkit::testing::for_random_cases(40, kernelkit::testing::random_softmax_case, [](const auto& c) {
    kernelkit::testing::expect_case(kernelkit::testing::run_softmax_case_cuda(c, 0), c.dtype, c.name());
  });
}

// The planner's KERNELKIT_TUNE alternatives for softmax stay correct: rows staged through shared memory
// (softmax_stage=1), fewer or more vectors a thread (rows_vpt; 1 and the default 2: the 2-vector kernel, 4: the
// 4-vector one, 8: the re-reading kernel) and several waves of blocks.
TEST(PlannerAlternatives, TunedSoftmaxMatchesReference) {
  uint64_t seed = 91;
  for (const char* setting :
       {"softmax_stage=1", "softmax_stage=1,rows_waves=4", "rows_vpt=1", "rows_vpt=4", "rows_vpt=8",
        "softmax_stage=1,rows_vpt=4", "rows_waves=1", "rows_lean=0", "rows_lean_min=32"}) {
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", setting);
    for (OpId op : {OpId::softmax, OpId::causal_softmax})
      for (DType dt : {DType::f32, DType::f16, DType::bf16})
        for (const auto& [rows, hidden, pad] : {std::tuple{1, 64, 0}, {333, 4096, 8}, {2049, 2048, 0}, {40, 5125, 3}}) {
          const int64_t s_q = op == OpId::causal_softmax ? (rows % 3 == 0 ? 3 : 1) : 1;
          const kernelkit::testing::SoftmaxCase c{op, dt, rows, hidden, s_q, 0.125f, 8.0, pad, seed++};
          kernelkit::testing::expect_case(kernelkit::testing::run_softmax_case_cuda(c, 0), dt,
                                          c.name() + " " + setting);
        }
  }
}

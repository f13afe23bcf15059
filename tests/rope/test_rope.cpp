// rotary_embedding on the CPU backend: a rotation by hand, identity at position 0, pair norms kept, the tail copied,
// per-token tables == cache, in place == out of place, and bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernelkit/ops.hpp"
#include "ops/rope/rope_cases.hpp"
#include "random_cases.hpp"

using namespace kernelkit;

TEST(Rope, RotationByHand) {
  // One token, one q head, one k head, head_dim 4, rot_dim 4, neox: pairs (0, 2) and (1, 3).
  std::vector<float> q = {1, 2, 3, 4}, k = {1, 0, 0, 1}, qo(4, NAN), ko(4, NAN);
  std::vector<int64_t> pos = {1};
  const double a0 = 0.5, a1 = 0.25;  // angles of pair 0 and 1 at position 1 (cache row 1)
  std::vector<float> cache = {1, 1, 0, 0, float(std::cos(a0)), float(std::cos(a1)), float(std::sin(a0)),
                              float(std::sin(a1))};
  auto v = [](std::vector<float>& x) { return TensorView::contiguous(x.data(), DType::f32, {1, 1, 4}); };
  ASSERT_TRUE(rotary_embedding(v(qo), v(ko), v(q), v(k), TensorView::contiguous(pos.data(), DType::i64, {1}),
                               TensorView::contiguous(cache.data(), DType::f32, {2, 4}), RopeStyle::neox)
                  .ok());
  EXPECT_NEAR(qo[0], 1 * std::cos(a0) - 3 * std::sin(a0), 1e-6);
  EXPECT_NEAR(qo[2], 3 * std::cos(a0) + 1 * std::sin(a0), 1e-6);
  EXPECT_NEAR(qo[1], 2 * std::cos(a1) - 4 * std::sin(a1), 1e-6);
  EXPECT_NEAR(ko[3], 1 * std::cos(a1) + 0 * std::sin(a1), 1e-6);
  // gptj: pairs (0, 1) and (2, 3).
  ASSERT_TRUE(rotary_embedding(v(qo), v(ko), v(q), v(k), TensorView::contiguous(pos.data(), DType::i64, {1}),
                               TensorView::contiguous(cache.data(), DType::f32, {2, 4}), RopeStyle::gptj)
                  .ok());
  EXPECT_NEAR(qo[0], 1 * std::cos(a0) - 2 * std::sin(a0), 1e-6);
  EXPECT_NEAR(qo[1], 2 * std::cos(a0) + 1 * std::sin(a0), 1e-6);
  EXPECT_NEAR(qo[3], 4 * std::cos(a1) + 3 * std::sin(a1), 1e-6);
}

TEST(Rope, BadInputs) {
  std::vector<float> q(2 * 4 * 8), k(2 * 2 * 8), cache(16 * 8);
  std::vector<int64_t> pos = {0, 99};
  auto qv = TensorView::contiguous(q.data(), DType::f32, {2, 4, 8});
  auto kv = TensorView::contiguous(k.data(), DType::f32, {2, 2, 8});
  auto pv = TensorView::contiguous(pos.data(), DType::i64, {2});
  auto cv = TensorView::contiguous(cache.data(), DType::f32, {16, 8});
  Status s = rotary_embedding(qv, kv, qv, kv, pv, cv, RopeStyle::neox);  // position 99 outside [0, 16)
  EXPECT_NE(s.message().find("positions[1] = 99"), std::string::npos) << s.to_string();
  auto wide = TensorView::contiguous(cache.data(), DType::f32, {8, 16});
  s = rotary_embedding(qv, kv, qv, kv, pv, wide, RopeStyle::neox);
  EXPECT_NE(s.message().find("rot_dim must be even and in [2, head_dim=8], got 16"), std::string::npos) << s.message();
  auto k_bad = TensorView::contiguous(k.data(), DType::f32, {2, 2, 4});
  s = rotary_embedding(qv, k_bad, qv, k_bad, pv, cv, RopeStyle::neox);
  EXPECT_NE(s.message().find("must match q"), std::string::npos) << s.message();
  std::vector<float> pf(2);
  s = rotary_embedding(qv, kv, qv, kv, TensorView::contiguous(pf.data(), DType::f32, {2}), cv, RopeStyle::neox);
  EXPECT_NE(s.message().find("positions dtype f32 must be i32 or i64"), std::string::npos) << s.message();
  std::vector<float> c3(2 * 3);
  auto cs = TensorView::contiguous(c3.data(), DType::f32, {2, 3});
  s = rotary_embedding(qv, kv, qv, kv, cs, cs, 8, RopeStyle::neox);
  EXPECT_NE(s.message().find("cos must have shape [tokens=2, rot_dim/2=4]"), std::string::npos) << s.message();
}

class RopeProperties : public ::testing::TestWithParam<std::tuple<DType, RopeStyle, int64_t, int64_t>> {};

TEST_P(RopeProperties, Hold) {
  const auto [dt, style, head_dim, rot_dim] = GetParam();
  for (bool in_place : {false, true}) {
    kernelkit::testing::RopeCase c{dt, 9, 4, 2, head_dim, rot_dim, style, in_place, 3};
    const auto r = kernelkit::testing::check_rope_properties(c);
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_EQ(r.mismatches, 0) << c.name() << "\n" << r.detail;
    EXPECT_GT(r.checked, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, RopeProperties,
                         ::testing::Values(std::tuple{DType::f32, RopeStyle::neox, int64_t{64}, int64_t{64}},
                                           std::tuple{DType::f16, RopeStyle::neox, int64_t{128}, int64_t{128}},
                                           std::tuple{DType::bf16, RopeStyle::gptj, int64_t{128}, int64_t{64}},
                                           std::tuple{DType::f32, RopeStyle::gptj, int64_t{80}, int64_t{32}},
                                           std::tuple{DType::f16, RopeStyle::neox, int64_t{96}, int64_t{24}}));

// Seeded random cases (random_rope_case: shapes, dtypes, strides and magnitudes off the grid) on the same invariants.
TEST(RopeRandom, PropertiesHold) {
  kernelkit::testing::for_random_cases(60, kernelkit::testing::random_rope_case, [](const auto& c) {
    kernelkit::testing::expect_properties(kernelkit::testing::check_rope_properties(c), c.name());
  });
}

// softmax / causal_softmax on the CPU backend: values by hand, rows sum to 1 in [0, 1], masks, all -inf rows, fp16
// near 65504, and bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernelkit/ops.hpp"
#include "ops/softmax/softmax_cases.hpp"
#include "random_cases.hpp"

using namespace kernelkit;

TEST(Softmax, ValuesByHand) {
  std::vector<float> x = {0, 1, 2, -INFINITY, -INFINITY, -INFINITY}, out(6, NAN);
  ASSERT_TRUE(softmax(TensorView::contiguous(out.data(), DType::f32, {2, 3}),
                      TensorView::contiguous(x.data(), DType::f32, {2, 3}), 2.0f)
                  .ok());
  const double z = 1 + std::exp(2.0) + std::exp(4.0);
  EXPECT_NEAR(out[0], 1 / z, 1e-7);
  EXPECT_NEAR(out[2], std::exp(4.0) / z, 1e-6);
  EXPECT_EQ(out[3], 0.0f);  // all -inf: zeros, not NaN
  // causal, s_q = 2 < s_k = 3: query 0 sees keys 0..1, query 1 sees all three.
  std::vector<float> s = {0, 0, 5, 0, 0, 0}, o(6, NAN);
  ASSERT_TRUE(causal_softmax(TensorView::contiguous(o.data(), DType::f32, {1, 2, 3}),
                             TensorView::contiguous(s.data(), DType::f32, {1, 2, 3}), 1.0f)
                  .ok());
  EXPECT_NEAR(o[0], 0.5, 1e-7);
  EXPECT_EQ(o[2], 0.0f);
  EXPECT_NEAR(o[5], 1.0 / 3, 1e-7);
}

TEST(Softmax, Fp16NearMax) {
  // 65504 and 65000 in fp16: exp(x - max) stays in range because the max is subtracted in fp32.
  std::vector<uint16_t> x = {float_to_half_bits(65504.0f), float_to_half_bits(65504.0f)}, out(2);
  ASSERT_TRUE(softmax(TensorView::contiguous(out.data(), DType::f16, {1, 2}),
                      TensorView::contiguous(x.data(), DType::f16, {1, 2}))
                  .ok());
  EXPECT_EQ(half_bits_to_float(out[0]), 0.5f);
}

TEST(Softmax, BadInputs) {
  std::vector<float> x(8), out(8);
  auto v = [](std::vector<float>& b) { return TensorView::contiguous(b.data(), DType::f32, {2, 4}); };
  Status s = softmax(v(out), v(x), 0.0f);
  EXPECT_NE(s.message().find("scale must be finite and non-zero"), std::string::npos) << s.message();
  s = causal_softmax(TensorView::contiguous(out.data(), DType::f32, {8}), TensorView::contiguous(x.data(), DType::f32, {8}), 1.0f);
  EXPECT_NE(s.message().find("[..., s_q, s_k]"), std::string::npos) << s.message();
  s = softmax(TensorView::contiguous(out.data(), DType::f32, {4, 2}), v(x));
  EXPECT_NE(s.message().find("out shape [4, 2] must be [2, 4]"), std::string::npos) << s.message();
}

class SoftmaxProperties : public ::testing::TestWithParam<std::tuple<OpId, DType, int64_t, int64_t>> {};

TEST_P(SoftmaxProperties, RowsSumToOneAndMasksHold) {
  const auto [op, dt, rows, hidden] = GetParam();
  for (double magnitude : {4.0, 60000.0}) {
    if (magnitude > 100 && dt != DType::f16) continue;
    kernelkit::testing::SoftmaxCase c{op, dt, rows, hidden, op == OpId::causal_softmax ? rows : 1, 0.125f, magnitude,
                                      8, 3};
    const auto r = kernelkit::testing::check_softmax_properties(c);
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_EQ(r.mismatches, 0) << c.name() << "\n" << r.detail;
    EXPECT_GT(r.checked, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, SoftmaxProperties,
                         ::testing::Combine(::testing::Values(OpId::softmax, OpId::causal_softmax),
                                            ::testing::Values(DType::f32, DType::f16, DType::bf16),
                                            ::testing::Values(1, 7, 83), ::testing::Values(64, 111, 769, 4096)));

// Seeded random cases (random_softmax_case: shapes, dtypes, strides and magnitudes off the grid) on the same invariants.
TEST(SoftmaxRandom, PropertiesHold) {
  kernelkit::testing::for_random_cases(60, kernelkit::testing::random_softmax_case, [](const auto& c) {
    kernelkit::testing::expect_properties(kernelkit::testing::check_softmax_properties(c), c.name());
  });
}

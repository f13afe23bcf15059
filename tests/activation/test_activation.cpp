// The activation family on the CPU backend: hand-computed values, the gated forms equal their composition, the
// odd-part identity act(x) - act(-x) = x, and bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernelkit/ops.hpp"
#include "ops/activation/activation_cases.hpp"
#include "random_cases.hpp"

using namespace kernelkit;

namespace {
TensorView f32(std::vector<float>& v, std::initializer_list<int64_t> shape) {
  return TensorView::contiguous(v.data(), DType::f32, shape);
}
void expect_error(const Status& s, std::initializer_list<const char*> fragments) {
  EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.to_string();
  for (const char* f : fragments) EXPECT_NE(s.message().find(f), std::string::npos) << f << " not in " << s.message();
}
}  // namespace

TEST(Activation, ValuesByHand) {
  std::vector<float> x = {1.0f, -2.0f}, out(2, NAN);
  ASSERT_TRUE(activation(Activation::silu, f32(out, {1, 2}), f32(x, {1, 2})).ok());
  EXPECT_NEAR(out[0], 0.7310585786300049, 1e-7);   // 1 * sigmoid(1)
  EXPECT_NEAR(out[1], -0.2384058440442351, 1e-7);  // -2 * sigmoid(-2)
  ASSERT_TRUE(activation(Activation::gelu, f32(out, {1, 2}), f32(x, {1, 2})).ok());
  EXPECT_NEAR(out[0], 0.8413447460685429, 1e-7);   // Phi(1)
  EXPECT_NEAR(out[1], -0.04550026389635842, 1e-7);
  ASSERT_TRUE(activation(Activation::gelu_tanh, f32(out, {1, 2}), f32(x, {1, 2})).ok());
  EXPECT_NEAR(out[0], 0.8411919906082768, 1e-7);
}

TEST(Activation, GatedTakesTheFirstHalfActivated) {
  // x = [a | b] = [1, -2 | 3, 0.5]: out = silu(a) * b.
  std::vector<float> x = {1.0f, -2.0f, 3.0f, 0.5f}, out(2, NAN);
  ASSERT_TRUE(gated_activation(Activation::silu, f32(out, {1, 2}), f32(x, {1, 4})).ok());
  EXPECT_NEAR(out[0], 0.7310585786300049 * 3, 1e-6);
  EXPECT_NEAR(out[1], -0.2384058440442351 * 0.5, 1e-7);
  std::vector<float> a = {1.0f, -2.0f}, b = {3.0f, 0.5f};
  ASSERT_TRUE(gated_activation(Activation::gelu, f32(out, {1, 2}), f32(a, {1, 2}), f32(b, {1, 2})).ok());
  EXPECT_NEAR(out[0], 0.8413447460685429 * 3, 1e-6);
}

TEST(Activation, BadInputs) {
  std::vector<float> x(12), out(12);
  expect_error(gated_activation(Activation::silu, f32(out, {2, 3}), f32(x, {2, 5})), {"x", "multiple of 2"});
  expect_error(gated_activation(Activation::silu, f32(out, {2, 4}), f32(x, {2, 6})), {"out", "[2, 4]", "[2, 3]"});
  expect_error(activation(Activation::gelu, f32(out, {3, 4}), f32(x, {2, 6})), {"out", "shape"});
  std::vector<uint16_t> h(12);
  expect_error(activation(Activation::gelu, TensorView::contiguous(h.data(), DType::f16, {2, 6}), f32(x, {2, 6})),
               {"out", "dtype f16"});
  expect_error(activation(Activation::silu, f32(out, {2, 0}), f32(x, {2, 0})), {"x", "> 0"});
  EXPECT_TRUE(activation(Activation::silu, f32(out, {0, 6}), f32(x, {0, 6})).ok());  // rows = 0: no-op
  setenv("KERNELKIT_PROFILE", "t4", 1);
  std::vector<uint16_t> h6(6);
  const Status s = gated_activation(Activation::silu, TensorView::contiguous(h.data(), DType::bf16, {1, 3}, Device::cuda(0)),
                                    TensorView::contiguous(h6.data(), DType::bf16, {1, 6}, Device::cuda(0)));
  unsetenv("KERNELKIT_PROFILE");
  EXPECT_EQ(s.code(), StatusCode::unsupported) << s.to_string();
  EXPECT_NE(s.message().find("silu_and_mul"), std::string::npos);
}

class ActivationProperties : public ::testing::TestWithParam<std::tuple<OpId, DType, int64_t, int64_t>> {};

TEST_P(ActivationProperties, GatedEqualsComposedAndOddPartIsX) {
  const auto [op, dt, rows, d] = GetParam();
  for (int64_t pad : {0, 8}) {
    kernelkit::testing::ActivationCase c{op, dt, rows, d, pad, 3.0, static_cast<uint64_t>(rows + d)};
    const auto r = kernelkit::testing::check_activation_properties(c);
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_EQ(r.mismatches, 0) << c.name() << "\n" << r.detail;
    EXPECT_GT(r.checked, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Grid, ActivationProperties,
    ::testing::Combine(::testing::Values(OpId::gelu, OpId::gelu_tanh, OpId::silu, OpId::gelu_and_mul,
                                         OpId::gelu_tanh_and_mul, OpId::silu_and_mul, OpId::geglu),
                       ::testing::Values(DType::f32, DType::f16, DType::bf16), ::testing::Values(1, 7, 83),
                       ::testing::Values(64, 111, 500, 4096)));

// Seeded random cases (random_activation_case: shapes, dtypes, strides and magnitudes off the grid) on the same invariants.
TEST(ActivationRandom, PropertiesHold) {
  kernelkit::testing::for_random_cases(60, kernelkit::testing::random_activation_case, [](const auto& c) {
    kernelkit::testing::expect_properties(kernelkit::testing::check_activation_properties(c), c.name());
  });
}

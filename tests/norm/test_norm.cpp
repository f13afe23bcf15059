// The CPU reference against hand-computed cases, then its invariants over the shape grid.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "host_checks.hpp"
#include "kernelkit/ops.hpp"
#include "ops/norm/norm_cases.hpp"
#include "random_cases.hpp"

using namespace kernelkit;

using kernelkit::testing::f32;

TEST(Reference, RmsNormByHand) {
  // x = [3, 4]: mean(x^2) = 12.5, rstd = 1/sqrt(12.5 + eps).
  std::vector<float> x = {3, 4}, w = {2, 0.5f}, out(2, NAN);
  ASSERT_TRUE(rms_norm(f32(out, {1, 2}), f32(x, {1, 2}), f32(w, {2}), 1e-6f).ok());
  const double r = 1 / std::sqrt(12.5 + 1e-6);
  EXPECT_NEAR(out[0], 3 * r * 2, 1e-6);
  EXPECT_NEAR(out[1], 4 * r * 0.5, 1e-6);
  // No weight (diffusers elementwise_affine=False), and Gemma's (1 + w).
  ASSERT_TRUE(rms_norm(f32(out, {1, 2}), f32(x, {1, 2}), std::nullopt, 1e-6f).ok());
  EXPECT_NEAR(out[0], 3 * r, 1e-6);
  ASSERT_TRUE(rms_norm(f32(out, {1, 2}), f32(x, {1, 2}), f32(w, {2}), 1e-6f, 1.0f).ok());
  EXPECT_NEAR(out[1], 4 * r * 1.5, 1e-6);
}

TEST(Reference, LayerNormByHand) {
  // x = [1, 2, 3, 6]: mean 3, biased variance (4 + 1 + 0 + 9) / 4 = 3.5.
  std::vector<float> x = {1, 2, 3, 6}, w = {1, 2, 1, 1}, b = {0, 0, 1, -1}, out(4, NAN);
  ASSERT_TRUE(layer_norm(f32(out, {4}), f32(x, {4}), f32(w, {4}), f32(b, {4}), 1e-5f).ok());
  const double r = 1 / std::sqrt(3.5 + 1e-5);
  EXPECT_NEAR(out[0], -2 * r, 1e-6);
  EXPECT_NEAR(out[1], -1 * r * 2, 1e-6);
  EXPECT_NEAR(out[2], 0 + 1, 1e-6);
  EXPECT_NEAR(out[3], 3 * r - 1, 1e-6);
}

TEST(Reference, FusedAddRmsNormByHand) {
  std::vector<float> x = {1, 2, 0, 1}, res = {2, 2, 1, -1}, w = {1, 1};
  ASSERT_TRUE(fused_add_rms_norm(f32(x, {2, 2}), f32(res, {2, 2}), f32(w, {2}), 1e-6f).ok());
  EXPECT_EQ(res, (std::vector<float>{3, 4, 1, 0}));  // residual += x
  const double r0 = 1 / std::sqrt(12.5 + 1e-6), r1 = 1 / std::sqrt(0.5 + 1e-6);
  EXPECT_NEAR(x[0], 3 * r0, 1e-6);
  EXPECT_NEAR(x[1], 4 * r0, 1e-6);
  EXPECT_NEAR(x[2], 1 * r1, 1e-6);
  EXPECT_NEAR(x[3], 0, 1e-6);
}

TEST(Reference, AdaLayerNormByHand) {
  // batch 2, seq 1, hidden 2: each row normalizes to [-1, 1] (eps aside), then * (1 + scale[b]) + shift[b].
  std::vector<float> x = {0, 2, 5, 1}, scale = {1, 0, -0.5f, 0.5f}, shift = {0, 1, 2, 3}, out(4, NAN);
  ASSERT_TRUE(ada_layer_norm(f32(out, {2, 1, 2}), f32(x, {2, 1, 2}), f32(scale, {2, 2}), f32(shift, {2, 2}),
                             std::nullopt, std::nullopt, 1e-12f)
                  .ok());
  EXPECT_NEAR(out[0], -1 * 2 + 0, 1e-5);
  EXPECT_NEAR(out[1], 1 * 1 + 1, 1e-5);
  EXPECT_NEAR(out[2], 1 * 0.5 + 2, 1e-5);
  EXPECT_NEAR(out[3], -1 * 1.5 + 3, 1e-5);
}

TEST(Reference, RmsNormGeluByHand) {
  std::vector<float> x = {1, -1}, out(2, NAN);  // rms 1: normalized values are +-1 (eps aside)
  ASSERT_TRUE(rms_norm_gelu(f32(out, {1, 2}), f32(x, {1, 2}), std::nullopt, 1e-12f).ok());
  EXPECT_NEAR(out[0], 0.8411919906082768, 1e-6);  // gelu_tanh(1)
  EXPECT_NEAR(out[1], -0.15880800939172324, 1e-6);
}

namespace {
TensorView f16(std::vector<uint16_t>& v, std::initializer_list<int64_t> shape) {
  return TensorView::contiguous(v.data(), DType::f16, shape);
}
}  // namespace

TEST(Reference, RmsNormQuantInt8ByHand) {
  // x = [3, 4] (no weight): y = [0.6, 0.8] * sqrt(2) rounded to fp16; the row's scale is max |y| / 127.
  std::vector<uint16_t> x = {float_to_half_bits(3), float_to_half_bits(4)};
  std::vector<int8_t> q(2, 99);
  std::vector<float> s(1, NAN);
  const auto qv = TensorView::contiguous(q.data(), DType::i8, {1, 2});
  ASSERT_TRUE(rms_norm_quant(qv, f32(s, {1}), f16(x, {1, 2}), std::nullopt, 1e-6f).ok());
  const float y1 = half_bits_to_float(float_to_half_bits(static_cast<float>(4 / std::sqrt(12.5 + 1e-6))));
  EXPECT_EQ(s[0], y1 / 127);
  EXPECT_EQ(q[1], 127);
  EXPECT_EQ(q[0], 95);  // 0.75 * 127 = 95.25
  // A static scale is read, not written: y / 0.01 to the nearest code, saturating at 127.
  std::vector<float> fixed = {0.01f};
  ASSERT_TRUE(rms_norm_quant(qv, f32(fixed, {1}), f16(x, {1, 2}), std::nullopt, 1e-6f, true).ok());
  EXPECT_EQ(fixed[0], 0.01f);
  EXPECT_EQ(q[0], 85);   // 84.85
  EXPECT_EQ(q[1], 113);  // 113.14
}

TEST(Reference, FusedAddRmsNormQuantByHand) {
  // residual += x (x is only read), then the row's rms_norm is quantized: [1, 2] + [2, 2] = [3, 4] as above.
  std::vector<uint16_t> x = {float_to_half_bits(1), float_to_half_bits(2)};
  std::vector<uint16_t> res = {float_to_half_bits(2), float_to_half_bits(2)};
  std::vector<int8_t> q(2, 99);
  std::vector<float> s(1, NAN);
  ASSERT_TRUE(fused_add_rms_norm_quant(TensorView::contiguous(q.data(), DType::i8, {1, 2}), f32(s, {1}), f16(x, {1, 2}),
                                       f16(res, {1, 2}), std::nullopt, 1e-6f)
                  .ok());
  EXPECT_EQ(half_bits_to_float(res[0]), 3.0f);
  EXPECT_EQ(half_bits_to_float(res[1]), 4.0f);
  EXPECT_EQ(half_bits_to_float(x[0]), 1.0f);
  EXPECT_EQ(q[0], 95);
  EXPECT_EQ(q[1], 127);
}

TEST(Reference, Fp16NearMaxStaysFinite) {
  // Sum of squares of 60000s overflows fp16 but not the reference's fp64 accumulation.
  std::vector<uint16_t> x(8), out(8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float_to_half_bits(i % 2 ? 60000.0f : -60000.0f);
  ASSERT_TRUE(rms_norm(TensorView::contiguous(out.data(), DType::f16, {1, 8}),
                       TensorView::contiguous(x.data(), DType::f16, {1, 8}), std::nullopt, 1e-6f)
                  .ok());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(std::fabs(half_bits_to_float(out[i])), 1.0f);
}

TEST(Reference, RowsZeroIsANoOp) {
  std::vector<float> w = {1, 2};
  EXPECT_TRUE(rms_norm(TensorView::contiguous(nullptr, DType::f32, {0, 2}),
                       TensorView::contiguous(nullptr, DType::f32, {0, 2}), f32(w, {2}), 1e-6f)
                  .ok());
}

// Invariants of every op, dtype and grid shape (the same checks `kernelkit verify --backend cpu` runs). Norm +
// quantization: the codes and scales equal quantize_per_token_*(rms_norm(...)) bit for bit (dynamic scales), or each
// y / s's nearest code (a static scale, which stays unwritten).
class ReferenceProperties
    : public ::testing::TestWithParam<std::tuple<OpId, DType, int64_t, int64_t, int64_t>> {};

TEST_P(ReferenceProperties, FusedEqualsComposedAndStatisticsHold) {
  const auto [op, dt, rows, hidden, pad] = GetParam();
  kernelkit::testing::NormCase c{.op = op,
                                 .dtype = dt,
                                 .rows = rows,
                                 .hidden = hidden,
                                 .row_pad = pad,
                                 .seed = static_cast<uint64_t>(rows * 1000 + hidden)};
  const bool quant = op_quant_out_dtype(op).has_value();
  for (bool weight : {true, false})
    for (bool static_scale : {false, true}) {
      if (static_scale && !quant) continue;
      c.weight = weight;
      c.static_scale = static_scale;
      c.weight_offset = weight && static_scale ? 1.0f : 0.0f;
      const auto r = kernelkit::testing::check_norm_properties(c);
      ASSERT_TRUE(r.status.ok()) << r.status.to_string();
      EXPECT_EQ(r.mismatches, 0) << c.name() << "\n" << r.detail;
      EXPECT_GT(r.checked, 0);
    }
}

INSTANTIATE_TEST_SUITE_P(Grid, ReferenceProperties,
                         ::testing::Combine(::testing::Values(OpId::rms_norm, OpId::fused_add_rms_norm,
                                                              OpId::layer_norm, OpId::ada_layer_norm,
                                                              OpId::rms_norm_gelu),
                                            ::testing::Values(DType::f32, DType::f16, DType::bf16),
                                            ::testing::Values(1, 7, 83),
                                            ::testing::Values(64, 111, 500, 769, 4096, 5125), ::testing::Values(0, 8)));

INSTANTIATE_TEST_SUITE_P(Quant, ReferenceProperties,
                         ::testing::Combine(::testing::Values(OpId::rms_norm_quant_int8, OpId::rms_norm_quant_fp8,
                                                              OpId::fused_add_rms_norm_quant_int8,
                                                              OpId::fused_add_rms_norm_quant_fp8),
                                            ::testing::Values(DType::f16, DType::bf16), ::testing::Values(1, 7, 83),
                                            ::testing::Values(64, 111, 769, 4096, 5125), ::testing::Values(0, 8)));

// Seeded random cases (random_norm_case: shapes, dtypes, strides and magnitudes off the grid) on the same invariants.
TEST(NormRandom, PropertiesHold) {
  kernelkit::testing::for_random_cases(60, kernelkit::testing::random_norm_case, [](const auto& c) {
    kernelkit::testing::expect_properties(kernelkit::testing::check_norm_properties(c), c.name());
  });
}

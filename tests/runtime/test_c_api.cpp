// The C ABI on host buffers (device = -1): values against hand-computed numbers, strides, NULL parameters, dtype codes,
// and bad input reported as a non-zero code with a message naming the argument.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernelkit/c_api.h"
#include "kernelkit/dtype.hpp"

namespace {

constexpr int kCpu = -1;

std::string last_error() { return kk_last_error(); }

}  // namespace

TEST(CApi, RmsNormRowStridesAndWeight) {
  // Two rows of hidden 4 in a buffer with row stride 6 (the two padding elements must stay untouched).
  //   row 0 = [1, 5, 5, 7]:   mean(x^2) = 100 / 4 = 25, rms 5 -> [0.2, 1, 1, 1.4]
  //   row 1 = [3, -3, 3, -3]: mean(x^2) = 9, rms 3           -> [1, -1, 1, -1]
  std::vector<float> x = {1, 5, 5, 7, 99, 99, 3, -3, 3, -3, 99, 99};
  const std::vector<float> w = {1, 2, 0.5f, -1};
  std::vector<float> out(12, -7.0f);
  const float eps = 1e-6f;
  ASSERT_EQ(kk_rms_norm(out.data(), x.data(), w.data(), 2, 4, 6, 6, KK_F32, eps, 0.0f, kCpu, nullptr), 0)
      << last_error();
  // eps enters as 1/sqrt(ms + eps): keep it in the expectation instead of widening the tolerance.
  const double r0 = 5 / std::sqrt(25 + 1e-6), r1 = 3 / std::sqrt(9 + 1e-6);
  const double expect[12] = {0.2 * r0, 2 * r0, 0.5 * r0, -1.4 * r0, -7, -7, 1 * r1, -2 * r1, 0.5 * r1, 1 * r1, -7, -7};
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(out[i], expect[i], 1e-6) << "index " << i;

  // No weight: the plain normalization. weight_offset = 1 with the weight gives Gemma's (1 + w).
  ASSERT_EQ(kk_rms_norm(out.data(), x.data(), nullptr, 1, 4, 4, 4, KK_F32, eps, 0.0f, kCpu, nullptr), 0);
  EXPECT_NEAR(out[0], 0.2 * r0, 1e-6);
  EXPECT_NEAR(out[3], 1.4 * r0, 1e-6);
  ASSERT_EQ(kk_rms_norm(out.data(), x.data(), w.data(), 1, 4, 4, 4, KK_F32, eps, 1.0f, kCpu, nullptr), 0);
  EXPECT_NEAR(out[1], 1.0 * 3 * r0, 1e-6);  // x 5 / 5 * (1 + 2)
  EXPECT_NEAR(out[3], 1.4 * 0 * r0, 1e-6);  // (1 + -1) = 0
}

TEST(CApi, RmsNormHalfDtypeCode) {
  // KK_F16 = 1 must reach the op as f16: [1, 5, 5, 7] -> [0.2, 1, 1, 1.4] rounded to binary16.
  std::vector<uint16_t> x, out(4, 0);
  for (float v : {1.0f, 5.0f, 5.0f, 7.0f}) x.push_back(kernelkit::float_to_half_bits(v));
  ASSERT_EQ(kk_rms_norm(out.data(), x.data(), nullptr, 1, 4, 4, 4, KK_F16, 1e-6f, 0.0f, kCpu, nullptr), 0)
      << last_error();
  const float expect[4] = {0.2f, 1.0f, 1.0f, 1.4f};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], kernelkit::float_to_half_bits(expect[i])) << "index " << i;
}

TEST(CApi, LayerNormWeightBias) {
  //   row 0 = [4, 6, 4, 6]: mean 5, deviations [-1, 1, -1, 1],  var 1  -> [-1, 1, -1, 1] / sqrt(1 + eps)
  //   row 1 = [0, 0, 8, 8]: mean 4, deviations [-4, -4, 4, 4],  var 16 -> [-1, -1, 1, 1] * 4 / sqrt(16 + eps)
  const std::vector<float> x = {4, 6, 4, 6, 0, 0, 8, 8};
  const std::vector<float> w = {1, 2, 0.5f, -1}, b = {0, 1, -1, 0.5f};
  std::vector<float> out(8, -7.0f);
  const float eps = 1e-5f;
  ASSERT_EQ(kk_layer_norm(out.data(), x.data(), w.data(), b.data(), 2, 4, 4, 4, KK_F32, eps, kCpu, nullptr), 0)
      << last_error();
  const double e = static_cast<double>(eps);
  const double r0 = 1 / std::sqrt(1 + e), r1 = 4 / std::sqrt(16 + e);
  const double expect[8] = {-1 * r0 + 0, 2 * r0 + 1, -0.5 * r0 - 1, -1 * r0 + 0.5,
                            -1 * r1 + 0, -2 * r1 + 1, 0.5 * r1 - 1, -1 * r1 + 0.5};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(out[i], expect[i], 1e-6) << "index " << i;

  // weight and bias are nullable: the plain normalization.
  ASSERT_EQ(kk_layer_norm(out.data(), x.data(), nullptr, nullptr, 2, 4, 4, 4, KK_F32, eps, kCpu, nullptr), 0);
  EXPECT_NEAR(out[1], r0, 1e-6);
  EXPECT_NEAR(out[4], -r1, 1e-6);
}

TEST(CApi, BadInputIsACodeAndAMessage) {
  std::vector<float> x(8, 1.0f), out(8);
  // eps = 0: invalid_argument (1), naming eps.
  EXPECT_EQ(kk_rms_norm(out.data(), x.data(), nullptr, 2, 4, 4, 4, KK_F32, 0.0f, 0.0f, kCpu, nullptr), 1);
  EXPECT_NE(last_error().find("eps"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("rms_norm"), std::string::npos) << last_error();
  // hidden = 0: invalid_argument, naming x's hidden size.
  EXPECT_EQ(kk_layer_norm(out.data(), x.data(), nullptr, nullptr, 2, 0, 0, 0, KK_F32, 1e-5f, kCpu, nullptr), 1);
  EXPECT_NE(last_error().find("hidden"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("layer_norm"), std::string::npos) << last_error();
  // A dtype code outside the enum.
  EXPECT_EQ(kk_rms_norm(out.data(), x.data(), nullptr, 2, 4, 4, 4, 7, 1e-6f, 0.0f, kCpu, nullptr), 1);
  EXPECT_NE(last_error().find("dtype code 7"), std::string::npos) << last_error();
  // Host pointers with a CUDA device: refused (no_device without a GPU, invalid_argument "host pointer" with one).
  EXPECT_NE(kk_rms_norm(out.data(), x.data(), nullptr, 2, 4, 4, 4, KK_F32, 1e-6f, 0.0f, 0, nullptr), 0);
  EXPECT_FALSE(last_error().empty());
  // A later success leaves the last failure's message in place (errno-like).
  const std::string before = last_error();
  EXPECT_EQ(kk_rms_norm(out.data(), x.data(), nullptr, 2, 4, 4, 4, KK_F32, 1e-6f, 0.0f, kCpu, nullptr), 0);
  EXPECT_EQ(last_error(), before);
}

TEST(CApi, FusedAddAdaAndGeluRunOnTheCpu) {
  // fused_add: residual = x + residual = [1, 5, 5, 7] (rms 5); x = residual / 5.
  std::vector<float> x = {0, 2, 4, 6}, res = {1, 3, 1, 1};
  ASSERT_EQ(kk_fused_add_rms_norm(x.data(), res.data(), nullptr, 1, 4, 4, 4, KK_F32, 1e-6f, 0.0f, kCpu, nullptr), 0)
      << last_error();
  const double r = 5 / std::sqrt(25 + 1e-6);
  EXPECT_EQ(res, (std::vector<float>{1, 5, 5, 7}));
  EXPECT_NEAR(x[0], 0.2 * r, 1e-6);
  EXPECT_NEAR(x[3], 1.4 * r, 1e-6);

  // ada: batch 2, seq 1, hidden 4, x rows [4, 6, 4, 6] -> [-1, 1, -1, 1]; out = y * (1 + scale[b]) + shift[b].
  const std::vector<float> ax = {4, 6, 4, 6, 4, 6, 4, 6};
  const std::vector<float> scale = {0, 0, 0, 0, 1, 1, 1, 1}, shift = {0, 0, 0, 0, 2, 2, 2, 2};
  std::vector<float> aout(8);
  ASSERT_EQ(kk_ada_layer_norm(aout.data(), ax.data(), scale.data(), shift.data(), nullptr, nullptr, 2, 1, 4, 4, 4,
                              KK_F32, 1e-5f, kCpu, nullptr),
            0)
      << last_error();
  const double r0 = 1 / std::sqrt(1 + 1e-5);
  EXPECT_NEAR(aout[0], -r0, 1e-6);
  EXPECT_NEAR(aout[4], -2 * r0 + 2, 1e-6);
  EXPECT_NEAR(aout[5], 2 * r0 + 2, 1e-6);
  // A NULL scale is reported by the op, naming it.
  EXPECT_EQ(kk_ada_layer_norm(aout.data(), ax.data(), nullptr, shift.data(), nullptr, nullptr, 2, 1, 4, 4, 4, KK_F32,
                              1e-5f, kCpu, nullptr),
            1);
  EXPECT_NE(last_error().find("scale"), std::string::npos) << last_error();

  // rms_norm_gelu of [1, 5, 5, 7] (rms 5): gelu_tanh(1) = 0.5 * (1 + tanh(sqrt(2/pi) * (1 + 0.044715))).
  const std::vector<float> gx = {1, 5, 5, 7};
  std::vector<float> gout(4);
  ASSERT_EQ(kk_rms_norm_gelu(gout.data(), gx.data(), nullptr, 1, 4, 4, 4, KK_F32, 1e-6f, kCpu, nullptr), 0)
      << last_error();
  const double y = r, g = 0.5 * y * (1 + std::tanh(std::sqrt(2 / M_PI) * (y + 0.044715 * y * y * y)));
  EXPECT_NEAR(gout[1], g, 1e-6);
}

TEST(CApi, Version) { EXPECT_EQ(kk_version(), 100); }  // project(kernelkit VERSION 0.1.0)

TEST(CApi, RotaryEmbeddingInPlaceOnAFusedRow) {
  // One token whose fused row is [q head (4) | k head (4) | v (4)]; rot_dim 4, neox pairs (0, 2) and (1, 3).
  // Cache row 1: cos = [c0, c1], sin = [s0, s1]; position 1. Expected: (a, b) -> (a c - b s, b c + a s) per pair.
  std::vector<float> row = {1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 9};
  const std::vector<float> cache = {1, 1, 0, 0, 0.6f, 0.8f, 0.8f, 0.6f};  // [2, 4]: position 0 identity
  const int64_t pos = 1;
  ASSERT_EQ(kk_rotary_embedding(row.data(), row.data() + 4, 1, 1, 1, 4, 12, 12, &pos, cache.data(), 2, 4, 1, KK_F32,
                                kCpu, nullptr),
            0)
      << last_error();
  const float c0 = 0.6f, c1 = 0.8f, s0 = 0.8f, s1 = 0.6f;
  const float want[12] = {1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1,
                          5 * c0 - 7 * s0, 6 * c1 - 8 * s1, 7 * c0 + 5 * s0, 8 * c1 + 6 * s1, 9, 9, 9, 9};
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(row[i], want[i], 1e-6) << "index " << i;
  // A position outside the cache is an error naming positions.
  const int64_t bad = 5;
  EXPECT_NE(kk_rotary_embedding(row.data(), row.data() + 4, 1, 1, 1, 4, 12, 12, &bad, cache.data(), 2, 4, 1, KK_F32,
                                kCpu, nullptr),
            0);
  EXPECT_NE(last_error().find("position"), std::string::npos) << last_error();
}

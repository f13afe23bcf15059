// Quantization on the CPU backend: the INT4 kernel layout and its converters, quantize / dequantize error bounds, the
// linear reference against an independent dequantize-then-matmul, bad inputs, op_info bytes, and the linear plans on
// every profile. Small shapes: CI has two cores.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "expect_case.hpp"
#include "kernelkit/op_info.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/planner.hpp"
#include "kernelkit/runtime.hpp"
#include "ops/quant/quant.hpp"
#include "ops/quant/quant_cases.hpp"
#include "ops/quant/quant_plan.hpp"
#include "runtime/plan_rules.hpp"

using namespace kernelkit;

namespace {

TensorView mat(void* p, DType t, int64_t r, int64_t c) { return TensorView::contiguous(p, t, {r, c}); }
TensorView vec(void* p, DType t, int64_t n) { return TensorView::contiguous(p, t, {n}); }

// Random values in [-a, a] stored in dtype t (so the quantizers see exactly representable inputs).
kernelkit::testing::HostBuffer random_matrix(DType t, int64_t rows, int64_t k, double a, uint64_t seed) {
  kernelkit::testing::HostBuffer b(t, rows * k);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-a, a);
  for (int64_t i = 0; i < b.size(); ++i) b.set(i, u(rng));
  return b;
}

// Value j of row `row` of packed INT4 weights, decoded here from the documented layout, not through the library.
// Value j of row `row` of INT4 weights [n, k / 2] in the kernel layout, decoded as include/kernelkit/ops/quant.hpp
// describes it: 16-row tiles of 64-value regions; a region is 32 lanes' 16 bytes, lane 4 (row % 8) + (the region's
// 16-value quarter holding j), whose first 8 bytes are row g's and last 8 row g + 8's; in them, two little-endian
// words of 8 values with value j % 8 at nibble P(j % 8).
int decode_int4(const std::vector<uint8_t>& packed, int64_t k, int64_t row, int64_t j) {
  static constexpr int kPos[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  const int64_t region = 512, tile = k / 64 * region, lane = 4 * (row % 8) + j % 64 / 16;
  const int64_t at = row / 16 * tile + j / 64 * region + 16 * lane + (row % 16 < 8 ? 0 : 8) + j % 16 / 8 * 4;
  uint32_t word = 0;
  for (int b = 0; b < 4; ++b) word |= static_cast<uint32_t>(packed[at + b]) << (8 * b);
  const int v = (word >> (4 * kPos[j % 8])) & 0xF;
  return v >= 8 ? v - 16 : v;
}

bool has(const Status& s, const std::string& what) { return s.message().find(what) != std::string::npos; }

// The planner's shape of a linear op: m tokens, k, n outputs, 16-byte aligned.
OpShape linear_shape(int64_t m, int64_t k, int64_t n) {
  OpShape s{m, k, 1, 16};
  s.out_features = n;
  return s;
}

// The planner's verdict on linear op `op` (m 16, k 4096, n 4096, f16) on profile `prof`.
StatusCode plan_linear(const char* prof, OpId op) {
  LaunchPlan p;
  return plan_op(*find_profile(prof), op, linear_shape(16, 4096, 4096), DType::f16, &p).code();
}

// Linear op `op` planned on profile `prof`: a cuBLASLt (library) plan, its heuristic and no launch configuration
// of ours.
void expect_library_plan(const char* prof, OpId op, const OpShape& s) {
  LaunchPlan p;
  ASSERT_TRUE(plan_op(*find_profile(prof), op, s, DType::bf16, &p).ok());
  EXPECT_TRUE(p.library);
  EXPECT_NE(p.to_string().find("cuBLASLt"), std::string::npos) << p.to_string();
}

}  // namespace

TEST(Int4Layout, WordHoldsValuesAtTheDocumentedNibbles) {
  // One 16 x 64 tile. Row 0, k = 0..7: v = 1..7, -8 -> nibble P(j) = j / 2 + 4 (j % 2) of the little-endian word at
  // byte 0 (tile 0, region 0, lane 0, row g's half, word 0).
  const int64_t n = 16, k = 64;
  std::vector<int8_t> plain(n * k, 0);
  for (int j = 0; j < 8; ++j) plain[j] = static_cast<int8_t>(j < 7 ? j + 1 : -8);
  // Row 9 (g = 1, the second half), k = 37 (quarter 2 of the region, its first word, value 5 of the word): lane
  // 4 * 1 + 2 = 6, byte 16 * 6 + 8 = 104 starts the word, nibble P(5) = 6 is the low nibble of its byte 3.
  plain[9 * k + 37] = 5;
  std::vector<uint8_t> packed(n * k / 2);
  ASSERT_TRUE(pack_int4(mat(packed.data(), DType::i4x2, n, k / 2), mat(plain.data(), DType::i8, n, k)).ok());
  const uint32_t word = packed[0] | packed[1] << 8 | packed[2] << 16 | static_cast<uint32_t>(packed[3]) << 24;
  // nibbles 0..7 hold v0, v2, v4, v6, v1, v3, v5, v7 = 1, 3, 5, 7, 2, 4, 6, 8 (-8 as 0x8).
  EXPECT_EQ(word, 0x86427531u);
  // The kernel's extraction: (word & 0x000F000F) has v0 and v1 in the low nibbles of its halves.
  EXPECT_EQ(word & 0x000F000Fu, 0x00020001u);
  EXPECT_EQ((word >> 8) & 0x00F000F0u, 0x00800070u);  // v6 = 7 and v7 = -8
  for (int64_t b = 4; b < n * k / 2; ++b) EXPECT_EQ(packed[b], b == 107 ? 0x05 : 0x00) << "byte " << b;
}

TEST(Int4Layout, ConvertersRoundTrip) {
  const int64_t n = 48, k = 192;  // three row tiles of three regions
  std::vector<int8_t> plain(n * k), back(n * k);
  std::mt19937 rng(3);
  for (auto& v : plain) v = static_cast<int8_t>(static_cast<int>(rng() % 16) - 8);
  std::vector<uint8_t> packed(n * k / 2), plain4(n * k / 2), packed2(n * k / 2);
  ASSERT_TRUE(pack_int4(mat(packed.data(), DType::i4x2, n, k / 2), mat(plain.data(), DType::i8, n, k)).ok());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) ASSERT_EQ(decode_int4(packed, k, r, j), plain[r * k + j]) << r << ", " << j;
  ASSERT_TRUE(unpack_int4(mat(back.data(), DType::i8, n, k), mat(packed.data(), DType::i4x2, n, k / 2)).ok());
  EXPECT_EQ(back, plain);
  // Through the plain i4x2 order (low nibble first): unpack to it, pack from it, same bytes.
  ASSERT_TRUE(unpack_int4(mat(plain4.data(), DType::i4x2, n, k / 2), mat(packed.data(), DType::i4x2, n, k / 2)).ok());
  for (int64_t i = 0; i < n * k; ++i) EXPECT_EQ(load_as_double(plain4.data(), DType::i4x2, i), plain[i]);
  ASSERT_TRUE(pack_int4(mat(packed2.data(), DType::i4x2, n, k / 2), mat(plain4.data(), DType::i4x2, n, k / 2)).ok());
  EXPECT_EQ(packed2, packed);
}

TEST(Int4Layout, ConverterRefusals) {
  std::vector<int8_t> plain(16 * 128, 9);
  std::vector<uint8_t> packed(16 * 64);
  Status s = pack_int4(mat(packed.data(), DType::i4x2, 16, 32), mat(plain.data(), DType::i8, 16, 64));
  EXPECT_TRUE(has(s, "plain[0, 0] = 9 is outside the INT4 range [-8, 7]")) << s.message();
  for (const auto [n, k] : {std::pair<int64_t, int64_t>{8, 64}, {16, 96}, {24, 128}}) {
    s = pack_int4(mat(packed.data(), DType::i4x2, n, k / 2), mat(plain.data(), DType::i8, n, k));
    EXPECT_TRUE(has(s, "pack_int4: INT4 weights [n, k] need n % 16 == 0 and k % 64 == 0")) << s.message();
    EXPECT_TRUE(has(s, "got n = " + std::to_string(n) + ", k = " + std::to_string(k))) << s.message();
    s = unpack_int4(mat(plain.data(), DType::i8, n, k), mat(packed.data(), DType::i4x2, n, k / 2));
    EXPECT_TRUE(has(s, "unpack_int4: INT4 weights [n, k] need n % 16 == 0")) << s.message();
  }
  s = pack_int4(TensorView::contiguous(packed.data(), DType::i4x2, {16, 32}, Device::cuda()),
                TensorView::contiguous(plain.data(), DType::i8, {16, 64}, Device::cuda()));
  EXPECT_EQ(s.code(), StatusCode::unsupported);
}

class QuantizeRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(QuantizeRoundTrip, Int8PerChannelAndPerToken) {
  const DType dt = GetParam();
  const int64_t n = 6, k = 200;
  auto w = random_matrix(dt, n, k, 3.0, 7);
  for (int64_t j = 0; j < k; ++j) w.set(2 * k + j, 0.0);  // row 2: all zeros
  std::vector<int8_t> q(n * k), q_tok(n * k);
  std::vector<float> s(n), s_tok(n);
  ASSERT_TRUE(
      quantize_int8_per_channel(mat(q.data(), DType::i8, n, k), vec(s.data(), DType::f32, n), mat(w.data(), dt, n, k))
          .ok());
  for (int64_t r = 0; r < n; ++r) {
    double amax = 0;
    int qmax = 0;
    for (int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(w.get(r * k + j)));
    EXPECT_EQ(s[r], static_cast<float>(amax / 127)) << "row " << r;
    for (int64_t j = 0; j < k; ++j) {
      const double err = std::fabs(w.get(r * k + j) - q[r * k + j] * static_cast<double>(s[r]));
      // Rounding to the nearest step: at most half a step (+ the fp32 quotient's rounding).
      EXPECT_LE(err, 0.5 * s[r] * (1 + 1e-6)) << r << ", " << j;
      qmax = std::max(qmax, std::abs(int{q[r * k + j]}));
    }
    EXPECT_EQ(qmax, r == 2 ? 0 : 127);  // the largest |w| maps to 127; a zero row to 0 with scale 0
  }
  EXPECT_EQ(s[2], 0.0f);
  // Per-token activations are the same row-wise math.
  ASSERT_TRUE(quantize_per_token_int8(mat(q_tok.data(), DType::i8, n, k), vec(s_tok.data(), DType::f32, n),
                                      mat(w.data(), dt, n, k))
                  .ok());
  EXPECT_EQ(q_tok, q);
  EXPECT_EQ(s_tok, s);
}

// FP8 per token: s = max|x| / 448 exactly as fp32, every q the e4m3 value nearest x / s (checked against the e4m3
// grid, not the library's converter: the neighbours of x / s on the grid must be no nearer), the largest |x| at 448.
TEST_P(QuantizeRoundTrip, Fp8PerToken) {
  const DType dt = GetParam();
  const int64_t n = 6, k = 200;
  auto x = random_matrix(dt, n, k, 3.0, 17);
  for (int64_t j = 0; j < k; ++j) x.set(2 * k + j, 0.0);                         // row 2: all zeros
  for (int64_t j = 0; j < k; j += 7) x.set(4 * k + j, x.get(4 * k + j) * 1e-4);  // row 4: e4m3 subnormals too
  std::vector<uint8_t> q(n * k);
  std::vector<float> s(n);
  ASSERT_TRUE(
      quantize_per_token_fp8(mat(q.data(), DType::f8e4m3, n, k), vec(s.data(), DType::f32, n), mat(x.data(), dt, n, k))
          .ok());
  std::vector<double> grid;  // every finite e4m3 value
  for (int b = 0; b < 256; ++b)
    if ((b & 0x7f) != 0x7f) grid.push_back(e4m3_bits_to_float(static_cast<uint8_t>(b)));
  for (int64_t r = 0; r < n; ++r) {
    double amax = 0, qmax = 0;
    for (int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(x.get(r * k + j)));
    EXPECT_EQ(s[r], static_cast<float>(amax / 448)) << "row " << r;
    for (int64_t j = 0; j < k; ++j) {
      const double got = e4m3_bits_to_float(q[r * k + j]);
      const double want = s[r] == 0 ? 0 : static_cast<float>(x.get(r * k + j) / s[r]);
      for (double g : grid) ASSERT_LE(std::fabs(got - want), std::fabs(g - want)) << r << ", " << j;
      qmax = std::max(qmax, std::fabs(got));
    }
    EXPECT_EQ(qmax, r == 2 ? 0.0 : 448.0);
  }
  EXPECT_EQ(s[2], 0.0f);
}

TEST_P(QuantizeRoundTrip, Int4GroupWise) {
  const DType dt = GetParam();
  for (int group : {64, 128}) {
    const int64_t n = 16, k = 256, groups = k / group;
    auto w = random_matrix(dt, n, k, 1.5, 9 + group);
    std::vector<uint8_t> q(n * k / 2);
    std::vector<float> s(n * groups);
    ASSERT_TRUE(quantize_int4_groupwise(mat(q.data(), DType::i4x2, n, k / 2), mat(s.data(), DType::f32, n, groups),
                                        mat(w.data(), dt, n, k), group)
                    .ok());
    for (int64_t r = 0; r < n; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        double amax = 0;
        int qmax = 0;
        for (int64_t j = g * group; j < (g + 1) * group; ++j) amax = std::max(amax, std::fabs(w.get(r * k + j)));
        const float sc = s[r * groups + g];
        EXPECT_EQ(sc, static_cast<float>(amax / 7));
        for (int64_t j = g * group; j < (g + 1) * group; ++j) {
          const int v = decode_int4(q, k, r, j);
          EXPECT_LE(std::fabs(w.get(r * k + j) - v * static_cast<double>(sc)), 0.5 * sc * (1 + 1e-6));
          EXPECT_GE(v, -7);
          qmax = std::max(qmax, std::abs(v));
        }
        EXPECT_EQ(qmax, 7);
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, QuantizeRoundTrip, ::testing::Values(DType::f32, DType::f16, DType::bf16));

// The reference linear against a naive dequantize-then-matmul written here (its own layout decoding).
class WeightOnlyReference : public ::testing::TestWithParam<std::tuple<DType, int, int64_t>> {};

TEST_P(WeightOnlyReference, MatchesNaiveDequantizeMatmul) {
  const auto [dt, bits, m] = GetParam();
  const int64_t n = bits == 4 ? 32 : 7, k = 256, xs = k + 8;
  for (int group : bits == 8 ? std::vector<int>{0} : std::vector<int>{64, 128}) {
    const int64_t groups = bits == 4 ? k / group : 1;
    auto w = random_matrix(DType::f32, n, k, 0.2, 5);
    auto x = random_matrix(dt, m, xs, 1.0, 6);
    auto bias = random_matrix(dt, 1, n, 0.5, 8);
    std::vector<uint8_t> q(bits == 8 ? n * k : n * k / 2);
    std::vector<float> s(n * groups);
    const TensorView qv = mat(q.data(), bits == 8 ? DType::i8 : DType::i4x2, n, bits == 8 ? k : k / 2);
    const TensorView sv = bits == 8 ? vec(s.data(), DType::f32, n) : mat(s.data(), DType::f32, n, groups);
    ASSERT_TRUE((bits == 8 ? quantize_int8_per_channel(qv, sv, mat(w.data(), DType::f32, n, k))
                           : quantize_int4_groupwise(qv, sv, mat(w.data(), DType::f32, n, k), group))
                    .ok());
    for (bool with_bias : {true, false}) {
      kernelkit::testing::HostBuffer out(dt, m * n);
      const TensorView xv = TensorView::strided(x.data(), dt, {m, k}, {xs, 1});
      std::optional<TensorView> bv;
      if (with_bias) bv = vec(bias.data(), dt, n);
      ASSERT_TRUE(linear_weight_only(mat(out.data(), dt, m, n), xv, qv, sv, bits, group, bv).ok());
      const auto tol = kernelkit::testing::tolerance(dt);
      for (int64_t t = 0; t < m; ++t)
        for (int64_t r = 0; r < n; ++r) {
          double want = with_bias ? bias.get(r) : 0.0;
          for (int64_t j = 0; j < k; ++j) {
            const int v = bits == 8 ? static_cast<int8_t>(q[r * k + j]) : decode_int4(q, k, r, j);
            want += x.get(t * xs + j) * (v * static_cast<double>(s[r * groups + (bits == 8 ? 0 : j / group)]));
          }
          const double got = out.get(t * n + r);
          EXPECT_LE(std::fabs(got - want), tol.atol + tol.rtol * std::fabs(want)) << t << ", " << r;
        }
      // The quantization error itself: y(dequant) vs y(w) stays within the steps' bound sum_j |x_j| s / 2.
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, WeightOnlyReference,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16), ::testing::Values(8, 4),
                                            ::testing::Values(1, 3, 8)));

// Zero points and group scales (GPTQ / AWQ forms) by hand: w[r, j] = s[r, g] (q[r, j] - z[r, g]), groups of 32 over
// k = 64, every code and zero points across int8 (also past the 4-bit codes' range), against sums written here.
TEST(WeightOnlyReference, ZeroPointsAndGroupsByHand) {
  const int64_t m = 2, n = 16, k = 64, group = 32, groups = k / group;
  auto x = random_matrix(DType::f32, m, k, 1.0, 21);
  std::vector<float> s(n * groups);
  std::vector<int8_t> z(n * groups);
  const int zero_points[8] = {8, -8, 0, 127, -128, 3, 5, -3};  // across the int8 range and a 4-bit code's
  for (int64_t i = 0; i < n * groups; ++i) {
    s[i] = std::ldexp(1.0f, static_cast<int>(i % 6) - 3);  // 1/8 .. 4
    z[i] = static_cast<int8_t>(zero_points[i % 8]);
  }
  for (int bits : {4, 8}) {
    std::vector<int8_t> plain(n * k);
    for (int64_t i = 0; i < n * k; ++i)
      plain[i] =
          static_cast<int8_t>(bits == 4 ? static_cast<int>(i * 7 % 16) - 8 : static_cast<int>(i * 37 % 256) - 128);
    std::vector<uint8_t> q(bits == 4 ? n * k / 2 : n * k);
    const TensorView qv = bits == 4 ? mat(q.data(), DType::i4x2, n, k / 2) : mat(q.data(), DType::i8, n, k);
    if (bits == 4)
      ASSERT_TRUE(pack_int4(qv, mat(plain.data(), DType::i8, n, k)).ok());
    else
      std::memcpy(q.data(), plain.data(), plain.size());
    for (DType dt : {DType::f16, DType::bf16}) {
      kernelkit::testing::HostBuffer xb(dt, m * k), out(dt, m * n);
      for (int64_t i = 0; i < m * k; ++i) xb.set(i, x.get(i));
      ASSERT_TRUE(linear_weight_only(mat(out.data(), dt, m, n), mat(xb.data(), dt, m, k), qv,
                                     mat(s.data(), DType::f32, n, groups), bits, group, std::nullopt, nullptr, false,
                                     mat(z.data(), DType::i8, n, groups))
                      .ok());
      for (int64_t t = 0; t < m; ++t)
        for (int64_t r = 0; r < n; ++r) {
          double want = 0;
          for (int64_t j = 0; j < k; ++j) {
            const int64_t g = r * groups + j / group;
            want += xb.get(t * k + j) * (s[g] * (plain[r * k + j] - z[g]));
          }
          const auto tol = kernelkit::testing::tolerance(dt);
          EXPECT_LE(std::fabs(out.get(t * n + r) - want), tol.atol + tol.rtol * std::fabs(want))
              << "bits " << bits << " " << dtype_name(dt) << " token " << t << " row " << r;
        }
    }
  }
}

// Act-order: with perm the layer multiplies the weights' column j by input perm[j] of x, as the same call without perm
// on x gathered by hand does (i32 and i64 indices); an entry outside [0, k) is refused naming it, before out is
// written.
TEST(WeightOnlyReference, PermGathersTheInputs) {
  const int64_t m = 3, n = 16, k = 128, group = 64;
  auto w = random_matrix(DType::f32, n, k, 0.1, 31);
  std::vector<uint8_t> q(n * k / 2);
  std::vector<float> s(n * k / group);
  const TensorView qv = mat(q.data(), DType::i4x2, n, k / 2), sv = mat(s.data(), DType::f32, n, k / group);
  ASSERT_TRUE(quantize_int4_groupwise(qv, sv, mat(w.data(), DType::f32, n, k), group).ok());
  std::vector<int64_t> order(k);
  for (int64_t j = 0; j < k; ++j) order[j] = (j * 37 + 11) % k;  // 37 is prime to 128: a permutation
  std::vector<int32_t> perm32(order.begin(), order.end());
  for (DType dt : {DType::f16, DType::bf16}) {
    auto x = random_matrix(dt, m, k, 1.0, 32);
    kernelkit::testing::HostBuffer gathered(dt, m * k), want(dt, m * n), got(dt, m * n);
    for (int64_t t = 0; t < m; ++t)
      for (int64_t j = 0; j < k; ++j) gathered.set(t * k + j, x.get(t * k + order[j]));
    ASSERT_TRUE(
        linear_weight_only(mat(want.data(), dt, m, n), mat(gathered.data(), dt, m, k), qv, sv, 4, group, std::nullopt)
            .ok());
    for (const TensorView& pv : {vec(order.data(), DType::i64, k), vec(perm32.data(), DType::i32, k)}) {
      got.poison();
      ASSERT_TRUE(linear_weight_only(mat(got.data(), dt, m, n), mat(x.data(), dt, m, k), qv, sv, 4, group, std::nullopt,
                                     nullptr, false, std::nullopt, pv)
                      .ok());
      for (int64_t i = 0; i < m * n; ++i) EXPECT_EQ(got.get(i), want.get(i)) << dtype_name(pv.dtype) << " " << i;
    }
    std::vector<int32_t> bad = perm32;
    for (int32_t v : {-1, 128, std::numeric_limits<int32_t>::max()}) {
      bad[9] = v;
      got.poison();
      const Status st = linear_weight_only(mat(got.data(), dt, m, n), mat(x.data(), dt, m, k), qv, sv, 4, group,
                                           std::nullopt, nullptr, false, std::nullopt, vec(bad.data(), DType::i32, k));
      EXPECT_EQ(st.code(), StatusCode::invalid_argument);
      EXPECT_EQ(st.message(),
                "linear_w4a16: perm[9] = " + std::to_string(v) + " must be an input of x in [0, k = 128)");
      for (int64_t i = 0; i < m * n; ++i) EXPECT_TRUE(std::isnan(got.get(i))) << "out written before the refusal";
    }
  }
}

TEST(WeightOnlyErrors, BadInputsNameTheArgument) {
  const int64_t m = 2, n = 16, k = 128;
  std::vector<uint16_t> x(m * k), out(m * n), bias(n);
  std::vector<int8_t> q8(n * k);
  std::vector<uint8_t> q4(n * k / 2);
  std::vector<float> s8(n), s4(n * 2);
  const TensorView xv = mat(x.data(), DType::f16, m, k), ov = mat(out.data(), DType::f16, m, n);
  const TensorView q8v = mat(q8.data(), DType::i8, n, k), s8v = vec(s8.data(), DType::f32, n);
  const TensorView q4v = mat(q4.data(), DType::i4x2, n, k / 2), s4v = mat(s4.data(), DType::f32, n, 2);
  std::vector<int8_t> z4(m * n * 2 + 16);  // zero points [n, 2]; also big enough to hold out (the overlap case)
  const TensorView z4v = mat(z4.data(), DType::i8, n, 2);
  ASSERT_TRUE(linear_weight_only(ov, xv, q8v, s8v, 8, 0, std::nullopt).ok());
  ASSERT_TRUE(linear_weight_only(ov, xv, q4v, s4v, 4, 64, std::nullopt).ok());
  ASSERT_TRUE(linear_weight_only(ov, xv, q4v, s4v, 4, 64, std::nullopt, nullptr, false, z4v).ok());
  ASSERT_TRUE(linear_weight_only(ov, xv, q8v, s4v, 8, 64, std::nullopt, nullptr, false, z4v).ok());
  struct Case {
    Status s;
    const char* want;
  };
  std::vector<float> xf(m * k);
  std::vector<uint16_t> x_odd(m * 120);
  const Case cases[] = {
      {linear_weight_only(ov, xv, q8v, s8v, 6, 0, std::nullopt), "bits must be 8 or 4, got 6"},
      {linear_weight_only(ov, mat(xf.data(), DType::f32, m, k), q8v, s8v, 8, 0, std::nullopt),
       "x dtype f32 is not supported (expected f16 or bf16)"},
      {linear_weight_only(ov, xv, q8v, s8v, 8, 48, std::nullopt),
       "group must be 0 (one scale per output channel), 32, 64 or 128, got 48"},
      {linear_weight_only(ov, xv, q8v, s8v, 8, 64, std::nullopt), "scales shape [16] must be [16, 2]"},
      {linear_weight_only(ov, xv, q4v, s4v, 4, 16, std::nullopt), "group must be 32, 64 or 128, got 16"},
      {linear_weight_only(ov, xv, q4v, s4v, 4, 0, std::nullopt), "group must be 32, 64 or 128, got 0"},
      {linear_weight_only(ov, xv, q8v, s8v, 8, 0, std::nullopt, nullptr, false, z4v),
       "zeros need group scales (group 32, 64 or 128), got group 0"},
      {linear_weight_only(ov, xv, q4v, s4v, 4, 64, std::nullopt, nullptr, false, mat(z4.data(), DType::i8, n, 1)),
       "zeros shape [16, 1] must be [16, 2]"},
      {linear_weight_only(ov, xv, q4v, s4v, 4, 64, std::nullopt, nullptr, false, mat(s4.data(), DType::f32, n, 2)),
       "zeros dtype f32 must be i8"},
      {linear_weight_only(mat(z4.data(), DType::f16, m, n), xv, q4v, s4v, 4, 64, std::nullopt, nullptr, false, z4v),
       "zeros"},
      {linear_weight_only(mat(out.data(), DType::f16, m, n), mat(x_odd.data(), DType::f16, m, 120),
                          mat(q8.data(), DType::i8, n, 120), s8v, 8, 0, std::nullopt),
       "k = 120 must be a multiple of 16"},
      {linear_weight_only(ov, mat(x_odd.data(), DType::f16, m, 96), mat(q4.data(), DType::i4x2, n, 48), s4v, 4, 64,
                          std::nullopt),
       "k = 96 must be a multiple of group = 64"},
      {linear_weight_only(mat(out.data(), DType::f16, m, 8), xv, mat(q4.data(), DType::i4x2, 8, k / 2),
                          mat(s4.data(), DType::f32, 8, 2), 4, 64, std::nullopt),
       "INT4 weights [n, k] need n % 16 == 0 and k % 64 == 0 (the kernel layout's tiles of 16 rows x 64 values), got "
       "n = 8, k = 128"},
      {linear_weight_only(ov, mat(x_odd.data(), DType::f16, m, 96), mat(q4.data(), DType::i4x2, n, 48),
                          mat(s4.data(), DType::f32, n, 3), 4, 32, std::nullopt),
       "need n % 16 == 0 and k % 64 == 0"},
      {linear_weight_only(ov, xv, mat(q8.data(), DType::i8, n, 64), s8v, 8, 0, std::nullopt),
       "qweight shape [16, 64] must be [16, 128]"},
      {linear_weight_only(ov, xv, q4v, s8v, 4, 64, std::nullopt), "scales shape [16] must be [16, 2]"},
      {linear_weight_only(ov, xv, q8v, s4v, 8, 0, std::nullopt), "scales shape [16, 2] must be [16]"},
      {linear_weight_only(ov, xv, mat(q8.data(), DType::i8, n, k / 2 * 2), s8v, 4, 64, std::nullopt),
       "qweight dtype i8 must be i4x2"},
      {linear_weight_only(mat(out.data(), DType::f16, n, m), xv, q8v, s8v, 8, 0, std::nullopt),
       "out shape [16, 2] must be [2, 16]"},
      {linear_weight_only(mat(out.data(), DType::bf16, m, n), xv, q8v, s8v, 8, 0, std::nullopt),
       "out dtype bf16 must be f16"},
      {linear_weight_only(ov, xv, q8v, s8v, 8, 0, vec(bias.data(), DType::f16, 2)), "bias shape [2] must be [16]"},
      {linear_weight_only(mat(x.data(), DType::f16, m, n), xv, q8v, s8v, 8, 0, std::nullopt), "out must not be x"},
      {linear_weight_only(ov, TensorView::contiguous(x.data(), DType::f16, {k}), q8v, s8v, 8, 0, std::nullopt),
       "x must be 2-D [m, k]"},
      {linear_weight_only(ov, TensorView::strided(x.data(), DType::f16, {m, k}, {1, m}), q8v, s8v, 8, 0, std::nullopt),
       "x must have a contiguous last dim"},
      {linear_weight_only(ov, xv, mat(nullptr, DType::i8, n, k), s8v, 8, 0, std::nullopt), "qweight is a null pointer"},
      {linear_weight_only(ov, xv, q8v, s8v, 8, 0, std::nullopt, nullptr, false, std::nullopt,
                          vec(xf.data(), DType::f32, k)),
       "perm dtype f32 must be i32 or i64"},
      {linear_weight_only(ov, xv, q8v, s8v, 8, 0, std::nullopt, nullptr, false, std::nullopt,
                          vec(s4.data(), DType::i32, 6)),
       "perm shape [6] must be [128]"},
      {linear_weight_only(ov, xv, q8v, s8v, 8, 0, std::nullopt, nullptr, false, std::nullopt,
                          TensorView::strided(xf.data(), DType::i32, {k}, {2})),
       "perm must be contiguous"},
      {linear_weight_only(ov, xv, TensorView::contiguous(q8.data(), DType::i8, {n, k}, Device::cuda()), s8v, 8, 0,
                          std::nullopt),
       "qweight is on cuda:0 but the first tensor is on cpu"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(c.s.code(), StatusCode::invalid_argument) << c.want;
    EXPECT_TRUE(has(c.s, c.want)) << "want '" << c.want << "', got: " << c.s.message();
    EXPECT_EQ(c.s.message().rfind("linear_w", 0), 0u) << c.s.message();  // names the op (linear_w8a16, ...)
  }
  // Empty: m = 0 or n = 0 is a no-op after validation.
  EXPECT_TRUE(linear_weight_only(mat(out.data(), DType::f16, 0, n), mat(x.data(), DType::f16, 0, k), q8v, s8v, 8, 0,
                                 std::nullopt)
                  .ok());
  EXPECT_TRUE(linear_weight_only(mat(out.data(), DType::f16, m, 0), xv, mat(q8.data(), DType::i8, 0, k),
                                 vec(s8.data(), DType::f32, 0), 8, 0, std::nullopt)
                  .ok());
  const Status zero_k = linear_weight_only(mat(out.data(), DType::f16, m, n), mat(x.data(), DType::f16, m, 0), q8v, s8v,
                                           8, 0, std::nullopt);
  EXPECT_TRUE(has(zero_k, "k (last dim) must be > 0")) << zero_k.message();
}

// Profile-dependent refusals for CUDA tensors are decided before any device is needed (KERNELKIT_PROFILE override):
// bf16 on a T4, on the GEMV and the tensor-core paths alike.
TEST(WeightOnlyErrors, CudaRefusalsUnderAProfileOverride) {
  const int64_t n = 16, k = 128;
  std::vector<uint16_t> x(65 * k), out(65 * n);
  std::vector<int8_t> q8(n * k);
  std::vector<float> s8(n * 2);
  const Device d = Device::cuda();
  auto call = [&](int64_t m, DType dt, int bits = 8) {
    const TensorView q = bits == 8 ? TensorView::contiguous(q8.data(), DType::i8, {n, k}, d)
                                   : TensorView::contiguous(q8.data(), DType::i4x2, {n, k / 2}, d);
    const TensorView s = bits == 8 ? TensorView::contiguous(s8.data(), DType::f32, {n}, d)
                                   : TensorView::contiguous(s8.data(), DType::f32, {n, 2}, d);
    return linear_weight_only(TensorView::contiguous(out.data(), dt, {m, n}, d),
                              TensorView::contiguous(x.data(), dt, {m, k}, d), q, s, bits, bits == 8 ? 0 : 64,
                              std::nullopt);
  };
  setenv("KERNELKIT_PROFILE", "t4", 1);
  Status s = call(4, DType::bf16);
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_TRUE(has(s, "has no bf16")) << s.message();
  s = call(65, DType::bf16, 4);
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_TRUE(has(s, "has no bf16")) << s.message();
  unsetenv("KERNELKIT_PROFILE");
}

TEST(QuantizeErrors, BadInputsNameTheArgument) {
  const int64_t n = 16, k = 128;
  std::vector<float> w(n * k), s(n * 2);
  std::vector<int8_t> q(n * k);
  const TensorView wv = mat(w.data(), DType::f32, n, k);
  Status st = quantize_int8_per_channel(mat(q.data(), DType::i8, n, k), vec(s.data(), DType::f32, 3), wv);
  EXPECT_TRUE(has(st, "quantize_int8_per_channel: scales shape [3] must be [16]")) << st.message();
  st = quantize_int8_per_channel(mat(q.data(), DType::i4x2, n, k), vec(s.data(), DType::f32, n), wv);
  EXPECT_TRUE(has(st, "qweight dtype i4x2 must be i8")) << st.message();
  st = quantize_per_token_int8(mat(q.data(), DType::i8, n, k), vec(s.data(), DType::f32, n),
                               mat(q.data(), DType::i8, n, k));
  EXPECT_TRUE(has(st, "quantize_per_token_int8: x dtype i8 is not supported")) << st.message();
  st = quantize_per_token_fp8(mat(q.data(), DType::i8, n, k), vec(s.data(), DType::f32, n), wv);
  EXPECT_TRUE(has(st, "quantize_per_token_fp8: q dtype i8 must be f8e4m3")) << st.message();
  st = quantize_int4_groupwise(mat(q.data(), DType::i4x2, n, k / 2), mat(s.data(), DType::f32, n, 2), wv, 96);
  EXPECT_TRUE(has(st, "group must be 64 or 128, got 96")) << st.message();
  st = quantize_int4_groupwise(mat(q.data(), DType::i4x2, n, 48), mat(s.data(), DType::f32, n, 1),
                               mat(w.data(), DType::f32, n, 96), 64);
  EXPECT_TRUE(has(st, "k = 96 must be a multiple of group = 64")) << st.message();
  st = quantize_int4_groupwise(mat(q.data(), DType::i4x2, n, k / 2), mat(s.data(), DType::f32, n, 1), wv, 64);
  EXPECT_TRUE(has(st, "scales shape [16, 1] must be [16, 2]")) << st.message();
  st = quantize_int4_groupwise(mat(q.data(), DType::i4x2, 8, k / 2), mat(s.data(), DType::f32, 8, 2),
                               mat(w.data(), DType::f32, 8, k), 64);
  EXPECT_TRUE(has(st, "quantize_int4_groupwise: INT4 weights [n, k] need n % 16 == 0 and k % 64 == 0")) << st.message();
  st = quantize_int8_per_channel(mat(q.data(), DType::i8, n, k), vec(s.data(), DType::f32, n),
                                 TensorView::contiguous(w.data(), DType::f32, {n * k}));
  EXPECT_TRUE(has(st, "w must be 2-D [rows, k]")) << st.message();
  EXPECT_TRUE(quantize_int8_per_channel(mat(q.data(), DType::i8, 0, k), vec(s.data(), DType::f32, 0),
                                        mat(w.data(), DType::f32, 0, k))
                  .ok());  // empty: a no-op
}

TEST(QuantOpInfo, BytesAreDominatedByTheWeights) {
  OpShape s{1, 4096, 1, 16};
  s.out_features = 11008;
  // W8A16 at m = 1: n k weight bytes + 4 n scale bytes + 2 (k + n + n) for x, out and bias.
  EXPECT_EQ(op_bytes(OpId::linear_w8a16, s, DType::f16), 11008ull * 4096 + 4 * 11008 + 2 * (4096 + 2 * 11008));
  s.group = 128;
  EXPECT_EQ(op_bytes(OpId::linear_w4a16, s, DType::f16), 11008ull * 2048 + 4 * 11008 * 32 + 2 * (4096 + 2 * 11008));
  EXPECT_DOUBLE_EQ(op_flops(OpId::linear_w8a16, s), 2.0 * 11008 * 4096);
  for (const auto& prof : profile_table()) {
    EXPECT_TRUE(op_memory_bound(OpId::linear_w4a16, s, DType::f16, prof)) << prof.key;
    EXPECT_FALSE(op_supports(OpId::linear_w8a16, DType::f32, prof));
  }
  EXPECT_EQ(op_weight_bits(OpId::linear_w4a16), 4);
  EXPECT_EQ(parse_op("linear_w8a16"), OpId::linear_w8a16);
  OpShape qs{4, 256, 1, 16};
  qs.group = 64;
  EXPECT_EQ(op_bytes(OpId::quantize_int4_groupwise, qs, DType::bf16), 4ull * 256 * 2 + 4 * 128 + 4 * 4 * 4);
}

// The linear plans on every profile: the template's tile, whole warps, the split-K rule, the grid, shared memory.
TEST(QuantPlanner, LinearPlansOnEveryProfile) {
  for (const DeviceProfile& prof : profile_table())
    for (OpId op : {OpId::linear_w8a16, OpId::linear_w4a16})
      for (int64_t m : {1, 2, 3, 4, 8, 9, 16, 17, 64})
        for (int64_t n : {7, 1024, 11008})
          for (int64_t k : {128, 4096, 16384}) {
            OpShape s{m, k, 1, 16};
            s.out_features = n;
            s.group = op == OpId::linear_w4a16 ? 128 : 0;
            LaunchPlan p;
            SCOPED_TRACE(prof.key + " " + std::string(op_info(op).name) + " m" + std::to_string(m) + " n" +
                         std::to_string(n) + " k" + std::to_string(k));
            ASSERT_TRUE(plan_op(prof, op, s, DType::f16, &p).ok());
            // The tensor-core GEMV: INT4 below kLinearTcMinM tokens everywhere, to kLinearMmaGemvWideTokens on sm_90.
            if (op == OpId::linear_w4a16 && (m < kLinearTcMinM || (prof.sm >= 90 && m <= kLinearMmaGemvWideTokens))) {
              // Whole 8-token tiles up to kLinearMmaGemvMaxTokens, else four.
              EXPECT_EQ(p.tokens, m <= kLinearMmaGemvMaxTokens
                                      ? (m + kLinearMmaGemvTokens - 1) / kLinearMmaGemvTokens * kLinearMmaGemvTokens
                                      : kLinearMmaGemvWideTokens);
              // Two row tiles at two token tiles where 32-row blocks number two an SM, else one.
              const int row_tiles = m > kLinearMmaGemvTokens && m <= kLinearMmaGemvMaxTokens &&
                                            (n + 31) / 32 >= kLinearMmaGemvRowTileMinBlocksPerSm * prof.sms
                                        ? 2
                                        : 1;
              EXPECT_EQ(p.out_rows, kLinearMmaGemvRows * row_tiles);
              EXPECT_EQ(p.grid, (n + p.out_rows - 1) / p.out_rows);
              EXPECT_GE(p.k_warps, 1);
              // One token tile: batches of kLinearMmaGemvUnroll regions; more: of two (gemv_mma=3), of one at two row
              // tiles.
              EXPECT_EQ(p.stages,
                        m <= kLinearMmaGemvTokens ? kLinearMmaGemvUnroll : kLinearMmaGemvWideUnroll / row_tiles);
              EXPECT_EQ(p.k_splits, 1);
              continue;
            }
            if (m >= kLinearTcMinM) {  // tensor-core tiles: 16 tokens up to 16, else 64; k split over grid.z
              const int tokens = m <= 16 ? 16 : kLinearTcTileM;
              const int64_t tiles = (n + kLinearTcTileN - 1) / kLinearTcTileN * ((m + tokens - 1) / tokens);
              const int64_t k_tiles = (k + kLinearTcTileK - 1) / kLinearTcTileK;
              EXPECT_EQ(p.k_warps, 0);
              EXPECT_EQ(p.tokens, tokens);
              EXPECT_EQ(p.grid_x, (n + kLinearTcTileN - 1) / kLinearTcTileN);
              EXPECT_EQ(p.grid, tiles * p.k_splits);
              EXPECT_GE(p.k_splits, 1);
              EXPECT_LE(p.k_splits, kLinearTcMaxSplits);
              EXPECT_GE(p.k_splits * p.k_tiles_per_split, k_tiles);  // every k tile in one part, no part empty
              EXPECT_LT((p.k_splits - 1) * p.k_tiles_per_split, k_tiles);
              if (tiles >= int64_t{prof.sms} * p.blocks_per_sm) EXPECT_EQ(p.k_splits, 1);  // the tiles fill the GPU
              EXPECT_EQ(p.workspace_bytes, p.k_splits > 1 ? p.k_splits * m * n * 4 : 0);
              EXPECT_EQ(p.smem_bytes, 3 * 64 * (tokens * 2 + (op == OpId::linear_w8a16 ? 128 : 64)));
              EXPECT_FALSE(p.smem_optin);
              continue;
            }
            EXPECT_EQ(p.tokens, static_cast<int>(m));
            EXPECT_EQ(p.vec, op == OpId::linear_w8a16 ? 16 : 32);
            EXPECT_EQ(p.out_rows, 4);
            const int64_t chunks = k / p.vec;
            // One warp when its lanes take fewer than kLinearGemvRingMinVecs chunks each, else from two.
            const int first = (chunks + 31) / 32 < kLinearGemvRingMinVecs ? 1 : 2;
            EXPECT_TRUE(p.k_warps == first || p.k_warps == 2 * first || p.k_warps == 4 * first ||
                        p.k_warps == 8 * first);
            EXPECT_EQ(p.block_threads, 32 * p.k_warps);
            EXPECT_LE(p.block_threads, kLinearMaxThreads);
            const int64_t blocks = (n + p.out_rows - 1) / p.out_rows * ((m + p.tokens - 1) / p.tokens);
            EXPECT_EQ(p.grid, blocks);
            EXPECT_EQ(p.grid_x, blocks);  // one-dimensional
            // Split-K grows only while the grid has fewer than half the resident warps, and never past one
            // warp-wide step per warp.
            const int64_t want = int64_t{prof.sms} * std::min({kLinearWarpsPerSm, prof.max_threads_per_sm / 32,
                                                               prof.regs_per_sm / (kLinearRegisters * 32)});
            if (p.k_warps > first) {
              EXPECT_LT(blocks * p.k_warps, want);
              EXPECT_LE(int64_t{p.k_warps} * 32, chunks);
            } else if (int64_t{p.k_warps} * 64 <= chunks && p.k_warps * 2 * 32 <= kLinearMaxThreads) {
              EXPECT_GE(blocks * p.k_warps * 2, want);  // it stopped because the grid holds half the warps
            }
            // Register prefetch, or on sm_80+ for long per-thread loops the cp.async ring, whose slots (4 rows x
            // 16 bytes a thread) the warps' partial sums reuse.
            const bool ring = prof.sm >= 80 && p.vecs_per_thread >= kLinearGemvRingMinVecs;
            EXPECT_EQ(p.vecs_per_thread, (chunks + 32 * p.k_warps - 1) / (32 * p.k_warps));
            EXPECT_EQ(p.stages, ring ? kLinearGemvRingStages : 0);
            EXPECT_EQ(p.smem_bytes, std::max(int64_t{p.stages} * 4 * p.block_threads * 16,
                                             int64_t{p.k_warps} * p.out_rows * p.tokens * 4));
            EXPECT_LE(p.smem_bytes, 48 * 1024);
            EXPECT_FALSE(p.smem_optin);
            EXPECT_GE(p.blocks_per_sm, 1);
            LaunchPlan bf;
            const Status sb = plan_op(prof, op, s, DType::bf16, &bf);
            EXPECT_EQ(sb.ok(), prof.bf16);
          }
  // The issue's decode layer on the H200: 2752 blocks of 4 rows fill the grid, so k is split only 2 ways; a narrow n
  // splits k 8 ways.
  const auto h200 = *find_profile("h200");
  OpShape s{1, 4096, 1, 16};
  s.out_features = 11008;
  LaunchPlan p;
  ASSERT_TRUE(plan_op(h200, OpId::linear_w8a16, s, DType::bf16, &p).ok());
  EXPECT_EQ(p.k_warps, 2);
  EXPECT_EQ(p.grid, 2752);
  EXPECT_NE(p.to_string().find("split-K 2"), std::string::npos) << p.to_string();
  s.out_features = 64;
  ASSERT_TRUE(plan_op(h200, OpId::linear_w8a16, s, DType::bf16, &p).ok());
  EXPECT_EQ(p.k_warps, 8);
  EXPECT_NE(p.to_string().find("split-K 8"), std::string::npos) << p.to_string();
  EXPECT_EQ(p.stages, 0);  // 1 chunk a thread: register prefetch
  // m1 n28672 k8192: INT8 weights, 8 chunks a thread: the ring (measured 61.2 vs 70.0 us).
  s = OpShape{1, 8192, 1, 16};
  s.out_features = 28672;
  ASSERT_TRUE(plan_op(h200, OpId::linear_w8a16, s, DType::bf16, &p).ok());
  EXPECT_EQ(p.vecs_per_thread, 8);
  EXPECT_EQ(p.stages, kLinearGemvRingStages);
  EXPECT_NE(p.to_string().find("cp.async ring of 3"), std::string::npos) << p.to_string();
  ASSERT_TRUE(plan_op(*find_profile("t4"), OpId::linear_w8a16, s, DType::f16, &p).ok());
  EXPECT_EQ(p.stages, 0);  // no cp.async on sm_75
  s.group = 128;           // INT4: the tensor-core GEMV, one token tile in batches of kLinearMmaGemvUnroll regions
  ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).ok());
  EXPECT_EQ(p.tokens, kLinearMmaGemvTokens);
  EXPECT_EQ(p.out_rows, kLinearMmaGemvRows);
  EXPECT_EQ(p.stages, kLinearMmaGemvUnroll);
  // Tensor cores from 3 tokens. m16 n4096 k11008 (W8A16, 3 resident blocks an SM): 32 tiles would idle 100 of the 132
  // SMs, so k (172 tiles of 64) is split 12 ways, 15 tiles a part, 384 blocks, one wave.
  s = OpShape{16, 11008, 1, 16};
  s.out_features = 4096;
  ASSERT_TRUE(plan_op(h200, OpId::linear_w8a16, s, DType::bf16, &p).ok());
  EXPECT_EQ(p.k_warps, 0);
  refine_linear_tc_splits(3, 16, 4096, 11008, &p);
  EXPECT_EQ(p.k_splits, 12);
  EXPECT_EQ(p.k_tiles_per_split, 15);
  EXPECT_EQ(p.grid, 32 * 12);
  EXPECT_EQ(p.workspace_bytes, 12 * 16 * 4096 * 4);
  EXPECT_NE(p.to_string().find("k split 12 ways"), std::string::npos) << p.to_string();
  // A grid that fills the GPU alone is not split (n28672: 224 tiles of 64 tokens, 2 resident blocks an SM).
  s = OpShape{64, 8192, 1, 16};
  s.out_features = 28672;
  ASSERT_TRUE(plan_op(h200, OpId::linear_w8a16, s, DType::bf16, &p).ok());
  refine_linear_tc_splits(1, 64, 28672, 8192, &p);
  EXPECT_EQ(p.k_splits, 1);
  EXPECT_EQ(p.workspace_bytes, 0);
  // Any m; f32 activations are refused.
  s = OpShape{1, 4096, 1, 16};
  s.out_features = 64;
  s.rows = 4096;
  ASSERT_TRUE(plan_op(h200, OpId::linear_w8a16, s, DType::f16, &p).ok());
  EXPECT_EQ(p.k_warps, 0);
  s.group = 128;
  ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::f16, &p).ok());
  EXPECT_EQ(p.k_warps, 0);
  s.group = 0;
  s.rows = 1;
  EXPECT_EQ(plan_op(h200, OpId::linear_w8a16, s, DType::f32, &p).code(), StatusCode::invalid_argument);
}

// KERNELKIT_TUNE gemv_mma=1: W4A16 and W8A16 up to 16 tokens (tiles of 8) on the tensor-core GEMV (16 rows a block
// with gemv_mma_mtiles=1, k split by warps over 32-byte regions: 64 INT4 or 32 INT8 values), groups of 32 too; 17
// tokens keep their plans; gemv_mma=2 to 32 tokens.
TEST(QuantPlanner, TensorCoreGemvUnderTheTuneSwitch) {
  const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", "gemv_mma=1,gemv_mma_mtiles=1");
  const DeviceProfile h200 = *find_profile("h200");  // a copy: the optional is a temporary
  OpShape s{1, 4096, 1, 16};
  s.out_features = 14336;
  s.group = 128;
  LaunchPlan p;
  for (int64_t m : {1, 2, 8, 9, 16}) {
    s.rows = m;
    ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).ok());
    EXPECT_EQ(p.tokens, m <= 8 ? 8 : 16);
    EXPECT_EQ(p.out_rows, kLinearMmaGemvRows);
    EXPECT_EQ(p.grid, 14336 / 16);
    // 896 blocks: one token tile takes kLinearMmaGemvOneTileWarps (blocks beyond one wave); two tiles the most warps
    // whose blocks stay resident (8 of 2 warps an SM at 128 registers hold them, 5 of 3 not).
    EXPECT_EQ(p.k_warps, m <= 8 ? kLinearMmaGemvOneTileWarps : 2);
    EXPECT_EQ(p.vecs_per_thread, 4096 / 64 / p.k_warps);
    EXPECT_EQ(p.smem_bytes, p.k_warps * 16 * p.tokens * 4);  // k_warps x 16 rows x tokens fp32 sums
    EXPECT_NE(p.to_string().find("mma.sync m16n8k16 over 64-weight regions"), std::string::npos) << p.to_string();
  }
  s.out_features = 5120;  // 320 blocks: 3 blocks of 5 warps an SM hold them, 2 of 6 not
  s.rows = 1;
  ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).ok());
  EXPECT_EQ(p.k_warps, 5);
  s.out_features = 11008;  // 688 blocks: one token tile's 4 warps (5 blocks of 3 an SM, 660, would not hold them)
  ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).ok());
  EXPECT_EQ(p.k_warps, kLinearMmaGemvOneTileWarps);
  s.rows = 9;  // two token tiles: the most warps whose blocks stay resident
  ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).ok());
  EXPECT_EQ(p.k_warps, 2);
  s.rows = 1;
  s.out_features = 4096;  // 256 blocks: 8 warps (the 256-thread cap)
  s.rows = 1;
  ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).ok());
  EXPECT_EQ(p.k_warps, 8);
  s.hidden = 256;  // 4 regions: one warp takes them all
  ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).ok());
  EXPECT_EQ(p.k_warps, 1);
  s.hidden = 4096;
  s.rows = 17;
  ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).ok());
  EXPECT_EQ(p.k_warps, 0);  // tensor-core tiles
  s.rows = 1;
  s.group = 32;
  ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).ok());
  EXPECT_EQ(p.tokens, kLinearMmaGemvTokens);
  s.hidden = 4064;  // half a region at the end: no INT4 layout (linear_weight_only refuses it first)
  EXPECT_EQ(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).code(), StatusCode::invalid_argument);
  s.hidden = 4096;
  s.group = 0;
  ASSERT_TRUE(plan_op(h200, OpId::linear_w8a16, s, DType::bf16, &p).ok());
  EXPECT_EQ(p.tokens, kLinearMmaGemvTokens);
  EXPECT_EQ(p.vec, 32);
  s.hidden = 4080;  // INT8 k a multiple of 16 but not of 32: the FMA GEMV
  ASSERT_TRUE(plan_op(h200, OpId::linear_w8a16, s, DType::bf16, &p).ok());
  EXPECT_EQ(p.tokens, 1);
  // linear_fp8's (fp8_gemv=2): 128-value regions, the last one partial (k 544: 5 regions, one warp's batch), made
  // over the W8A16 plan of the same shape (tensor-core tiles with k split over grid.z): no split of its own.
  s = OpShape{12, 544, 1, 16};
  s.out_features = 6144;
  ASSERT_TRUE(plan_op(h200, OpId::linear_w8a16, s, DType::bf16, &p).ok());
  refine_linear_tc_splits(1, 12, 6144, 544, &p);
  ASSERT_TRUE(detail::plan_mma_gemv(h200, 12, 6144, 544, 128, &p).ok());
  EXPECT_EQ(p.tokens, 16);
  EXPECT_EQ(p.grid, 6144 / 16);
  EXPECT_EQ(p.k_splits, 1);
  EXPECT_EQ(p.workspace_bytes, 0);
  EXPECT_EQ(p.k_warps, 1);
  EXPECT_EQ(p.vecs_per_thread, 5);

  // gemv_mma=2: the same GEMV to 32 tokens (m 17-32: four tiles of 8, batches of two regions); 33 tokens keep the
  // tensor-core tiles.
  const kernelkit::testing::ScopedEnv wide("KERNELKIT_TUNE", "gemv_mma=2,gemv_mma_mtiles=1");
  s = OpShape{1, 4096, 1, 16};
  s.out_features = 14336;
  s.group = 128;
  for (int64_t m : {16, 17, 32}) {
    s.rows = m;
    ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).ok());
    EXPECT_EQ(p.tokens, m <= 16 ? 16 : 32);
    EXPECT_EQ(p.k_warps, 2);
    EXPECT_EQ(p.vecs_per_thread, 4096 / 64 / 2);
    EXPECT_EQ(p.smem_bytes, 2 * 16 * p.tokens * 4);  // k_warps x 16 rows x tokens fp32 sums
  }
  s.out_features = 4096;  // 256 blocks
  s.hidden = 1024;        // 16 regions: 8 warps' batches of two, 4 warps' of four
  for (int64_t m : {16, 32}) {
    s.rows = m;
    ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).ok());
    EXPECT_EQ(p.k_warps, m == 32 ? 8 : 4) << m;
  }
  s.rows = 33;
  ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).ok());
  EXPECT_EQ(p.k_warps, 0);  // tensor-core tiles

  // gemv_mma=3: two tiles (m 9-16) in batches of two regions (the plan's stages), one and four tiles as in 2.
  const kernelkit::testing::ScopedEnv pairs("KERNELKIT_TUNE", "gemv_mma=3,gemv_mma_mtiles=1");
  for (int64_t m : {8, 9, 16, 32}) {
    s.rows = m;
    ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).ok());
    EXPECT_EQ(p.stages, m <= 8 ? 4 : 2) << m;
    EXPECT_EQ(p.k_warps, m <= 8 ? 4 : 8) << m;  // 16 regions: 4 warps' batches of four, 8 of two
    EXPECT_NE(p.to_string().find("batches of " + std::to_string(p.stages)), std::string::npos) << p.to_string();
  }

  // gemv_mma_mtiles=2 / 4: 32- or 64-row blocks, batches of mma_gemv_unroll / row tiles regions (at least one), for
  // INT4 with groups of 64 or more and at most 8 row tiles x token tiles.
  s = OpShape{16, 4096, 1, 16};
  s.out_features = 14336;
  s.group = 128;
  {
    const kernelkit::testing::ScopedEnv two("KERNELKIT_TUNE", "gemv_mma=3,gemv_mma_mtiles=2");
    ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).ok());
    EXPECT_EQ(p.out_rows, 32);
    EXPECT_EQ(p.grid, 14336 / 32);
    EXPECT_EQ(p.stages, 1);
    EXPECT_EQ(p.k_warps, 4);  // 448 blocks: 4 of 4 warps an SM (16 warps at 128 registers) hold them, 2 of 8 not
    EXPECT_EQ(p.smem_bytes, 4 * 32 * 16 * 4);
    s.rows = 32;
    ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).ok());
    EXPECT_EQ(p.tokens, 32);
    EXPECT_EQ(p.stages, 1);
    s.group = 32;
    EXPECT_EQ(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).code(), StatusCode::invalid_argument);
    s.group = 0;
    EXPECT_EQ(plan_op(h200, OpId::linear_w8a16, s, DType::bf16, &p).code(), StatusCode::invalid_argument);
    s.group = 128;
  }
  {
    const kernelkit::testing::ScopedEnv four("KERNELKIT_TUNE", "gemv_mma=3,gemv_mma_mtiles=4");
    s.rows = 1;
    ASSERT_TRUE(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).ok());
    EXPECT_EQ(p.out_rows, 64);
    EXPECT_EQ(p.stages, 1);
    s.rows = 17;  // four token tiles x four row tiles
    EXPECT_EQ(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).code(), StatusCode::invalid_argument);
  }
  const kernelkit::testing::ScopedEnv three("KERNELKIT_TUNE", "gemv_mma_mtiles=3");
  s.rows = 16;  // the tensor-core GEMV by default
  EXPECT_EQ(plan_op(h200, OpId::linear_w4a16, s, DType::bf16, &p).code(), StatusCode::invalid_argument);
}

// Every tensor-core GEMV plan, under every KERNELKIT_TUNE setting that makes one, is a form the launcher instantiated
// (kMmaGemvForms): W4A16 with groups of 128 and 32, W8A16, 1 to 32 tokens, 16-row blocks to 64.
TEST(QuantPlanner, TensorCoreGemvPlansAreInstantiatedForms) {
  const DeviceProfile h200 = *find_profile("h200");
  int checked = 0;
  for (const char* mma : {"", "gemv_mma=1", "gemv_mma=2", "gemv_mma=3"})
    for (const char* rows : {"", "gemv_mma_mtiles=1", "gemv_mma_mtiles=2", "gemv_mma_mtiles=4"}) {
      const std::string setting = std::string(mma) + (*mma && *rows ? "," : "") + rows;
      const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", setting.c_str());
      for (const auto& [op, group] :
           {std::pair{OpId::linear_w4a16, 128}, {OpId::linear_w4a16, 32}, {OpId::linear_w8a16, 0}})
        for (int64_t m = 1; m <= 32; ++m)
          for (int64_t n : {7, 4096, 28672}) {
            OpShape s{m, 4096, 1, 16};
            s.out_features = n;
            s.group = group;
            LaunchPlan p;
            if (!plan_op(h200, op, s, DType::bf16, &p).ok() || p.k_warps == 0 || p.tokens % kLinearMmaGemvTokens)
              continue;  // refused (a row-tile setting the form does not take), the tiles or the FMA GEMV
            EXPECT_GE(mma_gemv_form(p.out_rows, p.tokens, p.stages), 0) << setting << " " << p.to_string();
            ++checked;
          }
    }
  EXPECT_GT(checked, 1000);
}

// KERNELKIT_TUNE gemv_pdl=1: the GEMVs (FMA and tensor-core) launch as programmatic dependents on sm_90 profiles only;
// the tensor-core tiles (m >= kLinearTcMinM without the tensor-core GEMV) never do.
TEST(QuantPlanner, ProgrammaticGemvLaunchUnderTheTuneSwitch) {
  OpShape s{1, 5120, 1, 16};
  s.out_features = 13824;
  s.group = 128;
  LaunchPlan p;
  for (const char* setting : {"", "gemv_pdl=0", "gemv_pdl=1"}) {
    const kernelkit::testing::ScopedEnv tune("KERNELKIT_TUNE", setting);
    const bool on = std::string(setting) == "gemv_pdl=1" || (!*setting && kLinearGemvProgrammatic);
    for (const char* key : {"h100", "h200", "a100", "t4"})
      for (int64_t m : {1, 2, 16}) {
        s.rows = m;
        const DeviceProfile prof = *find_profile(key);
        ASSERT_TRUE(plan_op(prof, OpId::linear_w4a16, s, DType::f16, &p).ok()) << key << " m" << m;
        const bool gemv = p.k_warps > 0;
        EXPECT_EQ(p.programmatic, on && gemv && prof.sm >= 90) << setting << " " << key << " " << p.to_string();
        EXPECT_EQ(p.to_string().find("programmatic launch") != std::string::npos, p.programmatic);
      }
  }
  const kernelkit::testing::ScopedEnv bad("KERNELKIT_TUNE", "gemv_pdl=2");
  EXPECT_EQ(plan_op(*find_profile("h200"), OpId::linear_w4a16, s, DType::f16, &p).code(), StatusCode::invalid_argument);
}

TEST(QuantPlanner, QuantizerPlans) {
  for (const DeviceProfile& prof : profile_table()) {
    OpShape s{4096, 4096, 1, 16};
    s.group = 128;
    LaunchPlan p;
    ASSERT_TRUE(plan_op(prof, OpId::quantize_int4_groupwise, s, DType::f16, &p).ok()) << prof.key;
    EXPECT_EQ(p.block_threads, kElementwiseThreads);
    EXPECT_EQ(p.grid % prof.sms, 0) << prof.key;  // a full wave of blocks over 2M words
    ASSERT_TRUE(plan_op(prof, OpId::quantize_int8_per_channel, s, DType::f32, &p).ok());
    EXPECT_EQ(p.vec, 4);  // the row-norm split: 16-byte vectors
    EXPECT_FALSE(p.cached);
    s.hidden = 777;
    ASSERT_TRUE(plan_op(prof, OpId::quantize_per_token_int8, s, DType::f16, &p).ok());
    EXPECT_EQ(p.vec, 1);  // odd k: scalar
  }
}

// The quantizers' CUDA-only refusals, decided under a profile override before any device is needed.
TEST(QuantizeErrors, CudaRefusalsUnderAProfileOverride) {
  std::vector<uint16_t> w(2 * 136);
  std::vector<uint8_t> q(2 * 128);
  std::vector<float> s(4);
  const Device d = Device::cuda();
  setenv("KERNELKIT_PROFILE", "t4", 1);
  Status st = quantize_int8_per_channel(TensorView::contiguous(q.data(), DType::i8, {2, 128}, d),
                                        TensorView::contiguous(s.data(), DType::f32, {2}, d),
                                        TensorView::contiguous(w.data(), DType::bf16, {2, 128}, d));
  EXPECT_EQ(st.code(), StatusCode::unsupported);
  EXPECT_TRUE(has(st, "quantize_int8_per_channel: w dtype bf16 is not supported on profile t4")) << st.message();
  // FP8 output below sm_89: refused in every input dtype, saying what to use.
  for (const char* prof : {"t4", "a100"}) {
    setenv("KERNELKIT_PROFILE", prof, 1);
    st = quantize_per_token_fp8(TensorView::contiguous(q.data(), DType::f8e4m3, {2, 128}, d),
                                TensorView::contiguous(s.data(), DType::f32, {2}, d),
                                TensorView::contiguous(w.data(), DType::f16, {2, 128}, d));
    EXPECT_EQ(st.code(), StatusCode::unsupported) << prof;
    EXPECT_TRUE(has(st, "quantize_per_token_fp8: q dtype f8e4m3 is not supported on profile")) << st.message();
  }
  setenv("KERNELKIT_PROFILE", "h200", 1);
  // Rows 130 f16 apart (260 bytes): the INT4 kernel's 16-byte loads cannot serve them.
  std::vector<uint16_t> w16(16 * 130);
  std::vector<uint8_t> q16(16 * 64);
  std::vector<float> s16(16 * 2);
  st = quantize_int4_groupwise(TensorView::contiguous(q16.data(), DType::i4x2, {16, 64}, d),
                               TensorView::contiguous(s16.data(), DType::f32, {16, 2}, d),
                               TensorView::strided(w16.data(), DType::f16, {16, 128}, {130, 1}, d), 64);
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_TRUE(has(st, "must be 16-byte aligned, got 4-byte alignment")) << st.message();
  unsetenv("KERNELKIT_PROFILE");
}

// The GPU tests' harness, run with the CPU backend on both sides: its inputs, views, layout decoding and comparison
// hold together (a harness bug would otherwise first show on the GPU machine).
TEST(QuantHarness, SelfCheckOnTheCpuBackend) {
  for (DType dt : {DType::f16, DType::bf16})
    for (auto [bits, group, zeros, perm] : {std::tuple{8, 0, false, DType::f32}, std::tuple{4, 64, false, DType::f32},
                                            std::tuple{4, 128, false, DType::f32}, std::tuple{8, 32, false, DType::f32},
                                            std::tuple{8, 128, true, DType::f32}, std::tuple{4, 32, true, DType::f32},
                                            std::tuple{4, 128, true, DType::i32}, std::tuple{8, 64, false, DType::i64}})
      for (int64_t m : {1, 3})
        for (bool acc : {false, true}) {
          const int64_t n = bits == 4 ? 16 : 7;  // INT4: one row tile of the layout
          const kernelkit::testing::WeightOnlyCase c{dt,     bits,           group, m,   n,     256,
                                                     m == 1, m == 1 ? 0 : 8, 2,     acc, zeros, perm};
          const auto r = kernelkit::testing::run_weight_only_case_cuda(c, -1);
          ASSERT_TRUE(r.status.ok()) << c.name() << ": " << r.status.to_string();
          EXPECT_EQ(r.checked, m * n) << c.name();
          EXPECT_EQ(r.mismatches, 0) << c.name() << "\n" << r.detail;
      }
  // Every quantizer, the per-tensor ones static too, the per-token-group ones with column-major scales (ld 4 > 3
  // rows: the padding must compare equal, untouched on both sides), a block op with partial blocks.
  std::vector<kernelkit::testing::QuantizeCase> cases;
  for (OpId op : {OpId::quantize_int8_per_channel, OpId::quantize_per_token_int8, OpId::quantize_per_token_fp8,
                  OpId::quantize_int4_groupwise, OpId::quantize_per_tensor_int8, OpId::quantize_per_tensor_fp8,
                  OpId::quantize_per_token_group_int8, OpId::quantize_per_token_group_fp8,
                  OpId::quantize_blockwise_int8, OpId::quantize_blockwise_fp8})
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      const int group = detail::scale_span(op) == detail::ScaleSpan::group ? 64 : 0;
      cases.push_back({op, dt, op == OpId::quantize_int4_groupwise ? 16 : 3, 256, group, 8, 4});
      if (detail::scale_span(op) == detail::ScaleSpan::tensor) cases.push_back({op, dt, 3, 256, 0, 8, 4, true});
      if (group && op != OpId::quantize_int4_groupwise) cases.push_back({op, dt, 3, 256, 128, 0, 4, false, 4});
      if (detail::scale_span(op) == detail::ScaleSpan::block) cases.push_back({op, dt, 131, 129, 0, 3, 4});
    }
  for (const auto& c : cases) {
    const auto r = kernelkit::testing::run_quantize_case_cuda(c, -1);
    ASSERT_TRUE(r.status.ok()) << c.name() << ": " << r.status.to_string();
    EXPECT_GT(r.checked, 0);
    EXPECT_EQ(r.mismatches, 0) << c.name() << "\n" << r.detail;
  }
  // Without a GPU the CUDA side says so (and the GPU tests skip).
  const kernelkit::testing::WeightOnlyCase c{DType::f16, 8, 0, 1, 7, 128, true, 0, 1};
  if (cuda_device_count() == 0)
    EXPECT_EQ(kernelkit::testing::run_weight_only_case_cuda(c, 0).status.code(), StatusCode::no_device);
}

// linear_w8a8 on the CPU backend: a hand-computed case, the harness's exact-integer check on random inputs, and every
// bad input named.
TEST(W8A8, HandComputedAndHarness) {
  // xq = [[1, -2, 3, 0, ...]], qweight rows e_0 and (1, 1, 1, ...): sums 1 and 2; scales 0.5 x {2, 0.25}; bias 1.
  std::vector<int8_t> xq(16, 0), w(32, 0);
  xq[0] = 1, xq[1] = -2, xq[2] = 3;
  w[0] = 1;
  for (int j = 0; j < 16; ++j) w[16 + j] = 1;
  std::vector<float> sx = {0.5f}, sw = {2.0f, 0.25f};
  kernelkit::testing::HostBuffer bias(DType::f16, 2), o(DType::f16, 2);
  bias.set(0, 1.0), bias.set(1, 1.0);
  ASSERT_TRUE(linear_w8a8(TensorView::contiguous(o.data(), DType::f16, {1, 2}),
                          TensorView::contiguous(xq.data(), DType::i8, {1, 16}),
                          TensorView::contiguous(sx.data(), DType::f32, {1}),
                          TensorView::contiguous(w.data(), DType::i8, {2, 16}),
                          TensorView::contiguous(sw.data(), DType::f32, {2}),
                          TensorView::contiguous(bias.data(), DType::f16, {2}))
                  .ok());
  EXPECT_EQ(o.get(0), 1 * 0.5 * 2.0 + 1.0);   // 2
  EXPECT_EQ(o.get(1), 2 * 0.5 * 0.25 + 1.0);  // 1.25

  for (DType dt : {DType::f16, DType::bf16})
    for (int64_t m : {1, 5}) {
      const kernelkit::testing::W8A8Case c{dt, m, 9, 80, m == 1, m == 1 ? 0 : 16, 3};
      const auto r = kernelkit::testing::run_w8a8_case(c, -1);
      ASSERT_TRUE(r.status.ok()) << c.name() << ": " << r.status.to_string();
      EXPECT_EQ(r.checked, m * 9);
      EXPECT_EQ(r.mismatches, 0) << c.name() << "\n" << r.detail;
    }
  if (cuda_device_count() == 0)
    EXPECT_EQ(kernelkit::testing::run_w8a8_case({}, 0).status.code(), StatusCode::no_device);
}

TEST(W8A8, BadInputsAreRefusedWithTheirNames) {
  std::vector<int8_t> buf(4096);
  std::vector<float> f(64);
  kernelkit::testing::HostBuffer o(DType::f16, 64);
  auto i8 = [&](std::initializer_list<int64_t> s) { return TensorView::contiguous(buf.data(), DType::i8, s); };
  auto f32 = [&](std::initializer_list<int64_t> s) { return TensorView::contiguous(f.data(), DType::f32, s); };
  auto out = [&](std::initializer_list<int64_t> s, DType d = DType::f16) {
    return TensorView::contiguous(o.data(), d, s);
  };
  auto says = [](const Status& s, const std::string& text) {
    return s.code() == StatusCode::invalid_argument && s.message().find(text) != std::string::npos;
  };
  const auto xq = i8({2, 16}), sx = f32({2}), qw = i8({3, 16}), sw = f32({3});
  EXPECT_TRUE(
      says(linear_w8a8(out({2, 3}), i8({2, 24}), sx, i8({3, 24}), sw), "k = 24 must be a positive multiple of 16"));
  EXPECT_TRUE(says(linear_w8a8(out({2, 3}, DType::f32), xq, sx, qw, sw), "out dtype f32 is not supported"));
  EXPECT_TRUE(says(linear_w8a8(out({2, 3}), xq, f32({3}), qw, sw), "x_scales shape [3] must be [2]"));
  EXPECT_TRUE(says(linear_w8a8(out({2, 3}), xq, sx, i8({3, 32}), sw), "qweight shape [3, 32] must be [3, 16]"));
  EXPECT_TRUE(says(linear_w8a8(out({2, 3}), xq, sx, qw, sw, out({4})), "bias shape [4] must be [3]"));
  EXPECT_TRUE(says(linear_w8a8(out({2, 4}), xq, sx, qw, sw), "out shape [2, 4] must be [2, 3]"));
  EXPECT_TRUE(says(linear_w8a8(out({2, 3}), f32({2, 16}), sx, qw, sw), "xq dtype f32 must be i8"));
  // bf16 on the T4 profile: refused before any device is needed.
  setenv("KERNELKIT_PROFILE", "t4", 1);
  const Status s = linear_w8a8(
      TensorView::contiguous(o.data(), DType::bf16, {2, 3}, Device::cuda(0)),
      TensorView::contiguous(buf.data(), DType::i8, {2, 16}, Device::cuda(0)),
      TensorView::contiguous(f.data(), DType::f32, {2}, Device::cuda(0)),
      TensorView::contiguous(buf.data(), DType::i8, {3, 16}, Device::cuda(0)),
      TensorView::contiguous(f.data(), DType::f32, {3}, Device::cuda(0)));
  unsetenv("KERNELKIT_PROFILE");
  EXPECT_EQ(s.code(), StatusCode::unsupported) << s.to_string();
  EXPECT_NE(s.message().find("bf16"), std::string::npos) << s.to_string();
}

TEST(W8A8, PlanTilesFitEveryProfile) {
  for (const DeviceProfile& prof : profile_table()) {
    OpShape s{300, 4096, 1, 16};
    s.out_features = 1000;
    LaunchPlan p;
    ASSERT_TRUE(plan_op(prof, OpId::linear_w8a8, s, DType::f16, &p).ok()) << prof.key;
    EXPECT_EQ(p.grid_x, 8);          // ceil(1000 / 128)
    EXPECT_EQ(p.grid, 8 * 3);        // x ceil(300 / 128)
    EXPECT_EQ(p.smem_bytes, 49152);  // 3 stages x (128 + 128) rows x 64 bytes
    EXPECT_FALSE(p.smem_optin) << prof.key;
    EXPECT_GE(p.blocks_per_sm, 1);
  }
  OpShape s{256, 4096, 1, 16};
  s.out_features = 4096;
  EXPECT_EQ(op_bytes(OpId::linear_w8a8, s, DType::f16), 256ull * 4096 + 4096ull * 4096 + 4 * (256 + 4096) +
                                                            2 * (256ull * 4096 + 4096));
  EXPECT_DOUBLE_EQ(op_flops(OpId::linear_w8a8, s), 2.0 * 256 * 4096 * 4096);
  // More 128-token tiles than a grid's y dimension holds (65535): refused by the planner, not launched.
  LaunchPlan p;
  s.rows = int64_t{65535} * kW8A8TileM + 1;
  EXPECT_EQ(plan_op(*find_profile("h200"), OpId::linear_w8a8, s, DType::f16, &p).code(), StatusCode::unsupported);
  s.rows = int64_t{65535} * kW8A8TileM;
  EXPECT_TRUE(plan_op(*find_profile("h200"), OpId::linear_w8a8, s, DType::f16, &p).ok());
  EXPECT_EQ(p.grid / p.grid_x, 65535);
  s.rows = int64_t{65535} * kLinearTcTileM + 1;  // the weight-only tensor-core tiles: 64 tokens each
  EXPECT_EQ(plan_op(*find_profile("h200"), OpId::linear_w8a16, s, DType::f16, &p).code(), StatusCode::unsupported);
}

// linear_fp8 on the CPU backend: a hand-computed case (e4m3 codes of exact values), the harness on random codes with
// both scalings, and every bad input named; FP8 refused on the T4 and A100 profiles, saying what to use instead.
TEST(Fp8Linear, HandComputedAndHarness) {
  // xq = [[1.5, -2, 448, 0, ...]], qweight rows e_0 and all 0.25 (k 16): sums 1.5 and 0.25 (1.5 - 2 + 448) = 111.875;
  // per-tensor scales 0.5 and 2, bias 1.
  std::vector<uint8_t> xq(16, 0), w(32, 0);
  xq[0] = float_to_e4m3_bits(1.5f), xq[1] = float_to_e4m3_bits(-2.0f), xq[2] = float_to_e4m3_bits(448.0f);
  w[0] = float_to_e4m3_bits(1.0f);
  for (int j = 0; j < 16; ++j) w[16 + j] = float_to_e4m3_bits(0.25f);
  std::vector<float> sx = {0.5f}, sw = {2.0f};
  kernelkit::testing::HostBuffer bias(DType::bf16, 2), o(DType::bf16, 2);
  bias.set(0, 1.0), bias.set(1, 1.0);
  ASSERT_TRUE(linear_fp8(TensorView::contiguous(o.data(), DType::bf16, {1, 2}),
                         TensorView::contiguous(xq.data(), DType::f8e4m3, {1, 16}),
                         TensorView::contiguous(sx.data(), DType::f32, {1}),
                         TensorView::contiguous(w.data(), DType::f8e4m3, {2, 16}),
                         TensorView::contiguous(sw.data(), DType::f32, {1}),
                         TensorView::contiguous(bias.data(), DType::bf16, {2}))
                  .ok());
  EXPECT_EQ(o.get(0), 1.5 * 0.5 * 2.0 + 1.0);  // 2.5
  EXPECT_EQ(o.get(1), 113.0);                  // 112.875 rounded to bf16's 8 significant bits
  // accumulate: out's value joins the sum before the one rounding: 112.875 - 100 = 12.875 (exact in bf16), where
  // rounding first would give 113 - 100 = 13.
  o.set(0, 0.25), o.set(1, -100.0);
  ASSERT_TRUE(linear_fp8(TensorView::contiguous(o.data(), DType::bf16, {1, 2}),
                         TensorView::contiguous(xq.data(), DType::f8e4m3, {1, 16}),
                         TensorView::contiguous(sx.data(), DType::f32, {1}),
                         TensorView::contiguous(w.data(), DType::f8e4m3, {2, 16}),
                         TensorView::contiguous(sw.data(), DType::f32, {1}),
                         TensorView::contiguous(bias.data(), DType::bf16, {2}), nullptr, false, /*accumulate=*/true)
                  .ok());
  EXPECT_EQ(o.get(0), 2.75);
  EXPECT_EQ(o.get(1), 12.875);
  for (DType dt : {DType::f16, DType::bf16})
    for (int64_t m : {1, 5})
      for (bool per_tensor : {false, true})
        for (bool accumulate : {false, true}) {
          kernelkit::testing::W8A8Case c{dt, m, 9, 80, m == 1, m == 1 ? 0 : 16, 3, OpId::linear_fp8, per_tensor};
          c.accumulate = accumulate;
          const auto r = kernelkit::testing::run_w8a8_case(c, -1);
          ASSERT_TRUE(r.status.ok()) << c.name() << ": " << r.status.to_string();
          EXPECT_EQ(r.checked, m * 9);
          EXPECT_EQ(r.mismatches, 0) << c.name() << "\n" << r.detail;
        }
}

TEST(Fp8Linear, BadInputsAreRefusedWithTheirNames) {
  std::vector<uint8_t> buf(4096);
  std::vector<float> f(64);
  kernelkit::testing::HostBuffer o(DType::bf16, 64);
  auto f8 = [&](std::initializer_list<int64_t> s, Device d = Device::cpu()) {
    return TensorView::contiguous(buf.data(), DType::f8e4m3, s, d);
  };
  auto f32 = [&](std::initializer_list<int64_t> s, Device d = Device::cpu()) {
    return TensorView::contiguous(f.data(), DType::f32, s, d);
  };
  auto out = [&](std::initializer_list<int64_t> s, DType dt = DType::bf16, Device d = Device::cpu()) {
    return TensorView::contiguous(o.data(), dt, s, d);
  };
  auto says = [](const Status& s, const std::string& text) {
    return s.code() == StatusCode::invalid_argument && s.message().find(text) != std::string::npos;
  };
  const auto xq = f8({2, 16}), sx = f32({2}), qw = f8({3, 16}), sw = f32({3});
  EXPECT_TRUE(
      says(linear_fp8(out({2, 3}), f8({2, 24}), sx, f8({3, 24}), sw), "k = 24 must be a positive multiple of 16"));
  EXPECT_TRUE(says(linear_fp8(out({2, 3}, DType::f32), xq, sx, qw, sw), "out dtype f32 is not supported"));
  EXPECT_TRUE(says(linear_fp8(out({2, 3}), xq, f32({1}), qw, sw),
                   "linear_fp8: x_scales and w_scales must be both [1] (per tensor), [m] and [n] = [2] and [3]"));
  EXPECT_TRUE(says(linear_fp8(out({2, 3}), xq, sx, f8({3, 32}), sw), "qweight shape [3, 32] must be [3, 16]"));
  EXPECT_TRUE(says(linear_fp8(out({2, 3}), xq, sx, qw, sw, out({4})), "bias shape [4] must be [3]"));
  EXPECT_TRUE(says(linear_fp8(out({2, 4}), xq, sx, qw, sw), "out shape [2, 4] must be [2, 3]"));
  EXPECT_TRUE(says(linear_fp8(out({2, 3}), TensorView::contiguous(buf.data(), DType::i8, {2, 16}), sx, qw, sw),
                   "xq dtype i8 must be f8e4m3"));
  EXPECT_TRUE(
      says(linear_fp8(out({2, 3}), xq, f32({1}), qw, f32({1}), out({3}, DType::f16)), "bias dtype f16 must be bf16"));
  // CUDA tensors whose out rows are 3 bf16 (6 bytes) apart: cuBLASLt's FP8 kernels need 16-byte rows.
  setenv("KERNELKIT_PROFILE", "h200", 1);
  const Device d = Device::cuda(0);
  Status st = linear_fp8(out({2, 3}, DType::bf16, d), f8({2, 16}, d), f32({2}, d), f8({3, 16}, d), f32({3}, d));
  EXPECT_TRUE(says(st, "out's pointer and row stride must be 16-byte aligned")) << st.to_string();
  // FP8 below sm_89: refused in both output dtypes, naming what to use instead.
  for (const char* prof : {"t4", "a100"}) {
    setenv("KERNELKIT_PROFILE", prof, 1);
    st = linear_fp8(out({2, 8}, DType::f16, d), f8({2, 16}, d), f32({2}, d), f8({8, 16}, d), f32({8}, d));
    EXPECT_EQ(st.code(), StatusCode::unsupported) << prof;
    EXPECT_TRUE(has(st, "linear_fp8: xq dtype f8e4m3 is not supported on profile")) << st.message();
    EXPECT_TRUE(has(st, "linear_w8a8")) << st.message();
    EXPECT_EQ(plan_linear(prof, OpId::linear_fp8), StatusCode::unsupported);
  }
  unsetenv("KERNELKIT_PROFILE");
  const OpShape s = linear_shape(16, 4096, 4096);
  expect_library_plan("h200", OpId::linear_fp8, s);
  EXPECT_EQ(op_bytes(OpId::linear_fp8, s, DType::bf16),
            16ull * 4096 + 4096ull * 4096 + 4 * (16 + 4096) + 2 * (16ull * 4096 + 4096));
}

// ---- linear_fp8 with block scales (linear_fp8_blockwise): 1 x 128 activation slices, 128 x 128 weight blocks.

namespace {

// e4m3 codes of exact values, [rows, cols] row major.
std::vector<uint8_t> e4m3_codes(int64_t rows, int64_t cols,
                                std::initializer_list<std::tuple<int64_t, int64_t, float>> v) {
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols), 0);
  for (const auto& [r, c, x] : v) codes[static_cast<size_t>(r * cols + c)] = float_to_e4m3_bits(x);
  return codes;
}

}  // namespace

// m 2, n 130 (two row blocks of the weight, the second partial), k 256 (two k blocks whose scales differ), by hand:
// x_scales {0.5, 2} and {0.25, 8}, w_scales {2, 0.125} and {4, 0.5}, bias 1, -1, 0.5 on rows 0-2:
//   out[0, 0] = 1.5 * 1 * 0.5 * 2 + 4 * 1 * 2 * 0.125 + 1 = 3.5
//   out[0, 1] = (1.5 - 2) 0.25 * 0.5 * 2 - 1 = -1.125
//   out[0, 2] = -2 * -1 * 0.5 * 2 + 0.5 = 2.5
//   out[0, 129] = 1.5 * 0.5 * 4 = 3
//   out[1, 0] = 0.5 * 1 * 0.25 * 2 + 1 = 1.25
//   out[1, 1] = 0.5 * 0.25 * 0.25 * 2 - 3 * 2 * 8 * 0.125 - 1 = -6.9375
//   out[1, 2] = 0.5
//   out[1, 129] = 0.5 * 0.25 * 4 - 3 * 8 * 0.5 = -11.5
// Scales taken from the wrong block, token or weight row give other values. Every layout the CPU backend takes:
// x_scales row major and token-major (ld 2 and padded to 4), w_scales with rows 2 and 4 apart.
TEST(Fp8BlockwiseLinear, TwoKBlocksByHandInEveryScaleLayout) {
  const int64_t m = 2, n = 130, k = 256;
  const std::vector<uint8_t> xq =
      e4m3_codes(m, k, {{0, 0, 1.5f}, {0, 1, -2.0f}, {0, 128, 4.0f}, {1, 0, 0.5f}, {1, 200, -3.0f}});
  std::vector<std::tuple<int64_t, int64_t, float>> wv = {{0, 0, 1.0f},   {0, 128, 1.0f}, {1, 200, 2.0f},  {2, 1, -1.0f},
                                                         {2, 255, 8.0f}, {129, 0, 1.0f}, {129, 200, 1.0f}};
  for (int64_t j = 0; j < 128; ++j) wv.emplace_back(1, j, 0.25f);
  std::vector<uint8_t> w(static_cast<size_t>(n * k), 0);
  for (const auto& [r, c, x] : wv) w[static_cast<size_t>(r * k + c)] = float_to_e4m3_bits(x);
  const float sx[2][2] = {{0.5f, 2.0f}, {0.25f, 8.0f}}, sw[2][2] = {{2.0f, 0.125f}, {4.0f, 0.5f}};
  kernelkit::testing::HostBuffer bias(DType::bf16, n);
  for (int64_t r = 0; r < n; ++r) bias.set(r, r == 0 ? 1.0 : r == 1 ? -1.0 : r == 2 ? 0.5 : 0.0);
  const std::pair<int64_t, int64_t> x_layouts[] = {{2, 1}, {1, 2}, {1, 4}};  // (token, block) strides
  for (const auto [token, block] : x_layouts)
    for (int64_t w_ld : {2, 4}) {
      SCOPED_TRACE(::testing::Message() << "x_scales strides (" << token << ", " << block << "), w_scales ld " << w_ld);
      std::vector<float> xs(8, -1.0f), ws(static_cast<size_t>(2 * w_ld), -1.0f);
      for (int t = 0; t < 2; ++t)
        for (int b = 0; b < 2; ++b) xs[static_cast<size_t>(t * token + b * block)] = sx[t][b];
      for (int i = 0; i < 2; ++i)
        for (int b = 0; b < 2; ++b) ws[static_cast<size_t>(i * w_ld + b)] = sw[i][b];
      kernelkit::testing::HostBuffer o(DType::bf16, m * n);
      ASSERT_TRUE(
          linear_fp8(mat(o.data(), DType::bf16, m, n), mat(const_cast<uint8_t*>(xq.data()), DType::f8e4m3, m, k),
                     TensorView::strided(xs.data(), DType::f32, {m, 2}, {token, block}),
                     mat(w.data(), DType::f8e4m3, n, k), TensorView::strided(ws.data(), DType::f32, {2, 2}, {w_ld, 1}),
                     TensorView::contiguous(bias.data(), DType::bf16, {n}))
              .ok());
      EXPECT_EQ(o.get(0), 3.5);
      EXPECT_EQ(o.get(1), -1.125);
      EXPECT_EQ(o.get(2), 2.5);
      EXPECT_EQ(o.get(129), 3.0);
      EXPECT_EQ(o.get(n + 0), 1.25);
      EXPECT_EQ(o.get(n + 1), -6.9375);
      EXPECT_EQ(o.get(n + 2), 0.5);
      EXPECT_EQ(o.get(n + 129), -11.5);
      EXPECT_EQ(o.get(n + 64), 0.0);  // a row of zeros and no bias
    }
}

// Random activations and weights through the quantizers (quantize_per_token_group_fp8 with column-major scales,
// quantize_blockwise_fp8 with padded scale rows: the layouts CUDA reads), then the CPU backend against a float64
// dequantize-then-matmul written here: out = sum_j (q_x[t, j] s_x[t, j / 128]) (q_w[r, j] s_w[r / 128, j / 128]) +
// bias, rounded once; n 300 leaves a partial last row block (44 rows). Both sides sum in fp64, so the table's bound.
TEST(Fp8BlockwiseLinear, ReferenceMatchesDequantizeThenMatmul) {
  const int64_t m = 5, n = 300, k = 384, kb = k / 128, nb = 3, w_ld = fp8_block_scales_ld(k);
  for (DType dt : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const auto x = random_matrix(DType::bf16, m, k, 3.0, 17), w = random_matrix(DType::bf16, n, k, 0.1, 18);
    std::vector<uint8_t> xq(static_cast<size_t>(m * k)), wq(static_cast<size_t>(n * k));
    std::vector<float> xs(static_cast<size_t>(kb * 8), -1.0f), ws(static_cast<size_t>(nb * w_ld), -1.0f);
    const TensorView xsv = TensorView::strided(xs.data(), DType::f32, {kb, m}, {8, 1});  // [k / 128, ld 8]
    ASSERT_TRUE(quantize_per_token_group_fp8(mat(xq.data(), DType::f8e4m3, m, k), xsv,
                                             mat(const_cast<void*>(x.data()), DType::bf16, m, k), 128, true)
                    .ok());
    const TensorView wsv = TensorView::strided(ws.data(), DType::f32, {nb, kb}, {w_ld, 1});
    ASSERT_TRUE(quantize_blockwise_fp8(mat(wq.data(), DType::f8e4m3, n, k), wsv,
                                       mat(const_cast<void*>(w.data()), DType::bf16, n, k))
                    .ok());
    EXPECT_EQ(ws[3], -1.0f);  // the padding of the scales' rows, untouched
    const auto bias = random_matrix(dt, 1, n, 0.5, 19);
    kernelkit::testing::HostBuffer o(dt, m * n);
    ASSERT_TRUE(linear_fp8(mat(o.data(), dt, m, n), mat(xq.data(), DType::f8e4m3, m, k),
                           TensorView::strided(xs.data(), DType::f32, {m, kb}, {1, 8}),
                           mat(wq.data(), DType::f8e4m3, n, k), wsv,
                           TensorView::contiguous(const_cast<void*>(bias.data()), dt, {n}))
                    .ok());
    const Tolerance tol = output_tolerance(dt);
    const auto e4m3 = [](uint8_t code) { return static_cast<double>(e4m3_bits_to_float(code)); };
    alignas(8) unsigned char rounded[8];
    for (int64_t t = 0; t < m; ++t)
      for (int64_t r = 0; r < n; ++r) {
        double want = bias.get(r);
        for (int64_t j = 0; j < k; ++j)
          want += e4m3(xq[static_cast<size_t>(t * k + j)]) * xs[static_cast<size_t>(j / 128 * 8 + t)] *
                  (e4m3(wq[static_cast<size_t>(r * k + j)]) * ws[static_cast<size_t>(r / 128 * w_ld + j / 128)]);
        store_from_double(rounded, dt, 0, want);
        want = load_as_double(rounded, dt, 0);
        ASSERT_LE(std::fabs(o.get(t * n + r) - want), tol.atol + tol.rtol * std::fabs(want)) << t << ", " << r;
      }
  }
}

// The case harness (run_w8a8_case: its own dot products) on the CPU backend: every e4m3 code, one and two row blocks,
// strided xq, both x_scales layouts and unpadded weight scales (with out += on the row-major ones).
TEST(Fp8BlockwiseLinear, HarnessOnTheCpuBackend) {
  for (DType dt : {DType::f16, DType::bf16})
    for (int64_t m : {1, 5})
      for (int64_t n : {8, 136})
        for (bool row_major : {false, true}) {
          kernelkit::testing::W8A8Case c{dt, m, n, 256, m == 1, m == 1 ? 0 : 16, 5, OpId::linear_fp8_blockwise};
          c.row_major_x_scales = row_major;
          c.w_scales_ld = row_major ? 2 : 0;
          c.accumulate = row_major;
          const auto r = kernelkit::testing::run_w8a8_case(c, -1);
          ASSERT_TRUE(r.status.ok()) << c.name() << ": " << r.status.to_string();
          EXPECT_EQ(r.checked, m * n);
          EXPECT_EQ(r.mismatches, 0) << c.name() << "\n" << r.detail;
        }
}

TEST(Fp8BlockwiseLinear, BadInputsAreRefusedWithTheirNames) {
  std::vector<uint8_t> buf(1 << 16);
  std::vector<float> f(64);
  kernelkit::testing::HostBuffer o(DType::bf16, 512);
  auto f8 = [&](std::initializer_list<int64_t> s, Device d = Device::cpu()) {
    return TensorView::contiguous(buf.data(), DType::f8e4m3, s, d);
  };
  auto f32 = [&](std::initializer_list<int64_t> s, std::initializer_list<int64_t> st, Device d = Device::cpu()) {
    return TensorView::strided(f.data(), DType::f32, s, st, d);
  };
  auto out = [&](int64_t m, int64_t n, Device d = Device::cpu(), DType dt = DType::bf16) {
    return TensorView::contiguous(o.data(), dt, {m, n}, d);
  };
  auto says = [](const Status& s, const std::string& text) {
    return s.code() == StatusCode::invalid_argument && s.message().find(text) != std::string::npos;
  };
  // m 2, n 8, k 256: x_scales [2, 2], w_scales [1, 2].
  const auto xq = f8({2, 256}), qw = f8({8, 256}), sx = f32({2, 2}, {1, 2}), sw = f32({1, 2}, {4, 1});
  EXPECT_TRUE(linear_fp8(out(2, 8), xq, sx, qw, sw).ok());
  EXPECT_TRUE(says(linear_fp8(out(2, 8), f8({2, 144}), f32({2, 2}, {2, 1}), f8({8, 144}), sw),
                   "linear_fp8_blockwise: k = 144 must be a multiple of 128"));
  EXPECT_TRUE(says(linear_fp8(out(2, 8), xq, f32({2, 3}, {3, 1}), qw, sw),
                   "linear_fp8_blockwise: x_scales shape [2, 3] must be [2, 2]"));
  EXPECT_TRUE(says(linear_fp8(out(2, 8), xq, TensorView::contiguous(f.data(), DType::f16, {2, 2}), qw, sw),
                   "linear_fp8_blockwise: x_scales dtype f16 must be f32"));
  EXPECT_TRUE(says(linear_fp8(out(2, 8), xq, f32({2, 2}, {4, 2}), qw, sw),
                   "linear_fp8_blockwise: x_scales strides (4, 2) must be (2, 1) (row major) or (1, ld) with ld >= m "
                   "= 2"));
  EXPECT_TRUE(says(linear_fp8(out(2, 8), xq, sx, qw, f32({2, 2}, {2, 1})),
                   "linear_fp8_blockwise: w_scales shape [2, 2] must be [1, 2]"));
  EXPECT_TRUE(says(linear_fp8(out(2, 130), xq, sx, f8({130, 256}), f32({2, 2}, {1, 1})),
                   "linear_fp8_blockwise: w_scales rows overlap (row stride 1 < 2)"));
  EXPECT_TRUE(says(linear_fp8(out(2, 8), xq, sx, qw, sw, std::nullopt, nullptr, true),
                   "linear_fp8_blockwise: fast_accumulation is not available with block scales"));
  EXPECT_TRUE(says(linear_fp8(out(2, 8), xq, sx, qw, f32({8}, {1})),
                   "linear_fp8: x_scales and w_scales must be both [1] (per tensor), [m] and [n] = [2] and [8] (per "
                   "token, per output channel), or both 2-D"));
  EXPECT_TRUE(says(linear_fp8(out(2, 8), xq, f32({2, 2}, {1, 2}, Device::cuda(0)), qw, sw),
                   "linear_fp8_blockwise: x_scales is on cuda:0 but the first tensor is on cpu"));

  // CUDA tensors (refused before a device is needed): cuBLASLt's scale layouts, its Hopper-only modes, FP8 profiles.
  // n 136: two row blocks, out's rows 16-byte aligned.
  const Device d = Device::cuda(0);
  const auto xq_d = f8({2, 256}, d), qw_d = f8({136, 256}, d);
  const auto sx_d = f32({2, 2}, {1, 2}, d), sw_d = f32({2, 2}, {4, 1}, d);
  setenv("KERNELKIT_PROFILE", "h200", 1);
  {
    Status st = linear_fp8(out(2, 136, d), xq_d, f32({2, 2}, {2, 1}, d), qw_d, sw_d);
    EXPECT_TRUE(says(st, "linear_fp8_blockwise: on CUDA, x_scales must be token-major with strides (1, m) = (1, 2)"))
        << st.to_string();
    st = linear_fp8(out(2, 136, d), xq_d, f32({2, 2}, {1, 4}, d), qw_d, sw_d);  // token-major, rows padded to 4
    EXPECT_TRUE(says(st, "got strides (1, 4)")) << st.to_string();
    st = linear_fp8(out(2, 136, d), xq_d, sx_d, qw_d, f32({2, 2}, {2, 1}, d));
    EXPECT_TRUE(says(st,
                     "linear_fp8_blockwise: on CUDA, w_scales' rows must be fp8_block_scales_ld(k) = 4 floats "
                     "apart"))
        << st.to_string();
    // One token and one row block have no stride to check; the layouts pass and only the missing GPU is left (on a
    // machine with one: that these host buffers are not device memory).
    const auto layouts_pass = [](const Status& s) {
      return s.code() != StatusCode::invalid_argument || has(s, "expected device memory");
    };
    st = linear_fp8(out(1, 8, d), f8({1, 256}, d), f32({1, 2}, {2, 1}, d), f8({8, 256}, d), f32({1, 2}, {2, 1}, d));
    EXPECT_TRUE(layouts_pass(st)) << st.to_string();
    st = linear_fp8(out(2, 136, d), xq_d, sx_d, qw_d, sw_d);
    EXPECT_TRUE(layouts_pass(st)) << st.to_string();
  }
  for (const char* prof : {"t4", "a100", "l4"}) {
    setenv("KERNELKIT_PROFILE", prof, 1);
    const Status st = linear_fp8(out(2, 136, d, DType::f16), xq_d, sx_d, qw_d, sw_d);
    EXPECT_EQ(st.code(), StatusCode::unsupported) << prof << ": " << st.to_string();
    EXPECT_TRUE(has(st, std::string(prof) == "l4"
                            ? "runs on Hopper (sm_90) only, not on profile l4 (sm_89)"
                            : "linear_fp8_blockwise: xq dtype f8e4m3 is not supported on profile"))
        << st.message();
    EXPECT_EQ(plan_linear(prof, OpId::linear_fp8_blockwise), StatusCode::unsupported);
  }
  unsetenv("KERNELKIT_PROFILE");
  const OpShape s = linear_shape(16, 4096, 4160);
  expect_library_plan("h100", OpId::linear_fp8_blockwise, s);
  // xq, qweight, the scales (16 x 32 of x, 33 x 32 of w: unpadded), out and bias.
  EXPECT_EQ(op_bytes(OpId::linear_fp8_blockwise, s, DType::bf16),
            16ull * 4096 + 4160ull * 4096 + 4 * 32 * (16 + 33) + 2 * (16ull * 4160 + 4160));
  EXPECT_DOUBLE_EQ(op_flops(OpId::linear_fp8_blockwise, s), 2.0 * 16 * 4160 * 4096);
}

TEST(QuantizeErrors, NonFiniteValuesAreRefusedNamingTheRow) {
  // An inf would make the row's scale inf (every q 0), a NaN its scale NaN: refused instead, naming where.
  const int64_t n = 16, k = 128;
  std::vector<float> w(n * k, 0.5f), s(n * 2);
  std::vector<int8_t> q(n * k);
  std::vector<uint8_t> q4(n * k / 2);
  w[static_cast<size_t>(2 * k + 17)] = INFINITY;
  Status st = quantize_int8_per_channel(mat(q.data(), DType::i8, n, k), vec(s.data(), DType::f32, n),
                                        mat(w.data(), DType::f32, n, k));
  EXPECT_TRUE(has(st, "quantize_int8_per_channel: w row 2 holds inf at column 17")) << st.message();
  w[static_cast<size_t>(2 * k + 17)] = 0.5f;
  w[static_cast<size_t>(k + 100)] = NAN;
  st = quantize_int4_groupwise(mat(q4.data(), DType::i4x2, n, k / 2), mat(s.data(), DType::f32, n, 2),
                               mat(w.data(), DType::f32, n, k), 64);
  EXPECT_TRUE(has(st, "quantize_int4_groupwise: w row 1 holds NaN at column 100")) << st.message();
  w[static_cast<size_t>(k + 100)] = -INFINITY;
  st = quantize_per_token_int8(mat(q.data(), DType::i8, n, k), vec(s.data(), DType::f32, n),
                               mat(w.data(), DType::f32, n, k));
  EXPECT_TRUE(has(st, "quantize_per_token_int8: x row 1 holds -inf at column 100")) << st.message();
}

// ---- Per-tensor, per-token-group and 128 x 128 block quantizers (FP8 e4m3 and INT8).

namespace {

// The e4m3 value of a code, and the code of an fp32 quotient as defined (nearest even, saturating at 448).
double e4m3(uint8_t code) { return e4m3_bits_to_float(code); }
std::vector<double> e4m3_values(const std::vector<uint8_t>& q) {
  std::vector<double> v;
  for (uint8_t b : q) v.push_back(e4m3(b));
  return v;
}

// The scale layout of a quantizer, written here from the public header: which span each element belongs to and where
// that span's scale is, for quantize_per_tensor_*, quantize_per_token_group_* (row or column major) and
// quantize_blockwise_*.
struct SpanLayout {
  OpId op;
  int64_t rows, k;
  int group = 0;
  int64_t ld = 0;  // column-major group scales: [k / group, ld]
  int64_t scale_of(int64_t r, int64_t j) const {
    if (op == OpId::quantize_per_tensor_int8 || op == OpId::quantize_per_tensor_fp8) return 0;
    if (op == OpId::quantize_blockwise_int8 || op == OpId::quantize_blockwise_fp8)
      return r / 128 * ((k + 127) / 128) + j / 128;
    return ld > 0 ? j / group * ld + r : r * (k / group) + j / group;
  }
  int64_t scale_count() const {
    if (op == OpId::quantize_per_tensor_int8 || op == OpId::quantize_per_tensor_fp8) return 1;
    if (op == OpId::quantize_blockwise_int8 || op == OpId::quantize_blockwise_fp8)
      return (rows + 127) / 128 * ((k + 127) / 128);
    return ld > 0 ? (k / group - 1) * ld + rows : rows * (k / group);
  }
  TensorView scales_view(float* p) const {
    if (op == OpId::quantize_per_tensor_int8 || op == OpId::quantize_per_tensor_fp8) return vec(p, DType::f32, 1);
    if (op == OpId::quantize_blockwise_int8 || op == OpId::quantize_blockwise_fp8)
      return mat(p, DType::f32, (rows + 127) / 128, (k + 127) / 128);
    if (ld > 0) return TensorView::strided(p, DType::f32, {k / group, rows}, {ld, 1});
    return mat(p, DType::f32, rows, k / group);
  }
};

bool is_fp8(OpId op) { return op_fp8_dtype(op).has_value(); }

Status run_span_quantizer(const SpanLayout& l, void* q, float* scales, const TensorView& x, bool static_scale = false) {
  const TensorView qv = mat(q, is_fp8(l.op) ? DType::f8e4m3 : DType::i8, l.rows, l.k);
  return kernelkit::testing::call_quantizer(l.op, qv, l.scales_view(scales), x, l.group, static_scale, l.ld > 0);
}

}  // namespace

// Hand-computed: max |x| = 28 gives s = 28 / 448 = 2^-4 exactly, so every quotient is exact: 1e-3 / s = 0.016 (as
// fp32) is e4m3's smallest normal 2^-6 after rounding (8.19 steps of 2^-9); INT8 s = 28 / 127.
TEST(PerTensorQuantize, DynamicByHand) {
  std::vector<float> x = {1, -2, 0.5f, 0, 28, -0.25f, 3, 1e-3f};
  std::vector<uint8_t> q(8);
  std::vector<float> s = {-1};
  ASSERT_TRUE(quantize_per_tensor_fp8(mat(q.data(), DType::f8e4m3, 2, 4), vec(s.data(), DType::f32, 1),
                                      mat(x.data(), DType::f32, 2, 4))
                  .ok());
  EXPECT_EQ(s[0], 0.0625f);
  EXPECT_EQ(e4m3_values(q), (std::vector<double>{16, -32, 8, 0, 448, -4, 48, 0.015625}));
  std::vector<int8_t> q8(8);
  ASSERT_TRUE(quantize_per_tensor_int8(mat(q8.data(), DType::i8, 2, 4), vec(s.data(), DType::f32, 1),
                                       mat(x.data(), DType::f32, 2, 4))
                  .ok());
  EXPECT_EQ(s[0], 28.0f / 127.0f);  // fp32 division, the reference's and the kernels' scale
  EXPECT_EQ(q8, (std::vector<int8_t>{5, -9, 2, 0, 127, -1, 14, 0}));  // 4.54, -9.07, 2.27, 0, 127, -1.13, 13.6, 0
  // An all-zero and an empty x: s = 0 (q = 0).
  std::vector<float> zeros(8, 0.0f);
  s[0] = -1;
  ASSERT_TRUE(quantize_per_tensor_fp8(mat(q.data(), DType::f8e4m3, 2, 4), vec(s.data(), DType::f32, 1),
                                      mat(zeros.data(), DType::f32, 2, 4))
                  .ok());
  EXPECT_EQ(s[0], 0.0f);
  EXPECT_EQ(e4m3_values(q), std::vector<double>(8, 0.0));
  s[0] = -1;
  ASSERT_TRUE(quantize_per_tensor_int8(mat(q8.data(), DType::i8, 0, 4), vec(s.data(), DType::f32, 1),
                                       mat(x.data(), DType::f32, 0, 4))
                  .ok());
  EXPECT_EQ(s[0], 0.0f);
}

// Static: the given scale is read and left as it is; values past 448 s (127 s) saturate; INT8 rounds half to even.
TEST(PerTensorQuantize, StaticByHand) {
  std::vector<float> x = {100, -100, 1, 1e-3f}, s = {0.125f};
  std::vector<uint8_t> q(4);
  ASSERT_TRUE(quantize_per_tensor_fp8(mat(q.data(), DType::f8e4m3, 1, 4), vec(s.data(), DType::f32, 1),
                                      mat(x.data(), DType::f32, 1, 4), true)
                  .ok());
  EXPECT_EQ(s[0], 0.125f);
  EXPECT_EQ(e4m3_values(q), (std::vector<double>{448, -448, 8, 0.0078125}));  // 0.008: 4.1 subnormal steps of 2^-9
  std::vector<float> x8 = {100, -100, 1.25f, 0.75f, 0.25f}, s8 = {0.5f};
  std::vector<int8_t> q8(5);
  ASSERT_TRUE(quantize_per_tensor_int8(mat(q8.data(), DType::i8, 1, 5), vec(s8.data(), DType::f32, 1),
                                       mat(x8.data(), DType::f32, 1, 5), true)
                  .ok());
  EXPECT_EQ(q8, (std::vector<int8_t>{127, -127, 2, 2, 0}));  // 2.5 -> 2, 1.5 -> 2, 0.5 -> 0
}

// Groups of 64 in rows of 128, both scale layouts: row 0 group 0 has max 56 (s = 2^-3: 1 -> 8), group 1 is all zero
// (s = 0, q = 0); row 1 group 0 max 7 (s = 2^-6: 0.5 -> 32), group 1 max 3.5 (s = 2^-7: -1 -> -128). Column-major
// scales with ld 4 leave the padding as it was.
TEST(PerTokenGroupQuantize, ByHandInBothScaleLayouts) {
  std::vector<float> x(256, 0.0f);
  for (int j = 0; j < 64; ++j) x[j] = 1, x[128 + j] = 0.5f, x[192 + j] = -1;
  x[3] = 56, x[128 + 5] = -7, x[192 + 6] = 3.5f;
  for (bool column_major : {false, true}) {
    SCOPED_TRACE(column_major);
    std::vector<uint8_t> q(256);
    std::vector<float> s(8, -1.0f);
    const TensorView sv =
        column_major ? TensorView::strided(s.data(), DType::f32, {2, 2}, {4, 1}) : mat(s.data(), DType::f32, 2, 2);
    ASSERT_TRUE(quantize_per_token_group_fp8(mat(q.data(), DType::f8e4m3, 2, 128), sv,
                                             mat(x.data(), DType::f32, 2, 128), 64, column_major)
                    .ok());
    const std::vector<float> want_rows = {0.125f, 0.0f, 0.015625f, 0.0078125f};  // s[t, g], row major
    for (int t = 0; t < 2; ++t)
      for (int g = 0; g < 2; ++g) EXPECT_EQ(s[column_major ? g * 4 + t : t * 2 + g], want_rows[t * 2 + g]) << t << g;
    if (column_major) {
      EXPECT_EQ(s[2], -1.0f);
      EXPECT_EQ(s[3], -1.0f);
      EXPECT_EQ(s[6], -1.0f);
      EXPECT_EQ(s[7], -1.0f);
    }
    const std::vector<double> v = e4m3_values(q);
    EXPECT_EQ(v[3], 448);
    EXPECT_EQ(v[0], 8);
    EXPECT_EQ(v[64], 0);
    EXPECT_EQ(v[127], 0);
    EXPECT_EQ(v[128 + 5], -448);
    EXPECT_EQ(v[128], 32);
    EXPECT_EQ(v[192 + 6], 448);
    EXPECT_EQ(v[192], -128);
  }
  std::vector<int8_t> q8(256);
  std::vector<float> s8(4);
  ASSERT_TRUE(quantize_per_token_group_int8(mat(q8.data(), DType::i8, 2, 128), mat(s8.data(), DType::f32, 2, 2),
                                            mat(x.data(), DType::f32, 2, 128), 64)
                  .ok());
  EXPECT_EQ(s8, (std::vector<float>{56.0f / 127, 0.0f, 7.0f / 127, 3.5f / 127}));
  EXPECT_EQ(q8[3], 127);
  EXPECT_EQ(q8[0], 2);  // 1 / (56 / 127) = 2.27
  EXPECT_EQ(q8[64], 0);
  EXPECT_EQ(q8[128], 9);    // 0.5 / (7 / 127) = 9.07
  EXPECT_EQ(q8[192], -36);  // -1 / (3.5 / 127) = -36.3
}

// w [130, 129]: four blocks, three of them partial. Block (0, 0) max 56 (s = 2^-3: 1 -> 8), block (0, 1) (column
// 128) max 14 (s = 2^-5: 2 -> 64), block (1, 0) (rows 128-129) all zero, block (1, 1) one column of -3.5 (s = 2^-7).
// The scales contiguous, and in rows padded to fp8_block_scales_ld(129) = 4 (linear_fp8's block scales on CUDA), the
// padding left as it was.
TEST(BlockwiseQuantize, PartialEdgeBlocksByHand) {
  const int64_t n = 130, k = 129;
  std::vector<float> w(n * k, 0.0f);
  for (int64_t r = 0; r < 128; ++r) {
    for (int64_t j = 0; j < 128; ++j) w[r * k + j] = 1;
    w[r * k + 128] = 2;
  }
  w[3 * k + 5] = 56, w[7 * k + 128] = 14, w[128 * k + 128] = w[129 * k + 128] = -3.5f;
  std::vector<uint8_t> q(n * k);
  ASSERT_EQ(fp8_block_scales_ld(k), 4);
  std::vector<float> padded(8, -1.0f);
  ASSERT_TRUE(quantize_blockwise_fp8(mat(q.data(), DType::f8e4m3, n, k),
                                     TensorView::strided(padded.data(), DType::f32, {2, 2}, {4, 1}),
                                     mat(w.data(), DType::f32, n, k))
                  .ok());
  EXPECT_EQ(padded, (std::vector<float>{0.125f, 0.03125f, -1.0f, -1.0f, 0.0f, 0.0078125f, -1.0f, -1.0f}));
  std::vector<float> s(4, -1.0f);
  ASSERT_TRUE(quantize_blockwise_fp8(mat(q.data(), DType::f8e4m3, n, k), mat(s.data(), DType::f32, 2, 2),
                                     mat(w.data(), DType::f32, n, k))
                  .ok());
  EXPECT_EQ(s, (std::vector<float>{0.125f, 0.03125f, 0.0f, 0.0078125f}));
  EXPECT_EQ(e4m3(q[0]), 8);
  EXPECT_EQ(e4m3(q[3 * k + 5]), 448);
  EXPECT_EQ(e4m3(q[127 * k + 127]), 8);
  EXPECT_EQ(e4m3(q[128]), 64);
  EXPECT_EQ(e4m3(q[7 * k + 128]), 448);
  EXPECT_EQ(e4m3(q[128 * k]), 0);
  EXPECT_EQ(e4m3(q[129 * k + 127]), 0);
  EXPECT_EQ(e4m3(q[128 * k + 128]), -448);
  EXPECT_EQ(e4m3(q[129 * k + 128]), -448);
  std::vector<int8_t> q8(n * k);
  ASSERT_TRUE(quantize_blockwise_int8(mat(q8.data(), DType::i8, n, k), mat(s.data(), DType::f32, 2, 2),
                                      mat(w.data(), DType::f32, n, k))
                  .ok());
  EXPECT_EQ(s, (std::vector<float>{56.0f / 127, 14.0f / 127, 0.0f, 3.5f / 127}));
  EXPECT_EQ(q8[3 * k + 5], 127);
  EXPECT_EQ(q8[0], 2);
  EXPECT_EQ(q8[128], 18);
  EXPECT_EQ(q8[128 * k + 128], -127);
}

// Every code of the span quantizers against the per-element definition, on random inputs of every dtype (strided
// rows) with a zero span, e4m3-subnormal quotients (every 5th value of the last row at 1e-5 of the rest) and, for a
// static scale, saturating values: s = fp32(max |x| over the element's span / qmax), from the layout alone;
// each code = the e4m3 bits of fp32(x / s) (nearest even, saturating), also no farther from x / s than any e4m3
// value, or round_half_even(fp32(x / s)) clamped to 127.
using SpanParam = std::tuple<OpId, DType>;
class SpanQuantizers : public ::testing::TestWithParam<SpanParam> {};

TEST_P(SpanQuantizers, CodesMatchThePerElementDefinition) {
  const auto [op, dt] = GetParam();
  const bool fp8 = is_fp8(op), tensor = op == OpId::quantize_per_tensor_int8 || op == OpId::quantize_per_tensor_fp8;
  const bool groups = op == OpId::quantize_per_token_group_int8 || op == OpId::quantize_per_token_group_fp8;
  const double qmax = fp8 ? 448 : 127;
  std::vector<double> grid;  // every finite e4m3 value
  for (int b = 0; b < 256; ++b)
    if ((b & 0x7f) != 0x7f) grid.push_back(e4m3(static_cast<uint8_t>(b)));
  struct Shape {
    int64_t rows, k;
    int group;
    int64_t ld;
    bool static_scale;
  };
  std::vector<Shape> shapes;
  if (tensor) shapes = {{5, 200, 0, 0, false}, {5, 200, 0, 0, true}, {1, 7, 0, 0, false}};
  if (groups) shapes = {{5, 256, 64, 0, false}, {5, 256, 128, 0, false}, {3, 384, 128, 4, false}};
  if (!tensor && !groups) shapes = {{130, 200, 0, 0, false}, {131, 129, 0, 0, false}, {129, 1, 0, 0, false}};
  for (const Shape& sh : shapes) {
    SCOPED_TRACE(std::to_string(sh.rows) + "x" + std::to_string(sh.k) + " g" + std::to_string(sh.group) + " ld" +
                 std::to_string(sh.ld) + (sh.static_scale ? " static" : ""));
    const SpanLayout l{op, sh.rows, sh.k, sh.group, sh.ld};
    const int64_t xs = sh.k + 3;
    auto x = random_matrix(dt, sh.rows, xs, 3.0, 31 + sh.rows * sh.k);
    // A zero span: row 0's first group (groups), the first block's rows 0..min(rows, 128) x columns < 128 (blocks),
    // row 0 (per tensor, which then still has other rows).
    for (int64_t r = 0; r < sh.rows; ++r)
      for (int64_t j = 0; j < sh.k; ++j) {
        const bool zero = groups   ? r == 0 && j < sh.group
                          : tensor ? r == 0
                                   : j < 128 && (sh.rows > 1 ? r < 128 : false);
        if (zero) x.set(r * xs + j, 0.0);
        if (r == sh.rows - 1 && j % 5 == 0) x.set(r * xs + j, x.get(r * xs + j) * 1e-5);
      }
    std::vector<uint8_t> q(sh.rows * sh.k);
    std::vector<float> s(l.scale_count(), -1.0f);
    if (sh.static_scale) s[0] = static_cast<float>(1.5 / qmax);  // |x| up to 3: past 1.5 saturates
    const TensorView xv = TensorView::strided(x.data(), dt, {sh.rows, sh.k}, {xs, 1});
    ASSERT_TRUE(run_span_quantizer(l, q.data(), s.data(), xv, sh.static_scale).ok());
    // The spans' max |x|, from the layout.
    std::vector<double> amax(s.size(), 0.0);
    for (int64_t r = 0; r < sh.rows; ++r)
      for (int64_t j = 0; j < sh.k; ++j) {
        double& m = amax[static_cast<size_t>(l.scale_of(r, j))];
        m = std::max(m, std::fabs(x.get(r * xs + j)));
      }
    int64_t zero_spans = 0, subnormal = 0, saturated = 0;
    for (int64_t r = 0; r < sh.rows; ++r)
      for (int64_t j = 0; j < sh.k; ++j) {
        const int64_t si = l.scale_of(r, j);
        const float sc = s[static_cast<size_t>(si)];
        if (!sh.static_scale) ASSERT_EQ(sc, static_cast<float>(amax[static_cast<size_t>(si)] / qmax)) << r << ", " << j;
        const float quotient = sc == 0 ? 0.0f : static_cast<float>(x.get(r * xs + j) / sc);
        const uint8_t code = q[static_cast<size_t>(r * sh.k + j)];
        zero_spans += sc == 0;
        if (fp8) {
          ASSERT_EQ(code, float_to_e4m3_bits(quotient, true)) << r << ", " << j << ": " << quotient;
          const double got = e4m3(code), want = std::clamp<double>(quotient, -448, 448);
          for (double g : grid) ASSERT_LE(std::fabs(got - want), std::fabs(g - want)) << r << ", " << j;
          subnormal += got != 0 && std::fabs(got) < 0.015625;
          saturated += std::fabs(quotient) > 464;  // beyond the rounding of 448
        } else {
          ASSERT_EQ(static_cast<int8_t>(code), std::clamp(std::nearbyint(static_cast<double>(quotient)), -127.0, 127.0))
              << r << ", " << j << ": " << quotient;
          saturated += std::fabs(quotient) > 127.5;
        }
      }
    if (!tensor || sh.rows == 1) EXPECT_GT(zero_spans, 0);  // the zero span: s = 0, q = 0
    if (fp8 && sh.rows > 1 && sh.k > 5) EXPECT_GT(subnormal, 0);
    EXPECT_EQ(saturated > 0, sh.static_scale);
    if (sh.static_scale) EXPECT_EQ(s[0], static_cast<float>(1.5 / qmax));  // read, not written
  }
}

INSTANTIATE_TEST_SUITE_P(
    Ops, SpanQuantizers,
    ::testing::Combine(::testing::Values(OpId::quantize_per_tensor_int8, OpId::quantize_per_tensor_fp8,
                                         OpId::quantize_per_token_group_int8, OpId::quantize_per_token_group_fp8,
                                         OpId::quantize_blockwise_int8, OpId::quantize_blockwise_fp8),
                       ::testing::Values(DType::f32, DType::f16, DType::bf16)));

TEST(SpanQuantizeErrors, BadInputsNameTheArgument) {
  const int64_t m = 2, k = 128;
  std::vector<float> x(m * k, 0.5f), s(16, 1.0f);
  std::vector<uint8_t> q(m * k + 16);
  std::vector<uint16_t> h(m * k);
  const TensorView xv = mat(x.data(), DType::f32, m, k), qv = mat(q.data(), DType::f8e4m3, m, k),
                   q8 = mat(q.data(), DType::i8, m, k), s1 = vec(s.data(), DType::f32, 1),
                   sg = mat(s.data(), DType::f32, m, 1);
  struct Case {
    Status s;
    const char* want;
  };
  const Case cases[] = {
      // dtypes
      {quantize_per_tensor_fp8(qv, s1, mat(q.data(), DType::i8, m, k)),
       "quantize_per_tensor_fp8: x dtype i8 is not supported (expected f32, f16 or bf16)"},
      {quantize_per_tensor_fp8(q8, s1, xv), "quantize_per_tensor_fp8: q dtype i8 must be f8e4m3"},
      {quantize_per_tensor_int8(qv, s1, xv), "quantize_per_tensor_int8: q dtype f8e4m3 must be i8"},
      {quantize_per_tensor_fp8(qv, vec(h.data(), DType::f16, 1), xv),
       "quantize_per_tensor_fp8: scale dtype f16 must be f32"},
      {quantize_per_token_group_fp8(qv, mat(h.data(), DType::bf16, m, 1), xv),
       "quantize_per_token_group_fp8: scales dtype bf16 must be f32"},
      {quantize_blockwise_fp8(q8, mat(s.data(), DType::f32, 1, 1), xv),
       "quantize_blockwise_fp8: qweight dtype i8 must be f8e4m3"},
      {quantize_blockwise_int8(q8, mat(s.data(), DType::f32, 1, 1), mat(q.data(), DType::f8e4m3, m, k)),
       "quantize_blockwise_int8: w dtype f8e4m3 is not supported"},
      // shapes
      {quantize_per_tensor_fp8(qv, vec(s.data(), DType::f32, 2), xv),
       "quantize_per_tensor_fp8: scale shape [2] must be [1]"},
      {quantize_per_tensor_fp8(qv, s1, TensorView::contiguous(x.data(), DType::f32, {m * k})),
       "quantize_per_tensor_fp8: x must be 2-D [rows, k]"},
      {quantize_per_tensor_int8(mat(q.data(), DType::i8, m, k - 1), s1, xv),
       "quantize_per_tensor_int8: q shape [2, 127] must be [2, 128]"},
      {quantize_per_token_group_fp8(qv, mat(s.data(), DType::f32, m, 2), xv),
       "quantize_per_token_group_fp8: scales shape [2, 2] must be [2, 1]"},
      {quantize_per_token_group_int8(q8, mat(s.data(), DType::f32, m, 1), xv, 128, true),
       "quantize_per_token_group_int8: scales shape [2, 1] must be [1, 2]"},
      {quantize_per_token_group_int8(q8, TensorView::strided(s.data(), DType::f32, {2, 2}, {1, 1}), xv, 64, true),
       "quantize_per_token_group_int8: scales rows overlap (row stride 1 < 2)"},
      {quantize_blockwise_fp8(qv, mat(s.data(), DType::f32, 1, 2), xv),
       "quantize_blockwise_fp8: scales shape [1, 2] must be [1, 1]"},
      {quantize_blockwise_fp8(mat(q.data(), DType::f8e4m3, 3, 129), mat(s.data(), DType::f32, 1, 1),
                              mat(x.data(), DType::f32, 3, 129)),
       "quantize_blockwise_fp8: scales shape [1, 1] must be [1, 2]"},
      // group size
      {quantize_per_token_group_fp8(qv, sg, xv, 96), "quantize_per_token_group_fp8: group must be 64 or 128, got 96"},
      {quantize_per_token_group_int8(mat(q.data(), DType::i8, 1, 192), mat(s.data(), DType::f32, 1, 1),
                                     mat(x.data(), DType::f32, 1, 192)),
       "quantize_per_token_group_int8: k = 192 must be a multiple of group = 128"},
      // overlap
      {quantize_per_tensor_fp8(mat(x.data(), DType::f8e4m3, m, k), s1, xv),
       "quantize_per_tensor_fp8: q partly overlaps x"},
      {quantize_per_tensor_fp8(qv, vec(q.data() + 4, DType::f32, 1), xv),
       "quantize_per_tensor_fp8: q partly overlaps scale"},
      {quantize_per_tensor_fp8(qv, vec(q.data() + 4, DType::f32, 1), xv, true),
       "quantize_per_tensor_fp8: q partly overlaps scale"},
      {quantize_per_token_group_fp8(qv, mat(x.data() + 8, DType::f32, m, 1), xv),
       "quantize_per_token_group_fp8: scales partly overlaps x"},
      {quantize_blockwise_int8(q8, mat(q.data() + 8, DType::f32, 1, 1), xv),
       "quantize_blockwise_int8: qweight partly overlaps scales"},
      // empty k
      {quantize_per_tensor_fp8(mat(q.data(), DType::f8e4m3, m, 0), s1, mat(x.data(), DType::f32, m, 0)),
       "quantize_per_tensor_fp8: x k (last dim) must be > 0, got 0"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(c.s.code(), StatusCode::invalid_argument) << c.want << ": " << c.s.to_string();
    EXPECT_TRUE(has(c.s, c.want)) << "want '" << c.want << "', got: " << c.s.message();
  }
  // Empty m: a no-op (nothing written), but for the dynamic per-tensor scale, which is 0.
  EXPECT_TRUE(quantize_per_token_group_fp8(mat(q.data(), DType::f8e4m3, 0, k), mat(s.data(), DType::f32, 0, 1),
                                           mat(x.data(), DType::f32, 0, k))
                  .ok());
  EXPECT_TRUE(quantize_blockwise_fp8(mat(q.data(), DType::f8e4m3, 0, k), mat(s.data(), DType::f32, 0, 1),
                                     mat(x.data(), DType::f32, 0, k))
                  .ok());
  EXPECT_EQ(s[0], 1.0f);
}

// Non-finite values are refused naming the row and column, and a static scale must be finite and > 0.
TEST(SpanQuantizeErrors, NonFiniteInputsAndBadStaticScales) {
  const int64_t m = 3, k = 128;
  std::vector<float> x(m * k, 0.5f), s(4, 1.0f);
  std::vector<uint8_t> q(m * k);
  x[static_cast<size_t>(2 * k + 17)] = NAN;
  const TensorView xv = mat(x.data(), DType::f32, m, k), qv = mat(q.data(), DType::f8e4m3, m, k);
  Status st = quantize_per_tensor_fp8(qv, vec(s.data(), DType::f32, 1), xv);
  EXPECT_TRUE(has(st, "quantize_per_tensor_fp8: x row 2 holds NaN at column 17")) << st.message();
  st = quantize_per_tensor_int8(mat(q.data(), DType::i8, m, k), vec(s.data(), DType::f32, 1), xv, true);
  EXPECT_TRUE(has(st, "quantize_per_tensor_int8: x row 2 holds NaN at column 17")) << st.message();
  x[static_cast<size_t>(2 * k + 17)] = INFINITY;
  st = quantize_per_token_group_fp8(qv, mat(s.data(), DType::f32, m, 1), xv);
  EXPECT_TRUE(has(st, "quantize_per_token_group_fp8: x row 2 holds inf at column 17")) << st.message();
  st = quantize_blockwise_fp8(qv, mat(s.data(), DType::f32, 1, 1), xv);
  EXPECT_TRUE(has(st, "quantize_blockwise_fp8: w row 2 holds inf at column 17")) << st.message();
  x[static_cast<size_t>(2 * k + 17)] = 0.5f;
  for (float bad : {0.0f, -0.5f, INFINITY, NAN}) {
    s[0] = bad;
    st = quantize_per_tensor_fp8(qv, vec(s.data(), DType::f32, 1), xv, true);
    EXPECT_EQ(st.code(), StatusCode::invalid_argument) << bad;
    EXPECT_TRUE(has(st, "quantize_per_tensor_fp8: scale = ")) << st.message();
    EXPECT_TRUE(has(st, " must be finite and > 0 (a static scale)")) << st.message();
  }
  s[0] = -0.5f;
  st = quantize_per_tensor_int8(mat(q.data(), DType::i8, m, k), vec(s.data(), DType::f32, 1), xv, true);
  EXPECT_TRUE(has(st, "quantize_per_tensor_int8: scale = -0.5 must be finite and > 0")) << st.message();
}

// CUDA-only refusals under a profile override, before any device is needed: FP8 below sm_89 and the group kernel's
// 16-byte accesses (bf16 on the T4 takes the path QuantizeErrors.CudaRefusalsUnderAProfileOverride checks).
TEST(SpanQuantizeErrors, CudaRefusalsUnderAProfileOverride) {
  std::vector<uint16_t> w(2 * 136);
  std::vector<uint8_t> q(2 * 128);
  std::vector<float> s(4);
  const Device d = Device::cuda();
  const TensorView xv = TensorView::contiguous(w.data(), DType::f16, {2, 128}, d),
                   qv = TensorView::contiguous(q.data(), DType::f8e4m3, {2, 128}, d);
  for (const char* prof : {"t4", "a100"}) {
    setenv("KERNELKIT_PROFILE", prof, 1);
    for (const Status& st :
         {quantize_per_tensor_fp8(qv, TensorView::contiguous(s.data(), DType::f32, {1}, d), xv),
          quantize_per_token_group_fp8(qv, TensorView::contiguous(s.data(), DType::f32, {2, 1}, d), xv),
          quantize_blockwise_fp8(qv, TensorView::contiguous(s.data(), DType::f32, {1, 1}, d), xv)}) {
      EXPECT_EQ(st.code(), StatusCode::unsupported) << prof << ": " << st.to_string();
      EXPECT_TRUE(has(st, "dtype f8e4m3 is not supported on profile")) << st.message();  // of q or qweight
      EXPECT_TRUE(has(st, "INT8")) << st.message();                                      // what to use instead
    }
  }
  setenv("KERNELKIT_PROFILE", "h200", 1);
  // Rows 130 f16 apart (260 bytes): the group kernel's 16-byte loads cannot serve them.
  const Status st = quantize_per_token_group_int8(TensorView::contiguous(q.data(), DType::i8, {2, 128}, d),
                                                  TensorView::contiguous(s.data(), DType::f32, {2, 2}, d),
                                                  TensorView::strided(w.data(), DType::f16, {2, 128}, {130, 1}, d), 64);
  unsetenv("KERNELKIT_PROFILE");
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_TRUE(has(st,
                  "quantize_per_token_group_int8: on CUDA, x's pointer and row stride and q's pointer must be "
                  "16-byte aligned, got 4-byte alignment"))
      << st.message();
}

TEST(SpanQuantizers, BytesAndPlans) {
  OpShape s{300, 1000, 1, 16};
  // x read once, the codes written once, the fp32 scales: one, 300 x 1000 / 128 (group 128 needs k % 128: 1024), the
  // 3 x 8 blocks.
  EXPECT_EQ(op_bytes(OpId::quantize_per_tensor_fp8, s, DType::bf16), 300ull * 1000 * 3 + 4);
  EXPECT_EQ(op_bytes(OpId::quantize_blockwise_int8, s, DType::f32), 300ull * 1000 * 5 + 3 * 8 * 4);
  s.hidden = 1024;
  s.group = 128;
  EXPECT_EQ(op_bytes(OpId::quantize_per_token_group_fp8, s, DType::f16), 300ull * 1024 * 3 + 300 * 8 * 4);
  EXPECT_EQ(op_fp8_dtype(OpId::quantize_blockwise_fp8), DType::f8e4m3);
  EXPECT_EQ(op_fp8_dtype(OpId::quantize_per_tensor_int8), std::nullopt);
  for (const DeviceProfile& prof : profile_table()) {
    SCOPED_TRACE(prof.key);
    LaunchPlan p;
    // Per tensor: the rows split of the per-token quantizers.
    OpShape rows{4096, 4096, 1, 16};
    ASSERT_TRUE(plan_op(prof, OpId::quantize_per_tensor_fp8, rows, DType::f16, &p).ok());
    LaunchPlan tok;
    ASSERT_TRUE(plan_op(prof, OpId::quantize_per_token_fp8, rows, DType::f16, &tok).ok());
    EXPECT_EQ(p.to_string().substr(p.to_string().find(':')), tok.to_string().substr(tok.to_string().find(':')));
    // Groups: one thread a word of 8, one wave at most.
    ASSERT_TRUE(plan_op(prof, OpId::quantize_per_token_group_int8, rows, DType::f16, &p).ok());
    EXPECT_EQ(p.vec, 8);
    EXPECT_EQ(p.block_threads, kElementwiseThreads);
    EXPECT_EQ(p.grid % prof.sms, 0);  // 2M words: a full wave
    // Blocks: 256 threads, vectors by the gcd rule (odd k: scalar), one block of threads a weight block, at most a
    // wave.
    OpShape w{300, 1000, 1, 16};
    ASSERT_TRUE(plan_op(prof, OpId::quantize_blockwise_fp8, w, DType::f16, &p).ok());
    EXPECT_EQ(p.vec, 8);
    EXPECT_EQ(p.block_threads, kElementwiseThreads);
    EXPECT_EQ(p.grid, std::min<int64_t>(3 * 8, int64_t{prof.sms} * p.blocks_per_sm));
    w.hidden = 1001;
    ASSERT_TRUE(plan_op(prof, OpId::quantize_blockwise_int8, w, DType::f32, &p).ok());
    EXPECT_EQ(p.vec, 1);
    w = OpShape{8192, 8192, 1, 16};
    ASSERT_TRUE(plan_op(prof, OpId::quantize_blockwise_int8, w, DType::f32, &p).ok());
    EXPECT_EQ(p.vec, 4);
    EXPECT_EQ(p.grid, int64_t{prof.sms} * p.blocks_per_sm);  // 4096 blocks: one wave looping over them
  }
}

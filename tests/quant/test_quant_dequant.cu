// The GEMV's dequantization bit tricks and the quantizers' rounding, run on the host from the same source the kernels
// use (src/ops/quant/quant_common.cuh; its device-only lines are fp16x2 forms of the same exact arithmetic). Checks
// that the magic numbers decode every INT8 byte and the INT4 fragment pairs of the kernel layout as pack_int4 wrote
// them.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/quant/quant.hpp"
#include "ops/quant/quant_common.cuh"
#include "kernelkit/ops.hpp"

using namespace kernelkit;

TEST(QuantDequant, Int8EveryByteInEveryPosition) {
  for (int pos = 0; pos < 4; ++pos)
    for (int b = 0; b < 256; ++b) {
      uint8_t bytes[4];
      for (int i = 0; i < 4; ++i) bytes[i] = static_cast<uint8_t>(i == pos ? b : (b * 37 + i * 101) & 0xFF);
      const uint32_t word = bytes[0] | bytes[1] << 8 | bytes[2] << 16 | static_cast<uint32_t>(bytes[3]) << 24;
      float f[4];
      kernelkit::cuda::dequant_i8x4(word, f);
      for (int i = 0; i < 4; ++i) ASSERT_EQ(f[i], static_cast<float>(static_cast<int8_t>(bytes[i]))) << pos << " " << b;
    }
}

TEST(QuantDequant, Int4WordsDecodeInKOrder) {
  // One 16 x 64 tile of the layout; the values under test are row 5's word 3 (k 24..31), the rest random.
  constexpr int64_t n = 16, k = 64, r = 5, i = 3;
  std::mt19937 rng(5);
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<int8_t> plain(n * k);
    for (auto& q : plain) q = static_cast<int8_t>(static_cast<int>(rng() % 16) - 8);
    int v[8];
    for (int j = 0; j < 8; ++j)
      plain[r * k + 8 * i + j] = static_cast<int8_t>(v[j] = trial < 128 ? (j == trial / 16 ? trial % 16 - 8 : 0)
                                                                        : static_cast<int>(rng() % 16) - 8);
    std::vector<uint8_t> packed(n * k / 2);
    ASSERT_TRUE(pack_int4(TensorView::contiguous(packed.data(), DType::i4x2, {n, k / 2}),
                          TensorView::contiguous(plain.data(), DType::i8, {n, k}))
                    .ok());
    const uint8_t* at = packed.data() + detail::int4_word_offset(r, i, k);
    const uint32_t word = at[0] | at[1] << 8 | at[2] << 16 | static_cast<uint32_t>(at[3]) << 24;
    for (int t = 0; t < 4; ++t) {  // the tensor-core fragment pairs: values 2t, 2t + 1, biased by 8
      const uint32_t bits = kernelkit::cuda::int4_pair_bits(word, t);
      ASSERT_EQ(bits & ~0x000F000Fu, 0u);
      ASSERT_EQ(static_cast<int>(bits & 0xF) - 8, v[2 * t]) << "trial " << trial << " lane " << t;
      ASSERT_EQ(static_cast<int>(bits >> 16) - 8, v[2 * t + 1]) << "trial " << trial << " lane " << t;
    }
    for (int j = 0; j < 8; ++j) {
      ASSERT_EQ(detail::int4_kernel_value(packed.data(), r, 8 * i + j, k), v[j]);  // the reference's decoding agrees
      ASSERT_EQ(detail::kInt4Nibble[j], kernelkit::cuda::int4_nibble(j));  // and the quantizer's nibble placement
    }
  }
}

// Zero points (w = s (q - zero)): the INT8 trick with the zero folded into the subtracted constant, exact for every
// code and every int8 zero.
TEST(QuantDequant, ZeroPointsAreSubtractedExactly) {
  std::mt19937 rng(17);
  for (int zero = -128; zero <= 127; ++zero)
    for (int trial = 0; trial < 64; ++trial) {
      const uint32_t word = rng();
      float f8[4];
      kernelkit::cuda::dequant_i8x4(word, f8, static_cast<float>(zero));
      for (int i = 0; i < 4; ++i)
        ASSERT_EQ(f8[i], static_cast<float>(static_cast<int8_t>(word >> (8 * i)) - zero)) << zero << " " << word;
    }
}

TEST(QuantDequant, RoundingIsHalfEvenOnTheFp32Quotient) {
  EXPECT_EQ(kernelkit::cuda::quantize_value(2.5f, 1.0f, 127), 2);
  EXPECT_EQ(kernelkit::cuda::quantize_value(3.5f, 1.0f, 127), 4);
  EXPECT_EQ(kernelkit::cuda::quantize_value(-2.5f, 1.0f, 127), -2);
  EXPECT_EQ(kernelkit::cuda::quantize_value(200.0f, 1.0f, 127), 127);
  EXPECT_EQ(kernelkit::cuda::quantize_value(-9.0f, 1.0f, 7), -7);
  EXPECT_EQ(kernelkit::cuda::quantize_value(5.0f, 0.0f, 7), 0);
  // The reference's formula: the fp64 quotient rounded once to fp32 is the IEEE fp32 quotient.
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> uw(-3.0f, 3.0f), us(1e-3f, 0.05f);
  for (int i = 0; i < 200000; ++i) {
    const float w = uw(rng), s = us(rng);
    const double ref = std::nearbyint(static_cast<double>(static_cast<float>(static_cast<double>(w) / s)));
    ASSERT_EQ(kernelkit::cuda::quantize_value(w, s, 127), static_cast<int>(std::fmax(-127.0, std::fmin(127.0, ref))))
        << w << " / " << s;
  }
}

// The FP8 quantizer's conversion (cuda_fp8.h's, here its host path) against the reference's float_to_e4m3_bits:
// every e4m3 code's value, the midpoints between neighbours (ties to even), values past 448 (saturated), and random
// quotients over the normal and subnormal range.
TEST(QuantDequant, E4m3RoundingMatchesTheReference) {
  EXPECT_EQ(kernelkit::cuda::quantize_e4m3(5.0f, 0.0f), 0);
  std::vector<float> values;
  for (int b = 0; b < 127; ++b) {  // the non-negative finite codes, in increasing order
    const float v = e4m3_bits_to_float(static_cast<uint8_t>(b)), next = e4m3_bits_to_float(static_cast<uint8_t>(b + 1));
    values.insert(values.end(), {v, -v});
    if (b + 1 < 127) values.insert(values.end(), {(v + next) / 2, -(v + next) / 2});
  }
  values.insert(values.end(), {449.0f, 464.0f, 1e6f, -500.0f});
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> e(-12.0f, 9.0f), sign(-1.0f, 1.0f);
  for (int i = 0; i < 200000; ++i) values.push_back(std::copysign(std::exp2(e(rng)), sign(rng)));
  for (float v : values) ASSERT_EQ(kernelkit::cuda::quantize_e4m3(v, 1.0f), float_to_e4m3_bits(v, true)) << v;
}

// The kernels' quotient (SpanScale: reciprocal and one FMA refinement) against IEEE division: the same fp32 quotient
// wherever it is normal, the same int8 and e4m3 codes everywhere, for 8-, 11- and 24-bit values w over scales from
// 2^-60 to 2^30 (quotients 2^-14 .. 2^10), and the edge scales (0, subnormal, huge) and values (inf, NaN).
TEST(QuantDequant, SpanScaleQuotientIsTheDivision) {
  std::mt19937_64 rng(13);
  std::uniform_int_distribution<int> exp_s(-60, 30), exp_q(-14, 10);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  auto round_bits = [](float v, int bits) {  // v with `bits` mantissa bits (bf16: 7, fp16: 10, fp32: 23)
    const int e = std::ilogb(v);
    return std::ldexp(std::nearbyint(std::ldexp(v, bits - e)), e - bits);
  };
  int64_t checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const float s = std::ldexp(mant(rng), exp_s(rng));
    const kernelkit::cuda::SpanScale scale(s);
    for (int bits : {7, 10, 23})
      for (int k = 0; k < 4; ++k) {
        float w = round_bits(std::ldexp(mant(rng), exp_q(rng)) * s, bits);
        if (k % 2) w = -w;
        const float want = w / s, got = scale.quotient(w);
        ASSERT_EQ(got, want) << w << " / " << s;
        ++checked;
      }
  }
  EXPECT_EQ(checked, 200000 * 12);
  // Edge cases: the codes agree (the quotient too where it is a normal float or an infinity).
  const float inf = INFINITY, nan = NAN;
  for (float s : {0.0f, 1e-40f, 0x1p-126f, 0x1p-125f, 3e-39f, 1.0f, 0x1p125f, 0x1p126f, 3e38f, inf})
    for (float w : {0.0f, -0.0f, 1e-45f, 1e-40f, 3.5f, -448.0f, 1e30f, 3e38f, -3e38f, inf, -inf, nan}) {
      const kernelkit::cuda::SpanScale scale(s);
      const float q = scale.quotient(w), want = s == 0.0f ? 0.0f : w / s;
      EXPECT_EQ(kernelkit::cuda::e4m3_code(q), kernelkit::cuda::quantize_e4m3(w, s)) << w << " / " << s;
      EXPECT_EQ(kernelkit::cuda::int_code(q, 127), kernelkit::cuda::quantize_value(w, s, 127)) << w << " / " << s;
      if (std::isinf(want) || std::fpclassify(want) == FP_NORMAL) EXPECT_EQ(q, want) << w << " / " << s;
    }
}

// Host fp16 / bf16 / FP8 conversions: exact on representable values, round-to-nearest-even, overflow and NaN handling.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernelkit/dtype.hpp"

using namespace kernelkit;

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::i4x2), 1u);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("half"), DType::f16);
  EXPECT_FALSE(parse_dtype("f64").has_value());
  EXPECT_EQ(dtype_name(DType::f16), "f16");
}

TEST(DType, HalfRoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_bits_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half_bits(f), h) << "half bits " << h;
  }
}

TEST(DType, HalfRoundsToNearestEven) {
  EXPECT_EQ(half_bits_to_float(float_to_half_bits(1.0f + 1.0f / 2048)), 1.0f);           // tie -> even (down)
  EXPECT_EQ(half_bits_to_float(float_to_half_bits(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);  // tie -> even (up)
  EXPECT_EQ(half_bits_to_float(float_to_half_bits(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(half_bits_to_float(float_to_half_bits(65520.0f))));  // rounds past the max: inf
  EXPECT_EQ(half_bits_to_float(float_to_half_bits(65519.0f)), 65504.0f);
  EXPECT_EQ(half_bits_to_float(float_to_half_bits(5.9604645e-8f)), 5.9604645e-8f);  // smallest subnormal
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, Bf16RoundTripAndRounding) {
  for (uint32_t b = 0; b < 0x10000; b += 7) {
    const float f = bf16_bits_to_float(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16_bits(f), b);
  }
  EXPECT_EQ(bf16_bits_to_float(float_to_bf16_bits(1.0f + 1.0f / 256)), 1.0f);  // tie -> even
  EXPECT_EQ(bf16_bits_to_float(float_to_bf16_bits(1.0f + 3.0f / 256)), 1.0f + 2.0f / 128);
}

TEST(DType, Int4PackedAccess) {
  uint8_t buf[2] = {0, 0};
  store_from_double(buf, DType::i4x2, 0, -3);
  store_from_double(buf, DType::i4x2, 1, 7);
  store_from_double(buf, DType::i4x2, 2, -8);
  EXPECT_EQ(load_as_double(buf, DType::i4x2, 0), -3);
  EXPECT_EQ(load_as_double(buf, DType::i4x2, 1), 7);
  EXPECT_EQ(load_as_double(buf, DType::i4x2, 2), -8);
}

// FP8 values written out by hand from the OCP definitions: e4m3 (bias 7, 3 mantissa bits, 0x7f / 0xff NaN, no inf)
// and e5m2 (bias 15, 2 mantissa bits, IEEE inf / NaN).
TEST(DType, Fp8DecodesEveryCodeByItsDefinition) {
  for (int c = 0; c < 256; ++c) {
    const auto b = static_cast<uint8_t>(c);
    const double sign = c & 0x80 ? -1.0 : 1.0;
    {  // e4m3
      const int e = (c >> 3) & 0xf, m = c & 7;
      const float got = e4m3_bits_to_float(b);
      if ((c & 0x7f) == 0x7f) {
        EXPECT_TRUE(std::isnan(got)) << c;
      } else {
        const double want = sign * (e == 0 ? m / 8.0 * std::ldexp(1.0, -6) : (1 + m / 8.0) * std::ldexp(1.0, e - 7));
        EXPECT_EQ(got, want) << c;
        EXPECT_EQ(float_to_e4m3_bits(got), b) << c;  // every code round-trips (-0 included)
      }
    }
    {  // e5m2
      const int e = (c >> 2) & 0x1f, m = c & 3;
      const float got = e5m2_bits_to_float(b);
      if (e == 31) {
        EXPECT_TRUE(m ? std::isnan(got) : std::isinf(got) && (got < 0) == (sign < 0)) << c;
        if (!m) EXPECT_EQ(float_to_e5m2_bits(got), b) << c;
      } else {
        const double want = sign * (e == 0 ? m / 4.0 * std::ldexp(1.0, -14) : (1 + m / 4.0) * std::ldexp(1.0, e - 15));
        EXPECT_EQ(got, want) << c;
        EXPECT_EQ(float_to_e5m2_bits(got), b) << c;
      }
    }
  }
  EXPECT_EQ(e4m3_bits_to_float(0x7e), kE4m3Max);
  EXPECT_EQ(e5m2_bits_to_float(0x7b), kE5m2Max);
}

TEST(DType, Fp8RoundsToNearestEvenAndOverflowsAsPyTorch) {
  // e4m3 near 1: spacing 1/8; 1 + 1/16 is a tie between 1 (even mantissa 0) and 1.125 (odd): 1.
  EXPECT_EQ(e4m3_bits_to_float(float_to_e4m3_bits(1.0625f)), 1.0f);
  EXPECT_EQ(e4m3_bits_to_float(float_to_e4m3_bits(1.1875f)), 1.25f);  // tie between 1.125 (odd) and 1.25 (even)
  EXPECT_EQ(e4m3_bits_to_float(float_to_e4m3_bits(1.07f)), 1.125f);
  // Subnormals: spacing 2^-9; half of it rounds to 0 (even), a bit more to 2^-9; the largest subnormal carries into
  // the smallest normal 2^-6.
  EXPECT_EQ(float_to_e4m3_bits(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(float_to_e4m3_bits(std::ldexp(1.1f, -10)), 0x01);
  EXPECT_EQ(float_to_e4m3_bits(std::ldexp(15.0f, -10)), 0x08);  // 7.5 x 2^-9: tie between 7 and 8 units: 8 = 2^-6
  // Overflow: 448 is the largest; 464 is the tie between 448 (even) and 480 (not a value): 448; above it NaN, or 448
  // saturated; inf alike.
  EXPECT_EQ(float_to_e4m3_bits(464.0f), 0x7e);
  EXPECT_EQ(float_to_e4m3_bits(465.0f), 0x7f);
  EXPECT_EQ(float_to_e4m3_bits(-1e6f), 0xff);
  EXPECT_EQ(float_to_e4m3_bits(-1e6f, true), 0xfe);
  EXPECT_EQ(float_to_e4m3_bits(std::numeric_limits<float>::infinity(), true), 0x7e);
  EXPECT_EQ(float_to_e4m3_bits(std::nanf("")) & 0x7f, 0x7f);
  // e5m2: 57344 the largest; 61440 the tie with 65536 (even): inf, or 57344 saturated.
  EXPECT_EQ(float_to_e5m2_bits(61439.0f), 0x7b);
  EXPECT_EQ(float_to_e5m2_bits(61440.0f), 0x7c);
  EXPECT_EQ(float_to_e5m2_bits(61440.0f, true), 0x7b);
  EXPECT_EQ(float_to_e5m2_bits(-std::numeric_limits<float>::infinity()), 0xfc);
  EXPECT_EQ(float_to_e5m2_bits(std::ldexp(1.0f, -17)), 0x00);  // half the smallest subnormal 2^-16: 0 (even)
  EXPECT_EQ(float_to_e5m2_bits(std::ldexp(3.0f, -17)), 0x02);  // 1.5 units: tie between 1 and 2: 2
  // The generic element access and the names.
  uint8_t buf[2] = {};
  store_from_double(buf, DType::f8e4m3, 0, -2.75);
  store_from_double(buf, DType::f8e5m2, 1, 0.3);
  EXPECT_EQ(load_as_double(buf, DType::f8e4m3, 0), -2.75);
  EXPECT_EQ(load_as_double(buf, DType::f8e5m2, 1), 0.3125);
  EXPECT_EQ(dtype_size(DType::f8e4m3), 1u);
  EXPECT_EQ(parse_dtype("float8_e4m3fn"), DType::f8e4m3);
  EXPECT_EQ(parse_dtype("e5m2"), DType::f8e5m2);
  EXPECT_EQ(dtype_name(DType::f8e5m2), "f8e5m2");
  EXPECT_FALSE(is_floating(DType::f8e4m3));
  EXPECT_TRUE(is_fp8(DType::f8e4m3));
}

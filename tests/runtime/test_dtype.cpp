// Host fp16/bf16 conversions: exact on representable values, round-to-nearest-even, overflow and NaN handling.
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

#include "kernelkit/dtype.hpp"

#include "runtime/text.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <ostream>
#include <string>

namespace kernelkit {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i8: return "i8";
    case DType::i32: return "i32";
    case DType::i4x2: return "i4x2";
    case DType::i64: return "i64";
    case DType::f8e4m3: return "f8e4m3";
    case DType::f8e5m2: return "f8e5m2";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

std::optional<DType> parse_dtype(std::string_view name) {
  const std::string n = detail::lower(name);
  if (n == "f32" || n == "fp32" || n == "float" || n == "float32") return DType::f32;
  if (n == "f16" || n == "fp16" || n == "half" || n == "float16") return DType::f16;
  if (n == "bf16" || n == "bfloat16") return DType::bf16;
  if (n == "i8" || n == "int8") return DType::i8;
  if (n == "i32" || n == "int32") return DType::i32;
  if (n == "i4x2" || n == "int4") return DType::i4x2;
  if (n == "i64" || n == "int64") return DType::i64;
  if (n == "f8e4m3" || n == "e4m3" || n == "fp8" || n == "float8_e4m3fn") return DType::f8e4m3;
  if (n == "f8e5m2" || n == "e5m2" || n == "float8_e5m2") return DType::f8e5m2;
  return std::nullopt;
}

// binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Rounds to nearest even, including into subnormals.
uint16_t float_to_half_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN (quiet) or inf
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: overflow to inf
  if (abs < 0x38800000u) {                          // below 2^-14: subnormal half (or zero)
    // value = abs_float; half subnormal unit is 2^-24. Round abs * 2^24 to nearest even integer.
    const float v = std::bit_cast<float>(abs) * 16777216.0f;  // exact: scaling by a power of two
    return sign | static_cast<uint16_t>(std::nearbyint(v));   // default rounding mode is nearest-even
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits.
  uint32_t m = abs - 0x38000000u;  // exponent - 112
  const uint32_t rem = m & 0x1fffu;
  m >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (m & 1u))) ++m;  // carry into the exponent is the right answer
  return sign | static_cast<uint16_t>(m);
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t float_to_bf16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

float bf16_bits_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

namespace {

// An FP8 format: `man` mantissa bits, exponent bias `bias`, the largest finite value's code (sign clear).
struct Fp8Format {
  int man, bias;
  uint8_t max_code;
};
constexpr Fp8Format kE4m3{3, 7, 0x7e}, kE5m2{2, 15, 0x7b};

float fp8_to_float(uint8_t b, const Fp8Format& fmt) {
  const int exp_bits = 7 - fmt.man;
  const int e = (b >> fmt.man) & ((1 << exp_bits) - 1), m = b & ((1 << fmt.man) - 1);
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (fmt.man == 3 && (b & 0x7f) == 0x7f) return std::nanf("");  // e4m3: the only NaN, no inf
  if (fmt.man == 2 && e == (1 << exp_bits) - 1) return m ? std::nanf("") : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), 1 - fmt.bias - fmt.man);  // subnormal
  return sign * std::ldexp(static_cast<float>((1 << fmt.man) + m), e - fmt.bias - fmt.man);
}

// Round-to-nearest-even onto the format's grid: the magnitude in units of its spacing at that binade (or the
// subnormal spacing), rounded by nearbyint (the default rounding mode), then re-encoded; a carry into the next binade
// is the right code.
uint8_t float_to_fp8(float f, const Fp8Format& fmt, bool saturate, uint8_t overflow) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  if (std::isnan(f)) return sign | 0x7f;
  const double a = std::fabs(static_cast<double>(f));
  const double max = static_cast<double>(fp8_to_float(fmt.max_code, fmt));
  int e = a > 0 ? std::ilogb(a) : 0;
  const int min_exp = 1 - fmt.bias;
  if (e < min_exp) e = min_exp;  // subnormal spacing below the smallest normal
  const double q = std::nearbyint(std::ldexp(a, fmt.man - e));  // in units of 2^(e - man)
  const double r = std::ldexp(q, e - fmt.man);
  if (r > max) return saturate ? (sign | fmt.max_code) : (sign | overflow);
  if (r == 0) return sign;
  const int re = std::ilogb(r);
  if (re < min_exp) return sign | static_cast<uint8_t>(std::ldexp(r, fmt.bias - 1 + fmt.man));  // subnormal code
  const int mant = static_cast<int>(std::ldexp(r, fmt.man - re)) - (1 << fmt.man);
  return sign | static_cast<uint8_t>(((re + fmt.bias) << fmt.man) | mant);
}

// Every code's value, decoded once: the references and the CPU backend read one per multiply-add (a linear_fp8 case
// of m 300, n 4160, k 1152 spent 80% of its reference time decoding).
std::array<float, 256> fp8_values(const Fp8Format& fmt) {
  std::array<float, 256> v;
  for (int b = 0; b < 256; ++b) v[b] = fp8_to_float(static_cast<uint8_t>(b), fmt);
  return v;
}

}  // namespace

uint8_t float_to_e4m3_bits(float f, bool saturate) { return float_to_fp8(f, kE4m3, saturate, 0x7f); }
float e4m3_bits_to_float(uint8_t b) {
  static const std::array<float, 256> values = fp8_values(kE4m3);
  return values[b];
}
uint8_t float_to_e5m2_bits(float f, bool saturate) {
  if (std::isinf(f) && !saturate) return (std::signbit(f) ? 0x80 : 0x00) | 0x7c;
  return float_to_fp8(f, kE5m2, saturate, 0x7c);
}
float e5m2_bits_to_float(uint8_t b) {
  static const std::array<float, 256> values = fp8_values(kE5m2);
  return values[b];
}

double load_as_double(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::f16: return half_bits_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::bf16: return bf16_bits_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::i8: return static_cast<const int8_t*>(base)[i];
    case DType::i32: return static_cast<const int32_t*>(base)[i];
    case DType::i64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DType::f8e4m3: return e4m3_bits_to_float(static_cast<const uint8_t*>(base)[i]);
    case DType::f8e5m2: return e5m2_bits_to_float(static_cast<const uint8_t*>(base)[i]);
    case DType::i4x2: {
      const uint8_t byte = static_cast<const uint8_t*>(base)[i / 2];
      const int nib = (i % 2 == 0) ? (byte & 0xf) : (byte >> 4);
      return nib >= 8 ? nib - 16 : nib;
    }
  }
  return 0;
}

double round_to_dtype(DType t, double v) {
  unsigned char bytes[8];
  store_from_double(bytes, t, 0, v);
  return load_as_double(bytes, t, 0);
}

void store_from_double(void* base, DType t, int64_t i, double v) {
  switch (t) {
    // float first, then to 16 bits: double rounding can differ from a direct round in rare ties, far inside tolerances.
    case DType::f32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DType::f16: static_cast<uint16_t*>(base)[i] = float_to_half_bits(static_cast<float>(v)); break;
    case DType::bf16: static_cast<uint16_t*>(base)[i] = float_to_bf16_bits(static_cast<float>(v)); break;
    case DType::i8: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(std::lrint(v)); break;
    case DType::i32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(std::llrint(v)); break;
    case DType::i64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(std::llrint(v)); break;
    case DType::f8e4m3: static_cast<uint8_t*>(base)[i] = float_to_e4m3_bits(static_cast<float>(v)); break;
    case DType::f8e5m2: static_cast<uint8_t*>(base)[i] = float_to_e5m2_bits(static_cast<float>(v)); break;
    case DType::i4x2: {
      auto* p = static_cast<uint8_t*>(base) + i / 2;
      const uint8_t nib = static_cast<uint8_t>(std::lrint(v)) & 0xf;
      *p = (i % 2 == 0) ? static_cast<uint8_t>((*p & 0xf0) | nib) : static_cast<uint8_t>((*p & 0x0f) | (nib << 4));
      break;
    }
  }
}

}  // namespace kernelkit

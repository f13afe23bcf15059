// Element types and the host-side conversions the CPU reference and the test harness use.
// The core never includes CUDA headers: fp16/bf16 are handled as raw 16-bit patterns here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string_view>

namespace kernelkit {

enum class DType : uint8_t {
  f32,
  f16,
  bf16,
  i8,
  i32,
  i4x2,  // two signed 4-bit values packed in one byte (low nibble first); reserved for quantization
  i64,   // positions and indices (PyTorch's default integer type)
  // FP8 (OCP formats; PyTorch's float8_e4m3fn and float8_e5m2): storage for Hopper's FP8 tensor cores (sm_89+,
  // DeviceProfile::fp8). e4m3: 4 exponent bits (bias 7), 3 mantissa bits, no inf, NaN 0x7f / 0xff, largest 448.
  // e5m2: 5 exponent bits (bias 15), 2 mantissa bits, IEEE inf and NaN, largest 57344.
  f8e4m3,
  f8e5m2,
};

// Bytes of one storage element (i4x2: one byte holds two values).
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i8: return 1;
    case DType::i32: return 4;
    case DType::i4x2: return 1;
    case DType::i64: return 8;
    case DType::f8e4m3: return 1;
    case DType::f8e5m2: return 1;
  }
  return 0;
}

// The compute dtypes of the float ops (FP8 is storage: is_fp8).
constexpr bool is_floating(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
constexpr bool is_fp8(DType t) { return t == DType::f8e4m3 || t == DType::f8e5m2; }
constexpr double kE4m3Max = 448.0;    // the largest finite f8e4m3
constexpr double kE5m2Max = 57344.0;  // the largest finite f8e5m2

std::string_view dtype_name(DType t);                     // "f32", "f16", "bf16", ...
std::ostream& operator<<(std::ostream& os, DType t);       // its dtype_name (also what GoogleTest prints)
std::optional<DType> parse_dtype(std::string_view name);  // also accepts "float16", "half", "bfloat16", "float32", "fp16"...

// IEEE binary16 and bfloat16 <-> float, round-to-nearest-even (NaN stays NaN, overflow goes to inf).
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t b);
// FP8 <-> float, round-to-nearest-even, subnormals included. Out of range: e4m3 (no inf) gives NaN as PyTorch's cast
// does, or +-448 with `saturate` (the quantizers' choice, CUDA's __NV_SATFINITE); e5m2 gives +-inf, or +-57344 with
// `saturate`. NaN stays NaN.
uint8_t float_to_e4m3_bits(float f, bool saturate = false);
float e4m3_bits_to_float(uint8_t b);
uint8_t float_to_e5m2_bits(float f, bool saturate = false);
float e5m2_bits_to_float(uint8_t b);

// Element access by dtype, for reference code and tests (slow, generic, exact for floats).
double load_as_double(const void* base, DType t, int64_t index);
void store_from_double(void* base, DType t, int64_t index, double v);  // rounds once to the dtype
double round_to_dtype(DType t, double v);  // v as store_from_double would store it, read back

}  // namespace kernelkit

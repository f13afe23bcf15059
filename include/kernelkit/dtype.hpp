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
  }
  return 0;
}

constexpr bool is_floating(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

std::string_view dtype_name(DType t);                     // "f32", "f16", "bf16", ...
std::ostream& operator<<(std::ostream& os, DType t);       // its dtype_name (also what GoogleTest prints)
std::optional<DType> parse_dtype(std::string_view name);  // also accepts "float16", "half", "bfloat16", "float32", "fp16"...

// IEEE binary16 and bfloat16 <-> float, round-to-nearest-even (NaN stays NaN, overflow goes to inf).
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t b);

// Element access by dtype, for reference code and tests (slow, generic, exact for floats).
double load_as_double(const void* base, DType t, int64_t index);
void store_from_double(void* base, DType t, int64_t index, double v);  // rounds once to the dtype

}  // namespace kernelkit

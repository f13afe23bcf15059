// Device helpers of the quantization family: the one rounding rule of every quantizer, the INT4 kernel layout, exact
// integer -> float dequantization without the quarter-rate I2F conversions, and streaming weight loads.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#if defined(__CUDACC__)
#include "kernels/common/device_check.cuh"
#endif

namespace kernelkit::cuda {

// The helpers below are also compiled for the host, where tests/quant/test_quant_dequant.cu checks them against the
// documented layout and the reference's rounding (the device paths differ only where marked, in exact arithmetic).

// The codes of a quotient q = w / s: round_half_even(q) clamped to [-qmax, qmax], or e4m3 bits rounded to nearest
// even and saturating at +-448 (the reference's float_to_e4m3_bits; sm_89+ convert in one instruction, older targets
// emulate: FP8 ops are refused on their profiles, but the kernels are compiled for every target).
__host__ __device__ __forceinline__ int int_code(float q, int qmax) {
  return static_cast<int>(fminf(fmaxf(rintf(q), -static_cast<float>(qmax)), static_cast<float>(qmax)));
}
__host__ __device__ __forceinline__ uint8_t e4m3_code(float q) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3));
}

// The code of w at scale s; s == 0 (an all-zero span) gives 0. `w / s` is an IEEE fp32 division (no fast math in
// this build), the rounding point the CPU reference mirrors, so both agree bit for bit.
__host__ __device__ __forceinline__ int quantize_value(float w, float s, int qmax) {
  return s == 0.0f ? 0 : int_code(w / s, qmax);
}
__host__ __device__ __forceinline__ uint8_t quantize_e4m3(float w, float s) {
  return e4m3_code(s == 0.0f ? 0.0f : w / s);
}

// A span's scale s with its reciprocal, for the quotients w / s of its values: the IEEE quotient's codes at a third
// of its instructions (per element, the division's Newton sequence and range check cost more than the rest of a
// 16-bit quantizer). q0 = w (1/s), then one FMA refinement q0 + (w - q0 s) (1/s): with 1/s correctly rounded this is
// Markstein's correctly rounded quotient wherever it is a normal float (below that every code is 0);
// tests/quant/test_quant_dequant.cu checks both against division. Scales whose reciprocal leaves the normal range
// divide, and s == 0 (an all-zero span) gives quotient 0.
struct SpanScale {
  float s, inv;
  bool refine;
  __host__ __device__ __forceinline__ explicit SpanScale(float scale)
      : s(scale), inv(1.0f / scale), refine(scale >= 0x1p-125f && scale <= 0x1p125f) {}
  __host__ __device__ __forceinline__ float quotient(float w) const {
    if (!refine) return s == 0.0f ? 0.0f : w / s;
#if defined(__CUDA_ARCH__)
    const float q0 = __fmul_rn(w, inv);  // not contracted into the FMA below
#else
    const float q0 = w * inv;
#endif
    // The refinement keeps q0's sign (a -0 would come back +0: e4m3 has both), and w = +-inf (under a static scale)
    // keeps q0's inf, not the NaN of inf - inf.
    const float q1 = fmaf(fmaf(-q0, s, w), inv, q0);
    return isfinite(q1) ? copysignf(q1, q0) : q0;
  }
};

#if defined(__CUDACC__)
// A static scale must be finite and > 0; the host cannot look without a synchronization, so the grid's first thread
// records a bad one (check_errors; the CPU backend refuses it: check_static_scale).
__device__ __forceinline__ void check_static_scale(detail::DeviceErrorRecord* err, OpId op, float s) {
  if (blockIdx.x == 0 && threadIdx.x == 0 && threadIdx.y == 0 && !(s > 0.0f && isfinite(s)))
    record_device_error(err, op, detail::DeviceCheck::static_scale, 0, -1, __float_as_uint(s), 0);
}

// max |v| kept as bits: for |v| >= 0 unsigned order is float order, and NaN (above 0x7f800000) ranks above inf, where
// fmaxf would skip a NaN. A non-finite span then has an inf max and an inf scale: no state beyond the max itself.
__device__ __forceinline__ unsigned abs_max_bits(unsigned bits, float v) {
  return max(bits, __float_as_uint(fabsf(v)));
}
__device__ __forceinline__ float nonfinite_as_inf(unsigned bits) {
  return bits >= 0x7f800000u ? INFINITY : __uint_as_float(bits);
}

// N values as 1-byte codes at scale s (kFp8: e4m3, else int8 with qmax 127), packed little-endian and stored as one
// access (N <= 8: at most a 64-bit store; dst aligned to N bytes).
template <bool kFp8, int N>
__device__ __forceinline__ void store_codes(int8_t* dst, const float* f, const SpanScale& s) {
  static_assert(N == 1 || N == 2 || N == 4 || N == 8, "one 8/16/32/64-bit store");
  uint64_t packed = 0;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const float q = s.quotient(f[j]);
    const uint8_t byte = kFp8 ? e4m3_code(q) : static_cast<uint8_t>(int_code(q, 127));
    packed |= static_cast<uint64_t>(byte) << (8 * j);
  }
  if constexpr (N == 8)
    *reinterpret_cast<uint64_t*>(dst) = packed;
  else if constexpr (N == 4)
    *reinterpret_cast<uint32_t*>(dst) = static_cast<uint32_t>(packed);
  else if constexpr (N == 2)
    *reinterpret_cast<uint16_t*>(dst) = static_cast<uint16_t>(packed);
  else
    *dst = static_cast<int8_t>(packed);
}
#endif

// Nibble position of value j (0..7) in a packed INT4 word of the kernel layout (ops.hpp): j / 2 + 4 * (j % 2).
__host__ __device__ __forceinline__ int int4_nibble(int j) { return (j >> 1) + 4 * (j & 1); }

// __byte_perm(x, y, s): result byte i = byte (s >> 4 i) & 7 of the 8 bytes {x, y} (x = bytes 0..3).
__host__ __device__ __forceinline__ uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, y, s);
#else
  const uint64_t bytes = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<uint32_t>((bytes >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
  return r;
#endif
}

__host__ __device__ __forceinline__ float float_from_bits(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float f;
  __builtin_memcpy(&f, &b, sizeof(f));
  return f;
#endif
}

// How the weight-only kernels (linear.cuh, linear_tc.cuh) scale the weights of output row r: one scale s[r] for all of
// k (INT8 per output channel: the fp32 sum is scaled once), a scale per group of k (w = s[r, g] q), or a scale and a
// zero point per group (w = s[r, g] (q - z[r, g]): GPTQ / AWQ checkpoints; q - z is exact in the dequantization).
enum class WeightScales : uint8_t { row, group, group_zero };

// 16 bytes of weights that are read exactly once: kept out of L1 (which holds x, re-read by every block of the SM),
// left in L2 (blocks of other token tiles read the same rows at about the same time).
__device__ __forceinline__ uint4 load_weights(const uint8_t* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// 8 bytes of such weights (the tensor-core GEMV's share of a 32-byte region).
__device__ __forceinline__ uint2 load_weights8(const uint8_t* p) {
  uint2 v;
  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

// 4 signed INT8 values q of a word -> 4 exact floats q - zero (zero: the weights' zero point, an integer in [-128,
// 127]; 0 for symmetric weights). Biased to unsigned (xor 0x80), each byte becomes the low mantissa byte of 2^23 + u
// (one byte permute with 0x4B000000), and subtracting 2^23 + 128 + zero (an integer below 2^24: exact) leaves q - zero
// exactly: one PRMT and one FADD a value instead of an I2F, which runs at a quarter of the FMA rate and would cap the
// GEMV below bandwidth.
__host__ __device__ __forceinline__ void dequant_i8x4(uint32_t w, float* f, float zero = 0.0f) {
  const uint32_t u = w ^ 0x80808080u;
  const float offset = 8388736.0f + zero;
  for (int j = 0; j < 4; ++j) f[j] = float_from_bits(byte_perm(u, 0x4B000000u, 0x7540u | j)) - offset;
}

// The tensor-core B fragment from one INT4 word of the kernel layout: lane t (0..3) needs values 2t and 2t + 1, which
// sit in nibbles t and 4 + t; returned biased by 8 (u = value + 8) in bits 0-3 and 16-19. Or'ed with 0x64006400 this
// is the f16 pair (1024 + u0, 1024 + u1), with 0x43004300 the bf16 pair (128 + u0, 128 + u1): both exact, so one
// packed subtract of 1032 / 136 leaves the values.
__host__ __device__ __forceinline__ uint32_t int4_pair_bits(uint32_t word, int t) {
  return ((word ^ 0x88888888u) >> (4 * t)) & 0x000F000Fu;
}

}  // namespace kernelkit::cuda

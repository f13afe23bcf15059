// e4m3 codes to 16-bit and fp32 values in registers (sm_89+: cvt.rn.f16x2.e4m3x2, one instruction a pair). Exact:
// every e4m3 value is an f16, and an fp32; the caller traps below sm_89 (KK_DEVICE_HAS_FP8), where the conversion has
// no instruction.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

namespace kernelkit::cuda {

// The two codes in the low 16 bits of `codes` (the low byte first) as an f16 pair.
__device__ __forceinline__ __half2_raw e4m3x2_to_half2(uint32_t codes) {
  return __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes & 0xffffu), __NV_E4M3);
}

// The same pair as the T pair of an MMA operand: f16 directly, bf16 through fp32.
template <typename T>
__device__ __forceinline__ unsigned e4m3x2_as(uint32_t codes) {
  const __half2_raw h = e4m3x2_to_half2(codes);
  if constexpr (std::is_same_v<T, __half>) {
    return static_cast<unsigned>(h.x) | (static_cast<unsigned>(h.y) << 16);
  } else {
    const float2 f = __half22float2(__half2(h));
    const __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
    return *reinterpret_cast<const unsigned*>(&b);
  }
}

// N codes, 4 a little-endian word, as floats.
template <int N>
__device__ __forceinline__ void e4m3_to_floats(const uint32_t (&w)[N / 4], float (&f)[N]) {
#pragma unroll
  for (int i = 0; i < N / 2; ++i) {
    const float2 v = __half22float2(__half2(e4m3x2_to_half2(i % 2 ? w[i / 2] >> 16 : w[i / 2])));
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}

}  // namespace kernelkit::cuda

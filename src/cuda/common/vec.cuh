// The one vector type: N elements of T loaded and stored as a single access (16 bytes when N = 16 / sizeof(T)),
// plus the scalar conversions every kernel uses. Callers guarantee alignment (the planner's gcd rule).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "cuda/common/arch.cuh"

namespace kernelkit::cuda {

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  static_assert(sizeof(T) * N <= 16 && (N & (N - 1)) == 0, "a Vec is at most 16 bytes, a power-of-two count");
  T v[N];
  static __device__ __forceinline__ Vec load(const T* p) { return *reinterpret_cast<const Vec*>(p); }
  __device__ __forceinline__ void store(T* p) const { *reinterpret_cast<Vec*>(p) = *this; }
};

// fp32 is the arithmetic type of every kernel; T is only the storage type.
template <typename T>
__device__ __forceinline__ float to_float(T v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T from_float(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);  // overflow saturates to inf, as torch
  else return __float2bfloat16_rn(v);
}

// Whether this compilation pass has code for T (no bf16 code on sm_75).
template <typename T>
inline constexpr bool kDeviceHasType = !std::is_same_v<T, __nv_bfloat16> || KK_DEVICE_HAS_BF16;

}  // namespace kernelkit::cuda

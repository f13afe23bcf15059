// The one vector type: N elements of T loaded and stored as a single access (16 bytes when N = 16 / sizeof(T)),
// plus the scalar conversions every kernel uses. Callers guarantee alignment (the planner's gcd rule).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "kernels/common/arch.cuh"

namespace kernelkit::cuda {

// The integer type of each access width: memory is always touched through these, so a Vec of 8 bf16 is one 16-byte
// load or store. (Copying the struct itself lets the compiler split it per element: 8 two-byte stores, seen in PTX.)
template <int kBytes>
struct RawOf;
template <> struct RawOf<16> { using type = uint4; };
template <> struct RawOf<8> { using type = uint2; };
template <> struct RawOf<4> { using type = unsigned int; };
template <> struct RawOf<2> { using type = unsigned short; };
template <int kBytes>
using Raw = typename RawOf<kBytes>::type;

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  static_assert(sizeof(T) * N <= 16 && (N & (N - 1)) == 0, "a Vec is at most 16 bytes, a power-of-two count");
  using R = Raw<sizeof(T) * N>;
  T v[N];
  static __device__ __forceinline__ Vec load(const T* p) {
    const R r = *reinterpret_cast<const R*>(p);
    Vec out;
    __builtin_memcpy(&out, &r, sizeof(R));
    return out;
  }
  // One vector store instruction, written out: NVVM otherwise splits some of these stores into 4-byte pieces (seen
  // in SASS for a Vec assembled from packed words).
  __device__ __forceinline__ void store(T* p) const {
    R r;
    __builtin_memcpy(&r, this, sizeof(R));
    if constexpr (sizeof(R) == 16)
      asm volatile("st.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(r.x), "r"(r.y), "r"(r.z), "r"(r.w) : "memory");
    else if constexpr (sizeof(R) == 8)
      asm volatile("st.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(r.x), "r"(r.y) : "memory");
    else
      *reinterpret_cast<R*>(p) = r;
  }
};

// fp32 is the arithmetic type of every kernel; T is only the storage type.
template <typename T>
__device__ __forceinline__ float to_float(T v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else return __bfloat162float(v);
}

// All N elements of a Vec as floats. bf16 pairs convert per 32-bit word (the low element by a shift, the high one
// by a mask: one integer instruction an element, where element-wise conversion extracts and shifts the high half).
template <typename T, int N>
__device__ __forceinline__ void to_floats(const Vec<T, N>& v, float (&f)[N]) {
  if constexpr (std::is_same_v<T, __nv_bfloat16> && N % 2 == 0) {
    unsigned w[N / 2];
    __builtin_memcpy(w, &v, sizeof(w));
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) f[i] = to_float(v.v[i]);
  }
}

template <typename T>
__device__ __forceinline__ T from_float(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);  // overflow saturates to inf, as torch
  else return __float2bfloat16_rn(v);
}

// The 16 bits of a rounded half or bf16 value.
template <typename T>
__device__ __forceinline__ unsigned bits16(float v) {
  if constexpr (std::is_same_v<T, __half>) return __half_as_ushort(__float2half_rn(v));
  else return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

// N floats rounded to T, as a Vec (16-bit pairs packed per 32-bit word: one conversion instruction a pair).
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> from_floats(const float (&f)[N]) {
  Vec<T, N> v;
  if constexpr (sizeof(T) == 2 && N % 2 == 0) {
    unsigned w[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) w[i] = bits16<T>(f[2 * i]) | (bits16<T>(f[2 * i + 1]) << 16);
    __builtin_memcpy(&v, w, sizeof(w));
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) v.v[i] = from_float<T>(f[i]);
  }
  return v;
}

// Rounds N floats to T and stores them as one access of N * sizeof(T) bytes (p aligned to that, per the planner).
template <typename T, int N>
__device__ __forceinline__ void store_rounded(T* p, const float (&y)[N]) {
  from_floats<T>(y).store(p);
}

// Whether this compilation pass has code for T (no bf16 code on sm_75).
template <typename T>
inline constexpr bool kDeviceHasType = !std::is_same_v<T, __nv_bfloat16> || KK_DEVICE_HAS_BF16;

}  // namespace kernelkit::cuda

// Activation functors (fp32 in, fp32 out), one definition each, shared by the element-wise family and the fused
// rms_norm_gelu epilogue. The CPU reference (src/ops/activation/activation_ref.cpp) computes the same formulas in fp64.
#pragma once

#include "kernelkit/ops.hpp"
#include "kernels/common/fast_math.cuh"

namespace kernelkit::cuda {

// Each functor's apply<kFast>: kFast (kFastMath<T> of the storage type) may use the one-instruction MUFU exp and
// reciprocal (kernels/common/fast_math.cuh), whose few-ulp fp32 errors vanish in the rounding to a 16-bit type;
// fp32 outputs take the accurate functions.
template <typename T>
inline constexpr bool kFastMath = sizeof(T) == 2;

// Exact GELU, x * Phi(x), as 0.5 x erfc(-x / sqrt 2): the same value as 0.5 x (1 + erf(x / sqrt 2)) without its
// cancellation for negative x, where 1 + erf is tiny and keeps only the rounding of erf near -1 (at x = -5, one fp32
// ulp of erf is 10% of 1 + erf); erfcf is accurate to a few ulp over its whole range, erfc_fast to 2e-6 of GELU.
struct Gelu {
  template <bool kFast>
  static __device__ __forceinline__ float apply(float v) {
    const float z = v * -0.7071067811865476f;
    return 0.5f * v * (kFast ? erfc_fast(z) : erfcf(z));
  }
};

// v * sigmoid(x) = v / (1 + exp(-x)); exp overflow gives 1 / inf = 0, not NaN. Accurate: expf and the correctly
// rounded reciprocal (an IEEE division's slow path cost the streaming kernels their bandwidth). Fast: MUFU.EX2 and
// MUFU.RCP, two instructions.
template <bool kFast>
__device__ __forceinline__ float times_sigmoid(float v, float x) {
  if constexpr (kFast)
    return v * rcp_ftz(1.0f + exp2_ftz(x * -kLog2e));
  else
    return v * __frcp_rn(1.0f + expf(-x));
}

struct GeluTanh {  // the tanh approximation (GPT-2, "gelu_pytorch_tanh"): 0.5 x (1 + tanh(u)) = x * sigmoid(2u)
  template <bool kFast>
  static __device__ __forceinline__ float apply(float v) {
    constexpr float k2 = 2.0f * 0.7978845608028654f;  // 2 sqrt(2 / pi)
    return times_sigmoid<kFast>(v, k2 * (v + 0.044715f * v * v * v));
  }
};

struct Silu {  // x * sigmoid(x)
  template <bool kFast>
  static __device__ __forceinline__ float apply(float v) {
    return times_sigmoid<kFast>(v, v);
  }
};

// Runtime -> compile-time: calls f(functor tag) for the activation.
template <typename F>
auto dispatch_activation(Activation act, F&& f) {
  switch (act) {
    case Activation::gelu: return f(Gelu{});
    case Activation::gelu_tanh: return f(GeluTanh{});
    case Activation::silu: break;
  }
  return f(Silu{});
}

}  // namespace kernelkit::cuda

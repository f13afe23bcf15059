// Activation functors (fp32 in, fp32 out), one definition each, shared by the element-wise family and the fused
// rms_norm_gelu epilogue. The CPU reference (src/ops/activation/activation_ref.cpp) computes the same formulas in fp64.
#pragma once

#include "kernelkit/ops.hpp"

namespace kernelkit::cuda {

// Exact GELU, x * Phi(x), as 0.5 x erfc(-x / sqrt 2): the same value as 0.5 x (1 + erf(x / sqrt 2)) without its
// cancellation for negative x, where 1 + erf is tiny and keeps only the rounding of erf near -1 (at x = -5, one fp32
// ulp of erf is 10% of 1 + erf); erfcf is accurate to a few ulp over its whole range.
struct Gelu {
  static __device__ __forceinline__ float apply(float v) { return 0.5f * v * erfcf(v * -0.7071067811865476f); }
};

// x * sigmoid(x) as x * rcp(1 + exp(-x)): expf keeps full precision and the correctly rounded reciprocal replaces an
// IEEE division (whose slow path cost the streaming kernels their bandwidth); exp overflow gives rcp(inf) = 0, not NaN.
__device__ __forceinline__ float times_sigmoid(float v, float x) { return v * __frcp_rn(1.0f + expf(-x)); }

struct GeluTanh {  // the tanh approximation (GPT-2, "gelu_pytorch_tanh"): 0.5 x (1 + tanh(u)) = x * sigmoid(2u)
  static __device__ __forceinline__ float apply(float v) {
    constexpr float k2 = 2.0f * 0.7978845608028654f;  // 2 sqrt(2 / pi)
    return times_sigmoid(v, k2 * (v + 0.044715f * v * v * v));
  }
};

struct Silu {  // x * sigmoid(x)
  static __device__ __forceinline__ float apply(float v) { return times_sigmoid(v, v); }
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

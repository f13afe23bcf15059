// Activation functors (fp32 in, fp32 out), one definition each, shared by the element-wise family and the fused
// rms_norm_gelu epilogue. The CPU reference (src/cpu/elementwise_ref.cpp) computes the same formulas in fp64.
#pragma once

#include "kernelkit/ops.hpp"

namespace kernelkit::cuda {

struct Gelu {  // exact: x * Phi(x)
  static __device__ __forceinline__ float apply(float v) { return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f)); }
};

struct GeluTanh {  // the tanh approximation (GPT-2, "gelu_pytorch_tanh")
  static __device__ __forceinline__ float apply(float v) {
    constexpr float k = 0.7978845608028654f;  // sqrt(2 / pi)
    return 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
  }
};

struct Silu {  // x * sigmoid(x); expf keeps full precision (the op is memory-bound, the intrinsic buys nothing)
  static __device__ __forceinline__ float apply(float v) { return v / (1.0f + expf(-v)); }
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

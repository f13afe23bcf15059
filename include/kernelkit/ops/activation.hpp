// Activation ops (src/ops/activation/), part of the op API (kernelkit/ops.hpp): TensorViews in, a Status out;
// CPU tensors run the fp64 reference, CUDA tensors the kernels on the caller's stream.
#pragma once

#include <cstdint>

#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit {

// ---- Activations: one element-wise family parameterised by the activation. Rows of the last dim, strided rows allowed;
//      fp32 math, one rounding per output. out may be x (or a or b) itself, in place, except for the gated form over
//      one [..., 2d] tensor; any other memory it shares with the inputs is refused.

enum class Activation : uint8_t {
  gelu,       // x * Phi(x), exact (erf)
  gelu_tanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  silu,       // x * sigmoid(x)
};

// out = act(x); x, out: [..., d]
Status activation(Activation act, const TensorView& out, const TensorView& x, Stream stream = nullptr);
// out = act(x[..., :d]) * x[..., d:]; x: [..., 2d], out: [..., d] (the vLLM / HF `activation` kernel convention:
// the first half is activated). silu -> silu_and_mul (SwiGLU), gelu -> gelu_and_mul, gelu_tanh -> gelu_tanh_and_mul.
Status gated_activation(Activation act, const TensorView& out, const TensorView& x, Stream stream = nullptr);
// out = act(a) * b with separate tensors (GEGLU with act = gelu); a, b, out: [..., d].
Status gated_activation(Activation act, const TensorView& out, const TensorView& a, const TensorView& b,
                        Stream stream = nullptr);

}  // namespace kernelkit

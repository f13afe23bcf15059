// Softmax ops (src/ops/softmax/), part of the op API (kernelkit/ops.hpp): TensorViews in, a Status out;
// CPU tensors run the fp64 reference, CUDA tensors the kernels on the caller's stream.
#pragma once

#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit {

// ---- Softmax over the last dim: y = exp(x * scale - max) / sum, fp32 statistics gathered in one (online) pass, one
//      rounding per output. A row whose every entry is -inf (or masked) gives zeros, never NaN. out may be x itself
//      (in place); any other memory it shares with x is refused.

Status softmax(const TensorView& out, const TensorView& x, float scale = 1.0f, Stream stream = nullptr);

// Attention scores x [..., s_q, s_k]: scale, causal mask (query i sees keys j <= i + s_k - s_q: bottom-right aligned,
// so with a KV prefix s_q < s_k the last query sees every key), softmax. Masked entries are 0.
Status causal_softmax(const TensorView& out, const TensorView& x, float scale, Stream stream = nullptr);

}  // namespace kernelkit

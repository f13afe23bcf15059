// A Llama-style decoder layer in plain C++ on kernelkit ops and cuBLASLt, for deployment without Python:
//   h = x + o_proj(attention(rope(q), rope(k), v));  out = h + down(silu(gate(norm(h))) * up(norm(h)))
// with q, k, v = qkv_proj(rms_norm(x)); the projections dense, weight-only INT8 / INT4 or FP8 (LayerLinear). One code
// path for CUDA tensors and CPU tensors (the CPU runs every op's reference, which is how the layer itself is tested
// without a GPU).
#pragma once

#include <cstdint>

#include "kernelkit/gemm.hpp"
#include "kernelkit/runtime.hpp"
#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit {

struct LlamaLayerConfig {
  int64_t hidden = 4096, intermediate = 11008, heads = 32, kv_heads = 32, head_dim = 128;  // LLaMA-7B
  float eps = 1e-5f;
  double rope_theta = 10000.0;
  int64_t max_position = 4096;  // rows of the cos/sin table (neox rotation of the whole head)
};

// How a projection's weight is stored, and so which GEMM runs it.
enum class LinearForm : uint8_t {
  dense,        // w in the activation dtype, through cuBLASLt (linear)
  weight_only,  // qweight + scales, bits 8 or 4: W8A16 / W4A16 (linear_weight_only)
  fp8,          // qweight e4m3 + per-output-channel scales, activations quantized to e4m3 per token (linear_fp8)
};

// One projection's weight, nn.Linear layout [out, in], in one of three forms (`form`):
//   dense: w [out, in] in the activation dtype;
//   weight_only (LayerLinear::quantized): bits 8: qweight i8 [out, in] + f32 scales [out]; bits 4: i4x2 [out, in / 2]
//     in kernelkit's INT4 layout + f32 scales [out, in / group]; from quantize_int8_per_channel /
//     quantize_int4_groupwise. Through linear_weight_only: the GEMV for decode, tensor cores for prefill;
//   fp8 (LayerLinear::fp8): qweight f8e4m3 [out, in] + f32 scales [out], one per output channel (w ~ q * s; e.g.
//     quantize_per_token_fp8 of the weight rows, as kernelkit.nn.Fp8Linear makes them). The layer quantizes the
//     activations per token on the fly (fused into the norms and SwiGLU where it can) and runs linear_fp8.
// Dense and weight-only projections may be mixed in a layer; FP8 takes all four or none (the norms and SwiGLU then
// write e4m3 codes instead of activations). FP8 needs a profile with FP8 (sm_89+): init refuses it elsewhere.
struct LayerLinear {
  TensorView w;                // dense weight
  TensorView qweight, scales;  // weight_only and fp8
  LinearForm form = LinearForm::dense;
  int bits = 0, group = 0;  // weight_only's (8 or 4, and INT4's group); a dense weight with bits != 0 is refused
  LayerLinear() = default;
  LayerLinear(const TensorView& dense) : w(dense) {}  // NOLINT: dense weights convert implicitly
  static LayerLinear quantized(const TensorView& qweight, const TensorView& scales, int bits, int group = 0) {
    LayerLinear l;
    l.qweight = qweight;
    l.scales = scales;
    l.form = LinearForm::weight_only;
    l.bits = bits;
    l.group = group;
    return l;
  }
  static LayerLinear fp8(const TensorView& qweight, const TensorView& scales) {
    LayerLinear l;
    l.qweight = qweight;
    l.scales = scales;
    l.form = LinearForm::fp8;
    return l;
  }
};

// The layer's weights, on the layer's device; views the caller owns (they must outlive the layer).
struct LlamaLayerWeights {
  TensorView input_norm;  // [hidden]
  LayerLinear qkv;        // [(heads + 2 kv_heads) head_dim, hidden]: the q, k and v projections stacked
  LayerLinear o;          // [hidden, heads head_dim]
  TensorView post_norm;   // [hidden]
  LayerLinear gate_up;    // [2 intermediate, hidden]: gate rows, then up rows
  LayerLinear down;       // [hidden, intermediate]
};

class LlamaLayer {
 public:
  // Checks the weights against the config, allocates the workspace for up to `max_tokens` tokens per call and builds
  // the cos/sin table on `device`.
  Status init(const LlamaLayerConfig& config, const LlamaLayerWeights& weights, DType dtype, Device device,
              int64_t max_tokens);

  // Prefill of `b` sequences of `s` tokens: x [b, s, hidden] is replaced by the layer's output; their keys and values
  // (positions 0 .. s-1) are written to k_cache, v_cache [b, capacity, kv_heads, head_dim]. Causal attention.
  Status prefill(const TensorView& x, const TensorView& k_cache, const TensorView& v_cache, Stream stream = nullptr);

  // One decode step: every sequence has `position` tokens in the cache and gets one more. x [b, hidden] is replaced
  // by the layer's output; the new key and value are written at `position`; attention reads positions 0 .. position.
  Status decode(const TensorView& x, const TensorView& k_cache, const TensorView& v_cache, int64_t position,
                Stream stream = nullptr);

  const LlamaLayerConfig& config() const { return cfg_; }

 private:
  Status forward(const TensorView& x, int64_t batch, int64_t seq, const TensorView& k_cache,
                 const TensorView& v_cache, int64_t position, Stream stream);
  Status check_cache(const TensorView& cache, const char* arg, int64_t batch, int64_t needed) const;
  Status check_linear(const LayerLinear& l, const char* arg, int64_t out, int64_t in) const;
  Status check_fp8(const LlamaLayerWeights& w) const;
  // y [T, out] (+)= x [T, in] @ W^T through cuBLASLt or the weight-only GEMV.
  Status project(const TensorView& y, const TensorView& x, const LayerLinear& l, bool accumulate, Stream stream);

  LlamaLayerConfig cfg_;
  LlamaLayerWeights w_;
  DType dtype_{};
  Device device_{};
  int64_t max_tokens_ = 0;
  bool fp8_ = false;  // the projections are FP8
  GemmHandle gemm_;
  Buffer cos_sin_, positions_, host_positions_, norm_, qkv_, attn_, proj_, gate_up_, act_;
  Buffer codes_, code_scales_;  // FP8: e4m3 codes [T, max(hidden, heads head_dim, intermediate)], f32 scales [T]
};

}  // namespace kernelkit

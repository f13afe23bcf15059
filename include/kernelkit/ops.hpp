// The public op API. Every op takes TensorViews and a stream and returns a Status. Tensors on the CPU run the fp64
// reference; tensors on a CUDA device run the kernels on the caller's stream. All tensors of one call live on one device.
#pragma once

#include <optional>

#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit {

// ---- Normalization: one row-reduction family. x is [..., hidden] with a contiguous last dim; the leading dims must
//      collapse to one row stride. Accumulation is always fp32 (fp64 in the CPU reference); the output is rounded once.

// out = x / sqrt(mean(x^2) + eps) * (weight_offset + weight)
//   weight: [hidden] or none (diffusers elementwise_affine=False); weight_offset = 1 gives Gemma's (1 + w).
Status rms_norm(const TensorView& out, const TensorView& x, const std::optional<TensorView>& weight, float eps,
                float weight_offset = 0.0f, Stream stream = nullptr);

// residual = x + residual (rounded to the dtype); x = rms_norm(residual). In place, vLLM semantics.
Status fused_add_rms_norm(const TensorView& x, const TensorView& residual, const std::optional<TensorView>& weight,
                          float eps, float weight_offset = 0.0f, Stream stream = nullptr);

// out = (x - mean) / sqrt(var + eps) * weight + bias; weight and bias optional, biased variance (as torch).
Status layer_norm(const TensorView& out, const TensorView& x, const std::optional<TensorView>& weight,
                  const std::optional<TensorView>& bias, float eps, Stream stream = nullptr);

// DiT / LTX-Video "modulate": out = layer_norm(x) * (1 + scale[b]) + shift[b].
//   x, out: [batch, seq, hidden]; scale, shift: [batch, hidden]; weight/bias optional as in layer_norm.
Status ada_layer_norm(const TensorView& out, const TensorView& x, const TensorView& scale, const TensorView& shift,
                      const std::optional<TensorView>& weight, const std::optional<TensorView>& bias, float eps,
                      Stream stream = nullptr);

// out = gelu_tanh(rms_norm(x) * weight): the seed's fused norm + activation (no intermediate rounding).
Status rms_norm_gelu(const TensorView& out, const TensorView& x, const std::optional<TensorView>& weight, float eps,
                     Stream stream = nullptr);

// ---- Activations: one element-wise family parameterised by the activation. Rows of the last dim, strided rows allowed;
//      fp32 math, one rounding per output.

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

// ---- Softmax over the last dim: y = exp(x * scale - max) / sum, fp32 statistics gathered in one (online) pass, one
//      rounding per output. A row whose every entry is -inf (or masked) gives zeros, never NaN.

Status softmax(const TensorView& out, const TensorView& x, float scale = 1.0f, Stream stream = nullptr);

// Attention scores x [..., s_q, s_k]: scale, causal mask (query i sees keys j <= i + s_k - s_q: bottom-right aligned,
// so with a KV prefix s_q < s_k the last query sees every key), softmax. Masked entries are 0.
Status causal_softmax(const TensorView& out, const TensorView& x, float scale, Stream stream = nullptr);

// ---- Rotary position embedding (RoPE) on q [tokens, heads, head_dim] and k [tokens, kv_heads, head_dim]: strided views
//      (e.g. slices of a fused qkv projection) with a contiguous last dim; the first rot_dim elements of each head are
//      rotated (partial rotary when rot_dim < head_dim; the rest is copied when out of place). In place when q_out /
//      k_out are q / k. fp32 math, one rounding per output.

enum class RopeStyle : uint8_t {
  neox,  // rotate_half: pairs (i, i + rot_dim/2)  (Llama, Mistral, Qwen, HF's default)
  gptj,  // interleaved: pairs (2i, 2i + 1)         (GPT-J, LTX-Video's 3D RoPE)
};

// cos/sin from a cache (vLLM / FlashInfer): cos_sin_cache [max_position, rot_dim] holds cos in its first rot_dim/2
// columns and sin in the rest (f32 or the dtype of q); positions [tokens] (i32 or i64) pick each token's row.
Status rotary_embedding(const TensorView& q_out, const TensorView& k_out, const TensorView& q, const TensorView& k,
                        const TensorView& positions, const TensorView& cos_sin_cache, RopeStyle style,
                        Stream stream = nullptr);

// The Llama rotary table for a cos_sin_cache: pair j of position m turns by m theta^(-2j / rot_dim); cos in column j,
// sin in column rot_dim / 2 + j of table [max_position, rot_dim] (f32, host memory), computed in fp64, rounded once.
void rope_cos_sin_table(float* table, int64_t max_position, int64_t rot_dim, double theta = 10000.0);

// Per-token cos/sin (HF convention, also 3D video RoPE whose cos/sin come from (frame, height, width)): cos, sin
// [tokens, rot_dim/2] (one value per pair), or [tokens, rot_dim] as HF builds them (halves duplicated for neox,
// entries repeated in pairs for gptj: the pair's first entry is used).
Status rotary_embedding(const TensorView& q_out, const TensorView& k_out, const TensorView& q, const TensorView& k,
                        const TensorView& cos, const TensorView& sin, int64_t rot_dim, RopeStyle style,
                        Stream stream = nullptr);

// ---- Attention (f16, and bf16 where the profile has it): softmax statistics in fp32 online (max and sum of exp), P
//      rounded to the dtype for the second product, one rounding per output. A query that sees no key (causal with
//      s_q > s_k, an empty sequence) gets out = 0 and lse = -inf, never NaN. head_dim 64, 128 or 256 with a
//      contiguous last dim; h % h_kv == 0 (query head h reads KV head h / (h / h_kv): GQA, MQA when h_kv = 1).

struct AttentionOptions {
  float scale = 0.0f;   // softmax scale on q k^T; 0 means 1 / sqrt(head_dim)
  bool causal = false;  // bottom-right aligned: query i sees keys j <= i + s_k - s_q (s_q < s_k: a KV prefix)
  // Packed variable lengths (FlashAttention's varlen): cu_seqlens_q / cu_seqlens_k are i32 [batch + 1], starting at
  // 0, non-decreasing, ending at the packed token counts; sequence b owns query tokens [cu_q[b], cu_q[b+1]) and key
  // tokens [cu_k[b], cu_k[b+1]). Both or neither. On CUDA they are device memory that the op also reads back once
  // (one stream synchronization) to check them and to size the grid by the longest sequence.
  std::optional<TensorView> cu_seqlens_q, cu_seqlens_k;
};

// Prefill / full attention: out = softmax(scale q k^T, masked) v, lse = log(sum_j exp(scale q k_j)) (natural log).
//   dense:  q, out [b, s_q, h, d]; k, v [b, s_k, h_kv, d]; lse [b, h, s_q] f32 or none.
//   varlen: q, out [total_q, h, d]; k, v [total_k, h_kv, d]; lse [h, total_q] f32 or none.
// Any strides with stride(-1) == 1 (so [b, h, s, d] storage passes as a permuted view); on CUDA the pointers must be
// 16-byte aligned and the other strides multiples of 8 elements (whole 16-byte rows for cp.async).
Status attention(const TensorView& out, const std::optional<TensorView>& lse, const TensorView& q, const TensorView& k,
                 const TensorView& v, const AttentionOptions& options = {}, Stream stream = nullptr);

// The KV cache of decode_attention. Contiguous: k_cache, v_cache [b, capacity, h_kv, d]. Paged: k_cache, v_cache
// [num_pages, page_size, h_kv, d] with page_size = kPageSize, and block_table i32 [b, max_pages] naming the pages of
// each sequence in order (entries past a sequence's length are never read). seqlens_k i32 [b]: the valid keys of each
// sequence (<= capacity, or <= max_pages * kPageSize); none means every sequence fills a contiguous cache (a paged
// cache requires it).
struct KvCache {
  static constexpr int64_t kPageSize = 16;
  TensorView k, v;
  std::optional<TensorView> block_table;  // set: paged
  std::optional<TensorView> seqlens_k;
};

// Decode: a few query tokens per sequence (q, out [b, s_q, h, d]; the last s_q positions of each sequence when causal)
// against a long KV cache. The keys are split across blocks (partial results merged by their lse); every KV head is
// read once for all of its query heads. lse [b, h, s_q] f32 or none. On CUDA, splits use a stream-ordered temporary
// (cudaMallocAsync) for the partial results.
Status decode_attention(const TensorView& out, const std::optional<TensorView>& lse, const TensorView& q,
                        const KvCache& cache, const AttentionOptions& options = {}, Stream stream = nullptr);

// ---- Quantization (issue #7): symmetric integer weights with fp32 scales, dequantized as w = q * s.
//      Every quantizer rounds q = round_half_even(w / s) with s and the quotient in fp32 (IEEE division), clamped to the
//      symmetric range; s = max|w| / qmax over the scale's span (a zero span gives s = 0 and q = 0).

// Per-output-channel INT8 weights: w [n, k] (f32, f16 or bf16) -> qweight i8 [n, k], scales f32 [n];
// s[r] = max_j |w[r, j]| / 127, q in [-127, 127].
Status quantize_int8_per_channel(const TensorView& qweight, const TensorView& scales, const TensorView& w,
                                 Stream stream = nullptr);

// Dynamic per-token INT8 activations: x [m, k] -> q i8 [m, k], scales f32 [m]; the same row-wise math as above.
Status quantize_per_token_int8(const TensorView& q, const TensorView& scales, const TensorView& x,
                               Stream stream = nullptr);

// Group-wise INT4 weights: w [n, k] -> qweight i4x2 [n, k / 2] in the kernel layout below, scales f32 [n, k / group];
// group is 64 or 128 (k % group == 0); s = max|w| / 7 over the group, q in [-7, 7] (-8 is never produced but decodes).
//
// The kernel layout of INT4 weights ("kk-int4-interleaved"): each row is a sequence of little-endian 32-bit words,
// word i holding the 8 values v0..v7 of k = 8i .. 8i + 7 as signed 4-bit two's complement, value j in the nibble at bit
// 4 * P(j) with P = {0, 4, 1, 5, 2, 6, 3, 7} (j / 2 + 4 * (j % 2)). Then (word & 0x000F000F) holds v0 and v1 in the
// low nibbles of its two 16-bit halves, (word & 0x00F000F0) v2 and v3, and the same of (word >> 8) v4..v7: one AND/OR
// turns two values into an fp16 pair (the 0x6400 exponent trick) in the kernel. The plain layout is the i4x2 dtype's
// own: value 2i in the low nibble of byte i, value 2i + 1 in the high one.
Status quantize_int4_groupwise(const TensorView& qweight, const TensorView& scales, const TensorView& w, int group,
                               Stream stream = nullptr);

// Converters between the kernel layout and plain values (CPU tensors only; an offline step). `plain` is either i8
// [n, k] holding values in [-8, 7], or i4x2 [n, k / 2] in the plain nibble order; k % 8 == 0.
Status pack_int4(const TensorView& packed, const TensorView& plain);
Status unpack_int4(const TensorView& plain, const TensorView& packed);

// Weight-only quantized linear layer: out = x @ dequant(qweight)^T (+ bias), fp32 accumulation, one rounding per output.
//   x [m, k] f16 or bf16 (contiguous last dim, any row stride); out [m, n] same dtype; bias [n] same dtype, or none.
//   bits 8: qweight i8 [n, k], scales f32 [n], group 0 (per output channel), k % 16 == 0.
//   bits 4: qweight i4x2 [n, k / 2] in the kernel layout, scales f32 [n, k / group], group 64 or 128, k % group == 0.
// accumulate: out += ... (out is read first; the decoder layer's residual add).
// CUDA: a GEMV for 1 or 2 tokens (4 rows a block, k split between its warps), tensor cores from 3 on (any m; k split
// over the grid when the tiles are few, the partial sums in stream-ordered scratch). Rows of x and qweight must be
// 16-byte aligned. The CPU backend is the fp64 reference.
Status linear_weight_only(const TensorView& out, const TensorView& x, const TensorView& qweight,
                          const TensorView& scales, int bits, int group, const std::optional<TensorView>& bias,
                          Stream stream = nullptr, bool accumulate = false);

// W8A8 linear layer on INT8 tensor cores: out = (xq @ qweight^T, exact int32) * x_scales[m] * w_scales[n] (+ bias),
// converted to fp32 once and rounded once to out's dtype.
//   xq i8 [m, k] and x_scales f32 [m] from quantize_per_token_int8 (contiguous last dim, row stride a multiple of 16);
//   qweight i8 [n, k] and w_scales f32 [n] from quantize_int8_per_channel (contiguous); out [m, n] f16 or bf16 (no
//   bf16 on the T4 profile); bias [n] out's dtype, or none; k % 16 == 0 and k <= 131072 (exact int32 sums).
// CUDA: for m > 16 and n, k multiples of 8, cuBLASLt's INT8 kernels for the int32 sums (row blocks of at most 64 MB of
// stream-ordered scratch) and a scaling kernel with the same arithmetic, where cuBLASLt has an algorithm (2-2.6x faster
// than our tiles on the H200); else our 128 x 128 tiles, mma.sync m16n8k32.s8 on sm_80+ and m8n8k16.s8 on sm_75.
// KERNELKIT_W8A8=tiles or cublaslt forces a path. The CPU backend is the reference.
Status linear_w8a8(const TensorView& out, const TensorView& xq, const TensorView& x_scales, const TensorView& qweight,
                   const TensorView& w_scales, const std::optional<TensorView>& bias = std::nullopt,
                   Stream stream = nullptr);

}  // namespace kernelkit

// Attention ops (src/ops/attention/), part of the op API (kernelkit/ops.hpp): TensorViews in, a Status out;
// CPU tensors run the fp64 reference, CUDA tensors the kernels on the caller's stream.
#pragma once

#include <cstdint>
#include <optional>

#include "kernelkit/ops/rope.hpp"
#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit {

// ---- Attention (f16, and bf16 where the profile has it): softmax statistics in fp32 online (max and sum of exp), P
//      rounded to the dtype for the second product, one rounding per output. A query that sees no key (causal with
//      s_q > s_k, an empty sequence) gets out = 0 and lse = -inf, never NaN. head_dim a multiple of 8 up to 256 with a
//      contiguous last dim (CUDA kernels for 64, 128 and 256; one between runs on the next one up); h % h_kv == 0
//      (query head h reads KV head h / (h / h_kv): GQA, MQA when h_kv = 1).

struct AttentionOptions {
  float scale = 0.0f;   // softmax scale on q k^T; 0 means 1 / sqrt(head_dim)
  bool causal = false;  // bottom-right aligned: query i sees keys j <= i + s_k - s_q (s_q < s_k: a KV prefix)
  // Packed variable lengths (FlashAttention's varlen): cu_seqlens_q / cu_seqlens_k are i32 [batch + 1], starting at
  // 0, non-decreasing, ending at the packed token counts; sequence b owns query tokens [cu_q[b], cu_q[b+1]) and key
  // tokens [cu_k[b], cu_k[b+1]). Both or neither. On CUDA they are device memory, read back once (one stream
  // synchronization) to check them and to size the grid by the longest sequence, unless max_seqlen_q / k are given.
  std::optional<TensorView> cu_seqlens_q, cu_seqlens_k;
  // Varlen only, both or neither: the longest sequence's query / key tokens (FlashAttention's max_seqlen_q / k), at
  // least the true longest (an upper bound such as the model's context is fine). Given, a CUDA call reads nothing
  // back (no synchronization; it can be captured in a CUDA graph): the grid is sized by them and the kernels check
  // each cu_seqlens entry they use on the device. A bad entry
  // (negative, decreasing, past the packed count, a first entry not 0 or a last not the count, a sequence longer than
  // its max_seqlen) is never followed: its sequence is skipped and the first one is recorded for check_errors
  // (kernelkit/runtime.hpp). The CPU backend checks the entries as without them, and that each max covers the longest.
  std::optional<int64_t> max_seqlen_q, max_seqlen_k;
  // Sliding window (Mistral, Gemma 2/3; FlashAttention's window_size[0]): query i, at position p = i + s_k - s_q,
  // sees keys j >= p - window_left (and j <= p when causal); -1: no window. On CUDA the K/V tiles no query row of a
  // block sees are skipped, not masked (decode: the splits cover the window, not the cache).
  int64_t window_left = -1;
  // Logit soft-capping (Gemma 2; FlashAttention's softcap): each scaled score s becomes softcap tanh(s / softcap)
  // before the softmax; 0: none.
  float softcap = 0.0f;
  // ALiBi (BLOOM, MPT; FlashAttention's alibi_slopes): f32 [heads] or [batch, heads]; the score of the query at
  // position p and key j gets -slope |p - j| added (after the soft-cap), slope the head's (and sequence's). On CUDA
  // the bias is added to every visible score in fp32 (exact while |p - j| < 2^24).
  std::optional<TensorView> alibi_slopes;
  // attention with f8e4m3 k and v (an e4m3 KV cache read by the prefill; q and out stay f16 / bf16): their f32
  // dequantization scales, each [1] (per tensor) or [kv_heads] (per KV head), as KvCache's k_scale / v_scale (stored
  // code * scale = value). Required with e4m3 k / v, refused otherwise; decode_attention takes them in its KvCache.
  // Options rather than arguments: like the varlen fields, they qualify how k and v are read, and the other callers'
  // signatures stay as they are.
  std::optional<TensorView> k_scale, v_scale;
};

// Prefill / full attention: out = softmax(scale q k^T, masked) v, lse = log(sum_j exp(scale q k_j)) (natural log).
//   dense:  q, out [b, s_q, h, d]; k, v [b, s_k, h_kv, d]; lse [b, h, s_q] f32 or none.
//   varlen: q, out [total_q, h, d]; k, v [total_k, h_kv, d]; lse [h, total_q] f32 or none.
// Any strides with stride(-1) == 1 (so [b, h, s, d] storage passes as a permuted view); on CUDA the pointers must be
// 16-byte aligned and the other strides multiples of 8 elements (whole 16-byte rows for cp.async). k and v are q's
// dtype, or both f8e4m3 with options.k_scale / v_scale (KvCache's conventions; on CUDA a profile with FP8, head_dim a
// multiple of 16 and strides multiples of 16 elements). The CPU backend dequantizes exactly. CUDA first dequantizes
// the k and v rows of the view into a stream-ordered temporary of q's dtype (scratch memory, 2 b s_k h_kv d
// elements), code * scale rounded to it once (the one difference from the CPU backend; exact where the product fits
// the dtype), then runs the 16-bit prefill on it: an extra pass over K/V (3 bytes an element), so the e4m3 cache
// saves memory, not prefill time. A product past the dtype's range (f16: 65504) becomes inf there.
Status attention(const TensorView& out, const std::optional<TensorView>& lse, const TensorView& q, const TensorView& k,
                 const TensorView& v, const AttentionOptions& options = {}, Stream stream = nullptr);

// The KV cache of decode_attention. Contiguous: k_cache, v_cache [b, capacity, h_kv, d]. Paged: k_cache, v_cache
// [num_pages, page_size, h_kv, d] with page_size a power of two up to kMaxPageSize (1 as SGLang / TGI, 16 or 32 as
// vLLM, ...: read from the shape), and block_table i32 [b, max_pages] naming the pages of each sequence in order
// (entries past a sequence's length are never read). seqlens_k i32 [b]: the valid keys of each sequence (<= capacity,
// or <= max_pages * page_size); none means every sequence fills a contiguous cache (a paged cache requires it).
// FP8 cache: k and v f8e4m3 (e4m3 codes, the same layouts; q and out stay f16 / bf16) with f32 dequantization scales
// k_scale and v_scale, each [1] (per tensor) or [h_kv] (per KV head), on q's device: stored code * scale = value
// (vLLM's and FlashInfer's k_scale / v_scale). Required with an e4m3 cache, refused with an f16 / bf16 one; used as
// given (write_kv_cache checks them). On CUDA an e4m3 cache needs a profile with FP8 (sm_89+), head_dim a multiple of
// 16 and 16-byte rows (strides multiples of 16 elements).
struct KvCache {
  static constexpr int64_t kMaxPageSize = 256;
  TensorView k, v;
  std::optional<TensorView> block_table;  // set: paged
  std::optional<TensorView> seqlens_k;
  std::optional<TensorView> k_scale = std::nullopt, v_scale = std::nullopt;  // e4m3 caches only
};

// Decode: a few query tokens per sequence (q, out [b, s_q, h, d]; the last s_q positions of each sequence when causal)
// against a long KV cache. The keys are split across blocks (partial results merged by their lse); every KV head is
// read once for all of its query heads. lse [b, h, s_q] f32 or none. On CUDA, splits use a stream-ordered temporary
// (scratch memory, kernelkit/runtime.hpp) for the partial results.
Status decode_attention(const TensorView& out, const std::optional<TensorView>& lse, const TensorView& q,
                        const KvCache& cache, const AttentionOptions& options = {}, Stream stream = nullptr);

// ---- Writing new keys and values into a KV cache (vLLM's reshape_and_cache), with RoPE fused where asked: one
//      kernel rotates q (into q_out) and k, and writes k and v into their cache slots.
//   k, v [tokens, h_kv, d] (strided, contiguous last dim: slices of a fused qkv projection pass); k_cache, v_cache as
//   KvCache holds them: contiguous [b, capacity, h_kv, d] (slot = b * capacity + position) or paged [num_pages,
//   page_size, h_kv, d] (slot = page * page_size + offset, page the physical page a block_table entry names); any
//   strides with a contiguous last dim. slot_mapping i32 or i64 [tokens]: token t's slot, -1 to skip the token
//   (padding). A slot outside [-1, rows of the cache) is never written: the CPU backend refuses the call, CUDA records
//   it for check_errors (kernelkit/runtime.hpp; at the call in debug mode). Two tokens with one slot: one of them wins.
//   Values are copied exactly (no rounding) unless rotated.
//   e4m3 caches (k_cache, v_cache f8e4m3, as KvCache holds them; k and v stay f16 / bf16): k_scale and v_scale, f32 [1]
//   or [h_kv] (KvCache's), are required, and each value (k rotated first and rounded to k's dtype with RoPE) is stored
//   as e4m3(value / scale): the fp32 quotient rounded to nearest even, saturating at +-448 (the quantizers' rounding).
//   A scale must be finite and > 0: the CPU backend refuses another, CUDA records it for check_errors.
struct KvWriteRope {
  // As rotary_embedding's cache overload (kernelkit/ops/rope.hpp): q [tokens, h, d] rotated into q_out (q itself for
  // in place), k rotated on its way into k_cache; positions i32 / i64 [tokens]; cos_sin_cache [max_position, rot_dim].
  // A position outside the table: the CPU backend refuses the call; CUDA records it for check_errors and, as
  // rotary_embedding does, rotates that token by the nearest row (its output is not valid).
  TensorView q_out, q, positions, cos_sin_cache;
  RopeStyle style = RopeStyle::neox;
};
Status write_kv_cache(const TensorView& k_cache, const TensorView& v_cache, const TensorView& k, const TensorView& v,
                      const TensorView& slot_mapping, const std::optional<KvWriteRope>& rope = std::nullopt,
                      const std::optional<TensorView>& k_scale = std::nullopt,
                      const std::optional<TensorView>& v_scale = std::nullopt, Stream stream = nullptr);

}  // namespace kernelkit

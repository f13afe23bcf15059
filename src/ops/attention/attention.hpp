// Internal: the parameter blocks of attention (prefill) and decode_attention, shared by validation, the CPU reference
// and the CUDA launchers. Strides are in elements; a tensor's element (batch b, token t, head h, dim i) sits at
// b * batch + t * token + h * head + i (varlen: batch = 0 and t is the packed token index cu_seqlens[b] + position).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "kernelkit/op_info.hpp"
#include "kernelkit/profile.hpp"
#include "kernelkit/tensor.hpp"
#include "ops/rope/rope.hpp"

namespace kernelkit::detail {

struct HeadStrides {
  int64_t batch = 0, token = 0, head = 0;
};

// An e4m3 KV cache's f32 scales (stored code * scale = value): KV head h's at k[h * k_stride] and v[h * v_stride]
// (stride 0: one per tensor); null for an f16 / bf16 cache.
struct CacheScales {
  const float *k = nullptr, *v = nullptr;
  int64_t k_stride = 0, v_stride = 0;
  double k_at(int64_t h) const { return k ? static_cast<double>(k[h * k_stride]) : 1.0; }  // host memory only
  double v_at(int64_t h) const { return v ? static_cast<double>(v[h * v_stride]) : 1.0; }
};

struct AttentionArgs {
  OpId op = OpId::attention;
  DType dtype{};
  Device device{};
  int64_t rows = 0;  // query tokens (b * s_q, or total_q): 0 makes the call a no-op after validation
  int64_t batch = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t s_q = 0, s_k = 0;  // dense: every sequence's lengths; varlen: the longest sequence's (sizes the grid)
  bool varlen = false;
  const int32_t* cu_q = nullptr;  // varlen: [batch + 1] on the tensors' device
  const int32_t* cu_k = nullptr;
  int64_t total_k = 0;  // varlen: packed key tokens (total_q is `rows`)
  void* out = nullptr;
  float* lse = nullptr;  // optional; dense [b, h, s_q], varlen [h, total_q], contiguous
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  HeadStrides q_st, k_st, v_st, o_st;
  int64_t lse_batch = 0, lse_head = 0;  // lse offset = b * lse_batch + h * lse_head + token
  float scale = 1.0f;
  bool causal = false;
  int64_t window_left = -1;  // keys from position - window_left (-1: none)
  float softcap = 0.0f;      // scores soft-capped as softcap tanh(s / softcap) (0: none)
  const float* alibi = nullptr;  // ALiBi slopes: head h of sequence b at alibi[b * alibi_batch + h] (none: null)
  int64_t alibi_batch = 0;
  // k and v's element type: `dtype` (q's), or f8e4m3 codes with their scales (CUDA dequantizes them into a temporary
  // of `dtype` and runs the prefill on a copy of these args pointing there).
  DType kv_dtype{};
  CacheScales scales;
};

struct DecodeArgs {
  OpId op = OpId::decode_attention;
  DType dtype{};
  Device device{};
  int64_t rows = 0;  // query tokens b * s_q
  int64_t batch = 0, s_q = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t capacity = 0;  // keys a sequence can hold: contiguous cache dim 1, paged max_pages * page_size
  bool paged = false;
  int64_t page_size = 0, max_pages = 0, num_pages = 0;
  const int32_t* block_table = nullptr;  // paged: [batch, max_pages], row stride block_table_stride
  int64_t block_table_stride = 0;
  const int32_t* seqlens = nullptr;  // [batch] or none (every sequence holds `capacity` keys)
  void* out = nullptr;
  float* lse = nullptr;  // optional [b, h, s_q] contiguous
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  // k/v: contiguous: batch = sequence stride, token = position stride; paged: batch = page stride, token = slot stride.
  HeadStrides q_st, k_st, v_st, o_st;
  float scale = 1.0f;
  bool causal = false;
  int64_t window_left = -1;  // keys from position - window_left (-1: none)
  float softcap = 0.0f;      // scores soft-capped as softcap tanh(s / softcap) (0: none)
  const float* alibi = nullptr;  // ALiBi slopes: head h of sequence b at alibi[b * alibi_batch + h] (none: null)
  int64_t alibi_batch = 0;
  // The cache's element type: `dtype` (q's), or f8e4m3 with the f32 dequantization scales of KV head h at
  // k_scale[h * k_scale_stride], v_scale[h * v_scale_stride] (stride 0: one per tensor).
  DType kv_dtype{};
  CacheScales scales;
};

// The first key any query of a sequence sees when its s_q queries are the last positions of its len keys: the first
// query's window start (0 without a window, window < 0). The keys before it are never read, on either backend (a
// paged cache's pages there may be evicted). constexpr: the decode kernels use it too.
constexpr int64_t first_visible_key(int64_t len, int64_t s_q, int64_t window) {
  return window >= 0 && len - s_q - window > 0 ? len - s_q - window : 0;
}

// The keys a query row sees among key0, key0 + 1, ...: key0 + j for lo <= j <= hi. It sees the keys before s_k, with
// `causal` none past its position row + offset, with a window (>= 0) none before row + offset - window. The prefill's
// per-element mask: two bounds a row, then each score's j is a compile-time constant (one compare against each).
struct KeySpan {
  int lo, hi;
};
constexpr KeySpan visible_key_span(int row, int key0, int s_k, bool causal, int offset, int window) {
  const int last = causal && row + offset < s_k - 1 ? row + offset : s_k - 1;
  return {window >= 0 ? row + offset - window - key0 : std::numeric_limits<int>::min(), last - key0};
}

Status validate_attention(const AttentionArgs& a, const DeviceProfile* profile);
Status attention_reference(const AttentionArgs& a);
// The references hold a (sequence, KV head)'s K and V as doubles up to this many bytes (default 256 MiB), and walk
// longer ones in chunks of it, to the same results; tests set it low to walk small inputs in chunks.
size_t reference_kv_bytes();
void set_reference_kv_bytes(size_t bytes);
Status attention_cuda(const AttentionArgs& a, Stream stream);
// CUDA, e4m3 k / v (a.kv_dtype): the rows of a's views as `dtype` values round(code * scale) into k_out and v_out,
// contiguous [rows of k, kv_heads, head_dim] (dense: b * s_k rows, varlen: total_k), on `stream`.
Status dequantize_kv_cuda(const AttentionArgs& a, const DeviceProfile& prof, void* k_out, void* v_out, Stream stream);

Status validate_decode(const DecodeArgs& a, const DeviceProfile* profile);
Status decode_reference(const DecodeArgs& a);
Status decode_attention_cuda(const DecodeArgs& a, Stream stream);

// write_kv_cache: k / v row (t, h) to cache slot slot_mapping[t] (-1: none); with RoPE, q and k rotated first.
struct KvWriteArgs {
  OpId op = OpId::write_kv_cache;
  DType dtype{};
  Device device{};
  int64_t tokens = 0, kv_heads = 0, head_dim = 0;
  const void *k = nullptr, *v = nullptr;
  HeadStrides k_st, v_st;  // token, head (batch unused)
  void *k_cache = nullptr, *v_cache = nullptr;
  // Slot s of a cache [n0, n1, h_kv, d]: row s % n1 of block s / n1 (a sequence's capacity, or a page), head h at
  // (s / n1) * batch + (s % n1) * token + h * head.
  int64_t block = 0, slots = 0;  // n1; n0 * n1, the bound of every slot
  HeadStrides kc_st, vc_st;
  const void* slot_mapping = nullptr;  // [tokens] contiguous
  DType slot_dtype = DType::i64;
  bool rope = false;
  RopeArgs r;  // rope: q -> q_out and k rotated (r.k_out unused: k goes to the cache); r.op is this op
  // The caches' element type: `dtype` (a copy), or f8e4m3 (quantized by `scales`, kv_heads of each when per head).
  DType cache_dtype{};
  CacheScales scales;
  int64_t k_scales = 0, v_scales = 0;  // e4m3: the number of k / v scales (1 or kv_heads), each checked
};

// The (token, head) rows the op walks: with RoPE q's heads, then k's and v's (0 without heads: a no-op).
inline int64_t kv_write_rows(const KvWriteArgs& a) { return a.tokens * ((a.rope ? a.r.heads : 0) + 2 * a.kv_heads); }

// Token t's slot (host memory: the CPU backend).
inline int64_t host_slot(const KvWriteArgs& a, int64_t t) {
  return a.slot_dtype == DType::i64 ? static_cast<const int64_t*>(a.slot_mapping)[t]
                                    : static_cast<const int32_t*>(a.slot_mapping)[t];
}

Status validate_kv_write(const KvWriteArgs& a, const DeviceProfile* profile);
Status kv_write_reference(const KvWriteArgs& a);
Status write_kv_cache_cuda(const KvWriteArgs& a, Stream stream);

}  // namespace kernelkit::detail

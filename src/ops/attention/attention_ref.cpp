// CPU reference of attention and decode_attention: fp64 throughout, exact max subtraction, one rounding per output.
// Per (sequence, KV head) the visible K and V rows are converted to double once and shared by the query heads of the
// group (the reference is also the oracle for 4097-token GPU cases, so it must not be needlessly slow); a head too
// long for that (a paged cache of 2^31 keys) is walked in chunks, in bounded memory, to the same bits. An e4m3 cache
// (decode's, or attention's e4m3 k / v) is dequantized exactly on the way: code * scale in double (a 4-bit
// significand times a 24-bit one).
// write_kv_cache's: RoPE by the rope family's reference, exact row copies into the slots, or into e4m3 caches the
// quantizers' codes (quantize_byte: e4m3 of the fp32 quotient value / scale).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/attention/attention.hpp"
#include "ops/quant/quant.hpp"

namespace kernelkit::detail {
namespace {

// Keys first .. first + s_k - 1 of one sequence of one KV head as doubles: K and V [s_k, d] row-major.
struct KvRows {
  int64_t first = 0, s_k = 0, d = 0;
  std::vector<double> k, v;
};

// The scores of one query row: its dot product with key j scaled, soft-capped (cap tanh(s / cap)) when softcap > 0,
// and the ALiBi bias -slope |pos - j| added (slope 0: none); pos is the query's position in its sequence.
struct RowScore {
  double scale, softcap, slope;
  int64_t pos;
  double operator()(double dot, int64_t j) const {
    const double s = scale * dot;
    return (softcap > 0 ? softcap * std::tanh(s / softcap) : s) - slope * std::fabs(static_cast<double>(pos - j));
  }
};

// o = softmax(scores of K[lo..hi)) V[lo..hi), lse = log sum exp; no visible key: o = 0, lse = -inf.
void attend(const double* q, const KvRows& kv, int64_t lo, int64_t hi, const RowScore& score, double* o, double* lse,
            std::vector<double>& logits) {
  const int64_t d = kv.d;
  std::fill(o, o + d, 0.0);
  if (hi <= lo) {
    *lse = -INFINITY;
    return;
  }
  logits.resize(static_cast<size_t>(hi - lo));
  double m = -INFINITY;
  for (int64_t j = lo; j < hi; ++j) {
    const double* kr = &kv.k[static_cast<size_t>((j - kv.first) * d)];
    double s = 0;
    for (int64_t i = 0; i < d; ++i) s += q[i] * kr[i];
    logits[static_cast<size_t>(j - lo)] = score(s, j);
    m = std::max(m, logits[static_cast<size_t>(j - lo)]);
  }
  double l = 0;
  for (int64_t j = lo; j < hi; ++j) {
    const double p = std::exp(logits[static_cast<size_t>(j - lo)] - m);
    l += p;
    const double* vr = &kv.v[static_cast<size_t>((j - kv.first) * d)];
    for (int64_t i = 0; i < d; ++i) o[i] += p * vr[i];
  }
  for (int64_t i = 0; i < d; ++i) o[i] /= l;
  *lse = m + std::log(l);
}

// The keys [lo, hi) query `i` of a sequence of s_q queries and s_k keys sees: bottom-right aligned (its position is
// p = i + s_k - s_q), up to p when causal, from p - window when window >= 0; hi <= lo: none.
struct KeySpan {
  int64_t lo, hi;
};
KeySpan visible_keys(bool causal, int64_t window, int64_t i, int64_t s_q, int64_t s_k) {
  const int64_t p = i + s_k - s_q;
  const int64_t hi = causal ? std::min(p + 1, s_k) : s_k;
  const int64_t lo = window >= 0 ? std::max<int64_t>(0, p - window) : 0;
  return {lo, std::max(lo, hi)};
}

// Query rows of one (sequence, KV head): every query head of the group and every query token; writes out and lse.
// The group's K and V as doubles when they fit in `max_kv_bytes`; else chunks of keys in two passes (every row's max
// first, then the sums), which computes the same values in the same order, bit for bit, in bounded memory.
// K and V hold kv_dtype (dtype, or f8e4m3 codes), dequantized as value * k_scale / v_scale (1 unless e4m3: exact).
template <typename KeyOffset>
void attend_group(DType dtype, const void* q, const HeadStrides& qs, void* out, const HeadStrides& os, float* lse,
                  int64_t lse_batch, int64_t lse_head, DType kv_dtype, const void* k, const HeadStrides& ks,
                  const void* v, const HeadStrides& vs, double k_scale, double v_scale, KeyOffset key_row, int64_t b,
                  int64_t q_start, int64_t s_q, int64_t s_k, int64_t kvh, int64_t group, int64_t d, double scale,
                  bool causal, int64_t window, double softcap, const float* alibi, int64_t alibi_batch,
                  size_t max_kv_bytes) {
  // Query head g of the group, token t: its scoring (the ALiBi slope of its head and sequence).
  auto row_score = [&](int64_t g, int64_t t) {
    const double slope = alibi ? static_cast<double>(alibi[b * alibi_batch + kvh * group + g]) : 0.0;
    return RowScore{scale, softcap, slope, t + s_k - s_q};
  };
  // K and V rows [j0, j1) as doubles into kv (whose s_k becomes the chunk's length).
  auto load = [&](KvRows* kv, int64_t j0, int64_t j1, bool with_v) {
    kv->first = j0;
    kv->s_k = j1 - j0;
    kv->d = d;
    kv->k.resize(static_cast<size_t>(kv->s_k * d));
    if (with_v) kv->v.resize(static_cast<size_t>(kv->s_k * d));
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t i = 0; i < d; ++i) {
        const auto at = static_cast<size_t>((j - j0) * d + i);
        kv->k[at] = load_as_double(k, kv_dtype, key_row(ks, j) + kvh * ks.head + i) * k_scale;
        if (with_v) kv->v[at] = load_as_double(v, kv_dtype, key_row(vs, j) + kvh * vs.head + i) * v_scale;
      }
  };
  auto query = [&](int64_t g, int64_t t, double* qr) {
    for (int64_t i = 0; i < d; ++i)
      qr[i] = load_as_double(q, dtype, b * qs.batch + (q_start + t) * qs.token + (kvh * group + g) * qs.head + i);
  };
  auto store = [&](int64_t g, int64_t t, const double* o, double l) {
    const int64_t h = kvh * group + g, tok = q_start + t;
    for (int64_t i = 0; i < d; ++i) store_from_double(out, dtype, b * os.batch + tok * os.token + h * os.head + i, o[i]);
    if (lse) lse[b * lse_batch + h * lse_head + tok] = static_cast<float>(l);
  };
  std::vector<double> qr(static_cast<size_t>(d)), o(static_cast<size_t>(d)), logits;
  // Keys before the first query's window start are seen by no row: never read (first_visible_key).
  const int64_t first = s_q > 0 ? first_visible_key(s_k, s_q, window) : s_k;
  const size_t kv_bytes = 2 * static_cast<size_t>(s_k - first) * static_cast<size_t>(d) * sizeof(double);
  if (kv_bytes <= max_kv_bytes) {
    KvRows kv;
    load(&kv, first, s_k, true);
    for (int64_t g = 0; g < group; ++g)
      for (int64_t t = 0; t < s_q; ++t) {
        query(g, t, qr.data());
        double l = 0;
        const KeySpan span = visible_keys(causal, window, t, s_q, s_k);
        attend(qr.data(), kv, span.lo, span.hi, row_score(g, t), o.data(), &l, logits);
        store(g, t, o.data(), l);
      }
    return;
  }
  // Chunked: per row its query, running max, sum and output.
  const int64_t rows = group * s_q;
  const int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(max_kv_bytes / (2 * sizeof(double))) / d);
  std::vector<double> qs_all(static_cast<size_t>(rows * d)), m(static_cast<size_t>(rows), -INFINITY),
      l(static_cast<size_t>(rows), 0.0), o_all(static_cast<size_t>(rows * d), 0.0);
  std::vector<KeySpan> visible(static_cast<size_t>(rows));
  std::vector<RowScore> scores;
  for (int64_t g = 0; g < group; ++g)
    for (int64_t t = 0; t < s_q; ++t) {
      const int64_t r = g * s_q + t;
      query(g, t, &qs_all[static_cast<size_t>(r * d)]);
      visible[static_cast<size_t>(r)] = visible_keys(causal, window, t, s_q, s_k);
      scores.push_back(row_score(g, t));
    }
  // Row r's score of key j0 + jc (row jc of the chunk kv).
  auto dot = [&](int64_t r, const KvRows& kv, int64_t j0, int64_t jc) {
    const double* qp = &qs_all[static_cast<size_t>(r * d)];
    const double* kr = &kv.k[static_cast<size_t>(jc * d)];
    double s = 0;
    for (int64_t i = 0; i < d; ++i) s += qp[i] * kr[i];
    return scores[static_cast<size_t>(r)](s, j0 + jc);
  };
  KvRows kv;
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t j0 = first; j0 < s_k; j0 += chunk) {
      const int64_t j1 = std::min(s_k, j0 + chunk);
      load(&kv, j0, j1, pass == 1);
      for (int64_t r = 0; r < rows; ++r) {
        const auto ru = static_cast<size_t>(r);
        for (int64_t j = std::max(j0, visible[ru].lo); j < std::min(j1, visible[ru].hi); ++j) {
          const double s = dot(r, kv, j0, j - j0);
          if (pass == 0) {
            m[ru] = std::max(m[ru], s);
            continue;
          }
          const double p = std::exp(s - m[ru]);
          l[ru] += p;
          const double* vr = &kv.v[static_cast<size_t>((j - j0) * d)];
          double* op = &o_all[static_cast<size_t>(r * d)];
          for (int64_t i = 0; i < d; ++i) op[i] += p * vr[i];
        }
      }
    }
  for (int64_t g = 0; g < group; ++g)
    for (int64_t t = 0; t < s_q; ++t) {
      const auto r = static_cast<size_t>(g * s_q + t);
      double* op = &o_all[r * static_cast<size_t>(d)];
      if (visible[r].hi <= visible[r].lo) {
        std::fill(op, op + d, 0.0);
        store(g, t, op, -INFINITY);
        continue;
      }
      for (int64_t i = 0; i < d; ++i) op[i] /= l[r];
      store(g, t, op, m[r] + std::log(l[r]));
    }
}

}  // namespace

namespace {
std::atomic<size_t> g_reference_kv_bytes{size_t{256} << 20};
}  // namespace

size_t reference_kv_bytes() { return g_reference_kv_bytes.load(); }
void set_reference_kv_bytes(size_t bytes) { g_reference_kv_bytes.store(std::max<size_t>(bytes, 1)); }

Status attention_reference(const AttentionArgs& a) {
  const size_t max_kv_bytes = reference_kv_bytes();
  const int64_t group = a.heads / a.kv_heads;
  for (int64_t b = 0; b < a.batch; ++b) {
    const int64_t q0 = a.varlen ? a.cu_q[b] : 0, k0 = a.varlen ? a.cu_k[b] : 0;
    const int64_t s_q = a.varlen ? a.cu_q[b + 1] - q0 : a.s_q, s_k = a.varlen ? a.cu_k[b + 1] - k0 : a.s_k;
    auto key_row = [&](const HeadStrides& st, int64_t j) { return b * st.batch + (k0 + j) * st.token; };
    for (int64_t kvh = 0; kvh < a.kv_heads; ++kvh)
      attend_group(a.dtype, a.q, a.q_st, a.out, a.o_st, a.lse, a.lse_batch, a.lse_head, a.kv_dtype, a.k, a.k_st, a.v,
                   a.v_st, a.scales.k_at(kvh), a.scales.v_at(kvh), key_row, b, q0, s_q, s_k, kvh, group, a.head_dim,
                   a.scale, a.causal, a.window_left, a.softcap, a.alibi, a.alibi_batch, max_kv_bytes);
  }
  return Status::Ok();
}

Status decode_reference(const DecodeArgs& a) {
  const size_t max_kv_bytes = reference_kv_bytes();
  const int64_t group = a.heads / a.kv_heads;
  for (int64_t b = 0; b < a.batch; ++b) {
    const int64_t s_k = a.seqlens ? a.seqlens[b] : a.capacity;
    // Contiguous: position j of sequence b; paged: slot j % page of page block_table[b, j / page].
    auto key_row = [&](const HeadStrides& st, int64_t j) -> int64_t {
      if (!a.paged) return b * st.batch + j * st.token;
      const int64_t page = a.block_table[b * a.block_table_stride + j / a.page_size];
      return page * st.batch + (j % a.page_size) * st.token;
    };
    for (int64_t kvh = 0; kvh < a.kv_heads; ++kvh)
      attend_group(a.dtype, a.q, a.q_st, a.out, a.o_st, a.lse, a.heads * a.s_q, a.s_q, a.kv_dtype, a.k, a.k_st, a.v,
                   a.v_st, a.scales.k_at(kvh), a.scales.v_at(kvh), key_row, b, 0, a.s_q, s_k, kvh, group, a.head_dim,
                   a.scale, a.causal, a.window_left, a.softcap, a.alibi, a.alibi_batch, max_kv_bytes);
  }
  return Status::Ok();
}

Status kv_write_reference(const KvWriteArgs& a) {
  // k rotated first (rope: into a contiguous copy, by the rope family's reference, rounded to k's dtype), then k and v
  // rows copied exactly, or each value quantized into an e4m3 cache by its head's scale.
  const size_t e = dtype_size(a.dtype), row = static_cast<size_t>(a.head_dim) * e;
  const void* k = a.k;
  HeadStrides k_st = a.k_st;
  std::vector<unsigned char> rotated;
  if (a.rope) {
    rotated.resize(static_cast<size_t>(a.tokens * a.kv_heads) * row);
    RopeArgs r = a.r;
    r.k_out = rotated.data();
    r.ko_tok = a.kv_heads * a.head_dim;
    r.ko_head = a.head_dim;
    KK_RETURN_IF_ERROR(rope_reference(r));
    k = rotated.data();
    k_st = {0, r.ko_tok, r.ko_head};
  }
  const bool fp8 = a.cache_dtype != a.dtype;
  // Row (token t, head h) of k or v into `cache` at element offset `at`: copied, or as e4m3 codes at `scale`.
  auto put = [&](void* cache, int64_t at, const void* x, int64_t from, double scale) {
    if (!fp8) {
      std::memcpy(static_cast<unsigned char*>(cache) + at * static_cast<int64_t>(e),
                  static_cast<const unsigned char*>(x) + from * static_cast<int64_t>(e), row);
      return;
    }
    auto* codes = static_cast<uint8_t*>(cache) + at;
    for (int64_t i = 0; i < a.head_dim; ++i)
      codes[i] = quantize_byte(load_as_double(x, a.dtype, from + i), static_cast<float>(scale), true);
  };
  for (int64_t t = 0; t < a.tokens; ++t) {
    const int64_t slot = host_slot(a, t);  // in [-1, slots): checked by write_kv_cache
    if (slot < 0) continue;
    const int64_t blk = slot / a.block, in = slot % a.block;
    for (int64_t h = 0; h < a.kv_heads; ++h) {
      put(a.k_cache, blk * a.kc_st.batch + in * a.kc_st.token + h * a.kc_st.head, k, t * k_st.token + h * k_st.head,
          a.scales.k_at(h));
      put(a.v_cache, blk * a.vc_st.batch + in * a.vc_st.token + h * a.vc_st.head, a.v,
          t * a.v_st.token + h * a.v_st.head, a.scales.v_at(h));
    }
  }
  return Status::Ok();
}

}  // namespace kernelkit::detail

// CPU reference of attention and decode_attention: fp64 throughout, exact max subtraction, one rounding per output.
// Per (sequence, KV head) the visible K and V rows are converted to double once and shared by the query heads of the
// group (the reference is also the oracle for 4097-token GPU cases, so it must not be needlessly slow).
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/attention/attention.hpp"

namespace kernelkit::detail {
namespace {

// One sequence of one KV head as doubles: K and V [s_k, d] row-major.
struct KvRows {
  int64_t s_k = 0, d = 0;
  std::vector<double> k, v;
};

// o = softmax(scale q K[0..visible)^T) V[0..visible), lse = log sum exp; no visible key: o = 0, lse = -inf.
void attend(const double* q, const KvRows& kv, int64_t visible, double scale, double* o, double* lse,
            std::vector<double>& logits) {
  const int64_t d = kv.d;
  std::fill(o, o + d, 0.0);
  visible = std::min(visible, kv.s_k);
  if (visible <= 0) {
    *lse = -INFINITY;
    return;
  }
  logits.resize(static_cast<size_t>(visible));
  double m = -INFINITY;
  for (int64_t j = 0; j < visible; ++j) {
    const double* kr = &kv.k[static_cast<size_t>(j * d)];
    double s = 0;
    for (int64_t i = 0; i < d; ++i) s += q[i] * kr[i];
    logits[static_cast<size_t>(j)] = scale * s;
    m = std::max(m, scale * s);
  }
  double l = 0;
  for (int64_t j = 0; j < visible; ++j) {
    const double p = std::exp(logits[static_cast<size_t>(j)] - m);
    l += p;
    const double* vr = &kv.v[static_cast<size_t>(j * d)];
    for (int64_t i = 0; i < d; ++i) o[i] += p * vr[i];
  }
  for (int64_t i = 0; i < d; ++i) o[i] /= l;
  *lse = m + std::log(l);
}

// Keys visible to query `i` of a sequence of s_q queries and s_k keys (bottom-right causal alignment).
int64_t visible_keys(bool causal, int64_t i, int64_t s_q, int64_t s_k) { return causal ? i + s_k - s_q + 1 : s_k; }

// Query rows of one (sequence, KV head): every query head of the group and every query token; writes out and lse.
template <typename KeyOffset>
void attend_group(DType dtype, const void* q, const HeadStrides& qs, void* out, const HeadStrides& os, float* lse,
                  int64_t lse_batch, int64_t lse_head, const void* k, const HeadStrides& ks, const void* v,
                  const HeadStrides& vs, KeyOffset key_row, int64_t b, int64_t q_start, int64_t s_q, int64_t s_k,
                  int64_t kvh, int64_t group, int64_t d, double scale, bool causal) {
  KvRows kv{s_k, d, std::vector<double>(static_cast<size_t>(s_k * d)),
            std::vector<double>(static_cast<size_t>(s_k * d))};
  for (int64_t j = 0; j < s_k; ++j)
    for (int64_t i = 0; i < d; ++i) {
      kv.k[static_cast<size_t>(j * d + i)] = load_as_double(k, dtype, key_row(ks, j) + kvh * ks.head + i);
      kv.v[static_cast<size_t>(j * d + i)] = load_as_double(v, dtype, key_row(vs, j) + kvh * vs.head + i);
    }
  std::vector<double> qr(static_cast<size_t>(d)), o(static_cast<size_t>(d)), logits;
  for (int64_t g = 0; g < group; ++g) {
    const int64_t h = kvh * group + g;
    for (int64_t t = 0; t < s_q; ++t) {
      const int64_t tok = q_start + t;
      for (int64_t i = 0; i < d; ++i)
        qr[static_cast<size_t>(i)] = load_as_double(q, dtype, b * qs.batch + tok * qs.token + h * qs.head + i);
      double l = 0;
      attend(qr.data(), kv, visible_keys(causal, t, s_q, s_k), scale, o.data(), &l, logits);
      for (int64_t i = 0; i < d; ++i)
        store_from_double(out, dtype, b * os.batch + tok * os.token + h * os.head + i, o[static_cast<size_t>(i)]);
      if (lse) lse[b * lse_batch + h * lse_head + tok] = static_cast<float>(l);
    }
  }
}

}  // namespace

Status attention_reference(const AttentionArgs& a) {
  const int64_t group = a.heads / a.kv_heads;
  for (int64_t b = 0; b < a.batch; ++b) {
    const int64_t q0 = a.varlen ? a.cu_q[b] : 0, k0 = a.varlen ? a.cu_k[b] : 0;
    const int64_t s_q = a.varlen ? a.cu_q[b + 1] - q0 : a.s_q, s_k = a.varlen ? a.cu_k[b + 1] - k0 : a.s_k;
    auto key_row = [&](const HeadStrides& st, int64_t j) { return b * st.batch + (k0 + j) * st.token; };
    for (int64_t kvh = 0; kvh < a.kv_heads; ++kvh)
      attend_group(a.dtype, a.q, a.q_st, a.out, a.o_st, a.lse, a.lse_batch, a.lse_head, a.k, a.k_st, a.v, a.v_st,
                   key_row, b, q0, s_q, s_k, kvh, group, a.head_dim, a.scale, a.causal);
  }
  return Status::Ok();
}

Status decode_reference(const DecodeArgs& a) {
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
      attend_group(a.dtype, a.q, a.q_st, a.out, a.o_st, a.lse, a.heads * a.s_q, a.s_q, a.k, a.k_st, a.v, a.v_st,
                   key_row, b, 0, a.s_q, s_k, kvh, group, a.head_dim, a.scale, a.causal);
  }
  return Status::Ok();
}

}  // namespace kernelkit::detail

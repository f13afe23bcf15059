// attention / decode_attention on the CPU backend: the fp64 reference against an independent naive formula (explicit
// score matrix, mask, softmax, P V) on small fresh random inputs; layouts, varlen, GQA, causal alignment, fully masked
// rows, paged == contiguous; bytes / FLOPs; bad inputs named with the expectation.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <sys/resource.h>

#include "kernelkit/op_info.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/profile.hpp"
#include "ops/attention/attention.hpp"
#include "ops/attention/attention_cases.hpp"

using namespace kernelkit;
using kernelkit::testing::HostBuffer;
using kernelkit::testing::random_host;

namespace {

// A refused call: its status code, and `want` somewhere in its message.
void expect(const Status& s, StatusCode code, const std::string& want) {
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(want), std::string::npos) << s.message() << "\nwanted: " << want;
}

// The naive formula for one (batch, head) of [b, s, h, d] tensors: S = scale Q K^T (s_q x s_k), -inf where masked,
// P = exp(S - rowmax) / rowsum, O = P V; lse = rowmax + log(rowsum). Written independently of the reference.
struct Naive {
  std::vector<double> o, lse;  // [s_q, d], [s_q]
};
Naive naive_head(const HostBuffer& q, const HostBuffer& k, const HostBuffer& v, int64_t s_q, int64_t s_k, int64_t h,
                 int64_t hk, int64_t heads, int64_t kv_heads, int64_t d, int64_t b, double scale, bool causal) {
  auto qa = [&](int64_t i, int64_t x) { return q.get(((b * s_q + i) * heads + h) * d + x); };
  auto ka = [&](int64_t j, int64_t x) { return k.get(((b * s_k + j) * kv_heads + hk) * d + x); };
  auto va = [&](int64_t j, int64_t x) { return v.get(((b * s_k + j) * kv_heads + hk) * d + x); };
  std::vector<double> S(static_cast<size_t>(s_q * s_k));
  for (int64_t i = 0; i < s_q; ++i)
    for (int64_t j = 0; j < s_k; ++j) {
      double dot = 0;
      for (int64_t x = 0; x < d; ++x) dot += qa(i, x) * ka(j, x);
      const bool masked = causal && j - i > s_k - s_q;
      S[static_cast<size_t>(i * s_k + j)] = masked ? -INFINITY : scale * dot;
    }
  Naive n{std::vector<double>(static_cast<size_t>(s_q * d), 0.0), std::vector<double>(static_cast<size_t>(s_q))};
  for (int64_t i = 0; i < s_q; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < s_k; ++j) mx = std::max(mx, S[static_cast<size_t>(i * s_k + j)]);
    if (mx == -INFINITY) {
      n.lse[static_cast<size_t>(i)] = -INFINITY;
      continue;
    }
    for (int64_t j = 0; j < s_k; ++j) sum += std::exp(S[static_cast<size_t>(i * s_k + j)] - mx);
    for (int64_t j = 0; j < s_k; ++j) {
      const double p = std::exp(S[static_cast<size_t>(i * s_k + j)] - mx) / sum;
      for (int64_t x = 0; x < d; ++x) n.o[static_cast<size_t>(i * d + x)] += p * va(j, x);
    }
    n.lse[static_cast<size_t>(i)] = mx + std::log(sum);
  }
  return n;
}

struct Dense {
  int64_t b = 1, s_q = 5, s_k = 9, heads = 4, kv_heads = 2, d = 64;
  bool causal = false;
  DType dt = DType::f16;
  float scale = 0.0f;
};

// Runs the reference on [b, s, h, d] tensors and checks it against the naive formula: outputs within one rounding
// (half an ulp of the dtype), lse within fp64 noise, fully masked rows exactly 0 / -inf.
void check_dense(const Dense& c, uint64_t seed) {
  SCOPED_TRACE("b " + std::to_string(c.b) + " s_q " + std::to_string(c.s_q) + " s_k " + std::to_string(c.s_k) + " h " +
               std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + (c.causal ? " causal" : ""));
  const int64_t nq = c.b * c.s_q * c.heads * c.d, nk = c.b * c.s_k * c.kv_heads * c.d;
  HostBuffer q = random_host(c.dt, nq, seed), k = random_host(c.dt, nk, seed + 1),
             v = random_host(c.dt, nk, seed + 2);
  HostBuffer out(c.dt, nq);
  std::vector<float> lse(static_cast<size_t>(c.b * c.heads * c.s_q), NAN);
  AttentionOptions o;
  o.causal = c.causal;
  o.scale = c.scale;
  const Status s = attention(TensorView::contiguous(out.data(), c.dt, {c.b, c.s_q, c.heads, c.d}),
                             TensorView::contiguous(lse.data(), DType::f32, {c.b, c.heads, c.s_q}),
                             TensorView::contiguous(q.data(), c.dt, {c.b, c.s_q, c.heads, c.d}),
                             TensorView::contiguous(k.data(), c.dt, {c.b, c.s_k, c.kv_heads, c.d}),
                             TensorView::contiguous(v.data(), c.dt, {c.b, c.s_k, c.kv_heads, c.d}), o);
  ASSERT_TRUE(s.ok()) << s.to_string();
  const double scale = c.scale != 0 ? c.scale : 1.0 / std::sqrt(static_cast<double>(c.d));
  const double rtol = kernelkit::testing::tolerance(c.dt).rtol;
  int bad = 0;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.heads; ++h) {
      const Naive n = naive_head(q, k, v, c.s_q, c.s_k, h, h / (c.heads / c.kv_heads), c.heads, c.kv_heads, c.d, b,
                                 scale, c.causal);
      for (int64_t i = 0; i < c.s_q; ++i) {
        const double want_lse = n.lse[static_cast<size_t>(i)];
        const float got_lse = lse[static_cast<size_t>((b * c.heads + h) * c.s_q + i)];
        if (want_lse == -INFINITY)
          EXPECT_EQ(got_lse, -INFINITY);
        else
          EXPECT_NEAR(got_lse, want_lse, 1e-6 * (1 + std::fabs(want_lse)));
        for (int64_t x = 0; x < c.d; ++x) {
          const double want = n.o[static_cast<size_t>(i * c.d + x)];
          const double got = out.get(((b * c.s_q + i) * c.heads + h) * c.d + x);
          if (!(std::fabs(got - want) <= rtol / 2 * std::fabs(want) + 1e-7) && bad++ < 4)
            ADD_FAILURE() << "out[" << b << ", " << i << ", " << h << ", " << x << "] = " << got << ", want " << want;
        }
      }
    }
  EXPECT_EQ(bad, 0);
}

}  // namespace

TEST(Attention, ReferenceMatchesNaiveFormula) {
  uint64_t seed = 10;
  for (int64_t ratio : {1, 4, 8})
    for (bool causal : {false, true})
      for (auto [s_q, s_k] : {std::pair<int64_t, int64_t>{1, 1}, {7, 7}, {5, 12}, {12, 5}})
        check_dense({2, s_q, s_k, 8, 8 / ratio, 64, causal, DType::f16, 0.0f}, seed++);
  check_dense({1, 6, 9, 2, 1, 128, true, DType::bf16, 0.3f}, seed++);
  check_dense({1, 3, 4, 1, 1, 256, false, DType::f16, 0.0f}, seed++);
}

TEST(Attention, ValuesByHand) {
  // One head, d = 64, two keys: q . k0 = 0, q . k1 = ln(3) / scale -> weights 1/4, 3/4. Causal with s_q = 2, s_k = 2:
  // query 0 sees key 0 only (out = v0, lse = 0).
  const int64_t d = 64;
  const double scale = 0.125;
  std::vector<uint16_t> q(2 * d), k(2 * d), v(2 * d), out(2 * d);
  const double l3 = std::log(3.0) / scale;
  for (int64_t x = 0; x < d; ++x) {
    q[x] = q[d + x] = float_to_half_bits(x == 0 ? 1.0f : 0.0f);
    k[x] = float_to_half_bits(0.0f);
    k[d + x] = float_to_half_bits(x == 0 ? static_cast<float>(l3) : 0.0f);
    v[x] = float_to_half_bits(1.0f);
    v[d + x] = float_to_half_bits(-1.0f);
  }
  std::vector<float> lse(2);
  AttentionOptions o;
  o.scale = static_cast<float>(scale);
  o.causal = true;
  auto view = [&](std::vector<uint16_t>& b) { return TensorView::contiguous(b.data(), DType::f16, {1, 2, 1, d}); };
  ASSERT_TRUE(
      attention(view(out), TensorView::contiguous(lse.data(), DType::f32, {1, 1, 2}), view(q), view(k), view(v), o)
          .ok());
  EXPECT_EQ(half_bits_to_float(out[0]), 1.0f);
  EXPECT_EQ(lse[0], 0.0f);
  const double k1 = scale * half_bits_to_float(k[d]);  // the stored (rounded) logit
  const double w1 = std::exp(k1) / (1 + std::exp(k1));
  EXPECT_NEAR(half_bits_to_float(out[d]), (1 - w1) - w1, 1e-3);
  EXPECT_NEAR(lse[1], std::log(1 + std::exp(k1)), 1e-6);
}

TEST(Attention, BhsdLayoutThroughStrides) {
  // The same numbers stored [b, h, s, d] and passed as a permuted view give the same result as [b, s, h, d].
  const int64_t B = 2, S = 6, H = 4, HK = 2, D = 64;
  HostBuffer q = random_host(DType::f16, B * S * H * D, 3), k = random_host(DType::f16, B * S * HK * D, 4),
             v = random_host(DType::f16, B * S * HK * D, 5);
  auto to_bhsd = [](const HostBuffer& x, int64_t b, int64_t s, int64_t h, int64_t d) {
    HostBuffer y(x.dtype(), x.size());
    for (int64_t i = 0; i < b; ++i)
      for (int64_t t = 0; t < s; ++t)
        for (int64_t j = 0; j < h; ++j)
          for (int64_t e = 0; e < d; ++e) y.set(((i * h + j) * s + t) * d + e, x.get(((i * s + t) * h + j) * d + e));
    return y;
  };
  HostBuffer q2 = to_bhsd(q, B, S, H, D), k2 = to_bhsd(k, B, S, HK, D), v2 = to_bhsd(v, B, S, HK, D);
  HostBuffer out(DType::f16, q.size()), out2(DType::f16, q.size());
  AttentionOptions o;
  o.causal = true;
  auto bshd = [](HostBuffer& x, int64_t h) { return TensorView::contiguous(x.data(), DType::f16, {B, S, h, D}); };
  auto bhsd = [](HostBuffer& x, int64_t h) {
    return TensorView::strided(x.data(), DType::f16, {B, S, h, D}, {h * S * D, D, S * D, 1});
  };
  ASSERT_TRUE(attention(bshd(out, H), std::nullopt, bshd(q, H), bshd(k, HK), bshd(v, HK), o).ok());
  ASSERT_TRUE(attention(bhsd(out2, H), std::nullopt, bhsd(q2, H), bhsd(k2, HK), bhsd(v2, HK), o).ok());
  const HostBuffer back = to_bhsd(out, B, S, H, D);
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(back.get(i), out2.get(i)) << i;
}

TEST(Attention, PaddedKvViewsReadNoPadding) {
  // The harness's kv_pad layout (k / v as views into storage with NaN rows after every sequence's keys), through the
  // CPU reference: every output finite and within [min v, max v], so the GPU cases built on it compare real values.
  for (bool causal : {false, true}) {
    const kernelkit::testing::AttentionCase c{OpId::attention, DType::f16, 2, 9, 13, 4, 2, 64, causal, false, false,
                                              false, 1.0, 3, 5};
    const kernelkit::testing::CaseResult r = kernelkit::testing::check_attention_properties(c);
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_GT(r.checked, 0);
    EXPECT_EQ(r.mismatches, 0) << c.name() << "\n" << r.detail;
  }
}

TEST(Attention, AnyHeadDimMultipleOf8) {
  // head_dim 8 to 256 in steps of 8 (the CUDA kernels pad to 64, 128 or 256): the reference's outputs are convex
  // combinations of v rows, prefill and decode.
  for (int64_t d : {8, 40, 96, 200, 256})
    for (OpId op : {OpId::attention, OpId::decode_attention}) {
      kernelkit::testing::AttentionCase c{op, DType::bf16, 2, op == OpId::attention ? 9 : 2, 13, 4, 2, d, true};
      c.window_left = 5;
      const kernelkit::testing::CaseResult r = kernelkit::testing::check_attention_properties(c);
      ASSERT_TRUE(r.status.ok()) << r.status.to_string();
      EXPECT_EQ(r.checked, c.batch * c.s_q * c.heads * d) << c.name();
      EXPECT_EQ(r.mismatches, 0) << c.name() << "\n" << r.detail;
    }
}

TEST(Attention, VarlenEqualsPerSequenceCalls) {
  // Sequences of (s_q, s_k) = (3, 3), (0, 4), (5, 9), (4, 2) packed; each equals a dense causal call on its own.
  const std::vector<int32_t> cq = {0, 3, 3, 8, 12}, ck = {0, 3, 7, 16, 18};
  const int64_t H = 4, HK = 1, D = 64, TQ = cq.back(), TK = ck.back();
  HostBuffer q = random_host(DType::bf16, TQ * H * D, 7), k = random_host(DType::bf16, TK * HK * D, 8),
             v = random_host(DType::bf16, TK * HK * D, 9), out(DType::bf16, TQ * H * D);
  std::vector<float> lse(static_cast<size_t>(H * TQ));
  AttentionOptions o;
  o.causal = true;
  o.cu_seqlens_q = TensorView::contiguous(const_cast<int32_t*>(cq.data()), DType::i32, {5});
  o.cu_seqlens_k = TensorView::contiguous(const_cast<int32_t*>(ck.data()), DType::i32, {5});
  ASSERT_TRUE(attention(TensorView::contiguous(out.data(), DType::bf16, {TQ, H, D}),
                        TensorView::contiguous(lse.data(), DType::f32, {H, TQ}),
                        TensorView::contiguous(q.data(), DType::bf16, {TQ, H, D}),
                        TensorView::contiguous(k.data(), DType::bf16, {TK, HK, D}),
                        TensorView::contiguous(v.data(), DType::bf16, {TK, HK, D}), o)
                  .ok());
  // Given max_seqlen_q / k (at or above the longest), the same bits.
  for (int64_t extra : {0, 3}) {
    AttentionOptions m = o;
    m.max_seqlen_q = 5 + extra;
    m.max_seqlen_k = 9 + extra;
    HostBuffer out2(DType::bf16, TQ * H * D);
    ASSERT_TRUE(attention(TensorView::contiguous(out2.data(), DType::bf16, {TQ, H, D}), std::nullopt,
                          TensorView::contiguous(q.data(), DType::bf16, {TQ, H, D}),
                          TensorView::contiguous(k.data(), DType::bf16, {TK, HK, D}),
                          TensorView::contiguous(v.data(), DType::bf16, {TK, HK, D}), m)
                    .ok());
    for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out2.get(i), out.get(i)) << "max_seqlen + " << extra;
  }
  AttentionOptions dense;
  dense.causal = true;
  const size_t e = dtype_size(DType::bf16);
  for (size_t b = 0; b + 1 < cq.size(); ++b) {
    const int64_t sq = cq[b + 1] - cq[b], sk = ck[b + 1] - ck[b];
    if (sq == 0) continue;
    HostBuffer o1(DType::bf16, sq * H * D);
    std::vector<float> l1(static_cast<size_t>(H * sq));
    auto* qb = static_cast<char*>(q.data()) + cq[b] * H * D * e;
    auto* kb = static_cast<char*>(k.data()) + ck[b] * HK * D * e;
    auto* vb = static_cast<char*>(v.data()) + ck[b] * HK * D * e;
    ASSERT_TRUE(attention(TensorView::contiguous(o1.data(), DType::bf16, {1, sq, H, D}),
                          TensorView::contiguous(l1.data(), DType::f32, {1, H, sq}),
                          TensorView::contiguous(qb, DType::bf16, {1, sq, H, D}),
                          TensorView::contiguous(kb, DType::bf16, {1, sk, HK, D}),
                          TensorView::contiguous(vb, DType::bf16, {1, sk, HK, D}), dense)
                    .ok());
    for (int64_t i = 0; i < sq * H * D; ++i) ASSERT_EQ(o1.get(i), out.get(cq[b] * H * D + i)) << "seq " << b;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < sq; ++t) ASSERT_EQ(l1[h * sq + t], lse[h * TQ + cq[b] + t]) << "seq " << b;
  }
}

TEST(Attention, FullyMaskedRowsAreZeroWithMinusInfLse) {
  // Causal with s_q = 6 > s_k = 2: queries 0..3 see no key; large fp16 logits do not overflow the others.
  const int64_t S_Q = 6, S_K = 2, D = 64;
  HostBuffer q = random_host(DType::f16, S_Q * D, 11, 60.0), k = random_host(DType::f16, S_K * D, 12, 60.0),
             v = random_host(DType::f16, S_K * D, 13), out(DType::f16, S_Q * D);
  for (int64_t i = 0; i < out.size(); ++i) out.set(i, NAN);
  std::vector<float> lse(S_Q, 0.0f);
  AttentionOptions o;
  o.causal = true;
  ASSERT_TRUE(attention(TensorView::contiguous(out.data(), DType::f16, {1, S_Q, 1, D}),
                        TensorView::contiguous(lse.data(), DType::f32, {1, 1, S_Q}),
                        TensorView::contiguous(q.data(), DType::f16, {1, S_Q, 1, D}),
                        TensorView::contiguous(k.data(), DType::f16, {1, S_K, 1, D}),
                        TensorView::contiguous(v.data(), DType::f16, {1, S_K, 1, D}), o)
                  .ok());
  for (int64_t i = 0; i < S_Q; ++i) {
    for (int64_t x = 0; x < D; ++x) {
      if (i < 4)
        EXPECT_EQ(out.get(i * D + x), 0.0) << i;
      else
        EXPECT_TRUE(std::isfinite(out.get(i * D + x))) << i;
    }
    if (i < 4)
      EXPECT_EQ(lse[i], -INFINITY);
    else
      EXPECT_TRUE(std::isfinite(lse[i]));
  }
}

TEST(DecodeAttention, ContiguousAndPagedEqualAttentionOverEachSequence) {
  // b = 3 sequences of 37, 0 and 16 keys in a cache of capacity 48; s_q = 2 causal queries (the last two positions),
  // 8 query heads over 2 KV heads. The paged cache holds the same rows in shuffled pages of 1, 8 and 16.
  const int64_t B = 3, SQ = 2, H = 8, HK = 2, D = 128, CAP = 48;
  const std::vector<int32_t> lens = {37, 0, 16};
  HostBuffer q = random_host(DType::f16, B * SQ * H * D, 21), k = random_host(DType::f16, B * CAP * HK * D, 22),
             v = random_host(DType::f16, B * CAP * HK * D, 23);
  HostBuffer out(DType::f16, q.size()), outp(DType::f16, q.size());
  std::vector<float> lse(static_cast<size_t>(B * H * SQ)), lsep(lse.size());
  AttentionOptions o;
  o.causal = true;
  KvCache cache{TensorView::contiguous(k.data(), DType::f16, {B, CAP, HK, D}),
                TensorView::contiguous(v.data(), DType::f16, {B, CAP, HK, D}), std::nullopt,
                TensorView::contiguous(const_cast<int32_t*>(lens.data()), DType::i32, {B})};
  ASSERT_TRUE(decode_attention(TensorView::contiguous(out.data(), DType::f16, {B, SQ, H, D}),
                               TensorView::contiguous(lse.data(), DType::f32, {B, H, SQ}),
                               TensorView::contiguous(q.data(), DType::f16, {B, SQ, H, D}), cache, o)
                  .ok());
  const int64_t row = HK * D;  // one token of one page
  for (const int64_t PAGE : {1, 8, 16}) {
    const int64_t MP = CAP / PAGE;
    // Pages: sequence b's page p lands at page perm[b * MP + p] of the pool.
    std::vector<int32_t> perm(static_cast<size_t>(B * MP));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(5));
    HostBuffer kp(DType::f16, B * MP * PAGE * row), vp(DType::f16, B * MP * PAGE * row);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < CAP; ++t)
        for (int64_t x = 0; x < row; ++x) {
          const int64_t dst = (perm[static_cast<size_t>(b * MP + t / PAGE)] * PAGE + t % PAGE) * row + x;
          kp.set(dst, k.get((b * CAP + t) * row + x));
          vp.set(dst, v.get((b * CAP + t) * row + x));
        }
    KvCache paged{TensorView::contiguous(kp.data(), DType::f16, {B * MP, PAGE, HK, D}),
                  TensorView::contiguous(vp.data(), DType::f16, {B * MP, PAGE, HK, D}),
                  TensorView::contiguous(perm.data(), DType::i32, {B, MP}),
                  TensorView::contiguous(const_cast<int32_t*>(lens.data()), DType::i32, {B})};
    ASSERT_TRUE(decode_attention(TensorView::contiguous(outp.data(), DType::f16, {B, SQ, H, D}),
                                 TensorView::contiguous(lsep.data(), DType::f32, {B, H, SQ}),
                                 TensorView::contiguous(q.data(), DType::f16, {B, SQ, H, D}), paged, o)
                    .ok());
    for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out.get(i), outp.get(i)) << i;
    for (size_t i = 0; i < lse.size(); ++i) ASSERT_EQ(lse[i], lsep[i]) << i;
  }
  // Each sequence equals prefill attention over its valid keys (causal, bottom-right).
  const size_t e = dtype_size(DType::f16);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = lens[static_cast<size_t>(b)];
    HostBuffer o1(DType::f16, SQ * H * D);
    std::vector<float> l1(static_cast<size_t>(H * SQ));
    auto* qb = static_cast<char*>(q.data()) + b * SQ * H * D * e;
    auto* kb = static_cast<char*>(k.data()) + b * CAP * row * e;
    auto* vb = static_cast<char*>(v.data()) + b * CAP * row * e;
    ASSERT_TRUE(attention(TensorView::contiguous(o1.data(), DType::f16, {1, SQ, H, D}),
                          TensorView::contiguous(l1.data(), DType::f32, {1, H, SQ}),
                          TensorView::contiguous(qb, DType::f16, {1, SQ, H, D}),
                          TensorView::contiguous(kb, DType::f16, {1, len, HK, D}),
                          TensorView::contiguous(vb, DType::f16, {1, len, HK, D}), o)
                    .ok());
    for (int64_t i = 0; i < SQ * H * D; ++i) ASSERT_EQ(o1.get(i), out.get(b * SQ * H * D + i)) << "seq " << b;
    for (int64_t i = 0; i < H * SQ; ++i)
      ASSERT_EQ(l1[static_cast<size_t>(i)], lse[static_cast<size_t>(b * H * SQ + i)]);
  }
  EXPECT_EQ(lse[static_cast<size_t>(1 * H * SQ)], -INFINITY);  // the empty sequence
}

TEST(Attention, BytesAndFlopsAreDefinedOnce) {
  // Llama-7B-like prefill: b 2, s 1024, 32 heads of 128 over 8 KV heads, bf16.
  const AttentionShape s{2, 1024, 1024, 32, 8, 128, false};
  const uint64_t qo = 2ull * 1024 * 32 * 128, kv = 2ull * 1024 * 8 * 128;
  EXPECT_EQ(attention_bytes(OpId::attention, s, DType::bf16), 2 * (2 * qo + 2 * kv) + 4ull * 2 * 32 * 1024);
  AttentionShape e4m3 = s;  // an e4m3 KV cache: K and V at 1 byte an element
  e4m3.kv_dtype = DType::f8e4m3;
  EXPECT_EQ(attention_bytes(OpId::decode_attention, e4m3, DType::bf16), 2 * 2 * qo + 2 * kv + 4ull * 2 * 32 * 1024);
  EXPECT_DOUBLE_EQ(attention_flops(OpId::attention, s), 4.0 * 2 * 32 * 128 * 1024 * 1024);
  AttentionShape c = s;
  c.causal = true;
  EXPECT_DOUBLE_EQ(attention_flops(OpId::attention, c), 4.0 * 2 * 32 * 128 * (1024.0 * 1025 / 2));
  EXPECT_EQ(attention_pairs(2, 5, true), 4 + 5);  // bottom-right: query 0 sees 4 keys, query 1 sees 5
  EXPECT_EQ(attention_pairs(5, 2, true), 1 + 2);  // the first three queries see nothing
  EXPECT_EQ(op_bytes(OpId::attention, {4, 64, 1, 16}, DType::f16), 0u);  // not a row op
  EXPECT_EQ(attention_bytes(OpId::rms_norm, s, DType::f16), 0u);
  EXPECT_EQ(parse_op("decode_attention"), OpId::decode_attention);
  EXPECT_EQ(op_info(OpId::attention).family, OpFamily::attention);
  EXPECT_FALSE(op_supports(OpId::attention, DType::f32, *find_profile("h200")));
  EXPECT_FALSE(op_supports(OpId::attention, DType::bf16, *find_profile("t4")));
  EXPECT_TRUE(op_supports(OpId::decode_attention, DType::f16, *find_profile("t4")));
}

TEST(Attention, BadInputsNameTheArgumentAndTheExpectation) {
  std::vector<uint16_t> buf(4 * 8 * 4 * 256);
  // A fresh buffer for every tensor: an output sharing an input's memory is an error of its own.
  std::deque<std::vector<float>> storage;
  auto t = [&](std::initializer_list<int64_t> shape, DType dt = DType::f16) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    storage.emplace_back(static_cast<size_t>(std::max<int64_t>(n, 1)));
    return TensorView::contiguous(storage.back().data(), dt, shape);
  };
  const auto q = t({2, 4, 4, 64}), kv = t({2, 8, 2, 64});
  expect(attention(t({2, 4, 4, 100}), std::nullopt, t({2, 4, 4, 100}), t({2, 8, 2, 100}), t({2, 8, 2, 100})),
         StatusCode::unsupported, "head_dim (q last dim) 100 is not supported (expected a multiple of 8 up to 256)");
  expect(attention(t({1, 2, 2, 264}), std::nullopt, t({1, 2, 2, 264}), t({1, 2, 2, 264}), t({1, 2, 2, 264})),
         StatusCode::unsupported, "head_dim (q last dim) 264 is not supported");
  expect(attention(t({2, 4, 6, 64}), std::nullopt, t({2, 4, 6, 64}), t({2, 8, 4, 64}), t({2, 8, 4, 64})),
         StatusCode::invalid_argument, "q heads (6) must be a positive multiple of k/v heads (4)");
  expect(attention(t({2, 4, 4, 64}), std::nullopt, q, t({2, 8, 2, 64}, DType::bf16), kv), StatusCode::invalid_argument,
         "k dtype bf16 does not match q dtype f16");
  expect(attention(t({2, 4, 4, 64}, DType::f32), std::nullopt, t({2, 4, 4, 64}, DType::f32),
                   t({2, 8, 2, 64}, DType::f32), t({2, 8, 2, 64}, DType::f32)),
         StatusCode::invalid_argument, "q dtype f32 is not supported (expected f16 or bf16)");
  expect(attention(t({2, 4, 4, 64}), std::nullopt, q, kv, t({2, 7, 2, 64})), StatusCode::invalid_argument,
         "v shape [2, 7, 2, 64] must be [batch=2, s_k=8, kv_heads=2, head_dim=64]");
  expect(attention(t({2, 4, 4, 64}), t({2, 4, 5}, DType::f32), q, kv, kv), StatusCode::invalid_argument,
         "lse shape [2, 4, 5] must be [batch=2, heads=4, s_q=4]");
  expect(attention(t({2, 4, 4, 64}), t({2, 4, 4}, DType::f16), q, kv, kv), StatusCode::invalid_argument, "lse dtype f16 must be f32");
  AttentionOptions bad_scale;
  bad_scale.scale = NAN;
  expect(attention(t({2, 4, 4, 64}), std::nullopt, q, kv, kv, bad_scale), StatusCode::invalid_argument,
         "options.scale must be finite");
  expect(attention(q, std::nullopt, TensorView::strided(buf.data(), DType::f16, {2, 4, 4, 64}, {1, 2, 3, 4}), kv, kv),
         StatusCode::invalid_argument, "q must have a contiguous last dim");

  // Varlen: cu_seqlens must start at 0, not decrease, end at the packed token count; both or neither.
  std::vector<int32_t> cq = {0, 5, 3}, ck = {0, 4, 8};
  AttentionOptions vo;
  vo.cu_seqlens_q = TensorView::contiguous(cq.data(), DType::i32, {3});
  vo.cu_seqlens_k = TensorView::contiguous(ck.data(), DType::i32, {3});
  const auto vq = t({3, 4, 64}), vkv = t({8, 2, 64});
  expect(attention(t({3, 4, 64}), std::nullopt, vq, vkv, vkv, vo), StatusCode::invalid_argument,
         "options.cu_seqlens_q must be non-decreasing, got options.cu_seqlens_q[2] = 3 < options.cu_seqlens_q[1] = 5");
  cq = {0, 2, 4};
  expect(attention(t({3, 4, 64}), std::nullopt, vq, vkv, vkv, vo), StatusCode::invalid_argument,
         "options.cu_seqlens_q[batch] must equal total_q (q dim 0) = 3, got 4");
  cq = {1, 2, 3};
  expect(attention(t({3, 4, 64}), std::nullopt, vq, vkv, vkv, vo), StatusCode::invalid_argument,
         "options.cu_seqlens_q[0] must be 0");
  AttentionOptions half = vo;
  half.cu_seqlens_k.reset();
  expect(attention(t({3, 4, 64}), std::nullopt, vq, vkv, vkv, half), StatusCode::invalid_argument,
         "options.cu_seqlens_k is missing");
  expect(attention(t({2, 4, 4, 64}), std::nullopt, q, kv, kv, vo), StatusCode::invalid_argument,
         "q must have 3 dims [total_q, heads, head_dim]");
  // max_seqlen_q / k: varlen only, both or neither, within the packed counts, and (checked here on the CPU) at least
  // the longest sequence: (2, 4) and (1, 4) query / key tokens.
  cq = {0, 2, 3};
  AttentionOptions mo = vo;
  mo.max_seqlen_q = 2;
  expect(attention(t({3, 4, 64}), std::nullopt, vq, vkv, vkv, mo), StatusCode::invalid_argument,
         "options.max_seqlen_k is missing: give both max_seqlen_q and max_seqlen_k, or neither");
  mo.max_seqlen_k = 9;  // past the packed count: an upper bound is fine
  EXPECT_TRUE(attention(t({3, 4, 64}), std::nullopt, vq, vkv, vkv, mo).ok());
  mo.max_seqlen_k = 0;
  expect(attention(t({3, 4, 64}), std::nullopt, vq, vkv, vkv, mo), StatusCode::invalid_argument,
         "options.max_seqlen_k = 0 with 2 sequences cannot hold 8 packed tokens");
  mo.max_seqlen_k = 3;
  expect(attention(t({3, 4, 64}), std::nullopt, vq, vkv, vkv, mo), StatusCode::invalid_argument,
         "options.max_seqlen_k = 3 is less than the longest sequence's 4 tokens");
  mo.max_seqlen_q = -1;
  expect(attention(t({3, 4, 64}), std::nullopt, vq, vkv, vkv, mo), StatusCode::invalid_argument,
         "options.max_seqlen_q = -1 must be >= 0");
  mo.max_seqlen_q = 1;
  mo.max_seqlen_k = 4;
  expect(attention(t({3, 4, 64}), std::nullopt, vq, vkv, vkv, mo), StatusCode::invalid_argument,
         "options.max_seqlen_q = 1 is less than the longest sequence's 2 tokens");
  mo.max_seqlen_q = 3;
  EXPECT_TRUE(attention(t({3, 4, 64}), std::nullopt, vq, vkv, vkv, mo).ok());
  AttentionOptions dense_max;
  dense_max.max_seqlen_k = 8;
  expect(attention(t({2, 4, 4, 64}), std::nullopt, q, kv, kv, dense_max), StatusCode::invalid_argument,
         "options.max_seqlen_k is for packed varlen batches (with cu_seqlens_q / cu_seqlens_k) only");

  // Decode: page size, block table shape, lengths within the capacity, pages within the pool.
  std::vector<int32_t> lens = {3, 40}, table = {0, 1, 2, 3};
  KvCache cache{t({2, 32, 2, 64}), t({2, 32, 2, 64}), std::nullopt,
                TensorView::contiguous(lens.data(), DType::i32, {2})};
  const auto dq = t({2, 1, 4, 64});
  expect(decode_attention(t({2, 1, 4, 64}), std::nullopt, dq, cache), StatusCode::invalid_argument,
         "cache.seqlens_k[1] = 40 must be in [0, 32]");
  KvCache paged{t({4, 12, 2, 64}), t({4, 12, 2, 64}), TensorView::contiguous(table.data(), DType::i32, {2, 2}),
                TensorView::contiguous(lens.data(), DType::i32, {2})};
  expect(decode_attention(t({2, 1, 4, 64}), std::nullopt, dq, paged), StatusCode::unsupported,
         "page size (dim 1) must be a power of two up to 256, got 12");
  paged.k = paged.v = t({4, 512, 2, 64});
  expect(decode_attention(t({2, 1, 4, 64}), std::nullopt, dq, paged), StatusCode::unsupported,
         "page size (dim 1) must be a power of two up to 256, got 512");
  paged.k = paged.v = t({4, 16, 2, 64});
  lens = {3, 20};
  table = {0, 1, 2, 9};
  expect(decode_attention(t({2, 1, 4, 64}), std::nullopt, dq, paged), StatusCode::invalid_argument,
         "cache.block_table[1, 1] = 9 must be a page in [0, 4)");
  paged.seqlens_k.reset();
  expect(decode_attention(t({2, 1, 4, 64}), std::nullopt, dq, paged), StatusCode::invalid_argument,
         "cache.seqlens_k is required with a paged cache");
  expect(decode_attention(t({2, 1, 3, 64}), std::nullopt, t({2, 1, 3, 64}), cache), StatusCode::invalid_argument,
         "q heads (3) must be a positive multiple of k/v heads (2)");
  expect(decode_attention(t({2, 1, 4, 64}), std::nullopt, dq, cache, vo), StatusCode::invalid_argument,
         "options.cu_seqlens_q/k are not used by decode");
  expect(decode_attention(t({2, 1, 4, 64}), std::nullopt, dq, cache, dense_max), StatusCode::invalid_argument,
         "options.max_seqlen_q/k are not used by decode");
}

TEST(AttentionReference, ChunkedWalkGivesTheSameBits) {
  // The references walk a head too long to hold as doubles in chunks, in two passes; forced here on small heads (5
  // keys a chunk), they must give the whole-head walk's bits: prefill (causal GQA) and decode (causal, 2 queries).
  const int64_t B = 2, SQ = 12, SK = 37, H = 8, HK = 2, D = 64, DQ = 2;
  const HostBuffer q = random_host(DType::f16, B * SQ * H * D, 31), k = random_host(DType::f16, B * SK * HK * D, 32),
                   v = random_host(DType::f16, B * SK * HK * D, 33);
  AttentionOptions o;
  o.causal = true;
  // Plain causal, then with a sliding window and a soft-cap (the chunks then start inside and past the window), then
  // with ALiBi slopes per (sequence, head) too (the bias at each chunk's absolute key positions).
  std::vector<float> slopes(static_cast<size_t>(B * H));
  for (size_t i = 0; i < slopes.size(); ++i) slopes[i] = 0.1f * static_cast<float>(i + 1);
  for (int variant = 0; variant < 3; ++variant) {
  SCOPED_TRACE(variant);
  o.window_left = variant ? 7 : -1;
  o.softcap = variant ? 4.0f : 0.0f;
  if (variant == 2) o.alibi_slopes = TensorView::contiguous(slopes.data(), DType::f32, {B, H});
  auto run = [&](HostBuffer* out, std::vector<float>* lse, HostBuffer* dout, std::vector<float>* dlse) {
    const auto kv = [&](const HostBuffer& t) {
      return TensorView::contiguous(const_cast<void*>(t.data()), DType::f16, {B, SK, HK, D});
    };
    ASSERT_TRUE(attention(TensorView::contiguous(out->data(), DType::f16, {B, SQ, H, D}),
                          TensorView::contiguous(lse->data(), DType::f32, {B, H, SQ}),
                          TensorView::contiguous(const_cast<void*>(q.data()), DType::f16, {B, SQ, H, D}), kv(k), kv(v), o)
                    .ok());
    const KvCache cache{kv(k), kv(v), std::nullopt, std::nullopt};
    ASSERT_TRUE(decode_attention(TensorView::contiguous(dout->data(), DType::f16, {B, DQ, H, D}),
                                 TensorView::contiguous(dlse->data(), DType::f32, {B, H, DQ}),
                                 TensorView::contiguous(const_cast<void*>(q.data()), DType::f16, {B, DQ, H, D}), cache, o)
                    .ok());
  };
  HostBuffer whole(DType::f16, q.size()), chunked(DType::f16, q.size()), dwhole(DType::f16, B * DQ * H * D),
      dchunked(DType::f16, B * DQ * H * D);
  std::vector<float> lw(static_cast<size_t>(B * H * SQ)), lc(lw.size()), dlw(static_cast<size_t>(B * H * DQ)),
      dlc(dlw.size());
  run(&whole, &lw, &dwhole, &dlw);
  const size_t saved = detail::reference_kv_bytes();
  detail::set_reference_kv_bytes(2 * sizeof(double) * D * 5);
  run(&chunked, &lc, &dchunked, &dlc);
  detail::set_reference_kv_bytes(saved);
  EXPECT_EQ(std::memcmp(whole.data(), chunked.data(), whole.bytes()), 0);
  EXPECT_EQ(std::memcmp(lw.data(), lc.data(), lw.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(dwhole.data(), dchunked.data(), dwhole.bytes()), 0);
  EXPECT_EQ(std::memcmp(dlw.data(), dlc.data(), dlw.size() * sizeof(float)), 0);
  }
}

TEST(Attention, SlidingWindowSoftcapAndAlibiMatchTheirDefinition) {
  // Prefill and decode against a direct float64 evaluation of the definitions (include/kernelkit/ops/attention.hpp):
  // query i at position p = i + s_k - s_q sees keys j in [p - window, p] (causal) or [p - window, s_k) (not), each
  // scaled score s becomes cap tanh(s / cap), then gets -slope |p - j| (ALiBi: per head, or per sequence and head);
  // GQA 4 / 2, s_q 6 < s_k 11, bf16, every element within one rounding.
  const int64_t B = 2, SQ = 6, SK = 11, H = 4, HK = 2, D = 64;
  const HostBuffer q = random_host(DType::bf16, B * SQ * H * D, 41, 2.0),
                   k = random_host(DType::bf16, B * SK * HK * D, 42, 2.0),
                   v = random_host(DType::bf16, B * SK * HK * D, 43);
  const struct {
    bool causal;
    int64_t window;
    float softcap;
    float alibi;     // slopes alibi 2^-h (0: no ALiBi) ...
    bool per_batch;  // ... as [batch, heads] (sequence b's times 1 + b) instead of [heads]
  } cases[] = {{true, 3, 0.0f, 0, false},   {false, 2, 0.0f, 0, false}, {true, -1, 5.0f, 0, false},
               {true, 4, 3.0f, 0, false},   {false, 0, 2.0f, 0, false}, {true, 0, 0.0f, 0, false},
               {true, -1, 0.0f, 0.5f, false}, {false, 3, 2.0f, 0.25f, true}, {false, -1, 0.0f, 1.0f, true}};
  const auto kv = [&](const HostBuffer& t) {
    return TensorView::contiguous(const_cast<void*>(t.data()), DType::bf16, {B, SK, HK, D});
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(::testing::Message() << "causal " << c.causal << " window " << c.window << " softcap " << c.softcap
                                      << " alibi " << c.alibi << (c.per_batch ? " per sequence" : ""));
    AttentionOptions o;
    o.causal = c.causal;
    o.window_left = c.window;
    o.softcap = c.softcap;
    std::vector<float> slopes;
    for (int64_t b = 0; b < (c.per_batch ? B : 1); ++b)
      for (int64_t h = 0; h < H; ++h) slopes.push_back(c.alibi * std::ldexp(1.0f, -static_cast<int>(h)) * (1 + b));
    auto slope = [&](int64_t b, int64_t h) {
      return c.alibi ? slopes[static_cast<size_t>((c.per_batch ? b : 0) * H + h)] : 0.0f;
    };
    if (c.alibi)
      o.alibi_slopes = c.per_batch ? TensorView::contiguous(slopes.data(), DType::f32, {B, H})
                                   : TensorView::contiguous(slopes.data(), DType::f32, {H});
    HostBuffer out(DType::bf16, q.size()), dout(DType::bf16, B * 2 * H * D);
    for (int64_t i = 0; i < out.size(); ++i) out.set(i, NAN);
    std::vector<float> lse(static_cast<size_t>(B * H * SQ), NAN);
    ASSERT_TRUE(attention(TensorView::contiguous(out.data(), DType::bf16, {B, SQ, H, D}),
                          TensorView::contiguous(lse.data(), DType::f32, {B, H, SQ}),
                          TensorView::contiguous(const_cast<void*>(q.data()), DType::bf16, {B, SQ, H, D}), kv(k), kv(v),
                          o)
                    .ok());
    // Decode: the first 2 query tokens as the last 2 positions of each sequence.
    ASSERT_TRUE(decode_attention(TensorView::contiguous(dout.data(), DType::bf16, {B, 2, H, D}), std::nullopt,
                                 TensorView::contiguous(const_cast<void*>(q.data()), DType::bf16, {B, 2, H, D}),
                                 KvCache{kv(k), kv(v), std::nullopt, std::nullopt}, o)
                    .ok());
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    // Query token i of sequence b, stored as row `qtok` of q ([b, s_q] tokens of H heads), against out row `row`.
    auto expect_row = [&](int64_t b, int64_t i, int64_t h, int64_t s_q, int64_t qtok, const HostBuffer& got,
                          int64_t row, const float* got_lse) {
      const int64_t p = i + SK - s_q, hi = c.causal ? std::min(p + 1, SK) : SK;
      const int64_t lo = c.window >= 0 ? std::max<int64_t>(0, p - c.window) : 0;
      std::vector<double> w;
      double m = -INFINITY;
      for (int64_t j = lo; j < hi; ++j) {
        double s = 0;
        for (int64_t x = 0; x < D; ++x)
          s += q.get((qtok * H + h) * D + x) * k.get(((b * SK + j) * HK + h / 2) * D + x);
        s *= scale;
        if (c.softcap > 0) s = c.softcap * std::tanh(s / c.softcap);
        s -= slope(b, h) * std::fabs(static_cast<double>(p - j));
        w.push_back(s);
        m = std::max(m, s);
      }
      double l = 0;
      for (double& s : w) l += (s = std::exp(s - m));
      for (int64_t x = 0; x < D; ++x) {
        double o_x = 0;
        for (int64_t j = lo; j < hi; ++j) o_x += w[static_cast<size_t>(j - lo)] * v.get(((b * SK + j) * HK + h / 2) * D + x);
        const double want = hi > lo ? o_x / l : 0.0, g = got.get(row * D + x);
        ASSERT_LE(std::fabs(g - want), std::ldexp(std::fabs(want), -8) + 1e-12) << "b " << b << " i " << i << " h " << h;
      }
      if (got_lse) {
        const double want = hi > lo ? m + std::log(l) : -INFINITY;
        if (std::isinf(want)) EXPECT_EQ(*got_lse, want);
        else EXPECT_NEAR(*got_lse, want, 1e-6 * std::max(1.0, std::fabs(want)));
      }
    };
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t i = 0; i < SQ; ++i)
          expect_row(b, i, h, SQ, b * SQ + i, out, (b * SQ + i) * H + h, &lse[(b * H + h) * SQ + i]);
        for (int64_t i = 0; i < 2; ++i) expect_row(b, i, h, 2, b * 2 + i, dout, (b * 2 + i) * H + h, nullptr);
      }
  }
  AttentionOptions bad;
  bad.window_left = -2;
  HostBuffer o1(DType::bf16, q.size());
  const auto qv = TensorView::contiguous(const_cast<void*>(q.data()), DType::bf16, {B, SQ, H, D});
  const auto ov = TensorView::contiguous(o1.data(), DType::bf16, {B, SQ, H, D});
  Status s = attention(ov, std::nullopt, qv, kv(k), kv(v), bad);
  EXPECT_NE(s.message().find("attention: options.window_left must be >= 0 (or -1: no window), got -2"),
            std::string::npos) << s.message();
  bad.window_left = -1;
  bad.softcap = -1.0f;
  s = attention(ov, std::nullopt, qv, kv(k), kv(v), bad);
  EXPECT_NE(s.message().find("attention: options.softcap must be finite and >= 0 (0: none), got -1"), std::string::npos)
      << s.message();
  bad.softcap = 0.0f;
  std::vector<float> slopes(static_cast<size_t>(B * H + 1), 0.5f);
  const struct {
    TensorView t;
    const char* message;
  } bad_slopes[] = {
      {TensorView::contiguous(slopes.data(), DType::bf16, {H}), "options.alibi_slopes dtype bf16 must be f32"},
      {TensorView::contiguous(slopes.data(), DType::f32, {H + 1}), "options.alibi_slopes shape [5] must be [heads=4]"},
      {TensorView::contiguous(slopes.data(), DType::f32, {B + 1, H}),
       "options.alibi_slopes shape [3, 4] must be [batch=2, heads=4]"},
      {TensorView::contiguous(slopes.data(), DType::f32, {B, H, 1}),
       "options.alibi_slopes shape [2, 4, 1] must be [heads=4]"},
  };
  for (const auto& b : bad_slopes) {
    bad.alibi_slopes = b.t;
    s = attention(ov, std::nullopt, qv, kv(k), kv(v), bad);
    EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.to_string();
    EXPECT_NE(s.message().find(b.message), std::string::npos) << s.message();
    s = decode_attention(TensorView::contiguous(o1.data(), DType::bf16, {B, 2, H, D}), std::nullopt,
                         TensorView::contiguous(const_cast<void*>(q.data()), DType::bf16, {B, 2, H, D}),
                         KvCache{kv(k), kv(v), std::nullopt, std::nullopt}, bad);
    EXPECT_NE(s.message().find(b.message), std::string::npos) << s.message();
  }
}

TEST(DecodeAttention, PagesBeforeTheWindowAreNeverRead) {
  // A sliding-window decode reads only the pages from the first query's window start: pages wholly before it may be
  // evicted (block table entries -1, as a server frees them) and the call equals the one over a full table. Two
  // sequences of 70 and 45 keys, pages of 8, 2 causal queries, window 20: sequence 0 sees keys 48.., pages 6.. only.
  const int64_t B = 2, SQ = 2, H = 4, HK = 2, D = 64, PAGE = 8, MP = 9, W = 20;
  const std::vector<int32_t> lens = {70, 45};
  const HostBuffer q = random_host(DType::f16, B * SQ * H * D, 51),
                   k = random_host(DType::f16, B * MP * PAGE * HK * D, 52),
                   v = random_host(DType::f16, B * MP * PAGE * HK * D, 53);
  std::vector<int32_t> table(static_cast<size_t>(B * MP));
  std::iota(table.begin(), table.end(), 0);
  std::vector<int32_t> evicted = table;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; (p + 1) * PAGE <= lens[static_cast<size_t>(b)] - SQ - W; ++p)
      evicted[static_cast<size_t>(b * MP + p)] = -1;
  ASSERT_EQ(evicted[5], -1);  // sequence 0's pages 0..5 (keys 0..47) are gone
  AttentionOptions o;
  o.causal = true;
  o.window_left = W;
  auto run = [&](std::vector<int32_t>& bt, HostBuffer* out) {
    const auto pool = [&](const HostBuffer& t) {
      return TensorView::contiguous(const_cast<void*>(t.data()), DType::f16, {B * MP, PAGE, HK, D});
    };
    return decode_attention(TensorView::contiguous(out->data(), DType::f16, {B, SQ, H, D}), std::nullopt,
                            TensorView::contiguous(const_cast<void*>(q.data()), DType::f16, {B, SQ, H, D}),
                            KvCache{pool(k), pool(v), TensorView::contiguous(bt.data(), DType::i32, {B, MP}),
                                    TensorView::contiguous(const_cast<int32_t*>(lens.data()), DType::i32, {B})},
                            o);
  };
  HostBuffer full(DType::f16, q.size()), gone(DType::f16, q.size());
  ASSERT_TRUE(run(table, &full).ok());
  const Status s = run(evicted, &gone);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(std::memcmp(full.data(), gone.data(), full.bytes()), 0);
  o.window_left = -1;  // without the window those pages are read: refused, naming the entry
  const Status all = run(evicted, &gone);
  EXPECT_NE(all.message().find("cache.block_table[0, 0] = -1"), std::string::npos) << all.message();
}

TEST(DecodeReference, LongPagedCacheRunsInBoundedMemory) {
  // 2^21 keys of one head through a block table that repeats 4 pages: the input is small, but the whole head as
  // doubles would be 2 GiB. The reference walks it in chunks; the softmax over keys that repeat evenly equals the one
  // over the 64 distinct keys, with lse larger by log(repeats).
  const int64_t D = 64, PAGE = 16, PAGES = 4, KEYS = int64_t{1} << 21, MP = KEYS / PAGE;
  const HostBuffer q = random_host(DType::f16, D, 41), k = random_host(DType::f16, PAGES * PAGE * D, 42),
                   v = random_host(DType::f16, PAGES * PAGE * D, 43);
  std::vector<int32_t> table(static_cast<size_t>(MP)), lens = {static_cast<int32_t>(KEYS)}, short_len = {PAGES * PAGE};
  for (int64_t p = 0; p < MP; ++p) table[static_cast<size_t>(p)] = static_cast<int32_t>(p % PAGES);
  const auto pool = [&](const HostBuffer& t) {
    return TensorView::contiguous(const_cast<void*>(t.data()), DType::f16, {PAGES, PAGE, 1, D});
  };
  const auto qv = TensorView::contiguous(const_cast<void*>(q.data()), DType::f16, {1, 1, 1, D});
  HostBuffer out(DType::f16, D), want(DType::f16, D);
  float lse = 0, want_lse = 0;
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const KvCache paged{pool(k), pool(v), TensorView::contiguous(table.data(), DType::i32, {1, MP}),
                      TensorView::contiguous(lens.data(), DType::i32, {1})};
  ASSERT_TRUE(decode_attention(TensorView::contiguous(out.data(), DType::f16, {1, 1, 1, D}),
                               TensorView::contiguous(&lse, DType::f32, {1, 1, 1}), qv, paged)
                  .ok());
  getrusage(RUSAGE_SELF, &after);
  const double grown_mib = static_cast<double>(after.ru_maxrss - before.ru_maxrss) / 1024.0;  // ru_maxrss: KiB
  EXPECT_LT(grown_mib, 512.0) << "the reference held " << grown_mib << " MiB";
  std::vector<int32_t> first = {0, 1, 2, 3};
  const KvCache distinct{pool(k), pool(v), TensorView::contiguous(first.data(), DType::i32, {1, PAGES}),
                         TensorView::contiguous(short_len.data(), DType::i32, {1})};
  ASSERT_TRUE(decode_attention(TensorView::contiguous(want.data(), DType::f16, {1, 1, 1, D}),
                               TensorView::contiguous(&want_lse, DType::f32, {1, 1, 1}), qv, distinct)
                  .ok());
  const double rtol = kernelkit::testing::tolerance(DType::f16).rtol;
  for (int64_t i = 0; i < D; ++i) EXPECT_NEAR(out.get(i), want.get(i), rtol * (std::fabs(want.get(i)) + 1e-3)) << i;
  EXPECT_NEAR(lse, want_lse + std::log(static_cast<double>(KEYS / (PAGES * PAGE))), 1e-5 * (std::fabs(lse) + 1));
}

// ---- e4m3 caches: codes dequantized exactly (code * scale), then the decode of the dequantized cache

TEST(DecodeAttentionFp8, ReferenceByHand) {
  // One sequence of 3 keys, 2 query heads on 2 KV heads of 16 dims, scale 1: q = e_0, so head h's scores are
  // k_scale[h] times the keys' first codes. Head 0 (k_scale 0.5, v_scale 0.25): codes 2, 1, 0 give scores 1, 0.5, 0;
  // v's first codes 1, -2 and 448 (the largest), second codes 2^-9 (the smallest subnormal), 0, 0. Head 1 (k_scale 2,
  // v_scale 1): codes -0.5, 0.5, 0 give scores -1, 1, 0.
  const int64_t HK = 2, D = 16, S = 3;
  std::vector<uint8_t> k(S * HK * D, 0x00), v(S * HK * D, 0x00);
  auto at = [&](int64_t j, int64_t h, int64_t i) { return static_cast<size_t>((j * HK + h) * D + i); };
  const uint8_t k0[S] = {0x40, 0x38, 0x00}, k1[S] = {0xb0, 0x30, 0x00}, v0[S] = {0x38, 0xc0, 0x7e};
  for (int64_t j = 0; j < S; ++j) {
    k[at(j, 0, 0)] = k0[j], k[at(j, 1, 0)] = k1[j];
    v[at(j, 0, 0)] = v0[j], v[at(j, 1, 0)] = v0[j];
  }
  v[at(0, 0, 1)] = 0x01;
  v[at(2, 1, 5)] = 0x01;
  HostBuffer q(DType::f16, HK * D), out(DType::f16, HK * D);
  for (int64_t h = 0; h < HK; ++h) q.set(h * D, 1.0);
  std::vector<float> k_scale = {0.5f, 2.0f}, v_scale = {0.25f, 1.0f}, lse(HK);
  KvCache cache{TensorView::contiguous(k.data(), DType::f8e4m3, {1, S, HK, D}),
                TensorView::contiguous(v.data(), DType::f8e4m3, {1, S, HK, D})};
  cache.k_scale = TensorView::contiguous(k_scale.data(), DType::f32, {HK});
  cache.v_scale = TensorView::contiguous(v_scale.data(), DType::f32, {HK});
  AttentionOptions o;
  o.scale = 1.0f;
  const Status s = decode_attention(TensorView::contiguous(out.data(), DType::f16, {1, 1, HK, D}),
                                    TensorView::contiguous(lse.data(), DType::f32, {1, HK, 1}),
                                    TensorView::contiguous(q.data(), DType::f16, {1, 1, HK, D}), cache, o);
  ASSERT_TRUE(s.ok()) << s.to_string();
  const double e = std::exp(1.0), r = std::exp(0.5);
  std::vector<double> want(HK * D, 0.0);
  want[0] = (e * 0.25 + r * -0.5 + 448 * 0.25) / (e + r + 1);  // head 0
  want[1] = e * 0x1p-9 * 0.25 / (e + r + 1);
  want[D] = (1 / e * 1 + e * -2 + 448) / (1 / e + e + 1);  // head 1
  want[D + 5] = 0x1p-9 / (1 / e + e + 1);
  for (int64_t i = 0; i < HK * D; ++i)
    EXPECT_NEAR(out.get(i), want[static_cast<size_t>(i)], std::ldexp(std::fabs(want[static_cast<size_t>(i)]), -11))
        << i;
  EXPECT_NEAR(lse[0], std::log(e + r + 1), 1e-6);
  EXPECT_NEAR(lse[1], std::log(1 / e + e + 1), 1e-6);
}

namespace {
// e4m3 K / V of `elems` codes ([.., HK, D] rows), random with every 13th the largest and every 17th a subnormal, at
// scales (per tensor, or per KV head) whose products with every code are exact in bf16 / f16; kd / vd hold those
// products in dt (checked exact).
struct ExactFp8Kv {
  std::vector<float> k_scale, v_scale;
  HostBuffer k, v, kd, vd;
};
ExactFp8Kv exact_fp8_kv(DType dt, bool per_head, int64_t elems, int64_t HK, int64_t D, uint64_t& seed) {
  ExactFp8Kv r{{0x1p-4f * 0.75f, 0x1p-3f},
               {0x1p-5f, 0x1p-6f * 1.5f},
               random_host(DType::f8e4m3, elems, seed),
               random_host(DType::f8e4m3, elems, seed + 1),
               HostBuffer(dt, elems),
               HostBuffer(dt, elems)};
  seed += 2;
  if (!per_head) r.k_scale.resize(1), r.v_scale.resize(1);
  for (int64_t i = 0; i < elems; ++i) {
    if (i % 13 == 0) r.k.set(i, i % 2 ? -kE4m3Max : kE4m3Max), r.v.set(i, kE4m3Max);
    if (i % 17 == 0) r.k.set(i, 0x1p-9 * (1 + i % 7)), r.v.set(i, -0x1p-9 * (1 + i % 5));
  }
  for (int64_t i = 0; i < elems; ++i) {
    const auto h = static_cast<size_t>(per_head ? (i / D) % HK : 0);
    r.kd.set(i, r.k.get(i) * r.k_scale[h]), r.vd.set(i, r.v.get(i) * r.v_scale[h]);
    EXPECT_EQ(r.kd.get(i), r.k.get(i) * r.k_scale[h]) << "not exact in " << dt;
    EXPECT_EQ(r.vd.get(i), r.v.get(i) * r.v_scale[h]) << "not exact in " << dt;
  }
  return r;
}
}  // namespace

TEST(DecodeAttentionFp8, EqualsDecodeOfTheDequantizedCache) {
  // Random codes (every 13th the largest, every 17th a subnormal one) at scales whose products with every code are
  // exact in bf16 / f16: the e4m3 cache and the cache holding code * scale give the same output bits, contiguous and
  // paged (pages of 8, shuffled), GQA 4, two causal queries, with a window, a soft-cap and ALiBi; scales per tensor
  // and per KV head.
  const int64_t B = 2, SQ = 2, H = 8, HK = 2, D = 64, CAP = 40, PAGE = 8, MP = CAP / PAGE;
  std::vector<int32_t> lens = {37, 20}, table(B * MP);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(9));
  uint64_t seed = 301;
  for (DType dt : {DType::bf16, DType::f16})
    for (bool per_head : {false, true})
      for (int variant = 0; variant < 3; ++variant) {
        SCOPED_TRACE(::testing::Message() << dt << (per_head ? " per head" : "") << " variant " << variant);
        auto [k_scale, v_scale, k, v, kd, vd] = exact_fp8_kv(dt, per_head, B * CAP * HK * D, HK, D, seed);
        HostBuffer q = random_host(dt, B * SQ * H * D, seed++, 2.0), o8(dt, q.size()), od(dt, q.size());
        std::vector<float> lse8(B * H * SQ), lsed(B * H * SQ), slopes(H, 0.125f);
        AttentionOptions o;
        o.causal = true;
        if (variant == 1) o.window_left = 9, o.softcap = 5.0f;
        if (variant == 2) o.alibi_slopes = TensorView::contiguous(slopes.data(), DType::f32, {H});
        for (bool paged : {false, true}) {
          const auto cache_view = [&](HostBuffer& t) {
            return paged ? TensorView::contiguous(t.data(), t.dtype(), {B * MP, PAGE, HK, D})
                         : TensorView::contiguous(t.data(), t.dtype(), {B, CAP, HK, D});
          };
          const std::optional<TensorView> bt =
              paged ? std::optional(TensorView::contiguous(table.data(), DType::i32, {B, MP})) : std::nullopt;
          const auto seqlens = TensorView::contiguous(lens.data(), DType::i32, {B});
          KvCache fp8{cache_view(k), cache_view(v), bt, seqlens};
          fp8.k_scale = TensorView::contiguous(k_scale.data(), DType::f32, {static_cast<int64_t>(k_scale.size())});
          fp8.v_scale = TensorView::contiguous(v_scale.data(), DType::f32, {static_cast<int64_t>(v_scale.size())});
          const auto qv = TensorView::contiguous(q.data(), dt, {B, SQ, H, D});
          Status s = decode_attention(TensorView::contiguous(o8.data(), dt, {B, SQ, H, D}),
                                      TensorView::contiguous(lse8.data(), DType::f32, {B, H, SQ}), qv, fp8, o);
          ASSERT_TRUE(s.ok()) << s.to_string();
          s = decode_attention(TensorView::contiguous(od.data(), dt, {B, SQ, H, D}),
                               TensorView::contiguous(lsed.data(), DType::f32, {B, H, SQ}), qv,
                               KvCache{cache_view(kd), cache_view(vd), bt, seqlens}, o);
          ASSERT_TRUE(s.ok()) << s.to_string();
          EXPECT_EQ(std::memcmp(o8.data(), od.data(), o8.bytes()), 0) << (paged ? "paged" : "contiguous");
          EXPECT_EQ(lse8, lsed) << (paged ? "paged" : "contiguous");
        }
      }
}

TEST(DecodeAttentionFp8, CaseGridKeepsOutputsWithinTheValues) {
  // The harness's e4m3 cases (extreme and subnormal codes, NaN codes past every sequence's length) on the CPU backend:
  // every output within [min v, max v] of the dequantized values, lse finite or -inf.
  uint64_t seed = 401;
  for (DType dt : {DType::f16, DType::bf16})
    for (bool paged : {false, true})
      for (bool per_head : {false, true}) {
        kernelkit::testing::AttentionCase c{OpId::decode_attention, dt, 3, 2, 300, 8, 2, 128, true};
        c.paged = paged, c.fp8 = true, c.scale_per_head = per_head, c.seed = seed++;
        const auto r = kernelkit::testing::check_attention_properties(c);
        EXPECT_TRUE(r.passed()) << c.name() << ": " << r.status.to_string() << "\n" << r.detail;
      }
}

TEST(DecodeAttentionFp8, BadInputsNameTheArgumentAndTheExpectation) {
  const int64_t B = 1, H = 4, HK = 2, D = 64, CAP = 8;
  HostBuffer q = random_host(DType::bf16, B * H * D, 1), out(DType::bf16, q.size());
  HostBuffer k(DType::f8e4m3, B * CAP * HK * D), v(DType::f8e4m3, k.size()), k16(DType::bf16, k.size());
  std::vector<float> ks = {0.5f, 0.25f, 1.0f}, vs = {0.125f};
  const auto qv = TensorView::contiguous(q.data(), DType::bf16, {B, 1, H, D});
  const auto ov = TensorView::contiguous(out.data(), DType::bf16, {B, 1, H, D});
  const auto cv = [](HostBuffer& t, DType dt) { return TensorView::contiguous(t.data(), dt, {B, CAP, HK, D}); };
  const auto scale = [](std::vector<float>& s, std::initializer_list<int64_t> shape, DType dt = DType::f32) {
    return std::optional(TensorView::contiguous(s.data(), dt, shape));
  };
  auto run = [&](const TensorView& kc, const TensorView& vc, std::optional<TensorView> k_scale,
                 std::optional<TensorView> v_scale) {
    KvCache cache{kc, vc};
    cache.k_scale = k_scale, cache.v_scale = v_scale;
    return decode_attention(ov, std::nullopt, qv, cache);
  };
  const auto k8 = cv(k, DType::f8e4m3), v8 = cv(v, DType::f8e4m3);
  ASSERT_TRUE(run(k8, v8, scale(ks, {HK}), scale(vs, {1})).ok());
  expect(run(k8, v8, std::nullopt, scale(vs, {1})), StatusCode::invalid_argument,
         "decode_attention: cache.k_scale is required with an f8e4m3 cache (stored code * scale = value)");
  expect(run(k8, v8, scale(ks, {1}), std::nullopt), StatusCode::invalid_argument,
         "decode_attention: cache.v_scale is required with an f8e4m3 cache");
  expect(run(cv(k16, DType::bf16), cv(k16, DType::bf16), scale(ks, {HK}), std::nullopt), StatusCode::invalid_argument,
         "decode_attention: cache.k_scale is for f8e4m3 caches only (cache.k is not e4m3)");
  expect(run(k8, v8, scale(ks, {3}), scale(vs, {1})), StatusCode::invalid_argument,
         "decode_attention: cache.k_scale shape [3] must be [1] (per tensor) or [kv_heads=2] (per KV head)");
  expect(run(k8, v8, scale(ks, {HK}), scale(vs, {1}, DType::f16)), StatusCode::invalid_argument,
         "decode_attention: cache.v_scale dtype f16 must be f32");
  expect(run(k8, cv(k16, DType::bf16), scale(ks, {HK}), scale(vs, {1})), StatusCode::invalid_argument,
         "decode_attention: cache.v dtype bf16 must be f8e4m3");
  expect(run(cv(k16, DType::bf16), v8, std::nullopt, std::nullopt), StatusCode::invalid_argument,
         "decode_attention: cache.v dtype f8e4m3 does not match q dtype bf16");
  expect(run(cv(k, DType::f8e5m2), cv(v, DType::f8e5m2), scale(ks, {HK}), scale(vs, {1})), StatusCode::unsupported,
         "decode_attention: cache.k dtype f8e5m2 is not supported (an FP8 cache is f8e4m3");
  // q and out stay f16 / bf16.
  HostBuffer q8(DType::f8e4m3, q.size()), o8(DType::f8e4m3, q.size());
  expect(decode_attention(TensorView::contiguous(o8.data(), DType::f8e4m3, {B, 1, H, D}), std::nullopt,
                          TensorView::contiguous(q8.data(), DType::f8e4m3, {B, 1, H, D}),
                          KvCache{k8, v8, std::nullopt, std::nullopt, scale(ks, {HK}), scale(vs, {1})}),
         StatusCode::invalid_argument, "decode_attention: q dtype f8e4m3 is not supported (expected f16 or bf16)");
  // attention's scales (options) are not decode's.
  AttentionOptions with_scales;
  with_scales.k_scale = scale(ks, {HK});
  expect(decode_attention(ov, std::nullopt, qv,
                          KvCache{k8, v8, std::nullopt, std::nullopt, scale(ks, {HK}), scale(vs, {1})}, with_scales),
         StatusCode::invalid_argument,
         "decode_attention: options.k_scale is for attention's e4m3 k / v; decode's e4m3 cache takes its scales in "
         "cache.k_scale / v_scale");
}

// ---- attention (the prefill) over e4m3 k / v: dequantized exactly (code * scale), then the 16-bit prefill's
//      reference

TEST(AttentionFp8, EqualsAttentionOfTheDequantizedKv) {
  // Random codes (every 13th the largest, every 17th a subnormal one) at scales whose products with every code are
  // exact in bf16 / f16: e4m3 k / v and k / v holding code * scale give the same output and lse bits, dense (k / v
  // seen through a padded batch stride) and varlen, causal or not, GQA 4, plain, with a window and a soft-cap, and
  // with ALiBi; scales per tensor and per KV head.
  const int64_t B = 2, SQ = 9, SK = 23, PAD = 3, H = 8, HK = 2, D = 32;
  std::vector<int32_t> cu_q = {0, 9, 13}, cu_k = {0, 23, 30};  // varlen: 9 / 4 queries over 23 / 7 keys
  const int64_t ROWS = B * (SK + PAD);                         // k / v rows stored (varlen uses the first 30)
  uint64_t seed = 601;
  for (DType dt : {DType::bf16, DType::f16})
    for (bool per_head : {false, true})
      for (int variant = 0; variant < 3; ++variant) {
        SCOPED_TRACE(::testing::Message() << dt << (per_head ? " per head" : "") << " variant " << variant);
        auto [k_scale, v_scale, k, v, kd, vd] = exact_fp8_kv(dt, per_head, ROWS * HK * D, HK, D, seed);
        HostBuffer q = random_host(dt, B * SQ * H * D, seed++, 2.0), o8(dt, q.size()), od(dt, q.size());
        std::vector<float> lse8(B * H * SQ), lsed(B * H * SQ), slopes(H, 0.125f);
        for (bool varlen : {false, true})
          for (bool causal : {false, true}) {
            AttentionOptions o;
            o.causal = causal;
            if (variant == 1) o.window_left = 5, o.softcap = 5.0f;
            if (variant == 2) o.alibi_slopes = TensorView::contiguous(slopes.data(), DType::f32, {H});
            if (varlen) {
              o.cu_seqlens_q = TensorView::contiguous(cu_q.data(), DType::i32, {B + 1});
              o.cu_seqlens_k = TensorView::contiguous(cu_k.data(), DType::i32, {B + 1});
            }
            const int64_t TQ = cu_q.back(), TK = cu_k.back();
            const auto heads = [&](HostBuffer& t, int64_t s, int64_t n, int64_t total) {
              return varlen ? TensorView::contiguous(t.data(), t.dtype(), {total, n, D})
                            : TensorView::contiguous(t.data(), t.dtype(), {B, s, n, D});
            };
            const auto kv = [&](HostBuffer& t) {
              return varlen ? TensorView::contiguous(t.data(), t.dtype(), {TK, HK, D})
                            : TensorView::strided(t.data(), t.dtype(), {B, SK, HK, D},
                                                  {(SK + PAD) * HK * D, HK * D, D, 1});
            };
            const auto lse = [&](std::vector<float>& l) {
              return varlen ? TensorView::contiguous(l.data(), DType::f32, {H, TQ})
                            : TensorView::contiguous(l.data(), DType::f32, {B, H, SQ});
            };
            AttentionOptions o8opt = o;
            o8opt.k_scale = TensorView::contiguous(k_scale.data(), DType::f32, {static_cast<int64_t>(k_scale.size())});
            o8opt.v_scale = TensorView::contiguous(v_scale.data(), DType::f32, {static_cast<int64_t>(v_scale.size())});
            o8.poison(), od.poison();
            std::fill(lse8.begin(), lse8.end(), 1.0f), std::fill(lsed.begin(), lsed.end(), 2.0f);
            Status s = attention(heads(o8, SQ, H, TQ), lse(lse8), heads(q, SQ, H, TQ), kv(k), kv(v), o8opt);
            ASSERT_TRUE(s.ok()) << s.to_string();
            s = attention(heads(od, SQ, H, TQ), lse(lsed), heads(q, SQ, H, TQ), kv(kd), kv(vd), o);
            ASSERT_TRUE(s.ok()) << s.to_string();
            const size_t n = static_cast<size_t>(varlen ? TQ * H : B * SQ * H);
            EXPECT_EQ(std::memcmp(o8.data(), od.data(), n * D * dtype_size(dt)), 0)
                << (varlen ? "varlen" : "dense") << (causal ? " causal" : "");
            int64_t unwritten = 0;  // both poisoned alike: every element must have been written
            for (int64_t i = 0; i < static_cast<int64_t>(n) * D; ++i) unwritten += std::isnan(o8.get(i)) ? 1 : 0;
            EXPECT_EQ(unwritten, 0);
            EXPECT_TRUE(std::equal(lse8.begin(), lse8.begin() + static_cast<std::ptrdiff_t>(n), lsed.begin()))
                << (varlen ? "varlen" : "dense") << (causal ? " causal" : "");
          }
      }
}

TEST(AttentionFp8, CaseGridKeepsOutputsWithinTheValues) {
  // The harness's e4m3 cases for attention (extreme and subnormal codes, NaN codes in the padding rows of the dense
  // views) on the CPU backend: every output within [min v, max v] of the dequantized values, lse finite or -inf.
  uint64_t seed = 701;
  for (DType dt : {DType::f16, DType::bf16})
    for (bool varlen : {false, true})
      for (bool per_head : {false, true}) {
        kernelkit::testing::AttentionCase c{OpId::attention, dt, 3, 37, 70, 8, 2, 128, true};
        c.varlen = varlen, c.kv_pad = varlen ? 0 : 5, c.fp8 = true, c.scale_per_head = per_head, c.seed = seed++;
        const auto r = kernelkit::testing::check_attention_properties(c);
        EXPECT_TRUE(r.passed()) << c.name() << ": " << r.status.to_string() << "\n" << r.detail;
        EXPECT_GT(r.checked, 0) << c.name();
      }
}

TEST(AttentionFp8, BadInputsNameTheArgumentAndTheExpectation) {
  const int64_t B = 1, S = 8, H = 4, HK = 2, D = 64;
  HostBuffer q = random_host(DType::bf16, B * S * H * D, 1), out(DType::bf16, q.size());
  HostBuffer k(DType::f8e4m3, B * S * HK * D), v(DType::f8e4m3, k.size()), k16(DType::bf16, k.size());
  std::vector<float> ks = {0.5f, 0.25f, 1.0f}, vs = {0.125f};
  const auto qv = TensorView::contiguous(q.data(), DType::bf16, {B, S, H, D});
  const auto ov = TensorView::contiguous(out.data(), DType::bf16, {B, S, H, D});
  const auto kvv = [](HostBuffer& t, DType dt) { return TensorView::contiguous(t.data(), dt, {B, S, HK, D}); };
  const auto scale = [](std::vector<float>& s, std::initializer_list<int64_t> shape, DType dt = DType::f32,
                        Device dev = Device::cpu()) {
    return std::optional(TensorView::contiguous(s.data(), dt, shape, dev));
  };
  auto run = [&](const TensorView& kt, const TensorView& vt, std::optional<TensorView> k_scale,
                 std::optional<TensorView> v_scale) {
    AttentionOptions o;
    o.k_scale = k_scale, o.v_scale = v_scale;
    return attention(ov, std::nullopt, qv, kt, vt, o);
  };
  const auto k8 = kvv(k, DType::f8e4m3), v8 = kvv(v, DType::f8e4m3), kb = kvv(k16, DType::bf16);
  ASSERT_TRUE(run(k8, v8, scale(ks, {HK}), scale(vs, {1})).ok());
  expect(run(k8, v8, std::nullopt, scale(vs, {1})), StatusCode::invalid_argument,
         "attention: options.k_scale is required with an f8e4m3 cache (stored code * scale = value)");
  expect(run(k8, v8, scale(ks, {1}), std::nullopt), StatusCode::invalid_argument,
         "attention: options.v_scale is required with an f8e4m3 cache");
  expect(run(kb, kb, scale(ks, {HK}), std::nullopt), StatusCode::invalid_argument,
         "attention: options.k_scale is for f8e4m3 caches only (k is not e4m3)");
  expect(run(kb, kb, std::nullopt, scale(vs, {1})), StatusCode::invalid_argument,
         "attention: options.v_scale is for f8e4m3 caches only (k is not e4m3)");
  expect(run(k8, v8, scale(ks, {3}), scale(vs, {1})), StatusCode::invalid_argument,
         "attention: options.k_scale shape [3] must be [1] (per tensor) or [kv_heads=2] (per KV head)");
  expect(run(k8, v8, scale(ks, {1, 1}), scale(vs, {1})), StatusCode::invalid_argument,
         "attention: options.k_scale shape [1, 1] must be [1] (per tensor) or [kv_heads=2] (per KV head)");
  expect(run(k8, v8, scale(ks, {HK}), scale(vs, {1}, DType::f16)), StatusCode::invalid_argument,
         "attention: options.v_scale dtype f16 must be f32");
  expect(run(k8, v8, scale(ks, {HK}, DType::f32, Device::cuda(0)), scale(vs, {1})), StatusCode::invalid_argument,
         "attention: options.k_scale is on cuda:0 but q is on cpu");
  expect(run(k8, kb, scale(ks, {HK}), scale(vs, {1})), StatusCode::invalid_argument,
         "attention: v dtype bf16 must be f8e4m3");
  expect(run(kb, v8, std::nullopt, std::nullopt), StatusCode::invalid_argument,
         "attention: v dtype f8e4m3 does not match q dtype bf16");
  expect(run(kvv(k, DType::f8e5m2), kvv(v, DType::f8e5m2), scale(ks, {HK}), scale(vs, {1})), StatusCode::unsupported,
         "attention: k dtype f8e5m2 is not supported (an FP8 cache is f8e4m3");
  // q and out stay f16 / bf16.
  HostBuffer q8(DType::f8e4m3, q.size()), o8(DType::f8e4m3, q.size());
  AttentionOptions o;
  o.k_scale = scale(ks, {HK}), o.v_scale = scale(vs, {1});
  expect(attention(TensorView::contiguous(o8.data(), DType::f8e4m3, {B, S, H, D}), std::nullopt,
                   TensorView::contiguous(q8.data(), DType::f8e4m3, {B, S, H, D}), k8, v8, o),
         StatusCode::invalid_argument, "attention: q dtype f8e4m3 is not supported (expected f16 or bf16)");

  // The CUDA checks, on a CUDA call's arguments as the op builds them (validation needs no device): head_dim a
  // multiple of 16, 16-byte rows of codes, and a profile with FP8 (the a100 and t4 ones refuse it as for any FP8
  // tensor).
  detail::AttentionArgs a;
  a.dtype = DType::bf16, a.kv_dtype = DType::f8e4m3, a.device = Device::cuda(0);
  a.rows = B * S, a.batch = B, a.heads = H, a.kv_heads = HK, a.head_dim = 72, a.s_q = S, a.s_k = S;
  alignas(16) static unsigned char storage[16];
  a.q = a.k = a.v = a.out = storage;
  a.q_st = a.o_st = {S * H * 72, H * 72, 72};
  a.k_st = a.v_st = {S * HK * 80, HK * 80, 80};  // 16-byte rows of codes, padded: the head_dim itself is refused
  const DeviceProfile h100 = *find_profile("h100"), a100 = *find_profile("a100"), t4 = *find_profile("t4");
  expect(detail::validate_attention(a, &h100), StatusCode::unsupported,
         "attention: an e4m3 cache needs head_dim a multiple of 16 on CUDA (rows of 16-byte chunks), got 72");
  a.head_dim = 64;
  a.q_st = a.o_st = {S * H * 64, H * 64, 64};
  a.k_st = a.v_st = {S * HK * 64, HK * 64, 64};
  EXPECT_TRUE(detail::validate_attention(a, &h100).ok());
  a.v_st.head = 72;  // a multiple of 8 (16-bit rows) but not of 16 codes
  expect(detail::validate_attention(a, &h100), StatusCode::unsupported,
         "attention: v strides must be multiples of 16 elements on CUDA (16-byte rows), got 72");
  a.v_st.head = 64;
  expect(detail::validate_attention(a, &a100), StatusCode::unsupported,
         "attention: k dtype f8e4m3 is not supported on profile a100-80gb (sm_80 has no FP8 tensor cores); use bf16");
  a.dtype = DType::f16;
  expect(detail::validate_attention(a, &t4), StatusCode::unsupported,
         "attention: k dtype f8e4m3 is not supported on profile t4 (sm_75 has no FP8 tensor cores); use f16");
}

// The prefill kernels' per-element mask (flash_prefill.cuh, score_tile) through each row's visible span of keys: a
// key is inside the span exactly when the rule hides it not: past the sequence end, past the row's position (causal),
// before the window's start. Rows, key tiles, lengths, offsets and windows around every boundary.
TEST(AttentionMask, VisibleKeySpanMatchesTheMaskRule) {
  int checked = 0;
  for (int s_k : {1, 7, 64, 130, 1000})
    for (int offset : {0, 3, 500})
      for (int window : {-1, 0, 5, 127})
        for (bool causal : {false, true})
          for (int row = 0; row < 40; row += 3)
            for (int key0 = 0; key0 < s_k + 10; key0 += 7) {
              const detail::KeySpan span = detail::visible_key_span(row, key0, s_k, causal, offset, window);
              for (int j = 0; j < 128; ++j) {
                const int col = key0 + j;
                const bool hidden =
                    col >= s_k || (causal && col > row + offset) || (window >= 0 && col < row + offset - window);
                ASSERT_EQ(j >= span.lo && j <= span.hi, !hidden)
                    << "s_k " << s_k << " offset " << offset << " window " << window << " causal " << causal << " row "
                    << row << " key0 " << key0 << " j " << j;
                ++checked;
              }
            }
  EXPECT_GT(checked, 1000000);
}

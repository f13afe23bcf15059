// The C++ Llama decoder layer on CPU tensors (every op's reference) against the layer written out naively in fp64:
// a prefill of two sequences, then two decode steps reading the cache it wrote. GQA (4 query heads, 2 KV heads).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernelkit/dtype.hpp"
#include "kernelkit/llama.hpp"
#include "kernelkit/ops.hpp"

using namespace kernelkit;

namespace {

using Vec = std::vector<double>;

struct Naive {
  LlamaLayerConfig c;
  Vec in_norm, qkv, o, post_norm, gate_up, down;           // row-major [out, in]
  std::vector<std::vector<Vec>> k_cache, v_cache;            // [b][position] -> kv_heads * D

  Vec matvec(const Vec& w, const Vec& x, int64_t out) const {
    const int64_t in = static_cast<int64_t>(x.size());
    Vec y(static_cast<size_t>(out), 0.0);
    for (int64_t i = 0; i < out; ++i)
      for (int64_t j = 0; j < in; ++j) y[i] += w[i * in + j] * x[j];
    return y;
  }
  Vec rms(const Vec& x, const Vec& w) const {
    double ms = 0;
    for (double v : x) ms += v * v;
    const double r = 1.0 / std::sqrt(ms / static_cast<double>(x.size()) + c.eps);
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[i];
    return y;
  }
  void rope(double* v, int64_t pos) const {  // neox: pairs (j, j + D/2)
    const int64_t D = c.head_dim, half = D / 2;
    for (int64_t j = 0; j < half; ++j) {
      const double a = pos * std::pow(c.rope_theta, -2.0 * j / D), x0 = v[j], x1 = v[j + half];
      v[j] = x0 * std::cos(a) - x1 * std::sin(a);
      v[j + half] = x1 * std::cos(a) + x0 * std::sin(a);
    }
  }
  // One token of sequence `seq` at position `pos` (its earlier tokens are in the cache): returns the layer output.
  Vec token(const Vec& x, int64_t seq, int64_t pos) {
    const int64_t D = c.head_dim, H = c.hidden, group = c.heads / c.kv_heads;
    Vec qkvv = matvec(qkv, rms(x, in_norm), (c.heads + 2 * c.kv_heads) * D);
    for (int64_t h = 0; h < c.heads + c.kv_heads; ++h) rope(&qkvv[h * D], pos);
    auto& kc = k_cache[seq];
    auto& vc = v_cache[seq];
    kc.resize(static_cast<size_t>(pos + 1));
    vc.resize(static_cast<size_t>(pos + 1));
    kc[pos] = Vec(qkvv.begin() + c.heads * D, qkvv.begin() + (c.heads + c.kv_heads) * D);
    vc[pos] = Vec(qkvv.begin() + (c.heads + c.kv_heads) * D, qkvv.end());
    Vec attn(static_cast<size_t>(c.heads * D), 0.0);
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t g = h / group;
      Vec s(static_cast<size_t>(pos + 1));
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j <= pos; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += qkvv[h * D + d] * kc[j][g * D + d];
        s[j] = dot / std::sqrt(static_cast<double>(D));
        mx = std::max(mx, s[j]);
      }
      for (double& v : s) sum += (v = std::exp(v - mx));
      for (int64_t j = 0; j <= pos; ++j)
        for (int64_t d = 0; d < D; ++d) attn[h * D + d] += s[j] / sum * vc[j][g * D + d];
    }
    Vec h = matvec(o, attn, H);
    for (int64_t i = 0; i < H; ++i) h[i] += x[i];
    const Vec gu = matvec(gate_up, rms(h, post_norm), 2 * c.intermediate);
    Vec act(static_cast<size_t>(c.intermediate));
    for (int64_t i = 0; i < c.intermediate; ++i) act[i] = gu[i] / (1 + std::exp(-gu[i])) * gu[c.intermediate + i];
    const Vec mlp = matvec(down, act, H);
    for (int64_t i = 0; i < H; ++i) h[i] += mlp[i];
    return h;
  }
};

// f16 storage (attention takes f16 / bf16 only): random values rounded to f16, and their exact values as doubles.
struct Half {
  std::vector<uint16_t> bits;
  Vec values;
  void* data() { return bits.data(); }
  double operator[](size_t i) const { return load_as_double(bits.data(), DType::f16, static_cast<int64_t>(i)); }
};
Half random_half(size_t n, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(lo, hi);
  Half h{std::vector<uint16_t>(n), Vec(n)};
  for (size_t i = 0; i < n; ++i) {
    store_from_double(h.bits.data(), DType::f16, static_cast<int64_t>(i), u(rng));
    h.values[i] = h[i];
  }
  return h;
}

// A weight-only quantized copy of an f16 weight [n, k] made by the CPU quantizers (bits 8: per channel; bits 4: group
// 64, kernel layout), its LayerLinear, and the dequantized values q * s the naive layer uses.
struct Quantized {
  std::vector<int8_t> q;  // bits 8: [n, k]; bits 4: the packed bytes [n, k / 2]
  std::vector<float> s;
  Vec deq;
  LayerLinear linear;
};
Quantized quantize(Half& w, int64_t n, int64_t k, int bits) {
  Quantized r;
  const int group = bits == 4 ? 64 : 0;
  const int64_t groups = bits == 4 ? k / group : 1;
  r.q.resize(static_cast<size_t>(bits == 8 ? n * k : n * k / 2));
  r.s.resize(static_cast<size_t>(n * groups));
  const auto qv = TensorView::contiguous(r.q.data(), bits == 8 ? DType::i8 : DType::i4x2, {n, bits == 8 ? k : k / 2});
  const auto sv = bits == 8 ? TensorView::contiguous(r.s.data(), DType::f32, {n})
                            : TensorView::contiguous(r.s.data(), DType::f32, {n, groups});
  const auto wv = TensorView::contiguous(w.data(), DType::f16, {n, k});
  EXPECT_TRUE((bits == 8 ? quantize_int8_per_channel(qv, sv, wv) : quantize_int4_groupwise(qv, sv, wv, group)).ok());
  std::vector<int8_t> plain(static_cast<size_t>(n * k));
  if (bits == 8) plain = r.q;
  else EXPECT_TRUE(unpack_int4(TensorView::contiguous(plain.data(), DType::i8, {n, k}), qv).ok());
  r.deq.resize(plain.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j)
      r.deq[i * k + j] = plain[i * k + j] * static_cast<double>(r.s[i * groups + (bits == 4 ? j / group : 0)]);
  r.linear = LayerLinear::quantized(qv, sv, bits, group);
  return r;
}

}  // namespace

// dense: f16 weights through linear; quantized: q/k/v and o as INT8, gate/up and down as INT4 (weight-only GEMV).
class LlamaLayerCpu : public ::testing::TestWithParam<bool> {};

TEST_P(LlamaLayerCpu, MatchesTheNaiveLayerThroughPrefillAndDecode) {
  const bool quantized = GetParam();
  LlamaLayerConfig c;
  c.hidden = 64, c.intermediate = 128, c.heads = 4, c.kv_heads = 2, c.head_dim = 64, c.max_position = 32;
  const int64_t B = 2, S = 5, cap = 12, qkv_rows = (c.heads + 2 * c.kv_heads) * c.head_dim;
  std::mt19937_64 rng(7);
  auto in_norm = random_half(c.hidden, 0.5, 1.5, rng), post = random_half(c.hidden, 0.5, 1.5, rng);
  auto qkv = random_half(qkv_rows * c.hidden, -0.15, 0.15, rng);
  auto o = random_half(c.hidden * c.heads * c.head_dim, -0.1, 0.1, rng);
  auto gu = random_half(2 * c.intermediate * c.hidden, -0.15, 0.15, rng);
  auto down = random_half(c.hidden * c.intermediate, -0.15, 0.15, rng);
  const DType f = DType::f16;
  LlamaLayerWeights w{TensorView::contiguous(in_norm.data(), f, {c.hidden}),
                      TensorView::contiguous(qkv.data(), f, {qkv_rows, c.hidden}),
                      TensorView::contiguous(o.data(), f, {c.hidden, c.heads * c.head_dim}),
                      TensorView::contiguous(post.data(), f, {c.hidden}),
                      TensorView::contiguous(gu.data(), f, {2 * c.intermediate, c.hidden}),
                      TensorView::contiguous(down.data(), f, {c.hidden, c.intermediate})};
  Naive n{c, in_norm.values, qkv.values, o.values, post.values, gu.values, down.values, {}, {}};
  Quantized q_qkv, q_o, q_gu, q_down;
  if (quantized) {
    q_qkv = quantize(qkv, qkv_rows, c.hidden, 8);
    q_o = quantize(o, c.hidden, c.heads * c.head_dim, 8);
    q_gu = quantize(gu, 2 * c.intermediate, c.hidden, 4);
    q_down = quantize(down, c.hidden, c.intermediate, 4);
    w.qkv = q_qkv.linear, w.o = q_o.linear, w.gate_up = q_gu.linear, w.down = q_down.linear;
    n.qkv = q_qkv.deq, n.o = q_o.deq, n.gate_up = q_gu.deq, n.down = q_down.deq;
  }
  LlamaLayer layer;
  ASSERT_TRUE(layer.init(c, w, f, Device::cpu(), B * S).ok());

  n.k_cache.resize(B);
  n.v_cache.resize(B);
  Half kc = random_half(B * cap * c.kv_heads * c.head_dim, 0, 0, rng), vc = kc;
  const auto K = TensorView::contiguous(kc.data(), f, {B, cap, c.kv_heads, c.head_dim});
  const auto V = TensorView::contiguous(vc.data(), f, {B, cap, c.kv_heads, c.head_dim});
  // f16 rounds every op's output (~5e-4 relative) and the naive layer rounds nothing: a few ulps after ten ops.
  auto expect_close = [](const Half& got, const Vec& want, size_t at, const char* what) {
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[at + i], want[i], 1e-2 * (1 + std::fabs(want[i]))) << what << " element " << i;
  };

  auto x = random_half(B * S * c.hidden, -1, 1, rng);
  std::vector<Vec> want;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < S; ++t)
      want.push_back(n.token(Vec(x.values.begin() + (b * S + t) * c.hidden,
                                 x.values.begin() + (b * S + t + 1) * c.hidden), b, t));
  const Status ps = layer.prefill(TensorView::contiguous(x.data(), f, {B, S, c.hidden}), K, V);
  ASSERT_TRUE(ps.ok()) << ps.to_string();
  for (int64_t i = 0; i < B * S; ++i) expect_close(x, want[i], i * c.hidden, "prefill output");
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < S; ++t) {
      const size_t at = ((b * cap + t) * c.kv_heads) * c.head_dim;
      expect_close(kc, n.k_cache[b][t], at, "k cache");
      expect_close(vc, n.v_cache[b][t], at, "v cache");
    }

  for (int64_t pos = S; pos < S + 2; ++pos) {  // two decode steps
    auto xd = random_half(B * c.hidden, -1, 1, rng);
    std::vector<Vec> wd;
    for (int64_t b = 0; b < B; ++b)
      wd.push_back(n.token(Vec(xd.values.begin() + b * c.hidden, xd.values.begin() + (b + 1) * c.hidden), b, pos));
    const Status s = layer.decode(TensorView::contiguous(xd.data(), f, {B, c.hidden}), K, V, pos);
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (int64_t b = 0; b < B; ++b) expect_close(xd, wd[b], b * c.hidden, "decode output");
  }
  // Bad input names the argument.
  const Status bad = layer.decode(TensorView::contiguous(x.data(), f, {B, c.hidden}), K, V, cap);
  EXPECT_EQ(bad.code(), StatusCode::invalid_argument);
  EXPECT_NE(bad.message().find("k_cache holds 12 positions"), std::string::npos) << bad.to_string();
}

INSTANTIATE_TEST_SUITE_P(Weights, LlamaLayerCpu, ::testing::Values(false, true),
                         [](const auto& i) { return std::string(i.param ? "quantized" : "dense"); });

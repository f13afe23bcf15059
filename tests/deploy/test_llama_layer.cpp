// The C++ Llama decoder layer on CPU tensors (every op's reference) against the layer written out naively in fp64:
// a prefill of two sequences, then two decode steps reading the cache it wrote. GQA (4 query heads, 2 KV heads).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernelkit/dtype.hpp"
#include "kernelkit/llama.hpp"
#include "kernelkit/ops.hpp"
#include "testing/harness.hpp"

using namespace kernelkit;

namespace {

using Vec = std::vector<double>;

struct NaiveLayer {
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
  NaiveLayer n{c, in_norm.values, qkv.values, o.values, post.values, gu.values, down.values, {}, {}};
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

// ---- FP8 projections (LayerLinear::fp8): e4m3 weights with one scale per output channel, the activations quantized
// per token by the fused norms and SwiGLU. A code is one e4m3 step (2^-3 relative) from its neighbours, so a difference
// of one f16 / bf16 ulp anywhere upstream can move a code: a tolerance against the dense fp64 layer would be loose
// enough to hide a wrong step. So the layer is held to the composition of the reference ops it is made of, run one
// step at a time on buffers of their own (q, k and v apart, one sequence at a time, a cache per sequence), bit for bit;
// each op's reference is held to its own contract by its family's tests.

namespace {

using kernelkit::testing::HostBuffer;

#define KK_EXPECT_OK(call)                                           \
  do {                                                               \
    const Status kk_st_ = (call);                                    \
    ASSERT_TRUE(kk_st_.ok()) << #call << ": " << kk_st_.to_string(); \
  } while (0)

HostBuffer random_buffer(DType dt, int64_t n, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(lo, hi);
  HostBuffer b(dt, n);
  for (int64_t i = 0; i < n; ++i) b.set(i, u(rng));
  return b;
}

TensorView view(HostBuffer& b, std::initializer_list<int64_t> shape) {
  return TensorView::contiguous(b.data(), b.dtype(), shape);
}

// An FP8 copy of the weight w [n, k] as kernelkit.nn.Fp8Linear makes it: quantize_per_token_fp8 of its rows (one scale
// per output channel).
struct Fp8Weight {
  HostBuffer q, s;
  LayerLinear linear;
};
Fp8Weight fp8_weight(HostBuffer& w, int64_t n, int64_t k) {
  Fp8Weight f{HostBuffer(DType::f8e4m3, n * k), HostBuffer(DType::f32, n), {}};
  EXPECT_TRUE(quantize_per_token_fp8(view(f.q, {n, k}), view(f.s, {n}), view(w, {n, k})).ok());
  f.linear = LayerLinear::fp8(view(f.q, {n, k}), view(f.s, {n}));
  return f;  // moved: the views keep pointing at the buffers' heap storage
}

// A random LLaMA-shaped layer with FP8 projections (GQA: 4 query heads, 2 KV heads).
struct Fp8Layer {
  LlamaLayerConfig c;
  DType dt;
  HostBuffer in_norm, post_norm, qkv_w, o_w, gu_w, down_w;
  Fp8Weight qkv, o, gate_up, down;
  std::vector<float> cos_sin;  // the layer's own table, built by the same function

  Fp8Layer(DType dtype, std::mt19937_64& rng) : dt(dtype) {
    c.hidden = 64, c.intermediate = 128, c.heads = 4, c.kv_heads = 2, c.head_dim = 64, c.max_position = 32;
    const int64_t H = c.hidden, I = c.intermediate, n_qkv = (c.heads + 2 * c.kv_heads) * c.head_dim;
    in_norm = random_buffer(dt, H, 0.5, 1.5, rng), post_norm = random_buffer(dt, H, 0.5, 1.5, rng);
    qkv_w = random_buffer(dt, n_qkv * H, -0.15, 0.15, rng),
    o_w = random_buffer(dt, H * c.heads * c.head_dim, -0.1, 0.1, rng);
    gu_w = random_buffer(dt, 2 * I * H, -0.15, 0.15, rng), down_w = random_buffer(dt, H * I, -0.15, 0.15, rng);
    qkv = fp8_weight(qkv_w, n_qkv, H), o = fp8_weight(o_w, H, c.heads * c.head_dim);
    gate_up = fp8_weight(gu_w, 2 * I, H), down = fp8_weight(down_w, H, I);
    cos_sin.resize(static_cast<size_t>(c.max_position * c.head_dim));
    rope_cos_sin_table(cos_sin.data(), c.max_position, c.head_dim, c.rope_theta);
  }
  LlamaLayerWeights weights() {
    return {view(in_norm, {c.hidden}), qkv.linear, o.linear, view(post_norm, {c.hidden}), gate_up.linear, down.linear};
  }

  // One sequence's s tokens at positions p0 .. p0 + s - 1 through the reference ops, one step at a time: x [s, hidden]
  // becomes the layer's output; the tokens' keys and values go into kc, vc [capacity, kv_heads, head_dim] (this
  // sequence's cache) at p0 ..; attention reads positions 0 .. p0 + s - 1 (causal from the fused rows for a prefill,
  // decode_attention over the cache for one token at p0 > 0, as the layer does).
  void compose(HostBuffer& x, int64_t s, int64_t p0, HostBuffer& kc, HostBuffer& vc) {
    const int64_t H = c.hidden, I = c.intermediate, D = c.head_dim, hq = c.heads * D, hkv = c.kv_heads * D;
    const int64_t n_qkv = hq + 2 * hkv, cap = kc.size() / hkv;
    const size_t e = dtype_size(dt);
    // 1. codes, scales = rms_norm_quant(x); q | k | v = linear_fp8(codes).
    HostBuffer codes(DType::f8e4m3, s * H), scales(DType::f32, s), qkv_out(dt, s * n_qkv);
    KK_EXPECT_OK(rms_norm_quant(view(codes, {s, H}), view(scales, {s}), view(x, {s, H}), view(in_norm, {H}), c.eps));
    KK_EXPECT_OK(linear_fp8(view(qkv_out, {s, n_qkv}), view(codes, {s, H}), view(scales, {s}), qkv.linear.qweight,
                            qkv.linear.scales));
    // 2. q, k and v apart; RoPE (neox) on q and k at the tokens' positions; k and v into the cache.
    HostBuffer q(dt, s * hq), k(dt, s * hkv), v(dt, s * hkv);
    const auto* row = static_cast<const char*>(qkv_out.data());
    for (int64_t t = 0; t < s; ++t) {
      std::memcpy(static_cast<char*>(q.data()) + t * hq * e, row + t * n_qkv * e, hq * e);
      std::memcpy(static_cast<char*>(k.data()) + t * hkv * e, row + (t * n_qkv + hq) * e, hkv * e);
      std::memcpy(static_cast<char*>(v.data()) + t * hkv * e, row + (t * n_qkv + hq + hkv) * e, hkv * e);
    }
    ASSERT_LE(p0 + s, cap);
    std::vector<int64_t> pos(static_cast<size_t>(s));
    for (int64_t t = 0; t < s; ++t) pos[t] = p0 + t;
    KK_EXPECT_OK(rotary_embedding(view(q, {s, c.heads, D}), view(k, {s, c.kv_heads, D}), view(q, {s, c.heads, D}),
                                  view(k, {s, c.kv_heads, D}), TensorView::contiguous(pos.data(), DType::i64, {s}),
                                  TensorView::contiguous(cos_sin.data(), DType::f32, {c.max_position, D}),
                                  RopeStyle::neox));
    std::memcpy(static_cast<char*>(kc.data()) + p0 * hkv * e, k.data(), s * hkv * e);
    std::memcpy(static_cast<char*>(vc.data()) + p0 * hkv * e, v.data(), s * hkv * e);
    // 3. Attention.
    HostBuffer attn(dt, s * hq);
    if (s > 1 || p0 == 0) {
      AttentionOptions opt;
      opt.causal = true;
      KK_EXPECT_OK(attention(view(attn, {1, s, c.heads, D}), std::nullopt, view(q, {1, s, c.heads, D}),
                             view(k, {1, s, c.kv_heads, D}), view(v, {1, s, c.kv_heads, D}), opt));
    } else {
      KvCache cache;
      cache.k = TensorView::contiguous(kc.data(), dt, {1, p0 + 1, c.kv_heads, D});
      cache.v = TensorView::contiguous(vc.data(), dt, {1, p0 + 1, c.kv_heads, D});
      KK_EXPECT_OK(decode_attention(view(attn, {1, 1, c.heads, D}), std::nullopt, view(q, {1, 1, c.heads, D}), cache));
    }
    // 4. o = linear_fp8(quantize_per_token_fp8(attn)); h = x + o (into x) with norm(h) as codes.
    HostBuffer attn_codes(DType::f8e4m3, s * hq), o_out(dt, s * H);
    KK_EXPECT_OK(quantize_per_token_fp8(view(attn_codes, {s, hq}), view(scales, {s}), view(attn, {s, hq})));
    KK_EXPECT_OK(linear_fp8(view(o_out, {s, H}), view(attn_codes, {s, hq}), view(scales, {s}), o.linear.qweight,
                            o.linear.scales));
    KK_EXPECT_OK(fused_add_rms_norm_quant(view(codes, {s, H}), view(scales, {s}), view(o_out, {s, H}), view(x, {s, H}),
                                          view(post_norm, {H}), c.eps));
    // 5. x = h + down(silu_and_mul_quant(gate_up(codes))): linear_fp8 adding into x.
    HostBuffer gu(dt, s * 2 * I), act_codes(DType::f8e4m3, s * I);
    KK_EXPECT_OK(linear_fp8(view(gu, {s, 2 * I}), view(codes, {s, H}), view(scales, {s}), gate_up.linear.qweight,
                            gate_up.linear.scales));
    KK_EXPECT_OK(silu_and_mul_quant(view(act_codes, {s, I}), view(scales, {s}), view(gu, {s, 2 * I})));
    KK_EXPECT_OK(linear_fp8(view(x, {s, H}), view(act_codes, {s, I}), view(scales, {s}), down.linear.qweight,
                            down.linear.scales, std::nullopt, nullptr, false, /*accumulate=*/true));
  }
};

// Rows [row, row + rows) of a [.., width] buffer as a buffer of their own.
HostBuffer rows_of(const HostBuffer& b, int64_t row, int64_t rows, int64_t width) {
  HostBuffer r(b.dtype(), rows * width);
  const size_t e = dtype_size(b.dtype());
  std::memcpy(r.data(), static_cast<const char*>(b.data()) + row * width * e, r.bytes());
  return r;
}

// got [.., width] from `row` on equals want, byte for byte; the first differing element named.
void expect_same_bits(const HostBuffer& got, int64_t row, int64_t width, const HostBuffer& want, const char* what) {
  const auto* g = static_cast<const uint8_t*>(got.data()) + row * width * static_cast<int64_t>(dtype_size(got.dtype()));
  if (std::memcmp(g, want.data(), want.bytes()) == 0) return;
  const HostBuffer part = rows_of(got, row, want.size() / width, width);
  for (int64_t i = 0; i < want.size(); ++i)
    if (std::memcmp(static_cast<const char*>(part.data()) + i * dtype_size(want.dtype()),
                    static_cast<const char*>(want.data()) + i * dtype_size(want.dtype()),
                    dtype_size(want.dtype())) != 0) {
      ADD_FAILURE() << what << ": element " << i << " (row " << row + i / width << ") is " << part.get(i)
                    << ", the composition gives " << want.get(i);
      return;
    }
}

}  // namespace

class LlamaLayerFp8Cpu : public ::testing::TestWithParam<DType> {};

// A prefill of two sequences of 5 tokens, then two decode steps reading the cache it wrote: the outputs and both
// caches equal the step-by-step composition bit for bit.
TEST_P(LlamaLayerFp8Cpu, PrefillAndDecodeEqualTheReferenceOpsStepByStep) {
  const DType dt = GetParam();
  std::mt19937_64 rng(dt == DType::f16 ? 13 : 17);
  Fp8Layer L(dt, rng);
  const LlamaLayerConfig& c = L.c;
  const int64_t B = 2, S = 5, cap = 12, H = c.hidden, kv_row = c.kv_heads * c.head_dim;
  LlamaLayer layer;
  const Status init = layer.init(c, L.weights(), dt, Device::cpu(), B * S);
  ASSERT_TRUE(init.ok()) << init.to_string();

  HostBuffer kc(dt, B * cap * kv_row), vc(dt, B * cap * kv_row);  // zeros
  std::vector<HostBuffer> kc_seq(B, HostBuffer(dt, cap * kv_row)), vc_seq(B, HostBuffer(dt, cap * kv_row));
  const auto K = TensorView::contiguous(kc.data(), dt, {B, cap, c.kv_heads, c.head_dim});
  const auto V = TensorView::contiguous(vc.data(), dt, {B, cap, c.kv_heads, c.head_dim});
  auto expect_caches = [&](const char* when) {
    for (int64_t b = 0; b < B; ++b) {
      expect_same_bits(kc, b * cap, kv_row, kc_seq[b], (std::string("k cache ") + when).c_str());
      expect_same_bits(vc, b * cap, kv_row, vc_seq[b], (std::string("v cache ") + when).c_str());
    }
  };

  HostBuffer x = random_buffer(dt, B * S * H, -1, 1, rng);
  std::vector<HostBuffer> want;
  for (int64_t b = 0; b < B; ++b) {
    want.push_back(rows_of(x, b * S, S, H));
    L.compose(want.back(), S, 0, kc_seq[b], vc_seq[b]);
  }
  const Status ps = layer.prefill(TensorView::contiguous(x.data(), dt, {B, S, H}), K, V);
  ASSERT_TRUE(ps.ok()) << ps.to_string();
  for (int64_t b = 0; b < B; ++b) expect_same_bits(x, b * S, H, want[b], "prefill output");
  expect_caches("after prefill");

  for (int64_t pos = S; pos < S + 2; ++pos) {  // two decode steps
    HostBuffer xd = random_buffer(dt, B * H, -1, 1, rng);
    std::vector<HostBuffer> wd;
    for (int64_t b = 0; b < B; ++b) {
      wd.push_back(rows_of(xd, b, 1, H));
      L.compose(wd.back(), 1, pos, kc_seq[b], vc_seq[b]);
    }
    const Status s = layer.decode(TensorView::contiguous(xd.data(), dt, {B, H}), K, V, pos);
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (int64_t b = 0; b < B; ++b) expect_same_bits(xd, b, H, wd[b], "decode output");
    expect_caches("after decode");
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LlamaLayerFp8Cpu, ::testing::Values(DType::f16, DType::bf16),
                         [](const auto& i) { return std::string(dtype_name(i.param)); });

// Bad FP8 weights, each refused at init naming the argument: mixed forms, the wrong dtype or shape of a weight or of
// its scales, bits on a dense weight, a k that linear_fp8 cannot take; and FP8 on the profiles without it.
TEST(LlamaLayerFp8Init, BadWeightsAreRefusedWithTheirNames) {
  std::mt19937_64 rng(5);
  Fp8Layer L(DType::f16, rng);
  const LlamaLayerConfig& c = L.c;
  const int64_t H = c.hidden, I = c.intermediate, hq = c.heads * c.head_dim;
  auto refused = [&](const LlamaLayerWeights& w, const std::string& text, const LlamaLayerConfig* cfg = nullptr,
                     Device d = Device::cpu(), StatusCode code = StatusCode::invalid_argument) {
    LlamaLayer layer;
    const Status s = layer.init(cfg ? *cfg : c, w, DType::f16, d, 4);
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(text), std::string::npos) << "want \"" << text << "\" in: " << s.message();
  };
  {  // mixed forms: FP8 takes all four projections or none
    LlamaLayerWeights w = L.weights();
    w.o = view(L.o_w, {H, hq});
    refused(w, "LlamaLayer: weights.o is dense but weights.qkv is FP8: FP8 takes all four projections or none");
    w = L.weights();
    w.qkv = view(L.qkv_w, {(c.heads + 2 * c.kv_heads) * c.head_dim, H});
    refused(w, "weights.o is FP8 but weights.qkv is dense");
    std::vector<int8_t> q(static_cast<size_t>(H * I));
    std::vector<float> s(static_cast<size_t>(H));
    w = L.weights();
    w.down = LayerLinear::quantized(TensorView::contiguous(q.data(), DType::i8, {H, I}),
                                    TensorView::contiguous(s.data(), DType::f32, {H}), 8);
    refused(w, "weights.down is weight-only but weights.qkv is FP8");
  }
  {  // the FP8 weights' and scales' dtypes and shapes
    LlamaLayerWeights w = L.weights();
    w.qkv.qweight.dtype = DType::i8;
    refused(w, "weights.qkv.qweight must be f8e4m3 [512, 64] on cpu, got i8 [512, 64]");
    w = L.weights();
    w.o.qweight = TensorView::contiguous(L.o.q.data(), DType::f8e4m3, {H, hq / 2});
    refused(w, "weights.o.qweight must be f8e4m3 [64, 256] on cpu, got f8e4m3 [64, 128]");
    w = L.weights();
    w.gate_up.scales.dtype = DType::f16;
    refused(w, "weights.gate_up.scales must be f32 [256] on cpu, got f16 [256]");
    w = L.weights();
    w.down.scales = TensorView::contiguous(L.down.s.data(), DType::f32, {H, 1});
    refused(w, "weights.down.scales must be f32 [64] on cpu, got f32 [64, 1]");
  }
  {  // bits belong to the weight-only form: a dense weight with bits set is refused, not run dense
    LlamaLayerWeights w = L.weights();
    w.qkv = view(L.qkv_w, {(c.heads + 2 * c.kv_heads) * c.head_dim, H});
    w.o = view(L.o_w, {H, hq}), w.gate_up = view(L.gu_w, {2 * I, H}), w.down = view(L.down_w, {H, I});
    w.o.bits = 8;
    refused(w, "weights.o.bits is 8 but its form is dense: make weight-only weights with LayerLinear::quantized");
  }
  {  // linear_fp8's k must be a multiple of 16: intermediate 120 (gate_up [240, 64], down [64, 120])
    LlamaLayerConfig odd = c;
    odd.intermediate = 120;
    LlamaLayerWeights w = L.weights();
    w.gate_up.qweight = TensorView::contiguous(L.gate_up.q.data(), DType::f8e4m3, {240, H});
    w.gate_up.scales = TensorView::contiguous(L.gate_up.s.data(), DType::f32, {240});
    w.down.qweight = TensorView::contiguous(L.down.q.data(), DType::f8e4m3, {H, 120});
    refused(w, "FP8 projections need config.intermediate to be a multiple of 16 (linear_fp8's k), got 120", &odd);
  }
  // CUDA tensors under the T4 and A100 profiles (no FP8): refused at init with the profile's own advice; the views are
  // never read.
  LlamaLayerWeights on_gpu = L.weights();
  for (TensorView* t :
       {&on_gpu.input_norm, &on_gpu.post_norm, &on_gpu.qkv.qweight, &on_gpu.qkv.scales, &on_gpu.o.qweight,
        &on_gpu.o.scales, &on_gpu.gate_up.qweight, &on_gpu.gate_up.scales, &on_gpu.down.qweight, &on_gpu.down.scales})
    t->device = Device::cuda(0);
  for (const char* prof : {"t4", "a100"}) {
    setenv("KERNELKIT_PROFILE", prof, 1);
    refused(on_gpu,
            std::string("LlamaLayer: weights.qkv.qweight dtype f8e4m3 is not supported on profile ") +
                (prof == std::string("t4") ? "t4 (sm_75" : "a100-80gb (sm_80") + " has no FP8 tensor cores)",
            nullptr, Device::cuda(0), StatusCode::unsupported);
  }
  unsetenv("KERNELKIT_PROFILE");
}

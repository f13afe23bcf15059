// The C++ Llama layer on the GPU against the same layer on CPU tensors (each op's fp64-accumulating reference, rounded
// at the same points): prefill of two sequences, the KV cache it writes, then decode steps reading it. GQA and MHA,
// f16 and bf16 (bf16 refused on a T4 profile).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "kernelkit/llama.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/profile.hpp"
#include "testing/harness.hpp"

using namespace kernelkit;
using kernelkit::testing::DeviceBuffer;
using kernelkit::testing::HostBuffer;

namespace {

// One tensor on both sides: host values and a device copy.
struct Pair {
  HostBuffer host;
  DeviceBuffer dev;
  TensorView h, d;
};

Pair make(DType dt, std::initializer_list<int64_t> shape, double lo, double hi, std::mt19937_64& rng) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  Pair p{HostBuffer(dt, n), DeviceBuffer(), {}, {}};
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < n; ++i) p.host.set(i, u(rng));
  EXPECT_TRUE(p.dev.alloc(p.host.bytes()).ok());
  EXPECT_TRUE(p.dev.upload(p.host).ok());
  p.h = TensorView::contiguous(p.host.data(), dt, shape);
  p.d = TensorView::contiguous(p.dev.data(), dt, shape, Device::cuda(0));
  return p;
}

// max |gpu - cpu| <= tol * (1 + max |cpu|) over the tensor, and no NaN.
void expect_close(Pair& p, double tol, const char* what) {
  HostBuffer got(p.host.dtype(), p.host.size());
  ASSERT_TRUE(p.dev.download(&got).ok());
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got.get(i))) << what << " element " << i << " is NaN";
    worst = std::max(worst, std::fabs(got.get(i) - p.host.get(i)));
    scale = std::max(scale, std::fabs(p.host.get(i)));
  }
  EXPECT_LE(worst, tol * (1 + scale)) << what << ": max |gpu - cpu| " << worst << " (max |cpu| " << scale << ")";
}

// A weight quantized on the CPU (bits 8 per channel, bits 4 group 64) and its copy on the GPU, as LayerLinears.
struct QPair {
  HostBuffer q, s;
  DeviceBuffer dq, ds;
  LayerLinear h, d;
};
std::unique_ptr<QPair> quantize(const Pair& w, int bits) {
  const int64_t n = w.h.shape[0], k = w.h.shape[1], groups = bits == 4 ? k / 64 : 1, cols = bits == 8 ? k : k / 2;
  const DType qt = bits == 8 ? DType::i8 : DType::i4x2;
  auto p = std::make_unique<QPair>();
  p->q = HostBuffer(qt, n * cols);
  p->s = HostBuffer(DType::f32, n * groups);
  auto views = [&](void* q, void* s, Device d) {
    const auto qv = TensorView::contiguous(q, qt, {n, cols}, d);
    const auto sv = bits == 8 ? TensorView::contiguous(s, DType::f32, {n}, d)
                              : TensorView::contiguous(s, DType::f32, {n, groups}, d);
    return LayerLinear::quantized(qv, sv, bits, bits == 4 ? 64 : 0);
  };
  p->h = views(p->q.data(), p->s.data(), Device::cpu());
  EXPECT_TRUE((bits == 8 ? quantize_int8_per_channel(p->h.qweight, p->h.scales, w.h)
                         : quantize_int4_groupwise(p->h.qweight, p->h.scales, w.h, 64))
                  .ok());
  for (Status st : {p->dq.alloc(p->q.bytes()), p->dq.upload(p->q), p->ds.alloc(p->s.bytes()), p->ds.upload(p->s)})
    EXPECT_TRUE(st.ok());
  p->d = views(p->dq.data(), p->ds.data(), Device::cuda(0));
  return p;
}

}  // namespace

// (dtype, kv_heads, head_dim, quantized): quantized = q/k/v and o as INT8, gate/up and down as INT4 (weight-only GEMV).
class LlamaLayerGpu : public ::testing::TestWithParam<std::tuple<DType, int64_t, int64_t, bool>> {};

TEST_P(LlamaLayerGpu, MatchesTheCpuLayer) {
  const auto [dt, kv_heads, head_dim, quantized] = GetParam();
  LlamaLayerConfig c;
  c.hidden = 256, c.intermediate = 512, c.heads = 4, c.kv_heads = kv_heads, c.head_dim = head_dim;
  c.max_position = 256;
  const int64_t B = 2, S = 37, cap = 48, qkv_rows = (c.heads + 2 * c.kv_heads) * c.head_dim;
  std::mt19937_64 rng(11 + head_dim + kv_heads);
  Pair in_norm = make(dt, {c.hidden}, 0.5, 1.5, rng), post = make(dt, {c.hidden}, 0.5, 1.5, rng);
  Pair qkv = make(dt, {qkv_rows, c.hidden}, -0.1, 0.1, rng);
  Pair o = make(dt, {c.hidden, c.heads * c.head_dim}, -0.05, 0.05, rng);
  Pair gu = make(dt, {2 * c.intermediate, c.hidden}, -0.1, 0.1, rng);
  Pair down = make(dt, {c.hidden, c.intermediate}, -0.05, 0.05, rng);
  std::unique_ptr<QPair> q8a, q8b, q4a, q4b;
  if (quantized) q8a = quantize(qkv, 8), q8b = quantize(o, 8), q4a = quantize(gu, 4), q4b = quantize(down, 4);
  auto weights = [&](bool gpu) {
    auto v = [&](Pair& p) { return gpu ? p.d : p.h; };
    LlamaLayerWeights w{v(in_norm), v(qkv), v(o), v(post), v(gu), v(down)};
    if (quantized)
      w.qkv = gpu ? q8a->d : q8a->h, w.o = gpu ? q8b->d : q8b->h, w.gate_up = gpu ? q4a->d : q4a->h,
      w.down = gpu ? q4b->d : q4b->h;
    return w;
  };
  Pair x = make(dt, {B, S, c.hidden}, -1, 1, rng);
  Pair kc = make(dt, {B, cap, c.kv_heads, c.head_dim}, 0, 0, rng), vc = make(dt, {B, cap, c.kv_heads, c.head_dim}, 0, 0, rng);

  DeviceProfile prof;
  ASSERT_TRUE(active_profile(0, &prof).ok());
  LlamaLayer gpu, cpu;
  ASSERT_TRUE(gpu.init(c, weights(true), dt, Device::cuda(0), B * S).ok());
  ASSERT_TRUE(cpu.init(c, weights(false), dt, Device::cpu(), B * S).ok());
  const Status s = gpu.prefill(x.d, kc.d, vc.d);
  if (!prof.supports(dt)) {
    EXPECT_EQ(s.code(), StatusCode::unsupported) << s.to_string();
    return;
  }
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_TRUE(cpu.prefill(x.h, kc.h, vc.h).ok());
  const double tol = dt == DType::bf16 ? 4e-2 : 8e-3;
  expect_close(x, tol, "prefill output");
  expect_close(kc, tol, "k cache");
  expect_close(vc, tol, "v cache");
  for (int64_t pos = S; pos < S + 3; ++pos) {
    Pair xd = make(dt, {B, c.hidden}, -1, 1, rng);
    ASSERT_TRUE(gpu.decode(xd.d, kc.d, vc.d, pos).ok());
    ASSERT_TRUE(cpu.decode(xd.h, kc.h, vc.h, pos).ok());
    expect_close(xd, tol, "decode output");
  }
  expect_close(kc, tol, "k cache after decode");
}

INSTANTIATE_TEST_SUITE_P(Configs, LlamaLayerGpu,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16), ::testing::Values(2, 4),
                                            ::testing::Values(64, 128), ::testing::Values(false, true)));

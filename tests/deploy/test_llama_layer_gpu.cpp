// The C++ Llama layer on the GPU against the same layer on CPU tensors (each op's fp64-accumulating reference, rounded
// at the same points): prefill of two sequences, the KV cache it writes, then decode steps reading it. GQA and MHA,
// f16 and bf16 (bf16 refused on a T4 profile); dense, weight-only (INT8 / INT4) and FP8 weights (FP8 refused at init,
// and skipped, on the profiles without it).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <tuple>
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

// max |gpu - cpu| <= tol * (1 + max |cpu|) + per_update * max |cpu - in| over the tensor, and no NaN; `in` (when
// given) is the layer's input, which both sides add exactly (the residual), so cpu - in is what the layer added.
void expect_close(Pair& p, double tol, const char* what, const HostBuffer* in = nullptr, double per_update = 0) {
  HostBuffer got(p.host.dtype(), p.host.size());
  ASSERT_TRUE(p.dev.download(&got).ok());
  double worst = 0, scale = 0, update = 0;
  for (int64_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got.get(i))) << what << " element " << i << " is NaN";
    worst = std::max(worst, std::fabs(got.get(i) - p.host.get(i)));
    scale = std::max(scale, std::fabs(p.host.get(i)));
    if (in) update = std::max(update, std::fabs(p.host.get(i) - in->get(i)));
  }
  EXPECT_LE(worst, tol * (1 + scale) + per_update * update)
      << what << ": max |gpu - cpu| " << worst << " (max |cpu| " << scale << ", max |cpu - input| " << update << ")";
}

// A weight quantized on the CPU and its copy on the GPU, as LayerLinears: weight-only INT8 per channel or INT4 group
// 64, or FP8 e4m3 per output channel (quantize_per_token_fp8 of the rows, as kernelkit.nn.Fp8Linear makes them).
enum class QForm { int8, int4, fp8 };
struct QPair {
  HostBuffer q, s;
  DeviceBuffer dq, ds;
  LayerLinear h, d;
};
std::unique_ptr<QPair> quantize(const Pair& w, QForm form) {
  const bool int4 = form == QForm::int4;
  const int64_t n = w.h.shape[0], k = w.h.shape[1], groups = int4 ? k / 64 : 1, cols = int4 ? k / 2 : k;
  const DType qt = form == QForm::int8 ? DType::i8 : int4 ? DType::i4x2 : DType::f8e4m3;
  auto p = std::make_unique<QPair>();
  p->q = HostBuffer(qt, n * cols);
  p->s = HostBuffer(DType::f32, n * groups);
  auto views = [&](void* q, void* s, Device d) {
    const auto qv = TensorView::contiguous(q, qt, {n, cols}, d);
    const auto sv =
        int4 ? TensorView::contiguous(s, DType::f32, {n, groups}, d) : TensorView::contiguous(s, DType::f32, {n}, d);
    return form == QForm::fp8 ? LayerLinear::fp8(qv, sv) : LayerLinear::quantized(qv, sv, int4 ? 4 : 8, int4 ? 64 : 0);
  };
  p->h = views(p->q.data(), p->s.data(), Device::cpu());
  EXPECT_TRUE((form == QForm::int8 ? quantize_int8_per_channel(p->h.qweight, p->h.scales, w.h)
               : int4              ? quantize_int4_groupwise(p->h.qweight, p->h.scales, w.h, 64)
                                   : quantize_per_token_fp8(p->h.qweight, p->h.scales, w.h))
                  .ok());
  for (Status st : {p->dq.alloc(p->q.bytes()), p->dq.upload(p->q), p->ds.alloc(p->s.bytes()), p->ds.upload(p->s)})
    EXPECT_TRUE(st.ok());
  p->d = views(p->dq.data(), p->ds.data(), Device::cuda(0));
  return p;
}

}  // namespace

// The layer's projections: dense; weight-only (q/k/v and o INT8, gate/up and down INT4: the GEMV for decode); FP8 (all
// four, activations quantized per token by the fused norms and SwiGLU).
enum class Weights { dense, weight_only, fp8 };

// (dtype, kv_heads, head_dim, weights)
class LlamaLayerGpu : public ::testing::TestWithParam<std::tuple<DType, int64_t, int64_t, Weights>> {};

TEST_P(LlamaLayerGpu, MatchesTheCpuLayer) {
  const auto [dt, kv_heads, head_dim, form] = GetParam();
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
  std::unique_ptr<QPair> q[4];  // qkv, o, gate_up, down
  if (form != Weights::dense) {
    const bool fp8 = form == Weights::fp8;
    q[0] = quantize(qkv, fp8 ? QForm::fp8 : QForm::int8), q[1] = quantize(o, fp8 ? QForm::fp8 : QForm::int8);
    q[2] = quantize(gu, fp8 ? QForm::fp8 : QForm::int4), q[3] = quantize(down, fp8 ? QForm::fp8 : QForm::int4);
  }
  auto weights = [&](bool gpu) {
    auto v = [&](Pair& p) { return gpu ? p.d : p.h; };
    LlamaLayerWeights w{v(in_norm), v(qkv), v(o), v(post), v(gu), v(down)};
    if (form != Weights::dense) {
      LayerLinear* slots[4] = {&w.qkv, &w.o, &w.gate_up, &w.down};
      for (int i = 0; i < 4; ++i) *slots[i] = gpu ? q[i]->d : q[i]->h;
    }
    return w;
  };
  Pair x = make(dt, {B, S, c.hidden}, -1, 1, rng);
  Pair kc = make(dt, {B, cap, c.kv_heads, c.head_dim}, 0, 0, rng), vc = make(dt, {B, cap, c.kv_heads, c.head_dim}, 0, 0, rng);

  DeviceProfile prof;
  ASSERT_TRUE(active_profile(0, &prof).ok());
  LlamaLayer gpu, cpu;
  const Status gpu_init = gpu.init(c, weights(true), dt, Device::cuda(0), B * S);
  if (form == Weights::fp8 && !prof.supports(DType::f8e4m3)) {
    EXPECT_EQ(gpu_init.code(), StatusCode::unsupported) << gpu_init.to_string();
    EXPECT_NE(gpu_init.message().find("weights.qkv.qweight dtype f8e4m3 is not supported on profile"),
              std::string::npos)
        << gpu_init.to_string();
    GTEST_SKIP() << "profile " << prof.key << " has no FP8 (refused: " << gpu_init.message() << ")";
  }
  ASSERT_TRUE(gpu_init.ok()) << gpu_init.to_string();
  ASSERT_TRUE(cpu.init(c, weights(false), dt, Device::cpu(), B * S).ok());
  const Status s = gpu.prefill(x.d, kc.d, vc.d);
  if (!prof.supports(dt)) {
    EXPECT_EQ(s.code(), StatusCode::unsupported) << s.to_string();
    return;
  }
  ASSERT_TRUE(s.ok()) << s.to_string();
  const HostBuffer x_in = x.host;  // the CPU layer replaces it
  ASSERT_TRUE(cpu.prefill(x.h, kc.h, vc.h).ok());
  const double tol = dt == DType::bf16 ? 4e-2 : 8e-3;
  // FP8: the two sides quantize activations that may differ by an ulp (cuBLASLt's FP8 sums against fp64 ones, the
  // kernels' fp32 math), and an ulp can carry a value across the midpoint between two e4m3 codes (2^-3 apart,
  // relative) or move a row's max and so its scale: a few codes of a row land one step away (more often in bf16,
  // whose ulp is 8x f16's), each moving a projection's output by one step of one term w_j a_j. Their sum stays well
  // under one e4m3 step of the largest thing the layer adds, so the outputs get 2^-3 max |out - x| on top of the
  // dense bound (two CPU layers whose FP8 weight scales differ by up to 2^-11 .. 2^-7 relative, this config, differ by
  // at most 6% of max |out - x|: the flips, not the size of the upstream difference, set it). The caches come from one
  // FP8 projection of codes both sides make alike from the same x: the dense bound.
  const double per_update = form == Weights::fp8 ? 0.125 : 0.0;
  expect_close(x, tol, "prefill output", &x_in, per_update);
  expect_close(kc, tol, "k cache");
  expect_close(vc, tol, "v cache");
  for (int64_t pos = S; pos < S + 3; ++pos) {
    Pair xd = make(dt, {B, c.hidden}, -1, 1, rng);
    const HostBuffer xd_in = xd.host;
    ASSERT_TRUE(gpu.decode(xd.d, kc.d, vc.d, pos).ok());
    ASSERT_TRUE(cpu.decode(xd.h, kc.h, vc.h, pos).ok());
    expect_close(xd, tol, "decode output", &xd_in, per_update);
  }
  expect_close(kc, tol, "k cache after decode");
}

INSTANTIATE_TEST_SUITE_P(Configs, LlamaLayerGpu,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16), ::testing::Values(2, 4),
                                            ::testing::Values(64, 128),
                                            ::testing::Values(Weights::dense, Weights::weight_only, Weights::fp8)),
                         [](const auto& i) {  // "bf16_kv2_d64_fp8"
                           const Weights form = std::get<3>(i.param);
                           return std::string(dtype_name(std::get<0>(i.param))) + "_kv" +
                                  std::to_string(std::get<1>(i.param)) + "_d" + std::to_string(std::get<2>(i.param)) +
                                  (form == Weights::dense ? "_dense"
                                   : form == Weights::fp8 ? "_fp8"
                                                          : "_weight_only");
                         });

// Memory overlap between an op's output and its other tensors (runtime/overlap.hpp): the detection itself, then every
// family refusing a partial overlap with a message naming both arguments, and the in-place calls it allows.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernelkit/ops.hpp"
#include "runtime/overlap.hpp"

namespace kernelkit {
namespace {

using detail::memory_overlap;
using detail::Overlap;

TensorView rows(float* p, int64_t r, int64_t w, int64_t stride) { return TensorView::strided(p, DType::f32, {r, w}, {stride, 1}); }

TEST(Overlap, DisjointSameAndPartial) {
  std::vector<float> a(1000), b(1000);
  EXPECT_EQ(memory_overlap(rows(a.data(), 4, 64, 64), rows(b.data(), 4, 64, 64)), Overlap::none);
  EXPECT_EQ(memory_overlap(rows(a.data(), 4, 64, 64), rows(a.data(), 4, 64, 64)), Overlap::same);
  EXPECT_EQ(memory_overlap(rows(a.data(), 4, 64, 64), rows(a.data() + 64, 4, 64, 64)), Overlap::partial);  // one row on
  EXPECT_EQ(memory_overlap(rows(a.data(), 4, 64, 64), rows(a.data() + 1, 4, 64, 64)), Overlap::partial);
  EXPECT_EQ(memory_overlap(rows(a.data(), 4, 64, 64), rows(a.data() + 256, 4, 64, 64)), Overlap::none);  // adjacent
  // The same bytes seen as another shape share memory without being the same layout.
  EXPECT_EQ(memory_overlap(rows(a.data(), 4, 64, 64), rows(a.data(), 2, 128, 128)), Overlap::partial);
  // Empty views share nothing.
  EXPECT_EQ(memory_overlap(rows(a.data(), 0, 64, 64), rows(a.data(), 4, 64, 64)), Overlap::none);
}

TEST(Overlap, InterleavedSlicesOfOneBufferAreDisjoint) {
  // q, k, v of a fused projection [tokens, (h + 2 h_kv) d]: strided views that interleave without sharing an element.
  constexpr int64_t T = 5, h = 4, hk = 2, d = 8, W = (h + 2 * hk) * d;
  std::vector<float> qkv(T * W);
  const auto q = TensorView::strided(qkv.data(), DType::f32, {T, h, d}, {W, d, 1});
  const auto k = TensorView::strided(qkv.data() + h * d, DType::f32, {T, hk, d}, {W, d, 1});
  const auto v = TensorView::strided(qkv.data() + (h + hk) * d, DType::f32, {T, hk, d}, {W, d, 1});
  EXPECT_EQ(memory_overlap(q, k), Overlap::none);
  EXPECT_EQ(memory_overlap(k, v), Overlap::none);
  EXPECT_EQ(memory_overlap(q, q), Overlap::same);
  // k widened by one element reaches into v.
  const auto k_wide = TensorView::strided(qkv.data() + h * d, DType::f32, {T, hk * d + 1}, {W, 1});
  EXPECT_EQ(memory_overlap(k_wide, v), Overlap::partial);
  // The halves of a gated activation's input: disjoint columns of the same rows.
  std::vector<float> x(4 * 128);
  EXPECT_EQ(memory_overlap(rows(x.data(), 4, 64, 128), rows(x.data() + 64, 4, 64, 128)), Overlap::none);
  EXPECT_EQ(memory_overlap(rows(x.data(), 4, 65, 128), rows(x.data() + 64, 4, 64, 128)), Overlap::partial);
  // One row against many (a single-token view into a strided buffer).
  EXPECT_EQ(memory_overlap(rows(x.data() + 64, 1, 64, 64), rows(x.data(), 4, 64, 128)), Overlap::none);
  EXPECT_EQ(memory_overlap(rows(x.data() + 128, 1, 64, 64), rows(x.data(), 4, 64, 128)), Overlap::partial);
}

TEST(Overlap, EveryFamilyRefusesAPartialOverlapAndAllowsWhatItDocuments) {
  std::vector<float> buf(8 * 64 + 64), w(64), out(8 * 64);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = 0.25f + static_cast<float>(i % 7) * 0.1f;
  for (float& v : w) v = 1.0f;
  const auto x = rows(buf.data(), 8, 64, 64), shifted = rows(buf.data() + 64, 8, 64, 64);
  const auto weight = TensorView::contiguous(w.data(), DType::f32, {64});
  auto expect_overlap = [](const Status& s, const std::string& what) {
    EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.to_string();
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  };
  expect_overlap(rms_norm(shifted, x, weight, 1e-6f), "rms_norm: out partly overlaps x");
  expect_overlap(layer_norm(shifted, x, weight, std::nullopt, 1e-6f), "layer_norm: out partly overlaps x");
  expect_overlap(rms_norm(x, rows(buf.data(), 8, 64, 64), TensorView::contiguous(buf.data() + 32, DType::f32, {64}),
                          1e-6f),
                 "rms_norm: out partly overlaps weight");
  expect_overlap(fused_add_rms_norm(x, shifted, weight, 1e-6f), "fused_add_rms_norm: x partly overlaps residual");
  expect_overlap(fused_add_rms_norm(x, x, weight, 1e-6f), "fused_add_rms_norm: x is residual (in place)");
  expect_overlap(softmax(shifted, x), "softmax: out partly overlaps x");
  expect_overlap(activation(Activation::silu, shifted, x), "silu: out partly overlaps x");
  expect_overlap(gated_activation(Activation::silu, rows(buf.data(), 4, 64, 128), rows(buf.data(), 4, 128, 128)),
                 "silu_and_mul: out partly overlaps x");

  // In place where the op is documented to allow it: the same result as out of place.
  std::vector<float> copy = buf;
  ASSERT_TRUE(rms_norm(rows(out.data(), 8, 64, 64), rows(copy.data(), 8, 64, 64), weight, 1e-6f).ok());
  ASSERT_TRUE(rms_norm(x, x, weight, 1e-6f).ok());
  EXPECT_EQ(std::memcmp(out.data(), buf.data(), out.size() * sizeof(float)), 0);
  EXPECT_TRUE(softmax(x, x).ok());
  EXPECT_TRUE(activation(Activation::gelu, x, x).ok());
  EXPECT_TRUE(layer_norm(x, x, weight, std::nullopt, 1e-6f).ok());

  // Attention has no in-place form; the quantizers' and linear layers' outputs are separate tensors.
  std::vector<uint16_t> h(2 * 4 * 4 * 64), kv(2 * 8 * 2 * 64);
  const auto q = TensorView::contiguous(h.data(), DType::f16, {2, 4, 4, 64});
  const auto k = TensorView::contiguous(kv.data(), DType::f16, {2, 8, 2, 64});
  expect_overlap(attention(q, std::nullopt, q, k, k), "attention: out is q (in place), which attention does not support");
  std::vector<int8_t> qw(64 * 64);
  std::vector<float> wf(64 * 64, 0.5f);
  expect_overlap(quantize_int8_per_channel(TensorView::contiguous(qw.data(), DType::i8, {64, 64}),
                                           TensorView::contiguous(wf.data(), DType::f32, {64}),
                                           TensorView::contiguous(wf.data(), DType::f32, {64, 64})),
                 "quantize_int8_per_channel: scales partly overlaps w");
  std::vector<float> lx(4 * 16), lw(16 * 16);
  expect_overlap(linear(TensorView::contiguous(lw.data(), DType::f32, {4, 16}),
                        TensorView::contiguous(lx.data(), DType::f32, {4, 16}),
                        TensorView::contiguous(lw.data(), DType::f32, {16, 16})),
                 "linear: y partly overlaps w");
}

}  // namespace
}  // namespace kernelkit

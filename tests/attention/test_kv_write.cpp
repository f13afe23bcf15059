// write_kv_cache on the CPU backend: the case grid's self-check (every slot holds its token's rows, every other cache
// row its old bits), RoPE by hand, a written cache read back by decode_attention, and bad input named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kernelkit/ops.hpp"
#include "ops/attention/attention_cases.hpp"
#include "testing/harness.hpp"

using namespace kernelkit;
using kernelkit::testing::HostBuffer;
using kernelkit::testing::KvWriteCase;
using kernelkit::testing::random_host;

namespace {

TensorView view(HostBuffer& b, DType t, std::initializer_list<int64_t> shape) {
  return TensorView::contiguous(b.data(), t, shape);
}

}  // namespace

TEST(WriteKvCache, SlotsHoldTheirTokensAndNothingElseChanges) {
  uint64_t seed = 1;
  for (DType dt : {DType::f16, DType::bf16})
    for (int rope : {0, 1, 2})
      for (bool i64 : {true, false}) {
        KvWriteCase c{dt, 23, 8, 2, 128, 4, 8, rope, rope == 2 ? 64 : 0, i64, rope != 1, seed++};
        const auto r = kernelkit::testing::check_kv_write_properties(c);
        EXPECT_TRUE(r.passed()) << c.name() << ": " << r.status.to_string() << "\n" << r.detail;
      }
}

TEST(WriteKvCache, RopeByHand) {
  // One token at position 3, one KV head of 8 dims (neox, rot_dim 4 of 8: pairs (0, 2) and (1, 3), the tail copied),
  // the table by its formula: pair j turns by 3 theta^(-2j / 4). f16 holds the inputs exactly; one rounding out.
  const int64_t D = 8, R = 4, P = 8;
  HostBuffer k(DType::f16, D), v(DType::f16, D), q(DType::f16, D), kc(DType::f16, 2 * D), vc(DType::f16, 2 * D);
  for (int64_t i = 0; i < D; ++i) {
    k.set(i, 0.25 * (i + 1));
    v.set(i, -0.5 * i);
    q.set(i, 1.0 - 0.125 * i);
  }
  for (int64_t i = 0; i < 2 * D; ++i) kc.set(i, 7.0), vc.set(i, 7.0);
  std::vector<float> table(static_cast<size_t>(P * R));
  rope_cos_sin_table(table.data(), P, R);
  std::vector<int64_t> slot = {1}, pos = {3};
  const Status s = write_kv_cache(view(kc, DType::f16, {2, 1, 1, D}), view(vc, DType::f16, {2, 1, 1, D}),
                                  view(k, DType::f16, {1, 1, D}), view(v, DType::f16, {1, 1, D}),
                                  TensorView::contiguous(slot.data(), DType::i64, {1}),
                                  KvWriteRope{view(q, DType::f16, {1, 1, D}), view(q, DType::f16, {1, 1, D}),
                                              TensorView::contiguous(pos.data(), DType::i64, {1}),
                                              TensorView::contiguous(table.data(), DType::f32, {P, R})});
  ASSERT_TRUE(s.ok()) << s.to_string();
  auto rotated = [&](double x0, double x1, int64_t j, bool second) {
    const double a = 3.0 * std::pow(10000.0, -2.0 * static_cast<double>(j) / R);
    const double c = static_cast<float>(std::cos(a)), sn = static_cast<float>(std::sin(a));  // the table is f32
    return second ? x1 * c + x0 * sn : x0 * c - x1 * sn;
  };
  const double tol = 1e-3;  // f16: one rounding of values below 2
  for (int64_t j = 0; j < R / 2; ++j) {
    EXPECT_NEAR(kc.get(D + j), rotated(0.25 * (j + 1), 0.25 * (j + 3), j, false), tol) << j;
    EXPECT_NEAR(kc.get(D + j + 2), rotated(0.25 * (j + 1), 0.25 * (j + 3), j, true), tol) << j;
    EXPECT_NEAR(q.get(j), rotated(1.0 - 0.125 * j, 1.0 - 0.125 * (j + 2), j, false), tol) << j;
    EXPECT_NEAR(q.get(j + 2), rotated(1.0 - 0.125 * j, 1.0 - 0.125 * (j + 2), j, true), tol) << j;
  }
  for (int64_t i = R; i < D; ++i) EXPECT_EQ(kc.get(D + i), 0.25 * (i + 1)) << i;  // the unrotated tail: copied
  for (int64_t i = 0; i < D; ++i) {
    EXPECT_EQ(vc.get(D + i), -0.5 * i) << i;
    EXPECT_EQ(kc.get(i), 7.0) << i;  // slot 0: untouched
    EXPECT_EQ(vc.get(i), 7.0) << i;
    EXPECT_EQ(k.get(i), 0.25 * (i + 1)) << i;  // k itself is not rotated
  }
}

TEST(WriteKvCache, WrittenPagesAreWhatDecodeReads) {
  // Two sequences of 9 and 5 tokens written token by token-batch into shuffled pages of 4 (slot = page * 4 + offset
  // from the block table), then decode_attention over the paged cache equals it over contiguous k / v.
  const int64_t B = 2, H = 4, HK = 2, D = 64, PAGE = 4, MP = 3;
  const std::vector<int64_t> lens = {9, 5};
  std::vector<int32_t> table = {4, 1, 5, 0, 3, 2};  // [B, MP]
  HostBuffer k_pool(DType::f16, B * MP * PAGE * HK * D), v_pool(DType::f16, k_pool.size());
  HostBuffer k_dense = random_host(DType::f16, B * 9 * HK * D, 7),
             v_dense = random_host(DType::f16, k_dense.size(), 8);
  k_pool.poison(), v_pool.poison();
  std::vector<int64_t> slots;
  HostBuffer k_new(DType::f16, (lens[0] + lens[1]) * HK * D), v_new(DType::f16, k_new.size());
  int64_t t = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < lens[static_cast<size_t>(b)]; ++p, ++t) {
      slots.push_back(table[static_cast<size_t>(b * MP + p / PAGE)] * PAGE + p % PAGE);
      for (int64_t i = 0; i < HK * D; ++i) {
        k_new.set(t * HK * D + i, k_dense.get((b * 9 + p) * HK * D + i));
        v_new.set(t * HK * D + i, v_dense.get((b * 9 + p) * HK * D + i));
      }
    }
  const Status w =
      write_kv_cache(view(k_pool, DType::f16, {B * MP, PAGE, HK, D}), view(v_pool, DType::f16, {B * MP, PAGE, HK, D}),
                     view(k_new, DType::f16, {t, HK, D}), view(v_new, DType::f16, {t, HK, D}),
                     TensorView::contiguous(slots.data(), DType::i64, {t}));
  ASSERT_TRUE(w.ok()) << w.to_string();
  HostBuffer q = random_host(DType::f16, B * H * D, 9), o_paged(DType::f16, q.size()), o_dense(DType::f16, q.size());
  std::vector<int32_t> seqlens = {9, 5};
  const KvCache paged{view(k_pool, DType::f16, {B * MP, PAGE, HK, D}), view(v_pool, DType::f16, {B * MP, PAGE, HK, D}),
                      TensorView::contiguous(table.data(), DType::i32, {B, MP}),
                      TensorView::contiguous(seqlens.data(), DType::i32, {B})};
  const KvCache dense{view(k_dense, DType::f16, {B, 9, HK, D}), view(v_dense, DType::f16, {B, 9, HK, D}), std::nullopt,
                      TensorView::contiguous(seqlens.data(), DType::i32, {B})};
  ASSERT_TRUE(
      decode_attention(view(o_paged, DType::f16, {B, 1, H, D}), std::nullopt, view(q, DType::f16, {B, 1, H, D}), paged)
          .ok());
  ASSERT_TRUE(
      decode_attention(view(o_dense, DType::f16, {B, 1, H, D}), std::nullopt, view(q, DType::f16, {B, 1, H, D}), dense)
          .ok());
  for (int64_t i = 0; i < q.size(); ++i) ASSERT_EQ(o_paged.get(i), o_dense.get(i)) << i;
}

TEST(WriteKvCache, BadInputsNameTheArgumentAndTheExpectation) {
  const int64_t T = 3, HK = 2, D = 64;
  HostBuffer k = random_host(DType::f16, T * HK * D, 1), v = random_host(DType::f16, T * HK * D, 2);
  HostBuffer kc(DType::f16, 4 * 4 * HK * D), vc(DType::f16, 4 * 4 * HK * D), kb(DType::bf16, T * HK * D);
  HostBuffer q = random_host(DType::f16, T * 4 * D, 3);
  std::vector<int64_t> slots = {0, 5, -1}, pos = {0, 1, 2};
  std::vector<float> table(8 * D);
  rope_cos_sin_table(table.data(), 8, D);
  const TensorView kv = view(k, DType::f16, {T, HK, D}), vv = view(v, DType::f16, {T, HK, D}),
                   kcv = view(kc, DType::f16, {4, 4, HK, D}), vcv = view(vc, DType::f16, {4, 4, HK, D}),
                   sv = TensorView::contiguous(slots.data(), DType::i64, {T});
  const KvWriteRope rope{view(q, DType::f16, {T, 4, D}), view(q, DType::f16, {T, 4, D}),
                         TensorView::contiguous(pos.data(), DType::i64, {T}),
                         TensorView::contiguous(table.data(), DType::f32, {8, D})};
  ASSERT_TRUE(write_kv_cache(kcv, vcv, kv, vv, sv).ok());
  ASSERT_TRUE(write_kv_cache(kcv, vcv, kv, vv, sv, rope).ok());
  auto expect = [](const Status& s, StatusCode code, const std::string& want) {
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(want), std::string::npos) << s.message() << "\nwanted: " << want;
  };
  const auto bad = [&](int64_t slot) {
    slots[1] = slot;
    return write_kv_cache(kcv, vcv, kv, vv, sv);
  };
  for (int64_t s : {int64_t{-2}, int64_t{16}, int64_t{1} << 40})
    expect(bad(s), StatusCode::invalid_argument,
           "write_kv_cache: slot_mapping[1] = " + std::to_string(s) + " must be -1 (skip) or a cache slot in [0, 16)");
  slots[1] = 5;
  expect(write_kv_cache(kcv, vcv, view(kb, DType::bf16, {T, HK, D}), vv, sv), StatusCode::invalid_argument,
         "write_kv_cache: v dtype f16 does not match k dtype bf16");
  expect(write_kv_cache(kcv, vcv, kv, view(v, DType::f16, {T, 1, 2 * D}), sv), StatusCode::invalid_argument,
         "write_kv_cache: v shape [3, 1, 128] must be [tokens=3, kv_heads=2, head_dim=64]");
  expect(write_kv_cache(view(kc, DType::f16, {4, 4, 1, 2 * D}), vcv, kv, vv, sv), StatusCode::invalid_argument,
         "write_kv_cache: k_cache shape [4, 4, 1, 128] must be [dim 0=4, dim 1=4, kv_heads=2, head_dim=64]");
  expect(write_kv_cache(kcv, view(vc, DType::f16, {2, 8, HK, D}), kv, vv, sv), StatusCode::invalid_argument,
         "write_kv_cache: v_cache shape [2, 8, 2, 64] must be [dim 0=4, dim 1=4, kv_heads=2, head_dim=64]");
  expect(write_kv_cache(view(kc, DType::f16, {16, HK, D}), vcv, kv, vv, sv), StatusCode::invalid_argument,
         "write_kv_cache: k_cache must have 4 dims");
  expect(write_kv_cache(kcv, vcv, kv, vv, TensorView::contiguous(slots.data(), DType::f32, {T})),
         StatusCode::invalid_argument, "write_kv_cache: slot_mapping dtype f32 must be i32 or i64");
  expect(write_kv_cache(kcv, vcv, kv, vv, TensorView::contiguous(slots.data(), DType::i64, {T - 1})),
         StatusCode::invalid_argument, "write_kv_cache: slot_mapping shape [2] must be [tokens=3]");
  expect(write_kv_cache(kcv, vcv, kv, vv, TensorView::strided(slots.data(), DType::i64, {T}, {2})),
         StatusCode::invalid_argument,
         "write_kv_cache: slot_mapping must have a contiguous last dim (stride 1), got stride 2");
  expect(write_kv_cache(kcv, vcv, view(k, DType::f16, {32, 1, 12}), vv, sv), StatusCode::unsupported,
         "write_kv_cache: head_dim (k last dim) 12 is not supported (expected a multiple of 8 up to 256)");
  // The cache written over its own input (one token's rows on; 2 slots).
  slots[1] = 1;
  expect(write_kv_cache(TensorView::contiguous(static_cast<char*>(k.data()) + 2 * D, DType::f16, {1, 2, HK, D}),
                        view(vc, DType::f16, {1, 2, HK, D}), kv, vv, sv),
         StatusCode::invalid_argument, "write_kv_cache: k_cache partly overlaps k");
  slots[1] = 5;
  // RoPE's arguments, checked by the rope family under this op's name.
  KvWriteRope r = rope;
  r.positions = TensorView::contiguous(pos.data(), DType::f32, {T});
  expect(write_kv_cache(kcv, vcv, kv, vv, sv, r), StatusCode::invalid_argument,
         "write_kv_cache: positions dtype f32 must be i32 or i64");
  r = rope;
  r.cos_sin_cache = TensorView::contiguous(table.data(), DType::f32, {4, 2 * D});
  expect(write_kv_cache(kcv, vcv, kv, vv, sv, r), StatusCode::invalid_argument,
         "write_kv_cache: rot_dim must be even and in [2, head_dim=64], got 128");
  r = rope;
  r.q = view(q, DType::f16, {T - 1, 4, D});
  expect(write_kv_cache(kcv, vcv, kv, vv, sv, r), StatusCode::invalid_argument,
         "write_kv_cache: k [3, 2, 64] f16 on cpu must match q in tokens, head_dim, dtype and device (q is [2, 4, 64]");
  r = rope;
  pos[2] = 8;
  expect(write_kv_cache(kcv, vcv, kv, vv, sv, r), StatusCode::invalid_argument,
         "write_kv_cache: positions[2] = 8 is outside the cache [0, 8)");
  pos[2] = 2;
  r.q_out = TensorView::contiguous(kc.data(), DType::f16, {T, 4, D});
  expect(write_kv_cache(kcv, vcv, kv, vv, sv, r), StatusCode::invalid_argument,
         "write_kv_cache: k_cache partly overlaps q_out");
  expect(write_kv_cache(view(kc, DType::f32, {2, 4, HK, D / 2}), view(vc, DType::f32, {2, 4, HK, D / 2}),
                        view(k, DType::f32, {T, HK, D / 2}), view(v, DType::f32, {T, HK, D / 2}), sv),
         StatusCode::invalid_argument, "write_kv_cache: k dtype f32 is not supported (expected f16 or bf16)");
  // Nothing to do: no tokens, or no heads.
  EXPECT_TRUE(write_kv_cache(view(kc, DType::f16, {4, 4, 0, D}), view(vc, DType::f16, {4, 4, 0, D}),
                             view(k, DType::f16, {T, 0, D}), view(v, DType::f16, {T, 0, D}), sv)
                  .ok());
  EXPECT_TRUE(write_kv_cache(kcv, vcv, view(k, DType::f16, {0, HK, D}), view(v, DType::f16, {0, HK, D}),
                             TensorView::contiguous(slots.data(), DType::i64, {0}))
                  .ok());
}

// ---- e4m3 caches: each value stored as e4m3(value / scale), the quantizers' rounding

TEST(WriteKvCacheFp8, CodesByHand) {
  // One token, two KV heads of 16 dims into slot 1 of an e4m3 cache: k at per-head scales 1 and 0.5, v at the one
  // scale 0.25, so the quotients are the values times 1, 2 and 4. Nearest even on e4m3's grid (2^(e - 7) (1 + m / 8),
  // subnormals m 2^-9), saturating at +-448, signed zeros kept.
  const int64_t HK = 2, D = 16;
  const double x[D] = {1,   1000, -1000, 0x1p-10, 3 * 0x1p-10, -3 * 0x1p-10, 0x1p-6, 7 * 0x1p-9,
                       0.3, 17,   19,    464,     0,           -0.0,         448,    -2};
  const uint8_t k0[D] = {0x38, 0x7e, 0xfe, 0x00, 0x02, 0x82, 0x08, 0x07,   // 2^-10: a tie, to 0; 3 2^-10: to 2 2^-9
                         0x2a, 0x58, 0x5a, 0x7e, 0x00, 0x80, 0x7e, 0xc0};  // 0.3: 0.3125; 17: 16; 19: 20; 464: 448
  const uint8_t k1[D] = {0x40, 0x7e, 0xfe, 0x01, 0x03, 0x83, 0x10, 0x0e,   // times 2
                         0x32, 0x60, 0x62, 0x7e, 0x00, 0x80, 0x7e, 0xc8};
  const uint8_t v4[D] = {0x48, 0x7e, 0xfe, 0x02, 0x06, 0x86, 0x18, 0x16,  // times 4
                         0x3a, 0x68, 0x6a, 0x7e, 0x00, 0x80, 0x7e, 0xd0};
  HostBuffer k(DType::f16, HK * D), v(DType::f16, HK * D);
  for (int64_t h = 0; h < HK; ++h)
    for (int64_t i = 0; i < D; ++i) k.set(h * D + i, x[i]), v.set(h * D + i, x[i]);
  std::vector<uint8_t> kc(2 * HK * D, 0x55), vc(2 * HK * D, 0x55);
  std::vector<float> k_scale = {1.0f, 0.5f}, v_scale = {0.25f};
  std::vector<int32_t> slot = {1};
  const Status s =
      write_kv_cache(TensorView::contiguous(kc.data(), DType::f8e4m3, {2, 1, HK, D}),
                     TensorView::contiguous(vc.data(), DType::f8e4m3, {2, 1, HK, D}), view(k, DType::f16, {1, HK, D}),
                     view(v, DType::f16, {1, HK, D}), TensorView::contiguous(slot.data(), DType::i32, {1}),
                     std::nullopt, TensorView::contiguous(k_scale.data(), DType::f32, {HK}),
                     TensorView::contiguous(v_scale.data(), DType::f32, {1}));
  ASSERT_TRUE(s.ok()) << s.to_string();
  for (int64_t i = 0; i < D; ++i) {
    EXPECT_EQ(kc[static_cast<size_t>(HK * D + i)], k0[i]) << "k head 0, value " << x[i];
    EXPECT_EQ(kc[static_cast<size_t>(HK * D + D + i)], k1[i]) << "k head 1, value " << x[i];
    EXPECT_EQ(vc[static_cast<size_t>(HK * D + i)], v4[i]) << "v head 0, value " << x[i];
    EXPECT_EQ(vc[static_cast<size_t>(HK * D + D + i)], v4[i]) << "v head 1, value " << x[i];
  }
  for (size_t i = 0; i < static_cast<size_t>(HK * D); ++i) EXPECT_EQ(kc[i] & vc[i], 0x55) << "slot 0 untouched";
}

TEST(WriteKvCacheFp8, SlotsHoldTheirCodesBitForBit) {
  // Random values of magnitudes 2^-20 .. 2 at scales near 2^-8: codes that saturate, subnormal ones, zeros; with and
  // without RoPE (the rotated k rounded to k's dtype first), scales per tensor and per head, both slot dtypes.
  uint64_t seed = 201;
  for (DType dt : {DType::f16, DType::bf16})
    for (int rope : {0, 1, 2})
      for (bool per_head : {false, true}) {
        const bool i64_slots = per_head;  // both slot dtypes
        KvWriteCase c{dt, 37, 8, 2, 128, 4, 16, rope, rope == 2 ? 64 : 0, i64_slots, rope != 1, seed++};
        c.fp8 = true;
        c.scale_per_head = per_head;
        const auto r = kernelkit::testing::check_kv_write_properties(c);
        EXPECT_TRUE(r.passed()) << c.name() << ": " << r.status.to_string() << "\n" << r.detail;
      }
}

TEST(WriteKvCacheFp8, WrittenCodesAreWhatDecodeReads) {
  // Two sequences of 9 and 5 tokens written into shuffled e4m3 pages of 4 (per-head k scales, one v scale); decode
  // over them equals decode over a bf16 cache holding code * scale (exact in bf16 for these scales), bit for bit.
  const int64_t B = 2, H = 4, HK = 2, D = 64, PAGE = 4, MP = 3, T = 14;
  std::vector<int32_t> table = {4, 1, 5, 0, 3, 2}, seqlens = {9, 5};
  std::vector<int64_t> slots;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < seqlens[static_cast<size_t>(b)]; ++p)
      slots.push_back(table[static_cast<size_t>(b * MP + p / PAGE)] * PAGE + p % PAGE);
  HostBuffer k = random_host(DType::bf16, T * HK * D, 11, 4.0), v = random_host(DType::bf16, T * HK * D, 12, 0.5);
  HostBuffer kp(DType::f8e4m3, B * MP * PAGE * HK * D), vp(DType::f8e4m3, kp.size());
  std::vector<float> k_scale = {0x1p-5f, 0x1p-4f * 0.75f}, v_scale = {0x1p-7f};
  const auto pool = [&](HostBuffer& t) { return view(t, t.dtype(), {B * MP, PAGE, HK, D}); };
  const Status w =
      write_kv_cache(pool(kp), pool(vp), view(k, DType::bf16, {T, HK, D}), view(v, DType::bf16, {T, HK, D}),
                     TensorView::contiguous(slots.data(), DType::i64, {T}), std::nullopt,
                     TensorView::contiguous(k_scale.data(), DType::f32, {HK}),
                     TensorView::contiguous(v_scale.data(), DType::f32, {1}));
  ASSERT_TRUE(w.ok()) << w.to_string();
  HostBuffer kd(DType::bf16, kp.size()), vd(DType::bf16, vp.size());  // the dequantized cache
  for (int64_t i = 0; i < kp.size(); ++i) {
    kd.set(i, kp.get(i) * k_scale[static_cast<size_t>((i / D) % HK)]);
    vd.set(i, vp.get(i) * v_scale[0]);
    ASSERT_EQ(kd.get(i), kp.get(i) * k_scale[static_cast<size_t>((i / D) % HK)]) << "not exact in bf16";
  }
  HostBuffer q = random_host(DType::bf16, B * H * D, 13), o8(DType::bf16, q.size()), od(DType::bf16, q.size());
  std::vector<float> lse8(B * H), lsed(B * H);
  const auto bt = TensorView::contiguous(table.data(), DType::i32, {B, MP});
  const auto lens = TensorView::contiguous(seqlens.data(), DType::i32, {B});
  KvCache fp8{pool(kp), pool(vp), bt, lens};
  fp8.k_scale = TensorView::contiguous(k_scale.data(), DType::f32, {HK});
  fp8.v_scale = TensorView::contiguous(v_scale.data(), DType::f32, {1});
  const auto qv = view(q, DType::bf16, {B, 1, H, D});
  ASSERT_TRUE(decode_attention(view(o8, DType::bf16, {B, 1, H, D}),
                               TensorView::contiguous(lse8.data(), DType::f32, {B, H, 1}), qv, fp8)
                  .ok());
  ASSERT_TRUE(decode_attention(view(od, DType::bf16, {B, 1, H, D}),
                               TensorView::contiguous(lsed.data(), DType::f32, {B, H, 1}), qv,
                               KvCache{pool(kd), pool(vd), bt, lens})
                  .ok());
  EXPECT_EQ(std::memcmp(o8.data(), od.data(), o8.bytes()), 0);
  EXPECT_EQ(lse8, lsed);
}

TEST(WriteKvCacheFp8, BadInputsNameTheArgumentAndTheExpectation) {
  const int64_t T = 3, HK = 2, D = 64;
  HostBuffer k = random_host(DType::f16, T * HK * D, 1), v = random_host(DType::f16, T * HK * D, 2);
  HostBuffer kc(DType::f8e4m3, 4 * 4 * HK * D), vc(DType::f8e4m3, 4 * 4 * HK * D), kc16(DType::f16, kc.size());
  std::vector<int64_t> slots = {0, 5, -1};
  std::vector<float> ks = {0.5f, 0.25f, 1.0f}, vs = {0.125f};
  const TensorView kv = view(k, DType::f16, {T, HK, D}), vv = view(v, DType::f16, {T, HK, D}),
                   kcv = view(kc, DType::f8e4m3, {4, 4, HK, D}), vcv = view(vc, DType::f8e4m3, {4, 4, HK, D}),
                   sv = TensorView::contiguous(slots.data(), DType::i64, {T});
  const auto scale = [](std::vector<float>& s, std::initializer_list<int64_t> shape, DType dt = DType::f32) {
    return std::optional(TensorView::contiguous(s.data(), dt, shape));
  };
  ASSERT_TRUE(write_kv_cache(kcv, vcv, kv, vv, sv, std::nullopt, scale(ks, {HK}), scale(vs, {1})).ok());
  ASSERT_TRUE(write_kv_cache(kcv, vcv, kv, vv, sv, std::nullopt, scale(ks, {1}), scale(vs, {1})).ok());
  auto expect = [](const Status& s, StatusCode code, const std::string& want) {
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(want), std::string::npos) << s.message() << "\nwanted: " << want;
  };
  expect(write_kv_cache(kcv, vcv, kv, vv, sv), StatusCode::invalid_argument,
         "write_kv_cache: k_scale is required with an f8e4m3 cache (stored code * scale = value)");
  expect(write_kv_cache(kcv, vcv, kv, vv, sv, std::nullopt, scale(ks, {HK})), StatusCode::invalid_argument,
         "write_kv_cache: v_scale is required with an f8e4m3 cache");
  expect(write_kv_cache(view(kc16, DType::f16, {4, 4, HK, D}), view(kc16, DType::f16, {4, 4, HK, D}), kv, vv, sv,
                        std::nullopt, scale(ks, {HK}), scale(vs, {1})),
         StatusCode::invalid_argument, "write_kv_cache: k_scale is for f8e4m3 caches only (k_cache is not e4m3)");
  expect(write_kv_cache(kcv, vcv, kv, vv, sv, std::nullopt, scale(ks, {3}), scale(vs, {1})),
         StatusCode::invalid_argument,
         "write_kv_cache: k_scale shape [3] must be [1] (per tensor) or [kv_heads=2] (per KV head)");
  expect(write_kv_cache(kcv, vcv, kv, vv, sv, std::nullopt, scale(ks, {HK}), scale(vs, {1, 1})),
         StatusCode::invalid_argument, "write_kv_cache: v_scale shape [1, 1] must be [1] (per tensor)");
  expect(write_kv_cache(kcv, vcv, kv, vv, sv, std::nullopt, scale(ks, {HK}, DType::bf16), scale(vs, {1})),
         StatusCode::invalid_argument, "write_kv_cache: k_scale dtype bf16 must be f32");
  expect(write_kv_cache(kcv, view(kc16, DType::f16, {4, 4, HK, D}), kv, vv, sv, std::nullopt, scale(ks, {HK}),
                        scale(vs, {1})),
         StatusCode::invalid_argument, "write_kv_cache: v_cache dtype f16 must be f8e4m3");
  expect(write_kv_cache(view(kc, DType::f8e5m2, {4, 4, HK, D}), view(vc, DType::f8e5m2, {4, 4, HK, D}), kv, vv, sv,
                        std::nullopt, scale(ks, {HK}), scale(vs, {1})),
         StatusCode::unsupported, "write_kv_cache: k_cache dtype f8e5m2 is not supported (an FP8 cache is f8e4m3");
  HostBuffer k8(DType::f8e4m3, k.size()), v8(DType::f8e4m3, v.size());
  expect(write_kv_cache(kcv, vcv, view(k8, DType::f8e4m3, {T, HK, D}), view(v8, DType::f8e4m3, {T, HK, D}), sv,
                        std::nullopt, scale(ks, {HK}), scale(vs, {1})),
         StatusCode::invalid_argument, "write_kv_cache: k dtype f8e4m3 is not supported (expected f16 or bf16)");
  // A scale that is not finite and > 0 is refused before anything is written.
  const std::vector<uint8_t> before(static_cast<const uint8_t*>(kc.data()),
                                    static_cast<const uint8_t*>(kc.data()) + kc.bytes());
  for (float bad : {0.0f, -1.0f, INFINITY, NAN}) {
    ks[1] = bad;
    std::ostringstream want;
    want << "write_kv_cache: k_scale[1] = " << bad << " must be finite and > 0";
    expect(write_kv_cache(kcv, vcv, kv, vv, sv, std::nullopt, scale(ks, {HK}), scale(vs, {1})),
           StatusCode::invalid_argument, want.str());
  }
  ks[1] = 0.25f;
  vs[0] = 0.0f;
  expect(write_kv_cache(kcv, vcv, kv, vv, sv, std::nullopt, scale(ks, {HK}), scale(vs, {1})),
         StatusCode::invalid_argument, "write_kv_cache: v_scale[0] = 0 must be finite and > 0");
  EXPECT_EQ(std::memcmp(before.data(), kc.data(), kc.bytes()), 0);
  // Bad slots as before: refused naming the token.
  vs[0] = 0.125f;
  slots[1] = 16;
  expect(write_kv_cache(kcv, vcv, kv, vv, sv, std::nullopt, scale(ks, {HK}), scale(vs, {1})),
         StatusCode::invalid_argument,
         "write_kv_cache: slot_mapping[1] = 16 must be -1 (skip) or a cache slot in [0, 16)");
}

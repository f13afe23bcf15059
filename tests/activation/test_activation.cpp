// The activation family on the CPU backend: hand-computed values, the gated forms equal their composition, the
// odd-part identity act(x) - act(-x) = x, and bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "host_checks.hpp"
#include "kernelkit/ops.hpp"
#include "ops/activation/activation.hpp"
#include "ops/activation/activation_cases.hpp"
#include "random_cases.hpp"

using namespace kernelkit;

using kernelkit::testing::expect_error;
using kernelkit::testing::f32;

TEST(Activation, ValuesByHand) {
  std::vector<float> x = {1.0f, -2.0f}, out(2, NAN);
  ASSERT_TRUE(activation(Activation::silu, f32(out, {1, 2}), f32(x, {1, 2})).ok());
  EXPECT_NEAR(out[0], 0.7310585786300049, 1e-7);   // 1 * sigmoid(1)
  EXPECT_NEAR(out[1], -0.2384058440442351, 1e-7);  // -2 * sigmoid(-2)
  ASSERT_TRUE(activation(Activation::gelu, f32(out, {1, 2}), f32(x, {1, 2})).ok());
  EXPECT_NEAR(out[0], 0.8413447460685429, 1e-7);   // Phi(1)
  EXPECT_NEAR(out[1], -0.04550026389635842, 1e-7);
  ASSERT_TRUE(activation(Activation::gelu_tanh, f32(out, {1, 2}), f32(x, {1, 2})).ok());
  EXPECT_NEAR(out[0], 0.8411919906082768, 1e-7);
}

TEST(Activation, GatedTakesTheFirstHalfActivated) {
  // x = [a | b] = [1, -2 | 3, 0.5]: out = silu(a) * b.
  std::vector<float> x = {1.0f, -2.0f, 3.0f, 0.5f}, out(2, NAN);
  ASSERT_TRUE(gated_activation(Activation::silu, f32(out, {1, 2}), f32(x, {1, 4})).ok());
  EXPECT_NEAR(out[0], 0.7310585786300049 * 3, 1e-6);
  EXPECT_NEAR(out[1], -0.2384058440442351 * 0.5, 1e-7);
  std::vector<float> a = {1.0f, -2.0f}, b = {3.0f, 0.5f};
  ASSERT_TRUE(gated_activation(Activation::gelu, f32(out, {1, 2}), f32(a, {1, 2}), f32(b, {1, 2})).ok());
  EXPECT_NEAR(out[0], 0.8413447460685429 * 3, 1e-6);
}

TEST(Activation, BadInputs) {
  std::vector<float> x(12), out(12);
  expect_error(gated_activation(Activation::silu, f32(out, {2, 3}), f32(x, {2, 5})), {"x", "multiple of 2"});
  expect_error(gated_activation(Activation::silu, f32(out, {2, 4}), f32(x, {2, 6})), {"out", "[2, 4]", "[2, 3]"});
  expect_error(activation(Activation::gelu, f32(out, {3, 4}), f32(x, {2, 6})), {"out", "shape"});
  std::vector<uint16_t> h(12);
  expect_error(activation(Activation::gelu, TensorView::contiguous(h.data(), DType::f16, {2, 6}), f32(x, {2, 6})),
               {"out", "dtype f16"});
  expect_error(activation(Activation::silu, f32(out, {2, 0}), f32(x, {2, 0})), {"x", "> 0"});
  EXPECT_TRUE(activation(Activation::silu, f32(out, {0, 6}), f32(x, {0, 6})).ok());  // rows = 0: no-op
  setenv("KERNELKIT_PROFILE", "t4", 1);
  std::vector<uint16_t> h6(6);
  const Status s = gated_activation(Activation::silu, TensorView::contiguous(h.data(), DType::bf16, {1, 3}, Device::cuda(0)),
                                    TensorView::contiguous(h6.data(), DType::bf16, {1, 6}, Device::cuda(0)));
  unsetenv("KERNELKIT_PROFILE");
  EXPECT_EQ(s.code(), StatusCode::unsupported) << s.to_string();
  EXPECT_NE(s.message().find("silu_and_mul"), std::string::npos);
}

class ActivationProperties : public ::testing::TestWithParam<std::tuple<OpId, DType, int64_t, int64_t>> {};

TEST_P(ActivationProperties, GatedEqualsComposedAndOddPartIsX) {
  const auto [op, dt, rows, d] = GetParam();
  for (int64_t pad : {0, 8}) {
    kernelkit::testing::ActivationCase c{op, dt, rows, d, pad, 3.0, static_cast<uint64_t>(rows + d)};
    const auto r = kernelkit::testing::check_activation_properties(c);
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_EQ(r.mismatches, 0) << c.name() << "\n" << r.detail;
    EXPECT_GT(r.checked, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Grid, ActivationProperties,
    ::testing::Combine(::testing::Values(OpId::gelu, OpId::gelu_tanh, OpId::silu, OpId::gelu_and_mul,
                                         OpId::gelu_tanh_and_mul, OpId::silu_and_mul, OpId::geglu),
                       ::testing::Values(DType::f32, DType::f16, DType::bf16), ::testing::Values(1, 7, 83),
                       ::testing::Values(64, 111, 500, 4096)));

// Seeded random cases (random_activation_case: shapes, dtypes, strides and magnitudes off the grid) on the same invariants.
TEST(ActivationRandom, PropertiesHold) {
  kernelkit::testing::for_random_cases(60, kernelkit::testing::random_activation_case, [](const auto& c) {
    kernelkit::testing::expect_properties(kernelkit::testing::check_activation_properties(c), c.name());
  });
}

namespace {
// x f16 [rows, 2 d] from floats (each rounded to f16).
std::vector<uint16_t> f16_values(std::initializer_list<float> v) {
  std::vector<uint16_t> h;
  for (float f : v) h.push_back(float_to_half_bits(f));
  return h;
}
}  // namespace

TEST(ActivationQuant, ValuesByHand) {
  // x = [a | b] = [1, -2 | 2, 0.5]: y = silu(a) b rounded to f16 = [1.4619..., -0.1192...].
  std::vector<uint16_t> h = f16_values({1.0f, -2.0f, 2.0f, 0.5f});
  const double y0 = half_bits_to_float(float_to_half_bits(static_cast<float>(0.7310585786300049 * 2)));
  const double y1 = half_bits_to_float(float_to_half_bits(static_cast<float>(-0.2384058440442351 * 0.5)));
  const auto x = TensorView::contiguous(h.data(), DType::f16, {1, 4});
  std::vector<int8_t> q(2, 99);
  std::vector<float> s(1, NAN);
  ASSERT_TRUE(silu_and_mul_quant(TensorView::contiguous(q.data(), DType::i8, {1, 2}), f32(s, {1}), x).ok());
  EXPECT_EQ(s[0], static_cast<float>(y0 / 127));  // max |y| / 127
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], static_cast<int>(std::nearbyint(y1 / s[0])));  // -10
  EXPECT_EQ(q[1], -10);
  // FP8: s = max |y| / 448, the max at code 448 and y1 / s = -36.5... at e4m3's nearest, -36 (spacing 4 there).
  std::vector<uint8_t> q8(2);
  ASSERT_TRUE(silu_and_mul_quant(TensorView::contiguous(q8.data(), DType::f8e4m3, {1, 2}), f32(s, {1}), x).ok());
  EXPECT_EQ(s[0], static_cast<float>(y0 / 448));
  EXPECT_EQ(e4m3_bits_to_float(q8[0]), 448.0f);
  EXPECT_EQ(e4m3_bits_to_float(q8[1]), -36.0f);
  // A static scale is read, not written: s = 0.01 puts y0 / s = 146 past int8's range (saturates at 127).
  s[0] = 0.01f;
  ASSERT_TRUE(
      silu_and_mul_quant(TensorView::contiguous(q.data(), DType::i8, {1, 2}), f32(s, {1}), x, /*static_scale=*/true)
          .ok());
  EXPECT_EQ(s[0], 0.01f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], static_cast<int>(std::nearbyint(static_cast<float>(y1) / 0.01f)));  // -12
}

// The fused op equals quantize_per_token(silu_and_mul(x)) bit for bit (static: y / s's nearest codes), over the grid.
TEST(ActivationQuant, EqualsQuantizedSiluAndMul) {
  uint64_t seed = 1;
  for (OpId op : {OpId::silu_and_mul_quant_int8, OpId::silu_and_mul_quant_fp8})
    for (DType dt : {DType::f16, DType::bf16})
      for (int64_t rows : {1, 7, 83})
        for (int64_t d : {64, 111, 500, 4096})
          for (bool static_scale : {false, true})
            for (int64_t pad : {0, 8}) {
              const kernelkit::testing::ActivationCase c{op, dt, rows, d, pad, 3.0, seed++, static_scale};
              const auto r = kernelkit::testing::check_activation_properties(c);
              ASSERT_TRUE(r.status.ok()) << c.name() << ": " << r.status.to_string();
              EXPECT_EQ(r.mismatches, 0) << c.name() << "\n" << r.detail;
              EXPECT_GT(r.checked, 0);
            }
}

TEST(BadInput, ActivationQuantOutputs) {
  // x f16 [4, 16] (d = 8); q i8 or f8e4m3 [4, 8]; scales f32 [4] (dynamic) or [1] (static).
  std::vector<uint16_t> h(64, 0x3c00), o(64);
  std::vector<int8_t> q8(64);
  std::vector<float> s(8), x32(64);
  const auto x = TensorView::contiguous(h.data(), DType::f16, {4, 16});
  const auto q = TensorView::contiguous(q8.data(), DType::i8, {4, 8});
  const auto sc = f32(s, {4});
  EXPECT_TRUE(silu_and_mul_quant(q, sc, x).ok());
  expect_error(silu_and_mul_quant(q, sc, f32(x32, {4, 16})), {"silu_and_mul_quant", "x dtype f32", "f16 or bf16"});
  expect_error(silu_and_mul_quant(q, sc, TensorView::contiguous(h.data(), DType::f16, {4, 15})),
               {"x", "multiple of 2"});
  expect_error(silu_and_mul_quant(TensorView::contiguous(q8.data(), DType::i8, {4, 16}), sc, x),
               {"q shape [4, 16]", "hidden = 8", "[4, 8]"});
  expect_error(silu_and_mul_quant(TensorView::contiguous(o.data(), DType::f16, {4, 8}), sc, x),
               {"q dtype f16", "i8 or f8e4m3"});
  expect_error(silu_and_mul_quant(q, f32(s, {3}), x), {"scales", "4 elements (one a row of x)", "[3]"});
  expect_error(silu_and_mul_quant(q, sc, x, /*static_scale=*/true), {"scales", "1 element (the static scale)", "[4]"});
  expect_error(silu_and_mul_quant(q, TensorView::contiguous(s.data(), DType::f32, {4}, Device::cuda(0)), x),
               {"scales is on cuda:0", "x is on cpu"});
  expect_error(silu_and_mul_quant(TensorView::contiguous(h.data(), DType::i8, {4, 8}), sc, x), {"q", "x", "overlap"});
  EXPECT_TRUE(silu_and_mul_quant(TensorView::contiguous(q8.data(), DType::i8, {0, 8}), f32(s, {0}),
                                 TensorView::contiguous(h.data(), DType::f16, {0, 16}))
                  .ok());  // no rows: a no-op
}

TEST(BadInput, ActivationQuantFp8BelowSm89) {
  // FP8 codes need sm_89+: the T4 and A100 profiles refuse the FP8 op (the int8 one runs there).
  std::vector<uint16_t> h(64);
  std::vector<uint8_t> q8(32);
  std::vector<float> s(4);
  detail::ElementwiseArgs a;
  a.op = OpId::silu_and_mul_quant_fp8;
  a.act = Activation::silu;
  a.gated = true;
  a.dtype = DType::f16;
  a.device = Device::cuda(0);
  a.rows = 4;
  a.hidden = 8;
  a.a = h.data();
  a.b = h.data() + 8;
  a.q = q8.data();
  a.q_scales = s.data();
  const DeviceProfile t4 = *find_profile("t4"), a100 = *find_profile("a100"), h100 = *find_profile("h100");
  for (const DeviceProfile* p : {&t4, &a100}) {
    const Status st = detail::validate_elementwise(a, p);
    EXPECT_EQ(st.code(), StatusCode::unsupported) << st.to_string();
    for (const char* f : {"silu_and_mul_quant_fp8", "f8e4m3", p->key.c_str()})
      EXPECT_NE(st.message().find(f), std::string::npos) << f << " not in " << st.message();
  }
  EXPECT_TRUE(detail::validate_elementwise(a, &h100).ok());
  a.op = OpId::silu_and_mul_quant_int8;
  EXPECT_TRUE(detail::validate_elementwise(a, &a100).ok());
  a.q = nullptr;
  EXPECT_FALSE(detail::validate_elementwise(a, &a100).ok());
}

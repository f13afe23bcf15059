// Every bad input gets a clear error naming the argument and the expectation (never a crash or a silent result).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "host_checks.hpp"
#include "kernelkit/ops.hpp"
#include "ops/norm/norm.hpp"

using namespace kernelkit;
using kernelkit::testing::expect_error;

namespace {

struct Bufs {
  std::vector<float> x = std::vector<float>(64, 1.0f), out = std::vector<float>(64), w = std::vector<float>(16, 1.0f),
                     r = std::vector<float>(64, 1.0f);
  std::vector<uint16_t> h = std::vector<uint16_t>(64), hw = std::vector<uint16_t>(16);
  TensorView X(std::initializer_list<int64_t> shape = {4, 16}) { return TensorView::contiguous(x.data(), DType::f32, shape); }
  TensorView O(std::initializer_list<int64_t> shape = {4, 16}) { return TensorView::contiguous(out.data(), DType::f32, shape); }
  TensorView W(int64_t n = 16) { return TensorView::contiguous(w.data(), DType::f32, {n}); }
};

}  // namespace

TEST(BadInput, WeightDtypeMismatch) {
  Bufs b;
  auto w16 = TensorView::contiguous(b.hw.data(), DType::f16, {16});
  expect_error(rms_norm(b.O(), b.X(), w16, 1e-6f), StatusCode::invalid_argument,
               {"rms_norm", "weight", "dtype f16", "x dtype f32"});
}

TEST(BadInput, WeightLengthNotHidden) {
  Bufs b;
  expect_error(rms_norm(b.O(), b.X(), b.W(15), 1e-6f), StatusCode::invalid_argument,
               {"weight", "[hidden=16]", "[15]"});
  expect_error(layer_norm(b.O(), b.X(), b.W(), b.W(15), 1e-5f), StatusCode::invalid_argument, {"bias", "[hidden=16]"});
}

TEST(BadInput, HiddenZeroIsAnErrorRowsZeroIsANoOp) {
  Bufs b;
  expect_error(rms_norm(b.O({4, 0}), b.X({4, 0}), std::nullopt, 1e-6f), StatusCode::invalid_argument,
               {"x", "hidden", "> 0"});
  EXPECT_TRUE(rms_norm(b.O({0, 16}), b.X({0, 16}), b.W(), 1e-6f).ok());
  EXPECT_TRUE(fused_add_rms_norm(b.X({0, 16}), b.O({0, 16}), b.W(), 1e-6f).ok());
}

TEST(BadInput, NullPointer) {
  Bufs b;
  auto null_x = TensorView::contiguous(nullptr, DType::f32, {4, 16});
  expect_error(rms_norm(b.O(), null_x, b.W(), 1e-6f), StatusCode::invalid_argument, {"x", "null"});
  auto null_w = TensorView::contiguous(nullptr, DType::f32, {16});
  expect_error(rms_norm(b.O(), b.X(), null_w, 1e-6f), StatusCode::invalid_argument, {"weight", "null"});
}

TEST(BadInput, Bf16UnderTheT4Profile) {
  // Refused from the profile alone: the same answer with or without a GPU present.
  Bufs b;
  setenv("KERNELKIT_PROFILE", "t4", 1);
  auto x = TensorView::contiguous(b.h.data(), DType::bf16, {4, 16}, Device::cuda(0));
  auto out = TensorView::contiguous(b.h.data(), DType::bf16, {4, 16}, Device::cuda(0));
  expect_error(rms_norm(out, x, std::nullopt, 1e-6f), StatusCode::unsupported, {"bf16", "t4", "sm_75", "f16"});
  unsetenv("KERNELKIT_PROFILE");
  // The validation itself, with the T4 profile passed explicitly.
  detail::RowNormArgs a;
  a.op = OpId::layer_norm;
  a.dtype = DType::bf16;
  a.device = Device::cuda(0);
  a.rows = 1;
  a.hidden = 16;
  a.x = a.out = b.h.data();
  const DeviceProfile t4 = *find_profile("t4"), a100 = *find_profile("a100");
  expect_error(detail::validate_row_norm(a, &t4), StatusCode::unsupported, {"layer_norm", "bf16"});
  EXPECT_TRUE(detail::validate_row_norm(a, &a100).ok());
}

TEST(BadInput, Eps) {
  Bufs b;
  for (float eps : {0.0f, -1e-6f, NAN, INFINITY})
    expect_error(rms_norm(b.O(), b.X(), b.W(), eps), StatusCode::invalid_argument, {"eps", "finite and > 0"});
  expect_error(layer_norm(b.O(), b.X(), std::nullopt, std::nullopt, 0.0f), StatusCode::invalid_argument, {"eps"});
}

TEST(BadInput, LastDimNotContiguous) {
  Bufs b;
  auto x = TensorView::strided(b.x.data(), DType::f32, {4, 8}, {16, 2});
  auto out = TensorView::contiguous(b.out.data(), DType::f32, {4, 8});
  expect_error(rms_norm(out, x, std::nullopt, 1e-6f), StatusCode::invalid_argument,
               {"x", "contiguous last dim", "stride 2"});
}

TEST(BadInput, LeadingDimsThatDoNotCollapse) {
  Bufs b;
  // [2, 2, 8] whose batch stride skips a gap: rows are not evenly spaced.
  auto x = TensorView::strided(b.x.data(), DType::f32, {2, 2, 8}, {32, 8, 1});
  auto out = TensorView::contiguous(b.out.data(), DType::f32, {2, 2, 8});
  expect_error(rms_norm(out, x, std::nullopt, 1e-6f), StatusCode::invalid_argument, {"x", "collapse", "dim 0"});
}

TEST(BadInput, OverlappingOutputRows) {
  Bufs b;
  auto out = TensorView::strided(b.out.data(), DType::f32, {4, 16}, {8, 1});
  expect_error(rms_norm(out, b.X(), std::nullopt, 1e-6f), StatusCode::invalid_argument, {"out", "overlap"});
}

TEST(BadInput, ResidualShapeDiffersFromX) {
  Bufs b;
  auto r = TensorView::contiguous(b.r.data(), DType::f32, {2, 16});
  expect_error(fused_add_rms_norm(b.X(), r, b.W(), 1e-6f), StatusCode::invalid_argument,
               {"fused_add_rms_norm", "residual", "[2, 16]", "[4, 16]"});
}

TEST(BadInput, OutShapeDiffersFromX) {
  Bufs b;
  expect_error(layer_norm(b.O({2, 16}), b.X(), std::nullopt, std::nullopt, 1e-5f), StatusCode::invalid_argument,
               {"out", "shape"});
}

TEST(BadInput, MixedDevices) {
  Bufs b;
  auto w = TensorView::contiguous(b.w.data(), DType::f32, {16}, Device::cuda(0));
  expect_error(rms_norm(b.O(), b.X(), w, 1e-6f), StatusCode::invalid_argument, {"weight", "cuda:0", "cpu"});
}

TEST(BadInput, IntegerDtype) {
  std::vector<int8_t> x(64), out(64);
  expect_error(rms_norm(TensorView::contiguous(out.data(), DType::i8, {4, 16}),
                        TensorView::contiguous(x.data(), DType::i8, {4, 16}), std::nullopt, 1e-6f),
               StatusCode::invalid_argument, {"x dtype i8", "f32, f16 or bf16"});
}

TEST(BadInput, AdaShapes) {
  Bufs b;
  auto x = b.X({2, 2, 16});
  auto out = b.O({2, 2, 16});
  std::vector<float> s(48);
  auto scale = TensorView::contiguous(s.data(), DType::f32, {3, 16});
  auto shift = TensorView::contiguous(s.data(), DType::f32, {2, 16});
  expect_error(ada_layer_norm(out, x, scale, shift, std::nullopt, std::nullopt, 1e-6f), StatusCode::invalid_argument,
               {"scale", "[batch=2, hidden=16]", "[3, 16]"});
  expect_error(ada_layer_norm(b.O(), b.X(), shift, shift, std::nullopt, std::nullopt, 1e-6f),
               StatusCode::invalid_argument, {"x", "[batch, seq, hidden]"});
}

TEST(BadInput, CudaTensorsWithoutAGpuOrCudaBuild) {
  // With no GPU the call reports it plainly (no crash); with one, the GPU tests check host pointers instead.
  Bufs b;
  auto x = TensorView::contiguous(b.x.data(), DType::f32, {4, 16}, Device::cuda(0));
  auto out = TensorView::contiguous(b.out.data(), DType::f32, {4, 16}, Device::cuda(0));
  const Status s = rms_norm(out, x, std::nullopt, 1e-6f);
  EXPECT_FALSE(s.ok());
  if (s.code() == StatusCode::no_device) EXPECT_FALSE(s.message().empty());
  else EXPECT_NE(s.message().find("host pointer"), std::string::npos) << s.message();
}

TEST(BadInput, NormQuantOutputs) {
  // x f16 [4, 16]; q i8 or f8e4m3 in x's shape; scales f32 [4] (dynamic) or [1] (static).
  std::vector<uint16_t> h(64, 0x3c00), r(64, 0x3c00);
  std::vector<int8_t> q8(64);
  std::vector<float> s(8);
  auto x = TensorView::contiguous(h.data(), DType::f16, {4, 16});
  auto res = TensorView::contiguous(r.data(), DType::f16, {4, 16});
  auto q = TensorView::contiguous(q8.data(), DType::i8, {4, 16});
  auto sc = TensorView::contiguous(s.data(), DType::f32, {4});
  EXPECT_TRUE(rms_norm_quant(q, sc, x, std::nullopt, 1e-6f).ok());
  Bufs b;  // f32 x: the fused quantizers take 16-bit activations only
  auto q32 = TensorView::contiguous(q8.data(), DType::i8, {4, 16});
  expect_error(rms_norm_quant(q32, sc, b.X(), std::nullopt, 1e-6f), StatusCode::invalid_argument,
               {"rms_norm_quant", "x dtype f32", "f16 or bf16"});
  expect_error(rms_norm_quant(TensorView::contiguous(r.data(), DType::f16, {4, 16}), sc, x, std::nullopt, 1e-6f),
               StatusCode::invalid_argument, {"q dtype f16", "i8 or f8e4m3"});
  expect_error(rms_norm_quant(TensorView::contiguous(q8.data(), DType::i8, {4, 15}), sc, x, std::nullopt, 1e-6f),
               StatusCode::invalid_argument, {"q shape [4, 15]", "x's shape [4, 16]"});
  expect_error(rms_norm_quant(TensorView::strided(q8.data(), DType::i8, {4, 8}, {16, 1}), sc,
                              TensorView::contiguous(h.data(), DType::f16, {4, 8}), std::nullopt, 1e-6f),
               StatusCode::invalid_argument, {"q must be contiguous"});
  expect_error(rms_norm_quant(q, TensorView::contiguous(s.data(), DType::f32, {3}), x, std::nullopt, 1e-6f),
               StatusCode::invalid_argument, {"scales", "4 elements (one a row of x)", "[3]"});
  expect_error(rms_norm_quant(q, sc, x, std::nullopt, 1e-6f, /*static_scale=*/true), StatusCode::invalid_argument,
               {"scales", "1 element (the static scale)", "[4]"});
  expect_error(rms_norm_quant(q, TensorView::contiguous(r.data(), DType::f16, {4}), x, std::nullopt, 1e-6f),
               StatusCode::invalid_argument, {"scales dtype f16", "f32"});
  expect_error(
      rms_norm_quant(q, TensorView::contiguous(s.data(), DType::f32, {4}, Device::cuda(0)), x, std::nullopt, 1e-6f),
      StatusCode::invalid_argument, {"scales is on cuda:0", "x is on cpu"});
  expect_error(rms_norm_quant(TensorView::contiguous(h.data(), DType::i8, {4, 16}), sc, x, std::nullopt, 1e-6f),
               StatusCode::invalid_argument, {"q", "x", "overlap"});
  expect_error(
      fused_add_rms_norm_quant(q, sc, x, TensorView::contiguous(r.data(), DType::f16, {4, 8}), std::nullopt, 1e-6f),
      StatusCode::invalid_argument, {"fused_add_rms_norm_quant", "residual"});
  EXPECT_TRUE(fused_add_rms_norm_quant(q, sc, x, res, std::nullopt, 1e-6f).ok());
}

TEST(BadInput, FusedQuantizersRefuseABadStaticScale) {
  // A static scale must be finite and > 0 (as quantize_per_tensor's): the CPU backend refuses it before writing, the
  // CUDA kernels record it for check_errors (tests/quant/test_quant_gpu.cpp).
  std::vector<uint16_t> h(64, 0x3c00), r(64, 0x3c00);
  std::vector<int8_t> q8(64, 7);
  auto x = TensorView::contiguous(h.data(), DType::f16, {4, 16});
  auto res = TensorView::contiguous(r.data(), DType::f16, {4, 16});
  auto q = TensorView::contiguous(q8.data(), DType::i8, {4, 16});
  auto qhalf = TensorView::contiguous(q8.data(), DType::i8, {4, 8});
  for (float bad : {0.0f, -0.5f, INFINITY, NAN}) {
    std::vector<float> s{bad};
    auto sc = TensorView::contiguous(s.data(), DType::f32, {1});
    expect_error(rms_norm_quant(q, sc, x, std::nullopt, 1e-6f, /*static_scale=*/true), StatusCode::invalid_argument,
                 {"rms_norm_quant", "must be finite and > 0 (a static scale)"});
    expect_error(fused_add_rms_norm_quant(q, sc, x, res, std::nullopt, 1e-6f, /*static_scale=*/true),
                 StatusCode::invalid_argument, {"fused_add_rms_norm_quant", "must be finite and > 0"});
    expect_error(silu_and_mul_quant(qhalf, sc, x, /*static_scale=*/true), StatusCode::invalid_argument,
                 {"silu_and_mul_quant", "must be finite and > 0"});
  }
  EXPECT_EQ(r[0], 0x3c00);  // refused before anything is written: the residual is unchanged
  EXPECT_EQ(q8[0], 7);
}

TEST(BadInput, NonFiniteRowsOfTheFusedQuantizersNameTheRow) {
  // A dynamic scale over a row holding inf or NaN (from x, or after the op): the error the CUDA kernels record for
  // check_errors (tests/runtime/test_device_errors_gpu.cpp), returned by the CPU backend. A static scale quantizes it.
  for (uint16_t bad : {uint16_t{0x7c00}, uint16_t{0xfc00}, uint16_t{0x7e00}}) {  // f16 inf, -inf, NaN
    std::vector<uint16_t> h(64, 0x3c00), r(64, 0x3c00);
    h[2 * 16 + 5] = bad;
    std::vector<int8_t> q8(64, 7);
    std::vector<float> s(4, -1.0f), one{0.5f};
    auto x = TensorView::contiguous(h.data(), DType::f16, {4, 16});
    auto res = TensorView::contiguous(r.data(), DType::f16, {4, 16});
    auto q = TensorView::contiguous(q8.data(), DType::i8, {4, 16});
    auto qhalf = TensorView::contiguous(q8.data(), DType::i8, {4, 8});
    auto sc = TensorView::contiguous(s.data(), DType::f32, {4});
    const char* row2 = "x row 2 holds inf or NaN; quantization needs finite values";
    expect_error(rms_norm_quant(q, sc, x, std::nullopt, 1e-6f), StatusCode::invalid_argument,
                 {"rms_norm_quant_int8: ", row2});
    expect_error(fused_add_rms_norm_quant(q, sc, x, res, std::nullopt, 1e-6f), StatusCode::invalid_argument,
                 {"fused_add_rms_norm_quant_int8: ", row2});
    // silu_and_mul: row 2's a half (columns 0..7) holds it
    expect_error(silu_and_mul_quant(qhalf, sc, x), StatusCode::invalid_argument, {"silu_and_mul_quant_int8: ", row2});
    EXPECT_TRUE(rms_norm_quant(q, TensorView::contiguous(one.data(), DType::f32, {1}), x, std::nullopt, 1e-6f,
                               /*static_scale=*/true)
                    .ok());
  }
}

TEST(BadInput, NormQuantFp8BelowSm89) {
  // FP8 codes need sm_89+: the T4 and A100 profiles refuse the FP8 twins (the int8 ones run there).
  std::vector<uint16_t> h(64);
  std::vector<uint8_t> q8(64);
  detail::RowNormArgs a;
  a.op = OpId::rms_norm_quant_fp8;
  a.dtype = DType::f16;
  a.device = Device::cuda(0);
  a.rows = 4;
  a.hidden = 16;
  a.x = h.data();
  a.q = q8.data();
  std::vector<float> s(4);
  a.q_scales = s.data();
  const DeviceProfile t4 = *find_profile("t4"), a100 = *find_profile("a100"), h100 = *find_profile("h100");
  expect_error(detail::validate_row_norm(a, &a100), StatusCode::unsupported, {"rms_norm_quant_fp8", "f8e4m3", "a100"});
  expect_error(detail::validate_row_norm(a, &t4), StatusCode::unsupported, {"f8e4m3", "t4"});
  EXPECT_TRUE(detail::validate_row_norm(a, &h100).ok());
  a.op = OpId::rms_norm_quant_int8;
  EXPECT_TRUE(detail::validate_row_norm(a, &a100).ok());
  a.q = nullptr;
  expect_error(detail::validate_row_norm(a, &a100), StatusCode::invalid_argument, {"x, q, scales", "null"});
}

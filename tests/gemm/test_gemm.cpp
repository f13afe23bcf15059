// linear's CPU path (the fp64 reference) against the formula written out in the case runner, and its argument checks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "kernelkit/gemm.hpp"
#include "ops/gemm/gemm_cases.hpp"

using namespace kernelkit;
using kernelkit::testing::LinearCase;

TEST(Linear, ReferenceMatchesTheFormula) {
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (LinearEpilogue e : {LinearEpilogue::none, LinearEpilogue::bias, LinearEpilogue::bias_gelu})
      for (int64_t pad : {0, 3})
        for (bool acc : {false, true}) {
        const LinearCase c{dt, 5, 7, 33, e, false, pad, 3, acc};
        const auto r = kernelkit::testing::run_linear_case(c, Device::cpu());
        ASSERT_TRUE(r.status.ok()) << c.name() << ": " << r.status.to_string();
        EXPECT_EQ(r.checked, 5 * 7) << c.name();
        EXPECT_EQ(r.mismatches, 0) << c.name() << "\n" << r.detail;
      }
}

TEST(Linear, HandComputedValues) {
  // x = [[1, 2], [3, 4]], w = [[1, 0], [1, -1], [0.5, 0.5]], bias = [1, 0, -1]:
  // x w^T = [[1, -1, 1.5], [3, -1, 3.5]] (+ bias: [[2, -1, 0.5], [4, -1, 2.5]]).
  std::vector<float> x = {1, 2, 3, 4}, w = {1, 0, 1, -1, 0.5f, 0.5f}, b = {1, 0, -1}, y(6, -7.0f);
  const auto X = TensorView::contiguous(x.data(), DType::f32, {2, 2});
  const auto W = TensorView::contiguous(w.data(), DType::f32, {3, 2});
  const auto Y = TensorView::contiguous(y.data(), DType::f32, {2, 3});
  const auto B = TensorView::contiguous(b.data(), DType::f32, {3});
  ASSERT_TRUE(linear(Y, X, W).ok());
  EXPECT_EQ(y, (std::vector<float>{1, -1, 1.5f, 3, -1, 3.5f}));
  ASSERT_TRUE(linear(Y, X, W, &B, {LinearEpilogue::bias}).ok());
  EXPECT_EQ(y, (std::vector<float>{2, -1, 0.5f, 4, -1, 2.5f}));
}

TEST(Linear, BadArgumentsNameTheArgument) {
  std::vector<float> buf(64, 1.0f);
  std::vector<int32_t> ibuf(64, 1);
  const auto X = TensorView::contiguous(buf.data(), DType::f32, {2, 4});
  const auto W = TensorView::contiguous(buf.data(), DType::f32, {3, 4});
  const auto Y = TensorView::contiguous(buf.data(), DType::f32, {2, 3});
  auto expect_error = [](const Status& s, const char* needle) {
    EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.to_string();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
  };
  expect_error(linear(Y, X, TensorView::contiguous(buf.data(), DType::f32, {3, 5})), "w must have shape [3, 4]");
  expect_error(linear(TensorView::contiguous(buf.data(), DType::f32, {2, 4}), X, W), "y must have shape [2, 3]");
  expect_error(linear(Y, TensorView::contiguous(ibuf.data(), DType::i32, {2, 4}), W), "x dtype i32");
  expect_error(linear(Y, X, TensorView::contiguous(buf.data(), DType::f16, {3, 4})), "w dtype f16");
  expect_error(linear(Y, X, W, nullptr, {LinearEpilogue::bias}), "needs a bias");
  const auto B = TensorView::contiguous(buf.data(), DType::f32, {4});
  expect_error(linear(Y, X, W, &B, {LinearEpilogue::bias}), "bias must have shape [1, 3]");
  expect_error(linear(Y, TensorView::strided(buf.data(), DType::f32, {2, 4}, {1, 2}), W), "contiguous last dim");
  expect_error(linear(Y, TensorView::contiguous(buf.data(), DType::f32, {8}), W), "x must be 2-D");
  const auto H = TensorView::contiguous(buf.data(), DType::f16, {2, 4});
  expect_error(linear(TensorView::contiguous(buf.data(), DType::f16, {2, 3}), H,
                      TensorView::contiguous(buf.data(), DType::f16, {3, 4}), nullptr, {LinearEpilogue::none, true}),
               "allow_tf32 applies to f32");
  // m = 0 is a no-op.
  EXPECT_TRUE(linear(TensorView::contiguous(buf.data(), DType::f32, {0, 3}),
                     TensorView::contiguous(buf.data(), DType::f32, {0, 4}), W)
                  .ok());
}

TEST(Linear, Bf16IsRefusedOnTheT4ProfileWithoutAGpu) {
  // The profile override is checked before any device is needed, as for every other op.
  setenv("KERNELKIT_PROFILE", "t4", 1);
  std::vector<uint16_t> y(6), x(8), w(12);
  const Device d = Device::cuda(0);
  const Status s = linear(TensorView::contiguous(y.data(), DType::bf16, {2, 3}, d),
                          TensorView::contiguous(x.data(), DType::bf16, {2, 4}, d),
                          TensorView::contiguous(w.data(), DType::bf16, {3, 4}, d));
  unsetenv("KERNELKIT_PROFILE");
  EXPECT_EQ(s.code(), StatusCode::unsupported) << s.to_string();
  EXPECT_NE(s.message().find("profile t4"), std::string::npos) << s.to_string();
}

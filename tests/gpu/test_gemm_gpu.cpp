// linear through cuBLASLt against the fp64 formula: decode (m = 1) to prefill shapes, odd sizes, strided rows, the
// bias and bias+GELU epilogues, TF32 on and off; bf16 is refused on a T4 profile. The algorithm cache is reused.
#include <gtest/gtest.h>

#include "expect_case.hpp"
#include "testing/gemm_case.hpp"

using namespace kernelkit;
using kernelkit::testing::DeviceBuffer;
using kernelkit::testing::LinearCase;

using LinearParam = std::tuple<DType, int64_t, int64_t, int64_t>;
class LinearGrid : public ::testing::TestWithParam<LinearParam> {};

TEST_P(LinearGrid, MatchesReference) {
  const auto [dt, m, n, k] = GetParam();
  for (LinearEpilogue e : {LinearEpilogue::none, LinearEpilogue::bias, LinearEpilogue::bias_gelu})
    for (int64_t pad : {int64_t{0}, int64_t{8}}) {
      const LinearCase c{dt, m, n, k, e, false, pad, static_cast<uint64_t>(m + n + k)};
      kernelkit::testing::expect_case(kernelkit::testing::run_linear_case(c, Device::cuda(0)), dt, c.name());
    }
  {  // y += x w^T + bias (the fused residual add)
    const LinearCase c{dt, m, n, k, LinearEpilogue::bias, false, 8, 9, true};
    kernelkit::testing::expect_case(kernelkit::testing::run_linear_case(c, Device::cuda(0)), dt, c.name());
  }
  if (dt == DType::f32) {
    const LinearCase c{dt, m, n, k, LinearEpilogue::bias, true, 0, 5};
    kernelkit::testing::expect_case(kernelkit::testing::run_linear_case(c, Device::cuda(0)), dt, c.name());
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearGrid,
                         ::testing::Combine(::testing::Values(DType::f32, DType::f16, DType::bf16),
                                            ::testing::Values(1, 7, 64, 300), ::testing::Values(8, 136, 1000),
                                            ::testing::Values(16, 264, 4096)));

TEST(Linear, HandleCachesOneAlgorithmPerProblem) {
  GemmHandle h;
  ASSERT_TRUE(h.init(0).ok());
  DeviceBuffer x, w, y;
  ASSERT_TRUE(x.alloc(3 * 64 * 2).ok());
  ASSERT_TRUE(w.alloc(40 * 64 * 2).ok());
  ASSERT_TRUE(y.alloc(3 * 40 * 2).ok());
  const Device d = Device::cuda(0);
  const auto X = TensorView::contiguous(x.data(), DType::f16, {3, 64}, d);
  const auto W = TensorView::contiguous(w.data(), DType::f16, {40, 64}, d);
  const auto Y = TensorView::contiguous(y.data(), DType::f16, {3, 40}, d);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(linear(Y, X, W, nullptr, {}, &h).ok());
  EXPECT_EQ(h.cached_algorithms(), 1u);
  // Another problem (two rows) chooses its own algorithm.
  ASSERT_TRUE(linear(TensorView::contiguous(y.data(), DType::f16, {2, 40}, d),
                     TensorView::contiguous(x.data(), DType::f16, {2, 64}, d), W, nullptr, {}, &h)
                  .ok());
  EXPECT_EQ(h.cached_algorithms(), 2u);
}

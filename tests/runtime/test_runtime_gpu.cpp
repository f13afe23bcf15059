// Bad inputs that need a device to detect, and launches on a caller's stream.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernelkit/ops.hpp"
#include "kernelkit/runtime.hpp"
#include "testing/harness.hpp"

using namespace kernelkit;

TEST(GpuBadInput, HostPointerPassedToACudaOp) {
  std::vector<float> host(64, 1.0f);
  kernelkit::testing::DeviceBuffer out;
  ASSERT_TRUE(out.alloc(64 * sizeof(float)).ok());
  auto x = TensorView::contiguous(host.data(), DType::f32, {4, 16}, Device::cuda(0));
  auto o = TensorView::contiguous(out.data(), DType::f32, {4, 16}, Device::cuda(0));
  const Status s = rms_norm(o, x, std::nullopt, 1e-6f);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.to_string();
  EXPECT_NE(s.message().find("x is a host pointer"), std::string::npos) << s.message();
}

TEST(GpuBadInput, TrustedPointersSkipOnlyThePointerQuery) {
  // Inside the scope the pointer query is skipped (the caller vouches for its pointers); the other checks still run,
  // and the query is back once the scope ends.
  std::vector<float> host(64, 1.0f);
  EXPECT_EQ(check_device_pointer(host.data(), 0, "x").code(), StatusCode::invalid_argument);
  {
    TrustedDevicePointers trusted;
    EXPECT_TRUE(check_device_pointer(host.data(), 0, "x").ok());
    kernelkit::testing::DeviceBuffer out;
    ASSERT_TRUE(out.alloc(64 * sizeof(float)).ok());
    auto o = TensorView::contiguous(out.data(), DType::f32, {4, 16}, Device::cuda(0));
    auto bad = TensorView::contiguous(out.data(), DType::f16, {4, 16}, Device::cuda(0));
    EXPECT_EQ(rms_norm(o, bad, std::nullopt, 1e-6f).code(), StatusCode::invalid_argument);  // dtype mismatch
  }
  EXPECT_EQ(check_device_pointer(host.data(), 0, "x").code(), StatusCode::invalid_argument);
}

TEST(GpuBadInput, DeviceIndexOutOfRange) {
  kernelkit::testing::DeviceBuffer buf;
  ASSERT_TRUE(buf.alloc(64 * sizeof(float)).ok());
  auto t = TensorView::contiguous(buf.data(), DType::f32, {4, 16}, Device::cuda(99));
  const Status s = rms_norm(t, t, std::nullopt, 1e-6f);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("99"), std::string::npos) << s.message();
}

TEST(GpuStreams, RunsOnTheCallersStreamAndInPlace) {
  // In-place rms_norm (out aliases x) on a non-default stream, checked against the reference.
  const int64_t rows = 33, hidden = 1000;
  kernelkit::testing::HostBuffer x(DType::f32, rows * hidden), want(DType::f32, rows * hidden), got(DType::f32, rows * hidden);
  for (int64_t i = 0; i < x.size(); ++i) x.set(i, std::sin(0.37 * static_cast<double>(i)) + 0.1);
  want = x;
  ASSERT_TRUE(rms_norm(TensorView::contiguous(want.data(), DType::f32, {rows, hidden}),
                       TensorView::contiguous(x.data(), DType::f32, {rows, hidden}), std::nullopt, 1e-6f)
                  .ok());
  kernelkit::testing::DeviceBuffer d;
  ASSERT_TRUE(d.alloc(x.bytes()).ok());
  ASSERT_TRUE(d.upload(x).ok());
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto t = TensorView::contiguous(d.data(), DType::f32, {rows, hidden}, Device::cuda(0));
  ASSERT_TRUE(rms_norm(t, t, std::nullopt, 1e-6f, 0.0f, stream).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_TRUE(d.download(&got).ok());
  cudaStreamDestroy(stream);
  const auto tol = kernelkit::testing::tolerance(DType::f32);
  for (int64_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got.get(i), want.get(i), tol.atol + tol.rtol * std::fabs(want.get(i))) << i;
}

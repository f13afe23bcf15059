// Bad inputs that need a device to detect, launches on a caller's stream, and calls from several host threads.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kernelkit/ops.hpp"
#include "kernelkit/runtime.hpp"
#include "expect_case.hpp"
#include "ops/activation/activation_cases.hpp"
#include "ops/gemm/gemm_cases.hpp"
#include "ops/norm/norm_cases.hpp"
#include "ops/rope/rope_cases.hpp"
#include "ops/softmax/softmax_cases.hpp"
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

// Several host threads calling ops at once (each case on its own buffers): the runtime's shared state (the profile and
// arch caches, the cuBLASLt handle, KERNELKIT_TUNE parsing, the trusted-pointer scope) must serve them all; every
// output is checked against the reference.
TEST(GpuThreads, ConcurrentCallsMatchReference) {
  namespace kt = kernelkit::testing;
  constexpr int kThreads = 6, kRounds = 4;
  std::vector<std::vector<std::pair<std::string, kt::CaseResult>>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, &results] {
      for (int round = 0; round < kRounds; ++round) {
        const uint64_t seed = 1000 + static_cast<uint64_t>(t * kRounds + round);
        const DType dt = (t + round) % 2 ? DType::f32 : DType::f16;  // both on every profile (T4: no bf16)
        const kt::NormCase norm{OpId::rms_norm, dt, 333 + t, 4096, 0, true, true, 1e-6f, 0.0f, 1.0, seed};
        const kt::SoftmaxCase soft{OpId::softmax, dt, 97 + t, 2048, 1, 0.125f, 8.0, 0, seed};
        const kt::ActivationCase act{OpId::silu_and_mul, dt, 129 + t, 1024, 0, 3.0, seed};
        const kt::RopeCase rope{dt, 45 + t, 8, 2, 128, 128, RopeStyle::neox, round % 2 == 0, seed};
        kt::LinearCase lin;
        lin.dtype = dt;
        lin.m = 17 + t;
        lin.n = 256;
        lin.k = 512;
        lin.seed = seed;
        for (const auto& [name, run] :
             std::initializer_list<std::pair<std::string, std::function<kt::CaseResult()>>>{
                 {norm.name(), [&] { return kt::run_norm_case_cuda(norm, 0); }},
                 {soft.name(), [&] { return kt::run_softmax_case_cuda(soft, 0); }},
                 {act.name(), [&] { return kt::run_activation_case_cuda(act, 0); }},
                 {rope.name(), [&] { return kt::run_rope_case_cuda(rope, 0); }},
                 {lin.name(), [&] { return kt::run_linear_case(lin, Device::cuda(0)); }}})
          results[static_cast<size_t>(t)].emplace_back("thread " + std::to_string(t) + ": " + name, run());
      }
    });
  for (std::thread& th : threads) th.join();
  for (const auto& per_thread : results)
    for (const auto& [name, r] : per_thread) {
      ASSERT_TRUE(r.status.ok()) << name << ": " << r.status.to_string();
      EXPECT_GT(r.checked, 0) << name;
      EXPECT_EQ(r.mismatches, 0) << name << "\n" << r.detail;
    }
}

// An installed ScratchAllocator serves the ops' temporaries (here act-order's gathered x, m k halves), each block
// released once on the op's stream, and the output is the same bits as with cudaMallocAsync's pool; an allocator with
// no memory makes the op fail naming the bytes, without a launch.
namespace {
struct CountingScratch {
  static inline int allocations = 0, releases = 0;
  static inline size_t bytes = 0;
  static inline bool refuse = false;
  static void* allocate(size_t n, Stream stream) {
    if (refuse) return nullptr;
    void* p = nullptr;
    if (cudaMallocAsync(&p, n, stream) != cudaSuccess) return nullptr;
    ++allocations, bytes += n;
    return p;
  }
  static void release(void* p, Stream stream) {
    ++releases;
    cudaFreeAsync(p, stream);
  }
};
}  // namespace

TEST(GpuScratch, InstalledAllocatorServesTheTemporaries) {
  using kernelkit::testing::DeviceBuffer;
  using kernelkit::testing::HostBuffer;
  using kernelkit::testing::upload;
  const Device d = Device::cuda(0);
  const int64_t m = 3, n = 32, k = 256, group = 128;
  DeviceBuffer x = upload(kernelkit::testing::random_host(DType::f16, m * k, 7));
  DeviceBuffer q = upload(kernelkit::testing::random_host(DType::i8, n * k / 2, 8));
  HostBuffer scales_host(DType::f32, n * k / group);
  for (int64_t i = 0; i < scales_host.size(); ++i) static_cast<float*>(scales_host.data())[i] = 0.01f + 0.001f * i;
  DeviceBuffer s = upload(scales_host);
  HostBuffer perm_host(DType::i32, k);
  for (int64_t j = 0; j < k; ++j) static_cast<int32_t*>(perm_host.data())[j] = static_cast<int32_t>((j * 37 + 5) % k);
  DeviceBuffer perm = upload(perm_host);
  DeviceBuffer out_pool, out_installed;
  ASSERT_TRUE(out_pool.alloc(m * n * 2).ok());
  ASSERT_TRUE(out_installed.alloc(m * n * 2).ok());
  ASSERT_TRUE(out_installed.poison().ok());
  auto run = [&](const DeviceBuffer& out) {
    return linear_weight_only(TensorView::contiguous(out.data(), DType::f16, {m, n}, d),
                              TensorView::contiguous(x.data(), DType::f16, {m, k}, d),
                              TensorView::contiguous(q.data(), DType::i4x2, {n, k / 2}, d),
                              TensorView::contiguous(s.data(), DType::f32, {n, k / group}, d), 4, group, std::nullopt,
                              nullptr, false, std::nullopt, TensorView::contiguous(perm.data(), DType::i32, {k}, d));
  };
  ASSERT_TRUE(run(out_pool).ok());
  const ScratchAllocator counting{CountingScratch::allocate, CountingScratch::release};
  set_scratch_allocator(&counting);
  const Status installed = run(out_installed);
  CountingScratch::refuse = true;
  const Status refused = run(out_installed);
  set_scratch_allocator(nullptr);
  ASSERT_TRUE(installed.ok()) << installed.to_string();
  EXPECT_GE(CountingScratch::allocations, 1);  // the gather's x (and the tiles' split-K partial sums, if planned)
  EXPECT_EQ(CountingScratch::releases, CountingScratch::allocations);
  EXPECT_GE(CountingScratch::bytes, static_cast<size_t>(m * k * 2));
  EXPECT_EQ(refused.code(), StatusCode::cuda_error);
  EXPECT_NE(refused.message().find("bytes of scratch"), std::string::npos) << refused.message();
  ASSERT_TRUE(kernelkit::testing::device_synchronize().ok());
  HostBuffer a(DType::f16, m * n), b(DType::f16, m * n);
  ASSERT_TRUE(out_pool.download(&a).ok());
  ASSERT_TRUE(out_installed.download(&b).ok());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.bytes()), 0);
}

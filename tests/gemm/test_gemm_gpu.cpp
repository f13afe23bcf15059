// linear through cuBLASLt against the fp64 formula: decode (m = 1) to prefill shapes, odd sizes, strided rows, the
// bias and bias+GELU epilogues, TF32 on and off; bf16 is refused on a T4 profile. The algorithm cache is reused.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <tuple>

#include "expect_case.hpp"
#include "kernelkit/ops.hpp"
#include "ops/gemm/gemm_cases.hpp"

using namespace kernelkit;
using kernelkit::testing::DeviceBuffer;
using kernelkit::testing::LinearCase;

using GemmParam = std::tuple<DType, int64_t, int64_t, int64_t>;
class LinearGrid : public ::testing::TestWithParam<GemmParam> {};

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

// The first cuBLASLt call of a thread creates its default handle and workspace (cudaMalloc). When that first call is
// inside a CUDA graph capture in the strict "global" mode (torch.cuda.graph's default), it must still be captured; and
// the graph must stay valid after the capturing thread (and with it its default handle) is gone. W8A8 (through
// cuBLASLt, forced) and dense linear are each captured as the first call of a new thread; both graphs are replayed
// after those threads have ended, into poisoned outputs, and must equal eager calls on the same inputs.
TEST(Linear, FirstCallOfAThreadInsideGraphCaptureOutlivesTheThread) {
  using kernelkit::testing::HostBuffer;
  const int64_t m = 40, n = 96, k = 256;  // m > 16, n and k multiples of 8: cuBLASLt's INT8 path
  const Device d = Device::cuda(0);
  std::mt19937 rng(20261130);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::uniform_int_distribution<int> q(-127, 127);
  HostBuffer x(DType::f16, m * k), w(DType::f16, n * k), xq(DType::i8, m * k), wq(DType::i8, n * k),
      xs(DType::f32, m), ws(DType::f32, n);
  for (int64_t i = 0; i < m * k; ++i) x.set(i, u(rng)), xq.set(i, q(rng));
  for (int64_t i = 0; i < n * k; ++i) w.set(i, u(rng)), wq.set(i, q(rng));
  for (int64_t i = 0; i < m; ++i) xs.set(i, 1e-3 * (1.5 + u(rng)));
  for (int64_t i = 0; i < n; ++i) ws.set(i, 1e-3 * (1.5 + u(rng)));
  DeviceBuffer dx, dw, dxq, dwq, dxs, dws, dy, dq, ey, eq;
  for (auto [buf, host] : {std::pair{&dx, &x}, {&dw, &w}, {&dxq, &xq}, {&dwq, &wq}, {&dxs, &xs}, {&dws, &ws}}) {
    ASSERT_TRUE(buf->alloc(host->bytes()).ok());
    ASSERT_TRUE(buf->upload(*host).ok());
  }
  for (DeviceBuffer* b : {&dy, &dq, &ey, &eq}) ASSERT_TRUE(b->alloc(m * n * 2).ok());
  auto view = [&](const DeviceBuffer& b, DType t, std::initializer_list<int64_t> shape) {
    return TensorView::contiguous(b.data(), t, shape, d);
  };
  auto dense = [&](const DeviceBuffer& y, cudaStream_t s) {
    return linear(view(y, DType::f16, {m, n}), view(dx, DType::f16, {m, k}), view(dw, DType::f16, {n, k}), nullptr,
                  {}, nullptr, s);
  };
  auto w8a8 = [&](const DeviceBuffer& y, cudaStream_t s) {
    return linear_w8a8(view(y, DType::f16, {m, n}), view(dxq, DType::i8, {m, k}), view(dxs, DType::f32, {m}),
                       view(dwq, DType::i8, {n, k}), view(dws, DType::f32, {n}), std::nullopt, s);
  };
  // Captures op(s) as the first call of a new thread; the instantiated graph outlives the thread.
  auto capture_on_new_thread = [](const std::function<Status(cudaStream_t)>& op, cudaGraphExec_t* exec) {
    std::string failure;  // from the thread: gtest assertions belong to the test's own thread
    std::thread([&] {
      cudaStream_t s;
      cudaGraph_t graph = nullptr;
      if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return void(failure = "stream");
      if (cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) != cudaSuccess) {
        failure = "begin capture";
      } else {
        const Status captured = op(s);
        const cudaError_t end = cudaStreamEndCapture(s, &graph);
        if (!captured.ok()) failure = "captured call: " + captured.to_string();
        else if (end != cudaSuccess) failure = std::string("end capture: ") + cudaGetErrorString(end);
        else if (cudaGraphInstantiate(exec, graph, 0) != cudaSuccess) failure = "instantiate";
      }
      if (graph) cudaGraphDestroy(graph);
      cudaStreamDestroy(s);
    }).join();
    return failure;
  };
  cudaGraphExec_t dense_graph = nullptr, w8a8_graph = nullptr;
  {
    const kernelkit::testing::ScopedEnv lt("KERNELKIT_W8A8", "cublaslt");  // not the tiles: cuBLASLt's handle
    ASSERT_EQ(capture_on_new_thread([&](cudaStream_t s) { return w8a8(dq, s); }, &w8a8_graph), "");
  }
  ASSERT_EQ(capture_on_new_thread([&](cudaStream_t s) { return dense(dy, s); }, &dense_graph), "");
  // Both capturing threads (and their default handles) are gone: replay, then the eager calls on this thread.
  ASSERT_TRUE(dy.poison().ok());
  ASSERT_TRUE(dq.poison().ok());
  ASSERT_TRUE(kernelkit::testing::device_synchronize().ok());  // the memsets and uploads, before a non-blocking stream
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(w8a8_graph, s), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(dense_graph, s), cudaSuccess);
  EXPECT_TRUE(dense(ey, s).ok());
  EXPECT_TRUE(w8a8(eq, s).ok());
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaGraphExecDestroy(w8a8_graph);
  cudaGraphExecDestroy(dense_graph);
  cudaStreamDestroy(s);
  for (auto [graph_out, eager_out, what] : {std::tuple{&dy, &ey, "linear"}, {&dq, &eq, "linear_w8a8"}}) {
    HostBuffer got(DType::f16, m * n), want(DType::f16, m * n);
    ASSERT_TRUE(graph_out->download(&got).ok());
    ASSERT_TRUE(eager_out->download(&want).ok());
    int64_t bad = 0;
    double biggest = 0.0;
    for (int64_t i = 0; i < m * n; ++i) {
      biggest = std::max(biggest, std::abs(want.get(i)));
      // The same computation on the same inputs: equal up to a rounding of the f16 output, never a poisoned NaN.
      if (!(std::abs(got.get(i) - want.get(i)) <= 1e-3 * (1.0 + std::abs(want.get(i))))) ++bad;
    }
    EXPECT_EQ(bad, 0) << what << ": replayed outputs differ from the eager call's";
    EXPECT_GT(biggest, 0.1) << what << ": the eager outputs are all near zero";
  }
}

// The sm_90a building block (src/cuda/common/wgmma.cuh: descriptors, the 128-byte swizzle, wgmma m64n64k16, the
// accumulator layout) on the GPU before any kernel relies on it: one warpgroup's 64 x 64 x 64 product against the fp64
// reference, bf16 and f16, with B K-major (as K in S = Q K^T) and MN-major (as V in O = P V). Skipped where the build
// has no sm_90a code or the device is not compute capability 9.0 (the A100 / T4 paths, other GPUs).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>

#include "cuda/sm90a/sm90a.hpp"
#include "testing/harness.hpp"

using namespace kernelkit;
using kernelkit::testing::DeviceBuffer;
using kernelkit::testing::device_synchronize;
using kernelkit::testing::first_error;
using kernelkit::testing::HostBuffer;

TEST(WgmmaProbe, TileProductMatchesReference) {
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  if (!cuda::sm90a_available(device))
    GTEST_SKIP() << "no sm_90a code in this build (arch list without 90 / native) or not a compute capability 9.0 GPU";
  constexpr int n = 64;
  std::mt19937 rng(97);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  for (DType dt : {DType::bf16, DType::f16})
    for (bool mn_major : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (mn_major ? " B mn-major" : " B k-major"));
      HostBuffer a(dt, n * n), b(dt, n * n), c(DType::f32, n * n);
      for (int64_t i = 0; i < n * n; ++i) a.set(i, u(rng)), b.set(i, u(rng));  // rounded to dt by set
      DeviceBuffer da, db, dc;
      ASSERT_TRUE(first_error({da.alloc(a.bytes()), db.alloc(b.bytes()), dc.alloc(c.bytes()), da.upload(a),
                               db.upload(b), dc.poison()})
                      .ok());
      const Status s = cuda::wgmma_probe(da.data(), db.data(), static_cast<float*>(dc.data()), dt == DType::f16,
                                         mn_major, nullptr);
      ASSERT_TRUE(s.ok()) << s.to_string();
      ASSERT_TRUE(device_synchronize().ok());
      ASSERT_TRUE(dc.download(&c).ok());
      int bad = 0;
      std::ostringstream first;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          double want = 0.0, magnitude = 0.0;
          for (int k = 0; k < n; ++k) {  // B[k][j] of the product: stored [j][k] (k-major) or [k][j] (mn-major)
            const double term = a.get(i * n + k) * b.get(mn_major ? k * n + j : j * n + k);
            want += term;
            magnitude += std::fabs(term);
          }
          const double got = c.get(i * n + j);  // products exact in fp32; the 64-term fp32 sum rounds (<= 64 x 2^-24)
          if (!(std::fabs(got - want) <= 1e-5 + 1e-5 * magnitude)) {
            if (bad++ < 8) first << " (" << i << ", " << j << "): " << got << " vs " << want;
          }
        }
      EXPECT_EQ(bad, 0) << "elements off the reference:" << first.str();
    }
}

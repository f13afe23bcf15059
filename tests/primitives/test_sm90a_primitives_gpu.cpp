// The sm_90a building blocks on the GPU before a kernel relies on them: TMA (below) and wgmma
// (src/kernels/common/wgmma.cuh: descriptors, the 128-byte swizzle, wgmma m64n64k16, the accumulator layout): one
// warpgroup's 64 x 64 x 64 product against the fp64 reference, bf16 and f16, with B K-major (as K in S = Q K^T) and
// MN-major (as V in O = P V). Skipped where the build has no sm_90a code or the device is not compute capability 9.0
// (the A100 / T4 paths, other GPUs).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <utility>

#include "runtime/sm90a.hpp"
#include "expect_case.hpp"
#include "testing/harness.hpp"

using namespace kernelkit;
using kernelkit::testing::DeviceBuffer;
using kernelkit::testing::device_synchronize;
using kernelkit::testing::first_error;
using kernelkit::testing::HostBuffer;

TEST(WgmmaProbe, TileProductMatchesReference) {
  int device = 0;
  KK_SKIP_WITHOUT_SM90A(device);
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
      const Status s = kernelkit::cuda::wgmma_probe(da.data(), db.data(), static_cast<float*>(dc.data()),
                                                    dt == DType::f16, mn_major, nullptr);
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

// The TMA building block (src/kernels/common/tma_probe.cu): a 64 x 64 box of a [100][96] (and a [100][40]) bf16
// tensor through cp.async.bulk.tensor and an mbarrier, the shared bytes as they lie. Element (r, c) of the box must
// sit at swz<64>(r, c) (16-byte chunk c / 8 of row r stored at chunk (c / 8) ^ (r % 8): the layout the wgmma
// descriptors read), and the parts of a box outside the tensor must arrive as zeros (a sequence's tail tile; the
// columns past a head_dim under 64). Boxes inside, touching both far edges exactly, and half outside in both
// dimensions; the output poisoned first.
TEST(TmaProbe, SwizzledBoxMatchesSwz64AndZeroFillsOutside) {
  int device = 0;
  KK_SKIP_WITHOUT_SM90A(device);
  // cols 40: a tensor narrower than the box (attention at head_dim 40 runs on the 64-column kernel).
  for (const int cols : {96, 40}) {
  SCOPED_TRACE("cols " + std::to_string(cols));
  constexpr int rows = 100, box = 64;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-4.0, 4.0);
  HostBuffer src(DType::bf16, rows * cols), got(DType::bf16, box * box);
  for (int64_t i = 0; i < src.size(); ++i) {
    double v = 0.0;
    while (v == 0.0) v = u(rng);  // never zero: a zero in the box must come from the fill
    src.set(i, v);
  }
  DeviceBuffer dsrc, dout;
  ASSERT_TRUE(first_error({dsrc.alloc(src.bytes()), dout.alloc(got.bytes()), dsrc.upload(src)}).ok());
  for (const auto& [row0, col0] : {std::pair{0, 0}, std::pair{36, 32}, std::pair{64, 64}}) {
    if (col0 >= cols) continue;
    SCOPED_TRACE("box at row " + std::to_string(row0) + ", column " + std::to_string(col0));
    ASSERT_TRUE(dout.poison().ok());
    const Status s = kernelkit::cuda::tma_probe(dsrc.data(), rows, cols, row0, col0, dout.data(), nullptr);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_TRUE(device_synchronize().ok());
    ASSERT_TRUE(dout.download(&got).ok());
    int bad = 0;
    std::ostringstream first;
    for (int r = 0; r < box; ++r)
      for (int c = 0; c < box; ++c) {
        const int at = r * box + (((c / 8) ^ (r % 8)) * 8) + c % 8;  // swz<64>(r, c)
        const bool inside = row0 + r < rows && col0 + c < cols;
        const double want = inside ? src.get(static_cast<int64_t>(row0 + r) * cols + col0 + c) : 0.0;
        if (!(got.get(at) == want) && bad++ < 8)
          first << " (" << r << ", " << c << "): " << got.get(at) << " vs " << want;
      }
    EXPECT_EQ(bad, 0) << "box elements misplaced or not zero-filled:" << first.str();
  }
}
  }

// The attention kernels' ldmatrix addresses, run on the host from the header the kernels use
// (src/kernels/common/mma.cuh): the per-lane offsets plus immediates of swz_lane_offsets / swz_kstep must land on the
// same bytes as swz for every lane, k-step and 16-row step the prefill reads (Q as A, K as B, V transposed), at every
// head_dim. A wrong offset would read another row's or chunk's data: wrong attention, or a bank-conflicted layout.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/common/mma.cuh"

using namespace kernelkit::cuda;

template <int D>
void expect_lane_offsets_match_swz() {
  for (int lane = 0; lane < 32; ++lane) {
    struct Operand {
      const char* name;
      int row, h;  // the lane's row (before 16-row steps) and column half, as flash_prefill_kernel maps them
    };
    const Operand ops[] = {{"q", 32 + (lane & 15), lane >> 4},  // a warp whose first row is 32
                           {"k", (lane & 7) + (lane >> 4) * 8, (lane >> 3) & 1},
                           {"v", (lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4}};
    for (const Operand& op : ops) {
      unsigned off[4];
      swz_lane_offsets<D>(op.row, op.h, off);
      for (int kk = 0; kk < D / 16; ++kk)
        for (int step = 0; step < 4; ++step) {  // 16-row steps (the row tiles, key blocks of the loops)
          const unsigned want = 2u * static_cast<unsigned>(swz<D>(op.row + 16 * step, kk * 16 + op.h * 8));
          ASSERT_EQ(swz_kstep<D>(off, kk) + 2u * 16 * step * D, want)
              << "D " << D << " " << op.name << " lane " << lane << " kk " << kk << " step " << step;
        }
    }
  }
}

TEST(MmaLayout, LaneOffsetsMatchTheSwizzle) {
  expect_lane_offsets_match_swz<64>();
  expect_lane_offsets_match_swz<128>();
  expect_lane_offsets_match_swz<256>();
}

// The swizzle itself: the 8 rows of an ldmatrix phase (rows r..r+7, one 16-byte chunk column) fall in 8 different
// 16-byte bank groups of the 128-byte bank window, and every (row, chunk) of a tile has its own address.
TEST(MmaLayout, SwizzleSpreadsAPhaseOverTheBanks) {
  constexpr int D = 128;
  for (int chunk = 0; chunk < D / 8; ++chunk)
    for (int r0 = 0; r0 < 64; r0 += 8) {
      unsigned groups = 0;
      for (int r = r0; r < r0 + 8; ++r) groups |= 1u << ((2 * swz<D>(r, chunk * 8) / 16) % 8);
      EXPECT_EQ(groups, 0xFFu) << "chunk " << chunk << " rows " << r0;
    }
  std::vector<bool> seen(64 * D / 8, false);
  for (int r = 0; r < 64; ++r)
    for (int chunk = 0; chunk < D / 8; ++chunk) {
      const int at = swz<D>(r, chunk * 8) / 8;
      ASSERT_FALSE(seen[at]) << r << " " << chunk;
      seen[at] = true;
    }
}

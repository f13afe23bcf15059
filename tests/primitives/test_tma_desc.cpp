// The host half of the TMA descriptors (src/kernels/common/tma_desc.hpp) on the CPU: the dimensions, byte strides and
// boxes cuTensorMapEncodeTiled is given (tma_layout: which outer dimension goes where, by stride, broadcast and
// extent-1 ones left out) and the refusals. The GPU half is TmaProbe and AttentionWgmma (attn_wgmma=2).
#include <gtest/gtest.h>

#include "kernels/common/tma_desc.hpp"

using namespace kernelkit;
using kernelkit::cuda::TmaDim;
using kernelkit::cuda::TmaLayout;

namespace {
enum { kToken, kHead, kBatch };

TmaLayout layout(const TmaDim (&outer)[3], int64_t cols = 128) {
  TmaLayout l;
  const Status s = kernelkit::cuda::tma_layout(cols, outer, &l);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return l;
}
}  // namespace

TEST(TmaDescriptor, OuterDimensionsGoInStrideOrder) {
  // q [b 2, s 300, h 8, d 128] (token stride h d, head stride d), boxes of 64 tokens: head, token, batch.
  TmaLayout l = layout({TmaDim{300, 8 * 128, 64}, TmaDim{8, 128, 1}, TmaDim{2, 300 * 8 * 128, 1}});
  EXPECT_EQ(l.rank, 4);
  EXPECT_EQ(l.pos[kHead], 1);
  EXPECT_EQ(l.pos[kToken], 2);
  EXPECT_EQ(l.pos[kBatch], 3);
  const uint64_t dims[4] = {128, 8, 300, 2}, strides[3] = {256, 8 * 256, 300 * 8 * 256};
  const uint32_t box[4] = {64, 1, 64, 1};  // a box is [64 tokens][64 columns]: 128-byte rows
  for (int i = 0; i < 4; ++i) EXPECT_EQ(l.dims[i], dims[i]) << i;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(l.strides[i], strides[i]) << i;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(l.box[i], box[i]) << i;
  // The same tensor stored [b, h, s, d]: token, head, batch.
  l = layout({TmaDim{300, 128, 64}, TmaDim{8, 300 * 128, 1}, TmaDim{2, 8 * 300 * 128, 1}});
  EXPECT_EQ(l.rank, 4);
  EXPECT_EQ(l.pos[kToken], 1);
  EXPECT_EQ(l.pos[kHead], 2);
  EXPECT_EQ(l.pos[kBatch], 3);
  EXPECT_EQ(l.strides[0], 256u);
  EXPECT_EQ(l.box[1], 64u);
  // One sequence, one head: only the tokens (a plain matrix, as the probe's).
  l = layout({TmaDim{300, 128, 64}, TmaDim{1, 0, 1}, TmaDim{1, 0, 1}});
  EXPECT_EQ(l.rank, 2);
  EXPECT_EQ(l.pos[kToken], 1);
  EXPECT_EQ(l.pos[kHead], -1);
  EXPECT_EQ(l.pos[kBatch], -1);
  // K/V broadcast over the batch (stride 0): the batch coordinate moves nothing, so it is left out.
  l = layout({TmaDim{300, 2 * 128, 64}, TmaDim{2, 128, 1}, TmaDim{4, 0, 1}});
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.pos[kBatch], -1);
  // A single token keeps its dimension (the box's rows) with a nominal stride; batch 1 goes.
  l = layout({TmaDim{1, 0, 128}, TmaDim{8, 128, 1}, TmaDim{1, 8 * 128, 1}});
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.pos[kToken], 1);  // its nominal stride (cols, 128) ties the head's: the role order breaks the tie
  EXPECT_EQ(l.pos[kHead], 2);
  EXPECT_EQ(l.pos[kBatch], -1);
  EXPECT_EQ(l.box[1], 128u);
}

TEST(TmaDescriptor, RefusesWhatTmaCannotAddress) {
  TmaLayout l;
  EXPECT_EQ(kernelkit::cuda::tma_layout(0, {TmaDim{300, 128, 64}, TmaDim{}, TmaDim{}}, &l).code(),
            StatusCode::invalid_argument);
  const Status stride = kernelkit::cuda::tma_layout(128, {TmaDim{300, 100, 64}, TmaDim{}, TmaDim{}}, &l);
  EXPECT_EQ(stride.code(), StatusCode::invalid_argument);  // 200 bytes: not a multiple of 16
  EXPECT_NE(stride.message().find("stride"), std::string::npos) << stride.message();
  EXPECT_EQ(kernelkit::cuda::tma_layout(128, {TmaDim{300, 128, 257}, TmaDim{}, TmaDim{}}, &l).code(),
            StatusCode::invalid_argument);  // boxes of at most 256
  EXPECT_EQ(kernelkit::cuda::tma_layout(128, {TmaDim{0, 128, 64}, TmaDim{}, TmaDim{}}, &l).code(),
            StatusCode::invalid_argument);
  alignas(16) static unsigned char buffer[32];
  kernelkit::cuda::TmaOperand op;
  const Status misaligned =
      kernelkit::cuda::make_tma_operand(&op, buffer + 2, false, 128, {TmaDim{300, 128, 64}, TmaDim{}, TmaDim{}});
  EXPECT_EQ(misaligned.code(), StatusCode::invalid_argument);
  EXPECT_NE(misaligned.message().find("aligned"), std::string::npos) << misaligned.message();
}

// The host half of the TMA descriptors (src/cuda/sm90a/tma_desc.hpp): which outer dimension goes where (by stride,
// extent-1 ones left out) and the refusals, on the CPU. Without a driver the encoding itself reports unsupported after
// the layout is decided; with one it succeeds (it reads no memory). The GPU half is TmaProbe and AttentionWgmma.
#include <gtest/gtest.h>

#include "cuda/sm90a/tma_desc.hpp"

using namespace kernelkit;
using kernelkit::cuda::make_tma_operand;
using kernelkit::cuda::TmaDim;
using kernelkit::cuda::TmaOperand;

namespace {
alignas(16) unsigned char g_buffer[64];  // an aligned address: encoding reads no memory
enum { kToken, kHead, kBatch };

TmaOperand encoded(const TmaDim (&outer)[3], int64_t cols = 128) {
  TmaOperand op;
  const Status s = make_tma_operand(&op, g_buffer, false, cols, outer);
  EXPECT_TRUE(s.ok() || s.code() == StatusCode::unsupported) << s.to_string();
  return op;
}
}  // namespace

TEST(TmaDescriptor, OuterDimensionsGoInStrideOrder) {
  // [b 2, s 300, h 8, d 128] (token stride h d, head stride d): head, token, batch.
  TmaOperand op = encoded({TmaDim{300, 8 * 128, 64}, TmaDim{8, 128, 1}, TmaDim{2, 300 * 8 * 128, 1}});
  EXPECT_EQ(op.rank, 4);
  EXPECT_EQ(op.pos[kHead], 1);
  EXPECT_EQ(op.pos[kToken], 2);
  EXPECT_EQ(op.pos[kBatch], 3);
  // The same tensor stored [b, h, s, d]: token, head, batch.
  op = encoded({TmaDim{300, 128, 64}, TmaDim{8, 300 * 128, 1}, TmaDim{2, 8 * 300 * 128, 1}});
  EXPECT_EQ(op.rank, 4);
  EXPECT_EQ(op.pos[kToken], 1);
  EXPECT_EQ(op.pos[kHead], 2);
  EXPECT_EQ(op.pos[kBatch], 3);
  // One sequence, one head: only the tokens (a plain matrix, as the probe's).
  op = encoded({TmaDim{300, 128, 64}, TmaDim{1, 0, 1}, TmaDim{1, 0, 1}});
  EXPECT_EQ(op.rank, 2);
  EXPECT_EQ(op.pos[kToken], 1);
  EXPECT_EQ(op.pos[kHead], -1);
  EXPECT_EQ(op.pos[kBatch], -1);
  // A single token still keeps its dimension (the box's rows); batch 1 goes.
  op = encoded({TmaDim{1, 8 * 128, 128}, TmaDim{8, 128, 1}, TmaDim{1, 8 * 128, 1}});
  EXPECT_EQ(op.rank, 3);
  EXPECT_EQ(op.pos[kHead], 1);
  EXPECT_EQ(op.pos[kToken], 2);
  EXPECT_EQ(op.pos[kBatch], -1);
}

TEST(TmaDescriptor, RefusesWhatTmaCannotAddress) {
  TmaOperand op;
  const TmaDim ok[3] = {TmaDim{300, 128, 64}, TmaDim{}, TmaDim{}};
  EXPECT_EQ(make_tma_operand(&op, g_buffer + 2, false, 128, ok).code(), StatusCode::invalid_argument);  // alignment
  EXPECT_EQ(make_tma_operand(&op, g_buffer, false, 0, ok).code(), StatusCode::invalid_argument);
  const Status stride = make_tma_operand(&op, g_buffer, false, 128, {TmaDim{300, 100, 64}, TmaDim{}, TmaDim{}});
  EXPECT_EQ(stride.code(), StatusCode::invalid_argument);  // 200 bytes: not a multiple of 16
  EXPECT_NE(stride.message().find("stride"), std::string::npos) << stride.message();
  EXPECT_EQ(make_tma_operand(&op, g_buffer, false, 128, {TmaDim{300, 128, 257}, TmaDim{}, TmaDim{}}).code(),
            StatusCode::invalid_argument);  // boxes of at most 256
  EXPECT_EQ(make_tma_operand(&op, g_buffer, false, 128, {TmaDim{0, 128, 64}, TmaDim{}, TmaDim{}}).code(),
            StatusCode::invalid_argument);
}

// TMA descriptors (host side, any CUDA build): a tensor of 2-byte elements as 64-column boxes in the 128-byte swizzle,
// which is swz<64> (mma.cuh): the layout the wgmma descriptors read. The device side is src/kernels/common/tma.cuh.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums only: the driver library is reached through the runtime

#include <cstdint>

#include "kernelkit/status.hpp"

namespace kernelkit::cuda {

// A descriptor and where a box's coordinates go in it: dimension 0 is the contiguous one (columns); the outer
// dimensions in the roles token, head, batch are ordered by stride, and those of extent 1 (but the token's) left out,
// so pos[role] is the coordinate index (1 .. rank - 1) of each role, or -1.
struct TmaOperand {
  CUtensorMap map;  // 128-byte aligned; a kernel reads it from its parameter space (__grid_constant__)
  int rank = 0;     // 2 to 4
  int8_t pos[3] = {-1, -1, -1};
};

// An outer dimension: its extent, its stride in elements, and the box's extent along it.
struct TmaDim {
  int64_t extent = 1, stride = 0;
  int box = 1;
};

// What cuTensorMapEncodeTiled is given for a tensor whose innermost dimension holds `cols` contiguous elements (boxes
// take 64 of them: 128-byte rows) and whose outer dimensions are outer[0] = token, outer[1] = head, outer[2] = batch:
// head and batch are left out where their extent is 1 or their stride 0 (a broadcast: the coordinate moves nothing),
// the rest ordered by stride (dims[0] = cols; strides in bytes, of dims 1 ..; an extent-1 token dimension gets a
// nominal stride). invalid_argument names what TMA cannot address (strides must be multiples of 8 elements, boxes 1 to
// 256, extents >= 1).
struct TmaLayout {
  int rank = 0;
  uint64_t dims[4] = {}, strides[3] = {};
  uint32_t box[4] = {};
  int8_t pos[3] = {-1, -1, -1};  // as TmaOperand::pos
};
Status tma_layout(int64_t cols, const TmaDim (&outer)[3], TmaLayout* out);

// Encodes `op` for `base` (16-byte aligned) with tma_layout's layout; elements past any edge arrive as zeros.
// cuTensorMapEncodeTiled is reached through the runtime's driver entry point (looked up once), so nothing links the
// driver library; unsupported without a driver that has it, invalid_argument for what it or tma_layout refuses.
Status make_tma_operand(TmaOperand* op, const void* base, bool f16, int64_t cols, const TmaDim (&outer)[3]);

}  // namespace kernelkit::cuda

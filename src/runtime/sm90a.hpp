// The sm_90a (Hopper arch-specific) kernels, host side. They live in their own object library compiled only for
// sm_90a (CMakeLists: kernelkit_sm90a, when the arch list holds 90 or native), so no fatbinary holds both an sm_90 and
// an sm_90a build of one kernel; KERNELKIT_HAS_SM90A says whether this build has them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/tma_desc.hpp"
#include "kernelkit/planner.hpp"
#include "kernelkit/status.hpp"

namespace kernelkit::cuda {

// True when this build holds the sm_90a kernels and `device` is compute capability 9.0 (the only one that runs them).
bool sm90a_available(int device);
// Ok where the current device runs the sm_90a kernels, else unsupported naming `what` (an entry point's refusal).
Status need_sm90a(const char* what);

// The wgmma probe (src/kernels/common/wgmma_probe.cu): one warpgroup computes c = a b^T, a [64][64] and c [64][64]
// row-major, in bf16 (f16 = false) or f16, fp32 accumulation, through 128-byte-swizzled shared tiles and four
// m64n64k16 wgmma steps; b is [64 n][64 k] (K-major, b_mn_major = false: S = Q K^T's operand) or [64 k][64 n]
// (MN-major, the instruction's transpose: O = P V's). Device pointers on `stream`. unsupported where
// sm90a_available is false.
Status wgmma_probe(const void* a, const void* b, float* c, bool f16, bool b_mn_major, cudaStream_t stream);

// The TMA probe (src/kernels/common/tma_probe.cu): the 64 x 64 box at (row0, col0) of `src` ([rows][cols] bf16, row
// stride cols; make_tma_operand) loaded by cp.async.bulk.tensor through an mbarrier into shared memory, and those 8 KB copied to `out`
// as they lie there (element (r, c) of the box at swz<64>(r, c), zeros outside the tensor). Device pointers on
// `stream`; unsupported where sm90a_available is false.
Status tma_probe(const void* src, int64_t rows, int64_t cols, int row0, int col0, void* out, cudaStream_t stream);

}  // namespace kernelkit::cuda

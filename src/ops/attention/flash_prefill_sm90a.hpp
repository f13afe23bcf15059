// The sm_90a prefill (flash_prefill_sm90a.cu, in the attention family's SM90A sources: built for sm_90a alone).
#pragma once

#include <cuda_runtime.h>

#include "kernelkit/planner.hpp"
#include "kernelkit/status.hpp"
#include "ops/attention/attention.hpp"

namespace kernelkit::cuda {

// Prefill attention on wgmma for a plan with tile.wgmma: f16 / bf16, head_dim 64 and 128 in every layout, mask and
// varlen form of the mma.sync kernel; head_dim 192 and 256 on the warp-specialized kernel only, so there a call it
// cannot take (packed varlen batches but attn_ws_varlen's plain ones, no keys, strides a TMA descriptor cannot
// express) is declined: *ran = false, nothing launched, and the caller runs the mma.sync kernel. Arguments validated
// by the caller; unsupported where sm90a_available is false for the current device (attention_cuda.cu).
Status flash_prefill_wgmma(const detail::AttentionArgs& a, const TilePlan& tile, cudaStream_t stream, bool* ran);
// The launch itself, in the sm_90a object (only where KERNELKIT_HAS_SM90A).
Status flash_prefill_wgmma_launch(const detail::AttentionArgs& a, const TilePlan& tile, cudaStream_t stream, bool* ran);

}  // namespace kernelkit::cuda

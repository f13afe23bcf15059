// Instantiation of the prefill attention kernels for __nv_bfloat16 (one file per dtype so the builds compile in
// parallel).
#include "ops/attention/flash_prefill.cuh"

namespace kernelkit::cuda {
template Status launch_flash_prefill<__nv_bfloat16>(const detail::AttentionArgs&, const TilePlan&, cudaStream_t);
}  // namespace kernelkit::cuda

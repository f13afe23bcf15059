// Instantiation of the prefill attention kernels for __half (one file per dtype so the builds compile in parallel).
#include "ops/attention/flash_prefill.cuh"

namespace kernelkit::cuda {
template Status launch_flash_prefill<__half>(const detail::AttentionArgs&, const TilePlan&, cudaStream_t);
}  // namespace kernelkit::cuda

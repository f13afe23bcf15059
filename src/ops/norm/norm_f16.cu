// Instantiation of the row-norm family for __half (one file per dtype so the builds compile in parallel).
#include "ops/norm/norm.cuh"

namespace kernelkit::cuda {
template Status launch_row_norm<__half>(const detail::RowNormArgs&, const LaunchPlan&, cudaStream_t);
template Status row_norm_occupancy<__half>(OpId, const LaunchPlan&, int*);
}  // namespace kernelkit::cuda

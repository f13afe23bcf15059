// Instantiation of the row-norm family for __nv_bfloat16 (one file per dtype so the builds compile in parallel).
#include "ops/norm/norm.cuh"

namespace kernelkit::cuda {
template Status launch_row_norm<__nv_bfloat16>(const detail::RowNormArgs&, const LaunchPlan&, cudaStream_t);
template Status row_norm_occupancy<__nv_bfloat16>(OpId, const LaunchPlan&, int*);
}  // namespace kernelkit::cuda

// Instantiation of the row-norm family for float (one file per dtype so the builds compile in parallel).
#include "ops/norm/norm.cuh"

namespace kernelkit::cuda {
template Status launch_row_norm<float>(const detail::RowNormArgs&, const LaunchPlan&, cudaStream_t);
template Status row_norm_occupancy<float>(OpId, const LaunchPlan&, int*);
}  // namespace kernelkit::cuda

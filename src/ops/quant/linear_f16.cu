// Instantiation of the weight-only linear layer for __half (one file per dtype so the builds compile in parallel).
#include "ops/quant/linear.cuh"

namespace kernelkit::cuda {
template Status launch_linear<__half>(const detail::WeightOnlyArgs&, const LaunchPlan&, cudaStream_t);
template Status launch_linear_fp8_gemv<__half>(const detail::WeightOnlyArgs&, const detail::W8A8Args&,
                                               const LaunchPlan&, cudaStream_t);
}  // namespace kernelkit::cuda

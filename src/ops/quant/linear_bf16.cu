// Instantiation of the weight-only linear layer for __nv_bfloat16 (one file per dtype so the builds compile in
// parallel).
#include "ops/quant/linear.cuh"

namespace kernelkit::cuda {
template Status launch_linear<__nv_bfloat16>(const detail::WeightOnlyArgs&, const LaunchPlan&, cudaStream_t);
template Status launch_linear_fp8_gemv<__nv_bfloat16>(const detail::WeightOnlyArgs&, const detail::W8A8Args&,
                                                      const LaunchPlan&, cudaStream_t);
}  // namespace kernelkit::cuda

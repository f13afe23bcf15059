// Instantiation of the activation family for __nv_bfloat16 (one file per dtype so the builds compile in parallel).
#include "ops/activation/activation.cuh"
#include "ops/activation/activation_quant.cuh"

namespace kernelkit::cuda {
template Status launch_activation<__nv_bfloat16>(const detail::ElementwiseArgs&, const LaunchPlan&, cudaStream_t);
template Status launch_activation_quant<__nv_bfloat16>(const detail::ElementwiseArgs&, const LaunchPlan&, cudaStream_t);
}  // namespace kernelkit::cuda

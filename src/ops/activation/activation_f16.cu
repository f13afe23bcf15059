// Instantiation of the activation family for __half (one file per dtype so the builds compile in parallel).
#include "ops/activation/activation.cuh"
#include "ops/activation/activation_quant.cuh"

namespace kernelkit::cuda {
template Status launch_activation<__half>(const detail::ElementwiseArgs&, const LaunchPlan&, cudaStream_t);
template Status launch_activation_quant<__half>(const detail::ElementwiseArgs&, const LaunchPlan&, cudaStream_t);
}  // namespace kernelkit::cuda

// Instantiation of softmax for float (one file per dtype so the builds compile in parallel).
#include "ops/softmax/softmax.cuh"

namespace kernelkit::cuda {
template Status launch_softmax<float>(const detail::SoftmaxArgs&, const LaunchPlan&, cudaStream_t);
}  // namespace kernelkit::cuda

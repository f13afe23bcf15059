// Instantiation of softmax for float (one file per dtype so the builds compile in parallel).
#include "ops/softmax/softmax.cuh"

namespace kernelkit::cuda {
template Status launch_softmax<float>(const detail::SoftmaxArgs&, const LaunchPlan&, cudaStream_t);
template Status softmax_occupancy<float>(bool, const LaunchPlan&, int*);
}  // namespace kernelkit::cuda

// Instantiation of softmax for __half (one file per dtype so the builds compile in parallel).
#include "ops/softmax/softmax.cuh"

namespace kernelkit::cuda {
template Status launch_softmax<__half>(const detail::SoftmaxArgs&, const LaunchPlan&, cudaStream_t);
template Status softmax_occupancy<__half>(bool, const LaunchPlan&, int*);
}  // namespace kernelkit::cuda

// Instantiation of softmax for __nv_bfloat16 (one file per dtype so the builds compile in parallel).
#include "ops/softmax/softmax.cuh"

namespace kernelkit::cuda {
template Status launch_softmax<__nv_bfloat16>(const detail::SoftmaxArgs&, const LaunchPlan&, cudaStream_t);
template Status softmax_occupancy<__nv_bfloat16>(bool, const LaunchPlan&, int*);
}  // namespace kernelkit::cuda

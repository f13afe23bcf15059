// Instantiation of rotary_embedding for __nv_bfloat16 (one file per dtype so the builds compile in parallel).
#include "ops/rope/rope.cuh"

namespace kernelkit::cuda {
template Status launch_rope<__nv_bfloat16>(const detail::RopeArgs&, const LaunchPlan&, cudaStream_t);
}  // namespace kernelkit::cuda

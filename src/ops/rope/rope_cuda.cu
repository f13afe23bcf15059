// Host entry of rotary_embedding on CUDA: device checks, plan, dtype dispatch. The planner sees the vectorized width
// of a head (rot_dim / 2 for neox, rot_dim for gptj) as `hidden`, so its gcd rule picks a vector that divides it.
#include "ops/rope/rope.cuh"
#include "runtime/runtime_internal.hpp"

namespace kernelkit::cuda {
extern template Status launch_rope<float>(const detail::RopeArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_rope<__half>(const detail::RopeArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_rope<__nv_bfloat16>(const detail::RopeArgs&, const LaunchPlan&, cudaStream_t);
}  // namespace kernelkit::cuda

namespace kernelkit::detail {

Status rope_cuda(const RopeArgs& a, Stream stream) {
  const int64_t width = a.style == RopeStyle::neox ? a.rot_dim / 2 : a.rot_dim;
  const OpShape shape{a.tokens * (a.heads + a.kv_heads), width, 1, a.align_bytes};
  if (shape.rows >= (int64_t{1} << 31))  // the kernel indexes (token, head) rows in 32 bits
    return unsupported("rotary_embedding: tokens x (heads + kv_heads) = " + std::to_string(shape.rows) +
                       " is above the kernel's limit of 2^31 - 1 rows; split the call");
  return cuda::launch_planned(a.op, a.dtype, a.device.index, shape,
                              {{a.q, "q"}, {a.k, "k"}, {a.q_out, "q_out"}, {a.k_out, "k_out"},
                               {a.positions, "positions"}, {a.cos, "cos"}, {a.sin, "sin"}},
                              [&](auto tag, const LaunchPlan& plan, const DeviceProfile&) {
                                return cuda::launch_rope<decltype(tag)>(a, plan, stream);
                              });
}

}  // namespace kernelkit::detail

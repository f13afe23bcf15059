// Host entry of the activation family on CUDA: device checks, plan from the active profile, dtype dispatch (the
// quantizing op: the row kernel of activation_quant.cuh).
#include "kernelkit/runtime.hpp"
#include "ops/activation/activation.cuh"
#include "ops/activation/activation_quant.cuh"
#include "runtime/runtime_internal.hpp"

namespace kernelkit::cuda {
extern template Status launch_activation<float>(const detail::ElementwiseArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_activation<__half>(const detail::ElementwiseArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_activation<__nv_bfloat16>(const detail::ElementwiseArgs&, const LaunchPlan&,
                                                        cudaStream_t);
extern template Status launch_activation_quant<__half>(const detail::ElementwiseArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_activation_quant<__nv_bfloat16>(const detail::ElementwiseArgs&, const LaunchPlan&,
                                                              cudaStream_t);
}  // namespace kernelkit::cuda

namespace kernelkit::detail {

Status elementwise_cuda(const ElementwiseArgs& a, Stream stream) {
  if (op_quant_out_dtype(a.op))  // silu_and_mul_quant: f16 / bf16 only
    return cuda::launch_planned<cuda::KernelTypes::halves>(
        a.op, a.dtype, a.device.index, a.shape(), {{a.a, "x"}, {a.b, "b"}, {a.q, "q"}, {a.q_scales, "scales"}},
        [&](auto tag, const LaunchPlan& plan, const DeviceProfile&) {
          return cuda::launch_activation_quant<decltype(tag)>(a, plan, stream);
        });
  return cuda::launch_planned(a.op, a.dtype, a.device.index, a.shape(), {{a.a, "x"}, {a.b, "b"}, {a.out, "out"}},
                              [&](auto tag, const LaunchPlan& plan, const DeviceProfile&) {
                                return cuda::launch_activation<decltype(tag)>(a, plan, stream);
                              });
}

}  // namespace kernelkit::detail

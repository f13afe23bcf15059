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
  const bool quant = op_quant_out_dtype(a.op).has_value();
  return cuda::launch_planned(
      a.op, a.dtype, a.device.index, a.shape(),
      {{a.a, "x"}, {a.b, "b"}, {quant ? a.q : a.out, quant ? "q" : "out"}, {a.q_scales, "scales"}},
      [&](auto tag, const LaunchPlan& plan, const DeviceProfile&) -> Status {
        using T = decltype(tag);
        if (!quant) return cuda::launch_activation<T>(a, plan, stream);
        if constexpr (sizeof(T) == 2) return cuda::launch_activation_quant<T>(a, plan, stream);
        return invalid_argument(std::string(op_info(a.op).name) + ": x dtype f32 is not supported");  // validated
      });
}

}  // namespace kernelkit::detail

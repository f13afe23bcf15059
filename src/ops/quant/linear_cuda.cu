// Host entry of the weight-only linear layer on CUDA: device checks, plan (plan_quant), dtype dispatch.
#include "ops/quant/linear.cuh"
#include "runtime/runtime_internal.hpp"

namespace kernelkit::cuda {
extern template Status launch_linear<__half>(const detail::WeightOnlyArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_linear<__nv_bfloat16>(const detail::WeightOnlyArgs&, const LaunchPlan&, cudaStream_t);
extern template Status launch_linear_fp8_gemv<__half>(const detail::WeightOnlyArgs&, const detail::W8A8Args&,
                                                      const LaunchPlan&, cudaStream_t);
extern template Status launch_linear_fp8_gemv<__nv_bfloat16>(const detail::WeightOnlyArgs&, const detail::W8A8Args&,
                                                             const LaunchPlan&, cudaStream_t);
}  // namespace kernelkit::cuda

namespace kernelkit::detail {

Status weight_only_cuda(const WeightOnlyArgs& a, Stream stream) {
  return cuda::launch_planned<cuda::KernelTypes::halves>(
      a.op, a.dtype, a.device.index, a.shape(),
      {{a.x, "x"}, {a.qweight, "qweight"}, {a.scales, "scales"}, {a.bias, "bias"}, {a.out, "out"}},
      [&](auto tag, const LaunchPlan& plan, const DeviceProfile&) {
        return cuda::launch_linear<decltype(tag)>(a, plan, stream);
      });
}

Status fp8_linear_gemv_cuda(const W8A8Args& a, Stream stream, bool mma) {
  WeightOnlyArgs w;  // the call as the W8A16 GEMV of the same shape sees it (1-byte weights, streamed once)
  w.dtype = a.dtype;
  w.device = a.device;
  w.rows = a.rows;
  w.n = a.n;
  w.k = a.k;
  w.x_stride = a.x_stride;
  w.qweight = a.qweight;
  w.scales = a.w_scales;
  w.bias = a.bias;
  w.out = a.out;
  w.out_stride = a.out_stride;
  w.accumulate = a.accumulate;
  w.align_bytes = a.align_bytes;
  return cuda::launch_planned<cuda::KernelTypes::halves>(
      OpId::linear_w8a16, a.dtype, a.device.index, w.shape(),
      {{a.xq, "xq"},
       {a.qweight, "qweight"},
       {a.x_scales, "x_scales"},
       {a.w_scales, "w_scales"},
       {a.bias, "bias"},
       {a.out, "out"}},
      [&](auto tag, const LaunchPlan& plan, const DeviceProfile& prof) {
        if (!mma) return cuda::launch_linear_fp8_gemv<decltype(tag)>(w, a, plan, stream);
        LaunchPlan mp = plan;
        KK_RETURN_IF_ERROR(plan_mma_gemv(prof, a.rows, a.n, a.k, 128, &mp));
        return cuda::launch_linear_fp8_gemv<decltype(tag)>(w, a, mp, stream);
      });
}

}  // namespace kernelkit::detail

// linear_fp8 on CUDA: cuBLASLt's FP8 matmul does the whole op (scales by its scale pointers, bias by its epilogue), so
// no kernel of ours runs (ops/gemm/gemm_lt.cpp); KERNELKIT_TUNE fp8_gemv=1 (an experiment) runs one or two tokens on
// the weight-only GEMV instead, fp8_gemv=2 up to 16 tokens (k a multiple of 32) on the FP8 tensor-core GEMV
// (linear.cuh).
#include <string>
#include <utility>

#include "kernelkit/runtime.hpp"
#include "ops/gemm/gemm.hpp"
#include "ops/quant/quant.hpp"
#include "ops/quant/quant_plan.hpp"
#include "runtime/plan_rules.hpp"

namespace kernelkit::detail {

Status fp8_linear_cuda(const W8A8Args& a, Stream stream) {
  int gemv = 0;
  KK_RETURN_IF_ERROR(plan::tune_value("fp8_gemv", 0, 2, &gemv));
  if (gemv == 1 && a.op == OpId::linear_fp8 && a.rows < kLinearTcMinM) return fp8_linear_gemv_cuda(a, stream);
  if (gemv == 2 && a.op == OpId::linear_fp8 && a.rows <= kLinearMmaGemvMaxTokens && a.k % 32 == 0)
    return fp8_linear_gemv_cuda(a, stream, true);
  for (auto [p, arg] : {std::pair{static_cast<const void*>(a.xq), "xq"},
                        {a.x_scales, "x_scales"},
                        {a.qweight, "qweight"},
                        {a.w_scales, "w_scales"},
                        {a.bias, "bias"},
                        {a.out, "out"}})
    if (p && !device_pointers_trusted())
      KK_RETURN_IF_ERROR(
          check_device_pointer(p, a.device.index, (std::string(op_info(a.op).name) + ": " + arg).c_str()));
  Fp8GemmArgs g;
  g.device = a.device;
  g.out_dtype = a.dtype;
  g.m = a.rows;
  g.n = a.n;
  g.k = a.k;
  g.x = a.xq;
  g.w = a.qweight;
  g.sx = a.x_scales;
  g.sw = a.w_scales;
  g.bias = a.bias;
  g.out = a.out;
  g.x_stride = a.x_stride;
  g.w_stride = a.k;
  g.out_stride = a.out_stride;
  // Per tensor: both or neither (build_scaled_linear). Block scales: build_scaled_linear and validate_w8a8 hold them to
  // the layouts cuBLASLt reads, so the pointers go as they are.
  g.scaling = a.op == OpId::linear_fp8_blockwise ? Fp8Scaling::block
              : a.x_per_tensor                   ? Fp8Scaling::tensor
                                                 : Fp8Scaling::outer_vector;
  g.fast_accumulation = a.fast_accumulation;
  g.accumulate = a.accumulate;
  return fp8_gemm_cuda(g, stream);
}

}  // namespace kernelkit::detail

// Internal: the checked arguments of one linear, shared by validation, the CPU reference and the cuBLASLt path.
#pragma once

#include <cstdint>

#include "kernelkit/gemm.hpp"

namespace kernelkit::detail {

struct LinearArgs {
  DType dtype{};
  Device device{};
  int64_t m = 0, n = 0, k = 0;
  void* y = nullptr;
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;
  int64_t y_stride = 0, x_stride = 0, w_stride = 0;  // row strides in elements
  LinearOptions options;
};

Status linear_reference(const LinearArgs& a);
Status linear_cuda(const LinearArgs& a, GemmHandle* handle, Stream stream);
// int32 y [m, n] (contiguous) = xq [m, k] . w [n, k]^T (int8, row strides in bytes) through cuBLASLt's INT8 kernels
// (the calling thread's default handle of `device`, the caller's workspace, which is stream-ordered so that calls on
// other streams cannot share it): exact int32 sums. *ran is false (and nothing is launched) when cuBLASLt has no INT8
// algorithm for the problem or refuses it, so the caller can run its own kernel.
Status int8_gemm_cuda(const Device& device, const int8_t* xq, int64_t x_stride, const int8_t* w, int64_t w_stride,
                      int32_t* y, int64_t m, int64_t n, int64_t k, void* workspace, size_t workspace_bytes,
                      Stream stream, bool* ran);

// How cuBLASLt's FP8 matmul reads the scales sx (of x, its B operand) and sw (of w, its A operand):
//   tensor: one fp32 scale each;
//   outer_vector: sx [m], sw [n] (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F);
//   block: sx [k / 128][m], one per 1 x 128 slice of x, token index contiguous (VEC128_32F), and sw [ceil(n / 128)]
//     [fp8_block_scales_ld(k)], one per 128 x 128 block of w, k block index contiguous (BLK128x128_32F); each 128-wide
//     block's sums are scaled as they are promoted to fp32, so no fast accumulation. Hopper only, k % 128 == 0.
enum class Fp8Scaling : uint8_t { tensor, outer_vector, block };

// FP8 through cuBLASLt's FP8 matmul (the calling thread's default handle of `device`): out [m, n] (+)= (x [m, k] . w
// [n, k]^T, fp32 sums) * sx * sw (+ bias [n]), x and w e4m3 and contiguous along k; sx and sw device pointers laid out
// as `scaling` says. Row strides in elements. unsupported (nothing launched) when cuBLASLt has no algorithm for the
// problem.
struct Fp8GemmArgs {
  Device device{};
  DType out_dtype{};  // f16 or bf16, of out and bias
  int64_t m = 0, n = 0, k = 0;
  const void* x = nullptr;
  const void* w = nullptr;
  const float* sx = nullptr;
  const float* sw = nullptr;
  const void* bias = nullptr;
  void* out = nullptr;
  int64_t x_stride = 0, w_stride = 0, out_stride = 0;
  Fp8Scaling scaling = Fp8Scaling::tensor;
  bool fast_accumulation = false;  // CUBLASLT_MATMUL_DESC_FAST_ACCUM: the MMA's own sums, never promoted to fp32
  bool accumulate = false;         // out += ...: beta = 1 with C = D = out
};
Status fp8_gemm_cuda(const Fp8GemmArgs& a, Stream stream);

}  // namespace kernelkit::detail

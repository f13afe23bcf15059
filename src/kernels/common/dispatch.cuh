// Runtime -> compile-time dispatch at the host boundary. Each helper calls `f` with a std::integral_constant (or a
// type tag) and returns its Status; an unsupported value is an error that names it, never a silent no-op.
#pragma once

#include <string>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernelkit/dtype.hpp"
#include "kernelkit/status.hpp"

namespace kernelkit::cuda {

// v in {1, 2, 4, 8} (up to kMax): the vector widths the planner can choose.
template <int kMax, typename F>
Status dispatch_vec(int v, F&& f) {
  switch (v) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: if constexpr (kMax >= 2) return f(std::integral_constant<int, 2>{}); break;
    case 4: if constexpr (kMax >= 4) return f(std::integral_constant<int, 4>{}); break;
    case 8: if constexpr (kMax >= 8) return f(std::integral_constant<int, 8>{}); break;
    default: break;
  }
  return Status(StatusCode::internal, "no kernel instantiated for vector width " + std::to_string(v) +
                                          " (max " + std::to_string(kMax) + ")");
}

// The storage type of a floating dtype: calls f(T{}) with T = float, __half or __nv_bfloat16.
template <typename F>
Status dispatch_float(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: return f(float{});
    case DType::f16: return f(__half{});
    case DType::bf16: return f(__nv_bfloat16{});
    default: break;
  }
  return invalid_argument("dtype " + std::string(dtype_name(dtype)) + " has no CUDA kernel (expected f32, f16, bf16)");
}

// The 16-bit float types only (the tensor-core kernels): f(T{}) with T = __half or __nv_bfloat16; `op` names the
// refusal of any other dtype (validation refuses them before a launch).
template <typename F>
Status dispatch_half(const char* op, DType dtype, F&& f) {
  if (dtype == DType::f16) return f(__half{});
  if (dtype == DType::bf16) return f(__nv_bfloat16{});
  return invalid_argument(std::string(op) + ": dtype " + std::string(dtype_name(dtype)) +
                          " has no kernel (expected f16, bf16)");
}

}  // namespace kernelkit::cuda

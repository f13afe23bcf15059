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

}  // namespace kernelkit::detail

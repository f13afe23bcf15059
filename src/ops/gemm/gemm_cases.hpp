// Test cases of `linear` (cuBLASLt on the GPU, the fp64 reference on the CPU): random inputs in [-1, 1), outputs
// poisoned (row padding included), every element compared.
#pragma once

#include <cstdint>
#include <string>

#include "kernelkit/gemm.hpp"
#include "testing/harness.hpp"

namespace kernelkit::testing {

struct LinearCase {
  DType dtype = DType::f32;
  int64_t m = 4, n = 8, k = 16;
  LinearEpilogue epilogue = LinearEpilogue::none;
  bool allow_tf32 = false;
  int64_t row_pad = 0;  // extra elements after each row of x, w and y (strided rows)
  uint64_t seed = 1;
  bool accumulate = false;  // y starts random and is added to
  std::string name() const;
};

// Runs the case on `device` (Device::cpu(): the reference path itself) and compares every output element with an
// independent fp64 evaluation of the formula: |got - want| <= atol + rtol |want| + acc * sum_l |x_il w_jl|, where
// acc covers fp32 accumulation (2^-20; TF32 products: 2^-10). Padding after each output row must stay poisoned.
CaseResult run_linear_case(const LinearCase& c, Device device);

}  // namespace kernelkit::testing

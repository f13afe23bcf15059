// The norm family's test cases (the GPU tests, `kernelkit verify`, the benchmark's check): fresh random inputs, the
// op on the CPU reference and on a CUDA device from identical inputs, every output element compared.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernelkit/ops/norm.hpp"
#include "testing/cases.hpp"
#include "testing/harness.hpp"

namespace kernelkit::testing {

struct NormCase {
  OpId op = OpId::rms_norm;
  DType dtype = DType::f32;
  int64_t rows = 1, hidden = 64;
  int64_t row_pad = 0;         // > 0: rows of x/out/residual are `hidden + row_pad` apart (strided views)
  bool weight = true;          // weight present (rms/layer/ada/gelu)
  bool bias = true;            // bias present (layer/ada)
  float eps = 1e-6f;
  float weight_offset = 0.0f;  // Gemma-style (1 + w) when 1
  double magnitude = 1.0;      // |x| drawn from [magnitude / 2, magnitude] with random sign when > 1 (extreme fp16)
  uint64_t seed = 1;
  bool constant_rows = false;  // row r all +-magnitude (1 + r / rows) / 2: normalizes to 0 (16-bit: the sums are exact)
  bool static_scale = false;   // norm + quantization: one given scale instead of one a row
  std::string name() const;  // "rms_norm bf16 83x5125 pad 8"
};

// The tensors of one norm-family call; which are used depends on the op (residual: fused add; scale/shift: ada).
// Norm + quantization: q (i8 or f8e4m3, x's shape) and q_scales (f32 [rows], or [1] with static_scale).
struct NormTensors {
  TensorView x, out, residual, scale, shift, q, q_scales;
  std::optional<TensorView> weight, bias;
  bool static_scale = false;
};
// The ops that add a residual first (fused_add_rms_norm and its quantizing twins), which update it in place.
bool adds_residual(OpId op);

// Calls the public op `op` (on the CPU backend or CUDA, wherever the tensors are).
Status call_norm_op(OpId op, const NormTensors& t, float eps, float weight_offset = 0.0f, Stream stream = nullptr);

// Runs `c` on CUDA device `device` and on the CPU reference from the same random inputs and compares every output
// element (out, and x and residual for fused_add_rms_norm); the padding between strided output rows must keep its
// poison. Without a GPU returns status no_device.
CaseResult run_norm_case_cuda(const NormCase& c, int device = 0);

// CPU backend self-checks (no GPU): the fused ops equal the composition of the unfused ones, and the normalized
// outputs have the statistics they must (rms 1; mean 0 and variance 1), within the tolerance table.
CaseResult check_norm_properties(const NormCase& c);

// The family's verify cases (testing/cases.hpp): the row-shape grid.
void verify_norm_cases(OpId op, DType dtype, const VerifyGrid& grid, uint64_t* seed, std::vector<VerifyCase>* out);

// A random case (testing/cases.hpp's random_rows): any norm op and dtype, with or without weight / bias, Gemma's
// offset, magnitudes up to near fp16's limit.
NormCase random_norm_case(uint64_t seed);

}  // namespace kernelkit::testing

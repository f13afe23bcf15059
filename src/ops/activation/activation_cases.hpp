// The activation family's test cases (the GPU tests, `kernelkit verify`): fresh random inputs, the op on the CPU
// reference and on a CUDA device from identical inputs, every output element compared.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernelkit/ops/activation.hpp"
#include "testing/cases.hpp"
#include "testing/harness.hpp"

namespace kernelkit::testing {

// Activation cases (gelu, gelu_tanh, silu, the gated forms and geglu): out is [rows, d]; the input is [rows, d], or
// [rows, 2d] for the gated forms, or two [rows, d] tensors for geglu. Rows are `row_pad` elements apart when > 0.
// silu_and_mul_quant_*: q [rows, d] (contiguous) and scales f32 [rows] (or [1], static) instead of out.
struct ActivationCase {
  OpId op = OpId::silu_and_mul;
  DType dtype = DType::f32;
  int64_t rows = 1, d = 64;
  int64_t row_pad = 0;
  double magnitude = 3.0;  // inputs uniform in [-magnitude, magnitude]
  uint64_t seed = 1;
  bool static_scale = false;  // silu_and_mul_quant: one given scale instead of one a row
  std::string name() const;
};
// On CUDA device `device` vs the CPU reference from the same inputs, every element, outputs poisoned first.
CaseResult run_activation_case_cuda(const ActivationCase& c, int device = 0);
// CPU backend self-checks: the gated op equals act(first half) * second half through the ungated op; every activation
// satisfies act(x) - act(-x) = x (gelu, gelu_tanh and silu all do); silu_and_mul_quant equals
// quantize_per_token(silu_and_mul(x)) bit for bit (a static scale: y / s's nearest codes).
CaseResult check_activation_properties(const ActivationCase& c);
// Calls the public activation op `op` (out = op(x), or op(x, b) for geglu; not silu_and_mul_quant, whose outputs
// are q and scales).
Status call_activation_op(OpId op, const TensorView& out, const TensorView& x, const TensorView* b = nullptr,
                          Stream stream = nullptr);

// The family's verify cases (testing/cases.hpp): the row-shape grid.
void verify_activation_cases(OpId op, DType dtype, const VerifyGrid& grid, uint64_t* seed,
                             std::vector<VerifyCase>* out);

// A random case (testing/cases.hpp's random_rows): any activation op and dtype, inputs up to +-30.
ActivationCase random_activation_case(uint64_t seed);

}  // namespace kernelkit::testing

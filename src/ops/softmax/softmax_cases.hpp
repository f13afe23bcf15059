// The softmax family's test cases (the GPU tests, `kernelkit verify`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernelkit/ops/softmax.hpp"
#include "testing/cases.hpp"
#include "testing/harness.hpp"

namespace kernelkit::testing {

// Softmax cases: x [rows, hidden] (causal: [rows / s_q, s_q, hidden]) with random values scaled by `magnitude`; a few
// rows are all -inf (or fully masked) to check their defined output.
struct SoftmaxCase {
  OpId op = OpId::softmax;
  DType dtype = DType::f32;
  int64_t rows = 7, hidden = 64;
  int64_t s_q = 1;  // causal: queries per head (rows % s_q == 0)
  float scale = 1.0f;
  double magnitude = 4.0;
  int64_t row_pad = 0;
  uint64_t seed = 1;
  std::string name() const;
};
CaseResult run_softmax_case_cuda(const SoftmaxCase& c, int device = 0);
// CPU backend self-checks: rows sum to 1 with entries in [0, 1], masked keys and all -inf rows are exactly 0.
CaseResult check_softmax_properties(const SoftmaxCase& c);

// The family's verify cases (testing/cases.hpp): the row-shape grid.
void verify_softmax_cases(OpId op, DType dtype, const VerifyGrid& grid, uint64_t* seed,
                          std::vector<VerifyCase>* out);

// A random case (testing/cases.hpp's random_rows): softmax or causal_softmax (s_q dividing the rows), scales and
// magnitudes that put the logits anywhere from flat to one-hot.
SoftmaxCase random_softmax_case(uint64_t seed);

}  // namespace kernelkit::testing

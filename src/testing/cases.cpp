// The families' verify-case enumerators (cases.hpp): one row a family. A new op is enumerated by its family's own
// cases file; a new family adds its row here.
#include "testing/cases.hpp"

#include "ops/activation/activation_cases.hpp"
#include "ops/attention/attention_cases.hpp"
#include "ops/norm/norm_cases.hpp"
#include "ops/quant/quant_cases.hpp"
#include "ops/rope/rope_cases.hpp"
#include "ops/softmax/softmax_cases.hpp"

namespace kernelkit::testing {

VerifyCases verify_cases(OpFamily family) {
  switch (family) {
    case OpFamily::norm: return verify_norm_cases;
    case OpFamily::activation: return verify_activation_cases;
    case OpFamily::rope: return verify_rope_cases;
    case OpFamily::softmax: return verify_softmax_cases;
    case OpFamily::attention: return verify_attention_cases;
    case OpFamily::quant: return verify_quant_cases;
    case OpFamily::gemm: break;  // no registry op yet: linear is tested by tests/gemm
  }
  return nullptr;
}

void for_each_row_shape(const VerifyGrid& grid, const std::function<void(int64_t, int64_t, int64_t)>& f) {
  std::vector<int64_t> rows = grid_rows(), hidden = grid_hidden();
  if (grid.quick || !grid.cuda) rows = {1, 7, 83};  // the CPU backend is the reference itself: keep it quick
  if (grid.quick) hidden = {64, 111, 769, 4096, 5125};
  for (int64_t r : rows)
    for (int64_t h : hidden) {
      f(r, h, 0);
      if (r == 83) f(r, h, 8);  // strided rows: one row count is enough to exercise the strides
    }
}

}  // namespace kernelkit::testing

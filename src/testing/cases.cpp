// The families' verify-case enumerators (cases.hpp): one row a family. A new op is enumerated by its family's own
// cases file; a new family adds its row here.
#include "testing/cases.hpp"

#include <algorithm>
#include <iterator>

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

RandomRows random_rows(std::mt19937_64& rng, int64_t max_elements) {
  constexpr int64_t kSizes[] = {1, 2, 3, 5, 7, 8, 13, 31, 64, 83, 111, 127, 500, 769, 1024, 2053, 4096, 5125, 8192};
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  RandomRows r;
  switch (pick(0, 3)) {
    case 0:  // listed sizes (the edges every kernel branches on)
      r.rows = kSizes[pick(0, std::size(kSizes) - 1)];
      r.hidden = kSizes[pick(0, std::size(kSizes) - 1)];
      break;
    case 1:  // anything up to a few thousand
      r.rows = pick(1, 3000);
      r.hidden = pick(1, 3000);
      break;
    case 2:  // more rows than the grid's y dimension holds, narrow
      r.rows = pick(65536, 70000);
      r.hidden = pick(1, 16);
      break;
    default:  // wide rows: up to 32K, a few of them
      r.rows = pick(1, 5);
      r.hidden = pick(8192, 32768);
      break;
  }
  while (r.rows * r.hidden > max_elements) r.rows = std::max<int64_t>(1, r.rows / 2);
  r.pad = pick(0, 2) == 0 ? pick(1, 13) : 0;
  return r;
}

DType random_float_dtype(std::mt19937_64& rng) {
  constexpr DType kTypes[] = {DType::f32, DType::f16, DType::bf16};
  return kTypes[std::uniform_int_distribution<int>(0, 2)(rng)];
}

}  // namespace kernelkit::testing

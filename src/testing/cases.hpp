// The verify cases of every op family, for `kernelkit verify` (and anything else that loops over the registry): each
// family enumerates its cases for one op and dtype, and this table finds a family's enumerator. The cases themselves
// live with their family (src/ops/<family>/<family>_cases.*).
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernelkit/op_info.hpp"
#include "testing/harness.hpp"

namespace kernelkit::testing {

// What a verify run covers: the GPU against the reference (cuda), or the CPU backend's own invariants; quick: a
// smaller grid.
struct VerifyGrid {
  bool cuda = false;
  int device = 0;
  bool quick = false;
};

// One case: its name and how to run it (the run draws nothing shared: cases may run in any order).
struct VerifyCase {
  std::string name;
  std::function<CaseResult()> run;
  // The reference's multiply-adds, where a case has many (attention, the linears): verify starts the costliest cases
  // first, so no long one starts last and runs alone at the end. 0: small.
  double work = 0;
};

// A family's cases of `op` in `dtype` (the registry's dtypes of the op only), appended to `out`; each takes the next
// seed from *seed, so a run is reproducible.
using VerifyCases = void (*)(OpId op, DType dtype, const VerifyGrid& grid, uint64_t* seed,
                             std::vector<VerifyCase>* out);
// The family's enumerator (every family of the registry has one; tests/runtime checks it).
VerifyCases verify_cases(OpFamily family);

// The row ops' shape grid as verify walks it: rows x hidden of grid_rows() / grid_hidden() (rows {1, 7, 83} on the
// CPU backend or when quick; hidden {64, 111, 769, 4096, 5125} when quick), and the 83-row shapes once more with 8
// elements of padding between rows (strided views). f(rows, hidden, pad) for each.
void for_each_row_shape(const VerifyGrid& grid, const std::function<void(int64_t, int64_t, int64_t)>& f);

// ---- Random cases (the C++ side of the property tests: tests/<family>/ run a family's random_<family>_case over many
//      seeds, on the CPU backend's invariants and on the GPU against the reference)

// A random row-op shape: rows and hidden that include 1, odd sizes and primes, more than 65535 rows (the grid's y
// limit) at small widths and widths up to 32K at a few rows, rows * hidden <= max_elements; a row padding (strided
// rows) a third of the time.
struct RandomRows {
  int64_t rows = 1, hidden = 1, pad = 0;
};
RandomRows random_rows(std::mt19937_64& rng, int64_t max_elements);
DType random_float_dtype(std::mt19937_64& rng);

}  // namespace kernelkit::testing

// The accuracy contract (docs/tolerances.md): kernelkit's kernels compute in fp32 (fp64 in the CPU reference) and round
// each output once to its dtype, so a result and the reference rounded once to the same dtype may differ by about one
// unit in the last place. Every element of every output satisfies |got - want| <= atol + rtol * |want|; ops whose
// kernels round more often (attention's P, the quantized linears' accumulation) state a derived bound on top.
#pragma once

#include "kernelkit/dtype.hpp"

namespace kernelkit {

struct Tolerance {
  double rtol, atol;
};

// bf16: rtol 2^-7, atol 1e-4; f16: 2^-10, 1e-5 (one ulp in [1, 2)); f32 (and every other dtype): 1e-5, 1e-6 (fp32 math
// against fp64: the accumulation order over up to 2^16 terms). The one table: the C++ tests, `kernelkit verify`, the
// benchmark's check and pytest (kernelkit.tolerance) read it.
Tolerance output_tolerance(DType dtype);

}  // namespace kernelkit

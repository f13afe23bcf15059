#include "kernelkit/tolerance.hpp"

namespace kernelkit {

Tolerance output_tolerance(DType t) {
  switch (t) {
    case DType::bf16: return {0.0078125, 1e-4};     // 2^-7: one bf16 ulp in [1, 2)
    case DType::f16: return {0.0009765625, 1e-5};   // 2^-10: one f16 ulp in [1, 2)
    case DType::f8e4m3: return {0.125, 0.001953125};  // 2^-3: one e4m3 ulp in [1, 2); 2^-9: its smallest subnormal
    case DType::f8e5m2: return {0.25, 1.52587890625e-05};  // 2^-2; 2^-16
    default: return {1e-5, 1e-6};                   // fp32 math vs fp64: accumulation order over <= 2^16 terms
  }
}

}  // namespace kernelkit

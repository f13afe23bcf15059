// CPU reference of the row-norm family: fp64 accumulation, one rounding per output element. It mirrors the kernel's
// rounding points: the fused residual is rounded to the dtype before it is normalized, everything else stays in
// high precision until the output is written. This is the test oracle and the CPU backend.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/norm/norm.hpp"
#include "ops/quant/quant.hpp"

namespace kernelkit::detail {

namespace {
double gelu_tanh(double v) {
  constexpr double k = 0.7978845608028654;  // sqrt(2 / pi)
  return 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v)));
}
}  // namespace

Status row_norm_reference(const RowNormArgs& a) {
  const DType t = a.dtype;
  const auto qtype = op_quant_out_dtype(a.op);
  if (qtype && a.static_scale) KK_RETURN_IF_ERROR(check_static_scale(a.op, *a.q_scales));
  std::vector<double> row(static_cast<size_t>(a.hidden));
  for (int64_t r = 0; r < a.rows; ++r) {
    const int64_t xo = r * a.x_stride;
    for (int64_t i = 0; i < a.hidden; ++i) {
      double v = load_as_double(a.x, t, xo + i);
      if (a.residual_add) {
        const int64_t ro = r * a.residual_stride + i;
        store_from_double(a.residual, t, ro, v + load_as_double(a.residual, t, ro));
        v = load_as_double(a.residual, t, ro);  // the rounded sum is what gets normalized
      }
      row[static_cast<size_t>(i)] = v;
    }
    double mean = 0.0;
    if (a.norm == NormType::layer) {
      for (double v : row) mean += v;
      mean /= static_cast<double>(a.hidden);
    }
    double ss = 0.0;
    for (double v : row) ss += (v - mean) * (v - mean);
    const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(a.hidden) + static_cast<double>(a.eps));
    const int64_t b = r / a.rows_per_batch;
    for (int64_t i = 0; i < a.hidden; ++i) {
      double y = (row[static_cast<size_t>(i)] - mean) * rstd;
      if (a.weight) y *= a.weight_offset + load_as_double(a.weight, t, i);
      if (a.bias) y += load_as_double(a.bias, t, i);
      if (a.scale) y *= 1.0 + load_as_double(a.scale, t, b * a.mod_stride + i);
      if (a.shift) y += load_as_double(a.shift, t, b * a.mod_stride + i);
      if (a.gelu) y = gelu_tanh(y);
      if (qtype)
        row[static_cast<size_t>(i)] = round_to_dtype(t, y);  // what rms_norm would store, quantized below
      else
        store_from_double(a.out, t, r * a.out_stride + i, y);
    }
    if (qtype)  // the quantizers' scale and rounding: quantize_per_token(rms_norm(x))
      KK_RETURN_IF_ERROR(quantize_row_reference(a.op, r, row.data(), a.hidden, *qtype == DType::f8e4m3, a.static_scale,
                                                a.q_scales + (a.static_scale ? 0 : r),
                                                static_cast<uint8_t*>(a.q) + r * a.hidden));
  }
  return Status::Ok();
}

}  // namespace kernelkit::detail

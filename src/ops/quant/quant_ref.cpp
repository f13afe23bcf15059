// CPU reference of the quantization ops, fp64 wherever the kernels' own rounding points allow:
//  - quantizers: the scale s = max|w| / qmax over each span (a row, a group, the tensor, a block) and the quotient
//    w / s are fp32 values (as the kernels' IEEE fp32 divisions give; an fp64 division of two floats rounded once to
//    float is the correctly rounded fp32 quotient), then
//    q = round-half-even, clamped to [-qmax, qmax] (FP8: rounded to e4m3, nearest even, saturating at 448). So the
//    CUDA quantizers must match these bit for bit.
//  - linear: y = sum_j x[t, j] * (q[r, j] - zero[r, j / group]) * s[r, j / group] (+ bias[r]) in fp64 (zero 0
//    without zero points; one scale a row for group 0), rounded once to the output dtype.
//  - linear_w8a8 / linear_fp8*: the exact dot product of the 1-byte values (per 128-wide k block for
//    linear_fp8_blockwise), scaled, summed and rounded once.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ops/quant/quant.hpp"
#include "runtime/device_errors.hpp"

namespace kernelkit::detail {

namespace {

// q = round_half_even(fp32(w / s)) clamped to [-qmax, qmax]; s == 0 (an all-zero span) gives 0.
int quantize_value(double w, float s, int qmax) {
  if (s == 0.0f) return 0;
  const float quotient = static_cast<float>(w / static_cast<double>(s));
  const double q = std::nearbyint(static_cast<double>(quotient));  // default rounding mode: half to even
  if (std::isnan(q)) return 0;  // as the GPU's float-to-integer conversion gives NaN (and a cast would be undefined)
  return static_cast<int>(std::clamp(q, -static_cast<double>(qmax), static_cast<double>(qmax)));
}

// s = fp32(max|w| / qmax) over rows [r0, r1) x columns [c0, c1).
float span_scale(const QuantizeArgs& a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, int qmax) {
  double amax = 0;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = c0; j < c1; ++j)
      amax = std::max(amax, std::fabs(load_as_double(a.w, a.dtype, r * a.w_stride + j)));
  return span_scale_of(amax, qmax);
}

// Calls f(r0, r1, c0, c1, scale) for every span of the quantizer: rows [r0, r1) x columns [c0, c1) share the fp32
// scale *scale (ScaleSpan, and the scales' layouts in QuantizeArgs).
template <typename F>
void for_each_span(const QuantizeArgs& a, F f) {
  const int64_t k = a.hidden, b = kQuantBlockSize;
  switch (scale_span(a.op)) {
    case ScaleSpan::row:
      for (int64_t r = 0; r < a.rows; ++r) f(r, r + 1, 0, k, a.scales + r);
      break;
    case ScaleSpan::group:
      for (int64_t r = 0; r < a.rows; ++r)
        for (int64_t g = 0; g < k / a.group; ++g)
          f(r, r + 1, g * a.group, (g + 1) * a.group, a.scales + a.group_scale_index(r, g));
      break;
    case ScaleSpan::tensor:
      f(0, a.rows, 0, k, a.scales);
      break;
    case ScaleSpan::block:
      for (int64_t i = 0; i * b < a.rows; ++i)
        for (int64_t j = 0; j * b < k; ++j)
          f(i * b, std::min(a.rows, (i + 1) * b), j * b, std::min(k, (j + 1) * b), a.scales + i * a.scales_ld + j);
      break;
    case ScaleSpan::none:
      break;
  }
}

// The first non-finite value of the input (inf or NaN would give an inf or NaN scale, or q = 0 for the whole span):
// refused, naming the row and the column.
Status check_finite(const QuantizeArgs& a) {
  const char* arg = quantizes_tokens(a.op) ? "x" : "w";
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t j = 0; j < a.hidden; ++j) {
      const double w = load_as_double(a.w, a.dtype, r * a.w_stride + j);
      if (!std::isfinite(w))
        return invalid_argument(std::string(op_info(a.op).name) + ": " + arg + " row " + std::to_string(r) +
                                " holds " + (std::isnan(w) ? "NaN" : w > 0 ? "inf" : "-inf") + " at column " +
                                std::to_string(j) + "; quantization needs finite values");
    }
  return Status::Ok();
}

}  // namespace

uint8_t quantize_byte(double w, float s, bool fp8) {
  if (fp8) return float_to_e4m3_bits(s == 0.0f ? 0.0f : static_cast<float>(w / static_cast<double>(s)), true);
  return static_cast<uint8_t>(quantize_value(w, s, code_max(false)));
}

Status quantize_row_reference(OpId op, int64_t row, const double* y, int64_t n, bool fp8, bool static_scale,
                              float* scale, uint8_t* q) {
  bool finite = true;
  if (!static_scale) {
    double amax = 0;
    for (int64_t i = 0; i < n; ++i) {
      finite = finite && std::isfinite(y[i]);
      amax = std::max(amax, std::fabs(y[i]));
    }
    *scale = finite ? span_scale_of(amax, code_max(fp8)) : INFINITY;  // the kernels' max of a non-finite row: inf
  }
  for (int64_t i = 0; i < n; ++i) q[i] = quantize_byte(y[i], *scale, fp8);
  return finite ? Status::Ok() : device_check_error(op, DeviceCheck::finite_x, row, -1, 0, 0);
}

Status check_static_scale(OpId op, float scale) {
  if (std::isfinite(scale) && scale > 0.0f) return Status::Ok();
  uint32_t bits;
  std::memcpy(&bits, &scale, sizeof bits);
  return device_check_error(op, DeviceCheck::static_scale, 0, -1, bits, 0);
}

Status quantize_reference(const QuantizeArgs& a) {
  KK_RETURN_IF_ERROR(check_finite(a));
  if (a.static_scale) KK_RETURN_IF_ERROR(check_static_scale(a.op, a.scales[0]));
  // INT4 codes (kernel layout, qmax 7), or one byte a value: int8, or e4m3 (the fp32 quotient rounded to nearest even,
  // saturating: |x / s| <= 448 but for the quotient's own rounding; 0 for an all-zero span).
  const bool int4 = a.op == OpId::quantize_int4_groupwise, fp8 = op_fp8_dtype(a.op).has_value();
  const int qmax = int4 ? 7 : code_max(fp8);
  const int64_t k = a.hidden;
  auto* q = static_cast<uint8_t*>(a.q);
  if (int4) std::fill(q, q + a.rows * k / 2, uint8_t{0});
  for_each_span(a, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* scale) {
    if (!a.static_scale) *scale = span_scale(a, r0, r1, c0, c1, qmax);
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = c0; j < c1; ++j) {
        const double w = load_as_double(a.w, a.dtype, r * a.w_stride + j);
        if (!int4) {
          q[r * k + j] = quantize_byte(w, *scale, fp8);
          continue;
        }
        const int nibble = kInt4Nibble[j % 8];
        q[int4_word_offset(r, j / 8, k) + nibble / 2] |=
            static_cast<uint8_t>((quantize_value(w, *scale, qmax) & 0xF) << (4 * (nibble % 2)));
      }
  });
  return Status::Ok();
}

Status weight_only_reference(const WeightOnlyArgs& a) {
  const auto* qw = static_cast<const uint8_t*>(a.qweight);
  const int64_t groups = a.group > 0 ? a.k / a.group : 1;
  const int64_t row_bytes = a.bits == 8 ? a.k : a.k / 2;
  // The input of x that weight column j multiplies (perm: checked before anything is written).
  std::vector<int64_t> input(static_cast<size_t>(a.k));
  for (int64_t j = 0; j < a.k; ++j) {
    input[j] = !a.perm      ? j
               : a.perm_i64 ? static_cast<const int64_t*>(a.perm)[j]
                            : static_cast<const int32_t*>(a.perm)[j];
    if (input[j] < 0 || input[j] >= a.k) return device_check_error(a.op, DeviceCheck::perm, j, -1, input[j], a.k);
  }
  for (int64_t r = 0; r < a.n; ++r) {
    const uint8_t* row = qw + r * row_bytes;  // INT8 (INT4 rows are tiled: int4_kernel_value)
    for (int64_t t = 0; t < a.rows; ++t) {
      double acc = 0;
      for (int64_t j = 0; j < a.k; ++j) {
        const int q = a.bits == 8 ? static_cast<int8_t>(row[j]) : int4_kernel_value(qw, r, j, a.k);
        const int64_t g = a.group > 0 ? r * groups + j / a.group : r;
        const int zero = a.zeros ? a.zeros[g] : 0;
        acc +=
            load_as_double(a.x, a.dtype, t * a.x_stride + input[j]) * ((q - zero) * static_cast<double>(a.scales[g]));
      }
      if (a.bias) acc += load_as_double(a.bias, a.dtype, r);
      if (a.accumulate) acc += load_as_double(a.out, a.dtype, t * a.out_stride + r);
      store_from_double(a.out, a.dtype, t * a.out_stride + r, acc);
    }
  }
  return Status::Ok();
}

// The dot product of each span of k sharing a pair of scales (all of k, or linear_fp8_blockwise's 128-wide blocks) in
// fp64 (exact for INT8; e4m3 products are exact, their sum good to fp64 precision), scaled and summed in fp64, the bias
// (and with accumulate out's value) added and one rounding.
Status w8a8_reference(const W8A8Args& a) {
  const bool fp8 = op_fp8_dtype(a.op).has_value();
  const int64_t span = a.op == OpId::linear_fp8_blockwise ? kQuantBlockSize : a.k;
  const auto value = [fp8](int8_t b) {
    return fp8 ? static_cast<double>(e4m3_bits_to_float(static_cast<uint8_t>(b))) : static_cast<double>(b);
  };
  for (int64_t t = 0; t < a.rows; ++t)
    for (int64_t r = 0; r < a.n; ++r) {
      const int8_t* x = a.xq + t * a.x_stride;
      const int8_t* w = a.qweight + r * a.k;
      double y = 0;
      for (int64_t j0 = 0; j0 < a.k; j0 += span) {
        double dot = 0;
        for (int64_t j = j0; j < std::min(a.k, j0 + span); ++j) dot += value(x[j]) * value(w[j]);
        y += dot * a.x_scale(t, j0) * a.w_scale(r, j0);
      }
      if (a.bias) y += load_as_double(a.bias, a.dtype, r);
      if (a.accumulate) y += load_as_double(a.out, a.dtype, t * a.out_stride + r);
      store_from_double(a.out, a.dtype, t * a.out_stride + r, y);
    }
  return Status::Ok();
}

}  // namespace kernelkit::detail

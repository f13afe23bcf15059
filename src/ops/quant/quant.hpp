// Internal: the parameter blocks of the quantization ops (quantizers and the weight-only linear layer), shared by
// validation, the CPU reference and the CUDA launchers.
#pragma once

#include <cstdint>
#include <string>

#include "kernelkit/op_info.hpp"
#include "kernelkit/ops/quant.hpp"
#include "kernelkit/profile.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit::detail {

// The kernel layout of INT4 weights (ops.hpp): value j of each 8-value word sits in nibble kInt4Nibble[j], and word i
// of row r (values k = 8i .. 8i + 7; n % 16 == 0, k % 64 == 0) at byte int4_word_offset(r, i, k): row tile r / 16,
// region i / 8 (64 values), lane 4 (r % 8) + (i % 8) / 2 of the region's 32, half (r % 16) / 8 of the lane's 16 bytes,
// word i % 2 of the half.
inline constexpr int kInt4Nibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};
inline constexpr int kInt4TileRows = 16;      // output rows a tile (an MMA's M)
inline constexpr int kInt4RegionValues = 64;  // k values a region (a lane's 16 of each row, 4 k-steps of 16)
constexpr int64_t int4_word_offset(int64_t r, int64_t i, int64_t k) {
  const int64_t tile = r / kInt4TileRows, region = i / 8, lane = 4 * (r % 8) + (i % 8) / 2;
  return ((tile * (k / kInt4RegionValues) + region) * 32 + lane) * 16 + 8 * ((r % kInt4TileRows) / 8) + 4 * (i % 2);
}
// INT4 weights [n, k] fit the layout (else invalid_argument naming op `name`, the rule and the shape).
Status check_int4_shape(const std::string& name, int64_t n, int64_t k);

// The activation quantizers take x (q); the weight quantizers take w (qweight). The same math: codes of one span.
constexpr bool quantizes_tokens(OpId op) {
  switch (op) {
    case OpId::quantize_per_token_int8:
    case OpId::quantize_per_token_fp8:
    case OpId::quantize_per_tensor_int8:
    case OpId::quantize_per_tensor_fp8:
    case OpId::quantize_per_token_group_int8:
    case OpId::quantize_per_token_group_fp8:
      return true;
    default:
      return false;
  }
}

// The values a quantizer's scale covers: a row, a 1 x group slice of a row, the whole tensor, or a
// kQuantBlockSize x kQuantBlockSize block (none: not a quantizer).
enum class ScaleSpan : uint8_t { none, row, group, tensor, block };
constexpr ScaleSpan scale_span(OpId op) {
  switch (op) {
    case OpId::quantize_int8_per_channel:
    case OpId::quantize_per_token_int8:
    case OpId::quantize_per_token_fp8:
      return ScaleSpan::row;
    case OpId::quantize_int4_groupwise:
    case OpId::quantize_per_token_group_int8:
    case OpId::quantize_per_token_group_fp8:
      return ScaleSpan::group;
    case OpId::quantize_per_tensor_int8:
    case OpId::quantize_per_tensor_fp8:
      return ScaleSpan::tensor;
    case OpId::quantize_blockwise_int8:
    case OpId::quantize_blockwise_fp8:
      return ScaleSpan::block;
    default:
      return ScaleSpan::none;
  }
}

// The quantizers: quantize_int8_per_channel, quantize_per_token_*, quantize_per_tensor_*, quantize_per_token_group_*,
// quantize_blockwise_* and quantize_int4_groupwise.
struct QuantizeArgs {
  OpId op = OpId::quantize_int8_per_channel;
  DType dtype{};  // of w
  Device device{};
  int64_t rows = 0, hidden = 0;  // w [rows, hidden = k]
  int group = 0;                 // ScaleSpan::group: the scale group along k (64 or 128); else 0
  const void* w = nullptr;       // [rows, k], row stride w_stride elements
  int64_t w_stride = 0;
  void* q = nullptr;  // i8 or f8e4m3 [rows, k], or i4x2 [rows, k / 2] (kernel layout), contiguous
  // f32, by span: row [rows]; group [rows, k / group], or [k / group, scales_ld] when scales_ld > 0 (column major);
  // tensor [1] (read when static_scale); block [ceil(rows / B), ceil(k / B)], rows scales_ld (>= ceil(k / B)) apart,
  // B = kQuantBlockSize. Contiguous but for scales_ld.
  float* scales = nullptr;
  int64_t scales_ld = 0;
  bool static_scale = false;
  int align_bytes = 16;  // of w's pointer and row stride and of q's pointer

  // Where the fp32 scale of row t's group g lies in scales (ScaleSpan::group).
  int64_t group_scale_index(int64_t t, int64_t g) const {
    return scales_ld > 0 ? g * scales_ld + t : t * (hidden / group) + g;
  }

  OpShape shape() const {
    OpShape s{rows, hidden, 1, align_bytes};
    s.group = group;
    return s;
  }
};

// linear_weight_only: out [m, n] = x [m, k] @ (q * s)^T + bias.
struct WeightOnlyArgs {
  OpId op = OpId::linear_w8a16;
  DType dtype{};  // of x, out and bias
  Device device{};
  int64_t rows = 0;  // m tokens
  int64_t n = 0, k = 0;
  int bits = 8, group = 0;  // group 0: per output channel (bits 8); else 32, 64 or 128
  const void* x = nullptr;  // [m, k], row stride x_stride elements
  int64_t x_stride = 0;
  const void* qweight = nullptr;  // bits 8: i8 [n, k]; bits 4: i4x2 [n, k / 2] in the kernel layout; contiguous
  const float* scales = nullptr;  // [n] (group 0) or [n, k / group]; contiguous
  const int8_t* zeros = nullptr;  // [n, k / group] zero points (w = s (q - zero)), or null; contiguous
  const void* bias = nullptr;     // [n] or null
  void* out = nullptr;            // [m, n], row stride out_stride elements
  int64_t out_stride = 0;
  const void* perm = nullptr;  // [k] i32 / i64 (perm_i64), or null: the weights' k order as inputs of x
  bool perm_i64 = false;
  bool accumulate = false;  // out += x @ dequant(q)^T (+ bias): the residual add of a decoder layer
  int align_bytes = 16;  // of x's pointer and row stride (the weights' rows are checked on their own)
  // CUDA: x was written by the kernel launched just before on the stream (perm's gather): the GEMV or tensor-core
  // kernel is launched as its programmatic dependent (launch_kernel) and waits for it before reading x.
  bool x_from_prior_grid = false;

  OpShape shape() const {
    OpShape s{rows, k, 1, align_bytes};
    s.out_features = n;
    s.group = group;
    return s;
  }
};

// linear_w8a8 / linear_fp8 / linear_fp8_blockwise: out [m, n] = (xq [m, k] . qweight [n, k]^T) * x_scales * w_scales
// + bias, 1-byte values (i8, or e4m3 codes for linear_fp8*); linear_fp8_blockwise scales each 128-wide k block's sums
// by its own scales (kernelkit/ops/quant.hpp).
struct W8A8Args {
  OpId op = OpId::linear_w8a8;
  DType dtype{};  // of out and bias
  Device device{};
  int64_t rows = 0;  // m tokens
  int64_t n = 0, k = 0;
  const int8_t* xq = nullptr;  // [m, k], row stride x_stride
  int64_t x_stride = 0;
  const float* x_scales = nullptr;  // [m], or [1] when x_per_tensor; blockwise [m, k / B] (strides below)
  const int8_t* qweight = nullptr;  // [n, k], contiguous
  const float* w_scales = nullptr;  // [n], or [1] when w_per_tensor; blockwise [ceil(n / B), k / B], row stride below
  const void* bias = nullptr;       // [n] or null
  void* out = nullptr;              // [m, n], row stride out_stride
  int64_t out_stride = 0;
  int align_bytes = 16;  // of xq's pointer and row stride and of qweight's pointer (linear_fp8: of out's too)
  bool x_per_tensor = false, w_per_tensor = false;  // linear_fp8: one scale for the whole tensor
  bool fast_accumulation = false;                   // linear_fp8: Hopper's FP8 sums without fp32 promotion
  bool accumulate = false;                          // linear_fp8*: out += ... (out read first)
  // linear_fp8_blockwise (B = kQuantBlockSize): token t's scale of k block b at x_scales[t * x_scales_strides[0] + b *
  // x_scales_strides[1]], weight row r's at w_scales[(r / B) * w_scales_ld + b].
  int64_t x_scales_strides[2] = {0, 0};
  int64_t w_scales_ld = 0;

  // The scales of token t and weight row r for the k values from j on (j / B the block of linear_fp8_blockwise).
  float x_scale(int64_t t, int64_t j) const {
    if (op == OpId::linear_fp8_blockwise)
      return x_scales[t * x_scales_strides[0] + j / kQuantBlockSize * x_scales_strides[1]];
    return x_scales[x_per_tensor ? 0 : t];
  }
  float w_scale(int64_t r, int64_t j) const {
    if (op == OpId::linear_fp8_blockwise) return w_scales[r / kQuantBlockSize * w_scales_ld + j / kQuantBlockSize];
    return w_scales[w_per_tensor ? 0 : r];
  }

  OpShape shape() const {
    OpShape s{rows, k, 1, align_bytes};
    s.out_features = n;
    return s;
  }
};

// The largest code magnitude of the 1-byte quantizers: e4m3's 448 or int8's 127 (a span's scale is max|w| / it).
constexpr int code_max(bool fp8) { return fp8 ? 448 : 127; }
// s = fp32(max|w| / qmax), the scale of a span whose max magnitude is amax (exact: the fp64 quotient of two fp32
// values rounds once to the fp32 quotient, as the kernels' IEEE division gives it).
inline float span_scale_of(double amax, int qmax) { return static_cast<float>(amax / qmax); }

// The one-byte code of w at scale s, as every 1-byte quantizer's reference rounds it: int8 round_half_even(fp32(w / s))
// clamped to +-127, or (fp8) the e4m3 bits of fp32(w / s), nearest even, saturating at +-448; s == 0 gives 0.
uint8_t quantize_byte(double w, float s, bool fp8);
// Row `row` of the ops fused with quantization (rms_norm_quant_*, silu_and_mul_quant_*, ...): the n values y (as the
// op rounded them) to codes q [n] as quantize_per_token does, at the scale *scale: written (s = max|y| / qmax) unless
// static_scale, where it is read. A dynamic scale of a row holding inf or NaN is the error the CUDA kernels record
// for check_errors (DeviceCheck::finite_x), returned once the row's scale and codes are written as CUDA writes them.
Status quantize_row_reference(OpId op, int64_t row, const double* y, int64_t n, bool fp8, bool static_scale,
                              float* scale, uint8_t* q);
// A quantizer's given (static) scale must be finite and > 0: else the error check_errors reports for the CUDA kernels
// (DeviceCheck::static_scale), raised by the CPU backend before it writes anything.
Status check_static_scale(OpId op, float scale);

Status validate_quantize(const QuantizeArgs& a, const DeviceProfile* profile);
Status quantize_reference(const QuantizeArgs& a);
Status quantize_cuda(const QuantizeArgs& a, Stream stream);

Status validate_weight_only(const WeightOnlyArgs& a, const DeviceProfile* profile);
Status weight_only_reference(const WeightOnlyArgs& a);
Status weight_only_cuda(const WeightOnlyArgs& a, Stream stream);

Status validate_w8a8(const W8A8Args& a, const DeviceProfile* profile);
// Whether profile `prof` runs FP8 linear op `op` (linear_fp8*, through cuBLASLt): FP8 tensor cores (sm_89+), and for
// linear_fp8_blockwise cuBLASLt's block-scaled modes (Hopper, sm_90, only); else unsupported, naming what to use.
Status check_fp8_linear_profile(OpId op, const DeviceProfile& prof);
Status w8a8_reference(const W8A8Args& a);
Status w8a8_cuda(const W8A8Args& a, Stream stream);
Status fp8_linear_cuda(const W8A8Args& a, Stream stream);  // through cuBLASLt (gemm_lt.cpp)
// linear_fp8 (per-tensor or per-token x per-channel scales) at m < kLinearTcMinM on the weight-only GEMV, or (mma, k a
// multiple of 32) up to kLinearMmaGemvMaxTokens tokens on the FP8 tensor-core GEMV (linear.cuh).
Status fp8_linear_gemv_cuda(const W8A8Args& a, Stream stream, bool mma = false);

// The signed value of nibble `nibble` (0..7) of the little-endian 32-bit word at `bytes` (4 bytes).
inline int int4_nibble(const uint8_t* bytes, int nibble) {
  const int v = (bytes[nibble / 2] >> (4 * (nibble % 2))) & 0xF;
  return v >= 8 ? v - 16 : v;
}
// Value j (0..k-1) of row r of INT4 weights [n, k / 2] in the kernel layout.
inline int int4_kernel_value(const uint8_t* weights, int64_t r, int64_t j, int64_t k) {
  return int4_nibble(weights + int4_word_offset(r, j / 8, k), kInt4Nibble[j % 8]);
}

}  // namespace kernelkit::detail

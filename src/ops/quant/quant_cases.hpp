// The quant family's test cases (the GPU tests, `kernelkit verify`): the quantized linear layers against the fp64
// reference (or exact integer sums), the quantizers bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernelkit/ops/quant.hpp"
#include "testing/cases.hpp"
#include "testing/harness.hpp"

namespace kernelkit::testing {

// Weight-only linear cases: w [n, k] uniform in [-0.1, 0.1], quantized by the CPU quantizers (bits 8: per channel;
// bits 4: groups of 64 / 128, kernel layout), or, for the checkpoint forms (zero points, groups of 32, INT8 groups),
// every code at random with random scales and zero points; x [m, k] uniform in [-1, 1] with rows `x_pad` elements
// apart; bias uniform in
// [-0.5, 0.5] when present. Every output element is compared with the fp64 reference (out poisoned first):
//   |got - want| <= atol + rtol |want| + 1e-6 sum_j |x[t, j] w[r, j]|
// the tolerance table plus the fp32 accumulation of k products (about 2^-24 sqrt(k) of their magnitude; 1e-6 of the
// l1 sum is ~16x that at k = 4096, and never more than the 1e-3 of the accuracy bound).
// A case's weight rows and inputs as its weights' layout takes them: INT4 rounds them up to the kernel layout's whole
// 16-row tiles and 64-value regions (include/kernelkit/ops/quant.hpp), INT8 keeps them.
int64_t layout_rows(int bits, int64_t n);
int64_t layout_cols(int bits, int64_t k);

struct WeightOnlyCase {
  DType dtype = DType::f16;
  int bits = 8;
  int group = 0;  // 32, 64 or 128 (bits 4 always; bits 8: 0 for per-channel scales)
  int64_t m = 1, n = 7, k = 128;
  bool bias = true;
  int64_t x_pad = 0;
  uint64_t seed = 1;
  bool accumulate = false;  // out starts random: out += x @ dequant(q)^T (+ bias)
  bool zeros = false;       // zero points (random int8 per group): w = s (q - zero)
  DType perm = DType::f32;  // act-order: i32 or i64 for a random permutation of k as `perm` (f32: none)
  std::string name() const;  // "linear_w4a16 g128 zeros act-order i32 bf16 m3 n255 k512 bias"
  double work() const { return static_cast<double>(m) * n * k; }  // the reference's multiply-adds (VerifyCase::work)
};
// device < 0: the op under test is the CPU backend too (the harness's own self-check, run by the CPU tests).
CaseResult run_weight_only_case_cuda(const WeightOnlyCase& c, int device = 0);

// linear_w8a8 / linear_fp8 / linear_fp8_blockwise cases: random xq [m, k] (row stride k + x_pad) and qweight [n, k]
// (int8 values, or every finite e4m3 code), random positive scales (per token and channel, per tensor, or per 1 x 128
// slice and 128 x 128 block), optional bias; the output (poisoned first, or random and added to with accumulate) is
// checked element by element against the exact dot products (of each 128-wide k block for block scales) scaled in
// fp64, within the FP8 sums' bound (docs/tolerances.md) applied per block.
struct W8A8Case {
  DType dtype = DType::f16;  // of out and bias
  int64_t m = 1, n = 7, k = 64;
  bool bias = true;
  int64_t x_pad = 0;  // a multiple of 16
  uint64_t seed = 1;
  OpId op = OpId::linear_w8a8;
  bool per_tensor = false;         // linear_fp8: x_scales [1] and w_scales [1]
  bool fast_accumulation = false;  // linear_fp8
  // linear_fp8_blockwise: x_scales [m, k / 128] token-major with ld m (cuBLASLt's layout) or row major; w_scales'
  // row stride (0: fp8_block_scales_ld(k), cuBLASLt's; the CPU backend takes any >= k / 128).
  bool row_major_x_scales = false;
  int64_t w_scales_ld = 0;
  bool accumulate = false;   // linear_fp8*: out starts random, out += ...
  std::string name() const;  // "linear_fp8 bf16 m300 n255 k528 bias per_tensor"
  double work() const { return static_cast<double>(m) * n * k; }  // the reference's multiply-adds (VerifyCase::work)
};
// device < 0: the op under test is the CPU backend.
CaseResult run_w8a8_case(const W8A8Case& c, int device = 0);

// Quantizer cases (every quantize_* op): w [rows, k] with rows `pad` elements apart, uniform in [-2, 2], with a zero
// span (row 0, or the first 128 x 128 block when there are several: scale 0) and row 1 holding every 7th value at
// 1e-4 of the rest (e4m3 subnormal codes). The CUDA quantizers must give the reference's q and scales bit for bit
// (both round w / s once, in fp32); outputs start poisoned on both sides, so a scale layout's padding (column-major
// scales_ld > rows) must stay untouched.
struct QuantizeCase {
  OpId op = OpId::quantize_int8_per_channel;
  DType dtype = DType::f16;
  int64_t rows = 7, k = 128;
  int group = 0;  // quantize_int4_groupwise, quantize_per_token_group_*: 64 or 128
  int64_t pad = 0;
  uint64_t seed = 1;
  bool static_scale = false;  // quantize_per_tensor_*: the given scale 1.5 / qmax, so |w| past 1.5 saturates
  int64_t scales_ld = 0;      // quantize_per_token_group_*: > 0 for column-major scales [k / group, scales_ld];
                              // quantize_blockwise_*: > 0 for the block scales' row stride
  std::string name() const;
};
CaseResult run_quantize_case_cuda(const QuantizeCase& c, int device = 0);  // device < 0: as for linear
// Quantizer `op` through its public entry point: group for the group ops, static_scale for the per-tensor ones,
// column_major_scales for the per-token-group ones.
Status call_quantizer(OpId op, const TensorView& q, const TensorView& scales, const TensorView& w, int group = 0,
                      bool static_scale = false, bool column_major_scales = false);

// ---- The ops fused with quantization (rms_norm_quant_*, fused_add_rms_norm_quant_*, silu_and_mul_quant_*).

// The static scale of a fused quantization case: |y| up to about 3 in range (a norm's y: a weight up to 1.5 on unit
// RMS), the rest saturating.
float static_quant_scale(OpId op);

// Compares fused quantization outputs dequantized (q * s) against the reference's, rows x hidden (q contiguous): the
// fused op's y may differ from the reference's by its tolerance, which can move q to the next code and the row's max
// (so s) by that much. Bound: half a step of each side's code + the dtype's tolerance; scales within that tolerance
// over qmax.
void compare_quantized(const HostBuffer& q_got, const HostBuffer& s_got, const HostBuffer& q_want,
                       const HostBuffer& s_want, int64_t rows, int64_t hidden, DType dtype, bool static_scale,
                       CaseResult* r);

// The CPU backend's composition check of a fused quantization op: its q [rows, hidden] (contiguous) and scales must
// equal the unfused op's output y [rows, hidden] (row stride `stride`) through quantize_per_token_* bit for bit, or,
// with a static scale, y / static_value's nearest codes (and the scale left as given).
void check_quantized_composition(const HostBuffer& y, int64_t rows, int64_t hidden, int64_t stride, const HostBuffer& q,
                                 const HostBuffer& scales, bool static_scale, float static_value, CaseResult* r);

// The family's verify cases (testing/cases.hpp): token counts of every GEMV / tensor-core tile and a tail, odd n, both
// INT4 groups; the quantizers over row counts and k. On the CPU backend (device -1 as the op under test) the small
// shapes only.
void verify_quant_cases(OpId op, DType dtype, const VerifyGrid& grid, uint64_t* seed, std::vector<VerifyCase>* out);

}  // namespace kernelkit::testing

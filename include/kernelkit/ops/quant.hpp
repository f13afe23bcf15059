// Quantization ops (src/ops/quant/), part of the op API (kernelkit/ops.hpp): TensorViews in, a Status out;
// CPU tensors run the fp64 reference, CUDA tensors the kernels on the caller's stream.
#pragma once

#include <optional>

#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit {

// ---- Quantization: symmetric integer weights with fp32 scales, dequantized as w = q * s.
//      Every quantizer rounds q = round_half_even(w / s) with s and the quotient in fp32 (IEEE division), clamped to the
//      symmetric range; s = max|w| / qmax over the scale's span (a zero span gives s = 0 and q = 0).

// Per-output-channel INT8 weights: w [n, k] (f32, f16 or bf16) -> qweight i8 [n, k], scales f32 [n];
// s[r] = max_j |w[r, j]| / 127, q in [-127, 127].
Status quantize_int8_per_channel(const TensorView& qweight, const TensorView& scales, const TensorView& w,
                                 Stream stream = nullptr);

// Dynamic per-token INT8 activations: x [m, k] -> q i8 [m, k], scales f32 [m]; the same row-wise math as above.
Status quantize_per_token_int8(const TensorView& q, const TensorView& scales, const TensorView& x,
                               Stream stream = nullptr);

// Dynamic per-token FP8 activations (vLLM's dynamic per-token scaled_fp8_quant): x [m, k] -> q f8e4m3 [m, k], scales
// f32 [m]; s[t] = max_j |x[t, j]| / 448, q = e4m3(fp32(x / s)) rounded to nearest even (saturating at +-448), so
// x ~ q * s; an all-zero row gives s = 0 and q = 0. CUDA: profiles with FP8 (sm_89+); the T4 / A100 profiles refuse
// it, naming what to use instead (quantize_per_token_int8). An inf or NaN in x is recorded (check_errors).
Status quantize_per_token_fp8(const TensorView& q, const TensorView& scales, const TensorView& x,
                              Stream stream = nullptr);

// ---- FP8 (and INT8) quantizers with coarser or finer spans than a row, for the GEMMs that take them (per-tensor
//      scaled FP8 matmuls, DeepSeek-V3's block-scaled FP8). The same rounding as above: q = e4m3(fp32(v / s)) to
//      nearest even, saturating at +-448 (f8e4m3), or round_half_even(fp32(v / s)) clamped to +-127 (i8), with s =
//      max|v| / 448 (or / 127) over the span as fp32 (an all-zero span gives s = 0 and q = 0). The _int8 op of each
//      pair is the same kernel with the other code. x / w: f32, f16 or bf16, [rows, k] with a contiguous last dim and
//      any row stride; q: f8e4m3 or i8 [rows, k], contiguous. FP8 on CUDA needs a profile with FP8 (sm_89+); the T4 /
//      A100 profiles refuse it, naming what to use instead. CPU tensors run the reference, which refuses an inf or NaN
//      input (and a bad static scale) naming where it is; CUDA records it for check_errors.

// Per-tensor (vLLM's dynamic_scaled_fp8_quant, static_scaled_fp8_quant and static_scaled_int8_quant): one scale for
// the whole x [m, k] -> q [m, k], scale f32 [1].
//   static_scale = false: scale written, s = max|x| / 448 (or 127) over every element (an empty or all-zero x gives
//     s = 0). CUDA: scale zeroed on the stream, one pass combining each block's max into it with an atomic max, then
//     the codes: no host synchronization and no allocation, so it can be captured in a CUDA graph.
//   static_scale = true: scale read, a calibrated s that must be finite and > 0 (values beyond 448 s saturate). CUDA
//     cannot look at it without a synchronization: a bad one is recorded (check_errors) and that call's codes are not
//     valid.
Status quantize_per_tensor_fp8(const TensorView& q, const TensorView& scale, const TensorView& x,
                               bool static_scale = false, Stream stream = nullptr);
Status quantize_per_tensor_int8(const TensorView& q, const TensorView& scale, const TensorView& x,
                                bool static_scale = false, Stream stream = nullptr);

// Per-token-group (DeepSeek-V3's activations, vLLM's per_token_group_quant_fp8 / _int8): one scale per 1 x group
// slice of a row, x [m, k] -> q [m, k], s[t, g] = max_{j in g} |x[t, j]| / 448 (or 127); group 64 or 128,
// k % group == 0. The scales, f32, are laid out
//   column_major_scales = false: [m, k / group], contiguous (s[t, g] at t * (k / group) + g);
//   column_major_scales = true: [k / group, m] with a contiguous last dim and any row stride ld >= m (s[t, g] at
//     g * ld + t): the M-major layout of DeepGEMM's and cuBLASLt's block-scaled FP8 GEMMs (ld = m rounded up to a
//     multiple of 4 gives TMA its 16-byte rows); as a torch tensor its transpose is the [m, k / group] view.
// CUDA: x's pointer and row stride and q's pointer 16-byte aligned (8 values a thread, one 16-byte load each).
Status quantize_per_token_group_fp8(const TensorView& q, const TensorView& scales, const TensorView& x, int group = 128,
                                    bool column_major_scales = false, Stream stream = nullptr);
Status quantize_per_token_group_int8(const TensorView& q, const TensorView& scales, const TensorView& x,
                                     int group = 128, bool column_major_scales = false, Stream stream = nullptr);

// 128 x 128 blocks of weights (DeepSeek-V3's FP8 weight format, vLLM's block-wise FP8 linear): w [n, k] -> qweight
// [n, k], scales f32 [ceil(n / 128), ceil(k / 128)] with a contiguous last dim and any row stride >= ceil(k / 128),
// s[i, j] = max|w| over rows 128 i .. 128 i + 127 and columns 128 j .. 128 j + 127 (the edge blocks partial: any n and
// k) / 448 (or 127). A row stride of fp8_block_scales_ld(k) gives the layout linear_fp8's block scales need on CUDA;
// the padding is left as it was. Weights are quantized off the serving path: like the other weight quantizers the
// CUDA call waits and refuses an inf or NaN at the call.
inline constexpr int kQuantBlockSize = 128;
// The row stride of 128 x 128 weight scales as cuBLASLt's block-scaled FP8 matmul reads them (its scale pointer carries
// no strides): ceil(k / 128) rounded up to a multiple of 4, so that every row of scales starts 16 bytes aligned.
constexpr int64_t fp8_block_scales_ld(int64_t k) {
  const int64_t k_blocks = (k + kQuantBlockSize - 1) / kQuantBlockSize;
  return (k_blocks + 3) / 4 * 4;
}
Status quantize_blockwise_fp8(const TensorView& qweight, const TensorView& scales, const TensorView& w,
                              Stream stream = nullptr);
Status quantize_blockwise_int8(const TensorView& qweight, const TensorView& scales, const TensorView& w,
                               Stream stream = nullptr);

// Group-wise INT4 weights: w [n, k] -> qweight i4x2 [n, k / 2] in the kernel layout below, scales f32 [n, k / group];
// group is 64 or 128 (k % group == 0); s = max|w| / 7 over the group, q in [-7, 7] (-8 is never produced but decodes).
//
// The kernel layout of INT4 weights ("kk-int4-tiled"; n % 16 == 0, k % 64 == 0: pad other shapes with zero rows and
// columns): the weights are 16-row tiles of 64-value regions, each region stored as the 32 lanes' fragments of the
// tensor-core kernels that read it, so that a lane's share is one 16-byte load and a warp's 512 contiguous bytes.
//   Words: 8 values v0..v7 of k = 8i .. 8i + 7 of a row form a little-endian 32-bit word (word i), value j as signed
//   4-bit two's complement in the nibble at bit 4 * P(j) with P = {0, 4, 1, 5, 2, 6, 3, 7} (j / 2 + 4 * (j % 2)).
//   Then (word & 0x000F000F) holds v0 and v1 in the low nibbles of its two 16-bit halves, (word & 0x00F000F0) v2 and
//   v3, and the same of (word >> 8) v4..v7: one AND/OR turns two values into an fp16 pair (the 0x6400 exponent trick).
//   Placement: word i of row r sits at byte ((r / 16 * (k / 64) + i / 8) * 32 + lane) * 16 + 8 * ((r % 16) / 8) +
//   4 * (i % 2), lane = 4 * (r % 8) + (i % 8) / 2. That is: tile r / 16 holds its k / 64 regions one after another,
//   512 bytes each; in a region, lane 4g + t (g, t = 0..7, 0..3) holds 16 bytes: words 8R + 2t and 8R + 2t + 1
//   (values 16t .. 16t + 15 of region R) of row g of the tile, then the same two words of row g + 8.
// The plain layout is the i4x2 dtype's own: value 2i in the low nibble of byte i, value 2i + 1 in the high one.
Status quantize_int4_groupwise(const TensorView& qweight, const TensorView& scales, const TensorView& w, int group,
                               Stream stream = nullptr);

// Converters between the kernel layout and plain values (CPU tensors only; an offline step). `plain` is either i8
// [n, k] holding values in [-8, 7], or i4x2 [n, k / 2] in the plain nibble order; n % 16 == 0, k % 64 == 0.
Status pack_int4(const TensorView& packed, const TensorView& plain);
Status unpack_int4(const TensorView& plain, const TensorView& packed);

// Weight-only quantized linear layer: out = x @ dequant(qweight)^T (+ bias), fp32 accumulation, one rounding per
// output.
//   x [m, k] f16 or bf16 (contiguous last dim, any row stride); out [m, n] same dtype; bias [n] same dtype, or none.
//   bits 8: qweight i8 [n, k], k % 16 == 0; group 0: scales f32 [n] (per output channel), or group 32, 64 or 128:
//     scales f32 [n, k / group] (k % group == 0).
//   bits 4: qweight i4x2 [n, k / 2] in the kernel layout (n % 16 == 0, k % 64 == 0), scales f32 [n, k / group],
//     group 32, 64 or 128.
//   zeros (optional, group > 0): i8 [n, k / group], the zero points of asymmetric weights (GPTQ / AWQ checkpoints):
//     w[r, j] = scales[r, g] * (q[r, j] - zeros[r, g]) with g = j / group, q the signed stored value; any int8 zero
//     (a checkpoint's unsigned zero z of 4-bit codes u = q + 8 is z - 8, of 8-bit codes z - 128). Without zeros,
//     w = scales * q.
//   perm (optional): i32 or i64 [k], contiguous: the weights' k order as inputs of x (act-order checkpoints, whose
//     inputs were permuted once at load so each scale group is contiguous): out = x[:, perm] @ dequant(qweight)^T.
//     Each entry must be in [0, k) (checked where the values are read: the CPU backend returns the error, a CUDA
//     kernel records it for check_errors and reads no x for it).
// accumulate: out += ... (out is read first; the decoder layer's residual add).
// CUDA: a GEMV for 1 or 2 tokens (INT8: FMAs, 4 rows a block, k split between its warps; INT4: mma.sync over the
// layout's fragments, 16 rows a block, and on sm_90 with groups of 128 up to 32 tokens), tensor cores from 3 on (any
// m; k split over the grid when the tiles are few, the partial sums in stream-ordered scratch); q - zero is exact in
// all of them. Rows of x and qweight must be 16-byte aligned. With perm, a gather kernel writes x[:, perm] into
// stream-ordered scratch and, on sm_90, the GEMV is launched as its programmatic dependent: its blocks start loading
// weights while the gather runs and wait for it only before they read x. The CPU backend is the fp64 reference.
Status linear_weight_only(const TensorView& out, const TensorView& x, const TensorView& qweight,
                          const TensorView& scales, int bits, int group, const std::optional<TensorView>& bias,
                          Stream stream = nullptr, bool accumulate = false,
                          const std::optional<TensorView>& zeros = std::nullopt,
                          const std::optional<TensorView>& perm = std::nullopt);

// W8A8 linear layer on INT8 tensor cores: out = (xq @ qweight^T, exact int32) * x_scales[m] * w_scales[n] (+ bias),
// converted to fp32 once and rounded once to out's dtype.
//   xq i8 [m, k] and x_scales f32 [m] from quantize_per_token_int8 (contiguous last dim, row stride a multiple of 16);
//   qweight i8 [n, k] and w_scales f32 [n] from quantize_int8_per_channel (contiguous); out [m, n] f16 or bf16 (no
//   bf16 on the T4 profile); bias [n] out's dtype, or none; k % 16 == 0 and k <= 131072 (exact int32 sums).
// CUDA: for m > 16 and n, k multiples of 8, cuBLASLt's INT8 kernels for the int32 sums (row blocks of at most 64 MB of
// stream-ordered scratch) and a scaling kernel with the same arithmetic, where cuBLASLt has an algorithm (2-2.6x faster
// than our tiles on the H200); else our 128 x 128 tiles, mma.sync m16n8k32.s8 on sm_80+ and m8n8k16.s8 on sm_75.
// KERNELKIT_W8A8=tiles or cublaslt forces a path. The CPU backend is the reference.
Status linear_w8a8(const TensorView& out, const TensorView& xq, const TensorView& x_scales, const TensorView& qweight,
                   const TensorView& w_scales, const std::optional<TensorView>& bias = std::nullopt,
                   Stream stream = nullptr);

// FP8 linear layer on Hopper's FP8 tensor cores: out = (xq @ qweight^T, fp32 sums) * x_scales * w_scales (+ bias),
// rounded once to out's dtype; cuBLASLt's FP8 matmul with its scale pointers, so the scaling costs no pass of its own.
//   xq f8e4m3 [m, k] (contiguous last dim, row stride a multiple of 16 bytes) and qweight f8e4m3 [n, k] (contiguous):
//   e.g. quantize_per_token_fp8 of the activations and of the weight rows (per output channel).
//   Scales f32, told apart by their dims: both per tensor (x_scales [1], w_scales [1]), both vectors (x_scales [m] per
//   token, w_scales [n] per output channel: cuBLASLt's outer-vector scaling), or both 2-D: block scales (DeepSeek-V3's
//   block-scaled FP8; the registry's linear_fp8_blockwise), below.
//   out [m, n] f16 or bf16 (row stride a multiple of 16 bytes); bias [n] out's dtype, or none; k % 16 == 0; pointers
//   16-byte aligned.
// Block scales: x_scales [m, k / 128], one per 1 x 128 slice of a row of xq (quantize_per_token_group_fp8, group 128),
// and w_scales [ceil(n / 128), k / 128], one per 128 x 128 block of qweight (quantize_blockwise_fp8); k % 128 == 0, and
//   out[t, r] = sum over k blocks b of (sum_{j in b} xq[t, j] qweight[r, j]) * x_scales[t, b] * w_scales[r / 128, b]
//   (+ bias[r]), each block's sum scaled in fp32 as cuBLASLt promotes it.
//   Layouts: x_scales row major (strides (k / 128, 1)) or token-major (strides (1, ld), ld >= m: the column-major
//   scales of quantize_per_token_group_fp8); w_scales with a contiguous last dim and a row stride >= k / 128. On CUDA
//   exactly the layouts cuBLASLt reads (its scale pointers carry no strides), else refused: x_scales token-major with
//   ld == m (cuBLASLt's VEC128_32F scales of its B operand, xq), w_scales with row stride fp8_block_scales_ld(k)
//   (BLK128x128_32F, of its A operand, qweight); profiles with sm_90 only (cuBLASLt has these modes on Hopper only).
// fast_accumulation: Hopper's FP8 MMA sums are kept to about 14 bits unless promoted to fp32 every few k steps; off
// (the default) cuBLASLt promotes them, on it skips that for speed (torch._scaled_mm's use_fast_accum). Block scales
// refuse it: cuBLASLt promotes (and scales) every 128-wide block's sum.
// accumulate: out += ... (out is read first: cuBLASLt's beta = 1 with C = D; the decoder layer's residual add), any
// scaling.
// CUDA: profiles with FP8 (sm_89+); the T4 / A100 profiles refuse it, naming what to use instead (linear_w8a8). The CPU
// backend is the fp64 reference.
Status linear_fp8(const TensorView& out, const TensorView& xq, const TensorView& x_scales, const TensorView& qweight,
                  const TensorView& w_scales, const std::optional<TensorView>& bias = std::nullopt,
                  Stream stream = nullptr, bool fast_accumulation = false, bool accumulate = false);

}  // namespace kernelkit

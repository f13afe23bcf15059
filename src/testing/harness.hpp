// Test harness shared by the GPU tests, `kernelkit verify` and the benchmark: fresh random inputs for a norm case, the
// op run on the CPU backend (the fp64 reference) and on a CUDA device from identical inputs, poisoned outputs, and an
// element-by-element comparison against the documented tolerance table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernelkit/op_info.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit::testing {

// The tolerance table (README "Tolerances"). Outputs are rounded once from fp32 math and compared with the fp64
// reference rounded once to the same dtype, so they may differ by about one unit in the last place:
//   |got - want| <= atol + rtol * |want|,   rtol = 2^-7 (bf16), 2^-10 (f16), 1e-5 (f32).
struct Tolerance {
  double rtol, atol;
};
Tolerance tolerance(DType t);

struct NormCase {
  OpId op = OpId::rms_norm;
  DType dtype = DType::f32;
  int64_t rows = 1, hidden = 64;
  int64_t row_pad = 0;         // > 0: rows of x/out/residual are `hidden + row_pad` apart (strided views)
  bool weight = true;          // weight present (rms/layer/ada/gelu)
  bool bias = true;            // bias present (layer/ada)
  float eps = 1e-6f;
  float weight_offset = 0.0f;  // Gemma-style (1 + w) when 1
  double magnitude = 1.0;      // |x| drawn from [magnitude / 2, magnitude] with random sign when > 1 (extreme fp16)
  uint64_t seed = 1;
  std::string name() const;  // "rms_norm bf16 83x5125 pad 8"
};

struct CaseResult {
  Status status;                 // the op's own status (an expected refusal is reported here, not as a mismatch)
  int64_t checked = 0;           // elements compared
  int64_t mismatches = 0;        // outside tolerance, or non-finite where the reference is finite (and vice versa)
  double max_abs_err = 0;
  double worst_ratio = 0;        // max |got - want| / (atol + rtol |want|): < 1 passes
  std::string detail;            // the first few mismatches
  bool passed() const { return status.ok() && checked > 0 && mismatches == 0; }
};

// The tensors of one norm-family call; which are used depends on the op (residual: fused add; scale/shift: ada).
struct NormTensors {
  TensorView x, out, residual, scale, shift;
  std::optional<TensorView> weight, bias;
};
// Calls the public op `op` (on the CPU backend or CUDA, wherever the tensors are).
Status call_norm_op(OpId op, const NormTensors& t, float eps, float weight_offset = 0.0f, Stream stream = nullptr);

// Counts elements of `got` outside the tolerance table's bound around `want` into `r` (rows x hidden, row stride
// `stride`), recording the first few.
class HostBuffer;
void compare_outputs(const char* label, const HostBuffer& got, const HostBuffer& want, int64_t rows, int64_t hidden,
                     int64_t stride, CaseResult* r);
// The same with `magnitude[k]`, the size of the terms that were summed into want[k] (a sum that cancels keeps the
// rounding error of its terms): the bound is atol + rtol * max(|want[k]|, magnitude[k]).
void compare_outputs(const char* label, const HostBuffer& got, const HostBuffer& want, int64_t rows, int64_t hidden,
                     int64_t stride, const std::vector<double>& magnitude, CaseResult* r);

// Setup and teardown steps of a GPU case: the first failure (every step is evaluated, in order).
Status first_error(std::initializer_list<Status> steps);
// Ok when a CUDA device is present, else status no_device.
Status need_device();

// Runs `c` on CUDA device `device` and on the CPU reference from the same random inputs and compares every output
// element (out, and residual for fused_add_rms_norm). Without a GPU returns status no_device.
CaseResult run_norm_case_cuda(const NormCase& c, int device = 0);

// CPU backend self-checks (no GPU): the fused ops equal the composition of the unfused ones, and the normalized
// outputs have the statistics they must (rms 1; mean 0 and variance 1), within the tolerance table.
CaseResult check_norm_properties(const NormCase& c);

// Activation cases (gelu, gelu_tanh, silu, the gated forms and geglu): out is [rows, d]; the input is [rows, d], or
// [rows, 2d] for the gated forms, or two [rows, d] tensors for geglu. Rows are `row_pad` elements apart when > 0.
struct ActivationCase {
  OpId op = OpId::silu_and_mul;
  DType dtype = DType::f32;
  int64_t rows = 1, d = 64;
  int64_t row_pad = 0;
  double magnitude = 3.0;  // inputs uniform in [-magnitude, magnitude]
  uint64_t seed = 1;
  std::string name() const;
};
// On CUDA device `device` vs the CPU reference from the same inputs, every element, outputs poisoned first.
CaseResult run_activation_case_cuda(const ActivationCase& c, int device = 0);
// CPU backend self-checks: the gated op equals act(first half) * second half through the ungated op; every activation
// satisfies act(x) - act(-x) = x (gelu, gelu_tanh and silu all do).
CaseResult check_activation_properties(const ActivationCase& c);
// Calls the public activation op `op` (out = op(x), or op(x, b) for geglu).
Status call_activation_op(OpId op, const TensorView& out, const TensorView& x, const TensorView* b = nullptr,
                          Stream stream = nullptr);

// RoPE cases: q [tokens, heads, head_dim] and k [tokens, kv_heads, head_dim] as slices of one fused qkv buffer (strided
// views), cos/sin from a cache [max_position, rot_dim] (float32) indexed by random positions.
struct RopeCase {
  DType dtype = DType::f32;
  int64_t tokens = 7, heads = 4, kv_heads = 2, head_dim = 64, rot_dim = 64;
  RopeStyle style = RopeStyle::neox;
  bool in_place = false;
  uint64_t seed = 1;
  std::string name() const;
};
CaseResult run_rope_case_cuda(const RopeCase& c, int device = 0);
// CPU backend self-checks: identity at position 0, every rotated pair keeps its norm, the unrotated tail is copied
// exactly, and per-token cos/sin tables (half and HF full width) give the same result as the cache.
CaseResult check_rope_properties(const RopeCase& c);

// Softmax cases: x [rows, hidden] (causal: [rows / s_q, s_q, hidden]) with random values scaled by `magnitude`; a few
// rows are all -inf (or fully masked) to check their defined output.
struct SoftmaxCase {
  OpId op = OpId::softmax;
  DType dtype = DType::f32;
  int64_t rows = 7, hidden = 64;
  int64_t s_q = 1;  // causal: queries per head (rows % s_q == 0)
  float scale = 1.0f;
  double magnitude = 4.0;
  int64_t row_pad = 0;
  uint64_t seed = 1;
  std::string name() const;
};
CaseResult run_softmax_case_cuda(const SoftmaxCase& c, int device = 0);
// CPU backend self-checks: rows sum to 1 with entries in [0, 1], masked keys and all -inf rows are exactly 0.
CaseResult check_softmax_properties(const SoftmaxCase& c);

// Attention cases: fresh random q, k, v uniform in [-magnitude, magnitude], outputs (and lse) poisoned on the device.
//   attention: dense [b, s, h, d] (bhsd: stored [b, h, s, d] and passed through strides), or varlen: `batch` packed
//     sequences, the odd ones shorter (s_q / 2 queries, s_k / 2 + 1 keys: an empty query sequence when s_q = 1).
//   decode_attention: q [b, s_q, h, d] against a cache of capacity s_k rounded up to a page (+ one page); sequence i
//     holds s_k * (b - i) / b keys; paged: the same rows in shuffled pages of 16.
struct AttentionCase {
  OpId op = OpId::attention;
  DType dtype = DType::f16;
  int64_t batch = 1, s_q = 1, s_k = 1, heads = 1, kv_heads = 1, head_dim = 64;
  bool causal = false;
  bool bhsd = false;    // attention: [b, h, s, d] storage
  bool varlen = false;  // attention: packed sequences through cu_seqlens
  bool paged = false;   // decode_attention: block table
  double magnitude = 1.0;
  uint64_t seed = 1;
  // dense attention ([b, s, h, d]): k / v stored with kv_pad more rows a sequence, NaN, and seen through strides; a
  // kernel that reads a key past s_k and lets it reach the output turns that row NaN
  int64_t kv_pad = 0;
  std::string name() const;  // "attention f16 b2 s_q 7 s_k 127 h 8/2 d 64 causal varlen"
};
// On CUDA device `device` vs the fp64 CPU reference from the same inputs: every element of out and lse.
CaseResult run_attention_case_cuda(const AttentionCase& c, int device = 0);
// CPU backend self-check (no GPU): the reference through the case's layout (bhsd / varlen / paged) equals the
// reference through the plain dense layout, element for element.
CaseResult check_attention_properties(const AttentionCase& c);

// ---- Quantization (src/ops/quant/quant_cases.cpp)

// Weight-only linear cases: w [n, k] uniform in [-0.1, 0.1], quantized by the CPU quantizers (bits 8: per channel;
// bits 4: group-wise, kernel layout); x [m, k] uniform in [-1, 1] with rows `x_pad` elements apart; bias uniform in
// [-0.5, 0.5] when present. Every output element is compared with the fp64 reference (out poisoned first):
//   |got - want| <= atol + rtol |want| + 1e-6 sum_j |x[t, j] w[r, j]|
// the tolerance table plus the fp32 accumulation of k products (about 2^-24 sqrt(k) of their magnitude; 1e-6 of the
// l1 sum is ~16x that at k = 4096, and never more than the 1e-3 of the accuracy bound).
struct WeightOnlyCase {
  DType dtype = DType::f16;
  int bits = 8;
  int group = 0;  // bits 4: 64 or 128
  int64_t m = 1, n = 7, k = 128;
  bool bias = true;
  int64_t x_pad = 0;
  uint64_t seed = 1;
  bool accumulate = false;  // out starts random: out += x @ dequant(q)^T (+ bias)
  std::string name() const;  // "linear_w4a16 g128 bf16 m3 n255 k512 bias"
};
// device < 0: the op under test is the CPU backend too (the harness's own self-check, run by the CPU tests).
CaseResult run_weight_only_case_cuda(const WeightOnlyCase& c, int device = 0);

// linear_w8a8 cases: random int8 xq [m, k] (row stride k + x_pad) and qweight [n, k], random positive scales, optional
// bias; the output (poisoned first) is checked element by element against the exact integer sums scaled in fp64.
struct W8A8Case {
  DType dtype = DType::f16;  // of out and bias
  int64_t m = 1, n = 7, k = 64;
  bool bias = true;
  int64_t x_pad = 0;  // a multiple of 16
  uint64_t seed = 1;
  std::string name() const;  // "linear_w8a8 bf16 m300 n255 k528 bias"
};
// device < 0: the op under test is the CPU backend.
CaseResult run_w8a8_case(const W8A8Case& c, int device = 0);

// Quantizer cases (quantize_int8_per_channel, quantize_per_token_int8, quantize_int4_groupwise): w [rows, k] with rows
// `pad` elements apart, uniform in [-2, 2] with row 0 all zeros (scale 0). The CUDA quantizers must give the
// reference's q and scales bit for bit (both round w / s once, in fp32).
struct QuantizeCase {
  OpId op = OpId::quantize_int8_per_channel;
  DType dtype = DType::f16;
  int64_t rows = 7, k = 128;
  int group = 0;
  int64_t pad = 0;
  uint64_t seed = 1;
  std::string name() const;
};
CaseResult run_quantize_case_cuda(const QuantizeCase& c, int device = 0);  // device < 0: as for linear

// The shape grid the issue names: rows {1, 7, 83, 4096} x hidden {64, 111, 500, 769, 2048, 4096, 5125, 8192}.
std::vector<int64_t> grid_rows();
std::vector<int64_t> grid_hidden();

// Host buffer of `n` elements of a dtype, with random fill and typed access.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(DType t, int64_t n) : dtype_(t), n_(n), bytes_(static_cast<size_t>(n) * dtype_size(t)) {}
  DType dtype() const { return dtype_; }
  int64_t size() const { return n_; }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  size_t bytes() const { return bytes_.size(); }
  double get(int64_t i) const { return load_as_double(bytes_.data(), dtype_, i); }
  void set(int64_t i, double v) { store_from_double(bytes_.data(), dtype_, i, v); }

 private:
  DType dtype_ = DType::f32;
  int64_t n_ = 0;
  std::vector<uint8_t> bytes_;
};

// Device memory owned for a test (CUDA builds only).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  ~DeviceBuffer();
  Status alloc(size_t bytes);
  Status upload(const HostBuffer& h);
  Status download(HostBuffer* h) const;
  Status poison();  // every byte 0xFF: NaN in f32/f16/bf16, so an unwritten element cannot pass
  void* data() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

Status device_synchronize();

}  // namespace kernelkit::testing

// The attention family's test cases (the GPU tests, `kernelkit verify`). The bound on out is derived from the
// kernels' rounding points (attention_cases.cpp, docs/tolerances.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernelkit/ops/attention.hpp"
#include "testing/cases.hpp"
#include "testing/harness.hpp"

namespace kernelkit::testing {

// Attention cases: fresh random q, k, v uniform in [-magnitude, magnitude], outputs (and lse) poisoned on the device.
//   attention: dense [b, s, h, d] (bhsd: stored [b, h, s, d] and passed through strides), or varlen: `batch` packed
//     sequences, the odd ones shorter (s_q / 2 queries, s_k / 2 + 1 keys: an empty query sequence when s_q = 1).
//   decode_attention: q [b, s_q, h, d] against a cache of capacity s_k rounded up to a page (+ one page); sequence i
//     holds s_k * (b - i) / b keys; paged: the same rows in shuffled pages of page_size. fp8: an e4m3 cache (see
//     fp8 below).
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
  bool max_seqlen = false;  // varlen: max_seqlen_q / k given (the longest), so CUDA checks cu_seqlens on the device
  // varlen: the k / v rows of every sequence without queries (odd ones, where s_q / 2 is 0) hold NaN: no query sees
  // them, so a kernel whose tile runs past the previous sequence's keys into them must not let them in (0 x NaN)
  bool nan_idle_kv = false;
  int64_t page_size = 16;    // decode_attention, paged
  int64_t window_left = -1;  // options.window_left
  float softcap = 0.0f;      // options.softcap
  // options.alibi_slopes: 0 none; 1 [heads], head h's slope 2^(-8 (h + 1) / heads) (BLOOM's); 2 [batch, heads], that
  // times (1 + b) for sequence b
  int alibi = 0;
  // An e4m3 cache (decode_attention's KvCache; attention's k / v with options.k_scale / v_scale). Codes of v / s
  // uniform in [-1, 1] (q and k scaled by magnitude), with every 61st code the largest (+-448) and every 67th a
  // subnormal one (+-1..7 x 2^-9); scales k_scale = 2^-6 x 1.25, v_scale = 2^-6 x 0.75 (attention: 2^-6 x 1.2345 and
  // 2^-6 x 0.7654, full fp32 significands, so that CUDA's code * scale rounds in f16 as in bf16) per tensor, or per KV
  // head h those times (1 + h / 4) (scale_per_head). decode: the rows past each sequence's length hold NaN codes
  // (0x7f), which no kernel may let reach an output. bhsd is not combined with it.
  bool fp8 = false;
  bool scale_per_head = false;
  std::string name() const;  // "attention f16 b2 s_q 7 s_k 127 h 8/2 d 64 causal varlen window 16 alibi"
};
// On CUDA device `device` vs the fp64 CPU reference from the same inputs: every element of out and lse.
CaseResult run_attention_case_cuda(const AttentionCase& c, int device = 0);
// CPU backend self-check (no GPU): every output is a convex combination of visible v rows (within [min v, max v] up
// to one rounding), lse is finite or -inf; the layouts' agreement with the dense one is tests/attention's.
CaseResult check_attention_properties(const AttentionCase& c);

// write_kv_cache cases: k, v [tokens, h_kv, d] fresh random; caches [blocks, block, h_kv, d] fresh random too (their
// rows outside the slots must keep their bits); slot_mapping a shuffled set of distinct slots with every 5th token -1
// (padding). rope: q [tokens, heads, d] rotated in place (or into a poisoned q_out), positions random in [0, 4096),
// Llama's table with rot_dim (0: head_dim).
struct KvWriteCase {
  DType dtype = DType::f16;
  int64_t tokens = 1, heads = 8, kv_heads = 2, head_dim = 128, blocks = 4, block = 16;
  int rope = 0;  // 0 none, 1 neox, 2 gptj
  int64_t rot_dim = 0;
  bool slots_i64 = true;
  bool q_in_place = true;
  uint64_t seed = 1;
  // e4m3 caches: k and v of magnitudes 2^-20 to 2 (log-uniform, either sign) at scales 2^-8 x 1.25 (k) and 2^-8 x
  // 0.75 (v), or per KV head those times (1 + h / 4): codes saturating at 448, normal and subnormal ones, and zeros.
  bool fp8 = false;
  bool scale_per_head = false;
  std::string name() const;  // "write_kv_cache f16 tokens 7 h 8/2 d 128 cache [4, 16] rope neox 64 q_out e4m3"
};
// On CUDA vs the CPU backend on the same inputs: every element of both caches (bit-exact without RoPE: e4m3 codes
// byte for byte) and of q_out. With RoPE the rotated k rows take the table's bound, or, quantized, one e4m3 step.
CaseResult run_kv_write_case_cuda(const KvWriteCase& c, int device = 0);
// CPU backend self-check: each slot holds its token's v bits and k bits (RoPE: rotary_embedding's k on the CPU; e4m3:
// their codes e4m3(fp32(x / scale)), nearest even, saturating), every other cache row its old bits, and q_out
// rotary_embedding's q.
CaseResult check_kv_write_properties(const KvWriteCase& c);

// The family's verify cases (testing/cases.hpp): one token, GQA 4 and 8, s_q < s_k and s_q > s_k, head_dim 64 and
// 128, causal or not, dense / varlen (attention) or contiguous / paged (decode); a 1000-token one on the GPU unless
// quick; head dims 40 / 80 / 192 with sliding windows, soft-caps, ALiBi and pages of 1 / 32 / 64 keys; write_kv_cache
// with and without RoPE over both cache layouts.
void verify_attention_cases(OpId op, DType dtype, const VerifyGrid& grid, uint64_t* seed,
                            std::vector<VerifyCase>* out);

}  // namespace kernelkit::testing

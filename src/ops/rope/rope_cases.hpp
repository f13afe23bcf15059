// The RoPE family's test cases (the GPU tests, `kernelkit verify`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernelkit/ops/rope.hpp"
#include "testing/cases.hpp"
#include "testing/harness.hpp"

namespace kernelkit::testing {

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

// The family's verify cases (testing/cases.hpp): styles x head / rotary dims x in place x token counts.
void verify_rope_cases(OpId op, DType dtype, const VerifyGrid& grid, uint64_t* seed, std::vector<VerifyCase>* out);

// A random case: token and head counts, an even head_dim up to 256 and a rot_dim up to it, both styles, in place or
// not.
RopeCase random_rope_case(uint64_t seed);

}  // namespace kernelkit::testing

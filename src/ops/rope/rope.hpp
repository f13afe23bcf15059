// Internal: the parameter block of rotary_embedding, shared by validation, the CPU reference and the CUDA launcher.
#pragma once

#include <cstdint>

#include "kernelkit/op_info.hpp"
#include "kernelkit/ops.hpp"
#include "kernelkit/profile.hpp"

namespace kernelkit::detail {

struct RopeArgs {
  OpId op = OpId::rotary_embedding;
  RopeStyle style = RopeStyle::neox;
  DType dtype{};     // of q, k and the outputs
  Device device{};
  int64_t tokens = 0, heads = 0, kv_heads = 0, head_dim = 0, rot_dim = 0;
  // q/k and outputs: element (t, h, i) at t * s_tok + h * s_head + i
  const void *q = nullptr, *k = nullptr;
  void *q_out = nullptr, *k_out = nullptr;
  int64_t q_tok = 0, q_head = 0, k_tok = 0, k_head = 0, qo_tok = 0, qo_head = 0, ko_tok = 0, ko_head = 0;
  // cos/sin of pair j of token t: cos at cos_base + row(t) * cs_row + j * cs_step (sin likewise), row(t) = positions[t]
  // for a cache, t for per-token tables.
  const void* positions = nullptr;  // null: per-token tables
  DType positions_dtype = DType::i64;
  const void *cos = nullptr, *sin = nullptr;
  DType cs_dtype = DType::f32;
  int64_t cs_row = 0, cs_step = 1, max_position = 0;
  int64_t rows = 0;  // tokens x (heads + kv_heads): the row-op dispatcher's "nothing to do" test
  int align_bytes = 16;
};

// rotary_embedding's cache overload up to the launch: every argument checked (no overlap check) into *out, errors
// named by out->op (write_kv_cache builds its fused RoPE through it).
Status rope_cache_args(const TensorView& q_out, const TensorView& k_out, const TensorView& q, const TensorView& k,
                       const TensorView& positions, const TensorView& cache, RopeStyle style, RopeArgs* out);

Status validate_rope(const RopeArgs& a, const DeviceProfile* profile);
Status rope_reference(const RopeArgs& a);
Status rope_cuda(const RopeArgs& a, Stream stream);

}  // namespace kernelkit::detail

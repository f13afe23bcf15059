// Rotary position embedding (src/ops/rope/), part of the op API (kernelkit/ops.hpp): TensorViews in, a Status out;
// CPU tensors run the fp64 reference, CUDA tensors the kernels on the caller's stream.
#pragma once

#include <cstdint>

#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit {

// ---- Rotary position embedding (RoPE) on q [tokens, heads, head_dim] and k [tokens, kv_heads, head_dim]: strided views
//      (e.g. slices of a fused qkv projection) with a contiguous last dim; the first rot_dim elements of each head are
//      rotated (partial rotary when rot_dim < head_dim; the rest is copied when out of place). In place when q_out /
//      k_out are q / k. fp32 math, one rounding per output.

enum class RopeStyle : uint8_t {
  neox,  // rotate_half: pairs (i, i + rot_dim/2)  (Llama, Mistral, Qwen, HF's default)
  gptj,  // interleaved: pairs (2i, 2i + 1)         (GPT-J, LTX-Video's 3D RoPE)
};

// cos/sin from a cache (vLLM / FlashInfer): cos_sin_cache [max_position, rot_dim] holds cos in its first rot_dim/2
// columns and sin in the rest (f32 or the dtype of q); positions [tokens] (i32 or i64) pick each token's row.
Status rotary_embedding(const TensorView& q_out, const TensorView& k_out, const TensorView& q, const TensorView& k,
                        const TensorView& positions, const TensorView& cos_sin_cache, RopeStyle style,
                        Stream stream = nullptr);

// The Llama rotary table for a cos_sin_cache: pair j of position m turns by m theta^(-2j / rot_dim); cos in column j,
// sin in column rot_dim / 2 + j of table [max_position, rot_dim] (f32, host memory), computed in fp64, rounded once.
void rope_cos_sin_table(float* table, int64_t max_position, int64_t rot_dim, double theta = 10000.0);

// Per-token cos/sin (HF convention, also 3D video RoPE whose cos/sin come from (frame, height, width)): cos, sin
// [tokens, rot_dim/2] (one value per pair), or [tokens, rot_dim] as HF builds them (halves duplicated for neox,
// entries repeated in pairs for gptj: the pair's first entry is used).
Status rotary_embedding(const TensorView& q_out, const TensorView& k_out, const TensorView& q, const TensorView& k,
                        const TensorView& cos, const TensorView& sin, int64_t rot_dim, RopeStyle style,
                        Stream stream = nullptr);

}  // namespace kernelkit

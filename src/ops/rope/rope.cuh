// Rotary position embedding: one kernel template over (storage type, vector width, style).
//
// Work item = one vector of rotated pairs of one head of one token: neox reads x[i..i+VEC) and x[i+half..), gptj reads
// the VEC/2 adjacent pairs in x[i..i+VEC). Bytes: q and k read and written once (cos/sin are per token and hit in
// cache); ~3 FLOP per element: memory-bound.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "ops/rope/rope.hpp"
#include "kernels/common/check.cuh"
#include "kernels/common/device_check.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/vec.cuh"
#include "kernelkit/planner.hpp"
#include "runtime/plan_rules.hpp"

namespace kernelkit::cuda {

template <typename T>
struct RopeParams {
  const T *q, *k;          // [tokens, heads | kv_heads, head_dim] (element strides below)
  T *q_out, *k_out;
  int64_t q_tok, q_head, k_tok, k_head, qo_tok, qo_head, ko_tok, ko_head;
  int64_t tokens, heads, kv_heads, head_dim, rot_dim;
  const void* positions;   // [tokens] i32 / i64, or null (per-token tables)
  int positions_i64;
  const void *cos, *sin;   // pair j of row r at r * cs_row + j * cs_step
  int cs_f32;              // cos/sin stored as f32 (else as T)
  int64_t cs_row, cs_step, max_position;
  detail::DeviceErrorRecord* err;  // where a position outside [0, max_position) is recorded (device_check.cuh)
};

template <typename T>
__device__ __forceinline__ float load_cs(const RopeParams<T>& p, const void* base, int64_t idx) {
  return p.cs_f32 ? static_cast<const float*>(base)[idx] : to_float(static_cast<const T*>(base)[idx]);
}

// Elements of a head one work item covers (gptj: at least one pair).
template <int VEC, bool kNeox>
constexpr int kRopeItemElems = kNeox ? VEC : (VEC < 2 ? 2 : VEC);

// One work item: the rotated pairs of elements i0 .. of one head of src, with cos/sin of the table row at element
// offset cs, handed to out(i, y) in fp32: y[0 .. N) are elements i .. i + N - 1 (N = kRopeItemElems, twice for neox:
// each half's). VEC: elements per access (gptj with VEC = 1: two scalar accesses).
template <typename T, int VEC, bool kNeox, typename Out>
__device__ __forceinline__ void rope_item(const RopeParams<T>& p, const T* src, int64_t cs, int64_t i0, Out&& out) {
  using V = Vec<T, VEC>;
  constexpr int kElems = kRopeItemElems<VEC, kNeox>;
  if constexpr (kNeox) {
    const int64_t half = p.rot_dim / 2;
    const V x0 = V::load(src + i0), x1 = V::load(src + i0 + half);
    float y0[VEC], y1[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float c = load_cs(p, p.cos, cs + (i0 + j) * p.cs_step);
      const float s = load_cs(p, p.sin, cs + (i0 + j) * p.cs_step);
      const float a = to_float(x0.v[j]), b = to_float(x1.v[j]);
      y0[j] = a * c - b * s;
      y1[j] = b * c + a * s;
    }
    out(i0, y0);
    out(i0 + half, y1);
  } else {
    float x[kElems], y[kElems];
    if constexpr (VEC >= 2) {
      const V in = V::load(src + i0);
#pragma unroll
      for (int j = 0; j < kElems; ++j) x[j] = to_float(in.v[j]);
    } else {
      x[0] = to_float(src[i0]);
      x[1] = to_float(src[i0 + 1]);
    }
#pragma unroll
    for (int j = 0; j < kElems / 2; ++j) {
      const int64_t pair = i0 / 2 + j;
      const float c = load_cs(p, p.cos, cs + pair * p.cs_step), s = load_cs(p, p.sin, cs + pair * p.cs_step);
      y[2 * j] = x[2 * j] * c - x[2 * j + 1] * s;
      y[2 * j + 1] = x[2 * j + 1] * c + x[2 * j] * s;
    }
    out(i0, y);
  }
}

// The same rounded to T into dst (which may be src): one access of VEC elements, or two scalar ones (gptj, VEC = 1).
template <typename T, int VEC, bool kNeox>
__device__ __forceinline__ void rope_item(const RopeParams<T>& p, const T* src, T* dst, int64_t cs, int64_t i0) {
  rope_item<T, VEC, kNeox>(p, src, cs, i0, [dst](int64_t i, const auto& y) {
    if constexpr (std::extent_v<std::remove_cvref_t<decltype(y)>> == VEC) {
      store_rounded<T, VEC>(dst + i, y);
    } else {
      dst[i] = from_float<T>(y[0]);
      dst[i + 1] = from_float<T>(y[1]);
    }
  });
}

// The cos/sin table row of token t: positions[t] with a cache (one outside [0, max_position) is recorded for `op`,
// by the caller's `first` thread of the token, and clamped into it), t for per-token tables.
template <typename T>
__device__ __forceinline__ int64_t rope_row(const RopeParams<T>& p, int64_t t, bool first, OpId op) {
  if (!p.positions) return t;
  const int64_t row =
      p.positions_i64 ? static_cast<const int64_t*>(p.positions)[t] : static_cast<const int*>(p.positions)[t];
  if (row >= 0 && row < p.max_position) return row;
  if (first) record_device_error(p.err, op, detail::DeviceCheck::positions, t, -1, row, p.max_position);
  return row < 0 ? 0 : p.max_position - 1;
}

template <typename T>
RopeParams<T> rope_params(const detail::RopeArgs& a, detail::DeviceErrorRecord* err) {
  return {static_cast<const T*>(a.q),
          static_cast<const T*>(a.k),
          static_cast<T*>(a.q_out),
          static_cast<T*>(a.k_out),
          a.q_tok,
          a.q_head,
          a.k_tok,
          a.k_head,
          a.qo_tok,
          a.qo_head,
          a.ko_tok,
          a.ko_head,
          a.tokens,
          a.heads,
          a.kv_heads,
          a.head_dim,
          a.rot_dim,
          a.positions,
          a.positions_dtype == DType::i64 ? 1 : 0,
          a.cos,
          a.sin,
          a.cs_dtype == DType::f32 ? 1 : 0,
          a.cs_row,
          a.cs_step,
          a.max_position,
          err};
}

// VEC: elements per access (gptj: at least one pair, so kElems = max(VEC, 2) with two scalar accesses when VEC = 1).
template <typename T, int VEC, bool kNeox>
__global__ void __launch_bounds__(kElementwiseThreads) rope_kernel(const RopeParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    using V = Vec<T, VEC>;
    constexpr int kElems = kRopeItemElems<VEC, kNeox>;
    const int64_t half = p.rot_dim / 2;
    const int64_t per_head = (kNeox ? half : p.rot_dim) / kElems;
    const unsigned heads_total = static_cast<unsigned>(p.heads + p.kv_heads);
    // 2-D grid (planner): x = this thread's item within a head, y walks the (token, head) rows; the host keeps
    // tokens x heads below 2^32 so the row splits with one 32-bit division.
    const int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (v >= per_head) return;
    const unsigned rows = static_cast<unsigned>(p.tokens) * heads_total;
    for (unsigned r = blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += gridDim.y * blockDim.y) {
      const int64_t t = r / heads_total, h = r - static_cast<unsigned>(t) * heads_total;
      const bool is_q = h < p.heads;
      const int64_t hh = is_q ? h : h - p.heads;
      const T* src = is_q ? p.q + t * p.q_tok + hh * p.q_head : p.k + t * p.k_tok + hh * p.k_head;
      T* dst = is_q ? p.q_out + t * p.qo_tok + hh * p.qo_head : p.k_out + t * p.ko_tok + hh * p.ko_head;
      const int64_t cs = rope_row(p, t, v == 0 && h == 0, OpId::rotary_embedding) * p.cs_row;
      rope_item<T, VEC, kNeox>(p, src, dst, cs, v * kElems);
      // Out of place with partial rotary: the head's first item also copies the unrotated tail.
      if (v == 0 && src != dst)
        for (int64_t i = p.rot_dim; i < p.head_dim; i += VEC) V::load(src + i).store(dst + i);
    }
  }
}

template <typename T>
Status launch_rope(const detail::RopeArgs& a, const LaunchPlan& plan, cudaStream_t stream) {
  detail::DeviceErrorRecord* err = nullptr;
  if (a.positions) KK_RETURN_IF_ERROR(device_error_record(a.device.index, &err));
  const RopeParams<T> p = rope_params<T>(a, err);
  return dispatch_vec<16 / sizeof(T)>(plan.vec, [&](auto vec) -> Status {
    constexpr int V = decltype(vec)::value;
    auto kernel = a.style == RopeStyle::neox ? rope_kernel<T, V, true> : rope_kernel<T, V, false>;
    kernel<<<grid_of(plan), block_of(plan), 0, stream>>>(p);
    KK_CUDA_RETURN(cudaGetLastError());
    return Status::Ok();
  });
}

}  // namespace kernelkit::cuda

// Reductions of a row over the threads that share it.
// Layout: threadIdx.x in [0, group) indexes within a row, threadIdx.y picks the row of the block. `group` is a power of
// two up to 32 (rows packed in a warp, reduced by shuffles alone) or a multiple of 32 (one row spans warps: shuffles,
// then one partial per warp through shared memory). Every thread gets the row's total.
//
// An op is a Value (a float, or a struct of floats such as softmax's (max, sum) pair), its identity() and an
// associative apply() that is commutative to the bit: each lane of a shuffle tree combines the same values in its own
// order, so only then do all threads agree on the total.
#pragma once

#include <cstring>

#include "runtime/plan_rules.hpp"

namespace kernelkit::cuda {

constexpr int kWarpSize = 32;

struct SumOp {
  using Value = float;
  static __device__ __forceinline__ float identity() { return 0.0f; }
  static __device__ __forceinline__ float apply(float a, float b) { return a + b; }
};
struct MaxOp {
  using Value = float;
  static __device__ __forceinline__ float identity() { return -INFINITY; }
  static __device__ __forceinline__ float apply(float a, float b) { return fmaxf(a, b); }
};

template <typename V>
__device__ __forceinline__ V shfl_xor(V v, int offset) {
  static_assert(sizeof(V) % sizeof(float) == 0, "a reduction value is made of floats");
  constexpr int n = sizeof(V) / sizeof(float);
  float f[n];
  memcpy(f, &v, sizeof(V));
#pragma unroll
  for (int i = 0; i < n; ++i) f[i] = __shfl_xor_sync(0xffffffffu, f[i], offset);
  memcpy(&v, f, sizeof(V));
  return v;
}

// Shuffles only: the total over each aligned group of `width` lanes (a power of two up to 32); xor offsets below
// `width` stay inside the group, so packed rows never mix.
template <typename Op>
__device__ __forceinline__ typename Op::Value warp_reduce(typename Op::Value v, int width = kWarpSize) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1)
    if (offset < width) v = Op::apply(v, shfl_xor(v, offset));
  return v;
}
__device__ __forceinline__ float warp_sum(float v, int width = kWarpSize) { return warp_reduce<SumOp>(v, width); }
__device__ __forceinline__ float warp_max(float v, int width = kWarpSize) { return warp_reduce<MaxOp>(v, width); }

// block_reduce with one barrier, where no earlier reduction of the block still reads `scratch` (its first use; a
// kernel with several reductions gives each its own scratch). Straight-line: shuffles over every warp, the warps'
// totals through `scratch`, then every warp reduces them.
template <typename Op>
__device__ __forceinline__ typename Op::Value block_reduce_fresh(typename Op::Value v, typename Op::Value* scratch) {
  const int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int warps = blockDim.x * blockDim.y * blockDim.z / kWarpSize;
  v = warp_reduce<Op>(v);
  if (tid % kWarpSize == 0) scratch[tid / kWarpSize] = v;
  __syncthreads();
  return warp_reduce<Op>(tid % kWarpSize < warps ? scratch[tid % kWarpSize] : Op::identity());
}

// The total over all threads of a block (any shape whose thread count is a multiple of 32), to every thread: the
// warps' totals through `scratch` (32 values of shared memory), then shuffles. Every thread of the block must call it
// equally often; the first barrier keeps a call from overwriting the partials a previous call is still reading.
template <typename Op>
__device__ __forceinline__ typename Op::Value block_reduce(typename Op::Value v, typename Op::Value* scratch) {
  __syncthreads();
  return block_reduce_fresh<Op>(v, scratch);
}

// The reductions of a block's rows, any number in a row. `scratch`: row_reduce_scratch_bytes(blockDim.y, group)
// bytes of shared memory (unused when group <= 32). The per-warp partials alternate between two halves of it, so a
// reduction costs one barrier: a warp writes a half again only two reductions later, past a barrier that no thread
// reaches before it has read that half. Every thread of the block must call reduce() equally often.
class RowReducer {
 public:
  __device__ RowReducer(int group, float* scratch) : group_(group), scratch_(scratch) {}

  template <typename Op>
  __device__ __forceinline__ typename Op::Value reduce(typename Op::Value v) {
    using V = typename Op::Value;
    static_assert(sizeof(V) <= kRowReduceValueFloats * sizeof(float), "reduction value larger than its scratch slot");
    v = warp_reduce<Op>(v, group_ < kWarpSize ? group_ : kWarpSize);
    if (group_ <= kWarpSize) return v;
    const int warps = group_ / kWarpSize;
    float* half = scratch_ + half_ * kRowReduceValueFloats * warps * static_cast<int>(blockDim.y);
    V* row = reinterpret_cast<V*>(half + kRowReduceValueFloats * warps * static_cast<int>(threadIdx.y));
    half_ ^= 1;
    const int lane = threadIdx.x % kWarpSize;
    if (lane == 0) row[threadIdx.x / kWarpSize] = v;
    __syncthreads();
    // Every aligned group of `width` lanes (warps rounded up to a power of two) holds the row's partials, the
    // identity past the last, and reduces them by shuffles: every thread gets the total in log2(warps) steps.
    const int width = 1 << (32 - __clz(warps - 1));
    const int slot = lane & (width - 1);
    v = slot < warps ? row[slot] : Op::identity();
    return warp_reduce<Op>(v, width);
  }

 private:
  int group_;
  float* scratch_;
  int half_ = 0;
};

}  // namespace kernelkit::cuda

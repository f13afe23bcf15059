// The one reduction (sum or max) of a float over the `group` threads that share a row.
// Layout: threadIdx.x in [0, group) indexes within a row, threadIdx.y picks the row of the block. `group` is a power of
// two up to 32 (rows packed in a warp, reduced by shuffles alone) or a multiple of 32 (one row spans warps: shuffles,
// then one float per warp through shared memory). Every thread of the block must call it (it may __syncthreads), and
// every thread gets the row's total.
#pragma once

namespace kernelkit::cuda {

constexpr int kWarpSize = 32;

struct SumOp {
  static __device__ __forceinline__ float identity() { return 0.0f; }
  static __device__ __forceinline__ float apply(float a, float b) { return a + b; }
};
struct MaxOp {
  static __device__ __forceinline__ float identity() { return -INFINITY; }
  static __device__ __forceinline__ float apply(float a, float b) { return fmaxf(a, b); }
};

// `scratch`: blockDim.y * (group / 32) floats of shared memory when group > 32; unused otherwise.
template <typename Op>
__device__ __forceinline__ float group_reduce(float v, int group, float* scratch) {
  const int width = group < kWarpSize ? group : kWarpSize;
  // xor offsets below `width` stay inside an aligned group of `width` lanes, so packed rows never mix.
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1)
    if (offset < width) v = Op::apply(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if (group <= kWarpSize) return v;
  const int warps = group / kWarpSize;
  float* row_scratch = scratch + threadIdx.y * warps;
  if (threadIdx.x % kWarpSize == 0) row_scratch[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  v = Op::identity();
  for (int w = 0; w < warps; ++w) v = Op::apply(v, row_scratch[w]);  // same order everywhere: identical totals
  __syncthreads();  // scratch is reused by the next reduction
  return v;
}

__device__ __forceinline__ float group_sum(float v, int group, float* scratch) {
  return group_reduce<SumOp>(v, group, scratch);
}
__device__ __forceinline__ float group_max(float v, int group, float* scratch) {
  return group_reduce<MaxOp>(v, group, scratch);
}

}  // namespace kernelkit::cuda

// softmax / causal_softmax: one kernel template over (storage type, vector width, causal).
//
// Per row of s_k elements: bytes = E * s_k * (read + write) (+ one re-read of the row, mostly from L2), ~5 FLOP per
// element: memory-bound. Work split as the row norms (block = threads_per_row x rows_per_block, a grid-stride loop over
// row groups). Statistics in one pass over the row: each thread keeps an online (max, sum of exp) pair; the row's
// max is reduced first, then the sums rescaled to it: sum = sum_i s_i exp(m_i - max). The output pass re-reads x.
// Fully masked or all -inf rows give zeros (max = -inf is tested, never exp(-inf - -inf)).
#pragma once

#include <cuda_runtime.h>

#include "core/softmax.hpp"
#include "cuda/common/check.cuh"
#include "cuda/common/dispatch.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/common/vec.cuh"
#include "kernelkit/planner.hpp"

namespace kernelkit::cuda {

template <typename T>
struct SoftmaxParams {
  T* out;          // [rows, s_k], row stride out_stride
  const T* x;      // [rows, s_k], row stride x_stride
  int64_t rows, hidden, out_stride, x_stride, s_q;
  float scale;
};

template <typename T, int VEC, bool kCausal>
__global__ void __launch_bounds__(kRowNormMaxThreads) softmax_kernel(const SoftmaxParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    using V = Vec<T, VEC>;
    extern __shared__ __align__(16) unsigned char smem[];
    float* scratch = reinterpret_cast<float*>(smem);
    const int tpr = blockDim.x, tx = threadIdx.x;
    const int nvec = static_cast<int>(p.hidden / VEC);
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.y; base < p.rows; base += step) {
      const int64_t row = base + threadIdx.y;
      const bool active = row < p.rows;
      const T* xr = p.x + row * p.x_stride;
      // Last visible key of this row (every key when not causal).
      const int64_t limit = kCausal ? row % p.s_q + p.hidden - p.s_q : p.hidden - 1;
      auto value = [&](float x, int64_t col) { return kCausal && col > limit ? -INFINITY : x * p.scale; };

      float m = -INFINITY, s = 0.0f;  // online: running max and sum of exp(v - m) of this thread's elements
      if (active) {
#pragma unroll 4
        for (int i = tx; i < nvec; i += tpr) {
          const V in = V::load(xr + static_cast<int64_t>(i) * VEC);
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            const float v = value(to_float(in.v[j]), static_cast<int64_t>(i) * VEC + j);
            if (v == -INFINITY) continue;
            if (v > m) {
              s = s * expf(m - v) + 1.0f;  // m = -inf at first: exp(-inf) = 0
              m = v;
            } else {
              s += expf(v - m);
            }
          }
        }
      }
      const float row_max = group_max(m, tpr, scratch);
      const float row_sum = group_sum(m == -INFINITY ? 0.0f : s * expf(m - row_max), tpr, scratch);
      const float inv = row_max == -INFINITY ? 0.0f : 1.0f / row_sum;

      if (active) {
        T* outr = p.out + row * p.out_stride;
#pragma unroll 2
        for (int i = tx; i < nvec; i += tpr) {
          const V in = V::load(xr + static_cast<int64_t>(i) * VEC);
          float y[VEC];
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            const float v = value(to_float(in.v[j]), static_cast<int64_t>(i) * VEC + j);
            y[j] = v == -INFINITY ? 0.0f : expf(v - row_max) * inv;
          }
          store_rounded<T, VEC>(outr + static_cast<int64_t>(i) * VEC, y);
        }
      }
    }
  }
}

template <typename T>
Status launch_softmax(const detail::SoftmaxArgs& a, const LaunchPlan& plan, cudaStream_t stream) {
  const SoftmaxParams<T> p{static_cast<T*>(a.out), static_cast<const T*>(a.x), a.rows, a.hidden, a.out_stride,
                           a.x_stride, a.s_q, a.scale};
  return dispatch_vec<16 / sizeof(T)>(plan.vec, [&](auto vec) -> Status {
    constexpr int V = decltype(vec)::value;
    auto kernel = a.causal ? softmax_kernel<T, V, true> : softmax_kernel<T, V, false>;
    kernel<<<grid_of(plan), block_of(plan), static_cast<size_t>(plan.smem_bytes), stream>>>(p);
    KK_CUDA_RETURN(cudaGetLastError());
    return Status::Ok();
  });
}

}  // namespace kernelkit::cuda

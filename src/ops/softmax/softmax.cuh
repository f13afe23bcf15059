// softmax / causal_softmax: one kernel template over (storage type, vector width, causal).
//
// Per row of s_k elements: bytes = E * s_k * (read + write), ~5 FLOP per element: memory-bound. Work split as the
// row norms (block = threads_per_row x rows_per_block, a grid-stride loop over row groups). Rows that fit a block are
// read once into registers; longer rows gather (max, sum of exp) online in one pass — each thread keeps a running
// pair, the row's max is reduced first, then the sums rescaled to it: sum = sum_i s_i exp(m_i - max) — and re-read x
// for the output. Fully masked or all -inf rows give zeros (max = -inf is tested, never exp(-inf - -inf)).
#pragma once

#include <cuda_runtime.h>

#include "ops/softmax/softmax.hpp"
#include "kernels/common/async_copy.cuh"
#include "kernels/common/check.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/vec.cuh"
#include "kernelkit/planner.hpp"
#include "runtime/plan_rules.hpp"

namespace kernelkit::cuda {

constexpr int kSoftmaxCachedVecs = kRowVecsPerThread;  // the planner's vectors per thread for rows that fit a block

template <typename T>
struct SoftmaxParams {
  T* out;          // [rows, s_k], row stride out_stride
  const T* x;      // [rows, s_k], row stride x_stride
  int64_t rows, hidden, out_stride, x_stride, s_q;
  float scale;
  int64_t stage_offset;  // bytes of reduction scratch before the stages (kStaged)
};

// kCached > 0: each thread keeps its (at most kCached) vectors of the row in registers, so the row is read once: max,
// then the sum of exponentials, then the output, all from registers. kCached = 0 (rows longer than a block can hold):
// the statistics come from one online pass and the output pass re-reads the row.
// kStaged (with kCached; the planner's `cached` plan, KERNELKIT_TUNE softmax_stage=1): the rows reach the registers
// through two shared-memory stages filled by cp.async, the next row group streaming in while this one is reduced, as
// the norm kernels do. Each thread copies and reads only its own slots, so the stages need no barrier.
// Math in the log2 domain: v = x * scale * log2(e), p = exp2(v - max) (one FFMA + EX2 per element).
template <typename T, int VEC, int kCached, bool kCausal, bool kStaged = false>
__global__ void __launch_bounds__(kRowNormMaxThreads) softmax_kernel(const SoftmaxParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    using V = Vec<T, VEC>;
    extern __shared__ __align__(16) unsigned char smem[];
    float* scratch = reinterpret_cast<float*>(smem);
    const int tpr = blockDim.x, tx = threadIdx.x;
    const int nvec = static_cast<int>(p.hidden / VEC);
    const float scale2 = p.scale * 1.4426950408889634f;  // log2(e)
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
    // kStaged: stage s holds the block's rows [rows_per_block][nvec]; prefetch(row, s) issues this thread's copies of
    // `row` (nothing past the last row) into it and commits them as one group.
    V* stages = reinterpret_cast<V*>(smem + p.stage_offset);
    auto stage = [&](int s) { return stages + static_cast<int64_t>(s * blockDim.y + threadIdx.y) * nvec; };
    auto prefetch = [&](int64_t row, int s) {
      if (row < p.rows) {
        V* dst = stage(s);
#pragma unroll
        for (int c = 0; c < kCached; ++c) {
          const int i = tx + c * tpr;
          if (i < nvec) copy_async<sizeof(V)>(dst + i, p.x + row * p.x_stride + static_cast<int64_t>(i) * VEC);
        }
      }
      cp_async_commit();
    };
    int s = 0;
    if constexpr (kStaged) prefetch(static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y, 0);
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.y; base < p.rows; base += step, s ^= 1) {
      const int64_t row = base + threadIdx.y;
      if constexpr (kStaged) {
        prefetch(row + step, s ^ 1);  // the next row group streams in while this one is processed
        cp_async_wait<1>();           // this thread's copies of the current row have landed
      }
      const bool active = row < p.rows;
      const T* xr = p.x + row * p.x_stride;
      T* outr = p.out + row * p.out_stride;
      // Last visible key of this row (every key when not causal).
      const int64_t limit = kCausal ? row % p.s_q + p.hidden - p.s_q : p.hidden - 1;
      auto value = [&](float x, int i, int j) {
        return kCausal && static_cast<int64_t>(i) * VEC + j > limit ? -INFINITY : x * scale2;
      };
      // Writes vector i of the row from its loaded values, given the row's max and 1 / sum.
      auto write = [&](const V& in, int i, float row_max, float inv) {
        float y[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float v = value(to_float(in.v[j]), i, j);
          y[j] = v == -INFINITY ? 0.0f : exp2f(v - row_max) * inv;
        }
        store_rounded<T, VEC>(outr + static_cast<int64_t>(i) * VEC, y);
      };

      if constexpr (kCached > 0) {
        V in[kCached];
        float m = -INFINITY;
#pragma unroll
        for (int c = 0; c < kCached; ++c) {
          const int i = tx + c * tpr;
          if (active && i < nvec) {
            if constexpr (kStaged) in[c] = stage(s)[i];
            else in[c] = V::load(xr + static_cast<int64_t>(i) * VEC);
#pragma unroll
            for (int j = 0; j < VEC; ++j) m = fmaxf(m, value(to_float(in[c].v[j]), i, j));
          }
        }
        const float row_max = group_max(m, tpr, scratch);
        float s = 0.0f;
#pragma unroll
        for (int c = 0; c < kCached; ++c) {
          const int i = tx + c * tpr;
          if (active && i < nvec)
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
              const float v = value(to_float(in[c].v[j]), i, j);
              s += v == -INFINITY ? 0.0f : exp2f(v - row_max);
            }
        }
        const float row_sum = group_sum(s, tpr, scratch);
        const float inv = row_max == -INFINITY ? 0.0f : 1.0f / row_sum;
#pragma unroll
        for (int c = 0; c < kCached; ++c) {
          const int i = tx + c * tpr;
          if (active && i < nvec) write(in[c], i, row_max, inv);
        }
      } else {
        float m = -INFINITY, s = 0.0f;  // online: running max and sum of exp2(v - m) of this thread's elements
        if (active) {
#pragma unroll 4
          for (int i = tx; i < nvec; i += tpr) {
            const V in = V::load(xr + static_cast<int64_t>(i) * VEC);
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
              const float v = value(to_float(in.v[j]), i, j);
              if (v == -INFINITY) continue;
              if (v > m) {
                s = s * exp2f(m - v) + 1.0f;  // m = -inf at first: exp2(-inf) = 0
                m = v;
              } else {
                s += exp2f(v - m);
              }
            }
          }
        }
        const float row_max = group_max(m, tpr, scratch);
        const float row_sum = group_sum(m == -INFINITY ? 0.0f : s * exp2f(m - row_max), tpr, scratch);
        const float inv = row_max == -INFINITY ? 0.0f : 1.0f / row_sum;
        if (active) {
#pragma unroll 2
          for (int i = tx; i < nvec; i += tpr) write(V::load(xr + static_cast<int64_t>(i) * VEC), i, row_max, inv);
        }
      }
    }
    if constexpr (kStaged) cp_async_wait<0>();  // no copy may outlive the block (the last group is empty)
  }
}

template <typename T>
Status launch_softmax(const detail::SoftmaxArgs& a, const LaunchPlan& plan, cudaStream_t stream) {
  const SoftmaxParams<T> p{static_cast<T*>(a.out), static_cast<const T*>(a.x), a.rows, a.hidden, a.out_stride,
                           a.x_stride, a.s_q, a.scale, plan.stage_offset};
  return dispatch_vec<16 / sizeof(T)>(plan.vec, [&](auto vec) -> Status {
    constexpr int V = decltype(vec)::value;
    // Rows held in registers whenever the plan gives each thread at most kSoftmaxCachedVecs vectors (every row up
    // to 1024 threads x kSoftmaxCachedVecs vectors); longer rows take the online, re-reading kernel.
    const bool cached = plan.vecs_per_thread <= kSoftmaxCachedVecs;
    auto kernel = cached ? (plan.cached ? (a.causal ? softmax_kernel<T, V, kSoftmaxCachedVecs, true, true>
                                                    : softmax_kernel<T, V, kSoftmaxCachedVecs, false, true>)
                                        : (a.causal ? softmax_kernel<T, V, kSoftmaxCachedVecs, true>
                                                    : softmax_kernel<T, V, kSoftmaxCachedVecs, false>))
                         : (a.causal ? softmax_kernel<T, V, 0, true> : softmax_kernel<T, V, 0, false>);
    if (plan.smem_optin)
      KK_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(plan.smem_bytes)));
    kernel<<<grid_of(plan), block_of(plan), static_cast<size_t>(plan.smem_bytes), stream>>>(p);
    KK_CUDA_RETURN(cudaGetLastError());
    return Status::Ok();
  });
}

}  // namespace kernelkit::cuda

// softmax / causal_softmax: one kernel template over (storage type, vector width, causal).
//
// Per row of s_k elements: bytes = E * s_k * (read + write), ~5 FLOP per element: memory-bound. Work split as the
// row norms (block = threads_per_row x rows_per_block, a grid-stride loop over row groups). Rows that fit a block are
// read once into registers: the row's max, then its sum of exponentials, two reductions. Longer rows reduce each
// thread's elements online to a (max, sum of exp) pair in one pass, combine the pairs in one reduction
// (sum_i s_i exp(m_i - max)), and re-read x for the output. Rows of whole warps at 2 vectors a thread, one a block
// (the plan's `lean`, the default there), run held_softmax_kernel: the same math, straight-line reductions. Fully
// masked or all -inf rows give zeros (max = -inf is tested, never exp(-inf - -inf)).
#pragma once

#include <cuda_runtime.h>

#include "kernelkit/planner.hpp"
#include "kernels/common/async_copy.cuh"
#include "kernels/common/check.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/fast_math.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/vec.cuh"
#include "ops/softmax/softmax.hpp"
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

// Softmax statistics of a set of exp2-domain values v: their max and the sum of exp2(v - max). Two sets combine by
// rescaling each sum to the larger max; an empty set (or one of only -inf) is (-inf, 0). apply is commutative to
// the bit (the products are kept out of an FMA), so every lane of a shuffle tree gets the same total.
struct MaxSum {
  float max, sum;
};
struct MaxSumOp {
  using Value = MaxSum;
  static __device__ __forceinline__ MaxSum identity() { return {-INFINITY, 0.0f}; }
  static __device__ __forceinline__ MaxSum apply(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.max, b.max);
    if (m == -INFINITY) return {m, 0.0f};
    return {m, __fmul_rn(a.sum, exp2_ftz(a.max - m)) + __fmul_rn(b.sum, exp2_ftz(b.max - m))};
  }
};

// kCached > 0: each thread keeps its (at most kCached) vectors of the row in registers, so the row is read once: the
// row's max (a reduction), the exponentials and their sum (a second), then the output, all from registers. kCached = 0
// (rows longer than a block can hold): the pair comes from one online pass and the output pass re-reads the row.
// kStaged (with kCached; the planner's `cached` plan, KERNELKIT_TUNE softmax_stage=1): the rows reach the registers
// through two shared-memory stages filled by cp.async, the next row group streaming in while this one is reduced, as
// the norm kernels do. Each thread copies and reads only its own slots, so the stages need no barrier.
// Math in the log2 domain: exp(scale x - max) = exp2(x scale log2(e) - max'), one FFMA and one MUFU.EX2 an element.
template <typename T, int VEC, int kCached, bool kCausal, bool kStaged = false>
__global__ void __launch_bounds__(kRowNormMaxThreads) softmax_kernel(const SoftmaxParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    using V = Vec<T, VEC>;
    extern __shared__ __align__(16) unsigned char smem[];
    const int tpr = blockDim.x, tx = threadIdx.x;
    RowReducer reducer(tpr, reinterpret_cast<float*>(smem));
    const int nvec = static_cast<int>(p.hidden / VEC);
    const float scale2 = p.scale * kLog2e;
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
    // kStaged: stage st holds the block's rows [rows_per_block][nvec]; prefetch(row, st) issues this thread's copies
    // of `row` (nothing past the last row) into it and commits them as one group.
    V* stages = reinterpret_cast<V*>(smem + p.stage_offset);
    auto stage = [&](int st) { return stages + static_cast<int64_t>(st * blockDim.y + threadIdx.y) * nvec; };
    auto prefetch = [&](int64_t row, int st) {
      if (row < p.rows) {
        V* dst = stage(st);
#pragma unroll
        for (int c = 0; c < kCached; ++c) {
          const int i = tx + c * tpr;
          if (i < nvec) copy_async<sizeof(V)>(dst + i, p.x + row * p.x_stride + static_cast<int64_t>(i) * VEC);
        }
      }
      cp_async_commit();
    };
    int st = 0;
    if constexpr (kStaged) prefetch(static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y, 0);
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.y; base < p.rows; base += step, st ^= 1) {
      const int64_t row = base + threadIdx.y;
      if constexpr (kStaged) {
        prefetch(row + step, st ^ 1);  // the next row group streams in while this one is processed
        cp_async_wait<1>();            // this thread's copies of the current row have landed
      }
      const bool active = row < p.rows;
      const T* xr = p.x + row * p.x_stride;
      T* outr = p.out + row * p.out_stride;
      // Last visible key of this row (every key when not causal).
      const int64_t limit = kCausal ? row % p.s_q + p.hidden - p.s_q : p.hidden - 1;
      // Element j of vector i in the exp2 domain, less `shift` (one FFMA); -inf where the causal mask hides it.
      auto logit = [&](float x, int i, int j, float shift) {
        return kCausal && static_cast<int64_t>(i) * VEC + j > limit ? -INFINITY : fmaf(x, scale2, -shift);
      };
      if constexpr (kCached > 0) {
        // The row in registers as exp2-domain floats; the row's max (one reduction), then exp2(v - max) in place and
        // the row's sum (a second): one conversion, one EX2 and a handful of FP32 instructions an element. Two plain
        // reductions (a shuffle and one FMNMX or FADD a step) cost far fewer instructions than one of (max, sum)
        // pairs (a rescale with two EX2 a step), and this kernel issues at the rate HBM delivers: at 2 vectors a
        // thread the pair reduction was a third of its instructions.
        float v[kCached][VEC];
        float m = -INFINITY;
#pragma unroll
        for (int c = 0; c < kCached; ++c) {
          const int i = tx + c * tpr;
          if (active && i < nvec) {
            float f[VEC];
            to_floats(kStaged ? stage(st)[i] : V::load(xr + static_cast<int64_t>(i) * VEC), f);
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
              v[c][j] = logit(f[j], i, j, 0.0f);
              m = fmaxf(m, v[c][j]);
            }
          }
        }
        const float row_max = reducer.reduce<MaxOp>(m);
        const float shift = row_max == -INFINITY ? 0.0f : row_max;  // an empty row sums exp2(-inf) = 0
        float sum = 0.0f;
#pragma unroll
        for (int c = 0; c < kCached; ++c) {
          const int i = tx + c * tpr;
          if (active && i < nvec)
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
              v[c][j] = exp2_ftz(v[c][j] - shift);
              sum += v[c][j];
            }
        }
        const float row_sum = reducer.reduce<SumOp>(sum);
        const float inv = row_max == -INFINITY ? 0.0f : 1.0f / row_sum;  // an empty row writes zeros
#pragma unroll
        for (int c = 0; c < kCached; ++c) {
          const int i = tx + c * tpr;
          if (active && i < nvec) {
            float y[VEC];
#pragma unroll
            for (int j = 0; j < VEC; ++j) y[j] = v[c][j] * inv;
            store_rounded<T, VEC>(outr + static_cast<int64_t>(i) * VEC, y);
          }
        }
      } else {
        MaxSum mine{-INFINITY, 0.0f};  // online: running max and sum of exp2(v - max) of this thread's elements
        if (active) {
#pragma unroll 4
          for (int i = tx; i < nvec; i += tpr) {
            const V in = V::load(xr + static_cast<int64_t>(i) * VEC);
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
              const float v = logit(to_float(in.v[j]), i, j, 0.0f);
              if (v == -INFINITY) continue;  // adds nothing (and -inf - -inf would be NaN while max is -inf)
              if (v > mine.max) {
                mine.sum = mine.sum * exp2_ftz(mine.max - v) + 1.0f;  // max = -inf at first: exp2(-inf) = 0
                mine.max = v;
              } else {
                mine.sum += exp2_ftz(v - mine.max);
              }
            }
          }
        }
        const MaxSum stats = reducer.reduce<MaxSumOp>(mine);
        // An empty row (all masked or -inf) has max -inf and writes zeros: exp2(-inf - 0) * 0.
        const float shift = stats.max == -INFINITY ? 0.0f : stats.max;
        const float inv = stats.max == -INFINITY ? 0.0f : 1.0f / stats.sum;
        if (active) {
#pragma unroll 2
          for (int i = tx; i < nvec; i += tpr) {
            const V in = V::load(xr + static_cast<int64_t>(i) * VEC);
            float y[VEC];
#pragma unroll
            for (int j = 0; j < VEC; ++j) y[j] = exp2_ftz(logit(to_float(in.v[j]), i, j, shift)) * inv;
            store_rounded<T, VEC>(outr + static_cast<int64_t>(i) * VEC, y);
          }
        }
      }
    }
    if constexpr (kStaged) cp_async_wait<0>();  // no copy may outlive the block (the last group is empty)
  }
}

// The lean held softmax (LaunchPlan::lean, KERNELKIT_TUNE rows_lean): one row a block of whole warps (blockDim =
// (threads_per_row, 1)), at most 2 vectors a thread loaded at once, the max and the sum each one straight-line block
// reduction with its own scratch (one barrier each), no row loop: the held path of softmax_kernel without its
// runtime-width reductions and row loop (see held_row_kernel).
template <typename T, int VEC, bool kCausal>
__global__ void __launch_bounds__(kRowHeldMaxThreads) held_softmax_kernel(const SoftmaxParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    using V = Vec<T, VEC>;
    constexpr int kVecs = kRowHeldVecs;  // the plan's vectors a thread (planner: at most this many)
    __shared__ float maxes[kRowHeldMaxThreads / kWarpSize], sums[kRowHeldMaxThreads / kWarpSize];
    const int tx = threadIdx.x, tpr = blockDim.x;
    const int nvec = static_cast<int>(p.hidden / VEC);
    const int64_t row = blockIdx.x;
    const T* xr = p.x + row * p.x_stride;
    V in[kVecs];
#pragma unroll
    for (int c = 0; c < kVecs; ++c)
      if (tx + c * tpr < nvec) in[c] = V::load(xr + static_cast<int64_t>(tx + c * tpr) * VEC);
    const float scale2 = p.scale * kLog2e;
    const int64_t limit = kCausal ? row % p.s_q + p.hidden - p.s_q : p.hidden - 1;  // last visible key
    float v[kVecs][VEC];
    float m = -INFINITY;
#pragma unroll
    for (int c = 0; c < kVecs; ++c) {
      const int i = tx + c * tpr;
      float f[VEC];
      if (i < nvec) to_floats(in[c], f);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        v[c][j] = i >= nvec || (kCausal && static_cast<int64_t>(i) * VEC + j > limit) ? -INFINITY : f[j] * scale2;
        m = fmaxf(m, v[c][j]);
      }
    }
    const float row_max = block_reduce_fresh<MaxOp>(m, maxes);
    const float shift = row_max == -INFINITY ? 0.0f : row_max;  // an empty row sums exp2(-inf) = 0
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < kVecs; ++c)
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        v[c][j] = exp2_ftz(v[c][j] - shift);
        sum += v[c][j];
      }
    const float row_sum = block_reduce_fresh<SumOp>(sum, sums);
    const float inv = row_max == -INFINITY ? 0.0f : 1.0f / row_sum;  // an empty row writes zeros
    T* outr = p.out + row * p.out_stride;
#pragma unroll
    for (int c = 0; c < kVecs; ++c) {
      const int i = tx + c * tpr;
      if (i < nvec) {
        float y[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) y[j] = v[c][j] * inv;
        store_rounded<T, VEC>(outr + static_cast<int64_t>(i) * VEC, y);
      }
    }
  }
}

// The one place a plan maps to its kernel: calls f(kernel) with the instantiation for (vector width, rows held in
// registers or not, staged or not, causal). Rows are held in registers whenever the plan gives each thread at most
// kSoftmaxCachedVecs vectors (every row up to 1024 threads x kSoftmaxCachedVecs vectors), in a kernel sized for 2
// vectors when the plan needs no more (16 fewer fp32 registers a thread: more resident blocks); longer rows take the
// online, re-reading kernel.
template <typename T, typename F>
Status with_softmax_kernel(bool causal, const LaunchPlan& plan, F&& f) {
  return dispatch_vec<16 / sizeof(T)>(plan.vec, [&](auto vec) -> Status {
    constexpr int V = decltype(vec)::value;
    auto held = [&](auto vecs) {
      constexpr int C = decltype(vecs)::value;
      return plan.cached ? (causal ? softmax_kernel<T, V, C, true, true> : softmax_kernel<T, V, C, false, true>)
                         : (causal ? softmax_kernel<T, V, C, true> : softmax_kernel<T, V, C, false>);
    };
    if (plan.lean > 0) {
      if constexpr (V == 16 / sizeof(T))
        return f(causal ? held_softmax_kernel<T, V, true> : held_softmax_kernel<T, V, false>);
      return Status(StatusCode::internal, "no lean softmax kernel for this plan");
    }
    auto kernel = plan.vecs_per_thread <= 2 ? held(std::integral_constant<int, 2>{})
                  : plan.vecs_per_thread <= kSoftmaxCachedVecs
                      ? held(std::integral_constant<int, kSoftmaxCachedVecs>{})
                      : (causal ? softmax_kernel<T, V, 0, true> : softmax_kernel<T, V, 0, false>);
    if (plan.smem_optin)
      KK_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(plan.smem_bytes)));
    return f(kernel);
  });
}

template <typename T>
Status launch_softmax(const detail::SoftmaxArgs& a, const LaunchPlan& plan, cudaStream_t stream) {
  const SoftmaxParams<T> p{
      static_cast<T*>(a.out), static_cast<const T*>(a.x), a.rows, a.hidden, a.out_stride, a.x_stride, a.s_q, a.scale,
      plan.stage_offset};
  return with_softmax_kernel<T>(a.causal, plan, [&](auto kernel) -> Status {
    kernel<<<grid_of(plan), block_of(plan), static_cast<size_t>(plan.smem_bytes), stream>>>(p);
    KK_CUDA_RETURN(cudaGetLastError());
    return Status::Ok();
  });
}

// Resident blocks per SM of the planned kernel, as the runtime computes it (registers included).
template <typename T>
Status softmax_occupancy(bool causal, const LaunchPlan& plan, int* blocks) {
  return with_softmax_kernel<T>(causal, plan, [&](auto kernel) -> Status {
    KK_CUDA_RETURN(cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, plan.block_threads,
                                                                 static_cast<size_t>(plan.smem_bytes)));
    return Status::Ok();
  });
}

}  // namespace kernelkit::cuda

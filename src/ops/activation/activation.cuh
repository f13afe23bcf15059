// The activation family: gelu, gelu_tanh, silu and their gated forms (act(a) * b) as one kernel template over
// (storage type, vector width, activation functor, gated).
//
// Per output element (E = sizeof(T)): bytes = E x (1 or 2 reads + 1 write), FLOPs ~4-11 (op_info.cpp): memory-bound on
// every GPU, so the kernel is a streaming loop: 16-byte accesses, each thread issuing kElementwiseVecsPerThread loads
// (per input) before using any, over the planner's grid (kActivationWaves: by default a block a row group, so a thread
// visits one row unless the rows outnumber the grid's 65535 rows of blocks). kOneRow (the plan's one vector a thread,
// kActivationOneRow): a 1-D grid with a block for every (row group, column block), so the loop runs once; the kernel
// then loads one row and holds fewer registers (kElementwiseOneRowMinBlocks blocks an SM).
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "ops/activation/activation.hpp"
#include "kernels/common/activations.cuh"
#include "kernels/common/check.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/vec.cuh"
#include "kernelkit/planner.hpp"
#include "runtime/plan_rules.hpp"

namespace kernelkit::cuda {

template <typename T>
struct ActivationParams {
  T* out;          // [rows, d], row stride out_stride
  const T* a;      // [rows, d] activated input
  const T* b;      // [rows, d] multiplier (gated)
  int64_t rows, d;
  int64_t out_stride, a_stride, b_stride;
};

// __launch_bounds__'s minimum of resident blocks: the one-row form's kElementwiseOneRowMinBlocks where the SM holds
// them (sm_75's 1024 threads hold 4 such blocks: the bound is evaluated per target), else kElementwiseMinBlocks.
template <bool kOneRow>
constexpr int activation_min_blocks() {
  constexpr bool fits = kElementwiseOneRowMinBlocks * kElementwiseThreads <= KK_DEVICE_MAX_THREADS_PER_SM;
  return kOneRow && fits ? kElementwiseOneRowMinBlocks : kElementwiseMinBlocks;
}

template <typename T, int VEC, typename Act, bool kGated, bool kOneRow>
__global__ void __launch_bounds__(kElementwiseThreads, activation_min_blocks<kOneRow>())
    activation_kernel(const ActivationParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    using V = Vec<T, VEC>;
    // Rows per step: gated forms load two inputs per row, so they take half as many rows and keep the same number of
    // 16-byte loads in flight (and within the 64-register budget: twice as many spilled to local memory).
    constexpr int K = kOneRow ? 1 : kGated ? kElementwiseVecsPerThread / 2 : kElementwiseVecsPerThread;
    // Looping form, 2-D grid (planner): this thread owns one column vector of every row it visits, so no index
    // division; rows advance by row_step, K rows per step with all loads issued before any use. One-row form, 1-D
    // grid of (row group, column block) pairs, so that more than 65535 row groups still get a block each.
    int64_t col_block = blockIdx.x, row_group = blockIdx.y;
    if constexpr (kOneRow) {
      const unsigned col_blocks = (static_cast<unsigned>(p.d / VEC) + blockDim.x - 1) / blockDim.x;
      row_group = blockIdx.x / col_blocks;
      col_block = blockIdx.x - row_group * col_blocks;
    }
    const int64_t col = (col_block * blockDim.x + threadIdx.x) * VEC;
    if (col >= p.d) return;
    const int64_t row_step = static_cast<int64_t>(gridDim.y) * blockDim.y;
    for (int64_t r0 = row_group * blockDim.y + threadIdx.y; r0 < p.rows; r0 += K * row_step) {
      V a[K], b[K];
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t r = r0 + k * row_step;
        if (r < p.rows) {
          a[k] = V::load(p.a + r * p.a_stride + col);
          if constexpr (kGated) b[k] = V::load(p.b + r * p.b_stride + col);
        }
      }
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t r = r0 + k * row_step;
        if (r >= p.rows) break;
        // bf16 pairs convert per 32-bit word (to_floats): one integer instruction an element.
        float y[VEC], m[VEC];
        to_floats(a[k], y);
        if constexpr (kGated) to_floats(b[k], m);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          y[j] = Act::template apply<kFastMath<T>>(y[j]);
          if constexpr (kGated) y[j] *= m[j];
        }
        store_rounded<T, VEC>(p.out + r * p.out_stride + col, y);
      }
      if constexpr (kOneRow) break;  // the grid's rows of blocks cover every row group
    }
  }
}

template <typename T>
Status launch_activation(const detail::ElementwiseArgs& a, const LaunchPlan& plan, cudaStream_t stream) {
  const ActivationParams<T> p{static_cast<T*>(a.out), static_cast<const T*>(a.a), static_cast<const T*>(a.b),
                              a.rows, a.hidden, a.out_stride, a.a_stride, a.b_stride};
  return dispatch_vec<16 / sizeof(T)>(plan.vec, [&](auto vec) -> Status {
    constexpr int V = decltype(vec)::value;
    return dispatch_activation(a.act, [&](auto act) -> Status {
      using Act = decltype(act);
      auto form = [&](auto one_row) {
        constexpr bool kOneRow = decltype(one_row)::value;
        return a.gated ? activation_kernel<T, V, Act, true, kOneRow> : activation_kernel<T, V, Act, false, kOneRow>;
      };
      const bool one_row = plan.vecs_per_thread == 1;  // the one-row form's plan (plan_elementwise)
      auto kernel = one_row ? form(std::true_type{}) : form(std::false_type{});
      const dim3 grid = one_row ? dim3(static_cast<unsigned>(plan.grid)) : grid_of(plan);
      kernel<<<grid, block_of(plan), 0, stream>>>(p);
      KK_CUDA_RETURN(cudaGetLastError());
      return Status::Ok();
    });
  });
}

}  // namespace kernelkit::cuda

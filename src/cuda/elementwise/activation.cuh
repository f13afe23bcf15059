// The activation family: gelu, gelu_tanh, silu and their gated forms (act(a) * b) as one kernel template over
// (storage type, vector width, activation functor, gated).
//
// Per output element (E = sizeof(T)): bytes = E x (1 or 2 reads + 1 write), FLOPs ~4-11 (op_info.cpp): memory-bound on
// every GPU, so the kernel is a streaming loop: 16-byte accesses, each thread issuing kElementwiseVecsPerThread loads
// (per input) before using any, over a grid of at most one wave of resident blocks.
#pragma once

#include <cuda_runtime.h>

#include "core/elementwise.hpp"
#include "cuda/common/activations.cuh"
#include "cuda/common/check.cuh"
#include "cuda/common/dispatch.cuh"
#include "cuda/common/vec.cuh"
#include "kernelkit/planner.hpp"

namespace kernelkit::cuda {

template <typename T>
struct ActivationParams {
  T* out;          // [rows, d], row stride out_stride
  const T* a;      // [rows, d] activated input
  const T* b;      // [rows, d] multiplier (gated)
  int64_t rows, d;
  int64_t out_stride, a_stride, b_stride;
};

template <typename T, int VEC, typename Act, bool kGated>
__global__ void __launch_bounds__(kElementwiseThreads, kElementwiseMinBlocks)
    activation_kernel(const ActivationParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    using V = Vec<T, VEC>;
    constexpr int K = kElementwiseVecsPerThread;
    const int64_t per_row = p.d / VEC;  // VEC divides d (planner)
    const int64_t total = p.rows * per_row;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; base < total; base += K * stride) {
      V a[K], b[K];
      int64_t row[K], col[K];
#pragma unroll
      for (int k = 0; k < K; ++k) {  // all loads first: K (or 2K) independent accesses in flight per thread
        const int64_t i = base + k * stride;
        if (i < total) {
          row[k] = i / per_row;
          col[k] = (i - row[k] * per_row) * VEC;
          a[k] = V::load(p.a + row[k] * p.a_stride + col[k]);
          if constexpr (kGated) b[k] = V::load(p.b + row[k] * p.b_stride + col[k]);
        }
      }
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (base + k * stride >= total) break;
        float y[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          y[j] = Act::apply(to_float(a[k].v[j]));
          if constexpr (kGated) y[j] *= to_float(b[k].v[j]);
        }
        store_rounded<T, VEC>(p.out + row[k] * p.out_stride + col[k], y);
      }
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
      auto kernel = a.gated ? activation_kernel<T, V, Act, true> : activation_kernel<T, V, Act, false>;
      kernel<<<static_cast<unsigned>(plan.grid), plan.block_threads, 0, stream>>>(p);
      KK_CUDA_RETURN(cudaGetLastError());
      return Status::Ok();
    });
  });
}

}  // namespace kernelkit::cuda

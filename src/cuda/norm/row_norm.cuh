// The row-norm kernel family: rms_norm, fused_add_rms_norm, layer_norm, ada_layer_norm and rms_norm_gelu are one
// kernel template over (storage type, vector width, variant).
//
// Per row of `hidden` elements (E = sizeof(T)):
//   bytes  = E * hidden * (reads + writes of [rows, hidden] tensors) + parameters (op_info.cpp has the formula)
//   FLOPs  = ~4 per element for RMS, ~7 for layer norm (op_info.cpp)
// so every variant is memory-bound on every GPU: the goal is the copy ceiling, i.e. each byte moved once.
//
// Work split (planner.cpp decides, this file obeys): block = (threads_per_row, rows_per_block). Each thread holds up to
// CACHE vectors of its row in registers, so the row is read from DRAM once; the reduction pass and the output pass
// reuse those registers. Rows too long for 1024 threads' registers are split in `chunks` and re-read (from L2) per
// pass. The grid is at most one wave of resident blocks that loops over row groups.
//
// Numerics: fp32 accumulation, statistics from the cached values (layer norm: mean first, then the centred second
// moment; no E[x^2] - E[x]^2 cancellation), one rounding per output. The fused residual is rounded to T before it is
// normalized, because the residual stream stored for the next layer is what the next layer will see.
#pragma once

#include <cuda_runtime.h>

#include "core/row_norm.hpp"
#include "cuda/common/check.cuh"
#include "cuda/common/dispatch.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/common/vec.cuh"
#include "kernelkit/planner.hpp"

namespace kernelkit::cuda {

using detail::NormType;

template <typename T>
struct RowNormParams {
  T* out;                 // [rows, hidden], row stride out_stride
  const T* x;             // [rows, hidden], row stride x_stride
  T* residual;            // [rows, hidden] (fused add), row stride residual_stride
  const T* weight;        // [hidden] or null
  const T* bias;          // [hidden] or null
  const T* scale;         // [batch, hidden] or null, row stride mod_stride
  const T* shift;         // [batch, hidden] or null
  int64_t rows, hidden;
  int64_t out_stride, x_stride, residual_stride, mod_stride, rows_per_batch;
  float eps, weight_offset;
  int chunks;
};

// Which parts of the family a kernel has. Only what a variant can use is compiled in: an RMS kernel carries no bias
// or modulation code, which keeps the 16-byte path within its 64-register budget without spills.
template <NormType kNorm, bool kResidual, bool kGelu, bool kModulate>
struct RowVariant {
  static constexpr NormType norm = kNorm;
  static constexpr bool residual = kResidual;    // residual += x first (fused_add_rms_norm)
  static constexpr bool gelu = kGelu;            // tanh-GELU epilogue (rms_norm_gelu)
  static constexpr bool bias = kNorm == NormType::layer;
  static constexpr bool modulate = kModulate;    // * (1 + scale[b]) + shift[b] (ada_layer_norm)
};

__device__ __forceinline__ float gelu_tanh(float v) {
  constexpr float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
}

// The register cap (kRowNormMaxThreads threads -> at most 64 registers per thread) keeps at least half of an SM's
// threads resident, which the planner counts on (blocks_per_sm with kRowNormRegisters).
template <typename T, int VEC, typename Variant>
__global__ void __launch_bounds__(kRowNormMaxThreads) row_norm_kernel(const RowNormParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    constexpr int CACHE = row_cache_vecs(VEC, sizeof(T));
    using V = Vec<T, VEC>;
    extern __shared__ float scratch[];  // [rows_per_block][threads_per_row / 32] when a row spans warps

    // Offsets inside a row are 32-bit (hidden < 2^31 is checked on the host); only row bases are 64-bit.
    const int tpr = blockDim.x;
    const int nvec = static_cast<int>(p.hidden / VEC);  // VEC divides hidden (planner)
    const int chunk_vecs = tpr * CACHE;
    const float inv_hidden = 1.0f / static_cast<float>(p.hidden);

    // The loop bound is uniform across the block, so every thread reaches each group_sum (which may sync).
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.y; base < p.rows;
         base += static_cast<int64_t>(gridDim.x) * blockDim.y) {
      const int64_t row = base + threadIdx.y;
      const bool active = row < p.rows;
      const T* xr = p.x + row * p.x_stride;
      T* rr = Variant::residual ? p.residual + row * p.residual_stride : nullptr;
      T* outr = p.out + row * p.out_stride;

      V cache[CACHE];
      // Vector k of chunk c of this thread: coalesced across the row's threads.
      auto vec_index = [&](int c, int k) { return c * chunk_vecs + k * tpr + static_cast<int>(threadIdx.x); };
      // First touch of a chunk: read x (and the residual: add, round, write back). Later passes re-read the stored
      // value (the residual when fused: x may already be overwritten in place).
      auto load_chunk = [&](int c, bool first) {
#pragma unroll
        for (int k = 0; k < CACHE; ++k) {
          const int i = vec_index(c, k);
          if (active && i < nvec) {
            if constexpr (Variant::residual) {
              if (first) {
                const V a = V::load(xr + i * VEC);
                V r = V::load(rr + i * VEC);
#pragma unroll
                for (int j = 0; j < VEC; ++j) r.v[j] = from_float<T>(to_float(a.v[j]) + to_float(r.v[j]));
                r.store(rr + i * VEC);
                cache[k] = r;
              } else {
                cache[k] = V::load(rr + i * VEC);
              }
            } else {
              cache[k] = V::load(xr + i * VEC);
            }
          }
        }
      };
      // Sum over this thread's part of the chunk of f(x).
      auto chunk_sum = [&](int c, auto f) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < CACHE; ++k)
          if (active && vec_index(c, k) < nvec) {
#pragma unroll
            for (int j = 0; j < VEC; ++j) s += f(to_float(cache[k].v[j]));
          }
        return s;
      };

      // Pass 1: load (the only DRAM read when chunks == 1) and the first statistic.
      float mean = 0.0f;
      float acc = 0.0f;
      for (int c = 0; c < p.chunks; ++c) {
        load_chunk(c, true);
        if constexpr (Variant::norm == NormType::layer) acc += chunk_sum(c, [](float v) { return v; });
        else acc += chunk_sum(c, [](float v) { return v * v; });
      }
      acc = group_sum(acc, tpr, scratch);
      if constexpr (Variant::norm == NormType::layer) {
        mean = acc * inv_hidden;
        acc = 0.0f;
        for (int c = 0; c < p.chunks; ++c) {
          if (p.chunks > 1) load_chunk(c, false);
          acc += chunk_sum(c, [mean](float v) { return (v - mean) * (v - mean); });
        }
        acc = group_sum(acc, tpr, scratch);
      }
      const float rstd = rsqrtf(acc * inv_hidden + p.eps);

      // Pass 2: normalize, apply the affine parameters and the epilogue, round once, store.
      const int64_t mod_offset = Variant::modulate ? (row / p.rows_per_batch) * p.mod_stride : 0;
      for (int c = 0; c < p.chunks; ++c) {
        if (p.chunks > 1) load_chunk(c, false);
#pragma unroll
        for (int k = 0; k < CACHE; ++k) {
          const int i = vec_index(c, k);
          if (!active || i >= nvec) continue;
          const int col = i * VEC;
          V w, bi, sc, sh, o;
          if (p.weight) w = V::load(p.weight + col);
          if (Variant::bias && p.bias) bi = V::load(p.bias + col);
          if constexpr (Variant::modulate) {
            sc = V::load(p.scale + mod_offset + col);
            sh = V::load(p.shift + mod_offset + col);
          }
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            float y = (to_float(cache[k].v[j]) - mean) * rstd;
            if (p.weight) y *= p.weight_offset + to_float(w.v[j]);
            if (Variant::bias && p.bias) y += to_float(bi.v[j]);
            if constexpr (Variant::modulate) y = y * (1.0f + to_float(sc.v[j])) + to_float(sh.v[j]);
            if constexpr (Variant::gelu) y = gelu_tanh(y);
            o.v[j] = from_float<T>(y);
          }
          o.store(outr + col);
        }
      }
    }
  }
}

// The one place an op maps to its kernel: calls f(kernel) with the instantiation for (op, vector width).
template <typename T, typename F>
Status with_row_norm_kernel(OpId op, int vec, F&& f) {
  return dispatch_vec<16 / sizeof(T)>(vec, [&](auto v) -> Status {
    constexpr int V = decltype(v)::value;
    switch (op) {
      case OpId::rms_norm: return f(row_norm_kernel<T, V, RowVariant<NormType::rms, false, false, false>>);
      case OpId::fused_add_rms_norm: return f(row_norm_kernel<T, V, RowVariant<NormType::rms, true, false, false>>);
      case OpId::rms_norm_gelu: return f(row_norm_kernel<T, V, RowVariant<NormType::rms, false, true, false>>);
      case OpId::layer_norm: return f(row_norm_kernel<T, V, RowVariant<NormType::layer, false, false, false>>);
      case OpId::ada_layer_norm: return f(row_norm_kernel<T, V, RowVariant<NormType::layer, false, false, true>>);
    }
    return Status(StatusCode::internal, "no row-norm kernel for this op");
  });
}

// Host side: fill the parameter block and launch with the plan's geometry on the caller's stream.
template <typename T>
Status launch_row_norm(const detail::RowNormArgs& a, const LaunchPlan& plan, cudaStream_t stream) {
  RowNormParams<T> p{};
  p.out = static_cast<T*>(a.out);
  p.x = static_cast<const T*>(a.x);
  p.residual = static_cast<T*>(a.residual);
  p.weight = static_cast<const T*>(a.weight);
  p.bias = static_cast<const T*>(a.bias);
  p.scale = static_cast<const T*>(a.scale);
  p.shift = static_cast<const T*>(a.shift);
  p.rows = a.rows;
  p.hidden = a.hidden;
  p.out_stride = a.out_stride;
  p.x_stride = a.x_stride;
  p.residual_stride = a.residual_stride;
  p.mod_stride = a.mod_stride;
  p.rows_per_batch = a.rows_per_batch;
  p.eps = a.eps;
  p.weight_offset = a.weight_offset;
  p.chunks = plan.chunks;
  return with_row_norm_kernel<T>(a.op, plan.vec, [&](auto kernel) -> Status {
    if (plan.smem_optin)
      KK_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(plan.smem_bytes)));
    const dim3 block(plan.threads_per_row, plan.rows_per_block);
    kernel<<<static_cast<unsigned>(plan.grid), block, static_cast<size_t>(plan.smem_bytes), stream>>>(p);
    KK_CUDA_RETURN(cudaGetLastError());
    return Status::Ok();
  });
}

// Resident blocks per SM of the planned kernel, as the runtime computes it (registers included).
template <typename T>
Status row_norm_occupancy(OpId op, const LaunchPlan& plan, int* blocks) {
  return with_row_norm_kernel<T>(op, plan.vec, [&](auto kernel) -> Status {
    KK_CUDA_RETURN(cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, plan.block_threads,
                                                                 static_cast<size_t>(plan.smem_bytes)));
    return Status::Ok();
  });
}

}  // namespace kernelkit::cuda

// silu_and_mul_quant_int8 / _fp8: SwiGLU and the per-token (or static) quantization of its output in one pass.
//
// Per row of d outputs (E = sizeof(T)): bytes = 2 E d read, d + 4 written; ~8 FLOP an output (op_info.cpp):
// memory-bound. Work split: the row reductions' (planner.cpp's plan_rows): block = (threads_per_row, rows_per_block),
// one wave of blocks looping over row groups, thread tx of a row owning vectors tx, tx + tpr, ... of it.
//
// Numerics: y = silu(a) b in fp32, rounded to T (what silu_and_mul stores), so q and the scales are
// quantize_per_token(silu_and_mul(x)) bit for bit: the row's max |y| through the group reduction, s = max / qmax
// (IEEE division), then the codes of y / s (SpanScale). The max pass keeps each thread's y in registers (kHeld: the
// plan's `held`, rows of at most kRowVecsPerThread vectors a thread); longer rows read a and b again (mostly from L2)
// for the codes.
#pragma once

#include <cuda_runtime.h>

#include "kernelkit/planner.hpp"
#include "kernels/common/activations.cuh"
#include "kernels/common/check.cuh"
#include "kernels/common/device_check.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/vec.cuh"
#include "ops/activation/activation.hpp"
#include "ops/quant/quant.hpp"
#include "ops/quant/quant_common.cuh"
#include "runtime/device_errors.hpp"
#include "runtime/plan_rules.hpp"

namespace kernelkit::cuda {

template <typename T>
struct ActQuantParams {
  const T* a;     // [rows, d] activated half, row stride a_stride
  const T* b;     // [rows, d] multiplier half, row stride b_stride
  int8_t* q;      // [rows, d] codes, contiguous
  float* scales;  // [rows] written, or [1] read (static_scale)
  int64_t rows, d, a_stride, b_stride;
  bool static_scale;
  OpId op;
  detail::DeviceErrorRecord* err;  // where a row holding inf or NaN, or a bad static scale, is recorded
};

template <typename T, int VEC, typename Act, bool kFp8, int kHeld>
__global__ void __launch_bounds__(kRowNormMaxThreads) act_quant_kernel(const ActQuantParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    using V = Vec<T, VEC>;
    constexpr int kSlots = kHeld > 0 ? kHeld : 1;
    extern __shared__ __align__(16) unsigned char smem[];
    const int tpr = blockDim.x, tx = threadIdx.x;
    RowReducer reducer(tpr, reinterpret_cast<float*>(smem));
    const int nvec = static_cast<int>(p.d / VEC);  // VEC divides d (planner); d < 2^31 (host)
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
    // y of vector pair (va, vb): act(a) b rounded to T, returned packed and as floats.
    auto gated = [](const V& va, const V& vb, float(&y)[VEC]) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) y[j] = Act::template apply<kFastMath<T>>(to_float(va.v[j])) * to_float(vb.v[j]);
      const V v = from_floats<T>(y);
      to_floats(v, y);
      return v;
    };
    auto gated_at = [&](const T* ar, const T* br, int i, float(&y)[VEC]) {
      return gated(V::load(ar + i * VEC), V::load(br + i * VEC), y);
    };
    // The loop bound is uniform across the block, so every thread reaches each reduction (which may sync).
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.y; base < p.rows; base += step) {
      const int64_t row = base + threadIdx.y;
      const bool active = row < p.rows;
      const T* ar = p.a + row * p.a_stride;
      const T* br = p.b + row * p.b_stride;
      V held[kSlots];  // held: this thread's y of the row, between the max and the codes
      float s;
      if (p.static_scale) {
        s = *p.scales;
        if (base == static_cast<int64_t>(blockIdx.x) * blockDim.y) check_static_scale(p.err, p.op, s);
      } else {
        unsigned amax_bits = 0;
        if (active) {
          if constexpr (kHeld > 0) {
            // The unrolled loop lets the compiler issue the loads ahead within the register cap.
#pragma unroll
            for (int c = 0; c < kSlots; ++c)
              if (tx + c * tpr < nvec) {
                float y[VEC];
                held[c] = gated_at(ar, br, tx + c * tpr, y);
#pragma unroll
                for (int j = 0; j < VEC; ++j) amax_bits = abs_max_bits(amax_bits, y[j]);
              }
          } else {
            for (int i = tx; i < nvec; i += tpr) {
              float y[VEC];
              gated_at(ar, br, i, y);
#pragma unroll
              for (int j = 0; j < VEC; ++j) amax_bits = abs_max_bits(amax_bits, y[j]);
            }
          }
        }
        // IEEE division: the quantizers' (and the reference's) fp32 scale.
        s = reducer.reduce<MaxOp>(nonfinite_as_inf(amax_bits)) / static_cast<float>(detail::code_max(kFp8));
        if (active && tx == 0) {
          p.scales[row] = s;
          if (isinf(s)) record_device_error(p.err, p.op, detail::DeviceCheck::finite_x, row, -1, 0, 0);
        }
      }
      if (active) {
        int8_t* qr = p.q + row * p.d;
        const SpanScale scale(s);
        if constexpr (kHeld > 0) {
#pragma unroll
          for (int c = 0; c < kSlots; ++c)
            if (tx + c * tpr < nvec) {
              float y[VEC];
              if (p.static_scale)
                gated_at(ar, br, tx + c * tpr, y);
              else
                to_floats(held[c], y);
              store_codes<kFp8, VEC>(qr + (tx + c * tpr) * VEC, y, scale);
            }
        } else {
          for (int i = tx; i < nvec; i += tpr) {
            float y[VEC];
            gated_at(ar, br, i, y);
            store_codes<kFp8, VEC>(qr + i * VEC, y, scale);
          }
        }
      }
    }
  }
}

template <typename T>
Status launch_activation_quant(const detail::ElementwiseArgs& a, const LaunchPlan& plan, cudaStream_t stream) {
  detail::DeviceErrorRecord* err = nullptr;
  KK_RETURN_IF_ERROR(device_error_record(a.device.index, &err));
  const ActQuantParams<T> p{static_cast<const T*>(a.a),
                            static_cast<const T*>(a.b),
                            static_cast<int8_t*>(a.q),
                            a.q_scales,
                            a.rows,
                            a.hidden,
                            a.a_stride,
                            a.b_stride,
                            a.static_scale,
                            a.op,
                            err};
  const bool fp8 = op_quant_out_dtype(a.op) == DType::f8e4m3;
  return dispatch_vec<16 / sizeof(T)>(plan.vec, [&](auto vec) -> Status {
    constexpr int V = decltype(vec)::value;
    const auto kernel = plan.held > 0
                            ? (fp8 ? act_quant_kernel<T, V, Silu, true, kRowVecsPerThread>
                                   : act_quant_kernel<T, V, Silu, false, kRowVecsPerThread>)
                            : (fp8 ? act_quant_kernel<T, V, Silu, true, 0> : act_quant_kernel<T, V, Silu, false, 0>);
    kernel<<<grid_of(plan), block_of(plan), static_cast<size_t>(plan.smem_bytes), stream>>>(p);
    KK_CUDA_RETURN(cudaGetLastError());
    return Status::Ok();
  });
}

}  // namespace kernelkit::cuda

// The quantizers on CUDA.
//
// INT8 / FP8 rows (quantize_int8_per_channel, quantize_per_token_int8, quantize_per_token_fp8): w [rows, k] -> q i8 or
//   f8e4m3 [rows, k], scales f32 [rows]. The row-norm work split (block = threads_per_row x rows_per_block, a
//   grid-stride loop over row groups): each row's max |w| through the one group reduction, s = max / 127 (or 448),
//   then the row re-read (L1/L2) and rounded.
//   Bytes: E k + k + 4 a row (+ the re-read); ~3 FLOP an element: memory-bound.
// INT4 group-wise (quantize_int4_groupwise): w [rows, k] -> q i4x2 [rows, k / 2] (kernel layout), scales [rows, k / g].
//   One thread per 8 values (one packed word); the group / 8 threads of a group (8 or 16 lanes, aligned in the warp)
//   reduce their max with shuffles. Bytes: E k + k / 2 + 4 k / g a row.
#include <cuda_runtime.h>

#include "ops/quant/quant.hpp"
#include "kernels/common/check.cuh"
#include "kernels/common/device_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/vec.cuh"
#include "ops/quant/quant_common.cuh"
#include "runtime/device_errors.hpp"
#include "runtime/runtime_internal.hpp"
#include "kernelkit/planner.hpp"
#include "kernelkit/runtime.hpp"
#include "runtime/plan_rules.hpp"

namespace kernelkit::cuda {
namespace {

template <typename T>
struct QuantizeParams {
  const T* w;     // [rows, k], row stride w_stride
  void* q;        // i8 [rows, k] or i4x2 [rows, k / 2], contiguous
  float* scales;  // [rows] or [rows, k / group]
  int64_t rows, k, w_stride;
  int group;
  OpId op;
  detail::DeviceErrorRecord* err;  // where a row (group) holding inf or NaN is recorded (device_check.cuh)
};

__device__ __forceinline__ void record_nonfinite(detail::DeviceErrorRecord* err, OpId op, int64_t row, int64_t group) {
  record_device_error(err, op,
                      detail::quantizes_tokens(op) ? detail::DeviceCheck::finite_x : detail::DeviceCheck::finite_w, row,
                      group, 0, 0);
}

// N values of T at p (aligned to min(16, N * sizeof(T)) bytes) as floats, in 16-byte (or smaller) accesses.
template <typename T, int N>
__device__ __forceinline__ void load_floats(const T* p, float* f) {
  constexpr int kPer = N * sizeof(T) > 16 ? 16 / static_cast<int>(sizeof(T)) : N;
#pragma unroll
  for (int i = 0; i < N; i += kPer) {
    const Vec<T, kPer> v = Vec<T, kPer>::load(p + i);
#pragma unroll
    for (int j = 0; j < kPer; ++j) f[i + j] = to_float(v.v[j]);
  }
}

// kFp8: e4m3 outputs (qmax 448), else int8 (qmax 127).
template <typename T, int VEC, bool kFp8>
__global__ void __launch_bounds__(kRowNormMaxThreads) quantize_rows_kernel(const QuantizeParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    extern __shared__ __align__(16) unsigned char smem[];
    const int tpr = blockDim.x, tx = threadIdx.x;
    RowReducer reducer(tpr, reinterpret_cast<float*>(smem));
    const int64_t nvec = p.k / VEC;
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.y; base < p.rows; base += step) {
      const int64_t row = base + threadIdx.y;
      const bool active = row < p.rows;
      const T* wr = p.w + row * p.w_stride;
      unsigned amax_bits = 0;
      if (active)
        for (int64_t i = tx; i < nvec; i += tpr) {
          float f[VEC];
          load_floats<T, VEC>(wr + i * VEC, f);
#pragma unroll
          for (int j = 0; j < VEC; ++j) amax_bits = abs_max_bits(amax_bits, f[j]);
        }
      const float amax = reducer.reduce<MaxOp>(nonfinite_as_inf(amax_bits));
      const float s = amax / static_cast<float>(detail::code_max(kFp8));  // IEEE division: the reference's fp32 scale
      if (active) {
        if (tx == 0) p.scales[row] = s;
        if (tx == 0 && isinf(s)) record_nonfinite(p.err, p.op, row, -1);
        int8_t* qr = static_cast<int8_t*>(p.q) + row * p.k;
        const SpanScale scale(s);
        for (int64_t i = tx; i < nvec; i += tpr) {
          float f[VEC];
          load_floats<T, VEC>(wr + i * VEC, f);
          store_codes<kFp8, VEC>(qr + i * VEC, f, scale);
        }
      }
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads, kElementwiseMinBlocks)
    quantize_int4_kernel(const QuantizeParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();
  } else {
    const int64_t words_per_row = p.k / 8, words = p.rows * words_per_row;
    const int lanes = p.group / 8;  // threads of one scale group: 8 or 16, aligned within the warp
    const int lane = threadIdx.x % kWarpSize;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    // The loop condition is the warp's first word, so whole warps iterate together (the shuffles need every lane);
    // words is a multiple of `lanes`, so an inactive lane's group is inactive as a whole.
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i - lane < words; i += stride) {
      const bool active = i < words;
      float f[8] = {};
      if (active) {
        const int64_t row = i / words_per_row, col = (i - row * words_per_row) * 8;
        load_floats<T, 8>(p.w + row * p.w_stride + col, f);
      }
      unsigned amax_bits = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) amax_bits = abs_max_bits(amax_bits, f[j]);
      const float amax = warp_max(nonfinite_as_inf(amax_bits), lanes);  // lanes <= 32
      const float s = amax / 7.0f;
      if (active) {
        if (i % lanes == 0 && isinf(s))
          record_nonfinite(p.err, OpId::quantize_int4_groupwise, i / words_per_row, (i % words_per_row) / lanes);
        uint32_t word = 0;
#pragma unroll
        for (int j = 0; j < 8; ++j)
          word |= static_cast<uint32_t>(quantize_value(f[j], s, 7) & 0xF) << (4 * int4_nibble(j));
        static_cast<uint32_t*>(p.q)[i] = word;
        if (i % lanes == 0) p.scales[i / lanes] = s;  // [rows, k / group] contiguous: group index = word / lanes
      }
    }
  }
}

template <typename T>
Status launch_quantize(const detail::QuantizeArgs& a, const LaunchPlan& plan, cudaStream_t stream) {
  detail::DeviceErrorRecord* err = nullptr;
  KK_RETURN_IF_ERROR(device_error_record(a.device.index, &err));
  const QuantizeParams<T> p{static_cast<const T*>(a.w), a.q, a.scales, a.rows, a.hidden, a.w_stride, a.group,
                            a.op, err};
  if (a.op == OpId::quantize_int4_groupwise) {
    quantize_int4_kernel<T><<<grid_of(plan), plan.block_threads, 0, stream>>>(p);
    KK_CUDA_RETURN(cudaGetLastError());
    return Status::Ok();
  }
  return dispatch_vec<8>(plan.vec, [&](auto vec) -> Status {
    constexpr int V = decltype(vec)::value;
    const auto kernel = op_fp8_dtype(a.op) ? quantize_rows_kernel<T, V, true> : quantize_rows_kernel<T, V, false>;
    kernel<<<grid_of(plan), block_of(plan), static_cast<size_t>(plan.smem_bytes), stream>>>(p);
    KK_CUDA_RETURN(cudaGetLastError());
    return Status::Ok();
  });
}

}  // namespace
}  // namespace kernelkit::cuda

namespace kernelkit::detail {

Status quantize_cuda(const QuantizeArgs& a, Stream stream) {
  KK_RETURN_IF_ERROR(cuda::launch_planned(a.op, a.dtype, a.device.index, a.shape(),
                                          {{a.w, "w"}, {a.q, "qweight"}, {a.scales, "scales"}},
                                          [&](auto tag, const LaunchPlan& plan, const DeviceProfile&) {
                                            return cuda::launch_quantize<decltype(tag)>(a, plan, stream);
                                          }));
  // Weights are quantized once, off the serving path: wait and refuse an inf or NaN at the call, as on the CPU (in
  // debug mode run_op does that after every op). The per-token activation quantizer only records it.
  const bool wait = !detail::quantizes_tokens(a.op) && !debug_checks();
  return wait ? debug_check(a.device.index, stream) : Status::Ok();
}

}  // namespace kernelkit::detail

// The quantizers on CUDA.
//
// Rows (quantize_int8_per_channel, quantize_per_token_int8 / _fp8): w [rows, k] -> q i8 or f8e4m3 [rows, k], scales
//   f32 [rows]. The row-norm work split (block = threads_per_row x rows_per_block, a grid-stride loop over row
//   groups): each row's max |w| through the one group reduction, s = max / 127 (or 448), then the row re-read (L1/L2)
//   and rounded. Bytes: E k + k + 4 a row (+ the re-read); ~3 FLOP an element: memory-bound.
// Per tensor (quantize_per_tensor_*): the same split and kernel with one scale, scales[0], for every row: given
//   (static), or written just before by tensor_max_kernel (dynamic): scales[0] zeroed on the stream, then each block's
//   max / qmax combined into it by an atomic max on the float's bits. Division by qmax is monotonic, so the largest of
//   the blocks' quotients is the quotient of the tensor's max: the reference's fp32 scale exactly. The dynamic form
//   reads x twice (E k a row more).
// Groups along k (quantize_int4_groupwise, quantize_per_token_group_*): w [rows, k] -> q i4x2 [rows, k / 2] (kernel
//   layout) or 1-byte [rows, k], scales [rows, k / g] or column major. One thread per 8 values (one packed INT4 word,
//   or 8 codes stored as one 64-bit access); the g / 8 threads of a group (8 or 16 lanes, aligned in the warp) reduce
//   their max with shuffles. Bytes: E k + k / 2 (INT4) or k, + 4 k / g a row.
// 128 x 128 blocks (quantize_blockwise_*): a thread block quantizes one weight block at a time (a grid-stride loop):
//   its max |w| (one block reduction), its scale, then the block re-read (L1/L2) and rounded. Bytes: E + 1 an
//   element, 4 a block.
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
  void* q;        // i8 / f8e4m3 [rows, k] or i4x2 [rows, k / 2], contiguous
  float* scales;  // by span (detail::QuantizeArgs): [rows], [rows, k / group] or [k / group, scales_ld], [1], blocks
  int64_t rows, k, w_stride;
  int group;
  int64_t scales_ld;  // groups: > 0 for column-major scales; blocks: the row stride
  bool static_scale;  // per tensor: scales[0] is given
  OpId op;
  detail::DeviceErrorRecord* err;  // where a row (group) holding inf or NaN, or a bad static scale, is recorded
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

// kFp8: e4m3 outputs (qmax 448), else int8 (qmax 127). kTensor: every row at the tensor's one scale, scales[0];
// else each row at its own max / qmax, written to scales[row].
template <typename T, int VEC, bool kFp8, bool kTensor>
__global__ void __launch_bounds__(kRowNormMaxThreads) quantize_rows_kernel(const QuantizeParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75
  } else {
    extern __shared__ __align__(16) unsigned char smem[];
    const int tpr = blockDim.x, tx = threadIdx.x;
    RowReducer reducer(tpr, reinterpret_cast<float*>(smem));
    const int64_t nvec = p.k / VEC;
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
    const float tensor_s = kTensor ? *p.scales : 0.0f;
    if (kTensor && p.static_scale) check_static_scale(p.err, p.op, tensor_s);
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.y; base < p.rows; base += step) {
      const int64_t row = base + threadIdx.y;
      const bool active = row < p.rows;
      const T* wr = p.w + row * p.w_stride;
      float s = tensor_s;
      if constexpr (!kTensor) {
        unsigned amax_bits = 0;
        if (active)
          for (int64_t i = tx; i < nvec; i += tpr) {
            float f[VEC];
            load_floats<T, VEC>(wr + i * VEC, f);
#pragma unroll
            for (int j = 0; j < VEC; ++j) amax_bits = abs_max_bits(amax_bits, f[j]);
          }
        const float amax = reducer.reduce<MaxOp>(nonfinite_as_inf(amax_bits));
        s = amax / static_cast<float>(detail::code_max(kFp8));  // IEEE division: the reference's fp32 scale
        if (active && tx == 0) {
          p.scales[row] = s;
          if (isinf(s)) record_nonfinite(p.err, p.op, row, -1);
        }
      }
      if (active) {
        int8_t* qr = static_cast<int8_t*>(p.q) + row * p.k;
        const SpanScale scale(s);
        unsigned row_bits = 0;  // per tensor: the max |x| this thread saw in the row, for the inf / NaN record
        for (int64_t i = tx; i < nvec; i += tpr) {
          float f[VEC];
          load_floats<T, VEC>(wr + i * VEC, f);
          if constexpr (kTensor) {
#pragma unroll
            for (int j = 0; j < VEC; ++j) row_bits = abs_max_bits(row_bits, f[j]);
          }
          store_codes<kFp8, VEC>(qr + i * VEC, f, scale);
        }
        if (kTensor && row_bits >= 0x7f800000u) record_nonfinite(p.err, p.op, row, -1);
      }
    }
  }
}

// The dynamic per-tensor scale: max |x| over this block's rows (the rows kernel's split), then max / qmax combined
// into scales[0] (zeroed before the launch) by an atomic max on its bits: non-negative floats order as their bits,
// and an inf or NaN makes it inf (the codes pass records where).
template <typename T, int VEC, bool kFp8>
__global__ void __launch_bounds__(kRowNormMaxThreads) tensor_max_kernel(const QuantizeParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();
  } else {
    __shared__ float scratch[kWarpSize];
    const int64_t nvec = p.k / VEC;
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
    unsigned amax_bits = 0;
    for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; row < p.rows; row += step)
      for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
        float f[VEC];
        load_floats<T, VEC>(p.w + row * p.w_stride + i * VEC, f);
#pragma unroll
        for (int j = 0; j < VEC; ++j) amax_bits = abs_max_bits(amax_bits, f[j]);
      }
    // The planner's blocks are 256 threads, or one row of a multiple of 32: whole warps.
    const float amax = block_reduce<MaxOp>(nonfinite_as_inf(amax_bits), scratch);
    if (threadIdx.x == 0 && threadIdx.y == 0)
      atomicMax(reinterpret_cast<unsigned*>(p.scales),
                __float_as_uint(amax / static_cast<float>(detail::code_max(kFp8))));
  }
}

// The codes of a group-wise quantizer: INT4 words (qmax 7, kernel layout), int8 or e4m3 bytes.
enum class GroupCode { int4, int8, fp8 };

template <typename T, GroupCode kCode>
__global__ void __launch_bounds__(kElementwiseThreads, kElementwiseMinBlocks)
    quantize_groups_kernel(const QuantizeParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();
  } else {
    constexpr int kQmax = kCode == GroupCode::int4 ? 7 : detail::code_max(kCode == GroupCode::fp8);
    const int64_t words_per_row = p.k / 8, words = p.rows * words_per_row;
    const int lanes = p.group / 8;  // threads of one scale group: 8 or 16, aligned within the warp
    const int lane = threadIdx.x % kWarpSize;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    // The loop condition is the warp's first word, so whole warps iterate together (the shuffles need every lane);
    // words is a multiple of `lanes`, so an inactive lane's group is inactive as a whole.
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i - lane < words; i += stride) {
      const bool active = i < words;
      const int64_t row = i / words_per_row, word = i - row * words_per_row, g = word / lanes;
      float f[8] = {};
      if (active) load_floats<T, 8>(p.w + row * p.w_stride + word * 8, f);
      unsigned amax_bits = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) amax_bits = abs_max_bits(amax_bits, f[j]);
      const float amax = warp_max(nonfinite_as_inf(amax_bits), lanes);  // lanes <= 32
      const float s = amax / static_cast<float>(kQmax);
      if (active) {
        if (i % lanes == 0 && isinf(s)) record_nonfinite(p.err, p.op, row, g);
        if constexpr (kCode == GroupCode::int4) {
          uint32_t packed = 0;
#pragma unroll
          for (int j = 0; j < 8; ++j)
            packed |= static_cast<uint32_t>(quantize_value(f[j], s, kQmax) & 0xF) << (4 * int4_nibble(j));
          static_cast<uint32_t*>(p.q)[detail::int4_word_offset(row, word, p.k) / 4] = packed;
        } else {
          store_codes<kCode == GroupCode::fp8, 8>(static_cast<int8_t*>(p.q) + i * 8, f, SpanScale(s));
        }
        // Row major [rows, k / group] (group index = word / lanes), or column major [k / group, scales_ld].
        if (i % lanes == 0) p.scales[p.scales_ld > 0 ? g * p.scales_ld + row : i / lanes] = s;
      }
    }
  }
}

// 128 x 128 blocks: block b (row major over the [ceil(rows / 128), ceil(k / 128)] scales, rows scales_ld apart) at a
// time. VEC divides k and 128, so a vector lies wholly inside one block; the edge blocks have fewer rows or vectors.
template <typename T, int VEC, bool kFp8>
__global__ void __launch_bounds__(kElementwiseThreads, kElementwiseMinBlocks)
    quantize_blocks_kernel(const QuantizeParams<T> p) {
  if constexpr (!kDeviceHasType<T>) {
    __trap();
  } else {
    __shared__ float scratch[kWarpSize];
    constexpr int64_t kB = kQuantBlockSize;
    const int64_t block_cols = (p.k + kB - 1) / kB, blocks = (p.rows + kB - 1) / kB * block_cols;
    for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
      const int64_t r0 = b / block_cols * kB, c0 = b % block_cols * kB;
      const int row_vecs = static_cast<int>((p.k - c0 < kB ? p.k - c0 : kB) / VEC);
      const int vecs = static_cast<int>(p.rows - r0 < kB ? p.rows - r0 : kB) * row_vecs;
      unsigned amax_bits = 0;
      for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
        const int64_t row = r0 + v / row_vecs;
        float f[VEC];
        load_floats<T, VEC>(p.w + row * p.w_stride + c0 + v % row_vecs * VEC, f);
        unsigned bits = 0;
#pragma unroll
        for (int j = 0; j < VEC; ++j) bits = abs_max_bits(bits, f[j]);
        if (bits >= 0x7f800000u) record_nonfinite(p.err, p.op, row, -1);
        amax_bits = max(amax_bits, bits);
      }
      const float amax = block_reduce<MaxOp>(nonfinite_as_inf(amax_bits), scratch);
      const float s = amax / static_cast<float>(detail::code_max(kFp8));  // IEEE division: the reference's scale
      if (threadIdx.x == 0) p.scales[b / block_cols * p.scales_ld + b % block_cols] = s;
      const SpanScale scale(s);
      for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
        const int64_t row = r0 + v / row_vecs, col = c0 + v % row_vecs * VEC;
        float f[VEC];
        load_floats<T, VEC>(p.w + row * p.w_stride + col, f);
        store_codes<kFp8, VEC>(static_cast<int8_t*>(p.q) + row * p.k + col, f, scale);
      }
    }
  }
}

template <typename T>
Status launch_quantize(const detail::QuantizeArgs& a, const LaunchPlan& plan, cudaStream_t stream) {
  detail::DeviceErrorRecord* err = nullptr;
  KK_RETURN_IF_ERROR(device_error_record(a.device.index, &err));
  const QuantizeParams<T> p{static_cast<const T*>(a.w),
                            a.q,
                            a.scales,
                            a.rows,
                            a.hidden,
                            a.w_stride,
                            a.group,
                            a.scales_ld,
                            a.static_scale,
                            a.op,
                            err};
  const bool fp8 = op_fp8_dtype(a.op).has_value();
  const auto launched = [] {
    KK_CUDA_RETURN(cudaGetLastError());
    return Status::Ok();
  };
  switch (detail::scale_span(a.op)) {
    case detail::ScaleSpan::group: {
      const auto kernel = a.op == OpId::quantize_int4_groupwise ? quantize_groups_kernel<T, GroupCode::int4>
                          : fp8                                 ? quantize_groups_kernel<T, GroupCode::fp8>
                                                                : quantize_groups_kernel<T, GroupCode::int8>;
      kernel<<<grid_of(plan), plan.block_threads, 0, stream>>>(p);
      return launched();
    }
    case detail::ScaleSpan::block:
      return dispatch_vec<8>(plan.vec, [&](auto vec) -> Status {
        constexpr int V = decltype(vec)::value;
        const auto kernel = fp8 ? quantize_blocks_kernel<T, V, true> : quantize_blocks_kernel<T, V, false>;
        kernel<<<grid_of(plan), plan.block_threads, 0, stream>>>(p);
        return launched();
      });
    case detail::ScaleSpan::tensor:
      // The dynamic scale starts at 0 (an empty or all-zero x keeps it), on the stream: capturable, no allocation.
      if (!a.static_scale) KK_CUDA_RETURN(cudaMemsetAsync(a.scales, 0, sizeof(float), stream));
      if (a.rows == 0) return Status::Ok();
      return dispatch_vec<8>(plan.vec, [&](auto vec) -> Status {
        constexpr int V = decltype(vec)::value;
        if (!a.static_scale) {
          const auto max_kernel = fp8 ? tensor_max_kernel<T, V, true> : tensor_max_kernel<T, V, false>;
          max_kernel<<<grid_of(plan), block_of(plan), 0, stream>>>(p);
          KK_RETURN_IF_ERROR(launched());
        }
        const auto kernel = fp8 ? quantize_rows_kernel<T, V, true, true> : quantize_rows_kernel<T, V, false, true>;
        kernel<<<grid_of(plan), block_of(plan), static_cast<size_t>(plan.smem_bytes), stream>>>(p);
        return launched();
      });
    default:
      return dispatch_vec<8>(plan.vec, [&](auto vec) -> Status {
        constexpr int V = decltype(vec)::value;
        const auto kernel = fp8 ? quantize_rows_kernel<T, V, true, false> : quantize_rows_kernel<T, V, false, false>;
        kernel<<<grid_of(plan), block_of(plan), static_cast<size_t>(plan.smem_bytes), stream>>>(p);
        return launched();
      });
  }
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

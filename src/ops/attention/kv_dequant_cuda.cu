// e4m3 k / v of attention (the prefill) to q's dtype, before the 16-bit prefill runs on them: one thread per 16-code
// chunk of a (row, KV head) of k and the same chunk of v, each code converted exactly (cvt.f16x2.e4m3x2: every e4m3
// value is an f16), multiplied by its head's scale in fp64 (exact: a 4-bit by a 24-bit significand) and rounded to T
// once. sm_89+ (the kernel traps below it; those profiles refuse FP8). Grid-stride, one wave of resident blocks.
// Bytes: 2 rows h_kv d (codes read) + 2 rows h_kv d E (T written), rows = b s_k or total_k; no reuse.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/common/check.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/e4m3.cuh"
#include "kernels/common/vec.cuh"
#include "ops/attention/attention.hpp"

namespace kernelkit::cuda {
namespace {

constexpr int kDequantThreads = 256;
constexpr int kCodes = 16;  // codes a thread converts at once: one 16-byte load

template <typename T>
struct KvDequantParams {
  const uint8_t *k, *v;  // codes: row r of a sequence of s_k rows (varlen: s_k = 0, r packed), head h at
                         // (r / s_k) * batch + (r % s_k) * token + h * head
  detail::HeadStrides ks, vs;
  int64_t s_k;
  T *k_out, *v_out;                // [rows, kv_heads, head_dim] contiguous
  int64_t chunks;                  // rows * kv_heads * head_dim / 16
  int kv_heads, head_chunks;       // head_chunks: head_dim / 16
  const float *k_scale, *v_scale;  // KV head h's at [h * stride] (stride 0: one per tensor)
  int64_t ks_stride, vs_stride;
};

// 16 codes at `src` times `scale` into 16 T at `dst` (16 codes: two Vecs of 8).
template <typename T>
__device__ __forceinline__ void dequantize16(const uint8_t* src, double scale, T* dst) {
  const uint4 w = *reinterpret_cast<const uint4*>(src);
  const uint32_t words[4] = {w.x, w.y, w.z, w.w};
  float f[16];
  e4m3_to_floats<16>(words, f);
  Vec<T, 8> out[2];
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const double x = static_cast<double>(f[i]) * scale;
    if constexpr (std::is_same_v<T, __half>)
      out[i / 8].v[i % 8] = __double2half(x);
    else
      out[i / 8].v[i % 8] = __double2bfloat16(x);
  }
  out[0].store(dst);
  out[1].store(dst + 8);
}

template <typename T>
__global__ void __launch_bounds__(kDequantThreads) kv_dequant_kernel(const KvDequantParams<T> p) {
  if constexpr (!kDeviceHasType<T> || !KK_DEVICE_HAS_FP8) {
    __trap();  // unreachable: the host refuses bf16 for kernels built for sm_75, e4m3 k / v below sm_89
  } else {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.chunks;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const int64_t row_head = i / p.head_chunks, r = row_head / p.kv_heads;
      const int c = static_cast<int>(i - row_head * p.head_chunks), h = static_cast<int>(row_head - r * p.kv_heads);
      const int64_t b = p.s_k ? r / p.s_k : 0, t = p.s_k ? r - b * p.s_k : r;
      const int64_t dst = i * kCodes;  // contiguous output: chunk i
      dequantize16(p.k + b * p.ks.batch + t * p.ks.token + h * p.ks.head + c * kCodes,
                   static_cast<double>(p.k_scale[h * p.ks_stride]), p.k_out + dst);
      dequantize16(p.v + b * p.vs.batch + t * p.vs.token + h * p.vs.head + c * kCodes,
                   static_cast<double>(p.v_scale[h * p.vs_stride]), p.v_out + dst);
    }
  }
}

template <typename T>
Status launch_kv_dequant(const detail::AttentionArgs& a, const DeviceProfile& prof, void* k_out, void* v_out,
                         cudaStream_t stream) {
  const int64_t rows = a.varlen ? a.total_k : a.batch * a.s_k;
  const KvDequantParams<T> p{static_cast<const uint8_t*>(a.k),
                             static_cast<const uint8_t*>(a.v),
                             a.k_st,
                             a.v_st,
                             a.varlen ? 0 : a.s_k,
                             static_cast<T*>(k_out),
                             static_cast<T*>(v_out),
                             rows * a.kv_heads * a.head_dim / kCodes,
                             static_cast<int>(a.kv_heads),
                             static_cast<int>(a.head_dim / kCodes),
                             a.scales.k,
                             a.scales.v,
                             a.scales.k_stride,
                             a.scales.v_stride};
  if (p.chunks == 0) return Status::Ok();
  // A memory-bound pass: one wave of resident blocks (a multiple of the SM count), striding over the chunks.
  const int64_t wave =
      static_cast<int64_t>(std::max(prof.sms, 1)) * std::max(prof.max_threads_per_sm / kDequantThreads, 1);
  const auto blocks = static_cast<unsigned>(std::min((p.chunks + kDequantThreads - 1) / kDequantThreads, wave));
  kv_dequant_kernel<T><<<blocks, kDequantThreads, 0, stream>>>(p);
  KK_CUDA_RETURN(cudaGetLastError());
  return Status::Ok();
}

}  // namespace
}  // namespace kernelkit::cuda

namespace kernelkit::detail {

Status dequantize_kv_cuda(const AttentionArgs& a, const DeviceProfile& prof, void* k_out, void* v_out, Stream stream) {
  return cuda::dispatch_half("attention", a.dtype, [&](auto tag) {
    return cuda::launch_kv_dequant<decltype(tag)>(a, prof, k_out, v_out, static_cast<cudaStream_t>(stream));
  });
}

}  // namespace kernelkit::detail

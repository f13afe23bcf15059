// Device-side random fill for benchmarks: a counter-based hash (splitmix64) per element, so any size fills at memory
// speed and the same seed gives the same data.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/common/check.cuh"
#include "testing/bench.hpp"

namespace kernelkit::testing {
namespace {

__device__ __forceinline__ uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <typename T>
__global__ void fill_kernel(T* p, int64_t n, float lo, float span, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float u = static_cast<float>(splitmix64(seed ^ static_cast<uint64_t>(i)) >> 40) * (1.0f / 16777216.0f);
    const float v = lo + span * u;
    if constexpr (std::is_same_v<T, float>) p[i] = v;
    else if constexpr (std::is_same_v<T, __half>) p[i] = __float2half_rn(v);
    else p[i] = __float2bfloat16_rn(v);  // conversion only: valid on every architecture
  }
}

}  // namespace

Status fill_uniform(void* ptr, DType dtype, int64_t n, double lo, double hi, uint64_t seed, Stream stream) {
  if (n <= 0) return Status::Ok();
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65536));
  const float l = static_cast<float>(lo), s = static_cast<float>(hi - lo);
  switch (dtype) {
    case DType::f32: fill_kernel<<<grid, 256, 0, stream>>>(static_cast<float*>(ptr), n, l, s, seed); break;
    case DType::f16: fill_kernel<<<grid, 256, 0, stream>>>(static_cast<__half*>(ptr), n, l, s, seed); break;
    case DType::bf16: fill_kernel<<<grid, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(ptr), n, l, s, seed); break;
    default: return invalid_argument("fill_uniform: dtype must be f32, f16 or bf16");
  }
  KK_CUDA_RETURN(cudaGetLastError());
  return Status::Ok();
}

}  // namespace kernelkit::testing

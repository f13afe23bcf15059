// L2 persistence through the stream access-policy window (runtime.hpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/common/check.cuh"
#include "runtime/runtime_internal.hpp"
#include "kernelkit/runtime.hpp"

namespace kernelkit {

Status set_l2_persistence(int device, Stream stream, const void* base, size_t bytes, float hit_ratio,
                          size_t* window_bytes) {
  if (!(hit_ratio >= 0.0f && hit_ratio <= 1.0f))
    return invalid_argument("set_l2_persistence: hit_ratio must be in [0, 1], got " + std::to_string(hit_ratio));
  if (base == nullptr || bytes == 0)
    return invalid_argument("set_l2_persistence: base must be non-null and bytes > 0");
  cuda::DeviceGuard guard;
  KK_RETURN_IF_ERROR(guard.set(device));
  int max_persist = 0, max_window = 0;
  KK_CUDA_RETURN(cudaDeviceGetAttribute(&max_persist, cudaDevAttrMaxPersistingL2CacheSize, device));
  KK_CUDA_RETURN(cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, device));
  if (max_persist <= 0 || max_window <= 0)
    return unsupported("set_l2_persistence: cuda:" + std::to_string(device) +
                       " has no persisting L2 (access-policy windows need sm_80 or newer)");
  const size_t window = std::min(bytes, static_cast<size_t>(max_window));
  KK_CUDA_RETURN(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, std::min(window, static_cast<size_t>(max_persist))));
  cudaStreamAttrValue attr{};
  attr.accessPolicyWindow.base_ptr = const_cast<void*>(base);
  attr.accessPolicyWindow.num_bytes = window;
  attr.accessPolicyWindow.hitRatio = hit_ratio;
  attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  KK_CUDA_RETURN(cudaStreamSetAttribute(reinterpret_cast<cudaStream_t>(stream), cudaStreamAttributeAccessPolicyWindow,
                                        &attr));
  if (window_bytes) *window_bytes = window;
  return Status::Ok();
}

Status clear_l2_persistence(int device, Stream stream) {
  cuda::DeviceGuard guard;
  KK_RETURN_IF_ERROR(guard.set(device));
  cudaStreamAttrValue attr{};
  attr.accessPolicyWindow.num_bytes = 0;
  KK_CUDA_RETURN(cudaStreamSetAttribute(reinterpret_cast<cudaStream_t>(stream), cudaStreamAttributeAccessPolicyWindow,
                                        &attr));
  KK_CUDA_RETURN(cudaCtxResetPersistingL2Cache());
  KK_CUDA_RETURN(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0));
  return Status::Ok();
}

}  // namespace kernelkit

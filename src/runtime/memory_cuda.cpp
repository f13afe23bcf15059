// The CUDA half of Buffer and copy_rows.
#include <cuda_runtime.h>

#include <string>

#include "runtime/memory.hpp"
#include "kernels/common/check.cuh"
#include "runtime/runtime_internal.hpp"

namespace kernelkit::detail {

Status device_alloc(int device, size_t bytes, void** out) {
  cuda::DeviceGuard guard;
  KK_RETURN_IF_ERROR(guard.set(device));
  if (cudaMalloc(out, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    *out = nullptr;
    return Status(StatusCode::cuda_error,
                  "out of device memory allocating " + std::to_string(bytes) + " bytes on cuda:" + std::to_string(device));
  }
  return Status::Ok();
}

void device_free(int device, void* p) {
  cuda::DeviceGuard guard;
  if (guard.set(device).ok()) cudaFree(p);
}

Status device_copy_rows(int device, void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
                        size_t rows, Stream stream, bool from_host) {
  cuda::DeviceGuard guard;
  KK_RETURN_IF_ERROR(guard.set(device));
  const cudaMemcpyKind kind = from_host ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice;
  const auto st = reinterpret_cast<cudaStream_t>(stream);
  // One row: a plain copy (cudaMemcpy2D rejects pitches below the width, and callers pass 0 for a single row).
  if (rows == 1) KK_CUDA_RETURN(cudaMemcpyAsync(dst, src, width, kind, st));
  else KK_CUDA_RETURN(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, kind, st));
  return Status::Ok();
}

}  // namespace kernelkit::detail

// DeviceBuffer: plain cudaMalloc'd memory for tests (stub errors in a build without CUDA).
#include "testing/harness.hpp"

#ifdef KERNELKIT_HAS_CUDA
#include <cuda_runtime_api.h>

#include "kernels/common/check.cuh"
#endif

namespace kernelkit::testing {

#ifdef KERNELKIT_HAS_CUDA
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) (void)cudaFree(ptr_);
}
Status DeviceBuffer::alloc(size_t bytes) {
  if (ptr_) KK_CUDA_RETURN(cudaFree(ptr_));
  ptr_ = nullptr;
  KK_CUDA_RETURN(cudaMalloc(&ptr_, bytes));
  bytes_ = bytes;
  return Status::Ok();
}
Status DeviceBuffer::upload(const HostBuffer& h) {
  if (h.bytes() > bytes_) return invalid_argument("upload larger than the device buffer");
  KK_CUDA_RETURN(cudaMemcpy(ptr_, h.data(), h.bytes(), cudaMemcpyHostToDevice));
  return Status::Ok();
}
Status DeviceBuffer::download(HostBuffer* h) const {
  if (h->bytes() > bytes_) return invalid_argument("download larger than the device buffer");
  KK_CUDA_RETURN(cudaMemcpy(h->data(), ptr_, h->bytes(), cudaMemcpyDeviceToHost));
  return Status::Ok();
}
Status DeviceBuffer::poison() {
  KK_CUDA_RETURN(cudaMemset(ptr_, 0xFF, bytes_));
  return Status::Ok();
}
Status device_synchronize() {
  KK_CUDA_RETURN(cudaDeviceSynchronize());
  return Status::Ok();
}
#else
namespace {
Status none() { return Status(StatusCode::no_device, "kernelkit was built without CUDA"); }
}  // namespace
DeviceBuffer::~DeviceBuffer() = default;
Status DeviceBuffer::alloc(size_t) { return none(); }
Status DeviceBuffer::upload(const HostBuffer&) { return none(); }
Status DeviceBuffer::download(HostBuffer*) const { return none(); }
Status DeviceBuffer::poison() { return none(); }
Status device_synchronize() { return none(); }
#endif

}  // namespace kernelkit::testing

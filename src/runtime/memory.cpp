// Buffer and copy_rows: the host half here, the device half behind detail::device_* (cuda/memory.cpp, or the stub).
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "runtime/memory.hpp"
#include "kernelkit/runtime.hpp"

namespace kernelkit {

namespace {
std::atomic<const ScratchAllocator*> g_scratch_allocator{nullptr};
}  // namespace

void set_scratch_allocator(const ScratchAllocator* allocator) { g_scratch_allocator.store(allocator); }
const ScratchAllocator* scratch_allocator() { return g_scratch_allocator.load(); }

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    this->~Buffer();
    data_ = o.data_;
    bytes_ = o.bytes_;
    device_ = o.device_;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

Buffer::~Buffer() {
  if (!data_) return;
  if (device_.type == DeviceType::cpu) std::free(data_);
  else detail::device_free(device_.index, data_);
  data_ = nullptr;
}

Status Buffer::alloc(Device device, size_t bytes) {
  this->~Buffer();
  device_ = device;
  bytes_ = bytes;
  if (bytes == 0) return Status::Ok();
  if (device.type == DeviceType::cpu) {
    data_ = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!data_) return Status(StatusCode::internal, "out of host memory allocating " + std::to_string(bytes) + " bytes");
    return Status::Ok();
  }
  return detail::device_alloc(device.index, bytes, &data_);
}

Status copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows,
                 Device device, Stream stream, bool from_host) {
  if (rows == 0 || width == 0) return Status::Ok();
  if (device.type == DeviceType::cpu) {
    for (size_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch, width);
    return Status::Ok();
  }
  return detail::device_copy_rows(device.index, dst, dst_pitch, src, src_pitch, width, rows, stream, from_host);
}

}  // namespace kernelkit

// Internal: the device half of Buffer and copy_rows (CUDA in cuda/memory.cpp; "no device" in the stub).
#pragma once

#include <cstddef>

#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit::detail {

Status device_alloc(int device, size_t bytes, void** out);
void device_free(int device, void* p);
Status device_copy_rows(int device, void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
                        size_t rows, Stream stream, bool from_host);

}  // namespace kernelkit::detail

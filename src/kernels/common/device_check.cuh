// Device half of the checks in src/runtime/device_errors.hpp: a kernel that meets an out-of-range index (or a
// quantizer a non-finite input) records it, the first one per device wins, and never follows the index; the host
// reads the record in check_errors.
#pragma once

#include <cstdint>

#include "kernelkit/op_info.hpp"
#include "runtime/device_errors.hpp"

namespace kernelkit::cuda {

// Rare path (a bad index): one atomic claims the record, so concurrent violations leave the first one whole. Inlined:
// a call would make the kernels around it save registers across it.
__device__ __forceinline__ void record_device_error(detail::DeviceErrorRecord* r, OpId op, detail::DeviceCheck arg,
                                                       int64_t i, int64_t j, int64_t value, int64_t bound) {
  if (r == nullptr || atomicCAS(&r->set, 0u, 1u) != 0u) return;
  r->op = static_cast<int32_t>(op);
  r->arg = static_cast<int32_t>(arg);
  r->i = i, r->j = j, r->value = value, r->bound = bound;
  __threadfence();
}

}  // namespace kernelkit::cuda

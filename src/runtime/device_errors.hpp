// What kernels check on the device, where the host cannot look without a synchronization: index values (a paged
// cache's block_table and seqlens_k, RoPE positions) and the finiteness of the values a quantizer scales. The record a
// kernel fills on the first violation it meets (check_errors in kernelkit/runtime.hpp reads and clears it), the
// checks it can name, and the one message text that the CPU checks and the device record both use.
#pragma once

#include <cstdint>
#include <string>

#include "kernelkit/op_info.hpp"
#include "kernelkit/status.hpp"
#include "kernelkit/tensor.hpp"

namespace kernelkit::detail {

// A checked argument, with its bound's meaning: block_table entries are pages in [0, num_pages), seqlens_k lengths in
// [0, capacity], positions rows of the cos / sin cache in [0, max_position); finite_w / finite_x: row i (group j, or
// -1 for a whole row) of a quantizer's input w / x holds inf or NaN (no value or bound); cu_seqlens_q / k: entry i
// breaks the rise from 0 to the packed token count `bound`; max_seqlen_q / k: sequence i's `value` tokens exceed the
// max_seqlen `bound` given; static_scale: a quantizer's given scale (`value`: its fp32 bits) is not finite and > 0;
// k_scale / v_scale: entry i of an e4m3 KV cache's scale (`value`: its fp32 bits) is not finite and > 0; perm: entry i
// of a weight-only linear's input order is not an input of x in [0, bound = k).
enum class DeviceCheck : int32_t {
  block_table = 1,
  seqlens_k = 2,
  positions = 3,
  finite_w = 4,
  finite_x = 5,
  cu_seqlens_q = 6,
  cu_seqlens_k = 7,
  max_seqlen_q = 8,
  max_seqlen_k = 9,
  slot_mapping = 10,
  static_scale = 11,
  k_scale = 12,
  v_scale = 13,
  perm = 14
};

struct DeviceErrorRecord {
  uint32_t set;          // 0: nothing recorded; the first violation claims it (atomicCAS) and fills the rest
  int32_t op, arg, pad;  // OpId, DeviceCheck
  int64_t i, j;          // the element: arg[i], or arg[i, j] for a 2-D argument (j >= 0)
  int64_t value, bound;
};

// "<op>: <arg>[i(, j)] = <value> must be ... <bound> ..." (or "<op>: w row i holds inf or NaN ..."): the CPU
// backend's error for an index; the device's adds how it was found.
std::string device_check_message(OpId op, DeviceCheck arg, int64_t i, int64_t j, int64_t value, int64_t bound);
inline Status device_check_error(OpId op, DeviceCheck arg, int64_t i, int64_t j, int64_t value, int64_t bound) {
  return invalid_argument(device_check_message(op, arg, i, j, value, bound));
}

// After a CUDA op in debug mode: unless `stream` is being captured, check_errors(device) (which waits for the device).
Status debug_check(int device, Stream stream);

}  // namespace kernelkit::detail

namespace kernelkit::cuda {
// The record's address on `device` (a __device__ variable of the runtime, so no allocation: safe in a graph capture).
Status device_error_record(int device, detail::DeviceErrorRecord** out);
}  // namespace kernelkit::cuda

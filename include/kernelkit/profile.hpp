// Device profiles: the facts about each GPU kernelkit targets, as data.
//
// The table (src/runtime/profile.cpp) is the fallback and the source for `--profile`: at run time the properties the driver
// reports (SM count, shared memory, L2, memory size) win, and the matched profile supplies what the driver does not report
// (bandwidth, feature support as kernelkit uses it). KERNELKIT_PROFILE=t4|a100|h100|h200|... overrides detection, which is
// how the T4 and A100 code paths are exercised on an H200.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kernelkit/dtype.hpp"
#include "kernelkit/status.hpp"

namespace kernelkit {

struct DeviceProfile {
  std::string key;   // "t4", "a100-80gb", ...
  std::string name;  // "NVIDIA T4"
  int sm = 0;        // compute capability x10: 75, 80, 86, 89, 90
  int sms = 0;
  int max_threads_per_sm = 0;
  int max_blocks_per_sm = 0;
  int regs_per_sm = 65536;
  int64_t smem_per_sm = 0;             // bytes
  int64_t smem_per_block_default = 0;  // bytes a block gets without opt-in (48 KB everywhere)
  int64_t smem_per_block_optin = 0;    // bytes a block may get with cudaFuncSetAttribute
  int64_t l2_bytes = 0;
  double hbm_gbps = 0;        // datasheet memory bandwidth, GB/s (1e9 bytes/s)
  int64_t memory_bytes = 0;   // device memory
  double fp32_tflops = 0;     // CUDA-core fp32 peak (datasheet): the ridge point for element-wise work
  double fp16_tc_tflops = 0;  // dense fp16 tensor-core peak (datasheet), for roofline estimates
  double int8_tc_tops = 0;    // dense int8 tensor-core peak (datasheet)
  bool bf16 = false, tf32 = false, fp8 = false, tma = false;
  bool detected = false;      // true when the numbers above were read from a live device
  std::string source;         // "table", "detected: <driver name>", "KERNELKIT_PROFILE=t4"

  bool supports(DType t) const { return (t != DType::bf16 || bf16) && (!is_fp8(t) || fp8); }
  // Why `t` does not run here and what to use instead, as an error's tail: "is not supported on profile t4 (sm_75 has
  // no bf16); use f16" (FP8 below sm_89: bf16 or f16, or INT8). Empty when supports(t).
  std::string dtype_refusal(DType t) const;
  DType recommended_half_dtype() const { return bf16 ? DType::bf16 : DType::f16; }
};

// The built-in table, in a fixed order (t4, a10g, l4, a100-40gb, a100-80gb, h100-sxm, h200).
std::span<const DeviceProfile> profile_table();

// Look up by key or alias ("a100" = a100-80gb, "h100" = h100-sxm); case-insensitive.
std::optional<DeviceProfile> find_profile(std::string_view key);

// Match a driver-reported device name and compute capability to a table entry (e.g. "NVIDIA H200", 90).
std::optional<DeviceProfile> match_profile(std::string_view device_name, int sm, int64_t memory_bytes);

// The profile used for launches on CUDA device `index`: KERNELKIT_PROFILE if set, else the live device's properties
// merged over its matched table entry. Cached per device. Fails with no_device when there is no GPU.
Status active_profile(int device_index, DeviceProfile* out);

// "KERNELKIT_PROFILE" if set and valid; an invalid value is an error naming the valid keys.
Status profile_override(std::optional<DeviceProfile>* out);

std::string describe(const DeviceProfile& p);  // multi-line human-readable summary

}  // namespace kernelkit

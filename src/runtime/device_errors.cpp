// The device checks' message text (CPU checks and the device record) and the debug-mode switch.
#include "runtime/device_errors.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <string>

#include "kernelkit/runtime.hpp"

namespace kernelkit {

namespace {
bool debug_from_env() {
  const char* v = std::getenv("KERNELKIT_CHECK");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}
std::atomic<bool>& debug_flag() {
  static std::atomic<bool> flag{debug_from_env()};
  return flag;
}
}  // namespace

void set_debug_checks(bool on) { debug_flag().store(on, std::memory_order_relaxed); }
bool debug_checks() { return debug_flag().load(std::memory_order_relaxed); }

namespace detail {

std::string device_check_message(OpId op, DeviceCheck arg, int64_t i, int64_t j, int64_t value, int64_t bound) {
  std::string at = "[";
  at += std::to_string(i);
  if (j >= 0) at += ", " + std::to_string(j);
  at += "] = " + std::to_string(value);
  const std::string b = std::to_string(bound);
  std::string what;
  switch (arg) {
    case DeviceCheck::block_table: what = "cache.block_table" + at + " must be a page in [0, " + b + ")"; break;
    case DeviceCheck::seqlens_k:
      what = "cache.seqlens_k" + at + " must be in [0, " + b + "] (the cache capacity)";
      break;
    case DeviceCheck::positions: what = "positions" + at + " is outside the cache [0, " + b + ")"; break;
    case DeviceCheck::perm:
      what = "perm" + at + " must be an input of x in [0, k = " + b + ")";
      break;
    case DeviceCheck::slot_mapping:
      what = "slot_mapping" + at + " must be -1 (skip) or a cache slot in [0, " + b + ")";
      break;
    case DeviceCheck::finite_w:
    case DeviceCheck::finite_x:
      what = std::string(arg == DeviceCheck::finite_w ? "w" : "x") + " row " + std::to_string(i) +
             (j >= 0 ? " (scale group " + std::to_string(j) + ")" : std::string()) +
             " holds inf or NaN; quantization needs finite values";
      break;
    case DeviceCheck::static_scale:
    case DeviceCheck::k_scale:
    case DeviceCheck::v_scale: {
      float v;
      const auto bits = static_cast<uint32_t>(value);
      std::memcpy(&v, &bits, sizeof v);
      std::ostringstream os;
      os << std::setprecision(9) << v;
      if (arg == DeviceCheck::static_scale)
        what = "scale = " + os.str() + " must be finite and > 0 (a static scale)";
      else
        what = std::string(arg == DeviceCheck::k_scale ? "k_scale" : "v_scale") + "[" + std::to_string(i) +
               "] = " + os.str() + " must be finite and > 0 (the e4m3 cache's scale: stored code * scale = value)";
      break;
    }
    case DeviceCheck::cu_seqlens_q:
    case DeviceCheck::cu_seqlens_k: {
      const char* qk = arg == DeviceCheck::cu_seqlens_q ? "q" : "k";
      what = std::string("options.cu_seqlens_") + qk + at + " breaks the rise from 0 to total_" + qk + " = " + b +
             " (0 first, non-decreasing, total_" + qk + " last)";
      break;
    }
    case DeviceCheck::max_seqlen_q:
    case DeviceCheck::max_seqlen_k: {
      const char* qk = arg == DeviceCheck::max_seqlen_q ? "q" : "k";
      what = std::string("sequence ") + std::to_string(i) + " has " + std::to_string(value) +
             (arg == DeviceCheck::max_seqlen_q ? " query" : " key") + " tokens, more than options.max_seqlen_" + qk +
             " = " + b;
      break;
    }
    default: what = "index argument " + std::to_string(static_cast<int>(arg)) + at + " is out of range"; break;
  }
  return std::string(op_info(op).name) + ": " + what;
}

}  // namespace detail
}  // namespace kernelkit

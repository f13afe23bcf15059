#include "runtime/text.hpp"
#include "kernelkit/profile.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>

#include "kernelkit/runtime.hpp"

namespace kernelkit {
namespace {

using detail::lower;

constexpr int64_t KB = 1024;
constexpr int64_t MB = 1024 * KB;
constexpr int64_t GB = 1000LL * 1000 * 1000;  // memory sizes as marketed (16 GB, 80 GB, 141 GB)

DeviceProfile make(std::string key, std::string name, int sm, int sms, int threads_per_sm, int blocks_per_sm,
                   int64_t smem_sm, int64_t smem_optin, int64_t l2, double gbps, int64_t mem, double fp32_tflops,
                   double fp16_tc_tflops, double int8_tc_tops, bool bf16, bool tf32, bool fp8, bool tma) {
  DeviceProfile p;
  p.key = std::move(key);
  p.name = std::move(name);
  p.sm = sm;
  p.sms = sms;
  p.max_threads_per_sm = threads_per_sm;
  p.max_blocks_per_sm = blocks_per_sm;
  p.smem_per_sm = smem_sm;
  p.smem_per_block_default = 48 * KB;
  p.smem_per_block_optin = smem_optin;
  p.l2_bytes = l2;
  p.hbm_gbps = gbps;
  p.memory_bytes = mem;
  p.fp32_tflops = fp32_tflops;
  p.fp16_tc_tflops = fp16_tc_tflops;
  p.int8_tc_tops = int8_tc_tops;
  p.bf16 = bf16;
  p.tf32 = tf32;
  p.fp8 = fp8;
  p.tma = tma;
  p.source = "table";
  return p;
}

// Datasheet / CUDA programming guide values (see docs/profiles.md for sources). fp16_tc_tflops is dense (no sparsity).
const std::array<DeviceProfile, 7>& table() {
  static const std::array<DeviceProfile, 7> t = {
      //    key          name                  sm  SMs thr/SM blk/SM smem/SM  optin     L2       GB/s  memory    fp32  fp16tc int8tc bf16 tf32 fp8 tma
      make("t4", "NVIDIA T4", 75, 40, 1024, 16, 64 * KB, 64 * KB, 4 * MB, 320, 16 * GB, 8.1, 65, 130, false, false, false, false),
      make("a10g", "NVIDIA A10G", 86, 80, 1536, 16, 100 * KB, 99 * KB, 6 * MB, 600, 24 * GB, 31.2, 70, 140, true, true, false, false),
      make("l4", "NVIDIA L4", 89, 58, 1536, 24, 100 * KB, 99 * KB, 48 * MB, 300, 24 * GB, 30.3, 121, 242, true, true, true, false),
      make("a100-40gb", "NVIDIA A100-SXM4-40GB", 80, 108, 2048, 32, 164 * KB, 163 * KB, 40 * MB, 1555, 40 * GB, 19.5, 312, 624, true, true, false, false),
      make("a100-80gb", "NVIDIA A100-SXM4-80GB", 80, 108, 2048, 32, 164 * KB, 163 * KB, 40 * MB, 2039, 80 * GB, 19.5, 312, 624, true, true, false, false),
      make("h100-sxm", "NVIDIA H100 80GB HBM3", 90, 132, 2048, 32, 228 * KB, 227 * KB, 50 * MB, 3350, 80 * GB, 67, 989, 1979, true, true, true, true),
      make("h200", "NVIDIA H200", 90, 132, 2048, 32, 228 * KB, 227 * KB, 60 * MB, 4800, 141 * GB, 67, 989, 1979, true, true, true, true),
  };
  return t;
}

std::string valid_keys() {
  std::string keys;
  for (const auto& p : table()) keys += (keys.empty() ? "" : ", ") + p.key;
  return keys + " (aliases: a100, h100)";
}

}  // namespace

std::span<const DeviceProfile> profile_table() { return table(); }

std::string DeviceProfile::dtype_refusal(DType t) const {
  if (supports(t)) return "";
  const std::string where = "is not supported on profile " + key + " (sm_" + std::to_string(sm);
  if (t == DType::bf16) return where + " has no bf16); use f16";
  // FP8 (sm_89+): the guides' advice for the GPUs without it.
  return where + " has no FP8 tensor cores); use " + (bf16 ? "bf16" : "f16") +
         ", or INT8 weights and activations (quantize_weight, linear_w8a8)";
}

std::optional<DeviceProfile> find_profile(std::string_view key) {
  std::string k = lower(key);
  if (k == "a100") k = "a100-80gb";
  if (k == "h100") k = "h100-sxm";
  for (const auto& p : table())
    if (p.key == k) return p;
  return std::nullopt;
}

std::optional<DeviceProfile> match_profile(std::string_view device_name, int sm, int64_t memory_bytes) {
  const std::string n = lower(device_name);
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  const char* key = nullptr;
  if (has("h200")) key = "h200";
  else if (has("h100")) key = "h100-sxm";
  else if (has("a100")) key = memory_bytes > 48 * GB ? "a100-80gb" : "a100-40gb";
  else if (has("a10g")) key = "a10g";
  else if (has(" l4")) key = "l4";
  else if (has("t4")) key = "t4";
  if (key) {
    auto p = find_profile(key);
    if (p && p->sm == sm) return p;
  }
  // Unknown device: the nearest entry of the same architecture family supplies the unreported facts.
  const DeviceProfile* best = nullptr;
  for (const auto& p : table())
    if (p.sm <= sm && (!best || p.sm > best->sm)) best = &p;
  if (!best) return std::nullopt;
  DeviceProfile p = *best;
  p.key = "sm" + std::to_string(sm);
  p.name = std::string(device_name);
  return p;
}

Status profile_override(std::optional<DeviceProfile>* out) {
  out->reset();
  const char* env = std::getenv("KERNELKIT_PROFILE");
  if (!env || !*env || lower(env) == "native") return Status::Ok();
  auto p = find_profile(env);
  if (!p)
    return invalid_argument(std::string("KERNELKIT_PROFILE='") + env + "' is not a known profile; expected one of " +
                            valid_keys() + " or 'native'");
  p->source = std::string("KERNELKIT_PROFILE=") + env;
  *out = std::move(p);
  return Status::Ok();
}

Status active_profile(int device_index, DeviceProfile* out) {
  static std::mutex mu;
  static std::map<int, DeviceProfile> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(device_index); it != cache.end()) {
    *out = it->second;
    return Status::Ok();
  }
  DeviceFacts f;
  KK_RETURN_IF_ERROR(query_device(device_index, &f));
  std::optional<DeviceProfile> forced;
  KK_RETURN_IF_ERROR(profile_override(&forced));
  DeviceProfile p;
  if (forced) {
    p = *forced;  // the forced profile's facts stand in for the device's: that is the point of the override
  } else {
    auto m = match_profile(f.name, f.sm, f.memory_bytes);
    if (!m) return unsupported("CUDA device " + std::to_string(device_index) + " (" + f.name + ", sm_" +
                               std::to_string(f.sm) + ") is older than sm_75, the oldest architecture kernelkit supports");
    p = *m;
    // Measured properties win over the table.
    p.sms = f.sms;
    p.max_threads_per_sm = f.max_threads_per_sm;
    p.max_blocks_per_sm = f.max_blocks_per_sm;
    p.regs_per_sm = f.regs_per_sm;
    p.smem_per_sm = f.smem_per_sm;
    p.smem_per_block_default = f.smem_per_block_default;
    p.smem_per_block_optin = f.smem_per_block_optin;
    p.l2_bytes = f.l2_bytes;
    p.memory_bytes = f.memory_bytes;
    p.detected = true;
    p.source = "detected: " + f.name + " (driver " + f.driver_version + ")";
  }
  cache[device_index] = p;
  *out = std::move(p);
  return Status::Ok();
}

std::string describe(const DeviceProfile& p) {
  std::ostringstream os;
  auto yes = [](bool b) { return b ? "yes" : "no"; };
  os << "profile            " << p.key << " (" << p.name << ")\n"
     << "source             " << p.source << "\n"
     << "architecture       sm_" << p.sm << "\n"
     << "SMs                " << p.sms << "\n"
     << "threads / SM       " << p.max_threads_per_sm << "\n"
     << "blocks / SM        " << p.max_blocks_per_sm << "\n"
     << "smem / SM          " << p.smem_per_sm / KB << " KB\n"
     << "smem / block       " << p.smem_per_block_default / KB << " KB default, " << p.smem_per_block_optin / KB
     << " KB opt-in max\n"
     << "L2                 " << p.l2_bytes / MB << " MB\n"
     << "memory             " << static_cast<double>(p.memory_bytes) / GB << " GB\n"
     << "bandwidth          " << p.hbm_gbps << " GB/s (datasheet)\n"
     << "fp32 / fp16 / int8 " << p.fp32_tflops << " / " << p.fp16_tc_tflops << " / " << p.int8_tc_tops
     << " T(FL)OP/s (datasheet, dense; fp16 and int8 on tensor cores)\n"
     << "bf16 / tf32 / fp8 / tma  " << yes(p.bf16) << " / " << yes(p.tf32) << " / " << yes(p.fp8) << " / "
     << yes(p.tma) << "\n"
     << "recommended dtype  " << dtype_name(p.recommended_half_dtype()) << (p.bf16 ? "" : " (no bf16 on this GPU)")
     << "\n";
  return os.str();
}

}  // namespace kernelkit

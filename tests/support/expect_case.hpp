// The GPU tests' verdict on one case: refused with `unsupported` when the active profile lacks the dtype (bf16 on a
// T4 profile), else run, checked element by element, and no mismatch.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "runtime/sm90a.hpp"
#include "kernelkit/profile.hpp"
#include "testing/harness.hpp"

// Skips the calling test where the sm_90a kernels cannot run: a build without sm_90a code (arch list without 90 /
// native: the A100 / T4 paths) or a GPU other than compute capability 9.0. Sets `device` to the current device.
#define KK_SKIP_WITHOUT_SM90A(device)                                                                                 \
  do {                                                                                                                \
    ASSERT_EQ(cudaGetDevice(&(device)), cudaSuccess);                                                                 \
    if (!kernelkit::cuda::sm90a_available(device))                                                                    \
      GTEST_SKIP() << "no sm_90a code in this build (arch list without 90 / native) or not a compute capability 9.0 " \
                      "GPU";                                                                                          \
  } while (0)

// As above, and also skips where the active profile is not an sm_90 one (KERNELKIT_PROFILE=a100 / t4 on the H200: the
// planner refuses wgmma for those). Sets `prof` to the active profile.
#define KK_SKIP_WITHOUT_WGMMA_PROFILE(prof)                                                           \
  do {                                                                                                \
    int device_ = 0;                                                                                  \
    KK_SKIP_WITHOUT_SM90A(device_);                                                                   \
    ASSERT_TRUE(kernelkit::active_profile(device_, &(prof)).ok());                                    \
    if ((prof).sm != 90)                                                                              \
      GTEST_SKIP() << "profile " << (prof).key << " is not an sm_90 one (the planner refuses wgmma)"; \
  } while (0)

namespace kernelkit::testing {

inline const DeviceProfile& case_profile() {
  static const DeviceProfile prof = [] {
    DeviceProfile p;
    EXPECT_TRUE(active_profile(0, &p).ok());
    return p;
  }();
  return prof;
}

inline void expect_case(const CaseResult& r, DType dtype, const std::string& name) {
  const DeviceProfile& prof = case_profile();
  if (!prof.supports(dtype)) {
    EXPECT_EQ(r.status.code(), StatusCode::unsupported) << name << ": " << r.status.to_string();
    return;
  }
  ASSERT_TRUE(r.status.ok()) << name << ": " << r.status.to_string();
  EXPECT_GT(r.checked, 0);
  EXPECT_EQ(r.mismatches, 0) << name << " (worst error ratio " << r.worst_ratio << ")\n" << r.detail;
}

// The same for op `op`, which a profile without FP8 refuses when the op reads or writes FP8 (op_fp8_dtype): that
// refusal is checked and the test reported as skipped, with the reason.
inline void expect_case(const CaseResult& r, OpId op, DType dtype, const std::string& name) {
  if (const auto fp8 = op_fp8_dtype(op); fp8 && !case_profile().supports(*fp8)) {
    EXPECT_EQ(r.status.code(), StatusCode::unsupported) << name << ": " << r.status.to_string();
    GTEST_SKIP() << name << ": profile " << case_profile().key << " has no FP8 (refused: " << r.status.message() << ")";
  }
  expect_case(r, dtype, name);
}

// An environment variable set for a scope (KERNELKIT_TUNE, KERNELKIT_W8A8: read at every call), then restored.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);  // null: unset for the scope
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// A device copy of `h` (the test fails if it cannot be made).
inline DeviceBuffer upload(const HostBuffer& h) {
  DeviceBuffer d;
  EXPECT_TRUE(d.alloc(h.bytes()).ok());
  EXPECT_TRUE(d.upload(h).ok());
  return d;
}

}  // namespace kernelkit::testing

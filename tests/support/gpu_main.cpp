// GPU test entry: without a CUDA device, say so and exit 77 (CTest: skipped). Never reported as passed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "kernelkit/profile.hpp"
#include "kernelkit/runtime.hpp"

int main(int argc, char** argv) {
  if (kernelkit::cuda_device_count() == 0) {
    std::printf("kernelkit GPU tests: SKIPPED: no CUDA device on this machine (%s)\n",
                kernelkit::built_with_cuda() ? "CUDA build" : "CPU-only build");
    return 77;
  }
  kernelkit::DeviceProfile p;
  const kernelkit::Status s = kernelkit::active_profile(0, &p);
  if (!s.ok()) {
    std::printf("kernelkit GPU tests: cannot resolve the profile: %s\n", s.to_string().c_str());
    return 1;
  }
  // Debug mode (KERNELKIT_CHECK=1): every op waits for its stream and reads the device's index record, so a kernel
  // that met a bad index fails the test that ran it.
  kernelkit::set_debug_checks(true);
  std::printf("kernelkit GPU tests on profile %s (%s)\n", p.key.c_str(), p.source.c_str());
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

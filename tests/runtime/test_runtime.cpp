// The runtime's host-side facts that need no GPU: the TrustedDevicePointers scope.
#include <gtest/gtest.h>

#include <thread>

#include "kernelkit/runtime.hpp"

using namespace kernelkit;

TEST(TrustedDevicePointers, ScopesNestAndStayOnTheirThread) {
  EXPECT_FALSE(device_pointers_trusted());
  {
    TrustedDevicePointers outer;
    EXPECT_TRUE(device_pointers_trusted());
    {
      TrustedDevicePointers inner;
      EXPECT_TRUE(device_pointers_trusted());
    }
    EXPECT_TRUE(device_pointers_trusted());  // the inner scope restores the outer one's state, not "untrusted"
    bool other = true;
    std::thread([&] { other = device_pointers_trusted(); }).join();
    EXPECT_FALSE(other);  // another thread's calls are still checked
  }
  EXPECT_FALSE(device_pointers_trusted());
}

// The runtime's host-side facts that need no GPU: the TrustedDevicePointers scope, the index check's messages and
// switches.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <thread>

#include "kernelkit/c_api.h"
#include "kernelkit/runtime.hpp"
#include "runtime/device_errors.hpp"

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

TEST(DeviceErrors, MessagesNameOpArgumentIndexValueAndBound) {
  using detail::DeviceCheck;
  EXPECT_EQ(detail::device_check_message(OpId::decode_attention, DeviceCheck::block_table, 1, 3, 99, 4),
            "decode_attention: cache.block_table[1, 3] = 99 must be a page in [0, 4)");
  EXPECT_EQ(detail::device_check_message(OpId::decode_attention, DeviceCheck::seqlens_k, 0, -1, -7, 64),
            "decode_attention: cache.seqlens_k[0] = -7 must be in [0, 64] (the cache capacity)");
  const int64_t huge = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(detail::device_check_message(OpId::rotary_embedding, DeviceCheck::positions, 5, -1, huge, 100),
            "rotary_embedding: positions[5] = 9223372036854775807 is outside the cache [0, 100)");
  const Status s = detail::device_check_error(OpId::rotary_embedding, DeviceCheck::positions, 0, -1, 100, 100);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
}

TEST(DeviceErrors, DebugSwitchAndCheckWithoutADevice) {
  const bool previous = debug_checks();
  set_debug_checks(true);
  EXPECT_TRUE(debug_checks());
  set_debug_checks(false);
  EXPECT_FALSE(debug_checks());
  set_debug_checks(previous);
  if (cuda_device_count() == 0) {  // nothing can have been recorded: Ok, also through the C ABI
    EXPECT_TRUE(check_errors(0).ok());
    EXPECT_EQ(kk_check_errors(0), 0);
  }
}

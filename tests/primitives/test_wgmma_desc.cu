// The wgmma descriptor arithmetic of the sm_90a prefill, run on the host from the header the kernels use
// (src/kernels/common/wgmma.cuh): a descriptor stepped by wgmma_desc_add must equal the one wgmma_desc_sw128 builds
// at the stepped address, for every 1024-byte-aligned tile base in a block's shared memory and every offset the MMA
// loops add (k steps of 32 bytes, column blocks, 16-key steps of 2048 bytes, K/V buffers), with each leading offset
// they use. A carry out of the address field would point an MMA at another tile: wrong attention, no error.
#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/common/wgmma.cuh"

using kernelkit::cuda::wgmma_desc_add;
using kernelkit::cuda::wgmma_desc_sw128;

TEST(WgmmaDescriptor, SteppedDescriptorsMatchTheAddressedOnes) {
  constexpr uint32_t kSmem = 227 * 1024;  // the most shared memory a block may have on sm_90
  constexpr uint32_t kAtom = 1024;
  int checked = 0;
  for (uint32_t leading : {16u, kAtom, 64u * 128u, 128u * 128u})  // K-major, MN-major n64, MN-major n128 (BN 64 / 128)
    for (uint32_t base = 0; base < kSmem; base += kAtom)
      for (uint32_t off = 0; base + off < kSmem; off += 32) {  // every 32-byte step: a superset of the loops' offsets
        const uint64_t want = wgmma_desc_sw128(base + off, leading, kAtom);
        const uint64_t got = wgmma_desc_add(wgmma_desc_sw128(base, leading, kAtom), off);
        ASSERT_EQ(got, want) << "base " << base << " offset " << off << " leading " << leading;
        ++checked;
      }
  EXPECT_GT(checked, 1000000);
  // The fields: start address >> 4 in bits 0-13, leading >> 4 in 16-29, stride >> 4 in 32-45, the 128-byte swizzle.
  const uint64_t d = wgmma_desc_sw128(0x12340, 2048, kAtom);
  EXPECT_EQ(d & 0x3FFF, 0x1234u);
  EXPECT_EQ((d >> 16) & 0x3FFF, 2048u >> 4);
  EXPECT_EQ((d >> 32) & 0x3FFF, kAtom >> 4);
  EXPECT_EQ(d >> 62, 1u);
}

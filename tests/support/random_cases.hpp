// Seeded random cases (a family's random_<family>_case) run as one test: `count` seeds drawn from the gtest random
// seed, fresh every run (time-based) unless --gtest_random_seed=N is given; a failure names the seed, the case and
// the flag that replays it, so it can be pinned as a fixed test.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "testing/harness.hpp"

namespace kernelkit::testing {

template <class Make, class Check>
void for_random_cases(int count, Make make, Check check) {
  const uint64_t base = static_cast<uint64_t>(::testing::UnitTest::GetInstance()->random_seed()) * 100000;
  for (int i = 0; i < count; ++i) {
    const uint64_t seed = base + static_cast<uint64_t>(i);
    const auto c = make(seed);
    SCOPED_TRACE("case seed " + std::to_string(seed) + " (--gtest_random_seed=" +
                 std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "): " + c.name());
    check(c);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// The CPU backend's verdict on one case's invariants (check_<family>_properties).
inline void expect_properties(const CaseResult& r, const std::string& name) {
  ASSERT_TRUE(r.status.ok()) << name << ": " << r.status.to_string();
  EXPECT_GT(r.checked, 0);
  EXPECT_EQ(r.mismatches, 0) << name << "\n" << r.detail;
}

}  // namespace kernelkit::testing

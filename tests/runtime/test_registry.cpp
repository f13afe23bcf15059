// The registry (kernelkit/ops.def) from C++: every row is well formed and every op is covered by its family's verify
// cases, so a new row without cases fails here (tests/runtime/check_registry.py checks the bindings against it).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kernelkit/op_info.hpp"
#include "testing/cases.hpp"

namespace kernelkit {
namespace {

TEST(Registry, RowsAreWellFormed) {
  std::set<std::string> names;
  for (const OpInfo& op : op_table()) {
    EXPECT_EQ(&op_info(op.id), &op) << op.name;
    EXPECT_TRUE(names.insert(std::string(op.name)).second) << "duplicate name " << op.name;
    EXPECT_EQ(parse_op(op.name), op.id) << op.name;
    EXPECT_NE(op.dtypes, 0u) << op.name << " takes no dtype";
    EXPECT_FALSE(op.formula.empty()) << op.name;
    EXPECT_FALSE(op.python.empty()) << op.name << " has no Python function";
    EXPECT_NE(family_name(op.family), "?") << op.name;
  }
  EXPECT_FALSE(parse_op("no_such_op").has_value());
}

TEST(Registry, EveryOpHasVerifyCasesInEveryDtype) {
  for (const OpInfo& op : op_table())
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      if (!(op.dtypes & dtype_bit(dt))) continue;
      const testing::VerifyCases enumerate = testing::verify_cases(op.family);
      ASSERT_NE(enumerate, nullptr) << op.name << ": family " << family_name(op.family) << " has no verify cases";
      for (bool cuda : {false, true}) {
        std::vector<testing::VerifyCase> cases;
        uint64_t seed = 1;
        enumerate(op.id, dt, testing::VerifyGrid{cuda, 0, false}, &seed, &cases);
        EXPECT_FALSE(cases.empty()) << op.name << " " << dtype_name(dt) << (cuda ? " (cuda)" : " (cpu)");
        EXPECT_EQ(seed, 1 + cases.size()) << op.name << ": one seed a case";
      }
    }
}

}  // namespace
}  // namespace kernelkit

#include "host_steal.h"

#include <gtest/gtest.h>

namespace tumbler::bench {
namespace {

TEST(HostStealTest, ReadsTheEighthFieldOfTheAggregateLine) {
  EXPECT_EQ(ParseStealTicks("cpu  1355772 73271 279388 2000524 43032 0 69487 10703 0 0\n"
                            "cpu0 1 2 3 4 5 6 7 8 0 0\n"),
            10703u);
  EXPECT_EQ(ParseStealTicks("cpu 1 2 3 4 5 6 7 8"), 8u);  // single space, no newline
}

TEST(HostStealTest, RejectsWhatIsNotTheAggregateLine) {
  EXPECT_EQ(ParseStealTicks(""), std::nullopt);
  EXPECT_EQ(ParseStealTicks("cpu0 1 2 3 4 5 6 7 8 0 0\n"), std::nullopt);
  EXPECT_EQ(ParseStealTicks("intr 1 2 3\n"), std::nullopt);
  EXPECT_EQ(ParseStealTicks("cpu  1 2 3 4 5 6 7\ncpu0 1 2 3 4 5 6 7 8\n"),
            std::nullopt);  // an old kernel: no steal field on the first line
  EXPECT_EQ(ParseStealTicks("cpu  1 2 3 x 5 6 7 8\n"), std::nullopt);
}

TEST(HostStealTest, MachineStealIsReadableAndNeverGoesBack) {
  std::optional<double> a = MachineStealSeconds();
  ASSERT_TRUE(a.has_value());  // every Linux CI machine has /proc/stat with the field
  std::optional<double> b = MachineStealSeconds();
  ASSERT_TRUE(b.has_value());
  EXPECT_GE(*a, 0.0);
  EXPECT_GE(*b, *a);
}

}  // namespace
}  // namespace tumbler::bench

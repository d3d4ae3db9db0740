#include "client/hold_table.h"

#include <gtest/gtest.h>

#include "core/limits.h"

namespace tumbler::client {
namespace {

using Step = HoldTable::Step;
const HoldTable::Key kA{"a", "t1"};
const HoldTable::Key kA2{"a", "t2"};

TEST(HoldTable, FirstAcquireAsksThenNestedAreLocal) {
  HoldTable t;
  EXPECT_EQ(t.BeginAcquire(kA, LockMode::kExclusive), Step::kAsk);
  t.Granted(kA, LockMode::kExclusive, 17, 1);
  t.End(kA);
  EXPECT_EQ(t.Token(kA), 17u);
  EXPECT_EQ(t.Count(kA), 1u);
  EXPECT_EQ(t.BeginAcquire(kA, LockMode::kExclusive), Step::kDone);
  EXPECT_EQ(t.BeginAcquire(kA, LockMode::kExclusive), Step::kDone);
  EXPECT_EQ(t.Count(kA), 3u);
  EXPECT_EQ(t.Token(kA), 17u);
  EXPECT_EQ(t.BeginRelease(kA, LockMode::kExclusive), Step::kDone);
  EXPECT_EQ(t.BeginRelease(kA, LockMode::kExclusive), Step::kDone);
  EXPECT_EQ(t.BeginRelease(kA, LockMode::kExclusive), Step::kAsk);
  EXPECT_EQ(t.Count(kA), 0u);
  EXPECT_EQ(t.Token(kA), 0u);
  EXPECT_EQ(t.Excess(kA), 1u);  // the server still counts the hold
  t.Observe(kA, 0);             // UNLOCK replied 0
  EXPECT_EQ(t.Excess(kA), 0u);
  t.End(kA);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_FALSE(t.RepairsPending());
}

TEST(HoldTable, ThreadsAreSeparateHolders) {
  HoldTable t;
  EXPECT_EQ(t.BeginAcquire(kA, LockMode::kShared), Step::kAsk);
  EXPECT_EQ(t.BeginAcquire(kA2, LockMode::kShared), Step::kAsk);  // not busy: another key
  t.Granted(kA, LockMode::kShared, 5, 1);
  t.Granted(kA2, LockMode::kShared, 6, 1);
  t.End(kA);
  t.End(kA2);
  EXPECT_EQ(t.Token(kA), 5u);
  EXPECT_EQ(t.Token(kA2), 6u);
  EXPECT_EQ(t.BeginRelease(kA2, LockMode::kShared), Step::kAsk);
  t.Observe(kA2, 0);
  t.End(kA2);
  EXPECT_EQ(t.Count(kA), 1u);
  EXPECT_EQ(t.Count(kA2), 0u);
}

TEST(HoldTable, ReleaseWithoutHoldIsNotHeld) {
  HoldTable t;
  EXPECT_EQ(t.BeginRelease(kA, LockMode::kExclusive), Step::kNotHeld);
  EXPECT_EQ(t.size(), 0u);
  ASSERT_EQ(t.BeginAcquire(kA, LockMode::kShared), Step::kAsk);
  t.Granted(kA, LockMode::kShared, 1, 1);
  t.End(kA);
  // Held shared: an exclusive release is not this holder's to make.
  EXPECT_EQ(t.BeginRelease(kA, LockMode::kExclusive), Step::kNotHeld);
  EXPECT_EQ(t.BeginRelease(kA2, LockMode::kShared), Step::kNotHeld);
}

TEST(HoldTable, OtherModeIsWrongMode) {
  HoldTable t;
  ASSERT_EQ(t.BeginAcquire(kA, LockMode::kShared), Step::kAsk);
  t.Granted(kA, LockMode::kShared, 1, 1);
  t.End(kA);
  EXPECT_EQ(t.BeginAcquire(kA, LockMode::kExclusive), Step::kWrongMode);
  EXPECT_EQ(t.Count(kA), 1u);
}

TEST(HoldTable, BusyEntryMakesOthersWait) {
  HoldTable t;
  ASSERT_EQ(t.BeginAcquire(kA, LockMode::kExclusive), Step::kAsk);
  EXPECT_EQ(t.BeginAcquire(kA, LockMode::kExclusive), Step::kBusy);
  EXPECT_EQ(t.BeginRelease(kA, LockMode::kExclusive), Step::kBusy);
  t.Observe(kA, 0);  // refused
  t.End(kA);
  EXPECT_EQ(t.size(), 0u);
}

TEST(HoldTable, NestedCountIsBounded) {
  HoldTable t;
  ASSERT_EQ(t.BeginAcquire(kA, LockMode::kExclusive), Step::kAsk);
  t.Granted(kA, LockMode::kExclusive, 1, 1);
  t.End(kA);
  for (uint32_t i = 1; i < limits::kHoldCountMax; ++i) {
    ASSERT_EQ(t.BeginAcquire(kA, LockMode::kExclusive), Step::kDone);
  }
  EXPECT_EQ(t.BeginAcquire(kA, LockMode::kExclusive), Step::kLimit);
  EXPECT_EQ(t.Count(kA), limits::kHoldCountMax);
}

TEST(HoldTable, UnsureAcquireNeedsRepair) {
  HoldTable t;
  ASSERT_EQ(t.BeginAcquire(kA, LockMode::kExclusive), Step::kAsk);
  t.MarkUnknown(kA);  // LOCK sent, connection broke, no reply
  EXPECT_FALSE(t.Excess(kA).has_value());
  t.End(kA);
  EXPECT_TRUE(t.RepairsPending());
  std::vector<HoldTable::Key> repairs = t.BeginRepairs();
  ASSERT_EQ(repairs.size(), 1u);
  EXPECT_TRUE(t.BeginRepairs().empty());  // now busy
  t.Observe(kA, 1);  // INSPECT: it was granted after all
  EXPECT_EQ(t.Excess(kA), 1u);
  t.Observe(kA, 0);  // UNLOCK replied 0
  t.End(kA);
  EXPECT_FALSE(t.RepairsPending());
  EXPECT_EQ(t.size(), 0u);
}

TEST(HoldTable, GrantWithSurplusCountIsRepaired) {
  // The first LOCK was granted but its reply lost; the retry was a reentrant
  // grant with count 2. The thread holds the lock once; one UNLOCK is owed.
  HoldTable t;
  ASSERT_EQ(t.BeginAcquire(kA, LockMode::kExclusive), Step::kAsk);
  t.MarkUnknown(kA);
  t.Granted(kA, LockMode::kExclusive, 9, 2);
  EXPECT_EQ(t.Excess(kA), 1u);
  t.End(kA);
  EXPECT_EQ(t.Count(kA), 1u);
  EXPECT_EQ(t.Token(kA), 9u);
  EXPECT_TRUE(t.RepairsPending());
  ASSERT_EQ(t.BeginRepairs().size(), 1u);
  t.Observe(kA, 1);  // UNLOCK replied 1: the thread's own hold remains
  t.End(kA);
  EXPECT_FALSE(t.RepairsPending());
  EXPECT_EQ(t.Count(kA), 1u);
}

TEST(HoldTable, UnconfirmedReleaseStaysOwed) {
  HoldTable t;
  ASSERT_EQ(t.BeginAcquire(kA, LockMode::kExclusive), Step::kAsk);
  t.Granted(kA, LockMode::kExclusive, 3, 1);
  t.End(kA);
  ASSERT_EQ(t.BeginRelease(kA, LockMode::kExclusive), Step::kAsk);
  t.End(kA);  // UNLOCK could not be sent at all
  EXPECT_EQ(t.Excess(kA), 1u);
  EXPECT_TRUE(t.RepairsPending());
  // The thread locks again before the repair ran: the acquire settles the
  // surplus first (the caller repairs while the entry is busy).
  ASSERT_EQ(t.BeginAcquire(kA, LockMode::kExclusive), Step::kAsk);
  EXPECT_EQ(t.Excess(kA), 1u);
  t.Observe(kA, 0);
  t.Granted(kA, LockMode::kExclusive, 4, 1);
  t.End(kA);
  EXPECT_FALSE(t.RepairsPending());
  EXPECT_EQ(t.Token(kA), 4u);
}

TEST(HoldTable, ServerBelowLocalKeepsLocalCount) {
  // After a session loss the server holds nothing; the thread's unlock()
  // must still balance its lock(), so the local count stays.
  HoldTable t;
  ASSERT_EQ(t.BeginAcquire(kA, LockMode::kExclusive), Step::kAsk);
  t.Granted(kA, LockMode::kExclusive, 3, 1);
  t.End(kA);
  ASSERT_EQ(t.BeginAcquire(kA, LockMode::kExclusive), Step::kDone);
  ASSERT_EQ(t.BeginRelease(kA, LockMode::kExclusive), Step::kDone);
  ASSERT_EQ(t.BeginRelease(kA, LockMode::kExclusive), Step::kAsk);
  t.Observe(kA, 0);
  t.End(kA);
  EXPECT_EQ(t.size(), 0u);
}

}  // namespace
}  // namespace tumbler::client

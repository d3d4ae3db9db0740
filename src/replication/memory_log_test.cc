// The in-memory log: committed on the loop's next turn, in order, ApplyEntry
// before done(OK), bounded, no spinning when idle, no re-entry.
#include <uv.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/limits.h"
#include "replication/replicated_log.h"

namespace tumbler::replication {
namespace {

class EventHooks final : public StateMachineHooks {
 public:
  void ApplyEntry(std::string_view entry) override {
    events.push_back("apply " + std::string(entry));
    if (on_apply) on_apply();
  }
  void EncodeSnapshot(std::string*) override { ADD_FAILURE() << "memory log took a snapshot"; }
  Status RestoreSnapshot(std::string_view) override {
    ADD_FAILURE() << "memory log restored a snapshot";
    return Status::Ok();
  }
  std::vector<std::string> events;
  std::function<void()> on_apply;
};

class MemoryLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    log_ = OpenMemoryLog(&loop_, &hooks_);
  }
  void TearDown() override {
    log_.reset();
    uv_run(&loop_, UV_RUN_NOWAIT);  // the idle handle's close callback
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  ReplicatedLog::DoneFn Record(std::string name) {
    return [this, name](Status status) {
      events().push_back("done " + name + (status.ok() ? "" : " " + status.ToString()));
    };
  }
  std::vector<std::string>& events() { return hooks_.events; }

  uv_loop_t loop_{};
  EventHooks hooks_;
  std::unique_ptr<ReplicatedLog> log_;
};

TEST_F(MemoryLogTest, StatusOfAFreshLog) {
  LogStatus status = log_->GetStatus();
  EXPECT_EQ(status.role, Role::kLeader);
  EXPECT_EQ(status.term, 1u);
  EXPECT_EQ(status.node_id, 1u);
  EXPECT_EQ(status.leader_id, 1u);
  EXPECT_EQ(status.last_index, 0u);
  EXPECT_EQ(status.applied_index, 0u);
  EXPECT_EQ(log_->in_flight(), 0u);
}

TEST_F(MemoryLogTest, CommitsOnTheNextTurnInOrderApplyBeforeDone) {
  ASSERT_TRUE(log_->Propose("a", Record("a")).ok());
  ASSERT_TRUE(log_->Barrier(Record("barrier")).ok());
  ASSERT_TRUE(log_->Propose("b", Record("b")).ok());
  EXPECT_TRUE(events().empty());  // never inside Propose
  EXPECT_EQ(log_->in_flight(), 3u);
  EXPECT_EQ(log_->GetStatus().last_index, 3u);
  EXPECT_EQ(log_->GetStatus().applied_index, 0u);

  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_EQ(events(), (std::vector<std::string>{"apply a", "done a", "done barrier", "apply b",
                                                "done b"}));
  EXPECT_EQ(log_->in_flight(), 0u);
  LogStatus status = log_->GetStatus();
  EXPECT_EQ(status.commit_index, 3u);
  EXPECT_EQ(status.applied_index, 3u);
  EXPECT_EQ(status.last_index, 3u);
}

TEST_F(MemoryLogTest, LoopDoesNotBlockWhilePendingAndExitsWhenIdle) {
  // A loop with only the log's handle: UV_RUN_DEFAULT returns once the
  // entries are committed (the idle handle stops; nothing keeps it alive).
  ASSERT_TRUE(log_->Propose("x", Record("x")).ok());
  EXPECT_EQ(uv_run(&loop_, UV_RUN_DEFAULT), 0);
  EXPECT_EQ(events(), (std::vector<std::string>{"apply x", "done x"}));
  EXPECT_EQ(uv_run(&loop_, UV_RUN_DEFAULT), 0);  // idle: returns at once
}

TEST_F(MemoryLogTest, InFlightIsBounded) {
  for (uint32_t i = 0; i < limits::kBatchesInFlightMax; ++i) {
    ASSERT_TRUE(log_->Propose(std::to_string(i), [](Status) {}).ok());
  }
  EXPECT_EQ(log_->Propose("over", [](Status) { FAIL(); }).code(), StatusCode::kLimit);
  EXPECT_EQ(log_->Barrier([](Status) { FAIL(); }).code(), StatusCode::kLimit);
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_EQ(log_->in_flight(), 0u);
  EXPECT_EQ(hooks_.events.size(), limits::kBatchesInFlightMax);
  EXPECT_EQ(hooks_.events.back(), "apply " + std::to_string(limits::kBatchesInFlightMax - 1));
  EXPECT_TRUE(log_->Propose("again", [](Status) {}).ok());
}

TEST_F(MemoryLogTest, OversizeEntryIsALimitError) {
  std::string oversize(limits::kEntryBytesMax + 1, 'o');
  EXPECT_EQ(log_->Propose(oversize, [](Status) { FAIL(); }).code(), StatusCode::kLimit);
  EXPECT_TRUE(log_->Propose("", Record("empty")).ok());
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_EQ(events(), (std::vector<std::string>{"apply ", "done empty"}));
}

TEST_F(MemoryLogTest, DestroyingDropsPendingWithoutCallingDone) {
  ASSERT_TRUE(log_->Propose("a", [](Status) { FAIL() << "called after destruction"; }).ok());
  log_.reset();
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_TRUE(events().empty());
}

TEST_F(MemoryLogTest, ProposeFromACallbackAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        hooks_.on_apply = [this] { (void)log_->Propose("again", [](Status) {}); };
        (void)log_->Propose("first", [](Status) {});
        uv_run(&loop_, UV_RUN_NOWAIT);
      },
      "inside one of its callbacks");
  EXPECT_DEATH(
      {
        (void)log_->Propose("first", [this](Status) { (void)log_->Barrier([](Status) {}); });
        uv_run(&loop_, UV_RUN_NOWAIT);
      },
      "inside one of its callbacks");
}

}  // namespace
}  // namespace tumbler::replication

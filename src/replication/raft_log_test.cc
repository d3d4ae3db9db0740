// Tests of the libraft-backed log: order and done semantics, the in-flight
// bound, restart after a crash (a forked first incarnation that _exits, as a
// real shutdown does), snapshots, and the bad inputs of OpenRaftLog.
//
// A started raft log is never destroyed (crash-only, see ~RaftLog): every
// test's nodes, loops included, are parked in a static list when the test
// ends and their loops are never run again.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/limits.h"
#include "replication/raft_status.h"
#include "replication/replicated_log.h"
#include "replication/raft_frames.h"

namespace tumbler::replication {
namespace {

using std::chrono::milliseconds;

std::string EntryFor(uint32_t i) {
  // Lengths vary so that entries straddle the 8-byte padding of the segments.
  return "entry-" + std::to_string(i) + std::string(i % 11, 'x');
}

uint64_t MixHash(uint64_t hash, std::string_view entry) {
  return Fnv1a64(std::to_string(hash) + ":" + std::string(entry));
}

constexpr uint64_t kHashStart = 1469598103934665603ULL;

uint64_t ExpectedHash(uint32_t count) {
  uint64_t hash = kHashStart;
  for (uint32_t i = 0; i < count; ++i) hash = MixHash(hash, EntryFor(i));
  return hash;
}

// A state machine whose state is (count, running hash of every entry); the
// snapshot is those two numbers. `applied` lists what was applied since
// start or since the last restore.
class RecordingHooks final : public StateMachineHooks {
 public:
  void ApplyEntry(std::string_view entry) override {
    applied.emplace_back(entry);
    events.push_back("apply " + std::string(entry));
    ++count;
    hash = MixHash(hash, entry);
    if (on_apply) on_apply(entry);
  }
  void EncodeSnapshot(std::string* out) override {
    ++snapshots_encoded;
    out->append(reinterpret_cast<const char*>(&count), sizeof count);
    out->append(reinterpret_cast<const char*>(&hash), sizeof hash);
  }
  Status RestoreSnapshot(std::string_view snapshot) override {
    if (refuse_restore) return Status(StatusCode::kErr, "refused by the test");
    if (snapshot.size() != 16) return Status(StatusCode::kErr, "snapshot is not 16 bytes");
    std::memcpy(&count, snapshot.data(), 8);
    std::memcpy(&hash, snapshot.data() + 8, 8);
    applied.clear();
    ++restores;
    restored_count = count;
    return Status::Ok();
  }

  std::vector<std::string> applied;
  std::vector<std::string> events;
  uint64_t count = 0;
  uint64_t hash = kHashStart;
  int snapshots_encoded = 0;
  int restores = 0;
  uint64_t restored_count = 0;
  bool refuse_restore = false;
  std::function<void(std::string_view)> on_apply;
};

// One process's view of a data dir: a loop, the hooks and the log.
struct Node {
  uv_loop_t loop{};
  uv_timer_t wake{};  // bounds each uv_run(ONCE) so deadlines are checked
  RecordingHooks hooks;
  std::unique_ptr<ReplicatedLog> log;
};

// Where nodes go when their test ends: reachable, never destroyed.
std::vector<std::unique_ptr<Node>>& Parked() {
  static auto* parked = new std::vector<std::unique_ptr<Node>>();
  return *parked;
}

std::unique_ptr<Node> NewNode() {
  auto node = std::make_unique<Node>();
  EXPECT_EQ(uv_loop_init(&node->loop), 0);
  EXPECT_EQ(uv_timer_init(&node->loop, &node->wake), 0);
  return node;
}

// Runs the node's loop until `done()` or the timeout; returns done(). The
// wake timer makes every uv_run(ONCE) return within 2 ms.
bool RunUntil(Node* node, const std::function<bool()>& done, milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  uv_timer_start(&node->wake, [](uv_timer_t*) {}, 2, 2);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    uv_run(&node->loop, UV_RUN_ONCE);
  }
  uv_timer_stop(&node->wake);
  return done();
}

void RunFor(Node* node, milliseconds duration) {
  auto end = std::chrono::steady_clock::now() + duration;
  RunUntil(node, [&] { return std::chrono::steady_clock::now() >= end; }, duration * 2);
}

RaftOptions OptionsFor(const std::string& dir) {
  RaftOptions options;
  options.data_dir = dir;
  options.raft_address = "127.0.0.1:0";  // any free port: tests run in parallel
  return options;
}

bool HasSnapshot(const std::string& dir) {
  std::error_code ec;
  for (const auto& file : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = file.path().filename().string();
    if (name.rfind("snapshot-", 0) == 0 && name.ends_with(".meta")) return true;
  }
  return false;
}

// Proposes EntryFor(first..first+count-1), keeping at most `window` in flight
// (topping up between loop turns, never from a callback), and runs the loop
// until all are done. `on_ack(i)` runs for each done(OK). Returns the number
// of done(OK).
uint32_t ProposeRange(Node* node, uint32_t first, uint32_t count, uint32_t window,
                      const std::function<void(uint32_t)>& on_ack, milliseconds timeout) {
  uint32_t next = first;
  uint32_t acked = 0;
  uint32_t failed = 0;
  auto all_done = [&] { return acked + failed == count; };
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!all_done() && std::chrono::steady_clock::now() < deadline) {
    while (next < first + count && node->log->in_flight() < window) {
      uint32_t id = next++;
      Status status = node->log->Propose(EntryFor(id), [&, id](Status done) {
        if (!done.ok()) {
          ++failed;
          return;
        }
        ++acked;
        if (on_ack) on_ack(id);
      });
      if (!status.ok()) {
        ++failed;
      }
    }
    auto can_propose = [&] { return next < first + count && node->log->in_flight() < window; };
    RunUntil(node, [&] { return all_done() || can_propose(); }, milliseconds(50));
  }
  return acked;
}

bool BarrierAndWait(Node* node) {
  bool done = false;
  Status result(StatusCode::kErr, "not run");
  Status status = node->log->Barrier([&](Status s) {
    done = true;
    result = s;
  });
  if (!status.ok()) return false;
  return RunUntil(node, [&] { return done; }, milliseconds(5000)) && result.ok();
}

std::vector<std::string> EntriesFrom(uint32_t first, uint32_t end) {
  std::vector<std::string> entries;
  for (uint32_t i = first; i < end; ++i) entries.push_back(EntryFor(i));
  return entries;
}

// What a forked first incarnation does before it _exits.
struct ChildPlan {
  uint32_t first = 0;            // entries first..first+acked-1 are proposed and awaited
  uint32_t acked = 0;
  uint32_t in_flight_at_exit = 0;  // then this many more are proposed, not awaited
  uint32_t window = 16;
  bool expect_replay = false;    // entries 0..first-1 must be applied after a Barrier
  bool wait_for_snapshot = false;
};

// The child's body: exit code 0 on plan completion, else which step failed.
[[noreturn]] void RunChild(const RaftOptions& options, const ChildPlan& plan, int report_fd) {
  auto node = NewNode();
  auto log = OpenRaftLog(&node->loop, options, &node->hooks);
  if (!log.ok()) _exit(2);
  node->log = std::move(log).value();
  if (plan.expect_replay) {
    if (!BarrierAndWait(node.get())) _exit(3);
    if (node->hooks.count != plan.first) _exit(4);
  }
  uint32_t acked = ProposeRange(
      node.get(), plan.first, plan.acked, plan.window,
      [&](uint32_t id) {
        if (write(report_fd, &id, sizeof id) != sizeof id) _exit(5);
      },
      milliseconds(20000));
  if (acked != plan.acked) _exit(6);
  if (plan.wait_for_snapshot) {
    if (!RunUntil(node.get(), [&] { return HasSnapshot(options.data_dir); }, milliseconds(5000))) {
      _exit(7);
    }
    RunFor(node.get(), milliseconds(300));  // let a snapshot being written finish
  }
  for (uint32_t i = 0; i < plan.in_flight_at_exit; ++i) {
    Status status = node->log->Propose(EntryFor(plan.first + plan.acked + i), [](Status) {});
    if (!status.ok()) _exit(8);
  }
  if (plan.in_flight_at_exit > 0) uv_run(&node->loop, UV_RUN_NOWAIT);
  _exit(0);  // crash-only: no close, as tumblerd
}

// Forks a first incarnation that follows `plan`; returns the ids it
// acknowledged, in acknowledgement order.
std::vector<uint32_t> RunFirstIncarnation(const RaftOptions& options, const ChildPlan& plan) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    RunChild(options, plan, fds[1]);
  }
  close(fds[1]);
  std::vector<uint32_t> acked;
  uint32_t id = 0;
  while (read(fds[0], &id, sizeof id) == sizeof id) acked.push_back(id);
  close(fds[0]);
  int wait_status = 0;
  EXPECT_EQ(waitpid(pid, &wait_status, 0), pid);
  EXPECT_TRUE(WIFEXITED(wait_status));
  EXPECT_EQ(WEXITSTATUS(wait_status), 0) << "the child failed at step " << WEXITSTATUS(wait_status);
  return acked;
}

class RaftLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tumbler-raft-log-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }

  void TearDown() override {
    // Let libraft finish what it started (segment preparation runs in the
    // thread pool) before the loops are parked and the files removed. Not
    // after a failure: pending callbacks may point at the test's locals.
    for (auto& node : nodes_) {
      if (node->log && !HasFailure()) {
        RunUntil(node.get(), [&] { return node->log->in_flight() == 0; }, milliseconds(5000));
        RunFor(node.get(), milliseconds(20));
      }
      Parked().push_back(std::move(node));
    }
    std::error_code ec;
    for (int attempt = 0; attempt < 5; ++attempt) {
      std::filesystem::remove_all(dir_, ec);
      if (!ec) break;
      std::this_thread::sleep_for(milliseconds(20));
    }
  }

  // Opens a node on `options`; the test fails if that fails.
  Node* Open(const RaftOptions& options) {
    nodes_.push_back(NewNode());
    Node* node = nodes_.back().get();
    auto log = OpenRaftLog(&node->loop, options, &node->hooks);
    EXPECT_TRUE(log.ok()) << log.status().ToString();
    if (log.ok()) node->log = std::move(log).value();
    return node;
  }

  // Opens a node on `options`, expecting an error; returns it.
  Status OpenFails(const RaftOptions& options) {
    nodes_.push_back(NewNode());
    Node* node = nodes_.back().get();
    auto log = OpenRaftLog(&node->loop, options, &node->hooks);
    EXPECT_FALSE(log.ok());
    if (log.ok()) {
      node->log = std::move(log).value();
      return Status::Ok();
    }
    return log.status();
  }

  std::string dir_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

TEST_F(RaftLogTest, FreshLogIsLeaderOfTermOne) {
  Node* node = Open(OptionsFor(dir_));
  ASSERT_NE(node->log, nullptr);
  LogStatus status = node->log->GetStatus();
  EXPECT_EQ(status.role, Role::kLeader);
  EXPECT_EQ(status.term, 1u);
  EXPECT_EQ(status.node_id, 1u);
  EXPECT_EQ(status.leader_id, 1u);
  EXPECT_EQ(status.leader_address, "127.0.0.1:0");
  EXPECT_EQ(status.last_index, 1u);  // the bootstrap configuration
  EXPECT_EQ(status.commit_index, 1u);
  EXPECT_EQ(status.applied_index, 1u);
  EXPECT_EQ(node->log->in_flight(), 0u);
}

TEST_F(RaftLogTest, EntriesAreAppliedInOrderEachBeforeItsDone) {
  Node* node = Open(OptionsFor(dir_));
  ASSERT_NE(node->log, nullptr);
  constexpr uint32_t kCount = 100;
  std::vector<Status> results;
  for (uint32_t i = 0; i < kCount; ++i) {
    ASSERT_TRUE(node->log->Propose(EntryFor(i), [node, &results, i](Status status) {
                  node->hooks.events.push_back("done " + EntryFor(i));
                  results.push_back(status);
                }).ok());
  }
  // Never synchronously.
  EXPECT_TRUE(node->hooks.events.empty());
  EXPECT_EQ(node->log->in_flight(), kCount);
  ASSERT_TRUE(RunUntil(node, [&] { return results.size() == kCount; }, milliseconds(10000)));

  EXPECT_EQ(node->hooks.applied, EntriesFrom(0, kCount));
  ASSERT_EQ(node->hooks.events.size(), 2 * kCount);
  for (uint32_t i = 0; i < kCount; ++i) {
    EXPECT_EQ(node->hooks.events[2 * i], "apply " + EntryFor(i));
    EXPECT_EQ(node->hooks.events[2 * i + 1], "done " + EntryFor(i));
    EXPECT_TRUE(results[i].ok()) << results[i].ToString();
  }
  EXPECT_EQ(node->log->in_flight(), 0u);
  LogStatus status = node->log->GetStatus();
  EXPECT_EQ(status.last_index, 1u + kCount);
  EXPECT_EQ(status.commit_index, status.last_index);
  EXPECT_EQ(status.applied_index, status.last_index);
}

TEST_F(RaftLogTest, InFlightIsBoundedAndGroupsCommit) {
  Node* node = Open(OptionsFor(dir_));
  ASSERT_NE(node->log, nullptr);
  uint32_t acked = 0;
  for (uint32_t i = 0; i < limits::kBatchesInFlightMax; ++i) {
    ASSERT_TRUE(node->log->Propose(EntryFor(i), [&](Status s) { acked += s.ok(); }).ok());
  }
  EXPECT_EQ(node->log->in_flight(), limits::kBatchesInFlightMax);
  Status over = node->log->Propose("one too many", [](Status) { FAIL() << "called"; });
  EXPECT_EQ(over.code(), StatusCode::kLimit);
  Status barrier = node->log->Barrier([](Status) { FAIL() << "called"; });
  EXPECT_EQ(barrier.code(), StatusCode::kLimit);
  ASSERT_TRUE(RunUntil(node, [&] { return acked == limits::kBatchesInFlightMax; },
                       milliseconds(10000)));
  EXPECT_EQ(node->log->in_flight(), 0u);

  // Many more with the window full all the time.
  uint32_t first = limits::kBatchesInFlightMax;
  EXPECT_EQ(ProposeRange(node, first, 5000, limits::kBatchesInFlightMax, nullptr,
                         milliseconds(20000)),
            5000u);
  EXPECT_EQ(node->hooks.applied, EntriesFrom(0, first + 5000));
}

TEST_F(RaftLogTest, EmptyLargeAndOversizeEntries) {
  Node* node = Open(OptionsFor(dir_));
  ASSERT_NE(node->log, nullptr);
  std::string large(1 << 20, '\0');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 7919 % 251);
  int done = 0;
  ASSERT_TRUE(node->log->Propose("", [&](Status s) { done += s.ok(); }).ok());
  ASSERT_TRUE(node->log->Propose(large, [&](Status s) { done += s.ok(); }).ok());
  std::string oversize(limits::kEntryBytesMax + 1, 'o');
  EXPECT_EQ(node->log->Propose(oversize, [](Status) {}).code(), StatusCode::kLimit);
  ASSERT_TRUE(RunUntil(node, [&] { return done == 2; }, milliseconds(10000)));
  ASSERT_EQ(node->hooks.applied.size(), 2u);
  EXPECT_EQ(node->hooks.applied[0], "");
  EXPECT_TRUE(node->hooks.applied[1] == large);
}

TEST_F(RaftLogTest, BarrierCompletesAfterEarlierEntries) {
  Node* node = Open(OptionsFor(dir_));
  ASSERT_NE(node->log, nullptr);
  ASSERT_TRUE(node->log->Propose(EntryFor(0), [node](Status) {
                node->hooks.events.push_back("done 0");
              }).ok());
  bool barrier_done = false;
  ASSERT_TRUE(node->log->Barrier([&](Status s) {
                EXPECT_TRUE(s.ok());
                node->hooks.events.push_back("barrier");
                barrier_done = true;
              }).ok());
  ASSERT_TRUE(RunUntil(node, [&] { return barrier_done; }, milliseconds(5000)));
  EXPECT_EQ(node->hooks.events,
            (std::vector<std::string>{"apply " + EntryFor(0), "done 0", "barrier"}));
}

TEST_F(RaftLogTest, RestartReappliesEveryAcknowledgedEntry) {
  RaftOptions options = OptionsFor(dir_);
  ChildPlan plan;
  plan.acked = 500;
  std::vector<uint32_t> acked = RunFirstIncarnation(options, plan);
  ASSERT_EQ(acked.size(), 500u);
  for (uint32_t i = 0; i < acked.size(); ++i) ASSERT_EQ(acked[i], i);

  Node* node = Open(options);
  ASSERT_NE(node->log, nullptr);
  LogStatus status = node->log->GetStatus();
  EXPECT_EQ(status.role, Role::kLeader);
  // libraft 0.15 makes a lone voter leader without a new term.
  EXPECT_GE(status.term, 1u);
  EXPECT_EQ(status.last_index, 501u);
  // libraft 0.15 commits a lone voter's whole log inside raft_start, so
  // OpenRaftLog has applied it already; the Barrier is what the server relies
  // on either way.
  EXPECT_LE(node->hooks.applied.size(), 500u);
  ASSERT_TRUE(BarrierAndWait(node));
  EXPECT_EQ(node->hooks.applied, EntriesFrom(0, 500));
  EXPECT_EQ(node->hooks.hash, ExpectedHash(500));
}

TEST_F(RaftLogTest, RestartAfterExitWithEntriesInFlight) {
  RaftOptions options = OptionsFor(dir_);
  ChildPlan plan;
  plan.acked = 300;
  plan.in_flight_at_exit = 200;
  std::vector<uint32_t> acked = RunFirstIncarnation(options, plan);
  ASSERT_EQ(acked.size(), 300u);

  Node* node = Open(options);
  ASSERT_NE(node->log, nullptr);
  ASSERT_TRUE(BarrierAndWait(node));
  // Every acknowledged entry, then possibly some of the unacknowledged ones,
  // in order and without gaps.
  size_t applied = node->hooks.applied.size();
  EXPECT_GE(applied, 300u);
  EXPECT_LE(applied, 500u);
  EXPECT_EQ(node->hooks.applied, EntriesFrom(0, static_cast<uint32_t>(applied)));
}

TEST_F(RaftLogTest, ThreeIncarnationsKeepOneLog) {
  RaftOptions options = OptionsFor(dir_);
  ChildPlan first;
  first.acked = 200;
  ASSERT_EQ(RunFirstIncarnation(options, first).size(), 200u);
  ChildPlan second;
  second.first = 200;
  second.acked = 200;
  second.expect_replay = true;
  ASSERT_EQ(RunFirstIncarnation(options, second).size(), 200u);

  Node* node = Open(options);
  ASSERT_NE(node->log, nullptr);
  ASSERT_TRUE(BarrierAndWait(node));
  EXPECT_EQ(node->hooks.applied, EntriesFrom(0, 400));
  // And it goes on.
  EXPECT_EQ(ProposeRange(node, 400, 10, 4, nullptr, milliseconds(5000)), 10u);
  EXPECT_EQ(node->hooks.applied, EntriesFrom(0, 410));
}

TEST_F(RaftLogTest, SnapshotRestoreThenReplayGivesTheSameState) {
  RaftOptions options = OptionsFor(dir_);
  options.snapshot_threshold = 64;  // tests only (LIBRAFT.md pitfall 3)
  options.snapshot_trailing = 16;
  ChildPlan plan;
  plan.acked = 1000;
  plan.wait_for_snapshot = true;
  ASSERT_EQ(RunFirstIncarnation(options, plan).size(), 1000u);
  ASSERT_TRUE(HasSnapshot(dir_));

  Node* node = Open(options);
  ASSERT_NE(node->log, nullptr);
  // The snapshot is restored inside OpenRaftLog.
  EXPECT_EQ(node->hooks.restores, 1);
  uint64_t restored = node->hooks.restored_count;
  EXPECT_GT(restored, 0u);
  EXPECT_LE(restored, 1000u);
  ASSERT_TRUE(BarrierAndWait(node));
  EXPECT_EQ(node->hooks.count, 1000u);
  EXPECT_EQ(node->hooks.hash, ExpectedHash(1000));
  EXPECT_EQ(node->hooks.applied, EntriesFrom(static_cast<uint32_t>(restored), 1000));

  // Snapshots keep being taken in this incarnation too.
  EXPECT_EQ(ProposeRange(node, 1000, 200, 16, nullptr, milliseconds(10000)), 200u);
  EXPECT_GT(node->hooks.snapshots_encoded, 0);
  EXPECT_EQ(node->hooks.hash, ExpectedHash(1200));
}

TEST_F(RaftLogTest, RefusedSnapshotFailsOpen) {
  RaftOptions options = OptionsFor(dir_);
  options.snapshot_threshold = 64;
  options.snapshot_trailing = 16;
  ChildPlan plan;
  plan.acked = 200;
  plan.wait_for_snapshot = true;
  ASSERT_EQ(RunFirstIncarnation(options, plan).size(), 200u);

  nodes_.push_back(NewNode());
  Node* node = nodes_.back().get();
  node->hooks.refuse_restore = true;
  auto log = OpenRaftLog(&node->loop, options, &node->hooks);
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), StatusCode::kErr);
  EXPECT_NE(log.status().message().find("refused by the test"), std::string::npos)
      << log.status().ToString();
}

TEST_F(RaftLogTest, BadOptionsAreRejected) {
  RaftOptions options = OptionsFor(dir_);
  options.heartbeat_timeout_ms = options.election_timeout_ms;
  EXPECT_EQ(OpenFails(options).code(), StatusCode::kInvalidArgument);
  options = OptionsFor(dir_);
  options.node_id = 0;
  EXPECT_EQ(OpenFails(options).code(), StatusCode::kInvalidArgument);
  options = OptionsFor("");
  EXPECT_EQ(OpenFails(options).code(), StatusCode::kInvalidArgument);
  options = OptionsFor(dir_);
  options.snapshot_threshold = 0;
  EXPECT_EQ(OpenFails(options).code(), StatusCode::kInvalidArgument);
  options = OptionsFor(dir_);
  options.raft_address = "";
  EXPECT_EQ(OpenFails(options).code(), StatusCode::kInvalidArgument);
}

TEST_F(RaftLogTest, DataDirIsCreatedPrivateAndLocked) {
  std::string dir = dir_ + "/a/b";
  Node* node = Open(OptionsFor(dir));
  ASSERT_NE(node->log, nullptr);
  struct stat info {};
  ASSERT_EQ(stat(dir.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  Status second = OpenFails(OptionsFor(dir));
  EXPECT_EQ(second.code(), StatusCode::kErr);
  EXPECT_NE(second.message().find("in use"), std::string::npos) << second.ToString();

  std::string file = dir_ + "/file";
  { FILE* f = fopen(file.c_str(), "w"); ASSERT_NE(f, nullptr); fclose(f); }
  EXPECT_EQ(OpenFails(OptionsFor(file)).code(), StatusCode::kErr);
}

TEST_F(RaftLogTest, AddressInUseFailsOpen) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  RaftOptions options = OptionsFor(dir_);
  options.raft_address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  Status status = OpenFails(options);
  EXPECT_EQ(status.code(), StatusCode::kErr);
  // The abandoned instance closes when its loop runs.
  RunFor(nodes_.back().get(), milliseconds(50));
  close(fd);
}

TEST_F(RaftLogTest, ProposeFromACallbackAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::string dir = dir_;
  EXPECT_DEATH(
      {
        Node* node = Open(OptionsFor(dir));
        node->hooks.on_apply = [&](std::string_view) {
          std::error_code ec;
          std::filesystem::remove_all(dir, ec);  // the death test's TearDown never runs
          (void)node->log->Propose("again", [](Status) {});
        };
        (void)node->log->Propose("first", [](Status) {});
        RunFor(node, milliseconds(5000));
      },
      "inside one of its callbacks");
}

TEST(RaftStatusTest, RaftErrorsMapToProtocolCodes) {
  EXPECT_EQ(StatusFromRaftError(RAFT_NOTLEADER).code(), StatusCode::kNotLeader);
  EXPECT_EQ(StatusFromRaftError(RAFT_LEADERSHIPLOST).code(), StatusCode::kNotLeader);
  EXPECT_EQ(StatusFromRaftError(RAFT_NOTLEADER).message(), "");
  Status shutdown = StatusFromRaftError(RAFT_SHUTDOWN);
  EXPECT_EQ(shutdown.code(), StatusCode::kTryAgain);
  EXPECT_EQ(shutdown.message(), raft_strerror(RAFT_SHUTDOWN));
  EXPECT_EQ(StatusFromRaftError(RAFT_IOERR).code(), StatusCode::kTryAgain);
  EXPECT_EQ(StatusFromRaftError(RAFT_NOMEM).code(), StatusCode::kTryAgain);
}

TEST(RoleNameTest, NamesEveryRole) {
  EXPECT_EQ(RoleName(Role::kUnavailable), "unavailable");
  EXPECT_EQ(RoleName(Role::kFollower), "follower");
  EXPECT_EQ(RoleName(Role::kCandidate), "candidate");
  EXPECT_EQ(RoleName(Role::kLeader), "leader");
}

}  // namespace
}  // namespace tumbler::replication

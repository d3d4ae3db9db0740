// The non-durable log behind --durability=none: no consensus, no disk. An
// entry is "committed" on the loop's next turn, so callers see the same
// asynchronous shape as the raft log (done never runs inside Propose) and the
// server has one code path for both.
//
// A uv_idle handle runs while entries are pending: it keeps the loop from
// blocking in poll, and it is stopped when the queue empties, so an idle
// server does not spin.
#include <cassert>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "core/limits.h"
#include "replication/replicated_log.h"

namespace tumbler::replication {
namespace {

class MemoryLog final : public ReplicatedLog {
 public:
  MemoryLog(uv_loop_t* loop, StateMachineHooks* hooks) : hooks_(hooks), idle_(new uv_idle_t) {
    int rv = uv_idle_init(loop, idle_);
    assert(rv == 0);  // uv_idle_init cannot fail on a live loop
    (void)rv;
    idle_->data = this;
  }

  ~MemoryLog() override {
    // The handle outlives us until libuv has closed it.
    idle_->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(idle_),
             [](uv_handle_t* handle) { delete reinterpret_cast<uv_idle_t*>(handle); });
  }

  MemoryLog(const MemoryLog&) = delete;
  MemoryLog& operator=(const MemoryLog&) = delete;

  Status Propose(std::string_view entry, DoneFn done) override {
    AssertNotInCallback();
    assert(done);
    if (entry.size() > limits::kEntryBytesMax) {
      return Status(StatusCode::kLimit, "log entry of " + std::to_string(entry.size()) +
                                            " bytes is over " +
                                            std::to_string(limits::kEntryBytesMax));
    }
    return Enqueue(false, entry, std::move(done));
  }

  uint32_t voters() const override { return 1; }
  std::vector<PeerStatus> Peers() const override { return {}; }
  Status AddVoter(uint64_t, const std::string&, DoneFn) override { return NoPeers(); }
  Status RemoveNode(uint64_t, DoneFn) override { return NoPeers(); }
  Status TransferLeadership(uint64_t, DoneFn) override { return NoPeers(); }
  static Status NoPeers() {
    return Status(StatusCode::kUnsupported,
                  "--durability=none runs one node in memory: it has no peers");
  }

  Status Barrier(DoneFn done) override {
    AssertNotInCallback();
    assert(done);
    return Enqueue(true, {}, std::move(done));
  }

  LogStatus GetStatus() const override {
    LogStatus status;
    status.role = Role::kLeader;
    status.term = 1;
    status.commit_index = applied_index_;
    status.applied_index = applied_index_;
    status.last_index = last_index_;
    status.node_id = 1;
    status.leader_id = 1;
    return status;
  }

  uint32_t in_flight() const override { return static_cast<uint32_t>(pending_.size()); }

 private:
  struct Pending {
    bool barrier = false;
    std::string entry;
    DoneFn done;
  };

  // Marks "inside one of this log's callbacks": the raft log forbids
  // re-entry (LIBRAFT.md pitfall 2), and this one does too, so that a server
  // tested on it does not crash on raft.
  class CallbackScope {
   public:
    explicit CallbackScope(MemoryLog* log) : log_(log) { ++log_->callback_depth_; }
    ~CallbackScope() { --log_->callback_depth_; }
    CallbackScope(const CallbackScope&) = delete;
    CallbackScope& operator=(const CallbackScope&) = delete;

   private:
    MemoryLog* log_;
  };

  void AssertNotInCallback() const {
    assert(callback_depth_ == 0 && "ReplicatedLog called from inside one of its callbacks");
  }

  Status Enqueue(bool barrier, std::string_view entry, DoneFn done) {
    if (pending_.size() >= limits::kBatchesInFlightMax) {
      return Status(StatusCode::kLimit, "too many log entries in flight");
    }
    pending_.push_back(Pending{barrier, std::string(entry), std::move(done)});
    ++last_index_;
    if (pending_.size() == 1) {
      int rv = uv_idle_start(idle_, &MemoryLog::OnIdle);
      assert(rv == 0);
      (void)rv;
    }
    return Status::Ok();
  }

  static void OnIdle(uv_idle_t* handle) {
    auto* log = static_cast<MemoryLog*>(handle->data);
    assert(log != nullptr);
    log->CommitPending();
  }

  // Applies what was pending when this turn began, in order: ApplyEntry, then
  // done(OK), one entry at a time, as libraft does. Re-entry is asserted
  // against, so nothing is added while this runs.
  void CommitPending() {
    CallbackScope scope(this);
    while (!pending_.empty()) {
      Pending pending = std::move(pending_.front());
      pending_.pop_front();
      ++applied_index_;
      if (!pending.barrier) hooks_->ApplyEntry(pending.entry);
      pending.done(Status::Ok());
    }
    uv_idle_stop(idle_);
  }

  StateMachineHooks* hooks_;
  uv_idle_t* idle_;  // owned; freed by its close callback
  std::deque<Pending> pending_;  // at most limits::kBatchesInFlightMax
  uint64_t last_index_ = 0;
  uint64_t applied_index_ = 0;
  int callback_depth_ = 0;
};

}  // namespace

std::unique_ptr<ReplicatedLog> OpenMemoryLog(uv_loop_t* loop, StateMachineHooks* hooks) {
  assert(loop != nullptr);
  assert(hooks != nullptr);
  return std::make_unique<MemoryLog>(loop, hooks);
}

}  // namespace tumbler::replication

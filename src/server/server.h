// tumblerd's engine: one libuv loop owns the listener, every connection, the
// replicated log and the state machine (DESIGN.md "Threads").
//
// Request flow:
//   read -> ParseRequest -> command table (commands.cc) -> either
//     * an immediate reply (PING, reads, errors), or
//     * a command appended to the current batch (writes). Every batch built
//       during one loop iteration is proposed as ONE log entry from a uv_check
//       handle (group commit), never from inside a raft callback.
//   ApplyEntry (committed, in log order) -> core::StateMachine::Apply for each
//   command -> the reply goes to the connection that sent it (matched by the
//   batch header's origin + seq), and the effects (grants to waiters, waits
//   ended by session expiry) go to the connections that wait.
//
// Replies on one connection keep request order: a connection processes its
// requests in order; writes may pipeline (their results come back in log
// order, which is request order); any other request behind a pending write,
// and everything behind a blocking LOCK ... WAIT, waits until those replies are
// out. See docs/architecture.md.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/batch_codec.h"
#include "core/state_machine.h"
#include "replication/replicated_log.h"
#include "server/config.h"

namespace tumbler::server {

class Connection;

// How the result of a logged command is turned into a reply.
enum class ReplyKind : uint8_t {
  kNone,          // internal command (expiry, tick, cancel): no client waits for it
  kSessionOpen,   // integer id
  kSessionClose,  // integer holds released
  kLock,          // [token, count] | null
  kLockWait,      // as kLock, but a queued result blocks the connection
  kUnlock,        // integer count left
  kCancelWait,    // a WAIT ran out: null if the wait was still queued
};

class Server final : public replication::StateMachineHooks {
 public:
  Server(uv_loop_t* loop, Config config);
  ~Server() override;
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Opens the log (replaying it), starts listening. Errors name what failed.
  Status Start();

  // --- replication::StateMachineHooks ----------------------------------------
  void ApplyEntry(std::string_view entry) override;
  void EncodeSnapshot(std::string* out) override;
  Status RestoreSnapshot(std::string_view snapshot) override;

  // --- Used by connections and command handlers (loop thread only). ---------
  const Config& config() const { return config_; }
  const core::StateMachine& state() const { return state_; }
  uv_loop_t* loop() const { return loop_; }
  // Leader, and the barrier of this term is applied: writes and reads may run.
  bool serving() const { return serving_; }
  // The error to answer while not serving (TRYAGAIN now; NOTLEADER in a cluster).
  Status NotServingStatus() const;
  // In a cluster: the oldest entry in flight has not committed for half an
  // election timeout, so the quorum is probably gone. New writes are then
  // refused with TRYAGAIN (before they are appended: they change nothing)
  // instead of joining entries that may never commit.
  bool QuorumSuspect() const;
  replication::LogStatus log_status() const;
  // The role clients should act on: kLeader only while serving; a raft leader
  // that has not committed its term's barrier yet is still a kCandidate.
  replication::Role EffectiveRole() const;
  uint64_t uptime_s() const;
  size_t connections_count() const { return connections_.size(); }
  // Waits of this node's connections (including ones whose connection closed
  // and whose cancel has not applied yet).
  size_t blocked_count() const { return waits_.size(); }

  // Appends a command to the batch being built on behalf of `conn` (nullptr for
  // internal commands). Returns false when the batch is full; the caller stops
  // processing and is resumed by ResumeStalled().
  bool Enqueue(const core::CommandView& cmd, Connection* conn, ReplyKind kind);
  void AddStalled(Connection* conn);
  // Linearizable reads (CHECK, INSPECT, ...) in a cluster: true once a
  // barrier proposed after this request arrived has been applied; else the
  // connection is parked until one is, and the handler returns kParked.
  // Always true on a single voter.
  bool ReadReady(Connection* conn);
  // Runs `fn` on the loop's next check phase, outside any raft callback.
  void Defer(std::function<void()> fn);
  // Membership (CLUSTER ADD/REMOVE/TRANSFER): passes through to the log.
  replication::ReplicatedLog& log() { return *log_; }
  Connection* FindConnectionById(uint64_t conn_id) const { return FindConnection(conn_id); }
  // A connection's LOCK ... WAIT ran out: cancel the wait through the log; the
  // null reply is sent when the cancel applies (unless a grant came first).
  void WaitTimedOut(Connection* conn);

  // Renews `session`'s lease on the leader (KEEPALIVE, or any command naming it).
  // Returns false if the session is being expired (it must be treated as gone).
  bool TouchSession(uint64_t session);
  // Milliseconds until `session` expires on this leader, or -1 if unknown.
  int64_t SessionExpiresInMs(uint64_t session) const;

  // Connection lifecycle.
  void OnConnectionClosed(Connection* conn);
  void MarkDirty(Connection* conn);
  // Stops the server: no new connections, drain in-flight entries, _exit(0).
  void BeginShutdown(const char* why);

  // Monotonic milliseconds of this process.
  static uint64_t NowMs();
  // The leader's log clock: never below the state machine's log time.
  uint64_t LogClockMs() const;

 private:
  struct PendingCommand {
    uint64_t conn_id;
    ReplyKind kind;
  };
  struct PendingBatch {
    uint64_t seq = 0;
    uint64_t proposed_ms = 0;  // NowMs() when handed to the log
    std::vector<PendingCommand> commands;
  };
  // A LOCK ... WAIT that is queued in the state machine and belongs to a
  // connection of this node. conn_id 0: the connection closed; a grant must be
  // released again.
  struct WaitRecord {
    uint64_t conn_id = 0;
    uint64_t session = 0;
    std::string name;
    std::string owner;
  };
  // An internal command that owns its strings (built outside a request).
  struct InternalCommand {
    core::CommandType type;
    uint64_t session = 0;
    uint64_t wait_id = 0;
    uint32_t lock_delay_ms = 0;
    std::string name;
    std::string owner;
    uint64_t answer_conn_id = 0;  // CancelWait of a WAIT that ran out: who gets null
    uint64_t node_id = 0;         // Announce
  };

  static void OnNewConnection(uv_stream_t* listener, int status);
  static void OnCheck(uv_check_t* handle);
  static void OnIdle(uv_idle_t* handle);
  static void OnPrepare(uv_prepare_t* handle);
  static void OnLeaseTimer(uv_timer_t* handle);
  static void OnDelayTimer(uv_timer_t* handle);
  static void OnRoleTimer(uv_timer_t* handle);
  static void OnSignal(uv_signal_t* handle, int signum);
  static void OnShutdownTimer(uv_timer_t* handle);

  Status Listen();
  void ProposeBatch();
  void ProposeReadBarrier();
  void RunDeferred();
  void FlushInternal();
  void BatchBegin();
  void RouteResult(const PendingCommand& pending, const core::CommandView& cmd,
                   const core::CommandResult& result);
  void RouteLockResult(Connection* conn, const PendingCommand& pending,
                       const core::CommandView& cmd, const core::CommandResult& result);
  void HandleEffects();
  bool BatchFull() const;
  // Removes the record of `wait_id` into *record; false if there is none.
  bool TakeWait(uint64_t wait_id, WaitRecord* record);
  // The connection still blocked on that wait, or nullptr (it closed, or it
  // already has its answer).
  Connection* Waiter(const WaitRecord& record, uint64_t wait_id) const;
  // Writes a LOCK grant reply: [token, hold_count].
  void WriteGrant(Connection* conn, uint64_t token, uint32_t hold_count);
  // A CancelWait was applied: drop the wait's record, answer null to its
  // connection if that connection still waits on it.
  void WaitCancelled(uint64_t wait_id);
  void OnBatchDone(uint64_t seq, const Status& status);
  // A batch that was never appended: every request gets `status` (it changed
  // nothing).
  void FailBatch(PendingBatch& batch, const Status& status);
  // A batch whose append failed after it was handed to the log: it may still
  // commit, so its connections are closed rather than answered.
  void AbandonBatch(const PendingBatch& batch);
  void ResumeStalled();
  void CheckRole();
  void BecomeServing();
  void StopServing(const Status& why);
  void ArmLeaseTimer();
  void CompactLeaseHeap();
  void ExpireDueSessions();
  void ArmDelayTimer();
  void EnqueueInternal(InternalCommand cmd);
  // Proposes CancelWait; answer_conn_id (0: none) gets the null reply if the
  // wait was still queued when the cancel applies.
  void CancelWait(uint64_t wait_id, uint64_t answer_conn_id);
  // Proposes UNLOCK for a grant whose requester is gone and never saw it.
  void ReleaseUnseenGrant(uint64_t session, std::string name, std::string owner);
  // Keeps the loop from blocking in poll while queued work can progress (work
  // queued from a timer callback runs in this iteration's check phase).
  void Wake();
  Connection* FindConnection(uint64_t conn_id) const;

  uv_loop_t* loop_;
  Config config_;
  core::StateMachine state_;
  std::unique_ptr<replication::ReplicatedLog> log_;
  uint64_t incarnation_ = 0;
  uint64_t start_ms_ = 0;

  // Listener and loop hooks.
  uv_tcp_t listener_;
  uv_check_t check_;
  uv_prepare_t prepare_;
  uv_idle_t idle_;
  bool idle_active_ = false;
  uv_timer_t lease_timer_;
  uv_timer_t delay_timer_;
  uv_timer_t role_timer_;
  uv_timer_t shutdown_timer_;
  uv_signal_t sigterm_;
  uv_signal_t sigint_;
  bool listening_ = false;
  bool shutting_down_ = false;
  uint64_t shutdown_started_ms_ = 0;

  // Leadership.
  replication::Role logged_role_ = replication::Role::kUnavailable;
  uint64_t logged_leader_id_ = 0;
  bool serving_ = false;
  bool barrier_in_flight_ = false;
  uint64_t serving_term_ = 0;
  uint64_t clock_base_log_ms_ = 0;  // log time when this term began serving
  uint64_t clock_base_mono_ms_ = 0; // NowMs() at that moment

  // Batch being built, and batches proposed but not yet applied, oldest first.
  core::BatchBuilder builder_;
  core::BatchBuilder announce_builder_;  // a new term's first entry (CheckRole)
  bool batch_open_ = false;  // builder_ holds a batch that Enqueue appends to
  PendingBatch building_;
  uint64_t next_seq_ = 1;
  std::deque<PendingBatch> in_flight_;
  std::vector<PendingBatch> spare_batches_;  // reused vectors
  std::deque<InternalCommand> internal_;
  std::vector<uint64_t> stalled_;  // connection ids waiting for batch space

  // Apply scratch (reused, no allocation in steady state).
  std::vector<core::CommandView> decoded_;
  core::Effects effects_;

  // Connections.
  std::unordered_map<uint64_t, Connection*> connections_;
  uint64_t next_conn_id_ = 1;
  std::vector<uint64_t> dirty_;  // connections with replies to flush

  // Read barriers: numbered in proposal order; a parked read needs one whose
  // number is at least its connection's fence.
  uint64_t read_barrier_next_ = 1;
  uint64_t read_barriers_done_ = 0;
  bool read_barrier_wanted_ = false;
  std::vector<uint64_t> read_parked_;
  std::vector<std::function<void()>> deferred_;

  // Waits of this node's connections.
  std::unordered_map<uint64_t, WaitRecord> waits_;

  // Session leases (leader only): deadline per session, and a min-heap holding
  // at most one entry per session (a renewal updates the map only; a stale heap
  // entry is pushed again with the real deadline when it comes up).
  struct Lease {
    uint64_t deadline_ms;
    uint32_t ttl_ms;
    bool expiring;
  };
  std::unordered_map<uint64_t, Lease> leases_;
  using HeapEntry = std::pair<uint64_t, uint64_t>;  // deadline, session
  std::priority_queue<HeapEntry, std::vector<HeapEntry>, std::greater<>> lease_heap_;
  uint64_t lease_timer_due_ms_ = 0;  // 0: not armed
  uint64_t delay_timer_due_log_ms_ = 0;
};

}  // namespace tumbler::server

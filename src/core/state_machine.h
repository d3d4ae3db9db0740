// The lock state machine: sessions, locks, FIFO queues, fencing tokens,
// wait-for-graph deadlock detection and lock-delay. It is the one place that
// decides every grant.
//
// Pure and deterministic (DESIGN.md "src/core"): no I/O, no clock reads, no
// threads, no randomness, and nothing observable iterates in hash order. Time
// enters only as `log_time_ms`, a value the leader stamps into every log entry
// (a cluster-wide clock that never goes backwards). Applying the same sequence of
// commands to two fresh machines gives byte-identical snapshots.
//
// Thread safety: none. One thread (the server's loop) owns an instance.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/limits.h"
#include "tumbler/status.h"

namespace tumbler::core {

// Bounds a deployment chooses (flags), each within limits.h's maximum. They are
// part of the replicated configuration: every replica must use the same values.
struct Bounds {
  uint32_t sessions_max = limits::kSessionsDefault;
  uint64_t locks_max = limits::kLocksDefault;
  uint32_t waiters_per_lock_max = limits::kWaitersPerLockDefault;
  uint32_t holds_per_session_max = limits::kHoldsPerSessionDefault;
};

enum class CommandType : uint8_t {
  kOpenSession = 1,   // session := next id; ttl_ms, label
  kCloseSession = 2,  // releases every hold (no lock-delay), cancels waits
  kExpireSession = 3, // as close, but held locks get lock-delay
  kLock = 4,          // name, session, owner, shared, wait
  kUnlock = 5,        // name, session, owner
  kCancelWait = 6,    // wait_id: a WAIT timed out or its connection closed
  kCancelAllWaits = 7,// a new leader (or a restarted node) drops orphaned waits
  kTick = 8,          // only advances log time: ends lock-delays that ran out
  kAnnounce = 9,      // a new leader names itself: node_id, client address (in name)
};

// One command as it sits in a log entry. Strings are views into the entry's
// buffer (or the caller's), valid for the duration of Apply().
struct CommandView {
  CommandType type = CommandType::kTick;
  uint64_t session = 0;        // all but OpenSession, CancelWait, CancelAllWaits, Tick
  uint32_t ttl_ms = 0;         // OpenSession
  uint32_t lock_delay_ms = 0;  // ExpireSession: the server's --lock-delay-ms
  std::string_view name;       // Lock/Unlock: lock name; OpenSession: label
  std::string_view owner;      // Lock/Unlock
  bool shared = false;         // Lock
  bool wait = false;           // Lock: queue if not grantable now
  uint64_t wait_id = 0;        // CancelWait
  uint64_t node_id = 0;        // Announce (its client address is in `name`)
};

// What a Lock command did.
enum class LockOutcome : uint8_t {
  kGranted,     // token + hold_count are set (a reentrant grant keeps its token)
  kQueued,      // wait_id is set; a later Grant event or WaitEnded event follows
  kWouldBlock,  // try-lock (wait=false) on a lock it cannot have now
};

// The result of applying one command. `status` is not OK when the command
// failed; a failed command changed nothing.
struct CommandResult {
  Status status;
  LockOutcome lock_outcome = LockOutcome::kWouldBlock;
  uint64_t token = 0;        // Lock granted
  uint32_t hold_count = 0;   // Lock granted; Unlock: holds left
  uint64_t wait_id = 0;      // Lock queued
  uint64_t session = 0;      // OpenSession: the new id
  uint32_t released = 0;     // Close/ExpireSession: holds released
};

// Side effects of one command on other requests: waits granted or ended. The
// caller clears it between commands (or not: Apply only appends).
struct Effects {
  struct Grant {
    uint64_t wait_id;
    uint64_t session;
    uint64_t token;
    uint32_t hold_count;  // always 1: a queued wait is never reentrant
  };
  struct WaitEnded {
    uint64_t wait_id;
    StatusCode reason;  // kNoSession (session closed/expired) or kTryAgain (CancelAllWaits)
  };
  std::vector<Grant> grants;        // in grant order
  std::vector<WaitEnded> ended;     // waits removed without a grant (not CancelWait's own)
  std::vector<uint64_t> sessions_ended;  // sessions closed or expired
  void Clear() {
    grants.clear();
    ended.clear();
    sessions_ended.clear();
  }
};

struct HolderInfo {
  uint64_t session;
  std::string owner;
  uint32_t count;
  uint64_t token;
};
struct WaiterInfo {
  uint64_t session;
  std::string owner;
  bool shared;
  uint64_t wait_id;
};
enum class LockMode : uint8_t { kFree, kExclusive, kShared };
struct LockInfo {
  std::string name;
  LockMode mode = LockMode::kFree;
  uint64_t token = 0;              // the newest token among current holders (0 if free)
  std::vector<HolderInfo> holders; // in grant order
  std::vector<WaiterInfo> waiters; // in queue order
  uint64_t delay_until_ms = 0;     // lock-delay end in log time, 0 if none
};
struct SessionInfo {
  uint64_t id;
  std::string label;
  uint32_t ttl_ms;
  std::vector<std::string> holds;    // lock names, sorted
  std::vector<std::string> waiting;  // lock names it waits on, sorted
};
struct Stats {
  uint64_t sessions = 0;
  uint64_t locks = 0;
  uint64_t waiters = 0;
  uint64_t holds = 0;      // (lock, holder) pairs, whatever their counts
  uint64_t last_token = 0;
  uint64_t log_time_ms = 0;
};

class StateMachine {
 public:
  explicit StateMachine(Bounds bounds = {});
  ~StateMachine();
  StateMachine(const StateMachine&) = delete;
  StateMachine& operator=(const StateMachine&) = delete;

  // Applies one command at log time `log_time_ms` (the machine keeps the
  // maximum it has seen, so an older value never moves time backwards). Appends
  // the effects on other requests to *effects (not null). Deterministic.
  //
  // Before the command itself, every lock-delay that log time has reached ends
  // (in order of deadline, then name) and those queues are served; the grants
  // this produces are in *effects even if the command then fails. A failed
  // command changes nothing else. Input comes from the log and is checked, never
  // asserted. Errors (docs/commands.md has the precedence):
  //   OpenSession:    kErr ttl_ms outside 100..3,600,000; kLimit label > 256
  //                   bytes; kLimit sessions_max sessions exist.
  //   Close/ExpireSession: kErr lock_delay_ms > limits::kLockDelayMsMax
  //                   (expire only); kNoSession.
  //   Lock:           kErr empty name; kLimit name > 1024 or owner > 256 bytes;
  //                   kNoSession; kWrongMode the holder holds it in the other
  //                   mode; kLimit reentrant count at limits::kHoldCountMax;
  //                   kErr this holder already waits on this lock; then, if it
  //                   would queue: kDeadlock ("cycle: session 1 owner "a" waits
  //                   for "L2" held by session 2 owner "" which waits for "L1"
  //                   held by session 1 owner "a"", "queued behind" for an edge
  //                   to a waiter ahead; bytes outside printable ASCII, `"` and
  //                   `\` as \xNN; cut at limits::kErrorMessageBytesMax),
  //                   kLimit if the wait-for walk would pass
  //                   limits::kDeadlockVisitMax edges, kLimit queue full; kLimit
  //                   locks_max locks exist (new lock) or the session's holds +
  //                   waits reach holds_per_session_max (new hold or wait). A
  //                   try-lock that cannot be granted is kWouldBlock, not an
  //                   error, whatever the bounds.
  //   Unlock:         kErr empty name; kLimit lengths; kNoSession; kNotHeld.
  //   CancelWait:     never fails; a wait id that no longer exists is a no-op.
  //   CancelAllWaits, Tick: never fail.
  //   Any other type: kErr.
  // When one command frees several queues (Close/Expire), it serves first the
  // locks of the session's ended waits in wait id order, then the locks it held
  // in token order; `ended` lists its waits in wait id order.
  CommandResult Apply(const CommandView& cmd, uint64_t log_time_ms, Effects* effects);

  // --- Read-only queries (never change state). -----------------------------
  bool SessionExists(uint64_t session) const;
  // nullopt if the session does not exist. holds/waiting name each lock once
  // even if several owners of the session hold or wait on it.
  std::optional<SessionInfo> GetSession(uint64_t session) const;
  // Session ids in ascending order, at most `count`.
  std::vector<uint64_t> ListSessions(uint32_t count) const;
  // Every session with its ttl, ascending by id (a new leader uses this to give
  // each a fresh deadline).
  std::vector<std::pair<uint64_t, uint32_t>> SessionTtls() const;
  // nullopt if no lock of that name exists (free, no waiters, no lock-delay).
  std::optional<LockInfo> Inspect(std::string_view name) const;
  // True if `token` is the token of a current holder of `name`.
  bool Check(std::string_view name, uint64_t token) const;
  // Names of existing locks starting with `prefix`, in byte order, at most `count`.
  std::vector<std::string> ListLocks(std::string_view prefix, uint32_t count) const;
  // The earliest log time at which a lock-delay ends, if any lock is delayed.
  std::optional<uint64_t> NextDelayEndMs() const;
  // Every queued wait, ascending by wait id.
  std::vector<uint64_t> WaitIds() const;
  Stats GetStats() const;
  uint64_t log_time_ms() const;
  // The last leader that announced itself (kAnnounce): its node id (0: none
  // yet) and client address. Followers name it in NOTLEADER.
  uint64_t announced_node_id() const;
  const std::string& announced_address() const;

  // --- Snapshots (format: docs/snapshot-format.md). -------------------------
  // Appends the whole state to *out: a version byte, the body, a CRC32C.
  void EncodeSnapshot(std::string* out) const;
  // Replaces the whole state with the snapshot's. On error (bad version,
  // checksum, truncated, a value out of range) the state is unchanged.
  Status DecodeSnapshot(std::string_view in);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tumbler::core

// The replicated log: the server hands it entries (batches of commands) and it
// calls back, in log order, once each entry is committed. It hides the consensus
// engine (libraft, see raft_log.cc) so that it can be replaced, and offers a
// non-durable in-memory variant for --durability=none.
//
// Threading: everything runs on the one uv loop that was passed in. All
// methods must be called on that loop thread, and never from inside one of this
// log's own callbacks (StateMachineHooks methods, done callbacks): libraft 0.15
// crashes when re-entered from a callback (LIBRAFT.md pitfall 2). Defer with a
// uv_check handle instead; the implementations assert this.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tumbler/status.h"

namespace tumbler::replication {

// What the log applies committed entries to. Implemented by the server.
class StateMachineHooks {
 public:
  virtual ~StateMachineHooks() = default;
  // A committed entry, in log order, exactly once per process lifetime
  // (entries replayed after a restart are applied again to a state restored
  // from the newest snapshot). On every node, leader or not.
  virtual void ApplyEntry(std::string_view entry) = 0;
  // Appends a snapshot of the whole applied state to *out.
  virtual void EncodeSnapshot(std::string* out) = 0;
  // Replaces the state with a snapshot's. Called from OpenRaftLog (the newest
  // snapshot on disk; an error makes OpenRaftLog fail with it) and, in a
  // cluster, when a follower installs the leader's snapshot (an error there
  // aborts the process). `snapshot` is valid only during the call.
  virtual Status RestoreSnapshot(std::string_view snapshot) = 0;
};

enum class Role : uint8_t { kUnavailable, kFollower, kCandidate, kLeader };
std::string_view RoleName(Role role);  // "leader", "follower", ...

// A member of the raft configuration.
struct PeerStatus {
  uint64_t id = 0;
  std::string address;  // raft address, "host:port"
  std::string role;     // "voter", "standby" or "spare"
};

struct LogStatus {
  Role role = Role::kUnavailable;
  uint64_t term = 0;
  uint64_t commit_index = 0;
  uint64_t applied_index = 0;
  uint64_t last_index = 0;
  uint64_t node_id = 0;
  uint64_t leader_id = 0;          // 0 while no leader is known
  std::string leader_address;      // the leader's raft address, "" if unknown
};

class ReplicatedLog {
 public:
  using DoneFn = std::function<void(Status)>;
  virtual ~ReplicatedLog() = default;

  // Appends a copy of `entry` (0..limits::kEntryBytesMax bytes) to the log.
  // `done` runs exactly once on the loop thread: with OK right after
  // ApplyEntry(entry) has returned, or with an error (kNotLeader: this node is
  // not or no longer leader, message empty, GetStatus() names the leader;
  // kTryAgain: the engine failed it, message from libraft). After an error
  // from `done` the outcome is unknown: an entry whose leader lost leadership
  // can still be committed by the next leader and then reaches ApplyEntry on
  // every node, without a done(OK). A single voter never loses leadership.
  // When Propose itself returns an error, nothing was appended and `done` is
  // not called: kLimit (in_flight() == limits::kBatchesInFlightMax, or the
  // entry is too big), kNotLeader, kTryAgain.
  virtual Status Propose(std::string_view entry, DoneFn done) = 0;

  // Commits a barrier: `done(OK)` once every entry before it is applied. A new
  // leader calls this before it serves (LIBRAFT.md pitfall 8), a restarted
  // node included. A barrier counts towards in_flight(); errors as for Propose.
  virtual Status Barrier(DoneFn done) = 0;

  // --- Membership (leader only; one change at a time) ---------------------------
  // Adds node `id` at raft `address` and makes it a voter once it has caught
  // up (raft_add, then raft_assign). `done` runs once both are committed, or
  // with the error that stopped it. Errors (returned or through `done`):
  // kNotLeader, kTryAgain (another change in flight, or the engine refused),
  // kInvalidArgument (id 0, an id already present, an empty address),
  // kUnsupported (a log that cannot have peers).
  virtual Status AddVoter(uint64_t id, const std::string& address, DoneFn done) = 0;
  // Removes node `id` from the configuration (it may be this leader: it
  // steps down once the change commits). Errors as AddVoter; kInvalidArgument
  // for an unknown id or the last voter.
  virtual Status RemoveNode(uint64_t id, DoneFn done) = 0;
  // Hands leadership to voter `id` (0: the most up to date one). `done` runs
  // when the transfer ended, successfully or not: GetStatus() tells who leads.
  virtual Status TransferLeadership(uint64_t id, DoneFn done) = 0;

  // Cheap: no allocation but the leader's address (the server polls it every
  // 50 ms and on every request a follower refuses).
  virtual LogStatus GetStatus() const = 0;
  // The current configuration, by id (for INFO and CLUSTER STATUS).
  virtual std::vector<PeerStatus> Peers() const = 0;
  // Voters in the current configuration (cheap; 1 for a single node).
  virtual uint32_t voters() const = 0;
  // Proposals and barriers whose `done` has not run yet.
  virtual uint32_t in_flight() const = 0;
};

struct RaftOptions {
  std::string data_dir;            // created (0700) if missing; holds the raft log and snapshots
  uint64_t node_id = 1;
  std::string raft_address = "127.0.0.1:7520";  // what peers dial (cluster mode)
  // Where the raft transport listens, if not raft_address (a proxy or NAT in
  // front of the node owns raft_address).
  std::string bind_address;
  // The initial voters (id, raft address), this node included; empty: this
  // node alone. Used only when the data dir is new.
  std::vector<std::pair<uint64_t, std::string>> initial_voters;
  // Start with an empty configuration and wait to be added by the leader
  // (AddVoter) instead of bootstrapping.
  bool join = false;
  uint32_t election_timeout_ms = 300;
  uint32_t heartbeat_timeout_ms = 30;
  // Entries between snapshots. Every snapshot stalls appends for 30-50 ms
  // (LIBRAFT.md pitfall 3): servers use >= 65536; smaller values are for tests.
  uint32_t snapshot_threshold = 65536;
  uint32_t snapshot_trailing = 8192;
  bool pre_vote = true;
};

// Opens (bootstrapping on first use with options.initial_voters, or this node
// alone; not when options.join) a raft log in options.data_dir and starts it:
// the newest snapshot is restored through hooks->RestoreSnapshot and the log
// is loaded, both before this returns, so `hooks` must be ready for calls
// during OpenRaftLog. A lone voter is leader when this returns; in a cluster
// the node becomes leader or follower by election (GetStatus()). libraft 0.15 also commits and applies a lone voter's loaded
// log inside this call; do not rely on it: call Barrier() and serve after its
// done(OK), which holds in a cluster too. Also sets SIGPIPE to SIG_IGN
// (LIBRAFT.md pitfall 6) and locks the data dir against a second process.
// Errors: kInvalidArgument (options), kErr (data dir, raft_address in use,
// libraft start-up, a snapshot that RestoreSnapshot refused).
// The returned log and `hooks` must outlive every callback; the process ends by
// _exit (crash-only shutdown, LIBRAFT.md pitfall 1), never by destroying it:
// the destructor aborts. docs/replication.md describes the data dir.
Result<std::unique_ptr<ReplicatedLog>> OpenRaftLog(uv_loop_t* loop, const RaftOptions& options,
                                                   StateMachineHooks* hooks);

// A log that is not durable and not replicated: an entry is "committed" at the
// next loop iteration and lost when the process ends. For --durability=none.
// Always leader, term 1; entries and barriers each take an index. It never
// calls EncodeSnapshot/RestoreSnapshot. It has no peers: the membership calls
// return kUnsupported. Destroying it drops pending proposals
// without calling their `done`; its handle is freed on the loop's next turn.
std::unique_ptr<ReplicatedLog> OpenMemoryLog(uv_loop_t* loop, StateMachineHooks* hooks);

}  // namespace tumbler::replication

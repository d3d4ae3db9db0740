// The replicated log over libraft 0.15 (canonical's C raft, Debian
// libraft-dev): one voter, or a cluster bootstrapped from an initial voter
// list, grown and shrunk by AddVoter (raft_add + raft_assign) / RemoveNode,
// over libraft's TCP transport.
//
// docs/replication.md describes the data dir, the snapshot frame, crash-only
// shutdown and which LIBRAFT.md pitfall is handled where. In short:
//   1 (raft_close unsafe)  -> there is no close: the destructor aborts, the
//                             server ends by _exit.
//   2 (re-entry crashes)   -> CallbackScope + assert in Propose/Barrier.
//   3 (snapshot stalls)    -> threshold from RaftOptions, >= 65536 in servers.
//   4 (FSM v3 broken)      -> FSM version 1 (synchronous snapshots).
//   6 (SIGPIPE)            -> SIG_IGN in OpenRaftLog.
//   8 (barrier first)      -> Barrier(), which the server calls as a new
//                             leader (0.15 already applies a lone voter's log
//                             inside raft_start; the barrier covers clusters).
// And one LIBRAFT.md does not list yet: entry payloads must be a multiple of
// 8 bytes or a restart loses the log behind the first unaligned one; every
// entry is stored in an entry frame (raft_frames.h).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/limits.h"
#include "replication/raft_frames.h"
#include "replication/raft_status.h"  // <raft.h> inside extern "C"
#include "replication/replicated_log.h"

extern "C" {
#include <raft/uv.h>
}

namespace tumbler::replication {
namespace {

// A file in the data dir that one process holds an flock on while it runs
// the log. libraft does not guard its directory; two writers would corrupt it.
constexpr const char* kLockFileName = "tumbler.lock";

Role RoleFromRaft(int state) {
  switch (state) {
    case RAFT_FOLLOWER: return Role::kFollower;
    case RAFT_CANDIDATE: return Role::kCandidate;
    case RAFT_LEADER: return Role::kLeader;
    default: return Role::kUnavailable;
  }
}

Status ValidateOptions(const RaftOptions& options) {
  if (options.data_dir.empty()) {
    return Status(StatusCode::kInvalidArgument, "raft data dir is empty");
  }
  if (options.node_id == 0) {
    return Status(StatusCode::kInvalidArgument, "raft node id must be > 0");
  }
  if (options.raft_address.empty()) {
    return Status(StatusCode::kInvalidArgument, "raft address is empty");
  }
  if (options.heartbeat_timeout_ms == 0) {
    return Status(StatusCode::kInvalidArgument, "raft heartbeat timeout must be > 0");
  }
  // raft_start asserts this.
  if (options.heartbeat_timeout_ms >= options.election_timeout_ms) {
    return Status(StatusCode::kInvalidArgument,
                  "raft heartbeat timeout must be shorter than the election timeout");
  }
  if (options.snapshot_threshold == 0) {
    return Status(StatusCode::kInvalidArgument, "raft snapshot threshold must be > 0");
  }
  return Status::Ok();
}

// Creates the data dir (and its parents) if missing; the dir itself 0700,
// since the log holds every lock name and owner tag.
Status PrepareDataDir(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) return Status::Ok();
  std::filesystem::path parent = std::filesystem::path(dir).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status(StatusCode::kErr, "cannot create data dir " + dir + ": " + std::strerror(errno));
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    return Status(StatusCode::kErr, "data dir " + dir + " is not a directory");
  }
  return Status::Ok();
}

// Returns the fd that holds the data dir's lock for the life of the process.
Result<int> LockDataDir(const std::string& dir) {
  std::string path = dir + "/" + kLockFileName;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status(StatusCode::kErr, "cannot open " + path + ": " + std::strerror(errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int error = errno;
    ::close(fd);
    if (error == EWOULDBLOCK) {
      return Status(StatusCode::kErr, "data dir " + dir + " is in use by another tumblerd");
    }
    return Status(StatusCode::kErr, "cannot lock " + path + ": " + std::strerror(error));
  }
  return fd;
}

class RaftLog final : public ReplicatedLog {
 public:
  RaftLog(uv_loop_t* loop, const RaftOptions& options, StateMachineHooks* hooks, int lock_fd)
      : loop_(loop), options_(options), hooks_(hooks), lock_fd_(lock_fd),
        requests_(limits::kBatchesInFlightMax) {
    for (Request& request : requests_) {
      request.log = this;
      request.next_free = free_requests_;
      free_requests_ = &request;
    }
  }

  // Crash-only (LIBRAFT.md pitfall 1): libraft holds pointers into this
  // object until raft_close completes, and raft_close is unsafe with appends
  // in flight. Destroying a started log is a programming error.
  ~RaftLog() override {
    std::fprintf(stderr,
                 "tumbler: a raft log was destroyed; shutdown is crash-only: end the process "
                 "with _exit (docs/replication.md)\n");
    std::abort();
  }

  RaftLog(const RaftLog&) = delete;
  RaftLog& operator=(const RaftLog&) = delete;

  // Brings libraft up; on error the instance must be handed to Abandon().
  Status Start();

  // A log whose Start() failed part-way: libraft may still reference it, and
  // closing libraft takes loop turns. It is closed if the loop runs again and
  // otherwise kept, reachable, until the process ends (the server exits on
  // this error anyway).
  static void Abandon(std::unique_ptr<RaftLog> log);

  Status Propose(std::string_view entry, DoneFn done) override;
  Status Barrier(DoneFn done) override;
  Status AddVoter(uint64_t id, const std::string& address, DoneFn done) override;
  Status RemoveNode(uint64_t id, DoneFn done) override;
  Status TransferLeadership(uint64_t id, DoneFn done) override;
  LogStatus GetStatus() const override;
  std::vector<PeerStatus> Peers() const override;
  uint32_t voters() const override {
    uint32_t n = 0;
    for (unsigned i = 0; i < raft_.configuration.n; ++i) {
      if (raft_.configuration.servers[i].role == RAFT_VOTER) ++n;
    }
    return n;
  }
  uint32_t in_flight() const override { return in_flight_; }

 private:
  // One proposal or barrier in flight. A fixed pool of them, so that the
  // in-flight bound is also the memory bound and nothing is allocated per
  // proposal but the entry copy that libraft takes ownership of.
  struct Request {
    RaftLog* log = nullptr;
    DoneFn done;
    struct raft_apply apply {};
    struct raft_barrier barrier {};
    Request* next_free = nullptr;
  };

  // Marks "inside one of this log's callbacks" (LIBRAFT.md pitfall 2).
  class CallbackScope {
   public:
    explicit CallbackScope(RaftLog* log) : log_(log) { ++log_->callback_depth_; }
    ~CallbackScope() { --log_->callback_depth_; }
    CallbackScope(const CallbackScope&) = delete;
    CallbackScope& operator=(const CallbackScope&) = delete;

   private:
    RaftLog* log_;
  };

  enum class Stage : uint8_t { kNone, kTransport, kIo, kRaft, kStarted };

  Request* AcquireRequest();
  void ReleaseRequest(Request* request);
  void AssertNotInCallback() const;
  int Bootstrap();

  static int FsmApply(struct raft_fsm* fsm, const struct raft_buffer* buf, void** result);
  static int FsmSnapshot(struct raft_fsm* fsm, struct raft_buffer* bufs[], unsigned* n_bufs);
  static int FsmRestore(struct raft_fsm* fsm, struct raft_buffer* buf);
  static void ApplyDone(struct raft_apply* apply, int status, void* result);
  static void BarrierDone(struct raft_barrier* barrier, int status);
  static void Complete(Request* request, int raft_status);
  static void ChangeDone(struct raft_change* change, int status);
  static void OnAssignTimer(uv_timer_t* timer);
  static void TransferDone(struct raft_transfer* transfer);
  void FinishChange(const Status& status);
  const struct raft_server* FindServer(uint64_t id) const;

  uv_loop_t* loop_;
  RaftOptions options_;
  StateMachineHooks* hooks_;
  // Holds the data dir's flock until the process ends; never read.
  [[maybe_unused]] int lock_fd_;
  Stage stage_ = Stage::kNone;

  struct raft_uv_transport transport_ {};
  struct raft_io io_ {};
  struct raft_fsm fsm_ {};
  // libraft's getters take a non-const pointer even where they only read.
  mutable struct raft raft_ {};

  std::vector<Request> requests_;  // never resized: libraft holds pointers into it
  Request* free_requests_ = nullptr;
  uint32_t in_flight_ = 0;
  int callback_depth_ = 0;
  // What RestoreSnapshot said when it failed during raft_start.
  Status restore_status_;

  // The one membership change in flight (libraft allows one at a time).
  // AddVoter is two changes: raft_add, then, from a timer (never from inside
  // the callback, LIBRAFT.md pitfall 2), raft_assign(VOTER).
  struct raft_change change_ {};
  DoneFn change_done_;
  uint64_t change_id_ = 0;
  bool change_assign_next_ = false;
  uv_timer_t assign_timer_ {};
  struct raft_transfer transfer_ {};
  DoneFn transfer_done_;
};

Status RaftLog::Start() {
  const char* dir = options_.data_dir.c_str();
  int rv = raft_uv_tcp_init(&transport_, loop_);
  if (rv != 0) {
    return Status(StatusCode::kErr, std::string("raft_uv_tcp_init: ") + raft_strerror(rv));
  }
  stage_ = Stage::kTransport;
  if (!options_.bind_address.empty()) {
    rv = raft_uv_tcp_set_bind_address(&transport_, options_.bind_address.c_str());
    if (rv != 0) {
      return Status(StatusCode::kInvalidArgument,
                    "raft bind address " + options_.bind_address + ": " + raft_strerror(rv));
    }
  }
  rv = raft_uv_init(&io_, loop_, dir, &transport_);
  if (rv != 0) {
    return Status(StatusCode::kErr, "raft_uv_init " + options_.data_dir + ": " + io_.errmsg);
  }
  stage_ = Stage::kIo;
  // A peer that went away is dialled again this soon (libraft's default is
  // a second, which a restarted node would wait out before it catches up).
  raft_uv_set_connect_retry_delay(&io_, 100);
  uv_timer_init(loop_, &assign_timer_);
  assign_timer_.data = this;

  // Version 1: snapshots are taken synchronously on the loop and libraft
  // frees their buffers (version 3 fails at raft_init, LIBRAFT.md pitfall 4).
  fsm_.version = 1;
  fsm_.data = this;
  fsm_.apply = &RaftLog::FsmApply;
  fsm_.snapshot = &RaftLog::FsmSnapshot;
  fsm_.restore = &RaftLog::FsmRestore;
  rv = raft_init(&raft_, &io_, &fsm_, options_.node_id, options_.raft_address.c_str());
  if (rv != 0) {
    return Status(StatusCode::kErr, std::string("raft_init: ") + raft_errmsg(&raft_));
  }
  stage_ = Stage::kRaft;
  raft_.data = this;
  raft_set_election_timeout(&raft_, options_.election_timeout_ms);
  raft_set_heartbeat_timeout(&raft_, options_.heartbeat_timeout_ms);
  raft_set_pre_vote(&raft_, options_.pre_vote);
  raft_set_snapshot_threshold(&raft_, options_.snapshot_threshold);
  raft_set_snapshot_trailing(&raft_, options_.snapshot_trailing);

  rv = Bootstrap();
  if (rv != 0 && rv != RAFT_CANTBOOTSTRAP) {  // CANTBOOTSTRAP: the dir has state already
    return Status(StatusCode::kErr, std::string("raft_bootstrap: ") + raft_errmsg(&raft_));
  }
  {
    // raft_start restores the newest snapshot through FsmRestore and, for a
    // lone voter, applies the loaded log through FsmApply.
    CallbackScope scope(this);
    rv = raft_start(&raft_);
  }
  if (rv != 0) {
    if (!restore_status_.ok()) return restore_status_;
    return Status(StatusCode::kErr, std::string("raft_start: ") + raft_errmsg(&raft_));
  }
  stage_ = Stage::kStarted;
  return Status::Ok();
}

// The first configuration: the initial voters (every node of a new cluster
// bootstraps the same list), or this node alone, whom peers join later through
// AddVoter. A joining node bootstraps nothing: the leader sends it the
// configuration. RAFT_CANTBOOTSTRAP (a data dir with state) is the caller's
// "already bootstrapped".
int RaftLog::Bootstrap() {
  if (options_.join) return 0;
  struct raft_configuration configuration;
  raft_configuration_init(&configuration);
  int rv = 0;
  if (options_.initial_voters.empty()) {
    rv = raft_configuration_add(&configuration, options_.node_id, options_.raft_address.c_str(),
                                RAFT_VOTER);
  }
  for (const auto& [id, address] : options_.initial_voters) {
    if (rv == 0) rv = raft_configuration_add(&configuration, id, address.c_str(), RAFT_VOTER);
  }
  if (rv == 0) rv = raft_bootstrap(&raft_, &configuration);
  raft_configuration_close(&configuration);
  return rv;
}

void RaftLog::Abandon(std::unique_ptr<RaftLog> log) {
  // Reachable from a static until the process ends, so leak checkers do not
  // report it; never destroyed (see ~RaftLog).
  static auto* abandoned = new std::vector<std::unique_ptr<RaftLog>>();
  if (log->stage_ >= Stage::kRaft) raft_close(&log->raft_, +[](struct raft*) {});
  abandoned->push_back(std::move(log));
}

void RaftLog::AssertNotInCallback() const {
  // Re-entering libraft from its own callback can crash it (LIBRAFT.md
  // pitfall 2): defer to a uv_check handle.
  assert(callback_depth_ == 0 && "ReplicatedLog called from inside one of its callbacks");
}

RaftLog::Request* RaftLog::AcquireRequest() {
  Request* request = free_requests_;
  assert(request != nullptr);
  free_requests_ = request->next_free;
  request->next_free = nullptr;
  ++in_flight_;
  return request;
}

void RaftLog::ReleaseRequest(Request* request) {
  assert(in_flight_ > 0);
  assert(!request->done);
  request->next_free = free_requests_;
  free_requests_ = request;
  --in_flight_;
}

Status RaftLog::Propose(std::string_view entry, DoneFn done) {
  AssertNotInCallback();
  assert(stage_ == Stage::kStarted);
  assert(done);
  if (entry.size() > limits::kEntryBytesMax) {
    return Status(StatusCode::kLimit, "log entry of " + std::to_string(entry.size()) +
                                          " bytes is over " +
                                          std::to_string(limits::kEntryBytesMax));
  }
  if (in_flight_ >= limits::kBatchesInFlightMax) {
    return Status(StatusCode::kLimit, "too many log entries in flight");
  }
  // libraft takes ownership of the payload only if raft_apply succeeds.
  size_t frame_bytes = EntryFrameBytes(entry.size());
  void* base = raft_malloc(frame_bytes);
  if (base == nullptr) return Status(StatusCode::kTryAgain, "out of memory for a log entry");
  WriteEntryFrame(entry, static_cast<char*>(base));
  struct raft_buffer buffer = {base, frame_bytes};

  Request* request = AcquireRequest();
  request->apply.data = request;
  int rv = raft_apply(&raft_, &request->apply, &buffer, 1, &RaftLog::ApplyDone);
  if (rv != 0) {
    raft_free(base);
    ReleaseRequest(request);
    return StatusFromRaftError(rv);
  }
  request->done = std::move(done);
  return Status::Ok();
}

Status RaftLog::Barrier(DoneFn done) {
  AssertNotInCallback();
  assert(stage_ == Stage::kStarted);
  assert(done);
  if (in_flight_ >= limits::kBatchesInFlightMax) {
    return Status(StatusCode::kLimit, "too many log entries in flight");
  }
  Request* request = AcquireRequest();
  request->barrier.data = request;
  int rv = raft_barrier(&raft_, &request->barrier, &RaftLog::BarrierDone);
  if (rv != 0) {
    ReleaseRequest(request);
    return StatusFromRaftError(rv);
  }
  request->done = std::move(done);
  return Status::Ok();
}

const struct raft_server* RaftLog::FindServer(uint64_t id) const {
  for (unsigned i = 0; i < raft_.configuration.n; ++i) {
    if (raft_.configuration.servers[i].id == id) return &raft_.configuration.servers[i];
  }
  return nullptr;
}

Status RaftLog::AddVoter(uint64_t id, const std::string& address, DoneFn done) {
  AssertNotInCallback();
  assert(done);
  if (id == 0) return Status(StatusCode::kInvalidArgument, "node id must be > 0");
  if (address.empty()) return Status(StatusCode::kInvalidArgument, "empty raft address");
  if (FindServer(id) != nullptr) {
    return Status(StatusCode::kInvalidArgument,
                  "node " + std::to_string(id) + " is already a member");
  }
  if (change_done_) return Status(StatusCode::kTryAgain, "a membership change is in progress");
  change_.data = this;
  int rv = raft_add(&raft_, &change_, id, address.c_str(), &RaftLog::ChangeDone);
  if (rv != 0) return StatusFromRaftError(rv);
  change_done_ = std::move(done);
  change_id_ = id;
  change_assign_next_ = true;
  return Status::Ok();
}

Status RaftLog::RemoveNode(uint64_t id, DoneFn done) {
  AssertNotInCallback();
  assert(done);
  const struct raft_server* server = FindServer(id);
  if (server == nullptr) {
    return Status(StatusCode::kInvalidArgument, "node " + std::to_string(id) + " is not a member");
  }
  unsigned voters = 0;
  for (unsigned i = 0; i < raft_.configuration.n; ++i) {
    if (raft_.configuration.servers[i].role == RAFT_VOTER) ++voters;
  }
  if (server->role == RAFT_VOTER && voters == 1) {
    return Status(StatusCode::kInvalidArgument, "cannot remove the last voter");
  }
  if (change_done_) return Status(StatusCode::kTryAgain, "a membership change is in progress");
  change_.data = this;
  int rv = raft_remove(&raft_, &change_, id, &RaftLog::ChangeDone);
  if (rv != 0) return StatusFromRaftError(rv);
  change_done_ = std::move(done);
  change_id_ = id;
  change_assign_next_ = false;
  return Status::Ok();
}

void RaftLog::ChangeDone(struct raft_change* change, int status) {
  auto* log = static_cast<RaftLog*>(change->data);
  CallbackScope scope(log);
  if (status != 0) {
    log->FinishChange(StatusFromRaftError(status));
    return;
  }
  if (log->change_assign_next_) {
    // The node is a spare now; make it a voter, outside this callback.
    log->change_assign_next_ = false;
    uv_timer_start(&log->assign_timer_, &RaftLog::OnAssignTimer, 0, 0);
    return;
  }
  log->FinishChange(Status::Ok());
}

void RaftLog::OnAssignTimer(uv_timer_t* timer) {
  auto* log = static_cast<RaftLog*>(timer->data);
  // raft_assign waits for the node to catch up before it commits the change.
  int rv = raft_assign(&log->raft_, &log->change_, log->change_id_, RAFT_VOTER,
                       &RaftLog::ChangeDone);
  if (rv != 0) {
    CallbackScope scope(log);
    log->FinishChange(StatusFromRaftError(rv));
  }
}

void RaftLog::FinishChange(const Status& status) {
  DoneFn done = std::move(change_done_);
  change_done_ = nullptr;
  change_id_ = 0;
  if (done) done(status);
}

Status RaftLog::TransferLeadership(uint64_t id, DoneFn done) {
  AssertNotInCallback();
  assert(done);
  if (id != 0) {
    const struct raft_server* server = FindServer(id);
    if (server == nullptr || server->role != RAFT_VOTER) {
      return Status(StatusCode::kInvalidArgument,
                    "node " + std::to_string(id) + " is not a voter");
    }
    if (id == options_.node_id) {
      return Status(StatusCode::kInvalidArgument, "node " + std::to_string(id) + " already leads");
    }
  }
  if (transfer_done_) return Status(StatusCode::kTryAgain, "a transfer is in progress");
  transfer_.data = this;
  int rv = raft_transfer(&raft_, &transfer_, id, &RaftLog::TransferDone);
  if (rv != 0) return StatusFromRaftError(rv);
  transfer_done_ = std::move(done);
  return Status::Ok();
}

void RaftLog::TransferDone(struct raft_transfer* transfer) {
  auto* log = static_cast<RaftLog*>(transfer->data);
  CallbackScope scope(log);
  DoneFn done = std::move(log->transfer_done_);
  log->transfer_done_ = nullptr;
  if (done) done(Status::Ok());
}

LogStatus RaftLog::GetStatus() const {
  LogStatus status;
  status.role = RoleFromRaft(raft_state(&raft_));
  status.term = raft_.current_term;
  status.commit_index = raft_.commit_index;
  status.applied_index = raft_last_applied(&raft_);
  status.last_index = raft_last_index(&raft_);
  status.node_id = options_.node_id;
  raft_id leader_id = 0;
  const char* leader_address = nullptr;
  raft_leader(&raft_, &leader_id, &leader_address);
  status.leader_id = leader_id;
  if (leader_id != 0 && leader_address != nullptr) status.leader_address = leader_address;
  return status;
}

std::vector<PeerStatus> RaftLog::Peers() const {
  std::vector<PeerStatus> peers;
  for (unsigned i = 0; i < raft_.configuration.n; ++i) {
    const struct raft_server& s = raft_.configuration.servers[i];
    PeerStatus peer;
    peer.id = s.id;
    peer.address = s.address != nullptr ? s.address : "";
    peer.role = s.role == RAFT_VOTER ? "voter" : s.role == RAFT_STANDBY ? "standby" : "spare";
    peers.push_back(std::move(peer));
  }
  return peers;
}

int RaftLog::FsmApply(struct raft_fsm* fsm, const struct raft_buffer* buf, void** result) {
  auto* log = static_cast<RaftLog*>(fsm->data);
  CallbackScope scope(log);
  Result<std::string_view> entry =
      ReadEntryFrame(std::string_view(static_cast<const char*>(buf->base), buf->len));
  if (!entry.ok()) {
    // libraft's checksums passed, so this is not a torn write but a bug or
    // a foreign log; skipping the entry would fork the state machine.
    std::fprintf(stderr, "tumbler: fatal: committed entry in %s is corrupt: %s\n",
                 log->options_.data_dir.c_str(), entry.status().ToString().c_str());
    std::abort();
  }
  log->hooks_->ApplyEntry(*entry);
  *result = nullptr;
  return 0;
}

// libraft (FSM version 1) frees bufs[0].base and the bufs array with
// raft_free once the snapshot is stored.
int RaftLog::FsmSnapshot(struct raft_fsm* fsm, struct raft_buffer* bufs[], unsigned* n_bufs) {
  auto* log = static_cast<RaftLog*>(fsm->data);
  CallbackScope scope(log);
  std::string framed(kSnapshotFrameHeaderBytes, '\0');
  log->hooks_->EncodeSnapshot(&framed);
  SealSnapshotFrame(&framed);

  auto* array = static_cast<struct raft_buffer*>(raft_malloc(sizeof(struct raft_buffer)));
  void* base = raft_malloc(framed.size());
  if (array == nullptr || base == nullptr) {
    raft_free(array);
    raft_free(base);
    return RAFT_NOMEM;
  }
  std::memcpy(base, framed.data(), framed.size());
  array[0].base = base;
  array[0].len = framed.size();
  *bufs = array;
  *n_bufs = 1;
  return 0;
}

// Owns buf->base on success only: when restore fails, libraft frees the
// snapshot itself.
int RaftLog::FsmRestore(struct raft_fsm* fsm, struct raft_buffer* buf) {
  auto* log = static_cast<RaftLog*>(fsm->data);
  CallbackScope scope(log);
  Result<std::string_view> payload =
      OpenSnapshotFrame(std::string_view(static_cast<const char*>(buf->base), buf->len));
  Status status = payload.ok() ? log->hooks_->RestoreSnapshot(*payload) : payload.status();
  if (!status.ok()) {
    std::string message = "cannot restore snapshot from " + log->options_.data_dir + ": " +
                          status.ToString();
    if (log->stage_ != Stage::kStarted) {  // inside raft_start: OpenRaftLog reports it
      log->restore_status_ = Status(StatusCode::kErr, message);
      return RAFT_CORRUPT;
    }
    // A follower installing the leader's snapshot: the state is half replaced.
    std::fprintf(stderr, "tumbler: fatal: %s\n", message.c_str());
    std::abort();
  }
  raft_free(buf->base);
  return 0;
}

void RaftLog::ApplyDone(struct raft_apply* apply, int status, void* /*result*/) {
  Complete(static_cast<Request*>(apply->data), status);
}

void RaftLog::BarrierDone(struct raft_barrier* barrier, int status) {
  Complete(static_cast<Request*>(barrier->data), status);
}

void RaftLog::Complete(Request* request, int raft_status) {
  RaftLog* log = request->log;
  CallbackScope scope(log);
  DoneFn done = std::move(request->done);
  request->done = nullptr;
  assert(done);
  log->ReleaseRequest(request);  // before done: in_flight() is current inside it
  done(raft_status == 0 ? Status::Ok() : StatusFromRaftError(raft_status));
}

}  // namespace

// segment_prealloc.cc: libraft's segments are preallocated with written zeros.
bool SegmentsPreallocatedWithZeros();

Result<std::unique_ptr<ReplicatedLog>> OpenRaftLog(uv_loop_t* loop, const RaftOptions& options,
                                                   StateMachineHooks* hooks) {
  assert(loop != nullptr);
  assert(hooks != nullptr);
  Status valid = ValidateOptions(options);
  if (!valid.ok()) return valid;
  // libuv does not ignore SIGPIPE; a write to a dead peer would kill us
  // (LIBRAFT.md pitfall 6).
  std::signal(SIGPIPE, SIG_IGN);
  // Also keeps segment_prealloc.cc (its posix_fallocate) in every link.
  assert(SegmentsPreallocatedWithZeros());
  Status dir = PrepareDataDir(options.data_dir);
  if (!dir.ok()) return dir;
  Result<int> lock_fd = LockDataDir(options.data_dir);
  if (!lock_fd.ok()) return lock_fd.status();

  auto log = std::make_unique<RaftLog>(loop, options, hooks, *lock_fd);
  Status started = log->Start();
  if (!started.ok()) {
    RaftLog::Abandon(std::move(log));
    return started;
  }
  return std::unique_ptr<ReplicatedLog>(std::move(log));
}

}  // namespace tumbler::replication

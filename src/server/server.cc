#include "server/server.h"

#include <sys/random.h>
#include <unistd.h>

#include <cassert>

#include "server/connection.h"
#include "server/log.h"

namespace tumbler::server {
namespace {

// How long SIGTERM waits for log entries in flight before exiting anyway.
constexpr uint64_t kShutdownDrainMsMax = 5000;

uint64_t RandomIncarnation() {
  uint64_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof(v), 0) != sizeof(v)) v = static_cast<uint64_t>(getpid()) << 32 ^ Server::NowMs();
  }
  return v;
}

}  // namespace

Server::Server(uv_loop_t* loop, Config config)
    : loop_(loop), config_(std::move(config)), state_(config_.bounds) {}

Server::~Server() = default;

uint64_t Server::NowMs() { return uv_hrtime() / 1'000'000; }

uint64_t Server::uptime_s() const { return (NowMs() - start_ms_) / 1000; }

uint64_t Server::LogClockMs() const {
  uint64_t t = clock_base_log_ms_ + (NowMs() - clock_base_mono_ms_);
  return std::max(t, state_.log_time_ms());
}

replication::LogStatus Server::log_status() const {
  if (!log_) return {};
  return log_->GetStatus();
}

replication::Role Server::EffectiveRole() const {
  replication::Role role = log_ ? log_->GetStatus().role : replication::Role::kUnavailable;
  if (role == replication::Role::kLeader && !serving_) return replication::Role::kCandidate;
  return role;
}

bool Server::QuorumSuspect() const {
  if (in_flight_.empty() || log_->voters() <= 1) return false;
  return NowMs() - in_flight_.front().proposed_ms > config_.election_timeout_ms / 2;
}

Status Server::NotServingStatus() const {
  if (shutting_down_) return Status(StatusCode::kTryAgain, "server is shutting down");
  if (!log_) return Status(StatusCode::kTryAgain, "server is starting, not serving yet");
  replication::LogStatus st = log_->GetStatus();
  if (st.role == replication::Role::kLeader) {
    return Status(StatusCode::kTryAgain, "elected leader, not serving until its barrier commits");
  }
  if (st.leader_id != 0 && st.leader_id != config_.node_id) {
    // The leader's client address, as it announced itself through the log
    // (empty until its announcement reached this node).
    std::string address;
    if (state_.announced_node_id() == st.leader_id) address = state_.announced_address();
    return Status(StatusCode::kNotLeader, address);
  }
  if (log_->voters() > 1 || config_.join) {
    return Status(StatusCode::kTryAgain, "no leader: the cluster is electing one or has no quorum");
  }
  return Status(StatusCode::kTryAgain, "server is starting, not serving yet");
}

Status Server::Start() {
  incarnation_ = RandomIncarnation();
  start_ms_ = NowMs();
  clock_base_mono_ms_ = start_ms_;

  uv_check_init(loop_, &check_);
  check_.data = this;
  uv_check_start(&check_, OnCheck);
  uv_prepare_init(loop_, &prepare_);
  prepare_.data = this;
  uv_prepare_start(&prepare_, OnPrepare);
  uv_idle_init(loop_, &idle_);
  idle_.data = this;
  for (uv_timer_t* t : {&lease_timer_, &delay_timer_, &role_timer_, &shutdown_timer_}) {
    uv_timer_init(loop_, t);
    t->data = this;
  }
  uv_signal_init(loop_, &sigterm_);
  sigterm_.data = this;
  uv_signal_start(&sigterm_, OnSignal, SIGTERM);
  uv_signal_init(loop_, &sigint_);
  sigint_.data = this;
  uv_signal_start(&sigint_, OnSignal, SIGINT);
  signal(SIGPIPE, SIG_IGN);

  if (config_.durability == Durability::kRaft) {
    replication::RaftOptions opts;  // OpenRaftLog creates data_dir (0700)
    opts.data_dir = config_.data_dir;
    opts.node_id = config_.node_id;
    opts.raft_address = config_.RaftAddress();
    opts.bind_address = config_.raft_bind;
    opts.initial_voters = config_.peers;
    opts.join = config_.join;
    opts.election_timeout_ms = config_.election_timeout_ms;
    opts.heartbeat_timeout_ms = std::max<uint32_t>(10, config_.election_timeout_ms / 10);
    opts.snapshot_threshold = config_.snapshot_threshold;
    uint64_t t0 = NowMs();
    auto log = replication::OpenRaftLog(loop_, opts, this);
    if (!log.ok()) return log.status();
    log_ = std::move(log).value();
    TLOG_INFO("opened raft log in %s (%llu ms)", config_.data_dir.c_str(),
              static_cast<unsigned long long>(NowMs() - t0));
  } else {
    log_ = replication::OpenMemoryLog(loop_, this);
    TLOG_WARN("durability=none: state is kept in memory only and lost when tumblerd exits");
  }
  Status st = Listen();
  if (!st.ok()) return st;
  uv_timer_start(&role_timer_, OnRoleTimer, 0, 50);
  return Status::Ok();
}

Status Server::Listen() {
  uv_tcp_init(loop_, &listener_);
  listener_.data = this;
  struct sockaddr_storage addr;
  int rc = uv_ip4_addr(config_.bind.c_str(), config_.port, reinterpret_cast<sockaddr_in*>(&addr));
  if (rc != 0) {
    rc = uv_ip6_addr(config_.bind.c_str(), config_.port, reinterpret_cast<sockaddr_in6*>(&addr));
  }
  if (rc != 0) {
    return Status(StatusCode::kInvalidArgument, "--bind: not an IP address: " + config_.bind);
  }
  rc = uv_tcp_bind(&listener_, reinterpret_cast<const sockaddr*>(&addr), 0);
  if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 511, OnNewConnection);
  if (rc != 0) {
    return Status(StatusCode::kUnavailable, "cannot listen on " + config_.bind + ":" +
                                                std::to_string(config_.port) + ": " +
                                                uv_strerror(rc));
  }
  listening_ = true;
  TLOG_INFO("listening on %s:%u (durability=%s)", config_.bind.c_str(), config_.port,
            config_.durability == Durability::kRaft ? "raft" : "none");
  return Status::Ok();
}

void Server::OnNewConnection(uv_stream_t* listener, int status) {
  auto* self = static_cast<Server*>(listener->data);
  if (status < 0) {
    TLOG_WARN("accept failed: %s", uv_strerror(status));
    return;
  }
  auto* conn = new Connection(self, self->next_conn_id_++);
  uv_tcp_init(self->loop_, conn->handle());
  conn->handle()->data = conn;
  if (uv_accept(listener, reinterpret_cast<uv_stream_t*>(conn->handle())) != 0) {
    conn->Close();
    return;
  }
  self->connections_.emplace(conn->id(), conn);
  conn->Start();
  if (self->connections_.size() > self->config_.connections_max) {
    conn->writer().Error(Status(StatusCode::kLimit, "max connections reached (" +
                                                        std::to_string(self->config_.connections_max) +
                                                        ")"));
    conn->Dirty();
    conn->CloseAfterFlush();
  }
}

Connection* Server::FindConnection(uint64_t conn_id) const {
  if (conn_id == 0) return nullptr;
  auto it = connections_.find(conn_id);
  return it == connections_.end() ? nullptr : it->second;
}

void Server::MarkDirty(Connection* conn) { dirty_.push_back(conn->id()); }

void Server::AddStalled(Connection* conn) {
  stalled_.push_back(conn->id());
  Wake();
}

void Server::Wake() {
  if (idle_active_) return;
  idle_active_ = true;
  uv_idle_start(&idle_, OnIdle);
}

void Server::OnIdle(uv_idle_t* handle) {
  // Nothing to do here: an active idle handle only makes poll return at once,
  // so that the check phase (OnCheck) runs. Stop once nothing can progress.
  auto* self = static_cast<Server*>(handle->data);
  bool batch_ready = self->batch_open_ && self->serving_ &&
                     self->log_->in_flight() < limits::kBatchesInFlightMax;
  bool internal_ready = !self->internal_.empty() && self->serving_;
  if (self->stalled_.empty() && !batch_ready && !internal_ready) {
    self->idle_active_ = false;
    uv_idle_stop(handle);
  }
}

void Server::OnConnectionClosed(Connection* conn) {
  connections_.erase(conn->id());
  if (conn->wait_id() != 0) {
    auto it = waits_.find(conn->wait_id());
    if (it != waits_.end()) {
      it->second.conn_id = 0;  // orphan: a grant racing with the cancel is released
      CancelWait(conn->wait_id(), 0);
    }
  }
}

// --- Batching -----------------------------------------------------------------

bool Server::BatchFull() const { return builder_.count() >= limits::kBatchCommandsMax; }

void Server::BatchBegin() {
  core::BatchHeader header;
  header.log_time_ms = LogClockMs();
  header.origin = incarnation_;
  header.seq = next_seq_++;
  builder_.Begin(header);
  if (!spare_batches_.empty()) {
    building_ = std::move(spare_batches_.back());
    spare_batches_.pop_back();
  }
  building_.seq = header.seq;
  building_.commands.clear();
}

bool Server::Enqueue(const core::CommandView& cmd, Connection* conn, ReplyKind kind) {
  if (!batch_open_) {
    BatchBegin();
    batch_open_ = true;
  }
  if (BatchFull()) return false;
  builder_.Add(cmd);
  building_.commands.push_back({conn != nullptr ? conn->id() : 0, kind});
  if (conn != nullptr && kind != ReplyKind::kCancelWait) conn->AddPendingWrite();
  return true;
}

void Server::EnqueueInternal(InternalCommand cmd) {
  internal_.push_back(std::move(cmd));
  Wake();
}

void Server::FlushInternal() {
  while (!internal_.empty() && !BatchFull()) {
    InternalCommand& ic = internal_.front();
    core::CommandView v;
    v.type = ic.type;
    v.session = ic.session;
    v.wait_id = ic.wait_id;
    v.lock_delay_ms = ic.lock_delay_ms;
    v.node_id = ic.node_id;
    v.name = ic.name;
    v.owner = ic.owner;
    Connection* conn = FindConnection(ic.answer_conn_id);
    ReplyKind kind = conn != nullptr ? ReplyKind::kCancelWait : ReplyKind::kNone;
    // A cancel whose connection closed meanwhile still goes out: the close
    // turned the wait into an orphan, and a duplicate cancel is a no-op.
    if (!Enqueue(v, conn, kind)) break;
    internal_.pop_front();
  }
}

void Server::OnCheck(uv_check_t* handle) {
  auto* self = static_cast<Server*>(handle->data);
  self->RunDeferred();
  self->ResumeStalled();
  self->ProposeBatch();
  self->ProposeReadBarrier();
}

void Server::Defer(std::function<void()> fn) {
  deferred_.push_back(std::move(fn));
  Wake();
}

void Server::RunDeferred() {
  std::vector<std::function<void()>> run;
  run.swap(deferred_);
  for (auto& fn : run) fn();
}

bool Server::ReadReady(Connection* conn) {
  // One voter: no other leader can exist, the local state is the latest.
  if (log_->voters() <= 1) return true;
  uint64_t fence = conn->read_fence();
  if (fence != 0 && read_barriers_done_ >= fence) {
    conn->set_read_fence(0);
    return true;
  }
  if (fence == 0) {
    // Any barrier numbered from here on is proposed after this request arrived.
    conn->set_read_fence(read_barrier_next_);
    read_barrier_wanted_ = true;
    Wake();
  }
  read_parked_.push_back(conn->id());
  return false;
}

void Server::ProposeReadBarrier() {
  if (!read_barrier_wanted_ || !serving_) return;
  uint64_t number = read_barrier_next_;
  Status st = log_->Barrier([this, number](Status s) {
    if (s.ok()) {
      read_barriers_done_ = std::max(read_barriers_done_, number);
    } else {
      read_barrier_wanted_ = true;  // the parked reads need another one
    }
    // Re-run the parked reads from the check phase (never inside a raft
    // callback): they answer, park again, or meet NotServingStatus().
    for (uint64_t id : read_parked_) stalled_.push_back(id);
    read_parked_.clear();
    Wake();
  });
  if (!st.ok()) return;  // in-flight bound: tried again next iteration
  ++read_barrier_next_;
  read_barrier_wanted_ = false;
}

void Server::ProposeBatch() {
  if (!serving_) {
    // Nothing may be proposed before the barrier of this term; requests were
    // answered TRYAGAIN, internal commands wait.
    return;
  }
  FlushInternal();
  if (!batch_open_ || builder_.count() == 0) return;
  if (log_->in_flight() >= limits::kBatchesInFlightMax) return;  // retried next iteration
  std::string_view entry = builder_.Finish();
  uint64_t seq = building_.seq;
  Status st = log_->Propose(entry, [this, seq](Status s) { OnBatchDone(seq, s); });
  if (!st.ok()) {
    TLOG_WARN("propose failed: %s", st.ToString().c_str());
    FailBatch(building_, st);
  } else {
    building_.proposed_ms = NowMs();
    in_flight_.push_back(std::move(building_));
  }
  building_ = PendingBatch();
  batch_open_ = false;
}

void Server::OnBatchDone(uint64_t seq, const Status& status) {
  if (status.ok()) return;  // results were routed when the entry was applied
  for (auto it = in_flight_.begin(); it != in_flight_.end(); ++it) {
    if (it->seq == seq) {
      TLOG_WARN("log entry %llu failed: %s; closing its %zu requests' connections (outcome "
                "unknown)",
                static_cast<unsigned long long>(seq), status.ToString().c_str(),
                it->commands.size());
      AbandonBatch(*it);
      in_flight_.erase(it);
      return;
    }
  }
}

void Server::AbandonBatch(const PendingBatch& batch) {
  // The entry is in this node's log and may still be committed by the next
  // leader (a leader that lost its quorum fails its appends, but they stay in
  // its log). PROTOCOL.md promises that NOTLEADER and TRYAGAIN change
  // nothing, so those are not the answer: the connection is closed after the
  // replies already written, which tells the client the outcome is unknown
  // (the client library then checks with INSPECT and repairs).
  for (const PendingCommand& pc : batch.commands) {
    Connection* conn = FindConnection(pc.conn_id);
    if (conn == nullptr || pc.kind == ReplyKind::kNone) continue;
    conn->CloseAfterFlush();
  }
}

void Server::FailBatch(PendingBatch& batch, const Status& status) {
  for (const PendingCommand& pc : batch.commands) {
    Connection* conn = FindConnection(pc.conn_id);
    if (conn == nullptr || pc.kind == ReplyKind::kNone) continue;
    conn->writer().Error(status);
    conn->Dirty();
    if (pc.kind == ReplyKind::kLockWait || pc.kind == ReplyKind::kCancelWait) conn->Unblock();
    if (pc.kind != ReplyKind::kCancelWait) conn->PendingWriteDone();
  }
}

void Server::ResumeStalled() {
  if (stalled_.empty()) return;
  std::vector<uint64_t> ids;
  ids.swap(stalled_);
  for (uint64_t id : ids) {
    Connection* conn = FindConnection(id);
    if (conn != nullptr) conn->Process();
  }
}

void Server::OnPrepare(uv_prepare_t* handle) {
  auto* self = static_cast<Server*>(handle->data);
  if (self->dirty_.empty()) return;
  std::vector<uint64_t> ids;
  ids.swap(self->dirty_);
  for (uint64_t id : ids) {
    Connection* conn = self->FindConnection(id);
    if (conn != nullptr) conn->Flush();
  }
  ids.clear();
  if (self->dirty_.empty()) self->dirty_.swap(ids);  // keep the capacity
}

// --- Applying committed entries ------------------------------------------------

void Server::ApplyEntry(std::string_view entry) {
  core::BatchHeader header;
  Status st = core::DecodeBatch(entry, &header, &decoded_);
  if (!st.ok()) {
    // A committed entry that does not decode is corruption or a bug; going on
    // would let replicas diverge.
    TLOG_ERROR("corrupt log entry (%zu bytes): %s", entry.size(), st.ToString().c_str());
    abort();
  }
  PendingBatch* mine = nullptr;
  if (header.origin == incarnation_ && !in_flight_.empty() && in_flight_.front().seq == header.seq) {
    mine = &in_flight_.front();
    assert(mine->commands.size() == decoded_.size());
  }
  for (size_t i = 0; i < decoded_.size(); ++i) {
    const core::CommandView& cmd = decoded_[i];
    effects_.Clear();
    core::CommandResult result = state_.Apply(cmd, header.log_time_ms, &effects_);
    if (cmd.type == core::CommandType::kOpenSession && result.status.ok() && serving_) {
      uint64_t deadline = NowMs() + cmd.ttl_ms;
      leases_[result.session] = Lease{deadline, cmd.ttl_ms, false};
      lease_heap_.emplace(deadline, result.session);
    }
    if (mine != nullptr) RouteResult(mine->commands[i], cmd, result);
    if (cmd.type == core::CommandType::kCancelWait) WaitCancelled(cmd.wait_id);
    HandleEffects();
  }
  if (mine != nullptr) {
    spare_batches_.push_back(std::move(in_flight_.front()));
    in_flight_.pop_front();
  }
  if (serving_) {
    ArmLeaseTimer();
    ArmDelayTimer();
  }
}

void Server::RouteResult(const PendingCommand& pending, const core::CommandView& cmd,
                         const core::CommandResult& result) {
  Connection* conn = FindConnection(pending.conn_id);
  if (pending.kind == ReplyKind::kLock || pending.kind == ReplyKind::kLockWait) {
    RouteLockResult(conn, pending, cmd, result);
    return;
  }
  // kCancelWait is answered by WaitCancelled, whoever proposed the cancel.
  if (conn == nullptr || pending.kind == ReplyKind::kNone ||
      pending.kind == ReplyKind::kCancelWait) {
    return;
  }
  protocol::ReplyWriter w = conn->writer();
  if (!result.status.ok()) {
    w.Error(result.status);
  } else if (pending.kind == ReplyKind::kSessionOpen) {
    w.Integer(static_cast<int64_t>(result.session));
  } else if (pending.kind == ReplyKind::kSessionClose) {
    w.Integer(result.released);
  } else if (pending.kind == ReplyKind::kUnlock) {
    w.Integer(result.hold_count);
  }
  conn->Dirty();
  conn->PendingWriteDone();
}

void Server::RouteLockResult(Connection* conn, const PendingCommand& pending,
                             const core::CommandView& cmd, const core::CommandResult& result) {
  const bool blocking = pending.kind == ReplyKind::kLockWait;
  if (conn == nullptr) {
    // The requester is gone. A queued wait is cancelled; a grant it can never
    // learn of is released again (docs/commands.md).
    if (!blocking || !result.status.ok()) return;
    if (result.lock_outcome == core::LockOutcome::kQueued) {
      waits_.emplace(result.wait_id, WaitRecord{0, cmd.session, std::string(cmd.name),
                                                std::string(cmd.owner)});
      CancelWait(result.wait_id, 0);
    } else if (result.lock_outcome == core::LockOutcome::kGranted) {
      ReleaseUnseenGrant(cmd.session, std::string(cmd.name), std::string(cmd.owner));
    }
    return;
  }
  protocol::ReplyWriter w = conn->writer();
  bool done = true;
  if (!result.status.ok()) {
    w.Error(result.status);
  } else if (result.lock_outcome == core::LockOutcome::kGranted) {
    WriteGrant(conn, result.token, result.hold_count);
  } else if (result.lock_outcome == core::LockOutcome::kQueued) {
    waits_.emplace(result.wait_id, WaitRecord{conn->id(), cmd.session, std::string(cmd.name),
                                              std::string(cmd.owner)});
    conn->WaitQueued(result.wait_id);
    done = false;
  } else {
    w.NullArray();
  }
  conn->Dirty();
  conn->PendingWriteDone();
  if (blocking && done) conn->Unblock();
}

void Server::HandleEffects() {
  WaitRecord rec;
  for (const core::Effects::Grant& g : effects_.grants) {
    // No record: another node's wait, or one from before a restart.
    if (!TakeWait(g.wait_id, &rec)) continue;
    Connection* conn = Waiter(rec, g.wait_id);
    if (conn == nullptr) {
      ReleaseUnseenGrant(rec.session, std::move(rec.name), std::move(rec.owner));
      continue;
    }
    WriteGrant(conn, g.token, g.hold_count);
    conn->Unblock();
  }
  for (const core::Effects::WaitEnded& e : effects_.ended) {
    if (!TakeWait(e.wait_id, &rec)) continue;
    Connection* conn = Waiter(rec, e.wait_id);
    if (conn == nullptr) continue;
    conn->writer().Error(e.reason == StatusCode::kNoSession
                             ? Status(StatusCode::kNoSession, "the session ended while waiting")
                             : Status(e.reason, "the wait was cancelled by a leader change"));
    conn->Dirty();
    conn->Unblock();
  }
  for (uint64_t session : effects_.sessions_ended) leases_.erase(session);
  if (!effects_.sessions_ended.empty()) CompactLeaseHeap();
}

void Server::CompactLeaseHeap() {
  // An ended session's heap entry stays until its deadline comes up, which
  // can be an hour away; under session churn dead entries would pile up.
  // Rebuilding once they outnumber the live ones keeps the heap within twice
  // the sessions, at amortised O(1) per ended session.
  if (lease_heap_.size() <= 2 * leases_.size() + 1024) return;
  std::vector<HeapEntry> live;
  live.reserve(leases_.size());
  for (const auto& [session, lease] : leases_) live.emplace_back(lease.deadline_ms, session);
  lease_heap_ = decltype(lease_heap_)(std::greater<>(), std::move(live));
  lease_timer_due_ms_ = 0;
  ArmLeaseTimer();
}

void Server::WaitCancelled(uint64_t wait_id) {
  // The wait is out of the state machine now (or was granted or ended before
  // the cancel applied, and its record is already gone). A live connection
  // still waiting on it ran out of WAIT time: it gets null.
  WaitRecord rec;
  if (!TakeWait(wait_id, &rec)) return;
  Connection* conn = Waiter(rec, wait_id);
  if (conn == nullptr) return;
  conn->writer().NullArray();
  conn->Dirty();
  conn->Unblock();
}

bool Server::TakeWait(uint64_t wait_id, WaitRecord* record) {
  auto it = waits_.find(wait_id);
  if (it == waits_.end()) return false;
  *record = std::move(it->second);
  waits_.erase(it);
  return true;
}

Connection* Server::Waiter(const WaitRecord& record, uint64_t wait_id) const {
  Connection* conn = FindConnection(record.conn_id);
  return conn != nullptr && conn->wait_id() == wait_id ? conn : nullptr;
}

void Server::WriteGrant(Connection* conn, uint64_t token, uint32_t hold_count) {
  protocol::ReplyWriter w = conn->writer();
  w.ArrayHeader(2);
  w.Integer(static_cast<int64_t>(token));
  w.Integer(hold_count);
  conn->Dirty();
}

void Server::WaitTimedOut(Connection* conn) { CancelWait(conn->wait_id(), conn->id()); }

void Server::CancelWait(uint64_t wait_id, uint64_t answer_conn_id) {
  InternalCommand cancel;
  cancel.type = core::CommandType::kCancelWait;
  cancel.wait_id = wait_id;
  cancel.answer_conn_id = answer_conn_id;
  EnqueueInternal(std::move(cancel));
}

void Server::ReleaseUnseenGrant(uint64_t session, std::string name, std::string owner) {
  InternalCommand unlock;
  unlock.type = core::CommandType::kUnlock;
  unlock.session = session;
  unlock.name = std::move(name);
  unlock.owner = std::move(owner);
  EnqueueInternal(std::move(unlock));
}

// --- Leadership ------------------------------------------------------------------

void Server::OnRoleTimer(uv_timer_t* handle) { static_cast<Server*>(handle->data)->CheckRole(); }

void Server::CheckRole() {
  if (shutting_down_) return;
  replication::LogStatus st = log_->GetStatus();
  bool leader = st.role == replication::Role::kLeader;
  if (st.role != logged_role_ || st.leader_id != logged_leader_id_) {
    // One line per change of role or leader: what an operator follows a
    // failover by (docs/operations.md "Cluster").
    TLOG_INFO("role %s, term %llu, leader %s", std::string(replication::RoleName(st.role)).c_str(),
              static_cast<unsigned long long>(st.term),
              st.leader_id != 0 ? ("node " + std::to_string(st.leader_id)).c_str() : "unknown");
    logged_role_ = st.role;
    logged_leader_id_ = st.leader_id;
  }
  if (serving_ && (!leader || st.term != serving_term_)) {
    StopServing(Status(StatusCode::kTryAgain, "leadership lost"));
  }
  if (leader && !serving_ && !barrier_in_flight_) {
    uint64_t term = st.term;
    // The barrier of a new term is an entry of ours that names this node and
    // its client address (Announce): committing it commits every entry
    // before it (LIBRAFT.md pitfall 8), and once it is applied every
    // follower that has it names this node in NOTLEADER.
    core::CommandView announce;
    announce.type = core::CommandType::kAnnounce;
    announce.node_id = config_.node_id;
    const std::string address = config_.AdvertisedAddress();
    announce.name = address;
    core::BatchHeader header;
    header.log_time_ms = LogClockMs();
    header.origin = incarnation_;
    header.seq = 0;  // batches count from 1: this entry routes no replies
    announce_builder_.Begin(header);
    announce_builder_.Add(announce);
    Status bs = log_->Propose(announce_builder_.Finish(), [this, term](Status s) {
      barrier_in_flight_ = false;
      if (!s.ok()) {
        TLOG_WARN("barrier for term %llu failed: %s", static_cast<unsigned long long>(term),
                  s.ToString().c_str());
        return;
      }
      serving_term_ = term;
      BecomeServing();
    });
    if (bs.ok()) barrier_in_flight_ = true;
  }
}

void Server::BecomeServing() {
  serving_ = true;
  clock_base_log_ms_ = state_.log_time_ms();
  clock_base_mono_ms_ = NowMs();
  // A new leader gives every session a fresh full TTL before it may expire any
  // (DESIGN.md "Time").
  leases_.clear();
  lease_heap_ = {};
  uint64_t now = NowMs();
  for (const auto& [session, ttl] : state_.SessionTtls()) {
    leases_[session] = Lease{now + ttl, ttl, false};
    lease_heap_.emplace(now + ttl, session);
  }
  // Waits queued before this term belong to connections that no longer exist.
  if (!state_.WaitIds().empty()) {
    InternalCommand cancel_all;
    cancel_all.type = core::CommandType::kCancelAllWaits;
    EnqueueInternal(std::move(cancel_all));
  }
  lease_timer_due_ms_ = 0;
  delay_timer_due_log_ms_ = 0;
  ArmLeaseTimer();
  ArmDelayTimer();
  core::Stats stats = state_.GetStats();
  TLOG_INFO("serving as leader, term %llu: %llu sessions, %llu locks, last token %llu (ready in %llu ms)",
            static_cast<unsigned long long>(serving_term_),
            static_cast<unsigned long long>(stats.sessions),
            static_cast<unsigned long long>(stats.locks),
            static_cast<unsigned long long>(stats.last_token),
            static_cast<unsigned long long>(NowMs() - start_ms_));
}

void Server::StopServing(const Status& why) {
  TLOG_WARN("stopped serving: %s", why.ToString().c_str());
  serving_ = false;
  leases_.clear();
  lease_heap_ = {};
  uv_timer_stop(&lease_timer_);
  uv_timer_stop(&delay_timer_);
  lease_timer_due_ms_ = 0;
  delay_timer_due_log_ms_ = 0;
  // Waits of this node's connections cannot be granted by this node any more.
  // They are queued in the state machine (the LOCK ... WAIT committed), so an
  // error reply would claim a change that happened did not: close their
  // connections instead (outcome unknown; the next leader cancels the waits,
  // or grants them first, and the client checks with INSPECT).
  for (auto& [wait_id, rec] : waits_) {
    Connection* conn = FindConnection(rec.conn_id);
    if (conn == nullptr || conn->wait_id() != wait_id) continue;
    conn->CloseAfterFlush();
  }
  waits_.clear();
  internal_.clear();
  // Parked reads meet NotServingStatus() when they run again.
  for (uint64_t id : read_parked_) stalled_.push_back(id);
  read_parked_.clear();
  // Requests already in the batch being built will never be proposed.
  if (batch_open_) {
    FailBatch(building_, NotServingStatus());
    building_.commands.clear();
    batch_open_ = false;
  }
}

// --- Session leases ------------------------------------------------------------

bool Server::TouchSession(uint64_t session) {
  auto it = leases_.find(session);
  if (it == leases_.end()) return true;
  if (it->second.expiring) return false;
  it->second.deadline_ms = NowMs() + it->second.ttl_ms;
  return true;
}

int64_t Server::SessionExpiresInMs(uint64_t session) const {
  auto it = leases_.find(session);
  if (it == leases_.end()) return -1;
  uint64_t now = NowMs();
  return it->second.deadline_ms > now ? static_cast<int64_t>(it->second.deadline_ms - now) : 0;
}

void Server::OnLeaseTimer(uv_timer_t* handle) {
  auto* self = static_cast<Server*>(handle->data);
  self->lease_timer_due_ms_ = 0;
  self->ExpireDueSessions();
  self->ArmLeaseTimer();
}

void Server::ExpireDueSessions() {
  if (!serving_) return;
  uint64_t now = NowMs();
  while (!lease_heap_.empty() && lease_heap_.top().first <= now) {
    uint64_t session = lease_heap_.top().second;
    lease_heap_.pop();
    auto it = leases_.find(session);
    if (it == leases_.end() || it->second.expiring) continue;
    if (it->second.deadline_ms > now) {
      lease_heap_.emplace(it->second.deadline_ms, session);
      continue;
    }
    it->second.expiring = true;
    TLOG_INFO("session %llu expired (ttl %u ms)", static_cast<unsigned long long>(session),
              it->second.ttl_ms);
    InternalCommand expire;
    expire.type = core::CommandType::kExpireSession;
    expire.session = session;
    expire.lock_delay_ms = config_.lock_delay_ms;
    EnqueueInternal(std::move(expire));
  }
}

void Server::ArmLeaseTimer() {
  if (lease_heap_.empty()) return;
  uint64_t due = lease_heap_.top().first;
  if (lease_timer_due_ms_ != 0 && lease_timer_due_ms_ <= due) return;
  uint64_t now = NowMs();
  lease_timer_due_ms_ = due;
  uv_timer_start(&lease_timer_, OnLeaseTimer, due > now ? due - now : 0, 0);
}

void Server::OnDelayTimer(uv_timer_t* handle) {
  auto* self = static_cast<Server*>(handle->data);
  self->delay_timer_due_log_ms_ = 0;
  InternalCommand tick;
  tick.type = core::CommandType::kTick;
  self->EnqueueInternal(std::move(tick));
}

void Server::ArmDelayTimer() {
  std::optional<uint64_t> next = state_.NextDelayEndMs();
  if (!next) return;
  if (delay_timer_due_log_ms_ != 0 && delay_timer_due_log_ms_ <= *next) return;
  delay_timer_due_log_ms_ = *next;
  uint64_t log_now = LogClockMs();
  uint64_t wait = *next > log_now ? *next - log_now : 0;
  uv_timer_start(&delay_timer_, OnDelayTimer, wait + 1, 0);
}

// --- Snapshots -----------------------------------------------------------------

void Server::EncodeSnapshot(std::string* out) { state_.EncodeSnapshot(out); }

Status Server::RestoreSnapshot(std::string_view snapshot) {
  return state_.DecodeSnapshot(snapshot);
}

// --- Shutdown ------------------------------------------------------------------

void Server::OnSignal(uv_signal_t* handle, int signum) {
  static_cast<Server*>(handle->data)->BeginShutdown(signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

void Server::BeginShutdown(const char* why) {
  if (shutting_down_) return;
  shutting_down_ = true;
  shutdown_started_ms_ = NowMs();
  TLOG_INFO("shutting down (%s): no new connections, draining %u log entries in flight", why,
            log_ ? log_->in_flight() : 0);
  if (listening_) {
    uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
    listening_ = false;
  }
  uv_timer_start(&shutdown_timer_, OnShutdownTimer, 0, 5);
}

void Server::OnShutdownTimer(uv_timer_t* handle) {
  auto* self = static_cast<Server*>(handle->data);
  bool drained = self->log_ == nullptr || self->log_->in_flight() == 0;
  bool too_long = NowMs() - self->shutdown_started_ms_ >= kShutdownDrainMsMax;
  if (!drained && !too_long) return;
  for (auto& [id, conn] : self->connections_) conn->Flush();
  TLOG_INFO("stopped%s", drained ? "" : " (log entries still in flight after the drain bound)");
  // Crash-only exit (LIBRAFT.md pitfall 1): everything acknowledged is on disk.
  _exit(0);
}

}  // namespace tumbler::server

#include "client/client_state.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <thread>

#include "client/owner.h"
#include "core/limits.h"

namespace tumbler::client {
namespace {

using std::chrono::milliseconds;

// After a failed renewal, the watchdog tries again this often (bounded by the
// TTL: ten tries per lease at least).
constexpr Clock::duration kRenewRetryMax = milliseconds(200);
// After a failed repair pass, the next one waits this long.
constexpr Clock::duration kRepairRetry = milliseconds(500);
// A LOCK that fails with ERR right after its connection broke may have met
// its own earlier wait, not yet cancelled by the server ("the same holder
// already waits"): it is asked again this many times, this far apart.
constexpr int kStaleWaitRetries = 5;
constexpr Clock::duration kStaleWaitRetryDelay = milliseconds(50);
// A WAIT the server ended before the client's deadline is asked again (for
// the rest of the time) at most this many times.
constexpr int kEarlyTimeoutsMax = 3;
// Waits longer than this are "forever" (they would overflow steady_clock).
constexpr Clock::duration kForeverThreshold = std::chrono::hours(24 * 365 * 100);

bool IsWireError(StatusCode code) {
  return code >= StatusCode::kErr && code <= StatusCode::kNoPerm;
}

bool Passed(const Deadline& deadline) { return deadline && Clock::now() >= *deadline; }

Status CheckName(std::string_view name) {
  if (name.empty()) return Status(StatusCode::kInvalidArgument, "lock name is empty");
  if (name.size() > limits::kLockNameBytesMax) {
    return Status(StatusCode::kInvalidArgument, "lock name is longer than " +
                                                    std::to_string(limits::kLockNameBytesMax) +
                                                    " bytes");
  }
  return Status::Ok();
}

// Built by appends: GCC 12 at -O3 reports a false -Wrestrict for
// "\"" + std::string(name) + "\"" (a Release build would fail on it).
std::string Quoted(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 2);
  out += '"';
  out.append(name);
  out += '"';
  return out;
}

// An integer reply, or an integer sent as a bulk string.
std::optional<int64_t> AsInteger(const protocol::Value* v) {
  if (v == nullptr) return std::nullopt;
  if (v->type == protocol::Value::Type::kInteger) return v->integer;
  if (v->type == protocol::Value::Type::kBulk || v->type == protocol::Value::Type::kSimple) {
    int64_t out = 0;
    auto [end, ec] = std::from_chars(v->str.data(), v->str.data() + v->str.size(), out);
    if (ec == std::errc() && end == v->str.data() + v->str.size()) return out;
  }
  return std::nullopt;
}

// LOCK's grant reply: [token, hold_count].
bool ParseGrant(const protocol::Value& v, uint64_t* token, uint32_t* count) {
  if (v.type != protocol::Value::Type::kArray || v.elements.size() != 2) return false;
  std::optional<int64_t> t = AsInteger(&v.elements[0]);
  std::optional<int64_t> c = AsInteger(&v.elements[1]);
  if (!t || !c || *t <= 0 || *c <= 0 || *c > static_cast<int64_t>(limits::kHoldCountMax)) {
    return false;
  }
  *token = static_cast<uint64_t>(*t);
  *count = static_cast<uint32_t>(*c);
  return true;
}

Status BadReply(std::string_view command) {
  return Status(StatusCode::kProtocol, "unexpected reply to " + std::string(command));
}

}  // namespace

// --- Pool -----------------------------------------------------------------------

class ClientState::Lease {
 public:
  Lease(ClientState* state, std::unique_ptr<Channel> channel)
      : state_(state), channel_(std::move(channel)) {}
  ~Lease() { state_->ReturnChannel(std::move(channel_)); }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  Channel& operator*() { return *channel_; }

 private:
  ClientState* state_;
  std::unique_ptr<Channel> channel_;
};

ClientState::ClientState(std::vector<Endpoint> endpoints, ClientOptions options)
    : options_(std::move(options)),
      endpoints_(std::make_shared<EndpointSet>(std::move(endpoints))) {
  channel_options_.connect_timeout = options_.connect_timeout;
  channel_options_.reply_timeout = options_.op_timeout;
  watchdog_channel_ = NewChannel();
}

ClientState::~ClientState() = default;

Status ClientState::ValidateOptions(const ClientOptions& options) {
  auto invalid = [](std::string what) {
    return Status(StatusCode::kInvalidArgument, std::move(what));
  };
  if (options.session_ttl < milliseconds(limits::kSessionTtlMsMin) ||
      options.session_ttl > milliseconds(limits::kSessionTtlMsMax)) {
    return invalid("session_ttl must be 100 ms .. 3600000 ms");
  }
  if (options.connect_timeout <= milliseconds(0)) return invalid("connect_timeout must be > 0");
  if (options.op_timeout <= milliseconds(0)) return invalid("op_timeout must be > 0");
  if (options.session_name.size() > limits::kSessionLabelBytesMax) {
    return invalid("session_name is longer than 256 bytes");
  }
  if (options.connections_max < 1 || options.connections_max > 1024) {
    return invalid("connections_max must be 1 .. 1024");
  }
  return Status::Ok();
}

std::unique_ptr<Channel> ClientState::NewChannel() {
  auto channel = std::make_unique<Channel>(endpoints_, channel_options_);
  channel->SetReconnectHook([this] { RenewSoon(); });
  return channel;
}

Result<std::unique_ptr<Channel>> ClientState::TakeChannel(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (closed_ || lost_) return EndedStatusLocked();
    if (!idle_channels_.empty()) {
      std::unique_ptr<Channel> channel = std::move(idle_channels_.back());
      idle_channels_.pop_back();
      busy_channels_.insert(channel.get());
      lock.unlock();
      channel->DropIfStale();
      return channel;
    }
    if (channels_count_ < options_.connections_max) {
      ++channels_count_;
      std::unique_ptr<Channel> channel = NewChannel();
      busy_channels_.insert(channel.get());
      return channel;
    }
    if (!deadline) {
      pool_cv_.wait(lock);
    } else if (pool_cv_.wait_until(lock, *deadline) == std::cv_status::timeout &&
               idle_channels_.empty() && channels_count_ >= options_.connections_max) {
      return Status(StatusCode::kTimeout, "all " + std::to_string(options_.connections_max) +
                                              " connections of the client are busy");
    }
  }
}

void ClientState::ReturnChannel(std::unique_ptr<Channel> channel) {
  std::unique_lock<std::mutex> lock(mu_);
  busy_channels_.erase(channel.get());
  if (closed_ || lost_ || channel->interrupted()) {
    --channels_count_;
  } else {
    idle_channels_.push_back(std::move(channel));
  }
  pool_cv_.notify_one();
  lock.unlock();
  // A channel not kept is destroyed here, outside the lock.
}

// --- Session --------------------------------------------------------------------

Status ClientState::OpenSession() {
  assert(session_id_ == 0);
  std::string ttl_text = std::to_string(options_.session_ttl.count());
  std::vector<std::string_view> args = {"SESSION", "OPEN", ttl_text};
  if (!options_.session_name.empty()) {
    args.push_back("NAME");
    args.push_back(options_.session_name);
  }
  CallOptions call;
  Clock::time_point start = Clock::now();
  call.deadline = start + options_.op_timeout;
  // Sent again after a broken connection: at worst an unused session is left
  // behind, and the server expires it after its TTL.
  call.resend_if_unsure = true;
  CallOutcome outcome = watchdog_channel_->Call(args, call);
  if (!outcome.reply.ok()) return outcome.reply.status();
  std::optional<int64_t> id = AsInteger(&outcome.reply.value());
  if (!id || *id <= 0) return BadReply("SESSION OPEN");
  session_id_ = static_cast<uint64_t>(*id);
  session_id_text_ = std::to_string(session_id_);
  safe_until_.store((start + options_.session_ttl).time_since_epoch().count());
  std::lock_guard<std::mutex> lock(mu_);
  next_renew_ = start + options_.session_ttl / 3;
  return Status::Ok();
}

Clock::time_point ClientState::safe_until() const {
  return Clock::time_point(Clock::duration(safe_until_.load()));
}

Status ClientState::SessionStatus() const {
  if (Ended()) return EndedStatus();
  if (Clock::now() >= safe_until()) {
    return Status(StatusCode::kSessionLost, "session " + session_id_text_ +
                                                ": the lease ran out before it was renewed");
  }
  return Status::Ok();
}

Status ClientState::EndedStatus() const {
  std::lock_guard<std::mutex> lock(mu_);
  return EndedStatusLocked();
}

Status ClientState::EndedStatusLocked() const {
  if (lost_) return lost_status_;
  if (closed_) return Status(StatusCode::kSessionLost, "the client was closed");
  return Status::Ok();
}

void ClientState::SetLostCallback(std::function<void(const Status&)> callback) {
  std::lock_guard<std::mutex> lock(mu_);
  lost_callback_.Set(std::move(callback));
  watchdog_cv_.notify_all();
}

void ClientState::RenewSoon() {
  std::lock_guard<std::mutex> lock(mu_);
  Clock::time_point now = Clock::now();
  if (next_renew_ > now) {
    next_renew_ = now;
    watchdog_cv_.notify_all();
  }
}

void ClientState::DeclareLost(const std::string& why) {
  std::vector<std::unique_ptr<Channel>> idle;  // closed after the lock is let go
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || lost_) return;
  idle.swap(idle_channels_);
  channels_count_ -= idle.size();
  lost_ = true;
  ended_.store(true, std::memory_order_release);
  lost_status_ = Status(StatusCode::kSessionLost, "session " + session_id_text_ + " lost: " + why);
  Clock::rep now = Clock::now().time_since_epoch().count();
  if (safe_until_.load() > now) safe_until_.store(now);
  // Wake every call blocked on the network: the waits they are in were
  // cancelled with the session, and anything they would still get is void.
  for (Channel* channel : busy_channels_) channel->Interrupt();
  watchdog_channel_->Interrupt();
  watchdog_cv_.notify_all();
  holds_cv_.notify_all();
  pool_cv_.notify_all();
}

void ClientState::BeginClose() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  closed_ = true;
  stop_ = true;
  ended_.store(true, std::memory_order_release);
  watchdog_channel_->Interrupt();
  watchdog_cv_.notify_all();
  holds_cv_.notify_all();
  pool_cv_.notify_all();
}

Status ClientState::FinishClose() {
  Status result;
  bool was_lost;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was_lost = lost_;
  }
  if (!was_lost && session_id_ != 0) {
    // A channel of its own: the pool refuses new leases once closed.
    std::unique_ptr<Channel> channel = NewChannel();
    channel->SetReconnectHook(nullptr);
    CallOptions call;
    call.deadline = Clock::now() + options_.op_timeout;
    call.resend_if_unsure = true;  // a second CLOSE gets NOSESSION, harmless
    CallOutcome outcome = channel->Call({"SESSION", "CLOSE", session_id_text_}, call);
    if (!outcome.reply.ok() && outcome.reply.status().code() != StatusCode::kNoSession) {
      result = outcome.reply.status();
    }
  }
  std::vector<std::unique_ptr<Channel>> idle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Clock::rep now = Clock::now().time_since_epoch().count();
    if (safe_until_.load() > now) safe_until_.store(now);
    // Calls still blocked (the server was unreachable, or they are between
    // reconnects) end now with kSessionLost.
    for (Channel* channel : busy_channels_) channel->Interrupt();
    idle.swap(idle_channels_);
    channels_count_ -= idle.size();
    holds_cv_.notify_all();
    pool_cv_.notify_all();
  }
  return result;
}

// --- Watchdog -------------------------------------------------------------------

void ClientState::RunWatchdog() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (lost_) {
      if (LostCallback::Fn callback = lost_callback_.TakeDue()) {
        Status why = lost_status_;
        lock.unlock();
        callback(why);
        lock.lock();
        continue;
      }
      watchdog_cv_.wait(lock);
      continue;
    }
    Clock::time_point now = Clock::now();
    if (now >= next_renew_) {
      lock.unlock();
      Renew();
      lock.lock();
      continue;
    }
    if (repairs_wanted_ && now >= repair_not_before_) {
      repairs_wanted_ = false;
      lock.unlock();
      bool all_done = RunRepairs();
      lock.lock();
      if (!all_done) {
        repairs_wanted_ = true;
        repair_not_before_ = Clock::now() + kRepairRetry;
      }
      continue;
    }
    Clock::time_point wake = next_renew_;
    if (repairs_wanted_) wake = std::min(wake, repair_not_before_);
    watchdog_cv_.wait_until(lock, wake);
  }
}

void ClientState::Renew() {
  Clock::time_point start = Clock::now();
  Clock::time_point lease_end = safe_until();
  if (start >= lease_end) {
    DeclareLost("the lease ran out before the watchdog could renew it");
    return;
  }
  CallOptions call;
  // Past the lease's end a renewal is of no use: the server may have expired
  // the session and granted its locks to others.
  call.deadline = lease_end;
  call.resend_if_unsure = true;  // KEEPALIVE is idempotent
  CallOutcome outcome =
      watchdog_channel_->Call({"SESSION", "KEEPALIVE", session_id_text_}, call);
  if (outcome.reply.ok()) {
    std::optional<int64_t> ttl_ms = AsInteger(&outcome.reply.value());
    milliseconds ttl = ttl_ms && *ttl_ms > 0 ? milliseconds(*ttl_ms) : options_.session_ttl;
    Clock::rep until = (start + ttl).time_since_epoch().count();
    std::lock_guard<std::mutex> lock(mu_);
    if (!lost_ && !closed_ && until > safe_until_.load()) safe_until_.store(until);
    next_renew_ = start + ttl / 3;
    return;
  }
  if (Ended()) return;
  const Status& status = outcome.reply.status();
  if (status.code() == StatusCode::kNoSession) {
    DeclareLost("the server no longer knows it (expired or closed): " + status.ToString());
    return;
  }
  if (Clock::now() >= safe_until()) {
    DeclareLost("could not renew it before the lease ran out: " + status.ToString());
    return;
  }
  // A server error that is neither (an AUTH change, say): try again soon,
  // until the lease runs out.
  std::lock_guard<std::mutex> lock(mu_);
  Clock::duration retry = std::min<Clock::duration>(kRenewRetryMax, options_.session_ttl / 10);
  next_renew_ = Clock::now() + retry;
}

bool ClientState::RunRepairs() {
  std::vector<HoldTable::Key> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (lost_ || closed_) return true;
    keys = holds_.BeginRepairs();
  }
  bool all_done = true;
  for (const HoldTable::Key& key : keys) {
    bool renew_due;
    {
      std::lock_guard<std::mutex> lock(mu_);
      renew_due = Clock::now() >= next_renew_;
    }
    // Renewals come first: the rest of the pass waits for the next one.
    if (renew_due || Ended()) {
      all_done = false;
      EndOp(key);
      continue;
    }
    Status status = Repair(*watchdog_channel_, key, Clock::now() + options_.op_timeout, nullptr);
    if (!status.ok()) all_done = false;
    EndOp(key);
  }
  return all_done;
}

// --- Holds ----------------------------------------------------------------------

void ClientState::EndOp(const HoldTable::Key& key) {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<uint32_t> excess = holds_.Excess(key);
  holds_.End(key);
  if (excess != 0u && !lost_ && !closed_) {
    repairs_wanted_ = true;
    watchdog_cv_.notify_all();
  }
  holds_cv_.notify_all();
}

uint64_t ClientState::Token(std::string_view name) const {
  HoldTable::Key key(std::string(name), ThreadOwnerTag());
  std::lock_guard<std::mutex> lock(mu_);
  // A lost or closed session holds nothing, whatever the table remembers.
  if (lost_ || closed_) return 0;
  return holds_.Token(key);
}

uint32_t ClientState::HoldCount(std::string_view name) const {
  HoldTable::Key key(std::string(name), ThreadOwnerTag());
  std::lock_guard<std::mutex> lock(mu_);
  if (lost_ || closed_) return 0;
  return holds_.Count(key);
}

Result<uint32_t> ClientState::InspectCount(Channel& channel, const HoldTable::Key& key,
                                          Clock::time_point deadline) {
  CallOptions call;
  call.deadline = deadline;
  call.resend_if_unsure = true;  // read-only
  CallOutcome outcome = channel.Call({"INSPECT", key.first}, call);
  if (!outcome.reply.ok()) return outcome.reply.status();
  const protocol::Value* holders = outcome.reply.value().Find("holders");
  if (holders == nullptr || holders->type != protocol::Value::Type::kArray) {
    return BadReply("INSPECT");
  }
  for (const protocol::Value& holder : holders->elements) {
    std::optional<int64_t> session = AsInteger(holder.Find("session"));
    const protocol::Value* owner = holder.Find("owner");
    if (!session || owner == nullptr) return BadReply("INSPECT");
    if (static_cast<uint64_t>(*session) != session_id_ || owner->str != key.second) continue;
    std::optional<int64_t> count = AsInteger(holder.Find("count"));
    if (!count || *count < 0 || *count > static_cast<int64_t>(limits::kHoldCountMax)) {
      return BadReply("INSPECT");
    }
    return static_cast<uint32_t>(*count);
  }
  return 0u;
}

Status ClientState::Repair(Channel& channel, const HoldTable::Key& key,
                           Clock::time_point deadline, bool* saw_not_held) {
  while (true) {
    if (Ended()) return EndedStatus();
    std::optional<uint32_t> excess;
    {
      std::lock_guard<std::mutex> lock(mu_);
      excess = holds_.Excess(key);
    }
    if (excess == 0u) return Status::Ok();
    if (Clock::now() >= deadline) {
      return Status(StatusCode::kTimeout, "could not settle the hold on " + Quoted(key.first) +
                                              " with the server in time");
    }
    if (!excess) {
      Result<uint32_t> count = InspectCount(channel, key, deadline);
      if (!count.ok()) return count.status();
      std::lock_guard<std::mutex> lock(mu_);
      holds_.Observe(key, count.value());
      continue;
    }
    CallOptions call;
    call.deadline = deadline;
    CallOutcome outcome =
        channel.Call({"UNLOCK", key.first, session_id_text_, "OWNER", key.second}, call);
    if (outcome.reply.ok()) {
      std::optional<int64_t> left = AsInteger(&outcome.reply.value());
      if (!left || *left < 0 || *left > static_cast<int64_t>(limits::kHoldCountMax)) {
        std::lock_guard<std::mutex> lock(mu_);
        holds_.MarkUnknown(key);
        return BadReply("UNLOCK");
      }
      std::lock_guard<std::mutex> lock(mu_);
      holds_.Observe(key, static_cast<uint32_t>(*left));
      continue;
    }
    const Status& status = outcome.reply.status();
    if (status.code() == StatusCode::kNotHeld) {
      if (saw_not_held != nullptr) *saw_not_held = true;
      std::lock_guard<std::mutex> lock(mu_);
      holds_.Observe(key, 0);
      continue;
    }
    if (status.code() == StatusCode::kNoSession) {
      DeclareLost("the server no longer knows it: " + status.ToString());
      return EndedStatus();
    }
    if (outcome.maybe_applied) {
      std::lock_guard<std::mutex> lock(mu_);
      holds_.MarkUnknown(key);
    }
    return status;
  }
}

Result<bool> ClientState::Acquire(std::string_view name, LockMode mode, Deadline deadline) {
  if (Status status = CheckName(name); !status.ok()) return status;
  if (Clock::time_point now = Clock::now();
      deadline && *deadline > now && *deadline - now > kForeverThreshold) {
    deadline.reset();
  }
  HoldTable::Key key(std::string(name), ThreadOwnerTag());
  {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      if (closed_ || lost_) return EndedStatusLocked();
      HoldTable::Step step = holds_.BeginAcquire(key, mode);
      if (step == HoldTable::Step::kBusy) {
        holds_cv_.wait(lock);
        continue;
      }
      if (step == HoldTable::Step::kDone) return true;
      if (step == HoldTable::Step::kWrongMode) {
        return Status(StatusCode::kWrongMode,
                      "this thread holds " + Quoted(name) +
                          (mode == LockMode::kShared ? " exclusively" : " shared"));
      }
      if (step == HoldTable::Step::kLimit) {
        return Status(StatusCode::kLimit, "nested hold count of " + Quoted(name) + " at its bound");
      }
      assert(step == HoldTable::Step::kAsk);
      break;
    }
  }
  Result<bool> result = AcquireBusy(key, mode, deadline);
  EndOp(key);
  return result;
}

Result<bool> ClientState::AcquireBusy(const HoldTable::Key& key, LockMode mode,
                                      Deadline deadline) {
  Deadline pool_deadline;
  if (deadline) pool_deadline = std::max(*deadline, Clock::now()) + options_.op_timeout;
  Result<std::unique_ptr<Channel>> taken = TakeChannel(pool_deadline);
  if (!taken.ok()) return taken.status();
  Lease lease(this, std::move(taken).value());
  Channel& channel = *lease;

  // An earlier operation of this holder left the server's count unknown or
  // above the local one: settle it first, so that the LOCK reply means what
  // it says.
  while (true) {
    Status status = Repair(channel, key, Clock::now() + options_.op_timeout, nullptr);
    if (status.ok()) break;
    // lock() has no deadline: it keeps trying while the session lives.
    bool transient = status.code() == StatusCode::kUnavailable ||
                     status.code() == StatusCode::kTimeout ||
                     status.code() == StatusCode::kTryAgain;
    if (deadline || !transient || Ended() || channel.interrupted()) return status;
  }

  auto mark_unknown = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    holds_.MarkUnknown(key);
  };
  bool unsure = false;  // an earlier attempt may have been applied
  int stale_wait_retries = 0;
  int early_timeouts = 0;
  while (true) {
    if (Ended()) {
      if (unsure) mark_unknown();
      return EndedStatus();
    }
    std::vector<std::string_view> args = {"LOCK", key.first, session_id_text_, "OWNER",
                                          key.second};
    if (mode == LockMode::kShared) args.push_back("SHARED");
    std::string wait_text;
    CallOptions call;
    bool wait_ends_here = false;  // the client, not the server, ends the wait
    Clock::time_point now = Clock::now();
    if (!deadline) {
      wait_text = "FOREVER";
    } else if (*deadline > now) {
      auto wait_ms = std::chrono::ceil<milliseconds>(*deadline - now).count();
      if (static_cast<uint64_t>(wait_ms) <= limits::kWaitMsMax) {
        wait_text = std::to_string(wait_ms);
        call.deadline = *deadline + options_.op_timeout;
      } else {
        // Longer than the server's WAIT bound: wait forever and end the wait
        // by closing the connection, which cancels it on the server (and
        // releases a grant that crosses the close). Keeps the FIFO place.
        wait_text = "FOREVER";
        call.deadline = *deadline;
        wait_ends_here = true;
      }
    } else {
      call.deadline = now + options_.op_timeout;  // a try-lock
    }
    if (!wait_text.empty()) {
      args.push_back("WAIT");
      args.push_back(wait_text);
      call.unbounded_reply = true;
    }
    // Not resent by the channel: the WAIT time must be recomputed, and the
    // reply's count checked (below) in case the first one was granted.
    call.resend_if_unsure = false;
    CallOutcome outcome = channel.Call(args, call);

    if (outcome.reply.ok()) {
      const protocol::Value& value = outcome.reply.value();
      std::lock_guard<std::mutex> lock(mu_);
      if (value.IsNull()) {
        // Not granted now; a grant from an earlier attempt would have made
        // this one a reentrant grant, so the holder holds nothing.
        holds_.Observe(key, 0);
        // The server's timer may end a wait a fraction of a millisecond
        // before the client's deadline (its clock is not ours): wait out the
        // rest, so that try_lock_for never returns early.
        if (deadline && !wait_text.empty() && Clock::now() < *deadline &&
            ++early_timeouts <= kEarlyTimeoutsMax) {
          unsure = false;
          continue;
        }
        return false;
      }
      uint64_t token = 0;
      uint32_t count = 0;
      if (!ParseGrant(value, &token, &count)) {
        holds_.MarkUnknown(key);
        return BadReply("LOCK");
      }
      // count > 1: an earlier attempt was granted too; the surplus is
      // released by a repair (EndOp schedules it).
      holds_.Granted(key, mode, token, count);
      return true;
    }
    const Status& status = outcome.reply.status();
    if (outcome.maybe_applied) unsure = true;
    if (status.code() == StatusCode::kNoSession) {
      DeclareLost("the server no longer knows it: " + status.ToString());
      {
        std::lock_guard<std::mutex> lock(mu_);
        holds_.Observe(key, 0);
      }
      return EndedStatus();
    }
    if (IsWireError(status.code())) {
      if (status.code() == StatusCode::kErr && unsure &&
          ++stale_wait_retries <= kStaleWaitRetries) {
        std::this_thread::sleep_for(kStaleWaitRetryDelay);
        continue;
      }
      if (unsure) mark_unknown();
      return status;
    }
    // The connection failed. Ask again on a new one (the FIFO place is lost)
    // unless time is up.
    if (Ended()) continue;
    if (channel.interrupted()) {
      if (unsure) mark_unknown();
      return status;
    }
    if (wait_ends_here && Passed(deadline)) {
      if (unsure) mark_unknown();
      return false;
    }
    if (Passed(call.deadline)) {
      if (unsure) mark_unknown();
      return status;
    }
  }
}

Status ClientState::Release(std::string_view name, LockMode mode, bool* precondition_failed) {
  if (precondition_failed != nullptr) *precondition_failed = false;
  if (Status status = CheckName(name); !status.ok()) {
    if (precondition_failed != nullptr) *precondition_failed = true;
    return status;
  }
  HoldTable::Key key(std::string(name), ThreadOwnerTag());
  {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      HoldTable::Step step = holds_.BeginRelease(key, mode);
      if (step == HoldTable::Step::kBusy) {
        holds_cv_.wait(lock);
        continue;
      }
      if (step == HoldTable::Step::kNotHeld) {
        if (precondition_failed != nullptr) *precondition_failed = true;
        return Status(StatusCode::kNotHeld,
                      "this thread does not hold " + Quoted(name) +
                          (mode == LockMode::kShared ? " shared" : " exclusively"));
      }
      if (step == HoldTable::Step::kDone) {
        // An inner release; once the session is gone, say so all the same.
        return closed_ || lost_ ? EndedStatusLocked() : Status::Ok();
      }
      assert(step == HoldTable::Step::kAsk);
      break;
    }
  }
  Status status = ReleaseBusy(key);
  EndOp(key);
  return status;
}

Status ClientState::ReleaseBusy(const HoldTable::Key& key) {
  if (Ended()) {
    // The session's end released the hold on the server.
    std::lock_guard<std::mutex> lock(mu_);
    holds_.Observe(key, 0);
    return EndedStatusLocked();
  }
  auto in_background = [](const Status& s) {
    return Status(s.code(), s.message() + "; the release is retried in the background");
  };
  Clock::time_point deadline = Clock::now() + options_.op_timeout;
  Result<std::unique_ptr<Channel>> taken = TakeChannel(deadline);
  if (!taken.ok()) {
    return taken.status().code() == StatusCode::kSessionLost ? taken.status()
                                                              : in_background(taken.status());
  }
  Lease lease(this, std::move(taken).value());
  // The local count is 0 now and the server's 1: the release is the repair
  // that brings the server down to the local count.
  bool saw_not_held = false;
  Status status = Repair(*lease, key, deadline, &saw_not_held);
  if (!status.ok()) {
    return status.code() == StatusCode::kSessionLost ? status : in_background(status);
  }
  if (saw_not_held) {
    return Status(StatusCode::kNotHeld,
                  "the server says this thread did not hold " + Quoted(key.first));
  }
  return Status::Ok();
}

}  // namespace tumbler::client

namespace tumbler::client {
namespace {

constexpr Capability kTumblerCapabilities[] = {
    {Property::kMutualExclusion, Support::kYes,
     "one replicated state machine decides every grant; a grant is replied only after it is committed"},
    {Property::kCrashRelease, Support::kYes, "session TTL lease; expiry releases every hold"},
    {Property::kRenewal, Support::kYes, "the watchdog renews the session every TTL/3"},
    {Property::kBlocking, Support::kYes, "server-side `LOCK ... WAIT`; the reply is the grant"},
    {Property::kTryLock, Support::kYes, "`LOCK` without `WAIT`"},
    {Property::kReentrancy, Support::kYes,
     "holder = (session, thread); nested holds counted in the client, hold counts on the server"},
    {Property::kFairness, Support::kYes, "strict FIFO queue per lock; readers never barge past a queued writer"},
    {Property::kFencing, Support::kYes, "strictly increasing 64-bit token from the state machine; `CHECK`"},
    {Property::kSharedMode, Support::kYes, "`LOCK ... SHARED`"},
    {Property::kNoHerd, Support::kYes, "a release wakes only the waiters it grants"},
    {Property::kDeadlockDetection, Support::kYes, "wait-for-graph cycle detection: `DEADLOCK` names the cycle"},
    {Property::kHighAvailability, Support::kYes,
     "Raft (libraft) over 3 or 5 nodes survives the loss of a minority; the client follows "
     "NOTLEADER and keeps its session across a failover (docs/operations.md)"},
    {Property::kDurability, Support::kYes, "the Raft log is fsync'd before a reply"},
};

}  // namespace

const BackendInfo& TumblerBackendInfo() {
  static const BackendInfo info{"tumbler", "tumblerd", "tumbler://h1:p1[,h2:p2,...]",
                                kTumblerCapabilities};
  return info;
}

const BackendInfo& ClientState::info() const { return TumblerBackendInfo(); }

}  // namespace tumbler::client

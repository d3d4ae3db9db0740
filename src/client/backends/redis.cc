// The redis:// backend: locks on one Redis server, done the way Redisson does
// them (hash of holder -> hold count, Lua scripts, a watchdog that extends
// the TTL, pub/sub to wake waiters), plus a fencing-token counter.
//
//   redis://[[user]:password@]host[:port][/db]     port 6379 and db 0 by default
//
// On the server, for a lock NAME (binary-safe):
//   tumbler:{NAME}           hash: HOLDER -> hold count, "__token" -> token.
//                            It exists while the lock is held and carries the
//                            TTL; the watchdog extends it.
//   tumbler:{NAME}:token     counter: INCR on every new grant. Never expires,
//                            so tokens keep increasing: one small key stays
//                            behind per lock name ever used.
//   tumbler:{NAME}:released  pub/sub channel: a message on every release.
// HOLDER = client_id() ":" owner tag: unique per process and thread. The
// scripts below say what each step does; each runs atomically on the server.
//
// ClientOptions:
//   session_ttl      the lock keys' TTL (the server gets RedisServerTtl(): 1%
//                    + 2 ms more, for clock drift); renewed every TTL/3.
//   connect_timeout  TCP connect and login (AUTH, SELECT) of one connection.
//   op_timeout       one script call or command; a wait gets its own
//                    duration plus this for each attempt.
//   session_name     not used: Redis has no sessions.
//   connections_max  connections lent at once (calls in flight). A waiting
//                    acquire also keeps a subscriber connection while it
//                    waits; at most connections_max of those exist, further
//                    waiters poll (every 200 ms at most) instead.
//
// The "session": Redis has none. The session id is a random number; a renewal
// extends every lock the client holds (PING when it holds none), and the
// session is lost when a renewal finds one of them gone (expired or deleted)
// or no renewal succeeds before safe-until passes.
#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <map>
#include <mutex>
#include <utility>

#include "client/backends/backends.h"
#include "client/backends/redis_common.h"
#include "client/basic_backend.h"

namespace tumbler::client {
namespace {

using std::chrono::milliseconds;

// A waiter tries again after at most this long without a release message:
// the safety net for releases that publish nothing (a key that expired
// because its holder died) or messages lost while re-subscribing.
constexpr milliseconds kRetryIntervalMax{200};

constexpr Capability kCapabilities[] = {
    {Property::kMutualExclusion, Support::kYes,
     "one Lua script checks and takes the lock atomically on the server; safe as long as that one "
     "server keeps its data (see durability and high availability)"},
    {Property::kCrashRelease, Support::kYes,
     "the lock key has a TTL (`session_ttl`): a crashed holder's lock is freed when it runs out"},
    {Property::kRenewal, Support::kYes,
     "the watchdog extends the TTL of every held lock every TTL/3 (Redisson's watchdog); a lock "
     "found gone ends the session"},
    {Property::kBlocking, Support::kYes,
     "a waiter subscribes to the lock's release channel and retries when a release is published, "
     "with a retry after at most min(the lock's remaining TTL, 200 ms) as a safety net"},
    {Property::kTryLock, Support::kYes, "one script call that never waits"},
    {Property::kReentrancy, Support::kYes,
     "counted on the server, as Redisson does: the lock hash maps each holder to its hold count"},
    {Property::kFairness, Support::kNo,
     "waiters race for the lock when it is released; no queue is kept"},
    {Property::kFencing, Support::kPartial,
     "a per-lock counter (`INCR`) gives every grant a larger token, as long as Redis keeps the "
     "counter: without `appendfsync always` a server crash or a failover to an async replica can "
     "lose it and repeat tokens, and an `allkeys-*` maxmemory policy can evict it"},
    {Property::kSharedMode, Support::kNo, "exclusive locks only"},
    {Property::kNoHerd, Support::kNo,
     "a release is published to every waiter of the lock; all of them retry and one wins"},
    {Property::kDeadlockDetection, Support::kNo,
     "Redis knows nothing of who waits for whom; use timeouts"},
    {Property::kHighAvailability, Support::kNo,
     "one server: if it is down no lock can be taken; Redis replication is asynchronous, so a "
     "failover can lose a granted lock and grant it twice (use redlock:// or a consensus "
     "system)"},
    {Property::kDurability, Support::kPartial,
     "as durable as the server's persistence: with `appendonly yes` and `appendfsync always` an "
     "acknowledged grant survives a crash; the default (`everysec`, or no AOF) can lose it"},
};

// KEYS[1] lock hash, KEYS[2] token counter. ARGV[1] holder, ARGV[2] TTL ms,
// ARGV[3] hold count after this acquire, ARGV[4] token of the holder's
// current grant (a nested acquire) or "0" (a first acquire).
// Returns {1, token} granted; {0, PTTL} held by another holder; {-1, 0} the
// nested acquire's grant is gone (expired while held).
// A first acquire that finds its own holder already there (its earlier
// attempt's reply was lost, or its release is still owed) makes a new grant
// with a new token, so a late release of the old grant cannot remove it.
constexpr std::string_view kAcquireScript = R"lua(
local held = redis.call('hget', KEYS[1], ARGV[1])
if ARGV[4] ~= '0' then
  if held and redis.call('hget', KEYS[1], '__token') == ARGV[4] then
    redis.call('hset', KEYS[1], ARGV[1], ARGV[3])
    redis.call('pexpire', KEYS[1], ARGV[2])
    return {1, tonumber(ARGV[4])}
  end
  return {-1, 0}
end
if held or redis.call('exists', KEYS[1]) == 0 then
  local token = redis.call('incr', KEYS[2])
  redis.call('del', KEYS[1])
  redis.call('hset', KEYS[1], ARGV[1], ARGV[3], '__token', token)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, token}
end
return {0, redis.call('pttl', KEYS[1])}
)lua";

// KEYS[1] lock hash. ARGV[1] holder, ARGV[2] hold count left after this
// release, ARGV[3] the grant's token, ARGV[4] release channel.
// Returns 1 (still held, count set), 0 (released, published) or -1 (this
// grant no longer holds the lock). Sets the count rather than decrementing
// it, so that a release retried after a lost reply does no harm.
constexpr std::string_view kReleaseScript = R"lua(
if not redis.call('hget', KEYS[1], ARGV[1]) or
   redis.call('hget', KEYS[1], '__token') ~= ARGV[3] then
  return -1
end
if ARGV[2] ~= '0' then
  redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
  return 1
end
redis.call('del', KEYS[1])
redis.call('publish', ARGV[4], ARGV[3])
return 0
)lua";

// KEYS[i] lock hashes. ARGV[1] TTL ms; ARGV[2i], ARGV[2i+1] holder and token
// of KEYS[i]. Extends every lock still held by its grant; returns the
// (1-based) indexes of those that are not.
constexpr std::string_view kRenewScript = R"lua(
local lost = {}
for i = 1, #KEYS do
  if redis.call('hget', KEYS[i], ARGV[2 * i]) and
     redis.call('hget', KEYS[i], '__token') == ARGV[2 * i + 1] then
    redis.call('pexpire', KEYS[i], ARGV[1])
  else
    lost[#lost + 1] = i
  end
end
return lost
)lua";

// An integer reply, or a bulk string holding one.
bool ReadInt(const protocol::Value& v, int64_t* out) {
  if (v.type == protocol::Value::Type::kInteger) {
    *out = v.integer;
    return true;
  }
  if (v.type != protocol::Value::Type::kBulk) return false;
  auto [end, ec] = std::from_chars(v.str.data(), v.str.data() + v.str.size(), *out);
  return ec == std::errc() && end == v.str.data() + v.str.size();
}

class RedisBackend final : public BasicBackend {
 public:
  RedisBackend(RedisServer server, const ClientOptions& options)
      : BasicBackend(options),
        pool_(std::move(server), options.connections_max, options.connect_timeout),
        acquire_script_(std::string(kAcquireScript)),
        release_script_(std::string(kReleaseScript)),
        renew_script_(std::string(kRenewScript)) {}

  const BackendInfo& info() const override { return RedisBackendInfo(); }
  Status Open() override;

 protected:
  Result<std::optional<Grant>> AcquireRemote(const std::string& name, const std::string& owner,
                                             LockMode mode, Deadline deadline,
                                             const Grant* current) override;
  Status ReleaseRemote(const std::string& name, const std::string& owner, LockMode mode,
                       const Grant& grant, uint32_t remaining) override;
  Status Renew(const std::vector<HeldLock>& holds) override;
  Status CloseRemote(const std::vector<HeldLock>& holds) override;
  void InterruptAll() override;
  bool CountsNestedHolds() const override { return true; }

 private:
  using HolderKey = std::pair<std::string, std::string>;  // (name, owner)
  // What the server holds for one holder, as far as this client knows.
  struct RemoteHold {
    uint32_t count = 0;
    uint64_t token = 0;
  };
  struct AcquireReply {
    int64_t outcome = 0;  // 1 granted, 0 busy, -1 the nested grant is gone
    int64_t value = 0;    // token when granted, the lock's PTTL when busy
  };
  class Subscriber;

  std::string Holder(const std::string& owner) const { return client_id() + ":" + owner; }
  Clock::time_point OpDeadline() const { return Clock::now() + options().op_timeout; }
  std::string ServerTtlMs() const {
    return std::to_string(RedisServerTtl(options().session_ttl).count());
  }
  Result<AcquireReply> RunAcquire(const std::string& name, const std::string& holder,
                                  uint32_t count, uint64_t token, Deadline deadline);
  Result<RedisPool::Lease> Borrow(Deadline deadline);
  // Whether (name, owner) still holds the grant with `token` here: a renewal
  // that finds a lock gone ignores the ones released meanwhile.
  bool StillHeld(const std::string& name, const std::string& owner, uint64_t token);
  // Sleeps until `until` or InterruptAll().
  void Sleep(Clock::time_point until);
  bool TakeSubscriberSlot();
  void GiveSubscriberSlot();

  RedisPool pool_;
  RedisScript acquire_script_;
  RedisScript release_script_;
  RedisScript renew_script_;

  std::mutex remote_mu_;
  std::condition_variable interrupt_cv_;
  std::map<HolderKey, RemoteHold> remote_;  // bounded by the base's hold table
  size_t subscribers_ = 0;                  // <= options().connections_max
};

// A connection SUBSCRIBEd to one lock's release channel, for one waiting
// acquire. Interrupt() of the pool cuts it.
class RedisBackend::Subscriber {
 public:
  explicit Subscriber(RedisBackend* backend) : backend_(backend) {}
  ~Subscriber() {
    if (!tracked_) return;
    backend_->pool_.Untrack(&connection_);
    connection_.Close();
    backend_->GiveSubscriberSlot();
  }
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // True once Subscribe() was tried: it is tried once per acquire.
  bool tried() const { return tried_; }
  bool ok() const { return connection_.is_open(); }

  void Subscribe(const std::string& channel, Clock::time_point deadline) {
    tried_ = true;
    if (!backend_->TakeSubscriberSlot()) return;  // too many waiters: poll
    tracked_ = true;
    backend_->pool_.Track(&connection_);
    if (backend_->Ended()) return;  // Interrupt() may have run before Track
    if (!backend_->pool_.Connect(&connection_, deadline).ok()) return;
    Result<protocol::Value> reply = connection_.Call({"SUBSCRIBE", channel}, deadline, nullptr);
    if (!reply.ok()) return;
    if (reply->type != protocol::Value::Type::kArray || reply->elements.empty() ||
        reply->elements[0].str != "subscribe") {
      connection_.Close();  // an error reply (ACL, ...): poll instead
    }
  }

  // Waits for a release message until `until`. Any message, a timeout or a
  // broken connection all mean "try again"; a broken one is not reopened.
  void Wait(Clock::time_point until) {
    Result<protocol::Value> message = connection_.Receive(until);
    (void)message;
  }

 private:
  RedisBackend* backend_;  // borrowed; outlives the acquire
  Connection connection_;
  bool tried_ = false;
  bool tracked_ = false;
};

bool RedisBackend::TakeSubscriberSlot() {
  std::lock_guard lock(remote_mu_);
  if (subscribers_ >= options().connections_max) return false;
  ++subscribers_;
  return true;
}

void RedisBackend::GiveSubscriberSlot() {
  std::lock_guard lock(remote_mu_);
  --subscribers_;
}

Status RedisBackend::Open() {
  Clock::time_point started = Clock::now();
  Clock::time_point deadline = started + options().op_timeout;
  Result<RedisPool::Lease> lease = pool_.Borrow(deadline);
  if (!lease.ok()) return lease.status();
  for (RedisScript* script : {&acquire_script_, &release_script_, &renew_script_}) {
    if (Status status = script->Load(*lease, deadline); !status.ok()) {
      return WithServer(status, pool_.server());
    }
  }
  uint64_t id = RandomU64();
  SetSessionId(id == 0 ? 1 : id);
  MarkRenewed(started);
  return Status::Ok();
}

Result<RedisPool::Lease> RedisBackend::Borrow(Deadline deadline) {
  // A waiting call may wait for a connection as long as for the lock; a
  // try-lock as long as one request may take.
  Deadline borrow_deadline;
  if (deadline) borrow_deadline = std::max(*deadline, OpDeadline());
  return pool_.Borrow(borrow_deadline);
}

Result<RedisBackend::AcquireReply> RedisBackend::RunAcquire(const std::string& name,
                                                            const std::string& holder,
                                                            uint32_t count, uint64_t token,
                                                            Deadline deadline) {
  Result<RedisPool::Lease> lease = Borrow(deadline);
  if (!lease.ok()) return lease.status();
  Result<protocol::Value> reply = acquire_script_.Run(
      *lease, {RedisLockKey(name), RedisTokenKey(name)},
      {holder, ServerTtlMs(), std::to_string(count), std::to_string(token)}, OpDeadline());
  if (!reply.ok()) return reply.status();
  if (reply->IsError()) return RedisErrorStatus(*reply, "acquiring " + QuotedName(name));
  AcquireReply out;
  if (reply->type != protocol::Value::Type::kArray || reply->elements.size() != 2 ||
      !ReadInt(reply->elements[0], &out.outcome) || !ReadInt(reply->elements[1], &out.value)) {
    return Status(StatusCode::kProtocol, "unexpected reply to the acquire script");
  }
  return out;
}

Result<std::optional<BasicBackend::Grant>> RedisBackend::AcquireRemote(
    const std::string& name, const std::string& owner, LockMode /*mode*/, Deadline deadline,
    const Grant* current) {
  const std::string holder = Holder(owner);
  uint32_t count = 1;
  uint64_t token = 0;
  if (current != nullptr) {
    std::lock_guard lock(remote_mu_);
    auto it = remote_.find(HolderKey(name, owner));
    count = (it == remote_.end() ? 0 : it->second.count) + 1;
    token = current->token;
  }
  Subscriber subscriber(this);
  while (true) {
    if (Ended()) return EndedStatus();
    Result<AcquireReply> reply = RunAcquire(name, holder, count, token, deadline);
    if (!reply.ok()) return reply.status();
    if (reply->outcome == 1) {
      Grant grant{static_cast<uint64_t>(reply->value), {}};
      std::lock_guard lock(remote_mu_);
      remote_[HolderKey(name, owner)] = RemoteHold{count, grant.token};
      return std::optional<Grant>(std::move(grant));
    }
    if (reply->outcome == -1) {
      std::string why = "the lock " + QuotedName(name) +
                        " is no longer held on the server (its key expired or was deleted)";
      DeclareLost(why);
      return Status(StatusCode::kSessionLost, why);
    }
    Clock::time_point now = Clock::now();
    if (deadline && now >= *deadline) return std::optional<Grant>();
    if (!subscriber.tried()) {
      // Subscribe, then try again at once: a release published between the
      // script and the SUBSCRIBE would otherwise be missed.
      subscriber.Subscribe(RedisReleaseChannel(name), OpDeadline());
      continue;
    }
    // The key cannot outlive its PTTL, so retry no later than that (a key
    // without a TTL, -1, is not one of ours: retry at the longest interval).
    milliseconds retry = kRetryIntervalMax;
    if (reply->value > 0) retry = std::min(retry, milliseconds(reply->value));
    Clock::time_point until = now + retry;
    if (deadline) until = std::min(until, *deadline);
    if (subscriber.ok()) {
      subscriber.Wait(until);
    } else {
      Sleep(until);
    }
  }
}

void RedisBackend::Sleep(Clock::time_point until) {
  std::unique_lock lock(remote_mu_);
  interrupt_cv_.wait_until(lock, until, [this] { return Ended(); });
}

Status RedisBackend::ReleaseRemote(const std::string& name, const std::string& owner,
                                   LockMode /*mode*/, const Grant& grant, uint32_t remaining) {
  {
    // Forgotten first: a renewal running meanwhile must not take this lock's
    // disappearance for a loss.
    std::lock_guard lock(remote_mu_);
    auto it = remote_.find(HolderKey(name, owner));
    if (it != remote_.end() && it->second.token == grant.token) {
      if (remaining == 0) {
        remote_.erase(it);
      } else {
        it->second.count = remaining;
      }
    }
  }
  Result<RedisPool::Lease> lease = pool_.Borrow(OpDeadline());
  if (!lease.ok()) return lease.status();
  Result<protocol::Value> reply = release_script_.Run(
      *lease, {RedisLockKey(name)},
      {Holder(owner), std::to_string(remaining), std::to_string(grant.token),
       RedisReleaseChannel(name)},
      OpDeadline());
  if (!reply.ok()) return reply.status();
  if (reply->IsError()) return RedisErrorStatus(*reply, "releasing " + QuotedName(name));
  int64_t outcome = 0;
  if (!ReadInt(*reply, &outcome)) {
    return Status(StatusCode::kProtocol, "unexpected reply to the release script");
  }
  if (outcome < 0) {
    return Status(StatusCode::kNotHeld, "the lock " + QuotedName(name) +
                                            " was no longer held on the server (its TTL ran out "
                                            "or the key was deleted)");
  }
  return Status::Ok();
}

bool RedisBackend::StillHeld(const std::string& name, const std::string& owner, uint64_t token) {
  std::lock_guard lock(remote_mu_);
  auto it = remote_.find(HolderKey(name, owner));
  return it != remote_.end() && it->second.token == token;
}

Status RedisBackend::Renew(const std::vector<HeldLock>& holds) {
  Clock::time_point deadline = OpDeadline();
  Result<RedisPool::Lease> lease = pool_.Borrow(deadline);
  if (!lease.ok()) return lease.status();
  if (holds.empty()) {
    Result<protocol::Value> reply = lease->Call({"PING"}, deadline);
    if (!reply.ok()) return reply.status();
    if (reply->IsError()) return RedisErrorStatus(*reply, "PING");
    return Status::Ok();
  }
  const std::string ttl_ms = ServerTtlMs();
  for (size_t first = 0; first < holds.size(); first += kRedisKeysPerScriptMax) {
    size_t end = std::min(holds.size(), first + kRedisKeysPerScriptMax);
    std::vector<std::string> keys;
    std::vector<std::string> args{ttl_ms};
    for (size_t i = first; i < end; ++i) {
      keys.push_back(RedisLockKey(holds[i].name));
      args.push_back(Holder(holds[i].owner));
      args.push_back(std::to_string(holds[i].grant.token));
    }
    Result<protocol::Value> reply = renew_script_.Run(*lease, keys, args, deadline);
    if (!reply.ok()) return reply.status();
    if (reply->IsError()) return RedisErrorStatus(*reply, "renewing");
    if (reply->type != protocol::Value::Type::kArray) {
      return Status(StatusCode::kProtocol, "unexpected reply to the renew script");
    }
    for (const protocol::Value& index_value : reply->elements) {
      int64_t index = 0;
      if (!ReadInt(index_value, &index) || index < 1 ||
          static_cast<size_t>(index) > end - first) {
        return Status(StatusCode::kProtocol, "unexpected index in the renew script's reply");
      }
      const HeldLock& h = holds[first + static_cast<size_t>(index) - 1];
      if (StillHeld(h.name, h.owner, h.grant.token)) {
        return Status(StatusCode::kSessionLost,
                      "the lock " + QuotedName(h.name) +
                          " is no longer held on the server (its key expired or was deleted)");
      }
    }
  }
  return Status::Ok();
}

Status RedisBackend::CloseRemote(const std::vector<HeldLock>& holds) {
  {
    std::lock_guard lock(remote_mu_);
    remote_.clear();
  }
  // One op_timeout for the whole close: what is not released by then
  // expires with its TTL.
  Clock::time_point deadline = OpDeadline();
  Status first_error;
  for (const HeldLock& h : holds) {
    if (Clock::now() >= deadline) {
      if (first_error.ok()) {
        first_error = Status(StatusCode::kTimeout,
                             "close: no time left to release " + QuotedName(h.name));
      }
      break;
    }
    Result<RedisPool::Lease> lease = pool_.Borrow(deadline);
    if (!lease.ok()) return first_error.ok() ? lease.status() : first_error;
    Result<protocol::Value> reply = release_script_.Run(
        *lease, {RedisLockKey(h.name)},
        {Holder(h.owner), "0", std::to_string(h.grant.token), RedisReleaseChannel(h.name)},
        deadline);
    Status status = Status::Ok();
    if (!reply.ok()) {
      status = reply.status();
    } else if (reply->IsError()) {
      status = RedisErrorStatus(*reply, "releasing " + QuotedName(h.name));
    }
    if (!status.ok() && first_error.ok()) first_error = status;
  }
  return first_error;
}

void RedisBackend::InterruptAll() {
  pool_.Interrupt();
  std::lock_guard lock(remote_mu_);
  interrupt_cv_.notify_all();
}

}  // namespace

const BackendInfo& RedisBackendInfo() {
  static const BackendInfo info{"redis", "Redis (single instance)",
                                "redis://[[user]:password@]host[:port][/db]", kCapabilities};
  return info;
}

Result<std::shared_ptr<Backend>> MakeRedisBackend(std::string_view url,
                                                  const ClientOptions& options) {
  Result<std::vector<RedisServer>> servers = ParseRedisUrl(url, "redis", 1, 1);
  if (!servers.ok()) return servers.status();
  return std::shared_ptr<Backend>(
      std::make_shared<RedisBackend>(std::move(servers->front()), options));
}

}  // namespace tumbler::client

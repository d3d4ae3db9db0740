// The redlock:// backend: the Redlock algorithm over N independent Redis
// servers, no replication between them
// (https://redis.io/docs/manual/patterns/distributed-locks/).
//
//   redlock://[[user]:password@]h1[:p1],h2[:p2],...[/db]   1..16 hosts (3 or 5 make
//                                                         sense), port 6379 by default
//
// On every instance the lock NAME is one string key, tumbler:{NAME}, whose
// value is a random value unique to one grant (client_id : owner tag : 64
// random bits), with a TTL. It has the name redis:// gives its hash, so a
// redis:// client pointed at one of the instances fails (WRONGTYPE) rather
// than take a lock a redlock:// client holds there.
//
// Acquire (one attempt):
//   1. note the start time; SET key value NX PX P on each instance in turn,
//      each bounded by a short per-instance timeout;
//   2. granted if a majority (N/2 + 1) accepted and the validity
//      P - elapsed - drift is still positive (drift = 1% of P + 2 ms);
//   3. otherwise delete the key (if it still has our value) on EVERY
//      instance, those that failed included (their SET may have been applied
//      with the reply lost), and try again after a random 50..150 ms until
//      the deadline. If more instances failed than a majority can spare, the
//      attempt fails at once with kUnavailable instead.
// Release: compare-and-delete on every instance. Renewal (the watchdog, every
// TTL/3): compare-and-PEXPIRE on every instance; it counts only if a majority
// confirms every held lock within the validity; a lock that a majority no
// longer has ends the session.
//
// P, the TTL the keys get, is RedisServerTtl(session_ttl) = (TTL + 2 ms) /
// 0.99, so the validity Redlock computes, P - elapsed - drift, is never
// shorter than session_ttl - elapsed: the client's safe-until (start of the
// last renewal + session_ttl) stays within what the instances guarantee if
// their clocks drift by at most 1%. A crashed holder's lock is thus freed
// after about 1.01 * TTL.
//
// What Redlock does not give (Kleppmann, "How to do distributed locking",
// 2016): there is no fencing token, and safety rests on bounded clock drift,
// network delay and process pauses. A holder paused (GC, swap, SIGSTOP) past
// its validity still believes it holds the lock while another client holds
// it; an instance that restarts without persistence forgets the keys it had
// and may let a second client reach a majority. Check SafeUntil() before
// acting, and prefer a backend with fencing tokens where correctness matters.
//
// ClientOptions:
//   session_ttl      the TTL (keys get P, above); renewed every TTL/3.
//   connect_timeout  TCP connect and login to one instance, further bounded
//                    by the per-instance timeout during lock operations.
//   op_timeout       bounds waiting for a pooled connection; the
//                    per-instance timeout of one request is
//                    min(max(TTL / 20, 50 ms), op_timeout).
//   session_name     not used.
//   connections_max  connections lent at once, per instance.
//
// Reentrancy is counted locally (nested holds cost no request); Mutex::token()
// is 0 and FencingToken() is kUnsupported.
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "client/backends/backends.h"
#include "client/backends/redis_common.h"
#include "client/basic_backend.h"

namespace tumbler::client {
namespace {

using std::chrono::milliseconds;

// The random pause between two attempts to acquire (Redlock's retry delay):
// random so that clients that collided do not collide again.
constexpr milliseconds kRetryDelayMin{50};
constexpr milliseconds kRetryDelayMax{150};
constexpr milliseconds kInstanceTimeoutMin{50};
constexpr size_t kHostsMax = 16;

constexpr Capability kCapabilities[] = {
    {Property::kMutualExclusion, Support::kPartial,
     "a majority of the N instances must accept the key within its validity; safe only while "
     "clock drift, network delays and process pauses stay well below the TTL (Kleppmann's "
     "critique), and while no instance forgets keys on a restart"},
    {Property::kCrashRelease, Support::kYes,
     "the keys have a TTL (`session_ttl` plus 1% + 2 ms for drift): a crashed holder's lock "
     "is freed when it runs out"},
    {Property::kRenewal, Support::kYes,
     "the watchdog extends the keys on every instance every TTL/3; it counts only if a "
     "majority confirms within the validity, and a lock a majority no longer has ends the "
     "session"},
    {Property::kBlocking, Support::kPartial,
     "polling: a waiter retries every 50..150 ms (random), as the Redlock algorithm does; no "
     "notification of releases"},
    {Property::kTryLock, Support::kYes, "one round of `SET NX` over the instances"},
    {Property::kReentrancy, Support::kYes,
     "counted in the client: nested acquires of the holding thread cost no request"},
    {Property::kFairness, Support::kNo,
     "waiters retry independently; whoever gets a majority first wins"},
    {Property::kFencing, Support::kNo,
     "no fencing token: N independent servers have no common counter, so a holder paused past "
     "its lock's validity cannot be told apart from the new holder (Kleppmann's critique)"},
    {Property::kSharedMode, Support::kNo, "exclusive locks only"},
    {Property::kNoHerd, Support::kNo,
     "every waiter keeps polling; a release is noticed by whoever polls first"},
    {Property::kDeadlockDetection, Support::kNo, "no wait-for graph; use timeouts"},
    {Property::kHighAvailability, Support::kYes,
     "locks can be taken and kept while a majority of the instances is up"},
    {Property::kDurability, Support::kPartial,
     "an instance that restarts without fsync'd AOF forgets its keys; a majority of such "
     "restarts can grant a held lock again (delay restarts by the TTL, as the Redlock "
     "description advises)"},
};

// KEYS[1] lock key. ARGV[1] the grant's value. Deletes the key only if it
// still holds this grant's value.
constexpr std::string_view kReleaseScript = R"lua(
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
)lua";

// KEYS[i] lock keys. ARGV[1] TTL ms, ARGV[i + 1] the value of KEYS[i].
// Extends each key that still holds its value; returns 1 or 0 per key.
constexpr std::string_view kRenewScript = R"lua(
local out = {}
for i = 1, #KEYS do
  if redis.call('get', KEYS[i]) == ARGV[i + 1] then
    redis.call('pexpire', KEYS[i], ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
)lua";

// The outcome of one request sent to every instance.
struct Round {
  size_t yes = 0;     // instances that did it (SET accepted, key deleted, ...)
  size_t no = 0;      // instances that answered but did not
  size_t failed = 0;  // instances that did not answer or answered an error
  std::string errors;

  void Fail(const Status& status) {
    ++failed;
    if (!errors.empty()) errors += "; ";
    errors += status.ToString();
  }
};

class RedlockBackend final : public BasicBackend {
 public:
  RedlockBackend(const std::vector<RedisServer>& servers, const ClientOptions& options)
      : BasicBackend(options),
        release_script_(std::string(kReleaseScript)),
        renew_script_(std::string(kRenewScript)) {
    for (const RedisServer& server : servers) {
      pools_.push_back(
          std::make_unique<RedisPool>(server, options.connections_max, options.connect_timeout));
    }
  }

  const BackendInfo& info() const override { return RedlockBackendInfo(); }
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

 private:
  using HolderKey = std::pair<std::string, std::string>;  // (name, owner)

  size_t quorum() const { return pools_.size() / 2 + 1; }
  milliseconds ServerTtl() const { return RedisServerTtl(options().session_ttl); }
  // Redlock's allowance for clock drift between client and instances.
  milliseconds Drift() const { return milliseconds(ServerTtl().count() / 100 + 2); }
  milliseconds InstanceTimeout() const {
    return std::min(std::max(milliseconds(options().session_ttl.count() / 20), kInstanceTimeoutMin),
                    options().op_timeout);
  }
  // Runs one command on instance i within the per-instance timeout.
  Result<protocol::Value> CallInstance(size_t i, const std::vector<std::string_view>& args);
  Result<protocol::Value> RunOnInstance(size_t i, RedisScript& script,
                                        const std::vector<std::string>& keys,
                                        const std::vector<std::string>& args);
  Round SetOnAll(const std::string& key, const std::string& value);
  Round DeleteOnAll(const std::string& key, const std::string& value);
  Round PingAll();
  std::string Describe(const Round& round, std::string_view what) const;
  bool StillHeld(const std::string& name, const std::string& owner, const std::string& value);
  void Sleep(Clock::time_point until);

  std::vector<std::unique_ptr<RedisPool>> pools_;  // one per instance, URL order
  RedisScript release_script_;
  RedisScript renew_script_;

  std::mutex remote_mu_;
  std::condition_variable interrupt_cv_;
  std::map<HolderKey, std::string> remote_;  // the value of each grant; bounded by the hold table
};

Result<protocol::Value> RedlockBackend::CallInstance(size_t i,
                                                     const std::vector<std::string_view>& args) {
  Result<RedisPool::Lease> lease = pools_[i]->Borrow(Clock::now() + options().op_timeout);
  if (!lease.ok()) return lease.status();
  return lease->Call(args, Clock::now() + InstanceTimeout());
}

Result<protocol::Value> RedlockBackend::RunOnInstance(size_t i, RedisScript& script,
                                                      const std::vector<std::string>& keys,
                                                      const std::vector<std::string>& args) {
  Result<RedisPool::Lease> lease = pools_[i]->Borrow(Clock::now() + options().op_timeout);
  if (!lease.ok()) return lease.status();
  return script.Run(*lease, keys, args, Clock::now() + InstanceTimeout());
}

std::string RedlockBackend::Describe(const Round& round, std::string_view what) const {
  std::string out = std::string(what) + ": " + std::to_string(pools_.size() - round.failed) +
                    " of " + std::to_string(pools_.size()) + " Redis instances answered (" +
                    std::to_string(quorum()) + " needed)";
  if (!round.errors.empty()) out += ": " + round.errors;
  return out;
}

Round RedlockBackend::PingAll() {
  Round round;
  for (size_t i = 0; i < pools_.size(); ++i) {
    Result<protocol::Value> reply = CallInstance(i, {"PING"});
    if (!reply.ok()) {
      round.Fail(reply.status());
    } else if (reply->IsError()) {
      round.Fail(WithServer(RedisErrorStatus(*reply, "PING"), pools_[i]->server()));
    } else {
      ++round.yes;
    }
  }
  return round;
}

Status RedlockBackend::Open() {
  Clock::time_point started = Clock::now();
  Round round;
  for (size_t i = 0; i < pools_.size(); ++i) {
    // Each instance gets its share of op_timeout, and at least the
    // per-instance timeout, so that one silent instance cannot eat it all.
    Clock::time_point deadline =
        Clock::now() + std::max<Clock::duration>(InstanceTimeout(),
                                                 options().op_timeout / pools_.size());
    Result<RedisPool::Lease> lease = pools_[i]->Borrow(deadline);
    Status status = lease.ok() ? Status::Ok() : lease.status();
    for (RedisScript* script : {&release_script_, &renew_script_}) {
      if (status.ok()) status = script->Load(*lease, deadline);
    }
    if (status.ok()) {
      ++round.yes;
    } else {
      round.Fail(WithServer(status, pools_[i]->server()));
    }
  }
  if (round.yes < quorum()) {
    // An instance that refused the login is the likelier explanation.
    return Status(StatusCode::kUnavailable, Describe(round, "cannot open a redlock:// client"));
  }
  uint64_t id = RandomU64();
  SetSessionId(id == 0 ? 1 : id);
  MarkRenewed(started);
  return Status::Ok();
}

Round RedlockBackend::SetOnAll(const std::string& key, const std::string& value) {
  const std::string ttl_ms = std::to_string(ServerTtl().count());
  Round round;
  for (size_t i = 0; i < pools_.size(); ++i) {
    Result<protocol::Value> reply = CallInstance(i, {"SET", key, value, "NX", "PX", ttl_ms});
    if (!reply.ok()) {
      round.Fail(reply.status());
    } else if (reply->IsError()) {
      round.Fail(WithServer(RedisErrorStatus(*reply, "SET " + key), pools_[i]->server()));
    } else if (reply->IsNull()) {
      ++round.no;
    } else {
      ++round.yes;
    }
  }
  return round;
}

Round RedlockBackend::DeleteOnAll(const std::string& key, const std::string& value) {
  Round round;
  for (size_t i = 0; i < pools_.size(); ++i) {
    Result<protocol::Value> reply = RunOnInstance(i, release_script_, {key}, {value});
    if (!reply.ok()) {
      round.Fail(reply.status());
    } else if (reply->IsError()) {
      round.Fail(WithServer(RedisErrorStatus(*reply, "releasing " + key), pools_[i]->server()));
    } else if (reply->type == protocol::Value::Type::kInteger && reply->integer == 1) {
      ++round.yes;
    } else {
      ++round.no;
    }
  }
  return round;
}

Result<std::optional<BasicBackend::Grant>> RedlockBackend::AcquireRemote(
    const std::string& name, const std::string& owner, LockMode /*mode*/, Deadline deadline,
    const Grant* /*current*/) {
  const std::string key = RedisLockKey(name);
  char random[17];
  std::snprintf(random, sizeof random, "%016llx", static_cast<unsigned long long>(RandomU64()));
  const std::string value = client_id() + ":" + owner + ":" + random;
  const milliseconds server_ttl = ServerTtl();
  while (true) {
    if (Ended()) return EndedStatus();
    Clock::time_point started = Clock::now();
    Round round = SetOnAll(key, value);
    Clock::duration validity = server_ttl - (Clock::now() - started) - Drift();
    if (round.yes >= quorum() && validity > Clock::duration::zero()) {
      std::lock_guard lock(remote_mu_);
      remote_[HolderKey(name, owner)] = value;
      return std::optional<Grant>(Grant{0, value});
    }
    // Undo the partial grant everywhere, the instances that failed included:
    // their SET may have been applied and only the reply lost.
    Round undo = DeleteOnAll(key, value);
    (void)undo;  // what it could not delete expires with the TTL
    if (Ended()) return EndedStatus();
    if (round.failed > pools_.size() - quorum()) {
      return Status(StatusCode::kUnavailable, Describe(round, "cannot lock " + QuotedName(name)));
    }
    Clock::time_point now = Clock::now();
    if (deadline && now >= *deadline) return std::optional<Grant>();
    milliseconds delay(kRetryDelayMin.count() +
                       static_cast<int64_t>(RandomU64() % static_cast<uint64_t>(
                                                              kRetryDelayMax.count() -
                                                              kRetryDelayMin.count() + 1)));
    Clock::time_point until = now + delay;
    if (deadline) until = std::min(until, *deadline);
    Sleep(until);
  }
}

void RedlockBackend::Sleep(Clock::time_point until) {
  std::unique_lock lock(remote_mu_);
  interrupt_cv_.wait_until(lock, until, [this] { return Ended(); });
}

Status RedlockBackend::ReleaseRemote(const std::string& name, const std::string& owner,
                                     LockMode /*mode*/, const Grant& grant,
                                     uint32_t /*remaining*/) {
  {
    // Forgotten first: a renewal running meanwhile must not take this lock's
    // disappearance for a loss.
    std::lock_guard lock(remote_mu_);
    auto it = remote_.find(HolderKey(name, owner));
    if (it != remote_.end() && it->second == grant.handle) remote_.erase(it);
  }
  Round round = DeleteOnAll(RedisLockKey(name), grant.handle);
  if (pools_.size() - round.failed < quorum()) {
    // Retried by the watchdog (compare-and-delete is idempotent); the keys
    // expire with their TTL anyway.
    return Status(StatusCode::kUnavailable, Describe(round, "releasing " + QuotedName(name)));
  }
  if (round.yes == 0) {
    return Status(StatusCode::kNotHeld, "the lock " + QuotedName(name) +
                                            " had already expired on every instance that "
                                            "answered (held past its TTL?)");
  }
  return Status::Ok();
}

bool RedlockBackend::StillHeld(const std::string& name, const std::string& owner,
                               const std::string& value) {
  std::lock_guard lock(remote_mu_);
  auto it = remote_.find(HolderKey(name, owner));
  return it != remote_.end() && it->second == value;
}

Status RedlockBackend::Renew(const std::vector<HeldLock>& holds) {
  Clock::time_point started = Clock::now();
  if (holds.empty()) {
    Round round = PingAll();
    if (round.yes < quorum()) return Status(StatusCode::kUnavailable, Describe(round, "PING"));
    return Status::Ok();
  }
  const std::string ttl_ms = std::to_string(ServerTtl().count());
  std::vector<size_t> confirmed(holds.size(), 0);
  std::vector<size_t> denied(holds.size(), 0);
  Round round;  // for the errors
  for (size_t i = 0; i < pools_.size(); ++i) {
    for (size_t first = 0; first < holds.size(); first += kRedisKeysPerScriptMax) {
      size_t end = std::min(holds.size(), first + kRedisKeysPerScriptMax);
      std::vector<std::string> keys;
      std::vector<std::string> args{ttl_ms};
      for (size_t h = first; h < end; ++h) {
        keys.push_back(RedisLockKey(holds[h].name));
        args.push_back(holds[h].grant.handle);
      }
      Result<protocol::Value> reply = RunOnInstance(i, renew_script_, keys, args);
      Status status = Status::Ok();
      if (!reply.ok()) {
        status = reply.status();
      } else if (reply->IsError()) {
        status = WithServer(RedisErrorStatus(*reply, "renewing"), pools_[i]->server());
      } else if (reply->type != protocol::Value::Type::kArray ||
                 reply->elements.size() != end - first) {
        status = Status(StatusCode::kProtocol, "unexpected reply to the renew script");
      }
      if (!status.ok()) {
        round.Fail(status);
        break;  // this instance counts as silent for the rest
      }
      for (size_t h = first; h < end; ++h) {
        const protocol::Value& v = reply->elements[h - first];
        if (v.type == protocol::Value::Type::kInteger && v.integer == 1) {
          ++confirmed[h];
        } else {
          ++denied[h];
        }
      }
    }
  }
  for (size_t h = 0; h < holds.size(); ++h) {
    if (confirmed[h] >= quorum()) continue;
    if (denied[h] > pools_.size() - quorum() &&
        StillHeld(holds[h].name, holds[h].owner, holds[h].grant.handle)) {
      return Status(StatusCode::kSessionLost,
                    "the lock " + QuotedName(holds[h].name) + " is held by only " +
                        std::to_string(confirmed[h]) + " of " + std::to_string(pools_.size()) +
                        " instances (its keys expired)");
    }
    if (StillHeld(holds[h].name, holds[h].owner, holds[h].grant.handle)) {
      return Status(StatusCode::kUnavailable,
                    Describe(round, "renewing " + QuotedName(holds[h].name)));
    }
  }
  // A renewal that took longer than the validity renewed keys that others
  // may already have taken over from: it does not count.
  if (Clock::now() - started >= ServerTtl() - Drift()) {
    return Status(StatusCode::kTimeout, "the renewal took longer than the locks' validity");
  }
  return Status::Ok();
}

Status RedlockBackend::CloseRemote(const std::vector<HeldLock>& holds) {
  {
    std::lock_guard lock(remote_mu_);
    remote_.clear();
  }
  // One op_timeout for the whole close: what is not released by then
  // expires with its TTL.
  Clock::time_point deadline = Clock::now() + options().op_timeout;
  Status first_error;
  for (const HeldLock& h : holds) {
    if (Clock::now() >= deadline) {
      return Status(StatusCode::kTimeout, "close: no time left to release " + QuotedName(h.name));
    }
    Round round = DeleteOnAll(RedisLockKey(h.name), h.grant.handle);
    if (round.failed > 0 && first_error.ok()) {
      first_error =
          Status(StatusCode::kUnavailable, Describe(round, "releasing " + QuotedName(h.name)));
    }
  }
  return first_error;
}

void RedlockBackend::InterruptAll() {
  for (const std::unique_ptr<RedisPool>& pool : pools_) pool->Interrupt();
  std::lock_guard lock(remote_mu_);
  interrupt_cv_.notify_all();
}

}  // namespace

const BackendInfo& RedlockBackendInfo() {
  static const BackendInfo info{"redlock", "Redlock (N independent Redis)",
                                "redlock://[[user]:password@]h1[:p1],h2[:p2],...[/db]",
                                kCapabilities};
  return info;
}

Result<std::shared_ptr<Backend>> MakeRedlockBackend(std::string_view url,
                                                    const ClientOptions& options) {
  Result<std::vector<RedisServer>> servers = ParseRedisUrl(url, "redlock", 1, kHostsMax);
  if (!servers.ok()) return servers.status();
  return std::shared_ptr<Backend>(std::make_shared<RedlockBackend>(*servers, options));
}

}  // namespace tumbler::client

// BasicBackend: what the backends over other systems (redis://, redlock://,
// etcd://, zookeeper://, postgres://, mysql://) share, so that each of them
// only says how to acquire, release and renew on its system:
//
//   * the local hold table: which thread holds which lock, in which mode, how
//     many times (reentrancy is counted here unless the backend counts nested
//     holds on its server, CountsNestedHolds()), and the grant's token;
//   * the session contract of include/tumbler/client.h: the watchdog renews
//     every RenewInterval(), "safe until" = start of the last successful
//     renewal + the TTL, the session is lost when a renewal says so or none
//     succeeds before safe-until passes; then every hold is forgotten, blocked
//     calls are interrupted, OnSessionLost's callback runs once on the
//     watchdog thread, and later calls fail with kSessionLost;
//   * argument checks and kUnsupported for what info() says is not provided
//     (shared mode, for most).
//
// A holder is (lock name, owner tag): the owner tag is the calling thread's
// (owner.h), unique within the process; combine it with client_id() for an
// identity that is unique across processes. One thread works on one holder at
// a time, so the hooks for one holder never run concurrently.
//
// Threads: the hooks run on the calling thread (Acquire/Release) or the
// watchdog thread (Renew), without BasicBackend's mutex held; a subclass
// guards its own connections. DeclareLost and InterruptAll may run on any
// thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/backend.h"

namespace tumbler::client {

class BasicBackend : public Backend {
 public:
  explicit BasicBackend(ClientOptions options);
  ~BasicBackend() override;

  // Backend. Open() is the subclass's: it connects, opens its session or
  // lease, then calls SetSessionId() and MarkRenewed(start).
  void RunWatchdog() override;
  void BeginClose() override;
  Status FinishClose() override;
  uint64_t session_id() const override { return session_id_.load(std::memory_order_acquire); }
  Clock::time_point safe_until() const override;
  Status SessionStatus() const override;
  void SetLostCallback(std::function<void(const Status&)> callback) override;
  Result<bool> Acquire(std::string_view name, LockMode mode, Deadline deadline) override;
  Status Release(std::string_view name, LockMode mode, bool* precondition_failed) override;
  uint64_t Token(std::string_view name) const override;
  uint32_t HoldCount(std::string_view name) const override;

 protected:
  // What a successful AcquireRemote returns.
  struct Grant {
    uint64_t token = 0;   // fencing token, 0 if the backend has none
    std::string handle;   // backend data the release needs (random value, node path, ...)
  };
  // A hold as the watchdog sees it (Renew).
  struct HeldLock {
    std::string name;
    std::string owner;
    LockMode mode = LockMode::kExclusive;
    uint32_t count = 0;
    Grant grant;
  };

  // --- Hooks ---------------------------------------------------------------------
  // Acquires `name` for `owner` in `mode`, waiting until `deadline` (nullopt:
  // forever; at or before now: try once). `current` is the holder's existing
  // grant when it already holds the lock and CountsNestedHolds() (a nested
  // acquire the server counts), else nullptr. Returns the grant, nullopt when
  // the lock was not free before the deadline, or an error (kSessionLost when
  // interrupted by InterruptAll because the session ended).
  virtual Result<std::optional<Grant>> AcquireRemote(const std::string& name,
                                                     const std::string& owner, LockMode mode,
                                                     Deadline deadline, const Grant* current) = 0;
  // Gives up one hold: the last one (remaining == 0) unless CountsNestedHolds(),
  // when every release comes here with the count left after it. A failure
  // other than kSessionLost / kNotHeld is retried by the watchdog (the same
  // call) until it succeeds or the session ends, so it must be idempotent.
  virtual Status ReleaseRemote(const std::string& name, const std::string& owner, LockMode mode,
                               const Grant& grant, uint32_t remaining) = 0;
  // Renews the session or lease(s) covering `holds` (every hold of the
  // client). OK: renewed. kSessionLost: the session or a lock is certainly
  // gone. Anything else: a transient failure, tried again soon.
  virtual Status Renew(const std::vector<HeldLock>& holds) = 0;
  // On Close (session not lost): ends the session and releases `holds`
  // remotely. Best effort; the error is what Close() returns.
  virtual Status CloseRemote(const std::vector<HeldLock>& holds) = 0;
  // Wakes every call blocked in AcquireRemote (they return kSessionLost).
  // Any thread. Default: nothing to wake.
  virtual void InterruptAll() {}
  // True if nested acquires and releases go to the server (Redisson-style
  // hold counts); false if they are counted here and cost no round trip.
  virtual bool CountsNestedHolds() const { return false; }
  // How often the watchdog renews. Default: TTL / 3.
  virtual Clock::duration RenewInterval() const;

  // --- For subclasses ------------------------------------------------------------
  const ClientOptions& options() const { return options_; }
  // A random 128-bit identity of this client, 32 hex digits (for lock values).
  const std::string& client_id() const { return client_id_; }
  void SetSessionId(uint64_t id) { session_id_.store(id, std::memory_order_release); }
  // A renewal (or the opening) that started at `started` succeeded.
  void MarkRenewed(Clock::time_point started);
  // The session is lost (once; not after Close). Any thread.
  void DeclareLost(const std::string& why);
  // Closed or lost.
  bool Ended() const { return ended_.load(std::memory_order_acquire); }
  // kSessionLost with the reason (closed, or why it was lost).
  Status EndedStatus() const;

 private:
  using Key = std::pair<std::string, std::string>;  // (name, owner)
  struct Entry {
    uint32_t count = 0;
    LockMode mode = LockMode::kExclusive;
    Grant grant;
  };

  Status EndedStatusLocked() const;
  std::vector<HeldLock> SnapshotHolds() const;
  // Retries the releases that failed (watchdog thread).
  void RetryOwedReleases();

  const ClientOptions options_;
  const std::string client_id_;
  std::atomic<uint64_t> session_id_{0};
  std::atomic<Clock::rep> safe_until_{0};
  std::atomic<bool> ended_{false};

  mutable std::mutex mu_;
  std::condition_variable watchdog_cv_;
  std::map<Key, Entry> holds_;
  // Releases that failed on the network: the watchdog retries them until the
  // server confirms or the session ends (bounded by kOwedReleasesMax).
  std::vector<HeldLock> owed_releases_;
  bool closed_ = false;
  bool lost_ = false;
  bool stop_ = false;
  Status lost_status_;
  LostCallback lost_callback_;
};

// A random 64-bit number from std::random_device (for lock values, retry jitter).
uint64_t RandomU64();

}  // namespace tumbler::client

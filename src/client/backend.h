// The interface every lock backend implements behind tumbler::Client and its
// Mutex handles. The tumbler:// backend is ClientState (client_state.h); the
// others (redis://, redlock://, etcd://, zookeeper://, postgres://, mysql://)
// derive from BasicBackend (basic_backend.h), which does the parts they share.
// The contract of each call is the public one in include/tumbler/client.h and
// mutex.h; what a backend cannot do it answers with kUnsupported.
//
// Lifecycle: Client::Connect makes the backend, calls Open() once, then runs
// RunWatchdog() on a thread of its own until Close: BeginClose() (watchdog
// returns), join, FinishClose().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "client/hold_table.h"  // LockMode
#include "tumbler/backends.h"
#include "tumbler/client.h"
#include "tumbler/status.h"

namespace tumbler::client {

using Clock = std::chrono::steady_clock;
using Deadline = std::optional<Clock::time_point>;

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const BackendInfo& info() const = 0;

  // Connects and opens the session / lease. Once, before RunWatchdog.
  virtual Status Open() = 0;
  // The watchdog thread's body; returns after BeginClose().
  virtual void RunWatchdog() = 0;
  // First half of Close: refuse new calls, stop the watchdog.
  virtual void BeginClose() = 0;
  // Second half, after the watchdog thread has ended: end the session, wake
  // every blocked call (kSessionLost).
  virtual Status FinishClose() = 0;

  virtual uint64_t session_id() const = 0;
  virtual Clock::time_point safe_until() const = 0;
  virtual Status SessionStatus() const = 0;
  virtual void SetLostCallback(std::function<void(const Status&)> callback) = 0;

  // deadline: nullopt waits forever; at or before now is a try-lock.
  virtual Result<bool> Acquire(std::string_view name, LockMode mode, Deadline deadline) = 0;
  // *precondition_failed (may be null) is set when the error is the caller's
  // (no such hold of the calling thread, invalid name).
  virtual Status Release(std::string_view name, LockMode mode, bool* precondition_failed) = 0;
  virtual uint64_t Token(std::string_view name) const = 0;
  virtual uint32_t HoldCount(std::string_view name) const = 0;
};

// The session-lost callback (Client::OnSessionLost) as every backend keeps it:
// replaceable at any time, run at most once per Client, on the watchdog
// thread, after the loss. Not thread-safe: its owner's mutex guards it.
class LostCallback {
 public:
  using Fn = std::function<void(const Status&)>;
  // Replaces the callback. One that already ran is not followed by another
  // (include/tumbler/client.h: "if no callback has run yet").
  void Set(Fn fn) { fn_ = std::move(fn); }
  // The callback to run now, once; empty when there is none or it ran.
  Fn TakeDue() {
    if (!fn_ || ran_) return {};
    ran_ = true;
    return fn_;
  }

 private:
  Fn fn_;
  bool ran_ = false;
};

// Makes the backend for `url` (its scheme picks which), not yet opened.
// Errors: kInvalidArgument (malformed URL, option out of range),
// kUnsupported (unknown scheme).
Result<std::shared_ptr<Backend>> MakeBackend(std::string_view url, const ClientOptions& options);

}  // namespace tumbler::client

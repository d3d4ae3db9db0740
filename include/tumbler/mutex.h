// tumbler::Mutex and tumbler::SharedMutex: distributed locks with the
// interfaces of std::timed_mutex and std::shared_timed_mutex, so that
// std::unique_lock, std::scoped_lock, std::lock and std::shared_lock work.
//
//   tumbler::Mutex m = client.NewMutex("orders/42");
//   {
//     std::unique_lock lock(m);          // blocks, FIFO across all clients
//     uint64_t token = m.token();        // fencing token: hand it to the resource
//     ...
//   }
//   if (m.try_lock_for(2s)) { ...; m.unlock(); }
//
// Two APIs on each class:
//   * The primary API (Lock, TryLockFor, Unlock, ...) reports every failure as
//     a Status / Result and never throws.
//   * The standard API (lock, try_lock_for, unlock, ...) exists for the std
//     lock wrappers. Where the standard's signature has no room for an error
//     it throws tumbler::LockError, which derives from std::system_error and
//     carries the Status (see each function). unlock() never throws for a
//     network or server failure (it runs in destructors).
//
// Holders. On the server a holder is (session, owner tag). A Client has one
// session and every thread its own owner tag, so two threads of one process
// exclude each other, and one thread relocking a lock it holds is reentrant,
// as with std::recursive_mutex: it must unlock as many times. Nested
// acquisitions are counted locally and cost no round trip; only a thread's
// first lock and last unlock reach the server. The hold state belongs to the
// Client, keyed by (lock name, thread): two Mutex handles with the same name
// from one Client are the same lock.
//
// Fairness: a blocking acquire is one `LOCK ... WAIT` request, so it keeps its
// place in the server's FIFO queue for as long as it waits. If the connection
// breaks during the wait, the client reconnects and asks again: it then joins
// the queue at the back (the place is lost; mutual exclusion is not).
//
// Ownership and lifetime: a Mutex is a movable handle. It shares the Client's
// internal state (reference counted), so it may outlive the Client object;
// after Client::Close() or the Client's destruction every acquire fails with
// kSessionLost. A moved-from or default-constructed Mutex fails every call
// with kInvalidArgument.
//
// Threads: any number of threads may call any method of one Mutex at the same
// time (that is the point of a mutex). Moving or destroying a Mutex must not
// race with calls on it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>

#include "tumbler/status.h"

namespace tumbler {

class Client;
namespace client {
class Backend;
}  // namespace client

// The error category of LockError codes: the value is a StatusCode. Codes
// compare equal to the nearest std::errc where there is one:
// kDeadlock -> resource_deadlock_would_occur, kNotHeld ->
// operation_not_permitted, kTimeout -> timed_out, kInvalidArgument ->
// invalid_argument, kUnavailable -> connection_refused.
const std::error_category& StatusCategory();
std::error_code MakeErrorCode(StatusCode code);

// Thrown by the standard-style methods (lock, try_lock, ...). code() is
// MakeErrorCode(status().code()); what() starts with status().ToString().
class LockError : public std::system_error {
 public:
  explicit LockError(Status status);
  const Status& status() const noexcept { return status_; }

 private:
  Status status_;
};

class Mutex {
 public:
  // An empty handle: every call fails with kInvalidArgument. Use
  // Client::NewMutex to get a working one.
  Mutex() = default;
  Mutex(Mutex&&) noexcept = default;
  Mutex& operator=(Mutex&&) noexcept = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  ~Mutex() = default;  // does not unlock: a hold ends with unlock() or the session

  // The lock's name.
  const std::string& name() const { return name_; }

  // --- Primary API (never throws) ---------------------------------------------

  // Blocks until the calling thread holds the lock exclusively (server-side
  // `WAIT FOREVER`; no client-side timeout). Errors:
  //   kDeadlock         waiting would close a cycle in the wait-for graph; the
  //                     message names it. Nothing was acquired.
  //   kWrongMode        the calling thread holds this lock shared.
  //   kLimit            a server bound (waiters per lock, holds per session,
  //                     locks), or the nested count is at 1,000,000.
  //   kSessionLost      the session ended (expired, closed, Client closed),
  //                     before or during the wait.
  //   kInvalidArgument  empty handle, or a name of 0 or more than 1024 bytes.
  //   kNotLeader        more leader redirects than a request may follow.
  //   kErr, kNoAuth, kNoPerm: the server refused the request.
  //   kProtocol         the server's reply made no sense.
  // While the server is unreachable the call keeps reconnecting; it ends with
  // kSessionLost once the watchdog gives the session up.
  Status Lock();

  // Acquires the lock if it is free now (server-side try-lock). true: acquired
  // (or, for the holding thread, nested once more); false: another holder has
  // it, or a lock-delay runs. Errors: as Lock() without kDeadlock, plus
  // kUnavailable / kTimeout / kTryAgain when the server does not answer
  // within ClientOptions::op_timeout (the client then checks in the
  // background that no grant it did not see stays behind), and kTimeout when
  // all ClientOptions::connections_max connections stay busy that long.
  Result<bool> TryLock();

  // As Lock() but waits at most `timeout` (rounded up to a millisecond; <= 0
  // is TryLock()). false: the wait ran out. Errors: as Lock(), plus
  // kUnavailable / kTimeout as TryLock().
  Result<bool> TryLockFor(std::chrono::milliseconds timeout);
  // As TryLockFor, up to a steady_clock deadline.
  Result<bool> TryLockUntil(std::chrono::steady_clock::time_point deadline);

  // Gives up one hold of the calling thread; the last one releases the lock on
  // the server. Errors:
  //   kNotHeld          the calling thread does not hold the lock (exclusive);
  //                     no request is sent. The server may also answer it.
  //   kSessionLost      the session ended; the hold is gone anyway (counted
  //                     down locally).
  //   kUnavailable, kTimeout, kTryAgain, kNotLeader, kProtocol: the server
  //                     did not confirm the release within op_timeout. The thread no longer holds
  //                     the lock locally either way, and the client's
  //                     watchdog keeps retrying the release in the background
  //                     until the server confirms it or the session ends.
  //   kInvalidArgument  empty handle.
  Status Unlock();

  // The fencing token of the calling thread's hold (PROTOCOL.md "Fencing
  // token"), or 0 if the calling thread holds no hold of this lock. Nested
  // holds share the token of the first. Local; never blocks on the network.
  uint64_t token() const;
  // The same, with the reason when there is no token: kUnsupported on a
  // backend without fencing tokens (redlock://, mysql:// ...: see
  // docs/backends.md), kNotHeld when the calling thread holds no hold.
  Result<uint64_t> FencingToken() const;
  // The calling thread's hold count (0 if none). Local.
  uint32_t hold_count() const;

  // --- Standard API: Lockable / TimedLockable ----------------------------------

  // Lock(); throws LockError on any error (kDeadlock's code compares equal to
  // std::errc::resource_deadlock_would_occur, as std::mutex reports it).
  void lock();
  // TryLock(); throws LockError on an error (not when the lock is busy).
  bool try_lock();
  // TryLockFor / TryLockUntil; throw LockError on an error. Other clocks are
  // converted as the standard does (deadline - Clock::now()).
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return ThrowIfError(TryLockFor(ToMillis(timeout)));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return try_lock_for(deadline - Clock::now());
  }
  // Unlock(). Throws LockError(kNotHeld) only if the calling thread does not
  // hold the lock (a precondition violation for the standard's Lockable; it
  // cannot happen under std::unique_lock or std::scoped_lock) or the handle
  // is empty. Never throws otherwise: failures are retried in the background
  // as Unlock() says.
  void unlock();

 protected:
  friend class Client;
  Mutex(std::shared_ptr<client::Backend> state, std::string name)
      : state_(std::move(state)), name_(std::move(name)) {}

  // unlock() / unlock_shared(): throws LockError only for the caller's error.
  void UnlockOrThrow(bool shared);
  static bool ThrowIfError(const Result<bool>& result);
  static void ThrowIfError(const Status& status);
  // Durations longer than about 290 years saturate.
  template <class Rep, class Period>
  static std::chrono::milliseconds ToMillis(const std::chrono::duration<Rep, Period>& d) {
    using Ms = std::chrono::milliseconds;
    constexpr auto kMax = std::chrono::duration<double, std::milli>(9e12);
    if (std::chrono::duration<double, std::milli>(d) >= kMax) return Ms(9'000'000'000'000);
    if (d <= std::chrono::duration<Rep, Period>::zero()) return Ms(0);
    return std::chrono::ceil<Ms>(d);
  }

  std::shared_ptr<client::Backend> state_;
  std::string name_;
};

// A reader-writer lock: Mutex's exclusive API plus shared holds. Shared holds
// are granted together; a shared request queued behind an exclusive one waits
// (readers never barge past a waiting writer). A thread cannot hold one lock
// both ways: asking for the other mode is kWrongMode (no upgrade or downgrade).
class SharedMutex : public Mutex {
 public:
  SharedMutex() = default;
  SharedMutex(SharedMutex&&) noexcept = default;
  SharedMutex& operator=(SharedMutex&&) noexcept = default;

  // --- Primary API, shared mode (errors as the exclusive counterparts) -------
  Status LockShared();
  Result<bool> TryLockShared();
  Result<bool> TryLockSharedFor(std::chrono::milliseconds timeout);
  Result<bool> TryLockSharedUntil(std::chrono::steady_clock::time_point deadline);
  // kNotHeld if the calling thread holds no shared hold (even if it holds
  // the lock exclusively: use Unlock() for that).
  Status UnlockShared();

  // --- Standard API: SharedLockable / SharedTimedLockable ----------------------
  void lock_shared();
  bool try_lock_shared();
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& timeout) {
    return ThrowIfError(TryLockSharedFor(ToMillis(timeout)));
  }
  template <class Clock, class Duration>
  bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return try_lock_shared_for(deadline - Clock::now());
  }
  void unlock_shared();

 private:
  friend class Client;
  SharedMutex(std::shared_ptr<client::Backend> state, std::string name)
      : Mutex(std::move(state), std::move(name)) {}
};

}  // namespace tumbler

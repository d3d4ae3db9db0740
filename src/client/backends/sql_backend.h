// SqlBackend: what the postgres:// and mysql:// backends share. Both lock with
// the database's session-level named locks (PostgreSQL advisory locks,
// MySQL/MariaDB GET_LOCK), which belong to the database connection that took
// them: a lock is released by its connection or when that connection ends.
// So:
//
//   * every thread that holds or waits for a lock works on a connection of
//     its own, which it keeps for as long as it holds any lock (a thread's
//     nested and further locks are on the same connection); a connection that
//     holds nothing goes back to a pool for the next thread. The pool is
//     bounded by ClientOptions::connections_max; a thread that finds every
//     connection taken waits for one (within its deadline, and at least
//     op_timeout; forever for Lock());
//   * the "session" is the set of these connections plus a control
//     connection (the watchdog's; session_id() is its server-side id). The
//     watchdog pings the control connection and every idle connection that
//     holds locks every TTL/3; the drivers make the server end a connection
//     that stays idle for the TTL (the lease). A connection that breaks while
//     it holds locks has lost them: the session is then declared lost;
//   * every request is bounded (op_timeout, or the lock wait's own deadline +
//     op_timeout) and interruptible: the drivers use their library's
//     non-blocking API and wait in poll() on the socket and on an eventfd
//     that InterruptAll() makes readable for good. A request that is cut short
//     leaves its connection in an unknown state, so that connection is
//     closed (and the server then drops whatever it held).
//
// Header-only because it is the shared part of two translation units
// (postgres.cc, mysql.cc) of tumbler_client; every member is defined in the
// class body (inline).
//
// Threads: a connection is used by one thread at a time: a slot is marked
// in_use under mu_ by the thread that takes it (its owner's thread, or the
// watchdog for a ping), which then works on it without mu_.
#pragma once

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/basic_backend.h"

namespace tumbler::client {

// FNV-1a, 64 bits, over the bytes of `data` (http://www.isthe.com/chongo/tech/comp/fnv/).
// A fixed, documented hash (unlike PostgreSQL's hashtext, which may change
// between server versions), so every client maps a lock name to the same key.
constexpr uint64_t Fnv1a64(std::string_view data) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (char c : data) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// FNV-1a, 128 bits, as 32 lowercase hex digits.
inline std::string Fnv1a128Hex(std::string_view data) {
  using U128 = unsigned __int128;
  U128 hash = (static_cast<U128>(0x6c62272e07bb0142ULL) << 64) | 0x62b821756295c58dULL;
  const U128 prime = (static_cast<U128>(1) << 88) | 0x13b;
  for (char c : data) {
    hash ^= static_cast<uint8_t>(c);
    hash *= prime;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 31; i >= 0; --i) {
    out[static_cast<size_t>(i)] = kHex[static_cast<unsigned>(hash & 0xf)];
    hash >>= 4;
  }
  return out;
}

// The GET_LOCK name of a tumbler lock name for the mysql:// backend: the name
// itself when it is 1..64 bytes of printable ASCII other than space, quotes,
// backslash and backquote and does not start with "tumbler:", else
// "tumbler:" + Fnv1a128Hex(name). Defined in mysql.cc.
std::string MySqlLockName(std::string_view name);

// Decodes %XX escapes (user names and passwords in URLs). nullopt if an
// escape is malformed.
inline std::optional<std::string> PercentDecode(std::string_view in) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size() || hex(in[i + 1]) < 0 || hex(in[i + 2]) < 0) return std::nullopt;
    out += static_cast<char>(hex(in[i + 1]) * 16 + hex(in[i + 2]));
    i += 2;
  }
  return out;
}

// What a wait on a socket ended with.
enum class FdWait : uint8_t { kReady, kTimedOut, kWoken, kFailed };

// Waits until `fd` has one of `events` (POLLIN / POLLOUT), `deadline` passes
// (nullopt: no deadline) or `wake_fd` is readable. *revents gets what fd has.
inline FdWait WaitForFd(int fd, short events, Deadline deadline, int wake_fd, short* revents) {
  *revents = 0;
  for (;;) {
    int timeout_ms = -1;
    if (deadline) {
      Clock::duration left = *deadline - Clock::now();
      if (left <= Clock::duration::zero()) return FdWait::kTimedOut;
      // Round up, so that a wait never ends just before its deadline.
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
      timeout_ms = static_cast<int>(std::min<int64_t>(ms, 60'000));
    }
    pollfd fds[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    int n = ::poll(fds, 2, timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      return FdWait::kFailed;
    }
    if (fds[1].revents != 0) return FdWait::kWoken;
    if (fds[0].revents != 0) {
      *revents = fds[0].revents;
      return FdWait::kReady;
    }
    // Timed out (or a 60 s slice of a longer wait ended): check the deadline.
  }
}

// True if `fd`, a connection with no request in flight, has something to
// read: the server closed it (or sent an error before closing).
inline bool IdleSocketReadable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}

// One database connection of a SqlBackend. The driver derives from it; its
// destructor closes the connection without blocking for long.
class SqlConnection {
 public:
  SqlConnection() = default;
  virtual ~SqlConnection() = default;
  SqlConnection(const SqlConnection&) = delete;
  SqlConnection& operator=(const SqlConnection&) = delete;

  // Set by the driver when the connection must not be used again (it broke,
  // or a request on it was cut short). SqlBackend then closes it.
  bool broken = false;
};

class SqlBackend : public BasicBackend {
 public:
  explicit SqlBackend(ClientOptions options)
      : BasicBackend(std::move(options)), wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

  ~SqlBackend() override {
    // Normally empty by now (FinishClose); a backend that was never opened or
    // whose Close was skipped closes its connections here.
    slots_.clear();
    control_.reset();
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }

  Status Open() override {
    if (wake_fd_ < 0) return Status(StatusCode::kUnavailable, "eventfd failed");
    Clock::time_point started = Clock::now();
    Result<std::unique_ptr<SqlConnection>> control = Connect(started + options().connect_timeout);
    if (!control.ok()) return control.status();
    control_ = std::move(control).value();
    if (Status status = PrepareSession(*control_); !status.ok()) {
      control_.reset();
      return status;
    }
    SetSessionId(ConnectionId(*control_));
    MarkRenewed(started);
    return Status::Ok();
  }

 protected:
  // --- Driver hooks ------------------------------------------------------------
  // Opens and configures one connection, by `deadline` (interruptible).
  virtual Result<std::unique_ptr<SqlConnection>> Connect(Clock::time_point deadline) = 0;
  // On the control connection, once at Open: creates what the fencing tokens
  // need. An error fails Open.
  virtual Status PrepareSession(SqlConnection& control) = 0;
  // The server's id of the connection (> 0).
  virtual uint64_t ConnectionId(SqlConnection& c) = 0;
  // Takes `name` on `c` and then a fencing token. Returns the token, nullopt
  // when the lock was not free before `deadline` (nothing is held then), or
  // an error (kDeadlock when the server found a cycle).
  virtual Result<std::optional<uint64_t>> LockOn(SqlConnection& c, const std::string& name,
                                                 LockMode mode, Deadline deadline) = 0;
  // Releases `name` on `c`. kNotHeld if the server says `c` does not hold it.
  virtual Status UnlockOn(SqlConnection& c, const std::string& name, LockMode mode) = 0;
  // One round trip on `c` (which also restarts the server's idle timer).
  virtual Status PingOn(SqlConnection& c) = 0;
  // True if `c`, idle in the pool, was closed by the server meanwhile.
  virtual bool LooksClosed(SqlConnection& c) = 0;

  int wake_fd() const { return wake_fd_; }
  // The bound on a request that does not wait for a lock.
  Clock::time_point OpDeadline() const { return Clock::now() + options().op_timeout; }

  // --- BasicBackend hooks ----------------------------------------------------------
  Result<std::optional<Grant>> AcquireRemote(const std::string& name, const std::string& owner,
                                             LockMode mode, Deadline deadline,
                                             const Grant* /*current*/) override {
    // A pool wait gets the lock wait's deadline, but at least op_timeout, so
    // that a try-lock is not refused merely because a connection is being
    // handed back at that moment.
    Deadline pool_deadline;
    if (deadline) pool_deadline = std::max(*deadline, OpDeadline());
    Result<Slot*> taken = TakeSlot(owner, pool_deadline);
    if (!taken.ok()) return taken.status();
    Slot* slot = taken.value();
    Result<std::optional<uint64_t>> locked = LockOn(*slot->conn, name, mode, deadline);
    bool granted = locked.ok() && locked.value().has_value();
    std::string lost = GiveBack(slot, granted ? 1 : 0);
    if (!lost.empty()) DeclareLost(lost + ": " + locked.status().ToString());
    if (!locked.ok()) return locked.status();
    if (!granted) return std::optional<Grant>();
    return std::optional<Grant>(Grant{*locked.value(), ""});
  }

  Status ReleaseRemote(const std::string& name, const std::string& owner, LockMode mode,
                       const Grant& /*grant*/, uint32_t /*remaining*/) override {
    Result<Slot*> taken = TakeOwnSlot(owner);
    if (!taken.ok()) return taken.status();
    Slot* slot = taken.value();
    Status status = UnlockOn(*slot->conn, name, mode);
    // Released, or not held by this connection, or the connection is gone
    // (and the lock with it): either way this connection no longer holds it.
    bool gone = slot->conn->broken;
    std::string lost = GiveBack(slot, -1);
    if (!lost.empty()) DeclareLost(lost + ": " + status.ToString());
    // A broken connection took the lock with it: the server ends its session
    // and releases everything it held, so the release has happened (or will,
    // once the server notices) and retrying it would be wrong.
    if (gone && !Ended()) return Status::Ok();
    return status;
  }

  Status Renew(const std::vector<HeldLock>& /*holds*/) override {
    std::vector<Slot*> to_ping;
    {
      std::lock_guard lock(mu_);
      if (shutting_) return Status(StatusCode::kSessionLost, "the session ended");
      for (Slot& s : slots_) {
        if (s.holds > 0 && !s.in_use) {
          s.in_use = true;
          to_ping.push_back(&s);
        }
      }
    }
    std::string lost;
    for (Slot* s : to_ping) {
      Status status = PingOn(*s->conn);
      std::string why = GiveBack(s, 0, /*from_watchdog=*/true);
      if (lost.empty() && !why.empty()) lost = why + ": " + status.ToString();
    }
    if (!lost.empty()) return Status(StatusCode::kSessionLost, lost);
    if (control_ == nullptr || control_->broken) {
      return Status(StatusCode::kSessionLost, "the control connection is closed");
    }
    if (Status status = PingOn(*control_); !status.ok()) {
      if (control_->broken) {
        return Status(StatusCode::kSessionLost,
                      "the control connection broke: " + status.ToString());
      }
      return status;
    }
    return Status::Ok();
  }

  Status CloseRemote(const std::vector<HeldLock>& /*holds*/) override {
    // InterruptAll (run just before) closed every idle connection, which ends
    // its server session and so releases what it held; the threads still
    // inside a request close theirs when it returns (it was woken). Wait for
    // them, so that Close() returns after every lock is released.
    std::unique_lock lock(mu_);
    Clock::time_point until = Clock::now() + options().op_timeout + options().connect_timeout;
    bool done = cv_.wait_until(lock, until, [this] { return slots_.empty() && opening_ == 0; });
    std::unique_ptr<SqlConnection> control = std::move(control_);
    lock.unlock();
    control.reset();
    if (!done) {
      return Status(StatusCode::kTimeout,
                    "a thread did not give its connection back in time; the server releases "
                    "its locks when that connection ends");
    }
    return Status::Ok();
  }

  void InterruptAll() override {
    std::list<Slot> closing;
    {
      std::lock_guard lock(mu_);
      shutting_ = true;
      for (auto it = slots_.begin(); it != slots_.end();) {
        auto next = std::next(it);
        if (!it->in_use) {
          by_owner_.erase(it->owner);
          closing.splice(closing.end(), slots_, it);
        }
        it = next;
      }
      cv_.notify_all();
    }
    if (wake_fd_ >= 0) {
      uint64_t one = 1;
      // Never read back: the eventfd stays readable, so every later wait
      // returns at once too.
      [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
    }
    // Closing ends each connection's server session: its locks are released.
    closing.clear();
  }

 private:
  struct Slot {
    std::unique_ptr<SqlConnection> conn;
    std::string owner;   // empty while pooled
    uint32_t holds = 0;  // locks held on conn (distinct names)
    bool in_use = false;
  };

  // The owner's slot (waiting while the watchdog pings it), else a pooled
  // one, else a new connection while under the bound, else waits for one
  // until `deadline`. The slot is returned in_use and bound to `owner`.
  Result<Slot*> TakeSlot(const std::string& owner, Deadline deadline) {
    std::unique_lock lock(mu_);
    for (;;) {
      if (shutting_) return EndedStatus();
      auto own = by_owner_.find(owner);
      if (own != by_owner_.end()) {
        if (!own->second->in_use) {
          own->second->in_use = true;
          return own->second;
        }
      } else if (Slot* idle = TakeIdleLocked(owner, lock); idle != nullptr) {
        return idle;
      } else if (slots_.size() + opening_ < options().connections_max) {
        return OpenSlotLocked(owner, lock);
      }
      if (!deadline) {
        cv_.wait(lock);
      } else if (cv_.wait_until(lock, *deadline) == std::cv_status::timeout) {
        return Status(StatusCode::kTimeout, "all " + std::to_string(options().connections_max) +
                                                " connections (connections_max) stayed in use");
      }
    }
  }

  // A pooled slot that the server has not closed meanwhile, or nullptr. May
  // drop mu_ to close dead ones.
  Slot* TakeIdleLocked(const std::string& owner, std::unique_lock<std::mutex>& lock) {
    // Most recently returned first: it is the least likely to have idled out.
    for (auto it = slots_.rbegin(); it != slots_.rend(); ++it) {
      if (!it->owner.empty() || it->in_use) continue;
      if (LooksClosed(*it->conn)) {
        std::list<Slot> dead;
        dead.splice(dead.end(), slots_, std::prev(it.base()));
        lock.unlock();
        dead.clear();
        lock.lock();
        return nullptr;  // the caller looks again
      }
      it->owner = owner;
      it->in_use = true;
      by_owner_[owner] = &*it;
      return &*it;
    }
    return nullptr;
  }

  Result<Slot*> OpenSlotLocked(const std::string& owner, std::unique_lock<std::mutex>& lock) {
    ++opening_;
    lock.unlock();
    Result<std::unique_ptr<SqlConnection>> conn = Connect(Clock::now() + options().connect_timeout);
    lock.lock();
    --opening_;
    cv_.notify_all();
    if (!conn.ok()) return conn.status();
    if (shutting_) {
      lock.unlock();
      conn.value().reset();
      return EndedStatus();
    }
    slots_.push_back(Slot{std::move(conn).value(), owner, 0, true});
    by_owner_[owner] = &slots_.back();
    return &slots_.back();
  }

  // The slot the owner holds locks on (kNotHeld if it has none: it broke).
  Result<Slot*> TakeOwnSlot(const std::string& owner) {
    std::unique_lock lock(mu_);
    // Only the watchdog's ping can have it; that is bounded by op_timeout.
    Clock::time_point until = OpDeadline() + options().op_timeout;
    for (;;) {
      if (shutting_) return EndedStatus();
      auto own = by_owner_.find(owner);
      if (own == by_owner_.end()) {
        return Status(StatusCode::kNotHeld,
                      "the connection that held the lock is gone (the server released it)");
      }
      if (!own->second->in_use) {
        own->second->in_use = true;
        return own->second;
      }
      if (cv_.wait_until(lock, until) == std::cv_status::timeout) {
        return Status(StatusCode::kTimeout, "the connection stayed busy");
      }
    }
  }

  // Returns a slot taken with TakeSlot/TakeOwnSlot or by Renew, with its
  // hold count changed by `delta`. Closes it if it broke or the session
  // ended, and pools it if it holds nothing. Returns why the session is lost
  // when a connection that held locks broke, else "".
  std::string GiveBack(Slot* slot, int delta, bool from_watchdog = false) {
    std::list<Slot> closing;
    std::string lost;
    {
      std::lock_guard lock(mu_);
      if (delta < 0 && slot->holds > 0) --slot->holds;
      if (delta > 0) ++slot->holds;
      slot->in_use = false;
      if (slot->conn->broken || shutting_) {
        if (slot->conn->broken && !shutting_ && slot->holds > 0) {
          lost = std::string("a connection holding ") + std::to_string(slot->holds) +
                 " lock(s) broke" + (from_watchdog ? " (found by the watchdog)" : "");
        }
        by_owner_.erase(slot->owner);
        for (auto it = slots_.begin(); it != slots_.end(); ++it) {
          if (&*it == slot) {
            closing.splice(closing.end(), slots_, it);
            break;
          }
        }
      } else if (slot->holds == 0 && !from_watchdog) {
        by_owner_.erase(slot->owner);
        slot->owner.clear();
      }
      cv_.notify_all();
    }
    closing.clear();
    return lost;
  }

  const int wake_fd_;
  std::unique_ptr<SqlConnection> control_;  // Open, the watchdog, then CloseRemote

  std::mutex mu_;
  std::condition_variable cv_;
  std::list<Slot> slots_;                    // <= connections_max (with opening_)
  std::map<std::string, Slot*> by_owner_;  // owner -> its slot in slots_
  size_t opening_ = 0;                       // connections being opened
  bool shutting_ = false;                    // InterruptAll ran: no new work
};

}  // namespace tumbler::client

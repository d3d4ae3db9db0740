// The state behind a tumbler::Client and its Mutex handles: the session, the
// watchdog that renews it, the connection pool, and the local hold table.
// Shared (std::shared_ptr) by the Client, every Mutex made from it, and the
// watchdog thread; the last one to let go frees it. The public contract is in
// include/tumbler/client.h and mutex.h; the design in docs/client.md.
//
// Locking: one mutex (mu_) guards everything mutable except the channels'
// own sockets. No I/O is ever done while holding it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "client/backend.h"
#include "client/channel.h"
#include "client/hold_table.h"
#include "client/url.h"
#include "tumbler/client.h"
#include "tumbler/status.h"

namespace tumbler::client {

class ClientState final : public Backend {
 public:
  ClientState(std::vector<Endpoint> endpoints, ClientOptions options);
  ~ClientState() override;

  const BackendInfo& info() const override;
  Status Open() override { return OpenSession(); }
  ClientState(const ClientState&) = delete;
  ClientState& operator=(const ClientState&) = delete;

  // Checks the options Client::Connect accepts, for every backend (MakeBackend
  // calls it before any factory): kInvalidArgument naming the one out of range.
  static Status ValidateOptions(const ClientOptions& options);

  // --- Session ------------------------------------------------------------------
  // SESSION OPEN. Once, before the watchdog thread starts.
  Status OpenSession();
  // The watchdog thread's body: renews the session, repairs holds, runs the
  // session-lost callback. Returns after BeginClose().
  void RunWatchdog() override;
  // First half of Client::Close(): refuses new calls and stops the watchdog.
  void BeginClose() override;
  // Second half, after the watchdog has been joined: SESSION CLOSE (unless
  // the session is lost), then wakes every call still blocked.
  Status FinishClose() override;

  uint64_t session_id() const override { return session_id_; }
  Clock::time_point safe_until() const override;
  Status SessionStatus() const override;
  void SetLostCallback(std::function<void(const Status&)> callback) override;

  // --- Locks (any thread) -------------------------------------------------------
  // Acquires `name` for the calling thread. deadline: nullopt waits forever;
  // a time at or before now is a try-lock. Errors: see Mutex::Lock/TryLock.
  Result<bool> Acquire(std::string_view name, LockMode mode, Deadline deadline) override;
  // Gives up one hold of the calling thread. Errors: see Mutex::Unlock.
  // *precondition_failed (may be null) is set when the error is the caller's:
  // the calling thread holds no such hold, or the name is invalid.
  Status Release(std::string_view name, LockMode mode,
                 bool* precondition_failed = nullptr) override;
  uint64_t Token(std::string_view name) const override;
  uint32_t HoldCount(std::string_view name) const override;

 private:
  // A channel leased from the pool; goes back on destruction.
  class Lease;

  std::unique_ptr<Channel> NewChannel();
  Result<std::unique_ptr<Channel>> TakeChannel(Deadline deadline);
  void ReturnChannel(std::unique_ptr<Channel> channel);
  // Asks the watchdog to renew at once (a connection was re-established).
  void RenewSoon();

  // Marks the session lost (once; not after Close) and wakes everyone.
  void DeclareLost(const std::string& why);
  bool Ended() const { return ended_.load(std::memory_order_acquire); }
  Status EndedStatus() const;
  Status EndedStatusLocked() const;

  Result<bool> AcquireBusy(const HoldTable::Key& key, LockMode mode, Deadline deadline);
  Status ReleaseBusy(const HoldTable::Key& key);
  // Sends UNLOCKs (after an INSPECT if needed) until the server's count for
  // the holder matches the local one. The entry must be busy. *saw_not_held
  // (may be null) is set if the server answered NOTHELD.
  Status Repair(Channel& channel, const HoldTable::Key& key, Clock::time_point deadline,
                bool* saw_not_held);
  // The holder's count in an INSPECT reply (0 if it is not a holder).
  Result<uint32_t> InspectCount(Channel& channel, const HoldTable::Key& key,
                                Clock::time_point deadline);
  // Ends the operation on `key` and schedules a repair if one is owed.
  void EndOp(const HoldTable::Key& key);

  void Renew();
  // One pass over the holds that need a repair. False if some failed.
  bool RunRepairs();

  const ClientOptions options_;
  const std::shared_ptr<EndpointSet> endpoints_;
  ChannelOptions channel_options_;
  uint64_t session_id_ = 0;      // set by OpenSession, then constant
  std::string session_id_text_;  // the same, as sent on the wire
  std::atomic<Clock::rep> safe_until_{0};
  // lost_ || closed_, readable without mu_.
  std::atomic<bool> ended_{false};

  mutable std::mutex mu_;
  std::condition_variable watchdog_cv_;  // wakes the watchdog
  std::condition_variable holds_cv_;     // a busy hold entry became idle
  std::condition_variable pool_cv_;      // a channel went back to the pool
  bool closed_ = false;
  bool lost_ = false;
  Status lost_status_;
  bool stop_ = false;
  LostCallback lost_callback_;
  bool repairs_wanted_ = false;
  Clock::time_point repair_not_before_;
  Clock::time_point next_renew_;
  HoldTable holds_;
  std::vector<std::unique_ptr<Channel>> idle_channels_;
  std::set<Channel*> busy_channels_;
  size_t channels_count_ = 0;  // idle + busy; the watchdog's is not counted
  // Used by OpenSession and then by the watchdog thread only; Interrupt()ed
  // from any thread.
  std::unique_ptr<Channel> watchdog_channel_;
};

}  // namespace tumbler::client

#include "client/basic_backend.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "client/owner.h"
#include "core/limits.h"

namespace tumbler::client {
namespace {

using std::chrono::milliseconds;

// After a failed renewal the watchdog tries again this often (bounded by the
// interval, so several tries fit in one lease).
constexpr Clock::duration kRenewRetryMax = milliseconds(200);
// Failed releases kept for retry; past this the oldest is dropped (its lock
// then ends with the session or lease).
constexpr size_t kOwedReleasesMax = 4096;

Status CheckName(std::string_view name) {
  if (name.empty()) return Status(StatusCode::kInvalidArgument, "lock name is empty");
  if (name.size() > limits::kLockNameBytesMax) {
    return Status(StatusCode::kInvalidArgument,
                  "lock name is longer than " + std::to_string(limits::kLockNameBytesMax) +
                      " bytes");
  }
  return Status::Ok();
}

std::string RandomHex128() {
  char out[33];
  std::snprintf(out, sizeof(out), "%016llx%016llx", static_cast<unsigned long long>(RandomU64()),
                static_cast<unsigned long long>(RandomU64()));
  return out;
}

}  // namespace

uint64_t RandomU64() {
  thread_local std::mt19937_64 gen([] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }());
  return gen();
}

BasicBackend::BasicBackend(ClientOptions options)
    : options_(std::move(options)), client_id_(RandomHex128()) {}

BasicBackend::~BasicBackend() = default;

Clock::duration BasicBackend::RenewInterval() const { return options_.session_ttl / 3; }

Clock::time_point BasicBackend::safe_until() const {
  if (Ended()) return Clock::time_point();
  return Clock::time_point(Clock::duration(safe_until_.load(std::memory_order_acquire)));
}

void BasicBackend::MarkRenewed(Clock::time_point started) {
  Clock::rep until = (started + options_.session_ttl).time_since_epoch().count();
  Clock::rep old = safe_until_.load(std::memory_order_relaxed);
  while (old < until &&
         !safe_until_.compare_exchange_weak(old, until, std::memory_order_acq_rel)) {
  }
}

Status BasicBackend::EndedStatusLocked() const {
  if (lost_) return lost_status_;
  return Status(StatusCode::kSessionLost, "the client was closed");
}

Status BasicBackend::EndedStatus() const {
  std::lock_guard lock(mu_);
  return EndedStatusLocked();
}

Status BasicBackend::SessionStatus() const {
  {
    std::lock_guard lock(mu_);
    if (lost_ || closed_) return EndedStatusLocked();
  }
  if (Clock::now() >= safe_until()) {
    return Status(StatusCode::kSessionLost, "the lease is not known to be renewed (safe-until passed)");
  }
  return Status::Ok();
}

void BasicBackend::SetLostCallback(std::function<void(const Status&)> callback) {
  std::lock_guard lock(mu_);
  lost_callback_.Set(std::move(callback));
  watchdog_cv_.notify_all();
}

void BasicBackend::DeclareLost(const std::string& why) {
  {
    std::lock_guard lock(mu_);
    if (lost_ || closed_) return;
    lost_ = true;
    lost_status_ = Status(StatusCode::kSessionLost, why);
    ended_.store(true, std::memory_order_release);
    holds_.clear();
    owed_releases_.clear();
    watchdog_cv_.notify_all();
  }
  InterruptAll();
}

std::vector<BasicBackend::HeldLock> BasicBackend::SnapshotHolds() const {
  std::vector<HeldLock> out;
  std::lock_guard lock(mu_);
  out.reserve(holds_.size());
  for (const auto& [key, entry] : holds_) {
    out.push_back(HeldLock{key.first, key.second, entry.mode, entry.count, entry.grant});
  }
  return out;
}

void BasicBackend::RunWatchdog() {
  Clock::time_point next = Clock::now() + RenewInterval();
  std::unique_lock lock(mu_);
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
    if (Clock::now() < next) {
      watchdog_cv_.wait_until(lock, next);
      continue;
    }
    lock.unlock();
    RetryOwedReleases();
    Clock::time_point started = Clock::now();
    Status status = Renew(SnapshotHolds());
    if (status.ok()) {
      MarkRenewed(started);
      next = started + RenewInterval();
    } else if (status.code() == StatusCode::kSessionLost) {
      DeclareLost(status.message());
    } else if (Clock::now() >= safe_until()) {
      DeclareLost("could not renew before the lease ran out: " + status.ToString());
    } else {
      next = Clock::now() + std::min<Clock::duration>(kRenewRetryMax, RenewInterval());
    }
    lock.lock();
  }
}

void BasicBackend::BeginClose() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    watchdog_cv_.notify_all();
  }
}

Status BasicBackend::FinishClose() {
  std::vector<HeldLock> holds;
  bool was_lost = false;
  {
    std::lock_guard lock(mu_);
    if (closed_) return Status::Ok();
    was_lost = lost_;
    closed_ = true;
    ended_.store(true, std::memory_order_release);
  }
  InterruptAll();
  holds = SnapshotHolds();
  {
    std::lock_guard lock(mu_);
    for (HeldLock& h : owed_releases_) holds.push_back(std::move(h));
    owed_releases_.clear();
  }
  Status status = was_lost ? Status::Ok() : CloseRemote(holds);
  {
    std::lock_guard lock(mu_);
    holds_.clear();
  }
  safe_until_.store(0, std::memory_order_release);
  return status;
}

Result<bool> BasicBackend::Acquire(std::string_view name, LockMode mode, Deadline deadline) {
  if (Status status = CheckName(name); !status.ok()) return status;
  if (mode == LockMode::kShared && !info().Supports(Property::kSharedMode)) {
    return Status(StatusCode::kUnsupported,
                  std::string(info().scheme) + ":// locks have no shared (reader) mode");
  }
  const std::string& owner = ThreadOwnerTag();
  Key key(std::string(name), owner);
  std::optional<Grant> current;
  {
    std::lock_guard lock(mu_);
    if (lost_ || closed_) return EndedStatusLocked();
    auto it = holds_.find(key);
    if (it != holds_.end()) {
      Entry& e = it->second;
      if (e.mode != mode) {
        return Status(StatusCode::kWrongMode,
                      "the calling thread holds this lock in the other mode");
      }
      if (e.count >= limits::kHoldCountMax) {
        return Status(StatusCode::kLimit, "nested hold count is at its bound");
      }
      if (!CountsNestedHolds()) {
        ++e.count;
        return true;
      }
      current = e.grant;
    }
  }
  Result<std::optional<Grant>> result =
      AcquireRemote(key.first, owner, mode, deadline, current ? &*current : nullptr);
  if (!result.ok()) {
    if (Ended()) return EndedStatus();
    return result.status();
  }
  if (!result.value().has_value()) return false;
  std::lock_guard lock(mu_);
  if (lost_ || closed_) {
    // Granted just as the session ended: the lease or session takes the
    // hold with it (or FinishClose already released it remotely).
    return EndedStatusLocked();
  }
  Entry& e = holds_[key];
  if (e.count == 0) e.mode = mode;
  e.grant = std::move(*result.value());
  ++e.count;
  return true;
}

Status BasicBackend::Release(std::string_view name, LockMode mode, bool* precondition_failed) {
  if (precondition_failed != nullptr) *precondition_failed = false;
  auto caller_error = [&](Status status) {
    if (precondition_failed != nullptr) *precondition_failed = true;
    return status;
  };
  if (Status status = CheckName(name); !status.ok()) return caller_error(status);
  const std::string& owner = ThreadOwnerTag();
  Key key(std::string(name), owner);
  Grant grant;
  uint32_t remaining = 0;
  {
    std::lock_guard lock(mu_);
    if (lost_ || closed_) return EndedStatusLocked();
    auto it = holds_.find(key);
    if (it == holds_.end() || it->second.mode != mode) {
      return caller_error(Status(StatusCode::kNotHeld, "the calling thread does not hold \"" +
                                                           std::string(name) + "\"" +
                                                           (mode == LockMode::kShared
                                                                ? " shared"
                                                                : "")));
    }
    Entry& e = it->second;
    remaining = e.count - 1;
    grant = e.grant;
    if (remaining > 0 && !CountsNestedHolds()) {
      e.count = remaining;
      return Status::Ok();
    }
    // The thread no longer holds it locally, whatever the server says.
    if (remaining == 0) {
      holds_.erase(it);
    } else {
      e.count = remaining;
    }
  }
  Status status = ReleaseRemote(key.first, owner, mode, grant, remaining);
  if (status.ok()) return status;
  if (Ended()) return EndedStatus();
  if (status.code() != StatusCode::kNotHeld && status.code() != StatusCode::kSessionLost &&
      status.code() != StatusCode::kUnsupported) {
    std::lock_guard lock(mu_);
    if (owed_releases_.size() >= kOwedReleasesMax) owed_releases_.erase(owed_releases_.begin());
    owed_releases_.push_back(HeldLock{key.first, owner, mode, remaining, std::move(grant)});
    watchdog_cv_.notify_all();
  }
  return status;
}

void BasicBackend::RetryOwedReleases() {
  std::vector<HeldLock> owed;
  {
    std::lock_guard lock(mu_);
    owed.swap(owed_releases_);
  }
  std::vector<HeldLock> still;
  for (HeldLock& h : owed) {
    if (Ended()) return;
    Status status = ReleaseRemote(h.name, h.owner, h.mode, h.grant, h.count);
    if (!status.ok() && status.code() != StatusCode::kNotHeld &&
        status.code() != StatusCode::kSessionLost) {
      still.push_back(std::move(h));
    }
  }
  std::lock_guard lock(mu_);
  for (HeldLock& h : still) {
    if (owed_releases_.size() >= kOwedReleasesMax) break;
    owed_releases_.push_back(std::move(h));
  }
}

uint64_t BasicBackend::Token(std::string_view name) const {
  std::lock_guard lock(mu_);
  auto it = holds_.find(Key(std::string(name), ThreadOwnerTag()));
  return it == holds_.end() ? 0 : it->second.grant.token;
}

uint32_t BasicBackend::HoldCount(std::string_view name) const {
  std::lock_guard lock(mu_);
  auto it = holds_.find(Key(std::string(name), ThreadOwnerTag()));
  return it == holds_.end() ? 0 : it->second.count;
}

}  // namespace tumbler::client

// tumbler::Mutex / SharedMutex: thin handles over a client::Backend.
#include "tumbler/mutex.h"

#include "client/backend.h"

namespace tumbler {
namespace {

using client::LockMode;
using std::chrono::milliseconds;

// Timeouts beyond this are treated as "forever" (see Mutex::ToMillis).
constexpr milliseconds kForever = std::chrono::hours(24 * 365 * 100);

class TumblerCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "tumbler"; }
  std::string message(int value) const override {
    return std::string(StatusCodeName(static_cast<StatusCode>(value)));
  }
  std::error_condition default_error_condition(int value) const noexcept override {
    switch (static_cast<StatusCode>(value)) {
      case StatusCode::kDeadlock: return std::errc::resource_deadlock_would_occur;
      case StatusCode::kNotHeld: return std::errc::operation_not_permitted;
      case StatusCode::kTimeout: return std::errc::timed_out;
      case StatusCode::kInvalidArgument: return std::errc::invalid_argument;
      case StatusCode::kUnavailable: return std::errc::connection_refused;
      default: return std::error_condition(value, *this);
    }
  }
};

Status EmptyHandle() {
  return Status(StatusCode::kInvalidArgument, "empty (default-constructed or moved-from) lock handle");
}

client::Deadline DeadlineAfter(milliseconds timeout) {
  if (timeout >= kForever) return std::nullopt;
  return client::Clock::now() + timeout;
}

}  // namespace

const std::error_category& StatusCategory() {
  static const TumblerCategory category;
  return category;
}

std::error_code MakeErrorCode(StatusCode code) {
  return std::error_code(static_cast<int>(code), StatusCategory());
}

LockError::LockError(Status status)
    : std::system_error(MakeErrorCode(status.code()), status.ToString()),
      status_(std::move(status)) {}

bool Mutex::ThrowIfError(const Result<bool>& result) {
  if (!result.ok()) throw LockError(result.status());
  return result.value();
}

void Mutex::ThrowIfError(const Status& status) {
  if (!status.ok()) throw LockError(status);
}

// --- Mutex ----------------------------------------------------------------------

Status Mutex::Lock() {
  if (!state_) return EmptyHandle();
  Result<bool> result = state_->Acquire(name_, LockMode::kExclusive, std::nullopt);
  return result.ok() ? Status::Ok() : result.status();
}

Result<bool> Mutex::TryLock() {
  if (!state_) return EmptyHandle();
  return state_->Acquire(name_, LockMode::kExclusive, client::Clock::now());
}

Result<bool> Mutex::TryLockFor(milliseconds timeout) {
  if (!state_) return EmptyHandle();
  return state_->Acquire(name_, LockMode::kExclusive, DeadlineAfter(timeout));
}

Result<bool> Mutex::TryLockUntil(std::chrono::steady_clock::time_point deadline) {
  if (!state_) return EmptyHandle();
  return state_->Acquire(name_, LockMode::kExclusive, deadline);
}

Status Mutex::Unlock() {
  if (!state_) return EmptyHandle();
  return state_->Release(name_, LockMode::kExclusive, nullptr);
}

uint64_t Mutex::token() const { return state_ ? state_->Token(name_) : 0; }

Result<uint64_t> Mutex::FencingToken() const {
  if (!state_) return EmptyHandle();
  if (!state_->info().Supports(Property::kFencing)) {
    return Status(StatusCode::kUnsupported, std::string(state_->info().scheme) +
                                                ":// locks have no fencing token");
  }
  uint64_t token = state_->Token(name_);
  if (token == 0) {
    return Status(StatusCode::kNotHeld, "the calling thread does not hold \"" + name_ + "\"");
  }
  return token;
}

uint32_t Mutex::hold_count() const { return state_ ? state_->HoldCount(name_) : 0; }

void Mutex::lock() { ThrowIfError(Lock()); }

bool Mutex::try_lock() { return ThrowIfError(TryLock()); }

void Mutex::unlock() { UnlockOrThrow(/*shared=*/false); }

void Mutex::UnlockOrThrow(bool shared) {
  if (!state_) throw LockError(EmptyHandle());
  bool precondition_failed = false;
  Status status = state_->Release(name_, shared ? LockMode::kShared : LockMode::kExclusive,
                                  &precondition_failed);
  // Only the caller's own error throws: unlock() runs in destructors, and a
  // release the server did not confirm is retried in the background.
  if (precondition_failed) throw LockError(status);
}

// --- SharedMutex ----------------------------------------------------------------

Status SharedMutex::LockShared() {
  if (!state_) return EmptyHandle();
  Result<bool> result = state_->Acquire(name_, LockMode::kShared, std::nullopt);
  return result.ok() ? Status::Ok() : result.status();
}

Result<bool> SharedMutex::TryLockShared() {
  if (!state_) return EmptyHandle();
  return state_->Acquire(name_, LockMode::kShared, client::Clock::now());
}

Result<bool> SharedMutex::TryLockSharedFor(milliseconds timeout) {
  if (!state_) return EmptyHandle();
  return state_->Acquire(name_, LockMode::kShared, DeadlineAfter(timeout));
}

Result<bool> SharedMutex::TryLockSharedUntil(std::chrono::steady_clock::time_point deadline) {
  if (!state_) return EmptyHandle();
  return state_->Acquire(name_, LockMode::kShared, deadline);
}

Status SharedMutex::UnlockShared() {
  if (!state_) return EmptyHandle();
  return state_->Release(name_, LockMode::kShared, nullptr);
}

void SharedMutex::lock_shared() { ThrowIfError(LockShared()); }

bool SharedMutex::try_lock_shared() { return ThrowIfError(TryLockShared()); }

void SharedMutex::unlock_shared() { UnlockOrThrow(/*shared=*/true); }

}  // namespace tumbler

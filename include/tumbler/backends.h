// What each lock backend of the client library can and cannot guarantee.
//
// tumbler::Client::Connect picks a backend by the URL's scheme: tumbler://
// (tumblerd), redis://, redlock://, etcd://, zookeeper://, postgres://,
// mysql://. Every backend offers the same Mutex API; what a backend cannot
// provide is answered with kUnsupported, never faked. Each backend declares
// its capabilities here, in code, and docs/backends.md is generated from these
// declarations (`tumbler backends --markdown`), so the table cannot drift from
// the code.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace tumbler {

// The rows of the capability matrix: the properties of DESIGN.md's table.
enum class Property : uint8_t {
  kMutualExclusion,   // at most one exclusive holder at a time
  kCrashRelease,      // a crashed holder's locks are released (lease / session)
  kRenewal,           // long critical sections: the watchdog renews the lease
  kBlocking,          // lock() / try_lock_for() wait without busy polling
  kTryLock,           // try_lock(): a non-blocking acquire
  kReentrancy,        // one thread may lock again what it holds
  kFairness,          // waiters are granted in FIFO order
  kFencing,           // token(): a number that increases with every grant of a lock
  kSharedMode,        // SharedMutex: reader-writer locks
  kNoHerd,            // a release wakes only the waiter it grants
  kDeadlockDetection, // a wait that would close a cycle fails instead of hanging
  kHighAvailability,  // survives the loss of a server (replication)
  kDurability,        // an acknowledged grant survives a server crash
};
inline constexpr int kPropertyCount = 13;

enum class Support : uint8_t {
  kYes,      // provided, as the property's row describes
  kPartial,  // provided with a limit the note states
  kNo,       // not provided; calls that need it return kUnsupported
};

struct Capability {
  Property property;
  Support support;
  // One sentence: how the backend provides it, or why not. Markdown allowed.
  std::string_view note;
};

struct BackendInfo {
  std::string_view scheme;  // "redis"
  std::string_view name;    // "Redis (single instance)"
  std::string_view url;     // the URL form, "redis://host:port[/db]"
  // One entry per Property, in Property order (checked by a test).
  std::span<const Capability> capabilities;

  // The entry for `property`.
  const Capability& Get(Property property) const {
    return capabilities[static_cast<size_t>(property)];
  }
  bool Supports(Property property) const { return Get(property).support != Support::kNo; }
};

// Every backend built into this client, tumbler:// first.
std::span<const BackendInfo> Backends();
// The backend of a URL scheme ("redis"), or nullptr.
const BackendInfo* FindBackend(std::string_view scheme);
// The row label of a property ("fencing tokens").
std::string_view PropertyName(Property property);

}  // namespace tumbler

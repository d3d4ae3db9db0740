// The client's local record of which locks each thread holds, and how that
// compares with what the server records for the same holder.
//
// Reentrancy is counted here: only a thread's first acquire of a lock sends
// LOCK and only its last release sends UNLOCK, so on the server a holder's
// count is 1 whenever the thread holds the lock ("target" below). Nested
// lock()/unlock() pairs cost no round trip and cannot fail on the network.
//
// The server's count can drift from the target when a request's outcome is
// unknown (the connection broke after the LOCK or UNLOCK was sent): then the
// entry's server count is "unknown" until an INSPECT or a reply tells it, and
// any surplus (server count above the target) is a release the client still
// owes and sends later (a "repair"). See docs/client.md "Failures".
//
// Every operation on one holder (lock name, owner tag) is serialised by a busy
// flag: Begin* marks the entry busy, End() clears it. The class is pure: no
// I/O, no clock, no locking; the caller (ClientState) holds its mutex around
// every call.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tumbler::client {

enum class LockMode : uint8_t { kExclusive, kShared };

class HoldTable {
 public:
  // (lock name, owner tag).
  using Key = std::pair<std::string, std::string>;

  enum class Step : uint8_t {
    kDone,       // done locally (nested acquire or release); no request needed
    kAsk,        // the caller sends LOCK / UNLOCK; the entry is busy until End()
    kBusy,       // another operation on this holder is under way: wait, retry
    kWrongMode,  // acquire: the holder holds the lock in the other mode
    kNotHeld,    // release: the holder does not hold the lock in this mode
    kLimit,      // acquire: the nested count is at limits::kHoldCountMax
  };

  // Acquire of `key` in `mode`. When the holder already holds it in `mode`,
  // counts one more hold (kDone).
  Step BeginAcquire(const Key& key, LockMode mode);
  // The server granted the acquire begun with kAsk: the holder now holds the
  // lock once locally, with `token`; `server_count` is the reply's hold count.
  void Granted(const Key& key, LockMode mode, uint64_t token, uint32_t server_count);

  // Release of `key` held in `mode`. An inner release is done locally (kDone);
  // the last one drops the local count to 0 and returns kAsk.
  Step BeginRelease(const Key& key, LockMode mode);

  // The server's count for the holder is `server_count` (a LOCK, UNLOCK or
  // INSPECT reply; NOTHELD and null LOCK replies mean 0). Busy entries only.
  void Observe(const Key& key, uint32_t server_count);
  // A request on the holder may or may not have been applied. Busy entries only.
  void MarkUnknown(const Key& key);
  // How many releases the server is owed for the holder: its count minus the
  // target (0 if none), or nullopt while its count is unknown.
  std::optional<uint32_t> Excess(const Key& key) const;
  // Ends the operation begun by BeginAcquire/BeginRelease/BeginRepairs.
  void End(const Key& key);

  // Marks busy and returns every idle entry that needs a repair.
  std::vector<Key> BeginRepairs();
  // True if some entry needs a repair (busy or not).
  bool RepairsPending() const;

  // The token of the holder's current hold, or 0 if it holds nothing locally.
  uint64_t Token(const Key& key) const;
  // The holder's local hold count (0 if none).
  uint32_t Count(const Key& key) const;
  // Entries (held, busy, or owed a repair): for tests.
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    uint32_t local = 0;                      // holds the thread believes it has
    std::optional<uint32_t> server = 0;      // the server's count; nullopt: unknown
    uint64_t token = 0;
    LockMode mode = LockMode::kExclusive;    // meaningful while local > 0
    bool busy = false;
  };

  static uint32_t Target(const Entry& e) { return e.local > 0 ? 1 : 0; }
  static bool NeedsRepair(const Entry& e) {
    return !e.server.has_value() || *e.server > Target(e);
  }
  Entry& BusyEntry(const Key& key);

  std::map<Key, Entry> entries_;
};

}  // namespace tumbler::client

// Snapshot encoding and decoding. The format is documented byte by byte in
// docs/snapshot-format.md; keep the two in step.
//
// Encoding walks sessions by id and locks by name, so the same state always
// gives the same bytes. Decoding builds a fresh machine and checks everything a
// corrupt or hostile snapshot could get wrong -- lengths, ranges, order,
// references between sessions, holders and waiters, and the invariants the
// commands maintain -- so that a machine restored from a snapshot is one the
// commands could have produced.
#include <algorithm>
#include <cassert>
#include <string>
#include <utility>
#include <vector>

#include "core/batch_codec.h"
#include "core/state_machine_internal.h"
#include "core/wire.h"

namespace tumbler::core::internal {
namespace {

// 2 added the announced leader (node id, client address) after the locks;
// version 1 snapshots are still read (no leader announced).
constexpr uint8_t kSnapshotVersion = 2;
constexpr uint8_t kSnapshotVersionMin = 1;
constexpr uint8_t kModeFree = 0;
constexpr uint8_t kModeExclusive = 1;
constexpr uint8_t kModeShared = 2;
// Smallest encodings, to bound a count by the bytes left before reserving.
constexpr size_t kSessionBytesMin = 8 + 4 + 2;
constexpr size_t kLockBytesMin = 2 + 1 + 8 + 1 + 4 + 4;
constexpr size_t kHolderBytesMin = 8 + 2 + 4 + 8;
constexpr size_t kWaiterBytesMin = 8 + 8 + 2 + 1;

Status Corrupt(const std::string& what) {
  return Status(StatusCode::kErr, "snapshot: " + what);
}

std::string LockLabel(std::string_view name) {
  std::string out = "lock ";
  AppendQuoted(name, &out);
  return out;
}

class Decoder {
 public:
  Decoder(std::string_view body, uint8_t version, StateMachineImpl* m)
      : r_(body), version_(version), m_(*m) {}

  Status Run() {
    Status st = ReadHeader();
    if (st.ok()) st = ReadSessions();
    if (st.ok()) st = ReadLocks();
    if (st.ok()) st = CheckSessions();
    if (st.ok() && version_ >= 2) st = ReadLeader();
    if (st.ok() && r_.remaining() != 0) st = Corrupt("trailing bytes after the locks");
    return st;
  }

 private:
  Status Truncated() const {
    return Corrupt(r_.too_long() ? "a string is longer than its bound" : "truncated");
  }

  Status ReadHeader() {
    r_.U64(&m_.log_time_ms);
    r_.U64(&m_.last_token);
    r_.U64(&m_.last_session_id);
    r_.U64(&m_.last_wait_id);
    if (r_.failed()) return Truncated();
    if (m_.last_token > limits::kSnapshotCounterMax ||
        m_.last_session_id > limits::kSnapshotCounterMax ||
        m_.last_wait_id > limits::kSnapshotCounterMax) {
      return Corrupt("a counter is out of range");
    }
    return Status::Ok();
  }

  Status ReadLeader() {
    std::string_view address;
    r_.U64(&m_.announced_node_id);
    if (!r_.Str16(&address, limits::kAddressBytesMax)) return Truncated();
    m_.announced_address.assign(address);
    return Status::Ok();
  }

  Status ReadSessions() {
    uint32_t count;
    if (!r_.U32(&count)) return Truncated();
    if (count > limits::kSessionsMax) return Corrupt("too many sessions");
    if (count > r_.remaining() / kSessionBytesMin) return Truncated();
    uint64_t prev_id = 0;
    for (uint32_t i = 0; i < count; ++i) {
      uint64_t id;
      uint32_t ttl_ms;
      std::string_view label;
      r_.U64(&id);
      r_.U32(&ttl_ms);
      if (!r_.Str16(&label, limits::kSessionLabelBytesMax)) return Truncated();
      if (id <= prev_id) return Corrupt("session ids not ascending");
      if (id > m_.last_session_id) return Corrupt("session id beyond the id counter");
      if (ttl_ms < limits::kSessionTtlMsMin || ttl_ms > limits::kSessionTtlMsMax) {
        return Corrupt("session ttl out of range");
      }
      prev_id = id;
      auto it = m_.sessions.emplace_hint(m_.sessions.end(), id, Session());
      it->second.id = id;
      it->second.ttl_ms = ttl_ms;
      it->second.label.assign(label);
    }
    return Status::Ok();
  }

  Session* FindSession(uint64_t id) {
    if (last_session_ != nullptr && last_session_->id == id) return last_session_;
    auto it = m_.sessions.find(id);
    if (it == m_.sessions.end()) return nullptr;
    last_session_ = &it->second;
    return last_session_;
  }

  Status ReadLocks() {
    uint32_t count;
    if (!r_.U32(&count)) return Truncated();
    if (count > limits::kLocksMax) return Corrupt("too many locks");
    if (count > r_.remaining() / kLockBytesMin) return Truncated();
    const std::string* prev_name = nullptr;
    for (uint32_t i = 0; i < count; ++i) {
      std::string_view name;
      if (!r_.Str16(&name, limits::kLockNameBytesMax)) return Truncated();
      if (name.empty()) return Corrupt("empty lock name");
      if (prev_name != nullptr && name <= *prev_name) return Corrupt("lock names not ascending");
      auto it = m_.locks.emplace_hint(m_.locks.end(), std::string(name), Lock());
      Lock* lock = &it->second;
      lock->name = &it->first;
      prev_name = lock->name;
      Status st = ReadLock(lock);
      if (!st.ok()) return st;
    }
    return Status::Ok();
  }

  Status ReadLock(Lock* lock) {
    uint64_t delay_until_ms;
    uint8_t mode;
    r_.U64(&delay_until_ms);
    if (!r_.U8(&mode)) return Truncated();
    if (mode > kModeShared) return Corrupt(LockLabel(*lock->name) + ": bad mode");
    if (delay_until_ms != 0 && delay_until_ms <= m_.log_time_ms) {
      return Corrupt(LockLabel(*lock->name) + ": lock-delay already over");
    }
    Status st = ReadHolders(lock, mode);
    if (st.ok()) st = ReadWaiters(lock);
    if (st.ok()) st = CheckLock(*lock, delay_until_ms);
    if (!st.ok()) return st;
    if (delay_until_ms != 0) StartDelay(m_, lock, delay_until_ms);
    return Status::Ok();
  }

  Status ReadHolders(Lock* lock, uint8_t mode) {
    uint32_t count;
    if (!r_.U32(&count)) return Truncated();
    if (count > r_.remaining() / kHolderBytesMin) return Truncated();
    if ((count == 0) != (mode == kModeFree)) {
      return Corrupt(LockLabel(*lock->name) + ": mode does not match holders");
    }
    if (count > 1 && mode != kModeShared) {
      return Corrupt(LockLabel(*lock->name) + ": several exclusive holders");
    }
    uint64_t prev_token = 0;
    for (uint32_t i = 0; i < count; ++i) {
      uint64_t session_id;
      std::string_view owner;
      uint32_t hold_count;
      uint64_t token;
      r_.U64(&session_id);
      r_.Str16(&owner, limits::kOwnerBytesMax);
      r_.U32(&hold_count);
      if (!r_.U64(&token)) return Truncated();
      Session* s = FindSession(session_id);
      if (s == nullptr) return Corrupt(LockLabel(*lock->name) + ": holder without session");
      if (hold_count == 0 || hold_count > limits::kHoldCountMax) {
        return Corrupt(LockLabel(*lock->name) + ": hold count out of range");
      }
      if (token <= prev_token || token > m_.last_token) {
        return Corrupt(LockLabel(*lock->name) + ": holder tokens out of order or range");
      }
      prev_token = token;
      Holder& h = AddHolder(m_, lock, s, std::string(owner), mode == kModeShared, token);
      h.count = hold_count;
    }
    return Status::Ok();
  }

  Status ReadWaiters(Lock* lock) {
    uint32_t count;
    if (!r_.U32(&count)) return Truncated();
    if (count > limits::kWaitersPerLockMax) {
      return Corrupt(LockLabel(*lock->name) + ": too many waiters");
    }
    if (count > r_.remaining() / kWaiterBytesMin) return Truncated();
    uint64_t prev_id = 0;
    for (uint32_t i = 0; i < count; ++i) {
      uint64_t wait_id;
      uint64_t session_id;
      std::string_view owner;
      uint8_t shared;
      r_.U64(&wait_id);
      r_.U64(&session_id);
      r_.Str16(&owner, limits::kOwnerBytesMax);
      if (!r_.U8(&shared)) return Truncated();
      if (shared > 1) return Corrupt(LockLabel(*lock->name) + ": bad waiter mode");
      // Waiters join at the tail with a fresh id, so a queue is in id order.
      if (wait_id <= prev_id || wait_id > m_.last_wait_id) {
        return Corrupt(LockLabel(*lock->name) + ": wait ids out of order or range");
      }
      prev_id = wait_id;
      Session* s = FindSession(session_id);
      if (s == nullptr) return Corrupt(LockLabel(*lock->name) + ": waiter without session");
      if (AddWaiter(m_, lock, s, owner, shared == 1, wait_id) == nullptr) {
        return Corrupt("wait id " + std::to_string(wait_id) + " used twice");
      }
    }
    return Status::Ok();
  }

  // The invariants the commands keep for every lock between commands.
  Status CheckLock(const Lock& lock, uint64_t delay_until_ms) {
    const std::string label = LockLabel(*lock.name);
    uint32_t waiters = lock.waiter_count();
    if (lock.holders.empty() && waiters == 0 && delay_until_ms == 0) {
      return Corrupt(label + ": free, with no waiters and no lock-delay");
    }
    if (delay_until_ms != 0 && !lock.holders.empty()) {
      return Corrupt(label + ": held during lock-delay");
    }
    if (delay_until_ms == 0 && waiters > 0) {
      const Waiter* head = lock.queue->head;
      if (lock.holders.empty() || (head->shared && lock.holders.shared())) {
        return Corrupt(label + ": the head of the queue could be granted");
      }
    }
    return CheckHolderNodesUnique(lock, label);
  }

  // A holder (session, owner) holds a lock at most once and never both holds
  // and waits on it, nor waits twice.
  Status CheckHolderNodesUnique(const Lock& lock, const std::string& label) {
    if (lock.holders.size() + lock.waiter_count() <= 1) return Status::Ok();
    nodes_.clear();
    lock.holders.ForEach(
        [this](const Holder& h) { nodes_.emplace_back(h.session->id, h.owner); });
    for (const Waiter* w = lock.queue ? lock.queue->head : nullptr; w != nullptr; w = w->next) {
      nodes_.emplace_back(w->session->id, w->owner);
    }
    std::sort(nodes_.begin(), nodes_.end());
    if (std::adjacent_find(nodes_.begin(), nodes_.end()) != nodes_.end()) {
      return Corrupt(label + ": a holder appears twice");
    }
    return Status::Ok();
  }

  Status CheckSessions() {
    for (const auto& [id, s] : m_.sessions) {
      if (s.holds_and_waits() > limits::kHoldsPerSessionMax) {
        return Corrupt("session " + std::to_string(id) + ": too many holds and waits");
      }
    }
    return Status::Ok();
  }

  wire::Reader r_;
  uint8_t version_;
  StateMachineImpl& m_;
  Session* last_session_ = nullptr;
  std::vector<std::pair<uint64_t, std::string_view>> nodes_;
};

}  // namespace

void EncodeSnapshotImpl(const StateMachineImpl& m, std::string* out) {
  using namespace wire;  // NOLINT: the Put* helpers
  const size_t start = out->size();
  out->reserve(start + 64 + m.sessions.size() * 32 + m.locks.size() * 56 +
               m.waits.size() * 32);
  PutU8(out, kSnapshotVersion);
  PutU64(out, m.log_time_ms);
  PutU64(out, m.last_token);
  PutU64(out, m.last_session_id);
  PutU64(out, m.last_wait_id);
  PutU32(out, static_cast<uint32_t>(m.sessions.size()));
  for (const auto& [id, s] : m.sessions) {
    PutU64(out, id);
    PutU32(out, s.ttl_ms);
    PutStr16(out, s.label);
  }
  PutU32(out, static_cast<uint32_t>(m.locks.size()));
  for (const auto& [name, lock] : m.locks) {
    PutStr16(out, name);
    PutU64(out, lock.delay_until_ms());
    uint8_t mode = lock.holders.empty()   ? kModeFree
                   : lock.holders.shared() ? kModeShared
                                           : kModeExclusive;
    PutU8(out, mode);
    PutU32(out, lock.holders.size());
    lock.holders.ForEach([out](const Holder& h) {
      PutU64(out, h.session->id);
      PutStr16(out, h.owner);
      PutU32(out, h.count);
      PutU64(out, h.token);
    });
    PutU32(out, lock.waiter_count());
    for (const Waiter* w = lock.queue ? lock.queue->head : nullptr; w != nullptr; w = w->next) {
      PutU64(out, w->wait_id);
      PutU64(out, w->session->id);
      PutStr16(out, w->owner);
      PutU8(out, w->shared ? 1 : 0);
    }
  }
  PutU64(out, m.announced_node_id);
  PutStr16(out, m.announced_address);
  PutU32(out, Crc32c(std::string_view(*out).substr(start)));
}

Status DecodeSnapshotImpl(std::string_view in, StateMachineImpl* fresh) {
  assert(fresh->sessions.empty() && fresh->locks.empty());
  if (in.size() < 1 + 4) return Corrupt("truncated");
  auto version = static_cast<uint8_t>(in[0]);
  if (version < kSnapshotVersionMin || version > kSnapshotVersion) {
    return Corrupt("unsupported version " + std::to_string(version));
  }
  std::string_view covered = in.substr(0, in.size() - 4);
  wire::Reader crc_reader(in.substr(in.size() - 4));
  uint32_t stored_crc = 0;
  bool read = crc_reader.U32(&stored_crc);
  assert(read);
  (void)read;
  if (Crc32c(covered) != stored_crc) return Corrupt("checksum mismatch");
  return Decoder(covered.substr(1), version, fresh).Run();
}

}  // namespace tumbler::core::internal

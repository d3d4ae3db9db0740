// Internal representation of the lock state machine, shared by the files that
// implement it (state_machine.cc: commands and queries, deadlock.cc: the
// wait-for walk, snapshot.cc: encode/decode). Not part of the module's API.
//
// Memory is the main design force here (1,000,000 held locks must cost well
// under 250 bytes each, indexes included), so the common case -- a lock held
// by one holder, nobody waiting -- is one std::map node: the name, a Lock with
// its single holder inline, and one pointer slot in the session's hold vector.
// Waiters and lock-delay are rare and live out of line (LockQueue).
//
// Determinism: everything whose order can be observed (grants, tokens, effects,
// snapshots, listings, which deadlock cycle is reported) is ordered by lock
// name, session id, wait id or token -- never by pointer or hash.
#pragma once

#include <cassert>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/state_machine.h"

namespace tumbler::core::internal {

struct Session;
struct Lock;

// One (session, owner) pair holding one lock.
struct Holder {
  Session* session = nullptr;  // borrowed: the session outlives its holds
  uint64_t token = 0;
  uint32_t count = 0;          // reentrant depth, 1..limits::kHoldCountMax
  uint32_t session_slot = 0;   // index of this hold in session->holds
  std::string owner;
};

// The holders of one lock in grant order (= token order). One holder is kept
// inline; a shared lock with more holders keeps the rest in a map by token, so
// that finding and removing one of 100,000 readers stays logarithmic.
// Invariant: first_ has the smallest token.
class HolderList {
 public:
  uint32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Mode of the current holders; meaningful only when not empty.
  bool shared() const { return shared_; }
  void set_shared(bool shared) { shared_ = shared; }

  // The holder with this token, or nullptr.
  Holder* Find(uint64_t token) {
    if (size_ == 0) return nullptr;
    if (first_.token == token) return &first_;
    if (!rest_) return nullptr;
    auto it = rest_->find(token);
    return it == rest_->end() ? nullptr : &it->second;
  }
  // The newest holder; the list must not be empty.
  const Holder& last() const {
    assert(size_ > 0);
    return rest_ ? rest_->rbegin()->second : first_;
  }
  // The first holder in grant order for which pred(holder) is true, or nullptr.
  template <typename Pred>
  Holder* FindIf(Pred&& pred) {
    if (size_ == 0) return nullptr;
    if (pred(first_)) return &first_;
    if (rest_) {
      for (auto& [token, h] : *rest_) {
        if (pred(h)) return &h;
      }
    }
    return nullptr;
  }
  template <typename Pred>
  const Holder* FindIf(Pred&& pred) const {
    return const_cast<HolderList*>(this)->FindIf(
        [&pred](const Holder& h) { return pred(h); });
  }
  template <typename F>
  void ForEach(F&& f) const {
    FindIf([&f](const Holder& h) {
      f(h);
      return false;
    });
  }

  // Appends a holder whose token is larger than every current one.
  Holder& Append(Holder holder) {
    if (size_ == 0) {
      first_ = std::move(holder);
      size_ = 1;
      return first_;
    }
    assert(holder.token > last().token);
    if (!rest_) rest_ = std::make_unique<std::map<uint64_t, Holder>>();
    uint64_t token = holder.token;
    ++size_;
    return rest_->emplace_hint(rest_->end(), token, std::move(holder))->second;
  }
  // Removes the holder with this token (which must exist), keeping grant order.
  void Remove(uint64_t token) {
    assert(size_ > 0);
    if (first_.token == token) {
      if (rest_) {
        first_ = std::move(rest_->begin()->second);
        rest_->erase(rest_->begin());
      } else {
        first_ = Holder();
      }
    } else {
      assert(rest_);
      size_t erased = rest_->erase(token);
      assert(erased == 1);
      (void)erased;
    }
    --size_;
    if (size_ <= 1) rest_.reset();  // a lock back to one holder costs no map
  }

 private:
  Holder first_;
  std::unique_ptr<std::map<uint64_t, Holder>> rest_;  // holders 2.. by token
  uint32_t size_ = 0;
  bool shared_ = false;
};

// One queued request. Lives in Impl::waits (keyed by wait id); linked into its
// lock's FIFO queue and indexed by its session.
struct Waiter {
  uint64_t wait_id = 0;
  Session* session = nullptr;  // borrowed
  Lock* lock = nullptr;        // borrowed
  std::string owner;
  Waiter* prev = nullptr;      // toward the head of lock->queue
  Waiter* next = nullptr;
  bool shared = false;
  // Deadlock walk marks (deadlock.cc): equal to Impl::walk_epoch when this
  // wait has been expanded / when it has been reached as "a waiter ahead".
  uint64_t expanded_epoch = 0;
  uint64_t ahead_epoch = 0;
};

// The rare parts of a lock: its queue and its lock-delay. Present while the
// lock has waiters or a lock-delay.
struct LockQueue {
  Waiter* head = nullptr;
  Waiter* tail = nullptr;
  uint32_t size = 0;
  uint64_t delay_until_ms = 0;   // 0: no lock-delay running
  uint64_t holders_epoch = 0;    // deadlock walk: holders already reached
};

struct Lock {
  const std::string* name = nullptr;  // the key of this lock's map node
  HolderList holders;
  std::unique_ptr<LockQueue> queue;   // null: no waiters and no lock-delay

  uint32_t waiter_count() const { return queue ? queue->size : 0; }
  uint64_t delay_until_ms() const { return queue ? queue->delay_until_ms : 0; }
  // A lock that is free, has no waiters and no lock-delay ceases to exist.
  bool Unused() const { return holders.empty() && !queue; }
};

// A session's waits, ordered by (owner, wait id): the deadlock walk finds the
// waits of one holder (session, owner) with equal_range(owner), and the order
// does not depend on history, so a restored machine walks as the original.
struct WaiterByOwner {
  using is_transparent = void;
  bool operator()(const Waiter* a, const Waiter* b) const {
    if (a->owner != b->owner) return a->owner < b->owner;
    return a->wait_id < b->wait_id;
  }
  bool operator()(const Waiter* a, std::string_view owner) const {
    return a->owner < owner;
  }
  bool operator()(std::string_view owner, const Waiter* b) const {
    return owner < b->owner;
  }
};

// One hold of a session: the lock and the holder's token, which finds the
// holder within the lock (HolderList::Find).
struct HoldRef {
  Lock* lock;
  uint64_t token;
};

struct Session {
  uint64_t id = 0;
  uint32_t ttl_ms = 0;
  std::string label;
  // One entry per (lock, owner) this session holds; Holder::session_slot is
  // the index. Unordered (swap-remove); anything observable sorts explicitly.
  std::vector<HoldRef> holds;
  std::set<Waiter*, WaiterByOwner> waits;

  size_t holds_and_waits() const { return holds.size() + waits.size(); }
};

// Lock-delay index: by deadline, then name, so that delays ending together are
// served in a deterministic order.
struct DelayOrder {
  bool operator()(const Lock* a, const Lock* b) const {
    uint64_t da = a->queue->delay_until_ms;
    uint64_t db = b->queue->delay_until_ms;
    if (da != db) return da < db;
    return *a->name < *b->name;
  }
};

using LockMap = std::map<std::string, Lock, std::less<>>;

// One step of the deadlock walk (deadlock.cc): a holder (session, owner) that
// waits for `lock`, reached from frame `parent`.
struct WalkFrame {
  Lock* lock = nullptr;
  Waiter* waiter = nullptr;  // the holder's wait; null for the request itself
  int64_t parent = -1;       // index into walk frames; -1 for the request
  bool via_holder = false;   // reached as a holder of the parent's lock (else:
                             // as a waiter ahead of the parent in its queue)
};

struct StateMachineImpl {
  explicit StateMachineImpl(const Bounds& b) : bounds(b) {}

  Bounds bounds;
  uint64_t log_time_ms = 0;
  uint64_t last_token = 0;       // tokens start at 1
  uint64_t last_session_id = 0;  // session ids start at 1
  uint64_t last_wait_id = 0;     // wait ids start at 1
  uint64_t holds_count = 0;      // number of Holder entries over all locks
  uint64_t announced_node_id = 0;  // kAnnounce: the last leader that named itself
  std::string announced_address;

  std::map<uint64_t, Session> sessions;
  LockMap locks;
  std::map<uint64_t, Waiter> waits;  // every queued wait, by wait id
  std::set<Lock*, DelayOrder> delayed;

  // Deadlock walk state (deadlock.cc).
  uint64_t walk_epoch = 0;
  std::vector<WalkFrame> walk_frames;

  // Scratch for Close/Expire, kept to reuse its memory.
  std::vector<Lock*> touched;
};

// state_machine.cc: building blocks snapshot restore shares with the commands.
// Adds a holder with count 1 at the end of lock's holders (and to its session).
Holder& AddHolder(StateMachineImpl& m, Lock* lock, Session* s, std::string owner,
                  bool shared, uint64_t token);
// Queues a waiter at the tail of lock's queue; nullptr if `wait_id` is taken.
Waiter* AddWaiter(StateMachineImpl& m, Lock* lock, Session* s, std::string_view owner,
                  bool shared, uint64_t wait_id);
// Puts a lock without holders into lock-delay until `until_ms` (> 0).
void StartDelay(StateMachineImpl& m, Lock* lock, uint64_t until_ms);

// deadlock.cc: OK if `session`/`owner` may queue on `lock`; DEADLOCK naming the
// cycle if that wait would close one; LIMIT if the walk would exceed
// limits::kDeadlockVisitMax edges.
Status CheckDeadlock(StateMachineImpl& m, Session* session, std::string_view owner,
                     Lock* lock);

// Appends `bytes` to *out in the quoted, escaped form used in error messages:
// printable ASCII as is, `"` and `\` and every other byte as \xNN.
void AppendQuoted(std::string_view bytes, std::string* out);

// snapshot.cc
void EncodeSnapshotImpl(const StateMachineImpl& m, std::string* out);
Status DecodeSnapshotImpl(std::string_view in, StateMachineImpl* fresh);

}  // namespace tumbler::core::internal

// Commands and queries of the lock state machine. Semantics: docs/commands.md.
// Representation: state_machine_internal.h. Deadlock walk: deadlock.cc.
// Snapshots: snapshot.cc.
#include "core/state_machine.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <string>
#include <utility>

#include "core/state_machine_internal.h"

namespace tumbler::core {

struct StateMachine::Impl : internal::StateMachineImpl {
  using StateMachineImpl::StateMachineImpl;
};

namespace {

using internal::Holder;
using internal::HoldRef;
using internal::Lock;
using internal::LockQueue;
using internal::Session;
using internal::StateMachineImpl;
using internal::Waiter;

CommandResult Fail(StatusCode code, std::string message) {
  CommandResult r;
  r.status = Status(code, std::move(message));
  return r;
}

std::string Quoted(std::string_view bytes) {
  std::string out;
  internal::AppendQuoted(bytes, &out);
  return out;
}

// `session 3 owner "a"`: how messages name a holder.
std::string HolderName(uint64_t session, std::string_view owner) {
  return "session " + std::to_string(session) + " owner " + Quoted(owner);
}

CommandResult NoSession(uint64_t id) {
  return Fail(StatusCode::kNoSession, "session " + std::to_string(id) + " does not exist");
}

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max()
                                                      : a + b;
}

// --- Holders ------------------------------------------------------------------

Session* FindSession(StateMachineImpl& m, uint64_t id) {
  auto it = m.sessions.find(id);
  return it == m.sessions.end() ? nullptr : &it->second;
}

// The holder (s, owner) of `lock`, or nullptr. Scans whichever is shorter: the
// lock's holders or the session's holds (a lock shared by 100,000 readers).
Holder* FindHolder(Lock& lock, const Session* s, std::string_view owner) {
  constexpr uint32_t kScanHoldersMax = 8;
  if (lock.holders.size() <= kScanHoldersMax || lock.holders.size() <= s->holds.size()) {
    return lock.holders.FindIf(
        [&](const Holder& h) { return h.session == s && h.owner == owner; });
  }
  for (const HoldRef& ref : s->holds) {
    if (ref.lock != &lock) continue;
    Holder* h = lock.holders.Find(ref.token);
    assert(h != nullptr);
    if (h->owner == owner) return h;
  }
  return nullptr;
}

Holder& HolderOf(const HoldRef& ref) {
  Holder* h = ref.lock->holders.Find(ref.token);
  assert(h != nullptr && "session hold without its holder");
  return *h;
}

uint64_t NextToken(StateMachineImpl& m) {
  assert(m.last_token < std::numeric_limits<uint64_t>::max());
  return ++m.last_token;
}

}  // namespace

namespace internal {

Holder& AddHolder(StateMachineImpl& m, Lock* lock, Session* s, std::string owner,
                  bool shared, uint64_t token) {
  if (lock->holders.empty()) lock->holders.set_shared(shared);
  assert(lock->holders.shared() == shared);
  assert(lock->holders.empty() || shared);
  Holder h;
  h.session = s;
  h.token = token;
  h.count = 1;
  h.session_slot = static_cast<uint32_t>(s->holds.size());
  h.owner = std::move(owner);
  Holder& added = lock->holders.Append(std::move(h));
  s->holds.push_back(HoldRef{lock, token});
  ++m.holds_count;
  return added;
}

Waiter* AddWaiter(StateMachineImpl& m, Lock* lock, Session* s, std::string_view owner,
                  bool shared, uint64_t wait_id) {
  auto [it, inserted] = m.waits.try_emplace(wait_id);
  if (!inserted) return nullptr;
  Waiter* w = &it->second;
  w->wait_id = wait_id;
  w->session = s;
  w->lock = lock;
  w->owner.assign(owner);
  w->shared = shared;
  if (!lock->queue) lock->queue = std::make_unique<LockQueue>();
  LockQueue* q = lock->queue.get();
  w->prev = q->tail;
  if (q->tail != nullptr) {
    q->tail->next = w;
  } else {
    q->head = w;
  }
  q->tail = w;
  ++q->size;
  s->waits.insert(w);
  return w;
}

void StartDelay(StateMachineImpl& m, Lock* lock, uint64_t until_ms) {
  assert(lock->holders.empty());
  assert(until_ms != 0);
  if (!lock->queue) lock->queue = std::make_unique<LockQueue>();
  assert(lock->queue->delay_until_ms == 0);
  lock->queue->delay_until_ms = until_ms;
  bool inserted = m.delayed.insert(lock).second;
  assert(inserted);
  (void)inserted;
}

}  // namespace internal

namespace {

using internal::AddHolder;
using internal::AddWaiter;
using internal::StartDelay;

// Drops entry `slot` of s->holds (swap-remove) and fixes the slot of the hold
// that moved into its place.
void RemoveSessionHold(Session* s, uint32_t slot) {
  assert(slot < s->holds.size());
  auto last = static_cast<uint32_t>(s->holds.size() - 1);
  if (slot != last) {
    s->holds[slot] = s->holds[last];
    HolderOf(s->holds[slot]).session_slot = slot;
  }
  s->holds.pop_back();
}

void RemoveHolder(StateMachineImpl& m, Lock* lock, Holder* h) {
  Session* s = h->session;
  uint32_t slot = h->session_slot;
  lock->holders.Remove(h->token);
  --m.holds_count;
  RemoveSessionHold(s, slot);
}

// --- Queues -------------------------------------------------------------------

// A new grant that does not have to wait behind a queue or a lock-delay: free,
// or shared among shared holders.
bool Compatible(const Lock& lock, bool shared) {
  return lock.holders.empty() || (shared && lock.holders.shared());
}

// Whether (s, owner) waits on `lock`: scans the lock's queue or the holder's
// waits, whichever is shorter (a holder may wait on many locks).
bool AlreadyWaits(const Lock& lock, const Session* s, std::string_view owner) {
  if (lock.waiter_count() <= s->waits.size()) {
    for (const Waiter* w = lock.queue ? lock.queue->head : nullptr; w != nullptr; w = w->next) {
      if (w->session == s && w->owner == owner) return true;
    }
    return false;
  }
  auto [begin, end] = s->waits.equal_range(owner);
  for (auto it = begin; it != end; ++it) {
    if ((*it)->lock == &lock) return true;
  }
  return false;
}

uint64_t Enqueue(StateMachineImpl& m, Lock* lock, Session* s, std::string_view owner,
                 bool shared) {
  uint64_t id = ++m.last_wait_id;
  Waiter* w = AddWaiter(m, lock, s, owner, shared, id);
  assert(w != nullptr);
  (void)w;
  return id;
}

// Removes a waiter from its queue, its session and the wait index, and returns
// its owner tag. Leaves an empty LockQueue in place (see TidyQueue).
std::string RemoveWaiter(StateMachineImpl& m, Waiter* w) {
  LockQueue* q = w->lock->queue.get();
  assert(q != nullptr);
  assert(q->size > 0);
  (w->prev != nullptr ? w->prev->next : q->head) = w->next;
  (w->next != nullptr ? w->next->prev : q->tail) = w->prev;
  --q->size;
  size_t erased = w->session->waits.erase(w);
  assert(erased == 1);
  (void)erased;
  std::string owner = std::move(w->owner);
  m.waits.erase(w->wait_id);
  return owner;
}

void TidyQueue(Lock* lock) {
  if (lock->queue && lock->queue->size == 0 && lock->queue->delay_until_ms == 0) {
    lock->queue.reset();
  }
}

// Grants from the head of the queue while the head can be granted: one
// exclusive waiter, or a run of shared ones. Nothing during a lock-delay.
void ServeQueue(StateMachineImpl& m, Lock* lock, Effects* fx) {
  LockQueue* q = lock->queue.get();
  if (q == nullptr || q->delay_until_ms != 0) return;
  while (q->head != nullptr && Compatible(*lock, q->head->shared)) {
    Waiter* w = q->head;
    Session* s = w->session;
    bool shared = w->shared;
    uint64_t wait_id = w->wait_id;
    std::string owner = RemoveWaiter(m, w);
    uint64_t token = NextToken(m);
    AddHolder(m, lock, s, std::move(owner), shared, token);
    fx->grants.push_back({wait_id, s->id, token, 1});
  }
  TidyQueue(lock);
}

void EraseIfUnused(StateMachineImpl& m, Lock* lock) {
  if (!lock->Unused()) return;
  auto it = m.locks.find(*lock->name);
  assert(it != m.locks.end());
  m.locks.erase(it);
}

// Ends every lock-delay that log time has reached, in (deadline, name) order,
// and serves those queues.
void EndExpiredDelays(StateMachineImpl& m, Effects* fx) {
  while (!m.delayed.empty()) {
    Lock* lock = *m.delayed.begin();
    if (lock->queue->delay_until_ms > m.log_time_ms) break;
    m.delayed.erase(m.delayed.begin());
    lock->queue->delay_until_ms = 0;
    ServeQueue(m, lock, fx);
    EraseIfUnused(m, lock);
  }
}

// --- Commands -------------------------------------------------------------------

CommandResult OpenSession(StateMachineImpl& m, const CommandView& cmd) {
  if (cmd.ttl_ms < limits::kSessionTtlMsMin || cmd.ttl_ms > limits::kSessionTtlMsMax) {
    return Fail(StatusCode::kErr, "ttl_ms " + std::to_string(cmd.ttl_ms) + " is outside " +
                                      std::to_string(limits::kSessionTtlMsMin) + ".." +
                                      std::to_string(limits::kSessionTtlMsMax));
  }
  if (cmd.name.size() > limits::kSessionLabelBytesMax) {
    return Fail(StatusCode::kLimit, "session label is " + std::to_string(cmd.name.size()) +
                                        " bytes, more than " +
                                        std::to_string(limits::kSessionLabelBytesMax));
  }
  if (m.sessions.size() >= m.bounds.sessions_max) {
    return Fail(StatusCode::kLimit,
                "too many sessions (max " + std::to_string(m.bounds.sessions_max) + ")");
  }
  assert(m.last_session_id < std::numeric_limits<uint64_t>::max());
  uint64_t id = ++m.last_session_id;
  auto it = m.sessions.emplace_hint(m.sessions.end(), id, Session());
  Session& s = it->second;
  s.id = id;
  s.ttl_ms = cmd.ttl_ms;
  s.label.assign(cmd.name);
  CommandResult r;
  r.session = id;
  return r;
}

// Ends the session's waits (in wait id order) and releases its holds (in token
// order), then serves the touched queues in that same order. With `delay_ms`
// (expiry), each lock left without holders first enters lock-delay.
CommandResult EndSession(StateMachineImpl& m, uint64_t id, uint32_t delay_ms, Effects* fx) {
  Session* s = FindSession(m, id);
  if (s == nullptr) return NoSession(id);
  std::vector<Lock*>& touched = m.touched;
  touched.clear();

  std::vector<Waiter*> waits(s->waits.begin(), s->waits.end());
  std::sort(waits.begin(), waits.end(),
            [](const Waiter* a, const Waiter* b) { return a->wait_id < b->wait_id; });
  for (Waiter* w : waits) {
    fx->ended.push_back({w->wait_id, StatusCode::kNoSession});
    touched.push_back(w->lock);
    RemoveWaiter(m, w);
  }

  std::vector<std::pair<uint64_t, Lock*>> holds;  // (token, lock)
  holds.reserve(s->holds.size());
  for (const HoldRef& ref : s->holds) holds.emplace_back(ref.token, ref.lock);
  std::sort(holds.begin(), holds.end());
  for (auto [token, lock] : holds) {
    // The session goes away as a whole, so its hold vector is not maintained.
    lock->holders.Remove(token);
    --m.holds_count;
    touched.push_back(lock);
  }
  if (delay_ms > 0) {
    uint64_t until = SaturatingAdd(m.log_time_ms, delay_ms);
    for (auto [token, lock] : holds) {
      if (lock->holders.empty() && lock->delay_until_ms() == 0) StartDelay(m, lock, until);
    }
  }

  CommandResult r;
  r.released = static_cast<uint32_t>(holds.size());
  fx->sessions_ended.push_back(id);
  m.sessions.erase(id);

  // Serving a lock twice is harmless (the second time grants nothing), and
  // erasing must happen once per lock, so dedup only for the erase.
  for (Lock* lock : touched) ServeQueue(m, lock, fx);
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (Lock* lock : touched) EraseIfUnused(m, lock);
  touched.clear();
  return r;
}

// The checks Lock and Unlock share: name and owner lengths, then the session.
CommandResult CheckLockArgs(StateMachineImpl& m, const CommandView& cmd, Session** s) {
  if (cmd.name.empty()) return Fail(StatusCode::kErr, "lock name is empty");
  if (cmd.name.size() > limits::kLockNameBytesMax) {
    return Fail(StatusCode::kLimit, "lock name is " + std::to_string(cmd.name.size()) +
                                        " bytes, more than " +
                                        std::to_string(limits::kLockNameBytesMax));
  }
  if (cmd.owner.size() > limits::kOwnerBytesMax) {
    return Fail(StatusCode::kLimit, "owner tag is " + std::to_string(cmd.owner.size()) +
                                        " bytes, more than " +
                                        std::to_string(limits::kOwnerBytesMax));
  }
  *s = FindSession(m, cmd.session);
  if (*s == nullptr) return NoSession(cmd.session);
  return CommandResult();
}

CommandResult HoldsLimit(StateMachineImpl& m, const Session& s) {
  return Fail(StatusCode::kLimit,
              "session " + std::to_string(s.id) + " has " +
                  std::to_string(s.holds_and_waits()) + " holds and waits (max " +
                  std::to_string(m.bounds.holds_per_session_max) + ")");
}

CommandResult Granted(uint64_t token, uint32_t count) {
  CommandResult r;
  r.lock_outcome = LockOutcome::kGranted;
  r.token = token;
  r.hold_count = count;
  return r;
}

CommandResult LockNew(StateMachineImpl& m, const CommandView& cmd, Session* s) {
  if (m.locks.size() >= m.bounds.locks_max) {
    return Fail(StatusCode::kLimit,
                "too many locks (max " + std::to_string(m.bounds.locks_max) + ")");
  }
  if (s->holds_and_waits() >= m.bounds.holds_per_session_max) return HoldsLimit(m, *s);
  auto it = m.locks.emplace(std::string(cmd.name), Lock()).first;
  Lock* lock = &it->second;
  lock->name = &it->first;
  uint64_t token = NextToken(m);
  AddHolder(m, lock, s, std::string(cmd.owner), cmd.shared, token);
  return Granted(token, 1);
}

CommandResult LockReentrant(const CommandView& cmd, Lock* lock, Holder* h) {
  if (lock->holders.shared() != cmd.shared) {
    const char* held = lock->holders.shared() ? "shared" : "exclusive";
    const char* asked = cmd.shared ? "shared" : "exclusive";
    return Fail(StatusCode::kWrongMode, HolderName(h->session->id, h->owner) + " holds " +
                                            Quoted(*lock->name) + " " + held +
                                            ", cannot take it " + asked);
  }
  if (h->count >= limits::kHoldCountMax) {
    return Fail(StatusCode::kLimit, "hold count of " + Quoted(*lock->name) +
                                        " would exceed " +
                                        std::to_string(limits::kHoldCountMax));
  }
  ++h->count;
  return Granted(h->token, h->count);
}

CommandResult LockCmd(StateMachineImpl& m, const CommandView& cmd) {
  Session* s = nullptr;
  CommandResult checked = CheckLockArgs(m, cmd, &s);
  if (!checked.status.ok()) return checked;
  auto it = m.locks.find(cmd.name);
  if (it == m.locks.end()) return LockNew(m, cmd, s);
  Lock* lock = &it->second;

  Holder* holder = FindHolder(*lock, s, cmd.owner);
  if (holder != nullptr) return LockReentrant(cmd, lock, holder);
  if (AlreadyWaits(*lock, s, cmd.owner)) {
    return Fail(StatusCode::kErr, HolderName(s->id, cmd.owner) + " already waits for " +
                                      Quoted(cmd.name));
  }
  bool grantable = lock->waiter_count() == 0 && lock->delay_until_ms() == 0 &&
                   Compatible(*lock, cmd.shared);
  if (grantable) {
    if (s->holds_and_waits() >= m.bounds.holds_per_session_max) return HoldsLimit(m, *s);
    uint64_t token = NextToken(m);
    AddHolder(m, lock, s, std::string(cmd.owner), cmd.shared, token);
    return Granted(token, 1);
  }
  if (!cmd.wait) {
    CommandResult r;
    r.lock_outcome = LockOutcome::kWouldBlock;
    return r;
  }
  Status deadlock = internal::CheckDeadlock(m, s, cmd.owner, lock);
  if (!deadlock.ok()) {
    CommandResult r;
    r.status = std::move(deadlock);
    return r;
  }
  if (lock->waiter_count() >= m.bounds.waiters_per_lock_max) {
    return Fail(StatusCode::kLimit, "queue of " + Quoted(cmd.name) + " is full (max " +
                                        std::to_string(m.bounds.waiters_per_lock_max) +
                                        " waiters)");
  }
  if (s->holds_and_waits() >= m.bounds.holds_per_session_max) return HoldsLimit(m, *s);
  CommandResult r;
  r.lock_outcome = LockOutcome::kQueued;
  r.wait_id = Enqueue(m, lock, s, cmd.owner, cmd.shared);
  return r;
}

CommandResult UnlockCmd(StateMachineImpl& m, const CommandView& cmd, Effects* fx) {
  Session* s = nullptr;
  CommandResult checked = CheckLockArgs(m, cmd, &s);
  if (!checked.status.ok()) return checked;
  auto it = m.locks.find(cmd.name);
  Holder* h = it == m.locks.end() ? nullptr : FindHolder(it->second, s, cmd.owner);
  if (h == nullptr) {
    return Fail(StatusCode::kNotHeld,
                HolderName(s->id, cmd.owner) + " does not hold " + Quoted(cmd.name));
  }
  Lock* lock = &it->second;
  assert(h->count >= 1);
  CommandResult r;
  r.hold_count = --h->count;
  if (h->count == 0) {
    RemoveHolder(m, lock, h);
    ServeQueue(m, lock, fx);
    if (lock->Unused()) m.locks.erase(it);
  }
  return r;
}

// A wait that no longer exists (granted, cancelled, its session ended) is not
// an error: the server may cancel a wait that raced with its grant.
CommandResult CancelWait(StateMachineImpl& m, uint64_t wait_id, Effects* fx) {
  auto it = m.waits.find(wait_id);
  if (it == m.waits.end()) return CommandResult();
  Lock* lock = it->second.lock;
  RemoveWaiter(m, &it->second);
  ServeQueue(m, lock, fx);  // the head may have gone, letting the next run in
  EraseIfUnused(m, lock);
  return CommandResult();
}

// Ends every wait, in wait id order. Queues are not served: no waiter is left
// to serve, and granting one while cancelling the others would be wrong.
CommandResult CancelAllWaits(StateMachineImpl& m, Effects* fx) {
  while (!m.waits.empty()) {
    Waiter* w = &m.waits.begin()->second;
    Lock* lock = w->lock;
    fx->ended.push_back({w->wait_id, StatusCode::kTryAgain});
    RemoveWaiter(m, w);
    TidyQueue(lock);
    EraseIfUnused(m, lock);
  }
  return CommandResult();
}

}  // namespace

// --- StateMachine ------------------------------------------------------------------

StateMachine::StateMachine(Bounds bounds) : impl_(std::make_unique<Impl>(bounds)) {
  // Bounds come from validated flags: a value past the hard maximum is a bug.
  assert(bounds.sessions_max <= limits::kSessionsMax);
  assert(bounds.locks_max <= limits::kLocksMax);
  assert(bounds.waiters_per_lock_max <= limits::kWaitersPerLockMax);
  assert(bounds.holds_per_session_max <= limits::kHoldsPerSessionMax);
}

StateMachine::~StateMachine() = default;

CommandResult StateMachine::Apply(const CommandView& cmd, uint64_t log_time_ms,
                                  Effects* effects) {
  assert(effects != nullptr);
  StateMachineImpl& m = *impl_;
  m.log_time_ms = std::max(m.log_time_ms, log_time_ms);
  EndExpiredDelays(m, effects);
  switch (cmd.type) {
    case CommandType::kOpenSession:
      return OpenSession(m, cmd);
    case CommandType::kCloseSession:
      return EndSession(m, cmd.session, 0, effects);
    case CommandType::kExpireSession:
      if (cmd.lock_delay_ms > limits::kLockDelayMsMax) {
        return Fail(StatusCode::kErr, "lock_delay_ms " + std::to_string(cmd.lock_delay_ms) +
                                          " is more than " +
                                          std::to_string(limits::kLockDelayMsMax));
      }
      return EndSession(m, cmd.session, cmd.lock_delay_ms, effects);
    case CommandType::kLock:
      return LockCmd(m, cmd);
    case CommandType::kUnlock:
      return UnlockCmd(m, cmd, effects);
    case CommandType::kCancelWait:
      return CancelWait(m, cmd.wait_id, effects);
    case CommandType::kCancelAllWaits:
      return CancelAllWaits(m, effects);
    case CommandType::kTick:
      return CommandResult();
    case CommandType::kAnnounce:
      if (cmd.node_id == 0 || cmd.name.size() > limits::kAddressBytesMax) {
        return Fail(StatusCode::kErr, "announce needs a node id > 0 and an address of at most " +
                                          std::to_string(limits::kAddressBytesMax) + " bytes");
      }
      m.announced_node_id = cmd.node_id;
      m.announced_address.assign(cmd.name);
      return CommandResult();
  }
  return Fail(StatusCode::kErr,
              "unknown command type " + std::to_string(static_cast<int>(cmd.type)));
}

bool StateMachine::SessionExists(uint64_t session) const {
  return impl_->sessions.count(session) != 0;
}

std::optional<SessionInfo> StateMachine::GetSession(uint64_t session) const {
  auto it = impl_->sessions.find(session);
  if (it == impl_->sessions.end()) return std::nullopt;
  const Session& s = it->second;
  SessionInfo info;
  info.id = s.id;
  info.label = s.label;
  info.ttl_ms = s.ttl_ms;
  info.holds.reserve(s.holds.size());
  for (const HoldRef& ref : s.holds) info.holds.push_back(*ref.lock->name);
  for (const Waiter* w : s.waits) info.waiting.push_back(*w->lock->name);
  for (auto* names : {&info.holds, &info.waiting}) {
    std::sort(names->begin(), names->end());
    names->erase(std::unique(names->begin(), names->end()), names->end());
  }
  return info;
}

std::vector<uint64_t> StateMachine::ListSessions(uint32_t count) const {
  std::vector<uint64_t> ids;
  for (auto it = impl_->sessions.begin(); it != impl_->sessions.end() && ids.size() < count;
       ++it) {
    ids.push_back(it->first);
  }
  return ids;
}

std::vector<std::pair<uint64_t, uint32_t>> StateMachine::SessionTtls() const {
  std::vector<std::pair<uint64_t, uint32_t>> out;
  out.reserve(impl_->sessions.size());
  for (const auto& [id, s] : impl_->sessions) out.emplace_back(id, s.ttl_ms);
  return out;
}

std::optional<LockInfo> StateMachine::Inspect(std::string_view name) const {
  auto it = impl_->locks.find(name);
  if (it == impl_->locks.end()) return std::nullopt;
  const Lock& lock = it->second;
  LockInfo info;
  info.name = it->first;
  if (!lock.holders.empty()) {
    info.mode = lock.holders.shared() ? LockMode::kShared : LockMode::kExclusive;
    info.token = lock.holders.last().token;  // grant order = token order
  }
  lock.holders.ForEach([&info](const Holder& h) {
    info.holders.push_back({h.session->id, h.owner, h.count, h.token});
  });
  if (lock.queue) {
    for (const Waiter* w = lock.queue->head; w != nullptr; w = w->next) {
      info.waiters.push_back({w->session->id, w->owner, w->shared, w->wait_id});
    }
  }
  info.delay_until_ms = lock.delay_until_ms();
  return info;
}

bool StateMachine::Check(std::string_view name, uint64_t token) const {
  auto it = impl_->locks.find(name);
  if (it == impl_->locks.end()) return false;
  return it->second.holders.Find(token) != nullptr;
}

std::vector<std::string> StateMachine::ListLocks(std::string_view prefix,
                                                 uint32_t count) const {
  std::vector<std::string> names;
  for (auto it = impl_->locks.lower_bound(prefix);
       it != impl_->locks.end() && names.size() < count && it->first.starts_with(prefix);
       ++it) {
    names.push_back(it->first);
  }
  return names;
}

std::optional<uint64_t> StateMachine::NextDelayEndMs() const {
  if (impl_->delayed.empty()) return std::nullopt;
  return (*impl_->delayed.begin())->queue->delay_until_ms;
}

std::vector<uint64_t> StateMachine::WaitIds() const {
  std::vector<uint64_t> ids;
  ids.reserve(impl_->waits.size());
  for (const auto& entry : impl_->waits) ids.push_back(entry.first);
  return ids;
}

Stats StateMachine::GetStats() const {
  Stats st;
  st.sessions = impl_->sessions.size();
  st.locks = impl_->locks.size();
  st.waiters = impl_->waits.size();
  st.holds = impl_->holds_count;
  st.last_token = impl_->last_token;
  st.log_time_ms = impl_->log_time_ms;
  return st;
}

uint64_t StateMachine::log_time_ms() const { return impl_->log_time_ms; }

uint64_t StateMachine::announced_node_id() const { return impl_->announced_node_id; }

const std::string& StateMachine::announced_address() const { return impl_->announced_address; }

void StateMachine::EncodeSnapshot(std::string* out) const {
  internal::EncodeSnapshotImpl(*impl_, out);
}

Status StateMachine::DecodeSnapshot(std::string_view in) {
  auto fresh = std::make_unique<Impl>(impl_->bounds);
  Status status = internal::DecodeSnapshotImpl(in, fresh.get());
  if (status.ok()) impl_ = std::move(fresh);
  return status;
}

}  // namespace tumbler::core

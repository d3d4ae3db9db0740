// Seeded randomized model test of the lock state machine.
//
// Each sequence applies 50-200 random commands (few sessions, owners and locks,
// small bounds, advancing and sometimes stale log time, bad inputs now and then)
// to the StateMachine and to a reference model written here independently, in
// the plainest way (vectors, brute-force wait-for graph). After every step it
// checks that both agree on the result, the effects and the whole state, and
// checks the invariants directly on the machine's state: at most one exclusive
// holder, no waiter left behind, grants in FIFO order, tokens strictly
// increasing. Halfway through, the machine is snapshotted and restored into a
// second machine that must then behave identically; at the end the command log
// is replayed on a fresh machine, which must give a byte-identical snapshot.
//
//   TUMBLER_MODEL_SEQUENCES  number of sequences (default 10000)
//   TUMBLER_MODEL_SEED       seed of the first sequence (default fixed); sequence
//                            i uses seed + i. A failure prints the env to replay it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/state_machine.h"

namespace tumbler::core {
namespace {

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// A command that owns its strings (CommandView only borrows).
struct Cmd {
  CommandType type = CommandType::kTick;
  uint64_t session = 0;
  uint32_t ttl_ms = 0;
  uint32_t lock_delay_ms = 0;
  std::string name;
  std::string owner;
  bool shared = false;
  bool wait = false;
  uint64_t wait_id = 0;
  uint64_t log_time_ms = 0;

  CommandView View() const {
    CommandView v;
    v.type = type;
    v.session = session;
    v.ttl_ms = ttl_ms;
    v.lock_delay_ms = lock_delay_ms;
    v.name = name;
    v.owner = owner;
    v.shared = shared;
    v.wait = wait;
    v.wait_id = wait_id;
    return v;
  }
};

// --- The reference model ------------------------------------------------------------

struct MHolder {
  uint64_t session;
  std::string owner;
  uint32_t count;
  uint64_t token;
};
struct MWaiter {
  uint64_t wait_id;
  uint64_t session;
  std::string owner;
  bool shared;
};
struct MLock {
  std::vector<MHolder> holders;  // grant order
  bool shared = false;
  std::vector<MWaiter> queue;    // FIFO
  uint64_t delay_until_ms = 0;
};

struct MResult {
  StatusCode code = StatusCode::kOk;
  CommandResult r;
};

using Node = std::pair<uint64_t, std::string>;

class Model {
 public:
  explicit Model(Bounds bounds) : bounds_(bounds) {}

  MResult Apply(const Cmd& c, Effects* fx) {
    time_ = std::max(time_, c.log_time_ms);
    EndDelays(fx);
    switch (c.type) {
      case CommandType::kOpenSession: return Open(c);
      case CommandType::kCloseSession: return End(c.session, 0, fx);
      case CommandType::kExpireSession:
        if (c.lock_delay_ms > limits::kLockDelayMsMax) return Err(StatusCode::kErr);
        return End(c.session, c.lock_delay_ms, fx);
      case CommandType::kLock: return Lock(c);
      case CommandType::kUnlock: return Unlock(c, fx);
      case CommandType::kCancelWait: return CancelWait(c.wait_id, fx);
      case CommandType::kCancelAllWaits: return CancelAll(fx);
      case CommandType::kTick: return MResult();
      case CommandType::kAnnounce: return MResult();
    }
    return Err(StatusCode::kErr);
  }

  const std::map<std::string, MLock>& locks() const { return locks_; }
  const std::map<uint64_t, uint32_t>& sessions() const { return sessions_; }
  uint64_t last_token() const { return last_token_; }
  uint64_t time() const { return time_; }
  uint64_t last_session() const { return last_session_; }
  uint64_t last_wait() const { return last_wait_; }

 private:
  static MResult Err(StatusCode code) {
    MResult m;
    m.code = code;
    return m;
  }

  void EndDelays(Effects* fx) {
    std::vector<std::pair<uint64_t, std::string>> due;
    for (auto& [name, l] : locks_) {
      if (l.delay_until_ms != 0 && l.delay_until_ms <= time_) due.emplace_back(l.delay_until_ms, name);
    }
    std::sort(due.begin(), due.end());
    for (auto& [until, name] : due) {
      locks_[name].delay_until_ms = 0;
      Serve(name, fx);
      EraseIfEmpty(name);
    }
  }

  void Serve(const std::string& name, Effects* fx) {
    MLock& l = locks_[name];
    if (l.delay_until_ms != 0) return;
    while (!l.queue.empty() && (l.holders.empty() || (l.queue[0].shared && l.shared))) {
      MWaiter w = l.queue.front();
      l.queue.erase(l.queue.begin());
      if (l.holders.empty()) l.shared = w.shared;
      uint64_t token = ++last_token_;
      l.holders.push_back({w.session, w.owner, 1, token});
      fx->grants.push_back({w.wait_id, w.session, token, 1});
    }
  }

  void EraseIfEmpty(const std::string& name) {
    auto it = locks_.find(name);
    if (it == locks_.end()) return;
    const MLock& l = it->second;
    if (l.holders.empty() && l.queue.empty() && l.delay_until_ms == 0) locks_.erase(it);
  }

  size_t HoldsAndWaits(uint64_t s) const {
    size_t n = 0;
    for (const auto& [name, l] : locks_) {
      for (const auto& h : l.holders) n += h.session == s;
      for (const auto& w : l.queue) n += w.session == s;
    }
    return n;
  }

  MResult Open(const Cmd& c) {
    if (c.ttl_ms < limits::kSessionTtlMsMin || c.ttl_ms > limits::kSessionTtlMsMax) {
      return Err(StatusCode::kErr);
    }
    if (c.name.size() > limits::kSessionLabelBytesMax) return Err(StatusCode::kLimit);
    if (sessions_.size() >= bounds_.sessions_max) return Err(StatusCode::kLimit);
    MResult m;
    m.r.session = ++last_session_;
    sessions_[m.r.session] = c.ttl_ms;
    return m;
  }

  MResult End(uint64_t s, uint32_t delay_ms, Effects* fx) {
    if (!sessions_.count(s)) return Err(StatusCode::kNoSession);
    std::vector<std::pair<uint64_t, std::string>> waits, holds;  // (id or token, lock)
    for (auto& [name, l] : locks_) {
      for (const auto& w : l.queue) {
        if (w.session == s) waits.emplace_back(w.wait_id, name);
      }
      for (const auto& h : l.holders) {
        if (h.session == s) holds.emplace_back(h.token, name);
      }
    }
    std::sort(waits.begin(), waits.end());
    std::sort(holds.begin(), holds.end());
    std::vector<std::string> touched;
    for (auto& [id, name] : waits) {
      fx->ended.push_back({id, StatusCode::kNoSession});
      auto& q = locks_[name].queue;
      q.erase(std::find_if(q.begin(), q.end(), [&](const MWaiter& w) { return w.wait_id == id; }));
      touched.push_back(name);
    }
    for (auto& [token, name] : holds) {
      auto& hs = locks_[name].holders;
      hs.erase(std::find_if(hs.begin(), hs.end(), [&](const MHolder& h) { return h.token == token; }));
      touched.push_back(name);
    }
    if (delay_ms > 0) {
      for (auto& [token, name] : holds) {
        MLock& l = locks_[name];
        if (l.holders.empty() && l.delay_until_ms == 0) l.delay_until_ms = time_ + delay_ms;
      }
    }
    sessions_.erase(s);
    fx->sessions_ended.push_back(s);
    for (const auto& name : touched) Serve(name, fx);
    for (const auto& name : touched) EraseIfEmpty(name);
    MResult m;
    m.r.released = static_cast<uint32_t>(holds.size());
    return m;
  }

  MResult CheckArgs(const Cmd& c) const {
    if (c.name.empty()) return Err(StatusCode::kErr);
    if (c.name.size() > limits::kLockNameBytesMax) return Err(StatusCode::kLimit);
    if (c.owner.size() > limits::kOwnerBytesMax) return Err(StatusCode::kLimit);
    if (!sessions_.count(c.session)) return Err(StatusCode::kNoSession);
    return MResult();
  }

  static void WaitTargets(const MLock& l, size_t pos, std::vector<Node>* out) {
    for (const auto& h : l.holders) out->emplace_back(h.session, h.owner);
    for (size_t i = 0; i < pos; ++i) out->emplace_back(l.queue[i].session, l.queue[i].owner);
  }

  // Brute force: would `r` waiting on `name` close a cycle?
  bool WouldDeadlock(const Node& r, const std::string& name) const {
    std::vector<Node> stack;
    const MLock& target = locks_.at(name);
    WaitTargets(target, target.queue.size(), &stack);
    std::set<Node> seen;
    while (!stack.empty()) {
      Node n = stack.back();
      stack.pop_back();
      if (n == r) return true;
      if (!seen.insert(n).second) continue;
      for (const auto& [lname, l] : locks_) {
        for (size_t i = 0; i < l.queue.size(); ++i) {
          if (l.queue[i].session == n.first && l.queue[i].owner == n.second) {
            WaitTargets(l, i, &stack);
          }
        }
      }
    }
    return false;
  }

  MResult Granted(uint64_t token, uint32_t count) {
    MResult m;
    m.r.lock_outcome = LockOutcome::kGranted;
    m.r.token = token;
    m.r.hold_count = count;
    return m;
  }

  MResult Lock(const Cmd& c) {
    MResult checked = CheckArgs(c);
    if (checked.code != StatusCode::kOk) return checked;
    auto it = locks_.find(c.name);
    if (it == locks_.end()) {
      if (locks_.size() >= bounds_.locks_max) return Err(StatusCode::kLimit);
      if (HoldsAndWaits(c.session) >= bounds_.holds_per_session_max) return Err(StatusCode::kLimit);
      MLock& l = locks_[c.name];
      l.shared = c.shared;
      l.holders.push_back({c.session, c.owner, 1, ++last_token_});
      return Granted(last_token_, 1);
    }
    MLock& l = it->second;
    for (auto& h : l.holders) {
      if (h.session != c.session || h.owner != c.owner) continue;
      if (l.shared != c.shared) return Err(StatusCode::kWrongMode);
      if (h.count >= limits::kHoldCountMax) return Err(StatusCode::kLimit);
      return Granted(h.token, ++h.count);
    }
    for (const auto& w : l.queue) {
      if (w.session == c.session && w.owner == c.owner) return Err(StatusCode::kErr);
    }
    if (l.queue.empty() && l.delay_until_ms == 0 && (l.holders.empty() || (c.shared && l.shared))) {
      if (HoldsAndWaits(c.session) >= bounds_.holds_per_session_max) return Err(StatusCode::kLimit);
      if (l.holders.empty()) l.shared = c.shared;
      l.holders.push_back({c.session, c.owner, 1, ++last_token_});
      return Granted(last_token_, 1);
    }
    if (!c.wait) return MResult();  // kWouldBlock is the default outcome
    if (WouldDeadlock({c.session, c.owner}, c.name)) return Err(StatusCode::kDeadlock);
    if (l.queue.size() >= bounds_.waiters_per_lock_max) return Err(StatusCode::kLimit);
    if (HoldsAndWaits(c.session) >= bounds_.holds_per_session_max) return Err(StatusCode::kLimit);
    l.queue.push_back({++last_wait_, c.session, c.owner, c.shared});
    MResult m;
    m.r.lock_outcome = LockOutcome::kQueued;
    m.r.wait_id = last_wait_;
    return m;
  }

  MResult Unlock(const Cmd& c, Effects* fx) {
    MResult checked = CheckArgs(c);
    if (checked.code != StatusCode::kOk) return checked;
    auto it = locks_.find(c.name);
    if (it == locks_.end()) return Err(StatusCode::kNotHeld);
    auto& hs = it->second.holders;
    auto h = std::find_if(hs.begin(), hs.end(), [&](const MHolder& x) {
      return x.session == c.session && x.owner == c.owner;
    });
    if (h == hs.end()) return Err(StatusCode::kNotHeld);
    MResult m;
    m.r.hold_count = --h->count;
    if (h->count == 0) {
      hs.erase(h);
      Serve(c.name, fx);
      EraseIfEmpty(c.name);
    }
    return m;
  }

  MResult CancelWait(uint64_t id, Effects* fx) {
    for (auto& [name, l] : locks_) {
      for (size_t i = 0; i < l.queue.size(); ++i) {
        if (l.queue[i].wait_id != id) continue;
        l.queue.erase(l.queue.begin() + static_cast<long>(i));
        std::string n = name;  // name dies if the lock is erased
        Serve(n, fx);
        EraseIfEmpty(n);
        return MResult();
      }
    }
    return MResult();
  }

  MResult CancelAll(Effects* fx) {
    std::vector<uint64_t> ids;
    for (auto& [name, l] : locks_) {
      for (const auto& w : l.queue) ids.push_back(w.wait_id);
      l.queue.clear();
    }
    std::sort(ids.begin(), ids.end());
    for (uint64_t id : ids) fx->ended.push_back({id, StatusCode::kTryAgain});
    std::vector<std::string> names;
    for (const auto& [name, l] : locks_) names.push_back(name);
    for (const auto& n : names) EraseIfEmpty(n);
    return MResult();
  }

  Bounds bounds_;
  uint64_t time_ = 0;
  uint64_t last_token_ = 0;
  uint64_t last_session_ = 0;
  uint64_t last_wait_ = 0;
  std::map<uint64_t, uint32_t> sessions_;
  std::map<std::string, MLock> locks_;
};

// --- Random commands -------------------------------------------------------------------

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  Bounds RandomBounds() {
    Bounds b;
    if (Chance(10)) return b;  // defaults now and then
    b.sessions_max = static_cast<uint32_t>(Range(2, 8));
    b.locks_max = Range(2, 8);
    b.waiters_per_lock_max = static_cast<uint32_t>(Range(1, 6));
    b.holds_per_session_max = static_cast<uint32_t>(Range(2, 12));
    return b;
  }
  int Length() { return static_cast<int>(Range(50, 200)); }

  Cmd Next(const Model& m) {
    Cmd c;
    now_ += Range(0, 40);
    c.log_time_ms = Chance(3) ? now_ - std::min<uint64_t>(now_, Range(1, 100)) : now_;
    uint64_t pick = Range(0, 99);
    if (m.sessions().size() < 3 && Chance(60)) pick = 0;  // keep a few sessions alive
    if (pick < 6) {
      c.type = CommandType::kOpenSession;
      c.ttl_ms = Chance(5) ? (Chance(50) ? 99 : 3'600'001) : static_cast<uint32_t>(Range(100, 5000));
      c.name = Chance(3) ? std::string(257, 'l') : (Chance(50) ? "" : "label");
    } else if (pick < 8) {
      c.type = CommandType::kCloseSession;
      c.session = Session(m);
    } else if (pick < 11) {
      c.type = CommandType::kExpireSession;
      c.session = Session(m);
      c.lock_delay_ms = Chance(40) ? 0 : static_cast<uint32_t>(Range(1, 200));
      if (Chance(3)) c.lock_delay_ms = limits::kLockDelayMsMax + 1;
    } else if (pick < 56) {
      c.type = CommandType::kLock;
      FillLockArgs(m, &c);
      c.shared = Chance(40);
      c.wait = Chance(60);
    } else if (pick < 78) {
      c.type = CommandType::kUnlock;
      FillLockArgs(m, &c);
    } else if (pick < 86) {
      c.type = CommandType::kCancelWait;
      c.wait_id = Range(0, m.last_wait() + 1);
    } else if (pick < 87) {
      c.type = CommandType::kCancelAllWaits;
    } else {
      c.type = CommandType::kTick;
      now_ += Range(0, 150);
      c.log_time_ms = now_;
    }
    return c;
  }

 private:
  uint64_t Range(uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_);
  }
  bool Chance(int percent) { return Range(0, 99) < static_cast<uint64_t>(percent); }

  uint64_t Session(const Model& m) {
    if (m.sessions().empty() || Chance(5)) return Range(0, m.last_session() + 1);
    auto it = m.sessions().begin();
    std::advance(it, static_cast<long>(Range(0, m.sessions().size() - 1)));
    return it->first;
  }

  void FillLockArgs(const Model& m, Cmd* c) {
    static const char* const kNames[] = {"a", "b", "c", "d", "e"};
    static const char* const kOwners[] = {"", "x", "y"};
    c->session = Session(m);
    c->name = kNames[Range(0, 4)];
    c->owner = kOwners[Range(0, 2)];
    if (Chance(2)) c->name = "";
    if (Chance(1)) c->name = std::string(limits::kLockNameBytesMax + 1, 'n');
    if (Chance(1)) c->owner = std::string(limits::kOwnerBytesMax + 1, 'o');
  }

  std::mt19937_64 rng_;
  uint64_t now_ = 1000;
};

// --- Checks -------------------------------------------------------------------------------

std::string Snapshot(const StateMachine& sm) {
  std::string out;
  sm.EncodeSnapshot(&out);
  return out;
}

void ExpectSameResult(const CommandResult& got, const MResult& want) {
  ASSERT_EQ(got.status.code(), want.code) << got.status.ToString();
  if (want.code != StatusCode::kOk) return;
  EXPECT_EQ(got.lock_outcome, want.r.lock_outcome);
  EXPECT_EQ(got.token, want.r.token);
  EXPECT_EQ(got.hold_count, want.r.hold_count);
  EXPECT_EQ(got.wait_id, want.r.wait_id);
  EXPECT_EQ(got.session, want.r.session);
  EXPECT_EQ(got.released, want.r.released);
}

void ExpectSameEffects(const Effects& got, const Effects& want) {
  ASSERT_EQ(got.grants.size(), want.grants.size());
  for (size_t i = 0; i < got.grants.size(); ++i) {
    EXPECT_EQ(got.grants[i].wait_id, want.grants[i].wait_id) << i;
    EXPECT_EQ(got.grants[i].session, want.grants[i].session) << i;
    EXPECT_EQ(got.grants[i].token, want.grants[i].token) << i;
    EXPECT_EQ(got.grants[i].hold_count, 1u);
  }
  ASSERT_EQ(got.ended.size(), want.ended.size());
  for (size_t i = 0; i < got.ended.size(); ++i) {
    EXPECT_EQ(got.ended[i].wait_id, want.ended[i].wait_id) << i;
    EXPECT_EQ(got.ended[i].reason, want.ended[i].reason) << i;
  }
  EXPECT_EQ(got.sessions_ended, want.sessions_ended);
}

void ExpectSameState(const StateMachine& sm, const Model& m) {
  std::vector<std::string> names;
  for (const auto& [name, l] : m.locks()) names.push_back(name);
  ASSERT_EQ(sm.ListLocks("", 1000), names);
  size_t holds = 0, waiters = 0;
  for (const auto& [name, l] : m.locks()) {
    auto info = sm.Inspect(name);
    ASSERT_TRUE(info.has_value()) << name;
    ASSERT_EQ(info->holders.size(), l.holders.size()) << name;
    for (size_t i = 0; i < l.holders.size(); ++i) {
      EXPECT_EQ(info->holders[i].session, l.holders[i].session);
      EXPECT_EQ(info->holders[i].owner, l.holders[i].owner);
      EXPECT_EQ(info->holders[i].count, l.holders[i].count);
      EXPECT_EQ(info->holders[i].token, l.holders[i].token);
    }
    if (!l.holders.empty()) {
      EXPECT_EQ(info->mode, l.shared ? LockMode::kShared : LockMode::kExclusive) << name;
    }
    ASSERT_EQ(info->waiters.size(), l.queue.size()) << name;
    for (size_t i = 0; i < l.queue.size(); ++i) {
      EXPECT_EQ(info->waiters[i].wait_id, l.queue[i].wait_id);
      EXPECT_EQ(info->waiters[i].session, l.queue[i].session);
      EXPECT_EQ(info->waiters[i].owner, l.queue[i].owner);
      EXPECT_EQ(info->waiters[i].shared, l.queue[i].shared);
    }
    EXPECT_EQ(info->delay_until_ms, l.delay_until_ms) << name;
    holds += l.holders.size();
    waiters += l.queue.size();
  }
  Stats st = sm.GetStats();
  EXPECT_EQ(st.sessions, m.sessions().size());
  EXPECT_EQ(st.locks, m.locks().size());
  EXPECT_EQ(st.holds, holds);
  EXPECT_EQ(st.waiters, waiters);
  EXPECT_EQ(st.last_token, m.last_token());
  EXPECT_EQ(st.log_time_ms, m.time());
  std::vector<uint64_t> ids;
  for (const auto& [id, ttl] : m.sessions()) ids.push_back(id);
  EXPECT_EQ(sm.ListSessions(1000), ids);
}

// Invariants read off the machine alone, whatever the model says.
void CheckInvariants(const StateMachine& sm) {
  for (const std::string& name : sm.ListLocks("", 1000)) {
    auto info = sm.Inspect(name);
    ASSERT_TRUE(info.has_value());
    bool held = !info->holders.empty();
    bool delayed = info->delay_until_ms != 0;
    ASSERT_TRUE(held || !info->waiters.empty() || delayed) << name << " exists for nothing";
    if (info->mode == LockMode::kExclusive) {
      ASSERT_EQ(info->holders.size(), 1u) << name;
    }
    ASSERT_EQ(held, info->mode != LockMode::kFree) << name;
    ASSERT_FALSE(delayed && held) << name << " held during lock-delay";
    for (size_t i = 0; i < info->holders.size(); ++i) {
      ASSERT_GE(info->holders[i].count, 1u);
      if (i > 0) {
        ASSERT_LT(info->holders[i - 1].token, info->holders[i].token);
      }
    }
    if (!info->waiters.empty() && !delayed) {
      ASSERT_TRUE(held) << name << ": waiters left behind on a free lock";
      ASSERT_FALSE(info->waiters[0].shared && info->mode == LockMode::kShared)
          << name << ": shared head could join shared holders";
    }
  }
}

// FIFO: every wait granted by this step was at the head of its queue once the
// waits granted, ended or cancelled before it in this step are taken away.
void CheckFifo(const std::map<std::string, std::vector<uint64_t>>& queues_before,
               const Cmd& cmd, const Effects& fx) {
  std::set<uint64_t> gone;
  for (const auto& e : fx.ended) gone.insert(e.wait_id);
  if (cmd.type == CommandType::kCancelWait) gone.insert(cmd.wait_id);
  for (const auto& g : fx.grants) {
    bool found = false;
    for (const auto& [name, ids] : queues_before) {
      auto pos = std::find(ids.begin(), ids.end(), g.wait_id);
      if (pos == ids.end()) continue;
      found = true;
      for (auto it = ids.begin(); it != pos; ++it) {
        ASSERT_TRUE(gone.count(*it)) << "wait " << g.wait_id << " on " << name
                                     << " granted before wait " << *it;
      }
    }
    ASSERT_TRUE(found) << "granted wait " << g.wait_id << " was not queued";
    gone.insert(g.wait_id);
  }
}

std::map<std::string, std::vector<uint64_t>> Queues(const StateMachine& sm) {
  std::map<std::string, std::vector<uint64_t>> out;
  for (const std::string& name : sm.ListLocks("", 1000)) {
    std::optional<LockInfo> info = sm.Inspect(name);
    for (const auto& w : info->waiters) out[name].push_back(w.wait_id);
  }
  return out;
}

// What the run exercised, so that a generator change cannot quietly make the
// test vacuous.
struct Coverage {
  std::map<StatusCode, uint64_t> codes;
  std::map<LockOutcome, uint64_t> outcomes;
  uint64_t grants = 0, ended = 0, delays = 0, delay_grants = 0, shared_runs = 0;
};

void Tally(const Cmd& cmd, const CommandResult& got, const Effects& fx, const StateMachine& sm,
           Coverage* cov) {
  ++cov->codes[got.status.code()];
  if (cmd.type == CommandType::kLock && got.status.ok()) ++cov->outcomes[got.lock_outcome];
  cov->grants += fx.grants.size();
  cov->ended += fx.ended.size();
  if (fx.grants.size() >= 2) ++cov->shared_runs;
  if (cmd.type == CommandType::kTick) cov->delay_grants += fx.grants.size();
  if (cmd.type == CommandType::kExpireSession && sm.NextDelayEndMs().has_value()) ++cov->delays;
}

void RunSequence(uint64_t seed, Coverage* cov) {
  Generator gen(seed);
  Bounds bounds = gen.RandomBounds();
  StateMachine sm(bounds);
  Model model(bounds);
  std::unique_ptr<StateMachine> restored;  // from a snapshot taken mid-way
  std::vector<Cmd> log;
  const int length = gen.Length();
  const int restore_at = length / 2;
  uint64_t max_token = 0;
  Effects fx, model_fx, restored_fx;
  for (int step = 0; step < length; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    if (step == restore_at) {
      restored = std::make_unique<StateMachine>(bounds);
      std::string snap = Snapshot(sm);
      ASSERT_TRUE(restored->DecodeSnapshot(snap).ok());
      ASSERT_EQ(Snapshot(*restored), snap);
    }
    Cmd cmd = gen.Next(model);
    log.push_back(cmd);
    auto queues_before = Queues(sm);
    fx.Clear();
    model_fx.Clear();
    CommandResult got = sm.Apply(cmd.View(), cmd.log_time_ms, &fx);
    MResult want = model.Apply(cmd, &model_fx);
    ASSERT_NO_FATAL_FAILURE(ExpectSameResult(got, want));
    ASSERT_NO_FATAL_FAILURE(ExpectSameEffects(fx, model_fx));
    ASSERT_NO_FATAL_FAILURE(ExpectSameState(sm, model));
    ASSERT_NO_FATAL_FAILURE(CheckInvariants(sm));
    ASSERT_NO_FATAL_FAILURE(CheckFifo(queues_before, cmd, fx));
    Tally(cmd, got, fx, sm, cov);
    // Tokens strictly increase across every new grant. A Lock's own grant
    // follows the grants of lock-delays that ended as its Apply began.
    for (const auto& g : fx.grants) {
      ASSERT_GT(g.token, max_token);
      max_token = g.token;
    }
    if (got.status.ok() && got.lock_outcome == LockOutcome::kGranted && got.hold_count == 1) {
      ASSERT_GT(got.token, max_token);
      max_token = got.token;
    }
    if (restored) {
      restored_fx.Clear();
      CommandResult again = restored->Apply(cmd.View(), cmd.log_time_ms, &restored_fx);
      ASSERT_EQ(again.status, got.status);  // messages too: they are deterministic
      ASSERT_NO_FATAL_FAILURE(ExpectSameEffects(restored_fx, fx));
    }
    if (testing::Test::HasFailure()) return;
  }
  std::string final_snapshot = Snapshot(sm);
  ASSERT_EQ(Snapshot(*restored), final_snapshot);
  // Replaying the log on a fresh machine gives the same bytes.
  StateMachine replay(bounds);
  Effects replay_fx;
  for (const Cmd& cmd : log) replay.Apply(cmd.View(), cmd.log_time_ms, &replay_fx);
  ASSERT_EQ(Snapshot(replay), final_snapshot);
  StateMachine decoded(bounds);
  ASSERT_TRUE(decoded.DecodeSnapshot(final_snapshot).ok());
  ASSERT_EQ(Snapshot(decoded), final_snapshot);
}

TEST(ModelTest, RandomSequencesAgreeWithModel) {
  const uint64_t sequences = EnvOr("TUMBLER_MODEL_SEQUENCES", 10'000);
  const uint64_t seed = EnvOr("TUMBLER_MODEL_SEED", 20'240'601);
  Coverage cov;
  for (uint64_t i = 0; i < sequences; ++i) {
    RunSequence(seed + i, &cov);
    if (testing::Test::HasFailure()) {
      ADD_FAILURE() << "replay with: TUMBLER_MODEL_SEED=" << seed + i
                    << " TUMBLER_MODEL_SEQUENCES=1";
      return;
    }
  }
  std::printf("%llu sequences from seed %llu: grants %llu, ended %llu, shared runs %llu, "
              "lock-delays %llu, grants on tick %llu\n",
              static_cast<unsigned long long>(sequences), static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(cov.grants),
              static_cast<unsigned long long>(cov.ended),
              static_cast<unsigned long long>(cov.shared_runs),
              static_cast<unsigned long long>(cov.delays),
              static_cast<unsigned long long>(cov.delay_grants));
  for (const auto& [code, n] : cov.codes) {
    std::printf("  %s: %llu\n", std::string(StatusCodeName(code)).c_str(),
                static_cast<unsigned long long>(n));
  }
  if (sequences < 1000) return;  // too few to insist on coverage
  for (StatusCode code : {StatusCode::kOk, StatusCode::kErr, StatusCode::kNoSession,
                          StatusCode::kNotHeld, StatusCode::kWrongMode, StatusCode::kDeadlock,
                          StatusCode::kLimit}) {
    EXPECT_GT(cov.codes[code], 0u) << StatusCodeName(code);
  }
  for (LockOutcome o : {LockOutcome::kGranted, LockOutcome::kQueued, LockOutcome::kWouldBlock}) {
    EXPECT_GT(cov.outcomes[o], 0u);
  }
  EXPECT_GT(cov.shared_runs, 0u);
  EXPECT_GT(cov.delays, 0u);
  EXPECT_GT(cov.delay_grants, 0u);
}

}  // namespace
}  // namespace tumbler::core

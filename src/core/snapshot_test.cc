// Snapshot round trips, determinism, and rejection of corrupt snapshots
// (docs/snapshot-format.md). The corrupt ones are built by hand from the
// documented format, so these tests also check the document.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/batch_codec.h"
#include "core/state_machine.h"

namespace tumbler::core {
namespace {

// --- Building machines with commands -------------------------------------------

struct Driver {
  explicit Driver(StateMachine* sm) : sm(sm) {}
  CommandResult Do(CommandView c) {
    fx.Clear();
    return sm->Apply(c, now, &fx);
  }
  uint64_t Open(std::string_view label = "") {
    CommandView c;
    c.type = CommandType::kOpenSession;
    c.ttl_ms = 1000;
    c.name = label;
    return Do(c).session;
  }
  CommandResult Lock(std::string_view name, uint64_t s, std::string_view owner = "",
                     bool shared = false, bool wait = false) {
    CommandView c;
    c.type = CommandType::kLock;
    c.name = name;
    c.session = s;
    c.owner = owner;
    c.shared = shared;
    c.wait = wait;
    return Do(c);
  }
  CommandResult Expire(uint64_t s, uint32_t delay) {
    CommandView c;
    c.type = CommandType::kExpireSession;
    c.session = s;
    c.lock_delay_ms = delay;
    return Do(c);
  }
  StateMachine* sm;
  Effects fx;
  uint64_t now = 10'000;
};

// Sessions with labels, exclusive and shared locks, reentrant counts, queues,
// lock-delay, binary names.
void BuildRichState(StateMachine* sm) {
  Driver d(sm);
  uint64_t a = d.Open("alpha"), b = d.Open(), c = d.Open(std::string("\0\xff", 2));
  uint64_t e = d.Open("expires");
  d.Lock("excl", a, "t1");
  d.Lock("excl", a, "t1");
  d.Lock("excl", b, "", false, true);
  d.Lock("excl", c, "r", true, true);
  d.Lock("shared", a, "", true);
  d.Lock("shared", b, "x", true);
  d.Lock("shared", c, "", true);
  d.Lock(std::string("bin\0name", 8), c, std::string("o\n", 2));
  d.Lock("delayed", e);
  d.Lock("delayed-free", e);
  d.Lock("delayed", b, "w", false, true);
  d.now += 5;
  d.Expire(e, 500);
  d.now += 1;
}

std::string Encode(const StateMachine& sm) {
  std::string out;
  sm.EncodeSnapshot(&out);
  return out;
}

TEST(SnapshotTest, RoundTripGivesIdenticalBytes) {
  StateMachine sm;
  BuildRichState(&sm);
  std::string snap = Encode(sm);
  StateMachine restored;
  ASSERT_TRUE(restored.DecodeSnapshot(snap).ok());
  EXPECT_EQ(Encode(restored), snap);
  // Queries agree too.
  for (const char* name : {"excl", "shared", "delayed", "delayed-free"}) {
    auto a = sm.Inspect(name), b = restored.Inspect(name);
    ASSERT_TRUE(a.has_value()) << name;
    ASSERT_TRUE(b.has_value()) << name;
    EXPECT_EQ(a->holders.size(), b->holders.size());
    EXPECT_EQ(a->waiters.size(), b->waiters.size());
    EXPECT_EQ(a->delay_until_ms, b->delay_until_ms);
    EXPECT_EQ(a->token, b->token);
  }
  EXPECT_EQ(sm.WaitIds(), restored.WaitIds());
  EXPECT_EQ(sm.NextDelayEndMs(), restored.NextDelayEndMs());
  EXPECT_EQ(sm.GetStats().holds, restored.GetStats().holds);
  EXPECT_EQ(sm.GetStats().last_token, restored.GetStats().last_token);
  EXPECT_EQ(sm.log_time_ms(), restored.log_time_ms());
  EXPECT_EQ(sm.GetSession(1)->holds, restored.GetSession(1)->holds);
  EXPECT_EQ(sm.GetSession(2)->waiting, restored.GetSession(2)->waiting);
  EXPECT_EQ(sm.GetSession(3)->label, restored.GetSession(3)->label);
}

TEST(SnapshotTest, EmptyMachineRoundTrip) {
  StateMachine sm;
  std::string snap = Encode(sm);
  EXPECT_EQ(snap.size(), 1u + 4 * 8 + 4 + 4 + 8 + 2 + 4);
  StateMachine restored;
  ASSERT_TRUE(restored.DecodeSnapshot(snap).ok());
  EXPECT_EQ(Encode(restored), snap);
}

TEST(SnapshotTest, EncodingIsDeterministicAndAppends) {
  StateMachine a, b;
  BuildRichState(&a);
  BuildRichState(&b);
  EXPECT_EQ(Encode(a), Encode(b));
  std::string out = "prefix";
  a.EncodeSnapshot(&out);
  EXPECT_EQ(out, "prefix" + Encode(a));
}

TEST(SnapshotTest, RestoredMachineBehavesTheSame) {
  StateMachine sm;
  BuildRichState(&sm);
  StateMachine restored;
  ASSERT_TRUE(restored.DecodeSnapshot(Encode(sm)).ok());
  Driver d1(&sm), d2(&restored);
  d1.now = d2.now = 20'000;  // past the lock-delay
  auto step = [&](auto&& f) {
    CommandResult r1 = f(d1), r2 = f(d2);
    EXPECT_EQ(r1.status, r2.status);
    EXPECT_EQ(r1.token, r2.token);
    EXPECT_EQ(r1.wait_id, r2.wait_id);
    EXPECT_EQ(d1.fx.grants.size(), d2.fx.grants.size());
  };
  step([](Driver& d) { return d.Lock("shared", d.Open(), "", true); });
  step([](Driver& d) { return d.Lock("excl", 2, "y", false, true); });
  step([](Driver& d) {
    CommandView c;
    c.type = CommandType::kCloseSession;
    c.session = 1;
    return d.Do(c);
  });
  EXPECT_EQ(Encode(sm), Encode(restored));
}

// --- Rejection keeps the state ------------------------------------------------------

class SnapshotRejectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Driver d(&target_);
    d.Lock("mine", d.Open("keep me"));
    before_ = Encode(target_);
  }
  // Decoding `bytes` fails with ERR and leaves target_ as it was.
  void ExpectRejected(std::string_view bytes, const char* what = "") {
    Status st = target_.DecodeSnapshot(bytes);
    EXPECT_EQ(st.code(), StatusCode::kErr) << what << ": " << st.ToString();
    EXPECT_EQ(Encode(target_), before_) << what;
  }
  StateMachine target_;
  std::string before_;
};

std::string WithCrc(std::string body) {
  uint32_t crc = Crc32c(body);
  for (int i = 0; i < 4; ++i) body.push_back(static_cast<char>(crc >> (8 * i)));
  return body;
}

TEST_F(SnapshotRejectTest, EveryTruncation) {
  StateMachine sm;
  BuildRichState(&sm);
  std::string snap = Encode(sm);
  for (size_t n = 0; n < snap.size(); ++n) ExpectRejected(snap.substr(0, n), "truncated");
}

TEST_F(SnapshotRejectTest, EveryTruncationWithValidChecksum) {
  StateMachine sm;
  BuildRichState(&sm);
  std::string body = Encode(sm);
  body.resize(body.size() - 4);
  for (size_t n = 1; n < body.size(); ++n) ExpectRejected(WithCrc(body.substr(0, n)));
}

TEST_F(SnapshotRejectTest, EveryFlippedByte) {
  StateMachine sm;
  BuildRichState(&sm);
  std::string snap = Encode(sm);
  for (size_t i = 0; i < snap.size(); ++i) {
    std::string bad = snap;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    ExpectRejected(bad, "flipped");
  }
}

TEST_F(SnapshotRejectTest, BadVersionAndTrailingBytes) {
  StateMachine sm;
  BuildRichState(&sm);
  std::string body = Encode(sm);
  body.resize(body.size() - 4);
  std::string v2 = body;
  v2[0] = 3;
  ExpectRejected(WithCrc(v2), "version 3");
  v2[0] = 0;
  ExpectRejected(WithCrc(v2), "version 0");
  ExpectRejected(WithCrc(body + "x"), "trailing");
  EXPECT_TRUE(target_.DecodeSnapshot(WithCrc(body)).ok());
}

// --- Hand-built snapshots with valid checksums but bad content ---------------------------

struct HolderD {
  uint64_t session;
  std::string owner;
  uint32_t count;
  uint64_t token;
};
struct WaiterD {
  uint64_t wait_id;
  uint64_t session;
  std::string owner;
  uint8_t shared;
};
struct LockD {
  std::string name;
  uint64_t delay_until_ms = 0;
  uint8_t mode = 0;
  std::vector<HolderD> holders;
  std::vector<WaiterD> waiters;
};
struct SessionD {
  uint64_t id;
  uint32_t ttl_ms;
  std::string label;
};
struct SnapD {
  uint8_t version = 2;
  uint64_t log_time_ms = 100;
  uint64_t last_token = 10;
  uint64_t last_session_id = 3;
  uint64_t last_wait_id = 6;
  std::vector<SessionD> sessions;
  std::vector<LockD> locks;
  uint64_t announced_node_id = 2;        // version 2
  std::string announced_address = "127.0.0.1:7421";
};

class Bytes {
 public:
  void U8(uint64_t v) { Le(v, 1); }
  void U16(uint64_t v) { Le(v, 2); }
  void U32(uint64_t v) { Le(v, 4); }
  void U64(uint64_t v) { Le(v, 8); }
  void Str(std::string_view s) {
    U16(s.size());
    out_.append(s);
  }
  std::string out_;

 private:
  void Le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
  }
};

std::string Build(const SnapD& d) {
  Bytes b;
  b.U8(d.version);
  b.U64(d.log_time_ms);
  b.U64(d.last_token);
  b.U64(d.last_session_id);
  b.U64(d.last_wait_id);
  b.U32(d.sessions.size());
  for (const auto& s : d.sessions) {
    b.U64(s.id);
    b.U32(s.ttl_ms);
    b.Str(s.label);
  }
  b.U32(d.locks.size());
  for (const auto& l : d.locks) {
    b.Str(l.name);
    b.U64(l.delay_until_ms);
    b.U8(l.mode);
    b.U32(l.holders.size());
    for (const auto& h : l.holders) {
      b.U64(h.session);
      b.Str(h.owner);
      b.U32(h.count);
      b.U64(h.token);
    }
    b.U32(l.waiters.size());
    for (const auto& w : l.waiters) {
      b.U64(w.wait_id);
      b.U64(w.session);
      b.Str(w.owner);
      b.U8(w.shared);
    }
  }
  if (d.version >= 2) {
    b.U64(d.announced_node_id);
    b.Str(d.announced_address);
  }
  return WithCrc(b.out_);
}

// A valid snapshot touching every field: an exclusive lock with a queue, a
// shared lock with two holders, a lock in lock-delay with a waiter.
SnapD Valid() {
  SnapD d;
  d.sessions = {{1, 1000, "a"}, {3, 100, ""}};
  d.locks = {
      {"a", 0, 1, {{1, "", 2, 3}}, {{4, 3, "", 1}, {6, 1, "z", 0}}},
      {"b", 0, 2, {{1, "x", 1, 5}, {3, "", 1, 7}}, {}},
      {"c", 200, 0, {}, {{5, 1, "", 1}}},
  };
  return d;
}

TEST(SnapshotFormatTest, HandBuiltSnapshotMatchesTheDocument) {
  std::string snap = Build(Valid());
  StateMachine sm;
  Status st = sm.DecodeSnapshot(snap);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Encode(sm), snap);
  EXPECT_EQ(sm.Inspect("a")->holders[0].count, 2u);
  EXPECT_EQ(sm.Inspect("c")->delay_until_ms, 200u);
  EXPECT_EQ(sm.WaitIds(), (std::vector<uint64_t>{4, 5, 6}));
  EXPECT_EQ(sm.GetStats().last_token, 10u);
  EXPECT_EQ(sm.announced_node_id(), 2u);
  EXPECT_EQ(sm.announced_address(), "127.0.0.1:7421");
}

TEST(SnapshotFormatTest, Version1SnapshotsAreStillRead) {
  SnapD d = Valid();
  d.version = 1;
  StateMachine sm;
  Status st = sm.DecodeSnapshot(Build(d));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(sm.Inspect("a")->holders[0].count, 2u);
  EXPECT_EQ(sm.announced_node_id(), 0u);
  EXPECT_EQ(sm.announced_address(), "");
  // Written back as the current version, with no leader announced.
  d.version = 2;
  d.announced_node_id = 0;
  d.announced_address = "";
  EXPECT_EQ(Encode(sm), Build(d));
}

TEST_F(SnapshotRejectTest, BadContent) {
  struct Case {
    const char* what;
    void (*mutate)(SnapD*);
  };
  const Case cases[] = {
      {"counter too large", [](SnapD* d) { d->last_token = uint64_t{1} << 63; }},
      {"session ids not ascending", [](SnapD* d) { std::swap(d->sessions[0], d->sessions[1]); }},
      {"duplicate session", [](SnapD* d) { d->sessions[1].id = 1; }},
      {"session id past counter", [](SnapD* d) { d->last_session_id = 2; }},
      {"ttl too small", [](SnapD* d) { d->sessions[0].ttl_ms = 99; }},
      {"ttl too large", [](SnapD* d) { d->sessions[0].ttl_ms = 3'600'001; }},
      {"label too long", [](SnapD* d) { d->sessions[0].label.assign(257, 'l'); }},
      {"lock names not ascending", [](SnapD* d) { std::swap(d->locks[0], d->locks[1]); }},
      {"duplicate lock name", [](SnapD* d) { d->locks[1].name = "a"; }},
      {"empty lock name", [](SnapD* d) { d->locks[0].name = ""; }},
      {"lock name too long", [](SnapD* d) { d->locks[2].name.assign(1025, 'c'); }},
      {"bad mode", [](SnapD* d) { d->locks[0].mode = 3; }},
      {"mode free with holders", [](SnapD* d) { d->locks[0].mode = 0; }},
      {"mode set without holders", [](SnapD* d) { d->locks[2].mode = 1; }},
      {"two exclusive holders", [](SnapD* d) { d->locks[1].mode = 1; }},
      {"holder without session", [](SnapD* d) { d->locks[0].holders[0].session = 2; }},
      {"owner too long", [](SnapD* d) { d->locks[0].holders[0].owner.assign(257, 'o'); }},
      {"hold count 0", [](SnapD* d) { d->locks[0].holders[0].count = 0; }},
      {"hold count too large", [](SnapD* d) { d->locks[0].holders[0].count = 1'000'001; }},
      {"token past counter", [](SnapD* d) { d->locks[1].holders[1].token = 11; }},
      {"token 0", [](SnapD* d) { d->locks[0].holders[0].token = 0; }},
      {"announced address too long", [](SnapD* d) { d->announced_address.assign(256, 'h'); }},
      {"tokens not ascending", [](SnapD* d) { d->locks[1].holders[1].token = 5; }},
      {"same holder twice", [](SnapD* d) { d->locks[1].holders[1] = {1, "x", 1, 8}; }},
      {"waiter without session", [](SnapD* d) { d->locks[0].waiters[0].session = 9; }},
      {"waiter also holds", [](SnapD* d) { d->locks[0].waiters[0] = {4, 1, "", 1}; }},
      {"waiter twice", [](SnapD* d) { d->locks[0].waiters[1] = {6, 3, "", 0}; }},
      {"waiter bad mode", [](SnapD* d) { d->locks[0].waiters[0].shared = 2; }},
      {"wait ids not ascending", [](SnapD* d) { std::swap(d->locks[0].waiters[0], d->locks[0].waiters[1]); }},
      {"wait id past counter", [](SnapD* d) { d->last_wait_id = 5; }},
      {"wait id 0", [](SnapD* d) { d->locks[2].waiters[0].wait_id = 0; }},
      {"wait id used twice", [](SnapD* d) { d->locks[2].waiters[0].wait_id = 4; }},
      {"free lock with nothing", [](SnapD* d) { d->locks[2].delay_until_ms = 0; d->locks[2].waiters.clear(); }},
      {"grantable head (free)", [](SnapD* d) { d->locks[2].delay_until_ms = 0; }},
      {"grantable head (shared)", [](SnapD* d) { d->locks[1].waiters = {{6, 1, "q", 1}}; d->locks[0].waiters.pop_back(); }},
      {"held during lock-delay", [](SnapD* d) { d->locks[0].delay_until_ms = 500; }},
      {"lock-delay already over", [](SnapD* d) { d->locks[2].delay_until_ms = 100; }},
  };
  for (const Case& c : cases) {
    SnapD d = Valid();
    c.mutate(&d);
    ExpectRejected(Build(d), c.what);
  }
  // The unmodified one is accepted by the same machine.
  EXPECT_TRUE(target_.DecodeSnapshot(Build(Valid())).ok());
}

TEST_F(SnapshotRejectTest, HugeCountsDoNotAllocate) {
  SnapD d;
  d.version = 1;  // the layout that ends with the lock count
  d.sessions = {{1, 1000, ""}};
  std::string body = Build(d);
  body.resize(body.size() - 4 - 4);  // drop crc and lock count
  Bytes b;
  b.U32(0xFFFFFFFFu);  // four billion locks promised, none present
  ExpectRejected(WithCrc(body + b.out_), "lock count");
  Bytes s;
  s.U8(1);
  for (int i = 0; i < 4; ++i) s.U64(0);
  s.U32(0xFFFFFFFFu);
  ExpectRejected(WithCrc(s.out_), "session count");
}

}  // namespace
}  // namespace tumbler::core

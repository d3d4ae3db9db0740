// Unit tests for the rules in docs/commands.md, good and bad inputs.
#include "core/state_machine.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace tumbler::core {
namespace {

class StateMachineTest : public ::testing::Test {
 protected:
  void Reset(Bounds bounds) { sm_ = std::make_unique<StateMachine>(bounds); }

  CommandResult Apply(const CommandView& cmd) {
    fx_.Clear();
    return sm_->Apply(cmd, now_, &fx_);
  }
  uint64_t Open(uint32_t ttl_ms = 1000, std::string_view label = "") {
    CommandResult r = OpenResult(ttl_ms, label);
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    return r.session;
  }
  CommandResult OpenResult(uint32_t ttl_ms, std::string_view label = "") {
    CommandView c;
    c.type = CommandType::kOpenSession;
    c.ttl_ms = ttl_ms;
    c.name = label;
    return Apply(c);
  }
  CommandResult Lock(std::string_view name, uint64_t session, std::string_view owner = "",
                     bool shared = false, bool wait = false) {
    CommandView c;
    c.type = CommandType::kLock;
    c.name = name;
    c.session = session;
    c.owner = owner;
    c.shared = shared;
    c.wait = wait;
    return Apply(c);
  }
  CommandResult Wait(std::string_view name, uint64_t session, std::string_view owner = "",
                     bool shared = false) {
    return Lock(name, session, owner, shared, true);
  }
  CommandResult Unlock(std::string_view name, uint64_t session, std::string_view owner = "") {
    CommandView c;
    c.type = CommandType::kUnlock;
    c.name = name;
    c.session = session;
    c.owner = owner;
    return Apply(c);
  }
  CommandResult Close(uint64_t session) {
    CommandView c;
    c.type = CommandType::kCloseSession;
    c.session = session;
    return Apply(c);
  }
  CommandResult Expire(uint64_t session, uint32_t lock_delay_ms) {
    CommandView c;
    c.type = CommandType::kExpireSession;
    c.session = session;
    c.lock_delay_ms = lock_delay_ms;
    return Apply(c);
  }
  CommandResult CancelWait(uint64_t wait_id) {
    CommandView c;
    c.type = CommandType::kCancelWait;
    c.wait_id = wait_id;
    return Apply(c);
  }
  CommandResult CancelAll() {
    CommandView c;
    c.type = CommandType::kCancelAllWaits;
    return Apply(c);
  }
  CommandResult Tick(uint64_t at_ms) {
    now_ = at_ms;
    CommandView c;
    c.type = CommandType::kTick;
    return Apply(c);
  }
  std::string Snapshot() const {
    std::string out;
    sm_->EncodeSnapshot(&out);
    return out;
  }
  uint64_t Token(const CommandResult& r) {
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.lock_outcome, LockOutcome::kGranted);
    return r.token;
  }
  uint64_t WaitId(const CommandResult& r) {
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.lock_outcome, LockOutcome::kQueued);
    return r.wait_id;
  }

  std::unique_ptr<StateMachine> sm_ = std::make_unique<StateMachine>();
  Effects fx_;
  uint64_t now_ = 1000;
};

#define EXPECT_CODE(result, want) \
  EXPECT_EQ((result).status.code(), (want)) << (result).status.ToString()

// --- Sessions -------------------------------------------------------------------

TEST_F(StateMachineTest, SessionIdsStartAtOneAndAreNeverReused) {
  EXPECT_EQ(Open(), 1u);
  EXPECT_EQ(Open(), 2u);
  EXPECT_TRUE(Close(2).status.ok());
  EXPECT_EQ(Open(), 3u);
  EXPECT_TRUE(sm_->SessionExists(1));
  EXPECT_FALSE(sm_->SessionExists(2));
  EXPECT_EQ(sm_->ListSessions(10), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(sm_->ListSessions(1), (std::vector<uint64_t>{1}));
}

TEST_F(StateMachineTest, OpenTtlRange) {
  EXPECT_CODE(OpenResult(0), StatusCode::kErr);
  EXPECT_CODE(OpenResult(99), StatusCode::kErr);
  EXPECT_CODE(OpenResult(3'600'001), StatusCode::kErr);
  EXPECT_EQ(sm_->GetStats().sessions, 0u);
  EXPECT_EQ(Open(100), 1u);
  EXPECT_EQ(Open(3'600'000), 2u);
  auto ttls = sm_->SessionTtls();
  ASSERT_EQ(ttls.size(), 2u);
  EXPECT_EQ(ttls[0], (std::pair<uint64_t, uint32_t>{1, 100}));
  EXPECT_EQ(ttls[1], (std::pair<uint64_t, uint32_t>{2, 3'600'000}));
}

TEST_F(StateMachineTest, OpenLabelBound) {
  std::string label(256, 'x');
  uint64_t s = Open(1000, label);
  EXPECT_EQ(sm_->GetSession(s)->label, label);
  EXPECT_EQ(sm_->GetSession(s)->ttl_ms, 1000u);
  label.push_back('x');
  EXPECT_CODE(OpenResult(1000, label), StatusCode::kLimit);
  // A bad ttl is ERR even with a label that is too long: ranges come first.
  EXPECT_CODE(OpenResult(5, label), StatusCode::kErr);
  EXPECT_EQ(sm_->GetStats().sessions, 1u);
}

TEST_F(StateMachineTest, SessionsMax) {
  Reset({.sessions_max = 2});
  Open();
  Open();
  EXPECT_CODE(OpenResult(1000), StatusCode::kLimit);
  EXPECT_TRUE(Close(1).status.ok());
  EXPECT_EQ(Open(), 3u);
}

TEST_F(StateMachineTest, CloseUnknownSession) {
  CommandResult r = Close(7);
  EXPECT_CODE(r, StatusCode::kNoSession);
  EXPECT_EQ(r.status.ToString(), "NOSESSION session 7 does not exist");
  EXPECT_CODE(Expire(7, 0), StatusCode::kNoSession);
  EXPECT_FALSE(sm_->GetSession(7).has_value());
}

TEST_F(StateMachineTest, CloseReleasesHoldsOncePerLockOwnerPair) {
  uint64_t s = Open();
  Token(Lock("a", s));
  Token(Lock("a", s));  // reentrant: still one hold
  Token(Lock("b", s, "t1", true));
  Token(Lock("b", s, "t2", true));
  EXPECT_EQ(sm_->GetStats().holds, 3u);
  CommandResult r = Close(s);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.released, 3u);
  EXPECT_EQ(fx_.sessions_ended, (std::vector<uint64_t>{s}));
  EXPECT_TRUE(sm_->ListLocks("", 10).empty());
  EXPECT_EQ(sm_->GetStats().holds, 0u);
  EXPECT_FALSE(sm_->SessionExists(s));
}

TEST_F(StateMachineTest, CloseEndsWaitsAndServesQueues) {
  uint64_t a = Open(), b = Open(), c = Open();
  Token(Lock("x", a));
  Token(Lock("y", b));
  uint64_t w1 = WaitId(Wait("y", a));
  uint64_t w2 = WaitId(Wait("x", c));
  uint64_t w3 = WaitId(Wait("x", Open()));
  CommandResult r = Close(a);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.released, 1u);
  ASSERT_EQ(fx_.ended.size(), 1u);
  EXPECT_EQ(fx_.ended[0].wait_id, w1);
  EXPECT_EQ(fx_.ended[0].reason, StatusCode::kNoSession);
  ASSERT_EQ(fx_.grants.size(), 1u);  // x goes to c, first in its queue
  EXPECT_EQ(fx_.grants[0].wait_id, w2);
  EXPECT_EQ(fx_.grants[0].session, c);
  EXPECT_EQ(fx_.grants[0].token, 3u);
  EXPECT_EQ(fx_.grants[0].hold_count, 1u);
  EXPECT_EQ(sm_->WaitIds(), (std::vector<uint64_t>{w3}));
}

TEST_F(StateMachineTest, GetSessionListsHoldsAndWaitsSorted) {
  uint64_t a = Open(1000, "me"), b = Open();
  Token(Lock("zz", a));
  Token(Lock("aa", a));
  Token(Lock("mm", a, "t1", true));
  Token(Lock("mm", a, "t2", true));
  Token(Lock("q", b));
  WaitId(Wait("q", a));
  auto info = sm_->GetSession(a);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->label, "me");
  EXPECT_EQ(info->holds, (std::vector<std::string>{"aa", "mm", "zz"}));
  EXPECT_EQ(info->waiting, (std::vector<std::string>{"q"}));
}

// --- Lock argument checks and precedence ------------------------------------------

TEST_F(StateMachineTest, LockNameAndOwnerBounds) {
  uint64_t s = Open();
  EXPECT_CODE(Lock("", s), StatusCode::kErr);
  EXPECT_CODE(Lock(std::string(1025, 'n'), s), StatusCode::kLimit);
  EXPECT_CODE(Lock("n", s, std::string(257, 'o')), StatusCode::kLimit);
  Token(Lock(std::string(1024, 'n'), s, std::string(256, 'o')));
  EXPECT_CODE(Unlock("", s), StatusCode::kErr);
  EXPECT_CODE(Unlock(std::string(1025, 'n'), s), StatusCode::kLimit);
  EXPECT_CODE(Unlock("n", s, std::string(257, 'o')), StatusCode::kLimit);
}

TEST_F(StateMachineTest, LockErrorPrecedence) {
  // Syntax before lengths before state.
  EXPECT_CODE(Lock("", 99, std::string(300, 'o')), StatusCode::kErr);
  EXPECT_CODE(Lock(std::string(2000, 'n'), 99), StatusCode::kLimit);
  CommandResult r = Lock("n", 99);
  EXPECT_CODE(r, StatusCode::kNoSession);
  EXPECT_EQ(r.status.message(), "session 99 does not exist");
  EXPECT_CODE(Unlock("n", 99), StatusCode::kNoSession);
  EXPECT_TRUE(sm_->ListLocks("", 10).empty());
}

TEST_F(StateMachineTest, BinaryNamesAndOwners) {
  uint64_t s = Open();
  std::string name("a\0b\xff", 4);
  std::string owner("\0", 1);
  Token(Lock(name, s, owner));
  EXPECT_CODE(Lock(name, s), StatusCode::kOk);  // owner "" is another holder
  EXPECT_EQ(fx_.grants.size(), 0u);
  auto info = sm_->Inspect(name);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->holders[0].owner, owner);
}

// --- Grants, tokens, reentrancy, modes ---------------------------------------------

TEST_F(StateMachineTest, TokensStartAtOneAndIncreaseAcrossLocks) {
  uint64_t s = Open();
  CommandResult r = Lock("a", s);
  EXPECT_EQ(Token(r), 1u);
  EXPECT_EQ(r.hold_count, 1u);
  EXPECT_EQ(Token(Lock("b", s)), 2u);
  EXPECT_EQ(Token(Lock("c", s, "", true)), 3u);
  EXPECT_EQ(sm_->GetStats().last_token, 3u);
  EXPECT_TRUE(sm_->Check("a", 1));
  EXPECT_FALSE(sm_->Check("a", 2));
  EXPECT_FALSE(sm_->Check("zz", 1));
}

TEST_F(StateMachineTest, ReentrantGrantKeepsTokenEvenWithWaiters) {
  uint64_t a = Open(), b = Open();
  uint64_t t = Token(Lock("l", a, "x"));
  WaitId(Wait("l", b));
  CommandResult r = Lock("l", a, "x");
  EXPECT_EQ(Token(r), t);
  EXPECT_EQ(r.hold_count, 2u);
  r = Lock("l", a, "x", false, true);
  EXPECT_EQ(Token(r), t);
  EXPECT_EQ(r.hold_count, 3u);
  EXPECT_EQ(Unlock("l", a, "x").hold_count, 2u);
  EXPECT_EQ(Unlock("l", a, "x").hold_count, 1u);
  EXPECT_TRUE(fx_.grants.empty());
  CommandResult u = Unlock("l", a, "x");
  EXPECT_TRUE(u.status.ok());
  EXPECT_EQ(u.hold_count, 0u);
  ASSERT_EQ(fx_.grants.size(), 1u);
  EXPECT_EQ(fx_.grants[0].session, b);
  EXPECT_GT(fx_.grants[0].token, t);
}

TEST_F(StateMachineTest, ReentrantSharedHolder) {
  uint64_t a = Open();
  uint64_t t = Token(Lock("l", a, "", true));
  CommandResult r = Lock("l", a, "", true);
  EXPECT_EQ(Token(r), t);
  EXPECT_EQ(r.hold_count, 2u);
}

TEST_F(StateMachineTest, HoldCountBound) {
  uint64_t a = Open();
  Token(Lock("l", a));
  for (uint32_t i = 2; i <= limits::kHoldCountMax; ++i) {
    CommandResult r = Lock("l", a);
    ASSERT_TRUE(r.status.ok());
    ASSERT_EQ(r.hold_count, i);
  }
  EXPECT_CODE(Lock("l", a), StatusCode::kLimit);
  EXPECT_EQ(sm_->Inspect("l")->holders[0].count, limits::kHoldCountMax);
}

TEST_F(StateMachineTest, WrongModeBothWays) {
  uint64_t a = Open();
  Token(Lock("x", a, "o"));
  CommandResult r = Lock("x", a, "o", true);
  EXPECT_CODE(r, StatusCode::kWrongMode);
  EXPECT_NE(r.status.message().find("\"x\""), std::string::npos);
  EXPECT_CODE(Lock("x", a, "o", true, true), StatusCode::kWrongMode);
  Token(Lock("s", a, "o", true));
  EXPECT_CODE(Lock("s", a, "o", false), StatusCode::kWrongMode);
  EXPECT_CODE(Lock("s", a, "o", false, true), StatusCode::kWrongMode);
  EXPECT_EQ(sm_->Inspect("s")->holders[0].count, 1u);
  EXPECT_TRUE(sm_->WaitIds().empty());
}

TEST_F(StateMachineTest, OwnersOfOneSessionAreDifferentHolders) {
  uint64_t a = Open();
  Token(Lock("x", a, "t1"));
  CommandResult r = Lock("x", a, "t2");
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.lock_outcome, LockOutcome::kWouldBlock);
  EXPECT_CODE(Unlock("x", a, "t2"), StatusCode::kNotHeld);
}

TEST_F(StateMachineTest, SharedHoldersTogetherExclusiveExcluded) {
  uint64_t a = Open(), b = Open(), c = Open();
  uint64_t t1 = Token(Lock("l", a, "", true));
  uint64_t t2 = Token(Lock("l", b, "", true));
  EXPECT_GT(t2, t1);  // each shared holder has its own token
  CommandResult r = Lock("l", c);
  EXPECT_EQ(r.lock_outcome, LockOutcome::kWouldBlock);
  auto info = sm_->Inspect("l");
  EXPECT_EQ(info->mode, LockMode::kShared);
  EXPECT_EQ(info->token, t2);
  ASSERT_EQ(info->holders.size(), 2u);
  EXPECT_EQ(info->holders[0].token, t1);
  EXPECT_EQ(info->holders[1].token, t2);
  EXPECT_TRUE(sm_->Check("l", t1));
  EXPECT_TRUE(sm_->Check("l", t2));
  // An exclusive lock excludes shared requests.
  Token(Lock("e", a));
  EXPECT_EQ(Lock("e", b, "", true).lock_outcome, LockOutcome::kWouldBlock);
}

TEST_F(StateMachineTest, TryLockChangesNothing) {
  uint64_t a = Open(), b = Open();
  Token(Lock("l", a));
  std::string before = Snapshot();
  CommandResult r = Lock("l", b);
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.lock_outcome, LockOutcome::kWouldBlock);
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(StateMachineTest, SameHolderWaitingTwiceIsErr) {
  uint64_t a = Open(), b = Open();
  Token(Lock("l", a));
  WaitId(Wait("l", b, "o"));
  EXPECT_CODE(Wait("l", b, "o"), StatusCode::kErr);
  EXPECT_CODE(Lock("l", b, "o"), StatusCode::kErr);
  EXPECT_CODE(Wait("l", b, "o", true), StatusCode::kErr);
  WaitId(Wait("l", b, "other"));
  EXPECT_EQ(sm_->Inspect("l")->waiters.size(), 2u);
}

// --- Queues -------------------------------------------------------------------------

TEST_F(StateMachineTest, FifoGrantOrder) {
  uint64_t a = Open(), b = Open(), c = Open(), d = Open();
  Token(Lock("l", a));
  uint64_t wb = WaitId(Wait("l", b));
  uint64_t wc = WaitId(Wait("l", c));
  uint64_t wd = WaitId(Wait("l", d));
  auto info = sm_->Inspect("l");
  ASSERT_EQ(info->waiters.size(), 3u);
  EXPECT_EQ(info->waiters[0].wait_id, wb);
  EXPECT_EQ(info->waiters[2].wait_id, wd);
  Unlock("l", a);
  ASSERT_EQ(fx_.grants.size(), 1u);
  EXPECT_EQ(fx_.grants[0].wait_id, wb);
  uint64_t tb = fx_.grants[0].token;
  Unlock("l", b);
  ASSERT_EQ(fx_.grants.size(), 1u);
  EXPECT_EQ(fx_.grants[0].wait_id, wc);
  EXPECT_GT(fx_.grants[0].token, tb);
  Unlock("l", c);
  ASSERT_EQ(fx_.grants.size(), 1u);
  EXPECT_EQ(fx_.grants[0].wait_id, wd);
  EXPECT_EQ(sm_->Inspect("l")->holders[0].session, d);
}

TEST_F(StateMachineTest, SharedRunGrantedTogetherUpToExclusive) {
  uint64_t a = Open(), b = Open(), c = Open(), d = Open(), e = Open();
  Token(Lock("l", a));
  uint64_t w1 = WaitId(Wait("l", b, "", true));
  uint64_t w2 = WaitId(Wait("l", c, "", true));
  uint64_t w3 = WaitId(Wait("l", d));
  uint64_t w4 = WaitId(Wait("l", e, "", true));
  Unlock("l", a);
  ASSERT_EQ(fx_.grants.size(), 2u);
  EXPECT_EQ(fx_.grants[0].wait_id, w1);
  EXPECT_EQ(fx_.grants[1].wait_id, w2);
  EXPECT_LT(fx_.grants[0].token, fx_.grants[1].token);
  EXPECT_EQ(sm_->WaitIds(), (std::vector<uint64_t>{w3, w4}));
  Unlock("l", b);
  EXPECT_TRUE(fx_.grants.empty());
  Unlock("l", c);
  ASSERT_EQ(fx_.grants.size(), 1u);
  EXPECT_EQ(fx_.grants[0].wait_id, w3);
  Unlock("l", d);
  ASSERT_EQ(fx_.grants.size(), 1u);
  EXPECT_EQ(fx_.grants[0].wait_id, w4);
}

TEST_F(StateMachineTest, ReaderDoesNotBargePastQueuedWriter) {
  uint64_t a = Open(), w = Open(), r = Open();
  Token(Lock("l", a, "", true));
  WaitId(Wait("l", w));
  EXPECT_EQ(Lock("l", r, "", true).lock_outcome, LockOutcome::kWouldBlock);
  uint64_t wr = WaitId(Wait("l", r, "", true));
  Unlock("l", a);
  ASSERT_EQ(fx_.grants.size(), 1u);
  EXPECT_EQ(fx_.grants[0].session, w);
  Unlock("l", w);
  ASSERT_EQ(fx_.grants.size(), 1u);
  EXPECT_EQ(fx_.grants[0].wait_id, wr);
}

// --- Unlock --------------------------------------------------------------------------

TEST_F(StateMachineTest, UnlockErrors) {
  uint64_t a = Open(), b = Open();
  EXPECT_CODE(Unlock("l", a), StatusCode::kNotHeld);  // no such lock
  Token(Lock("l", a, "x"));
  CommandResult r = Unlock("l", b);
  EXPECT_CODE(r, StatusCode::kNotHeld);
  EXPECT_EQ(r.status.message(), "session 2 owner \"\" does not hold \"l\"");
  EXPECT_CODE(Unlock("l", a), StatusCode::kNotHeld);  // other owner
  EXPECT_CODE(Unlock("l", 42), StatusCode::kNoSession);
  // A waiter does not hold.
  WaitId(Wait("l", b));
  EXPECT_CODE(Unlock("l", b), StatusCode::kNotHeld);
  EXPECT_EQ(sm_->Inspect("l")->holders[0].count, 1u);
}

TEST_F(StateMachineTest, LockDisappearsWhenFree) {
  uint64_t a = Open(), b = Open();
  Token(Lock("l", a));
  EXPECT_EQ(sm_->ListLocks("", 10), (std::vector<std::string>{"l"}));
  EXPECT_EQ(Unlock("l", a).hold_count, 0u);
  EXPECT_FALSE(sm_->Inspect("l").has_value());
  EXPECT_TRUE(sm_->ListLocks("", 10).empty());
  EXPECT_EQ(sm_->GetStats().locks, 0u);
  // Held, then waited on, then the waiter cancels and the holder leaves.
  Token(Lock("m", a));
  uint64_t w = WaitId(Wait("m", b));
  EXPECT_TRUE(CancelWait(w).status.ok());
  EXPECT_TRUE(sm_->Inspect("m").has_value());
  Unlock("m", a);
  EXPECT_FALSE(sm_->Inspect("m").has_value());
}

TEST_F(StateMachineTest, ListLocksPrefixAndCount) {
  uint64_t a = Open();
  for (const char* n : {"b/2", "a/1", "b/1", "b", "c", "b/3"}) Token(Lock(n, a));
  EXPECT_EQ(sm_->ListLocks("b/", 10), (std::vector<std::string>{"b/1", "b/2", "b/3"}));
  EXPECT_EQ(sm_->ListLocks("b", 2), (std::vector<std::string>{"b", "b/1"}));
  EXPECT_EQ(sm_->ListLocks("", 100).size(), 6u);
  EXPECT_TRUE(sm_->ListLocks("zz", 10).empty());
  EXPECT_TRUE(sm_->ListLocks("", 0).empty());
}

// --- Deadlock --------------------------------------------------------------------------

TEST_F(StateMachineTest, DeadlockTwoCycle) {
  uint64_t s1 = Open(), s2 = Open();
  Token(Lock("L1", s1, "a"));
  Token(Lock("L2", s2));
  WaitId(Wait("L2", s1, "a"));
  std::string before = Snapshot();
  CommandResult r = Wait("L1", s2);
  EXPECT_CODE(r, StatusCode::kDeadlock);
  EXPECT_EQ(r.status.message(),
            "cycle: session 2 owner \"\" waits for \"L1\" held by session 1 owner \"a\" "
            "which waits for \"L2\" held by session 2 owner \"\"");
  EXPECT_EQ(Snapshot(), before);
  // A try-lock is not checked: it does not wait.
  EXPECT_EQ(Lock("L1", s2).lock_outcome, LockOutcome::kWouldBlock);
}

TEST_F(StateMachineTest, DeadlockThreeCycle) {
  uint64_t s1 = Open(), s2 = Open(), s3 = Open();
  Token(Lock("A", s1));
  Token(Lock("B", s2));
  Token(Lock("C", s3));
  WaitId(Wait("B", s1));
  WaitId(Wait("C", s2));
  CommandResult r = Wait("A", s3);
  EXPECT_CODE(r, StatusCode::kDeadlock);
  const std::string& m = r.status.message();
  for (const char* part : {"session 1", "session 2", "session 3", "\"A\"", "\"B\"", "\"C\""}) {
    EXPECT_NE(m.find(part), std::string::npos) << part << " in " << m;
  }
  EXPECT_EQ(sm_->WaitIds().size(), 2u);
}

TEST_F(StateMachineTest, DeadlockBetweenTwoOwnersOfOneSession) {
  uint64_t s = Open();
  Token(Lock("A", s, "t1"));
  Token(Lock("B", s, "t2"));
  WaitId(Wait("B", s, "t1"));
  CommandResult r = Wait("A", s, "t2");
  EXPECT_CODE(r, StatusCode::kDeadlock);
  EXPECT_EQ(r.status.message(),
            "cycle: session 1 owner \"t2\" waits for \"A\" held by session 1 owner \"t1\" "
            "which waits for \"B\" held by session 1 owner \"t2\"");
}

TEST_F(StateMachineTest, DeadlockThroughWaiterAhead) {
  // s1 holds L1; s2 then s3 queue on L1; s3 holds L3. s2 asking for L3 would
  // wait for s3, which waits behind s2 on L1.
  uint64_t s1 = Open(), s2 = Open(), s3 = Open();
  Token(Lock("L1", s1));
  Token(Lock("L3", s3));
  WaitId(Wait("L1", s2));
  WaitId(Wait("L1", s3));
  CommandResult r = Wait("L3", s2);
  EXPECT_CODE(r, StatusCode::kDeadlock);
  EXPECT_EQ(r.status.message(),
            "cycle: session 2 owner \"\" waits for \"L3\" held by session 3 owner \"\" "
            "which waits for \"L1\" queued behind session 2 owner \"\"");
}

TEST_F(StateMachineTest, DeadlockThroughHolderWithSeveralWaits) {
  // s2 waits on two locks (two connections, one owner); the second closes it.
  uint64_t s1 = Open(), s2 = Open(), s3 = Open();
  Token(Lock("L1", s1));
  Token(Lock("L3", s3));
  WaitId(Wait("L1", s2));
  WaitId(Wait("L3", s2));
  CommandResult r = Wait("L1", s3);
  EXPECT_CODE(r, StatusCode::kDeadlock);
  EXPECT_NE(r.status.message().find("queued behind session 2"), std::string::npos)
      << r.status.message();
}

TEST_F(StateMachineTest, NoFalseDeadlock) {
  uint64_t s1 = Open(), s2 = Open(), s3 = Open();
  Token(Lock("L1", s1));
  Token(Lock("L2", s2));
  WaitId(Wait("L1", s2));   // s2 -> s1
  WaitId(Wait("L2", s3));   // s3 -> s2 -> s1: a chain, no cycle
  WaitId(Wait("L1", s3, "other"));
  // A waiter has no edge to the waiters behind it: s2 (ahead on L1) asking for
  // a lock held by the one behind it is fine as long as that one does not
  // reach s2.
  uint64_t s4 = Open();
  Token(Lock("L4", s4));
  WaitId(Wait("L4", s2, "t"));
  EXPECT_EQ(sm_->WaitIds().size(), 4u);
}

TEST_F(StateMachineTest, NoEdgeToWaitersBehind) {
  uint64_t s1 = Open(), s2 = Open(), s3 = Open();
  Token(Lock("L1", s1));
  Token(Lock("L2", s2));
  WaitId(Wait("L1", s2));  // head
  WaitId(Wait("L1", s3));  // behind s2
  // s3 waits for s2 (holder of L2); s2 waits only for s1. No cycle.
  WaitId(Wait("L2", s3, "t"));
}

TEST_F(StateMachineTest, DeadlockBeforeQueueFull) {
  Reset({.waiters_per_lock_max = 1});
  uint64_t s1 = Open(), s2 = Open(), s3 = Open();
  Token(Lock("L1", s1));
  Token(Lock("L2", s2));
  WaitId(Wait("L2", s1));
  WaitId(Wait("L1", s3));
  EXPECT_CODE(Wait("L1", s2), StatusCode::kDeadlock);
  EXPECT_CODE(Wait("L1", Open()), StatusCode::kLimit);
}

TEST_F(StateMachineTest, DeadlockWalkBudgetIsLimit) {
  // A holds "root" and waits on K locks held by B: a request for "root" walks
  // to A (1 edge), expands A's K waits (K) and reaches B from each (K).
  const uint64_t k = limits::kDeadlockVisitMax / 2 + 1;
  uint64_t a = Open(), b = Open(), r = Open();
  Token(Lock("root", a));
  for (uint64_t i = 0; i < k; ++i) {
    std::string name = "l" + std::to_string(i);
    ASSERT_EQ(Lock(name, b).lock_outcome, LockOutcome::kGranted);
    ASSERT_EQ(Wait(name, a).lock_outcome, LockOutcome::kQueued);
  }
  CommandResult res = Wait("root", r);
  EXPECT_CODE(res, StatusCode::kLimit);
  EXPECT_NE(res.status.message().find("too large"), std::string::npos);
  EXPECT_EQ(sm_->GetStats().waiters, k);
  // Below the budget the same shape queues.
  Unlock("l0", b);
  ASSERT_EQ(fx_.grants.size(), 1u);
  for (uint64_t i = 1; i < 10; ++i) Unlock("l" + std::to_string(i), b);
  WaitId(Wait("root", r));
}

TEST_F(StateMachineTest, DeadlockMessageEscapesBytes) {
  uint64_t s1 = Open(), s2 = Open();
  std::string n1("a\"\n", 3);
  Token(Lock(n1, s1, "\\"));
  Token(Lock("b", s2));
  WaitId(Wait("b", s1, "\\"));
  CommandResult r = Wait(n1, s2);
  EXPECT_CODE(r, StatusCode::kDeadlock);
  EXPECT_NE(r.status.message().find("\"a\\x22\\x0a\""), std::string::npos)
      << r.status.message();
  EXPECT_NE(r.status.message().find("owner \"\\x5c\""), std::string::npos);
}

// --- Lock-delay ---------------------------------------------------------------------------

TEST_F(StateMachineTest, LockDelayAfterExpiry) {
  uint64_t a = Open(), b = Open(), c = Open();
  Token(Lock("l", a));
  Token(Lock("only", a));
  uint64_t w = WaitId(Wait("l", b));
  now_ = 5000;
  CommandResult r = Expire(a, 300);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.released, 2u);
  EXPECT_TRUE(fx_.grants.empty());
  EXPECT_EQ(fx_.sessions_ended, (std::vector<uint64_t>{a}));
  EXPECT_EQ(sm_->Inspect("l")->delay_until_ms, 5300u);
  EXPECT_EQ(sm_->Inspect("l")->mode, LockMode::kFree);
  EXPECT_EQ(sm_->NextDelayEndMs(), 5300u);
  EXPECT_EQ(sm_->ListLocks("", 10), (std::vector<std::string>{"l", "only"}));
  // Nothing is granted during the delay.
  EXPECT_EQ(Lock("l", c).lock_outcome, LockOutcome::kWouldBlock);
  EXPECT_EQ(Lock("only", c).lock_outcome, LockOutcome::kWouldBlock);
  uint64_t wc = WaitId(Wait("l", c));
  Tick(5299);
  EXPECT_TRUE(fx_.grants.empty());
  Tick(5300);
  ASSERT_EQ(fx_.grants.size(), 1u);
  EXPECT_EQ(fx_.grants[0].wait_id, w);
  EXPECT_FALSE(sm_->Inspect("only").has_value());  // delay over, nobody waiting
  EXPECT_EQ(sm_->Inspect("l")->delay_until_ms, 0u);
  EXPECT_FALSE(sm_->NextDelayEndMs().has_value());
  EXPECT_EQ(sm_->WaitIds(), (std::vector<uint64_t>{wc}));
}

TEST_F(StateMachineTest, AnyCommandEndsARunOutDelay) {
  uint64_t a = Open(), b = Open();
  Token(Lock("l", a));
  Expire(a, 100);
  now_ += 100;
  CommandResult r = Lock("l", b);  // the delay ends first, then the lock is free
  EXPECT_EQ(Token(r), 2u);
}

TEST_F(StateMachineTest, DelaysEndingTogetherServeInNameOrder) {
  uint64_t a = Open(), b = Open();
  Token(Lock("z", a));
  Token(Lock("m", a));
  uint64_t wz = WaitId(Wait("z", b));
  uint64_t wm = WaitId(Wait("m", b));
  Expire(a, 10);
  Tick(now_ + 10);
  ASSERT_EQ(fx_.grants.size(), 2u);
  EXPECT_EQ(fx_.grants[0].wait_id, wm);
  EXPECT_EQ(fx_.grants[1].wait_id, wz);
}

TEST_F(StateMachineTest, NoLockDelayAfterCloseOrWithZeroDelay) {
  uint64_t a = Open(), b = Open();
  Token(Lock("l", a));
  WaitId(Wait("l", b));
  Close(a);
  ASSERT_EQ(fx_.grants.size(), 1u);
  uint64_t c = Open();
  WaitId(Wait("l", c));
  Expire(b, 0);
  ASSERT_EQ(fx_.grants.size(), 1u);
  EXPECT_EQ(fx_.grants[0].session, c);
}

TEST_F(StateMachineTest, NoLockDelayWhileAnotherHolderRemains) {
  uint64_t a = Open(), b = Open();
  Token(Lock("l", a, "", true));
  Token(Lock("l", b, "", true));
  Expire(a, 1000);
  EXPECT_EQ(sm_->Inspect("l")->delay_until_ms, 0u);
  EXPECT_EQ(Token(Lock("l", Open(), "", true)), 3u);
}

TEST_F(StateMachineTest, LockDelayBound) {
  uint64_t a = Open();
  Token(Lock("l", a));
  EXPECT_CODE(Expire(a, limits::kLockDelayMsMax + 1), StatusCode::kErr);
  EXPECT_TRUE(sm_->SessionExists(a));
  EXPECT_TRUE(Expire(a, limits::kLockDelayMsMax).status.ok());
}

TEST_F(StateMachineTest, LogTimeNeverGoesBack) {
  uint64_t a = Open(), b = Open();
  Token(Lock("l", a));
  WaitId(Wait("l", b));
  Tick(2000);
  Expire(a, 100);  // delay until 2100
  Tick(500);
  EXPECT_EQ(sm_->log_time_ms(), 2000u);
  EXPECT_EQ(sm_->Inspect("l")->delay_until_ms, 2100u);
  Tick(2100);
  EXPECT_EQ(fx_.grants.size(), 1u);
}

// --- CancelWait / CancelAllWaits ----------------------------------------------------------

TEST_F(StateMachineTest, CancelWaitIsQuietAndIdempotent) {
  uint64_t a = Open(), b = Open();
  Token(Lock("l", a));
  uint64_t w = WaitId(Wait("l", b));
  CommandResult r = CancelWait(w);
  EXPECT_TRUE(r.status.ok());
  EXPECT_TRUE(fx_.ended.empty());
  EXPECT_TRUE(fx_.grants.empty());
  EXPECT_TRUE(sm_->WaitIds().empty());
  EXPECT_TRUE(CancelWait(w).status.ok());
  EXPECT_TRUE(CancelWait(12345).status.ok());
  // A wait that was granted is no longer a wait: cancelling it changes nothing.
  uint64_t w2 = WaitId(Wait("l", b));
  Unlock("l", a);
  ASSERT_EQ(fx_.grants.size(), 1u);
  std::string before = Snapshot();
  EXPECT_TRUE(CancelWait(w2).status.ok());
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(StateMachineTest, CancelWaitOfHeadLetsSharedRunIn) {
  uint64_t a = Open(), b = Open(), c = Open();
  Token(Lock("l", a, "", true));
  uint64_t wx = WaitId(Wait("l", b));
  uint64_t ws = WaitId(Wait("l", c, "", true));
  CancelWait(wx);
  ASSERT_EQ(fx_.grants.size(), 1u);
  EXPECT_EQ(fx_.grants[0].wait_id, ws);
  EXPECT_EQ(sm_->Inspect("l")->holders.size(), 2u);
}

TEST_F(StateMachineTest, CancelAllWaitsEndsEveryWaitWithoutGranting) {
  uint64_t a = Open(), b = Open(), c = Open();
  Token(Lock("s", a, "", true));
  Token(Lock("k", b));
  uint64_t x = WaitId(Wait("s", b, "x"));       // exclusive, at the head
  uint64_t y = WaitId(Wait("s", c, "y", true));  // shared, would fit once x left
  uint64_t z = WaitId(Wait("k", c));
  EXPECT_TRUE(CancelAll().status.ok());
  EXPECT_TRUE(fx_.grants.empty());
  ASSERT_EQ(fx_.ended.size(), 3u);
  EXPECT_EQ(fx_.ended[0].wait_id, x);
  EXPECT_EQ(fx_.ended[1].wait_id, y);
  EXPECT_EQ(fx_.ended[2].wait_id, z);
  for (const auto& e : fx_.ended) EXPECT_EQ(e.reason, StatusCode::kTryAgain);
  EXPECT_TRUE(sm_->WaitIds().empty());
  EXPECT_EQ(sm_->Inspect("s")->holders.size(), 1u);
  EXPECT_TRUE(sm_->Inspect("s")->waiters.empty());
}

TEST_F(StateMachineTest, CancelAllKeepsDelayedLockUntilDelayEnds) {
  uint64_t a = Open(), b = Open();
  Token(Lock("l", a));
  WaitId(Wait("l", b));
  Expire(a, 50);
  CancelAll();
  EXPECT_TRUE(sm_->Inspect("l").has_value());
  Tick(now_ + 50);
  EXPECT_FALSE(sm_->Inspect("l").has_value());
}

// --- Bounds -----------------------------------------------------------------------------

TEST_F(StateMachineTest, LocksMax) {
  Reset({.locks_max = 2});
  uint64_t a = Open(), b = Open();
  Token(Lock("x", a));
  Token(Lock("y", a));
  EXPECT_CODE(Lock("z", a), StatusCode::kLimit);
  EXPECT_CODE(Lock("z", a, "", false, true), StatusCode::kLimit);
  // Existing locks still work.
  Token(Lock("x", a));
  WaitId(Wait("y", b));
  Unlock("x", a);
  Unlock("x", a);
  Token(Lock("z", a));
}

TEST_F(StateMachineTest, WaitersPerLockMax) {
  Reset({.waiters_per_lock_max = 2});
  uint64_t a = Open();
  Token(Lock("l", a));
  WaitId(Wait("l", Open()));
  WaitId(Wait("l", Open()));
  CommandResult r = Wait("l", Open());
  EXPECT_CODE(r, StatusCode::kLimit);
  // A try-lock on a full queue is just null.
  EXPECT_EQ(Lock("l", a, "other").lock_outcome, LockOutcome::kWouldBlock);
}

TEST_F(StateMachineTest, HoldsPerSessionCountsHoldsAndWaits) {
  Reset({.holds_per_session_max = 2});
  uint64_t a = Open(), b = Open();
  Token(Lock("x", b));
  Token(Lock("h", a));
  WaitId(Wait("x", a));
  EXPECT_CODE(Lock("y", a), StatusCode::kLimit);       // new lock
  EXPECT_CODE(Wait("x", a, "o2"), StatusCode::kLimit);  // another wait
  Token(Lock("z", b, "", true));
  EXPECT_CODE(Lock("z", a, "", true), StatusCode::kLimit);  // joining shared holders
  EXPECT_EQ(Token(Lock("h", a)), 2u);  // reentrant: not a new hold
  // A try-lock that could not be granted anyway is null, not LIMIT.
  EXPECT_EQ(Lock("x", a, "o3").lock_outcome, LockOutcome::kWouldBlock);
}

TEST_F(StateMachineTest, UnknownCommandTypeIsErr) {
  CommandView c;
  c.type = static_cast<CommandType>(99);
  EXPECT_CODE(Apply(c), StatusCode::kErr);
  c.type = static_cast<CommandType>(0);
  EXPECT_CODE(Apply(c), StatusCode::kErr);
}

TEST_F(StateMachineTest, StatsCount) {
  uint64_t a = Open(), b = Open();
  Token(Lock("x", a));
  Token(Lock("y", a, "", true));
  Token(Lock("y", b, "", true));
  WaitId(Wait("x", b));
  Stats st = sm_->GetStats();
  EXPECT_EQ(st.sessions, 2u);
  EXPECT_EQ(st.locks, 2u);
  EXPECT_EQ(st.holds, 3u);
  EXPECT_EQ(st.waiters, 1u);
  EXPECT_EQ(st.last_token, 3u);
  EXPECT_EQ(st.log_time_ms, now_);
}

// A lock shared by many readers stays cheap to join and leave.
TEST_F(StateMachineTest, ManySharedHolders) {
  const uint64_t kReaders = 20'000;
  for (uint64_t i = 0; i < kReaders; ++i) Token(Lock("cfg", Open(), "", true));
  EXPECT_EQ(sm_->Inspect("cfg")->holders.size(), kReaders);
  uint64_t w = WaitId(Wait("cfg", Open()));
  for (uint64_t s = kReaders; s >= 1; --s) ASSERT_EQ(Unlock("cfg", s).hold_count, 0u);
  ASSERT_EQ(fx_.grants.size(), 1u);
  EXPECT_EQ(fx_.grants[0].wait_id, w);
}

}  // namespace
}  // namespace tumbler::core

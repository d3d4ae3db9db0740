// The redlock:// backend against five real, independent redis-servers
// (tests/backends/servers/redlock.sh): URL errors, what the keys look like on
// every instance, majority rules with instances stopped, cleanup after a
// failed attempt, renewal, and the loss of a lock a majority forgot. The
// contract shared by every backend is checked by conformance_test.cc.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "client/backends/redis_common.h"
#include "client/backends/test_support.h"
#include "client/connection.h"
#include "tumbler/client.h"

namespace tumbler {
namespace {

using namespace std::chrono_literals;
using client::Clock;
using client::Connection;
using client::RedisServer;
using protocol::Value;
using testing::ExternalServer;
using testing::UniqueName;

// Plain connections to each instance of a redlock:// URL, to look at keys.
class Instances {
 public:
  explicit Instances(const std::string& url) {
    Result<std::vector<RedisServer>> servers = client::ParseRedisUrl(url, "redlock", 1, 16);
    EXPECT_TRUE(servers.ok()) << servers.status().ToString();
    if (!servers.ok()) return;
    for (const RedisServer& s : *servers) {
      auto c = std::make_unique<Connection>();
      Status status = c->Open(s.endpoint, Clock::now() + 5s);
      EXPECT_TRUE(status.ok()) << status.ToString();
      connections_.push_back(std::move(c));
    }
  }
  size_t size() const { return connections_.size(); }
  // The reply of instance i, or an error Value if it is down.
  Value Run(size_t i, const std::vector<std::string_view>& args) {
    Result<Value> reply = connections_[i]->Call(args, Clock::now() + 2s, nullptr);
    if (!reply.ok()) {
      Value error;
      error.type = Value::Type::kError;
      error.str = reply.status().ToString();
      return error;
    }
    return reply.value();
  }
  // How many instances have `name`'s key (with `value`, if not empty).
  size_t CountKeys(const std::string& name, const std::string& value = "") {
    size_t n = 0;
    for (size_t i = 0; i < size(); ++i) {
      Value v = Run(i, {"GET", client::RedisLockKey(name)});
      if (v.type == Value::Type::kBulk && (value.empty() || v.str == value)) ++n;
    }
    return n;
  }

 private:
  std::vector<std::unique_ptr<Connection>> connections_;
};

std::unique_ptr<ExternalServer> shared_servers;

ExternalServer& SharedServers() {
  if (!shared_servers) shared_servers = std::make_unique<ExternalServer>("redlock");
  return *shared_servers;
}

class StopSharedServers : public ::testing::Environment {
 public:
  void TearDown() override { shared_servers.reset(); }
};
[[maybe_unused]] const ::testing::Environment* const kStopSharedServers =
    ::testing::AddGlobalTestEnvironment(new StopSharedServers);

Result<Client> ConnectTo(const std::string& url, std::chrono::milliseconds ttl = 10s) {
  ClientOptions options;
  options.session_ttl = ttl;
  options.op_timeout = 2s;
  options.connect_timeout = 500ms;
  return Client::Connect(url, options);
}

// Stops instances [0, n) of `servers` with SIGKILL.
void StopInstances(ExternalServer& servers, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    ::kill(servers.pids()[i], SIGKILL);
    EXPECT_TRUE(testing::WaitGone(servers.pids()[i], 5s));
  }
}

class RedlockTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(SharedServers().ok()) << SharedServers().error(); }
  static const std::string& Url() { return SharedServers().url(); }
  static Client Connect(std::chrono::milliseconds ttl = 10s) {
    Result<Client> client = ConnectTo(Url(), ttl);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    if (!client.ok()) std::abort();
    return std::move(client).value();
  }
};

TEST(RedlockUrlTest, RejectsBadUrls) {
  struct Case {
    std::string url;
    const char* says;
  };
  std::string seventeen = "redlock://";
  for (int i = 1; i <= 17; ++i) seventeen += (i > 1 ? ",h:" : "h:") + std::to_string(i);
  const Case cases[] = {
      {"redlock://", "no host"},
      {"redlock://a:1,,b:2", "empty host"},
      {"redlock://a:1,a:1,b:2", "named twice"},
      {"redlock://a:1,b:0", "port"},
      {"redlock://a:1,b:2/x", "db"},
      {seventeen, "at most 16 hosts"},
  };
  for (const Case& c : cases) {
    Result<Client> client = Client::Connect(c.url);
    ASSERT_FALSE(client.ok()) << c.url;
    EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument) << c.url;
    EXPECT_NE(client.status().message().find(c.says), std::string::npos)
        << c.url << ": " << client.status().ToString();
  }
}

TEST(RedlockUrlTest, OpenNeedsAMajority) {
  // Nothing listens on ports 1, 2, 3 of loopback.
  Result<Client> client = ConnectTo("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3");
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(client.status().message().find("0 of 3"), std::string::npos)
      << client.status().ToString();
}

TEST_F(RedlockTest, KeyWithOneValueOnEveryInstanceAndNoToken) {
  Client a = Connect(10s);
  Client b = Connect(10s);
  Instances raw(Url());
  ASSERT_EQ(raw.size(), 5u);
  const std::string name = UniqueName("keys");
  Mutex ma = a.NewMutex(name);
  ASSERT_TRUE(ma.TryLock().value());
  Value first = raw.Run(0, {"GET", client::RedisLockKey(name)});
  ASSERT_EQ(first.type, Value::Type::kBulk);
  EXPECT_EQ(raw.CountKeys(name, first.str), 5u);
  for (size_t i = 0; i < raw.size(); ++i) {
    int64_t pttl = raw.Run(i, {"PTTL", client::RedisLockKey(name)}).integer;
    EXPECT_GT(pttl, 9000);
    EXPECT_LE(pttl, client::RedisServerTtl(10s).count());
  }
  // No fencing token, said plainly.
  EXPECT_EQ(ma.token(), 0u);
  EXPECT_EQ(ma.FencingToken().status().code(), StatusCode::kUnsupported);
  // Reentrancy is local: a nested hold changes nothing on the servers.
  ASSERT_TRUE(ma.TryLock().value());
  EXPECT_EQ(ma.hold_count(), 2u);
  EXPECT_EQ(raw.CountKeys(name, first.str), 5u);
  ASSERT_TRUE(ma.Unlock().ok());
  EXPECT_EQ(raw.CountKeys(name, first.str), 5u);

  Mutex mb = b.NewMutex(name);
  Result<bool> busy = mb.TryLock();
  ASSERT_TRUE(busy.ok()) << busy.status().ToString();
  EXPECT_FALSE(busy.value());
  EXPECT_EQ(raw.CountKeys(name, first.str), 5u);  // b's failed try left nothing

  ASSERT_TRUE(ma.Unlock().ok());
  EXPECT_EQ(raw.CountKeys(name), 0u);
  EXPECT_TRUE(mb.TryLock().value());
  EXPECT_TRUE(mb.Unlock().ok());
}

TEST_F(RedlockTest, AMinorityOfKeysTakenElsewhereIsNotEnoughToBlock) {
  // Another client's value on 2 of 5 instances: 3 remain, a majority.
  Client a = Connect();
  Instances raw(Url());
  const std::string name = UniqueName("minority");
  const std::string key = client::RedisLockKey(name);
  for (size_t i = 0; i < 2; ++i) raw.Run(i, {"SET", key, "someone-else", "PX", "10000"});
  Mutex m = a.NewMutex(name);
  ASSERT_TRUE(m.TryLock().value());
  EXPECT_EQ(raw.CountKeys(name, "someone-else"), 2u);
  ASSERT_TRUE(m.Unlock().ok());
  EXPECT_EQ(raw.CountKeys(name), 2u);  // only someone else's keys remain
}

TEST_F(RedlockTest, FailedAttemptLeavesNoKeyBehind) {
  // Another client's value on 3 of 5 instances: the 2 others accept ours,
  // which must be taken back.
  Client a = Connect();
  Instances raw(Url());
  const std::string name = UniqueName("undo");
  const std::string key = client::RedisLockKey(name);
  for (size_t i = 0; i < 3; ++i) raw.Run(i, {"SET", key, "someone-else", "PX", "10000"});
  Mutex m = a.NewMutex(name);
  Result<bool> busy = m.TryLock();
  ASSERT_TRUE(busy.ok()) << busy.status().ToString();
  EXPECT_FALSE(busy.value());
  EXPECT_EQ(raw.CountKeys(name), 3u);
  for (size_t i = 3; i < 5; ++i) {
    EXPECT_EQ(raw.Run(i, {"EXISTS", key}).integer, 0) << "instance " << i;
  }
  // A timed wait that runs out does the same after each of its attempts.
  Clock::time_point start = Clock::now();
  Result<bool> timed = m.TryLockFor(400ms);
  ASSERT_TRUE(timed.ok()) << timed.status().ToString();
  EXPECT_FALSE(timed.value());
  EXPECT_GE(Clock::now() - start, 350ms);
  EXPECT_EQ(raw.CountKeys(name), 3u);
  // Freed by the other client: the waiter gets it by polling.
  std::thread freer([&] {
    std::this_thread::sleep_for(300ms);
    for (size_t i = 0; i < 3; ++i) raw.Run(i, {"DEL", key});
  });
  Result<bool> waited = m.TryLockFor(5s);
  freer.join();
  ASSERT_TRUE(waited.ok()) << waited.status().ToString();
  EXPECT_TRUE(waited.value());
  EXPECT_EQ(raw.CountKeys(name), 5u);
  EXPECT_TRUE(m.Unlock().ok());
}

TEST_F(RedlockTest, WatchdogRenewsOnEveryInstance) {
  Client a = Connect(1s);
  Client b = Connect(1s);
  Instances raw(Url());
  const std::string name = UniqueName("renew");
  Mutex ma = a.NewMutex(name);
  ASSERT_TRUE(ma.Lock().ok());
  std::this_thread::sleep_for(2500ms);
  EXPECT_TRUE(a.SessionStatus().ok()) << a.SessionStatus().ToString();
  EXPECT_EQ(raw.CountKeys(name), 5u);
  EXPECT_FALSE(b.NewMutex(name).TryLock().value());
  EXPECT_TRUE(ma.Unlock().ok());
  EXPECT_EQ(raw.CountKeys(name), 0u);
}

TEST_F(RedlockTest, LockForgottenByAMajorityEndsTheSession) {
  Client a = Connect(900ms);
  Instances raw(Url());
  testing::SessionLossWatch watch(a);
  const std::string name = UniqueName("forgotten");
  Mutex m = a.NewMutex(name);
  ASSERT_TRUE(m.Lock().ok());
  for (size_t i = 0; i < 3; ++i) raw.Run(i, {"DEL", client::RedisLockKey(name)});
  ASSERT_TRUE(watch.WaitLost(5s));
  EXPECT_EQ(watch.why().code(), StatusCode::kSessionLost);
  EXPECT_NE(watch.why().message().find(name), std::string::npos) << watch.why().ToString();
}

TEST(RedlockFaultTest, TwoOfFiveDownStillLocksThreeDownCannot) {
  ExternalServer own("redlock");
  ASSERT_TRUE(own.ok()) << own.error();
  ASSERT_EQ(own.pids().size(), 5u);
  Result<Client> a = ConnectTo(own.url(), 2s);
  Result<Client> b = ConnectTo(own.url(), 2s);
  ASSERT_TRUE(a.ok() && b.ok());
  Instances raw(own.url());
  const std::string name = UniqueName("faults");

  StopInstances(own, 2);
  Mutex ma = a->NewMutex(name);
  Mutex mb = b->NewMutex(name);
  Result<bool> got = ma.TryLock();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got.value());
  EXPECT_EQ(raw.CountKeys(name), 3u);
  Result<bool> busy = mb.TryLock();
  ASSERT_TRUE(busy.ok()) << busy.status().ToString();
  EXPECT_FALSE(busy.value());
  // The watchdog keeps it with 3 of 5 (TTL 2 s, renewed every 667 ms).
  std::this_thread::sleep_for(2500ms);
  EXPECT_TRUE(a->SessionStatus().ok()) << a->SessionStatus().ToString();
  EXPECT_EQ(raw.CountKeys(name), 3u);
  ASSERT_TRUE(ma.Unlock().ok());
  EXPECT_EQ(raw.CountKeys(name), 0u);

  // Third instance down: no majority, an error rather than a hang, and no
  // key left on the two that accepted.
  std::atomic<bool> lost{false};
  a->OnSessionLost([&](const Status&) { lost = true; });
  ::kill(own.pids()[2], SIGKILL);
  ASSERT_TRUE(testing::WaitGone(own.pids()[2], 5s));
  Clock::time_point start = Clock::now();
  Result<bool> attempt = ma.TryLock();
  EXPECT_LT(Clock::now() - start, 2s);
  ASSERT_FALSE(attempt.ok());
  EXPECT_EQ(attempt.status().code(), StatusCode::kUnavailable) << attempt.status().ToString();
  EXPECT_NE(attempt.status().message().find("2 of 5"), std::string::npos)
      << attempt.status().ToString();
  start = Clock::now();
  Result<bool> blocking = mb.TryLockFor(1s);
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_FALSE(blocking.ok() && blocking.value());
  EXPECT_EQ(raw.CountKeys(name), 0u);
  // With no majority the renewals fail: the session is lost within ~TTL.
  Clock::time_point deadline = Clock::now() + 2s + 3s;
  while (!lost.load() && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(lost.load());
  EXPECT_EQ(ma.Lock().code(), StatusCode::kSessionLost);
}

TEST_F(RedlockTest, MajorityStoppedWhileHeldLosesTheSession) {
  ExternalServer own("redlock");
  ASSERT_TRUE(own.ok()) << own.error();
  Result<Client> a = ConnectTo(own.url(), 1500ms);
  Result<Client> b = ConnectTo(own.url(), 10s);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  std::atomic<bool> lost{false};
  std::atomic<int64_t> lost_at_ns{0};
  a->OnSessionLost([&](const Status&) {
    lost_at_ns = Clock::now().time_since_epoch().count();
    lost = true;
  });
  Mutex m = a->NewMutex(UniqueName("held"));
  ASSERT_TRUE(m.Lock().ok());
  // A thread of `a` polls for a lock `b` holds when the instances go.
  const std::string wanted = UniqueName("wanted");
  Mutex held_by_b = b->NewMutex(wanted);
  ASSERT_TRUE(held_by_b.Lock().ok());
  std::atomic<int> waiter_code{-1};
  std::thread waiter([&] {
    Mutex w = a->NewMutex(wanted);
    waiter_code = static_cast<int>(w.Lock().code());
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(waiter_code.load(), -1);
  StopInstances(own, 3);
  Clock::time_point stopped = Clock::now();
  waiter.join();  // its next attempt finds no majority
  EXPECT_LT(Clock::now() - stopped, 2s);
  EXPECT_TRUE(waiter_code.load() == static_cast<int>(StatusCode::kUnavailable) ||
              waiter_code.load() == static_cast<int>(StatusCode::kSessionLost))
      << waiter_code.load();
  Clock::time_point deadline = stopped + 10s;
  while (!lost.load() && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(lost.load());
  auto lost_after = Clock::time_point(Clock::duration(lost_at_ns.load())) - stopped;
  EXPECT_LT(lost_after, 1500ms + 1s);
  EXPECT_EQ(m.Lock().code(), StatusCode::kSessionLost);
}

TEST_F(RedlockTest, RedisAndRedlockClientsOnOneServerDoNotBothHold) {
  // redis:// and redlock:// use the same key name with different types: a
  // client of one scheme must not get a lock the other holds.
  Client lock_client = Connect();
  Result<std::vector<RedisServer>> servers = client::ParseRedisUrl(Url(), "redlock", 1, 16);
  ASSERT_TRUE(servers.ok());
  std::string single = "redis://" + servers->front().endpoint.ToString();
  Result<Client> redis_client = ConnectTo(single);
  ASSERT_TRUE(redis_client.ok()) << redis_client.status().ToString();
  const std::string name = UniqueName("mixed");
  Mutex by_redlock = lock_client.NewMutex(name);
  ASSERT_TRUE(by_redlock.TryLock().value());
  Result<bool> by_redis = redis_client->NewMutex(name).TryLock();
  EXPECT_FALSE(by_redis.ok() && by_redis.value());
  if (!by_redis.ok()) {
    EXPECT_NE(by_redis.status().message().find("WRONGTYPE"), std::string::npos)
        << by_redis.status().ToString();
  }
  EXPECT_TRUE(by_redlock.Unlock().ok());
}

}  // namespace
}  // namespace tumbler

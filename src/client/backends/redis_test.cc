// The redis:// backend against a real redis-server (tests/backends/servers/redis.sh):
// URL parsing, what the scripts leave on the server, fencing tokens,
// pub/sub wake-up, TTL expiry of a killed holder, a stopped server, and a
// lock lost behind the client's back. The contract shared by every backend
// is checked by conformance_test.cc.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
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

// A plain RESP connection to look at and change what is on the server.
class Raw {
 public:
  explicit Raw(const std::string& url) {
    Result<std::vector<RedisServer>> servers = client::ParseRedisUrl(url, "redis", 1, 1);
    EXPECT_TRUE(servers.ok()) << servers.status().ToString();
    if (!servers.ok()) return;
    Status status = connection_.Open(servers->front().endpoint, Clock::now() + 5s);
    EXPECT_TRUE(status.ok()) << status.ToString();
  }
  Value Run(const std::vector<std::string_view>& args) {
    Result<Value> reply = connection_.Call(args, Clock::now() + 5s, nullptr);
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    return reply.ok() ? reply.value() : Value();
  }
  int64_t Int(const std::vector<std::string_view>& args) { return Run(args).integer; }
  // The lock hash as field -> value.
  std::map<std::string, std::string> Hash(const std::string& name) {
    Value v = Run({"HGETALL", client::RedisLockKey(name)});
    std::map<std::string, std::string> out;
    for (size_t i = 0; i + 1 < v.elements.size(); i += 2) {
      out[v.elements[i].str] = v.elements[i + 1].str;
    }
    return out;
  }
  Connection& connection() { return connection_; }

 private:
  Connection connection_;
};

// One server for the tests that do not stop it, started on first use and
// stopped after the last test.
std::unique_ptr<ExternalServer> shared_server;

ExternalServer& SharedServer() {
  if (!shared_server) shared_server = std::make_unique<ExternalServer>("redis");
  return *shared_server;
}

class StopSharedServer : public ::testing::Environment {
 public:
  void TearDown() override { shared_server.reset(); }
};
[[maybe_unused]] const ::testing::Environment* const kStopSharedServer =
    ::testing::AddGlobalTestEnvironment(new StopSharedServer);

class RedisTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(SharedServer().ok()) << SharedServer().error(); }

  static Client Connect(std::chrono::milliseconds ttl = 10s, const std::string& url = "",
                        size_t connections_max = 64) {
    ClientOptions options;
    options.session_ttl = ttl;
    options.op_timeout = 3s;
    options.connect_timeout = 1s;
    options.connections_max = connections_max;
    Result<Client> client = Client::Connect(url.empty() ? SharedServer().url() : url, options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    if (!client.ok()) std::abort();
    return std::move(client).value();
  }
  static const std::string& Url() { return SharedServer().url(); }
};

// --- URLs ----------------------------------------------------------------------

TEST(RedisUrlTest, ParsesHostPortDbAndLogin) {
  auto one = client::ParseRedisUrl("redis://example.org", "redis", 1, 1);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->front().endpoint.host, "example.org");
  EXPECT_EQ(one->front().endpoint.port, 6379);
  EXPECT_EQ(one->front().db, 0);
  EXPECT_TRUE(one->front().password.empty());

  auto full = client::ParseRedisUrl("REDIS://alice:s3:cr@t@[::1]:7000/5", "redis", 1, 1);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->front().endpoint.host, "::1");
  EXPECT_EQ(full->front().endpoint.port, 7000);
  EXPECT_EQ(full->front().db, 5);
  EXPECT_EQ(full->front().user, "alice");
  EXPECT_EQ(full->front().password, "s3:cr@t");

  auto pass_only = client::ParseRedisUrl("redis://:pw@h:1/", "redis", 1, 1);
  ASSERT_TRUE(pass_only.ok()) << pass_only.status().ToString();
  EXPECT_EQ(pass_only->front().user, "");
  EXPECT_EQ(pass_only->front().password, "pw");

  auto many = client::ParseRedisUrl("redlock://a:1,b,c:3/2", "redlock", 1, 16);
  ASSERT_TRUE(many.ok()) << many.status().ToString();
  ASSERT_EQ(many->size(), 3u);
  EXPECT_EQ((*many)[1].endpoint.port, 6379);
  EXPECT_EQ((*many)[2].db, 2);
}

TEST(RedisUrlTest, RejectsBadUrlsNamingTheProblem) {
  struct Case {
    const char* url;
    const char* says;
  };
  const Case cases[] = {
      {"redis://", "no host"},
      {"redis:///3", "no host"},
      {"redis://h:0", "port"},
      {"redis://h:65536", "port"},
      {"redis://h:x", "port"},
      {"redis://h:1/abc", "db"},
      {"redis://h:1/-1", "db"},
      {"redis://h:1/65536", "db"},
      {"redis://a:1,b:2", "at most 1 host"},
      {"redis://user@h:1", "login"},
      {"redis://u:@h:1", "empty password"},
      {"redis://::1:6379", "brackets"},
      {"redis://[::1:6379", "'['"},
  };
  for (const Case& c : cases) {
    Result<Client> client = Client::Connect(c.url);
    ASSERT_FALSE(client.ok()) << c.url;
    EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument) << c.url;
    EXPECT_NE(client.status().message().find(c.says), std::string::npos)
        << c.url << ": " << client.status().ToString();
  }
  ClientOptions bad;
  bad.connections_max = 0;
  Result<Client> client = Client::Connect("redis://127.0.0.1:1", bad);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
}

TEST(RedisUrlTest, NothingListeningIsUnavailable) {
  // Port 1 on loopback: nothing listens there.
  ClientOptions options;
  options.connect_timeout = 1s;
  options.op_timeout = 1s;
  Clock::time_point start = Clock::now();
  Result<Client> client = Client::Connect("redis://127.0.0.1:1", options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable) << client.status().ToString();
  EXPECT_NE(client.status().message().find("127.0.0.1:1"), std::string::npos);
  EXPECT_LT(Clock::now() - start, 3s);
}

TEST(RedisUrlTest, DeclaresEveryPropertyInOrder) {
  for (const char* scheme : {"redis", "redlock"}) {
    const BackendInfo* info = FindBackend(scheme);
    ASSERT_NE(info, nullptr);
    ASSERT_EQ(info->capabilities.size(), static_cast<size_t>(kPropertyCount));
    for (int i = 0; i < kPropertyCount; ++i) {
      EXPECT_EQ(info->capabilities[i].property, static_cast<Property>(i)) << scheme << " " << i;
      EXPECT_FALSE(info->capabilities[i].note.empty()) << scheme << " " << i;
    }
  }
  EXPECT_TRUE(FindBackend("redis")->Supports(Property::kFencing));
  EXPECT_FALSE(FindBackend("redlock")->Supports(Property::kFencing));
}

// --- What the scripts do on the server -------------------------------------------

TEST_F(RedisTest, HashHoldsHolderCountAndTokenWithTtl) {
  Client a = Connect(10s);
  Client b = Connect(10s);
  Raw raw(Url());
  const std::string name = UniqueName("hash");
  Mutex ma = a.NewMutex(name);
  Mutex mb = b.NewMutex(name);

  ASSERT_TRUE(ma.TryLock().value());
  std::map<std::string, std::string> hash = raw.Hash(name);
  ASSERT_EQ(hash.size(), 2u);  // the holder and "__token"
  ASSERT_EQ(hash.count("__token"), 1u);
  EXPECT_EQ(hash["__token"], std::to_string(ma.token()));
  std::string holder;
  for (const auto& [field, value] : hash) {
    if (field != "__token") holder = field;
  }
  EXPECT_EQ(hash[holder], "1");
  EXPECT_EQ(raw.Run({"GET", client::RedisTokenKey(name)}).str, std::to_string(ma.token()));
  // The TTL is session_ttl plus the drift allowance, and not less than it.
  int64_t pttl = raw.Int({"PTTL", client::RedisLockKey(name)});
  EXPECT_GT(pttl, 9000);
  EXPECT_LE(pttl, client::RedisServerTtl(10s).count());

  // A second holder is refused while it is held, without waiting.
  Result<bool> busy = mb.TryLock();
  ASSERT_TRUE(busy.ok()) << busy.status().ToString();
  EXPECT_FALSE(busy.value());
  EXPECT_EQ(raw.Hash(name).size(), 2u);

  // A nested acquire is counted on the server.
  ASSERT_TRUE(ma.TryLock().value());
  EXPECT_EQ(raw.Hash(name)[holder], "2");
  EXPECT_EQ(ma.hold_count(), 2u);
  ASSERT_TRUE(ma.Unlock().ok());
  EXPECT_EQ(raw.Hash(name)[holder], "1");
  EXPECT_FALSE(mb.TryLock().value());
  // The last release deletes the key.
  ASSERT_TRUE(ma.Unlock().ok());
  EXPECT_EQ(raw.Int({"EXISTS", client::RedisLockKey(name)}), 0);
  EXPECT_TRUE(mb.TryLock().value());
  EXPECT_TRUE(mb.Unlock().ok());
}

TEST_F(RedisTest, TokensIncreaseAcrossClients) {
  Client a = Connect();
  Client b = Connect();
  const std::string name = UniqueName("tokens");
  Mutex ma = a.NewMutex(name);
  Mutex mb = b.NewMutex(name);
  uint64_t last = 0;
  for (int i = 0; i < 10; ++i) {
    Mutex& m = (i % 2 == 0) ? ma : mb;
    ASSERT_TRUE(m.Lock().ok());
    Result<uint64_t> token = m.FencingToken();
    ASSERT_TRUE(token.ok()) << token.status().ToString();
    EXPECT_GT(token.value(), last);
    // A nested hold keeps the token of the first.
    ASSERT_TRUE(m.Lock().ok());
    EXPECT_EQ(m.token(), token.value());
    ASSERT_TRUE(m.Unlock().ok());
    last = token.value();
    ASSERT_TRUE(m.Unlock().ok());
  }
}

TEST_F(RedisTest, ScriptsAreReloadedAfterScriptFlush) {
  Client a = Connect();
  Raw raw(Url());
  const std::string name = UniqueName("flush");
  Mutex m = a.NewMutex(name);
  EXPECT_EQ(raw.Run({"SCRIPT", "FLUSH"}).str, "OK");
  ASSERT_TRUE(m.TryLock().value());  // EVALSHA -> NOSCRIPT -> EVAL
  EXPECT_EQ(raw.Run({"SCRIPT", "FLUSH"}).str, "OK");
  EXPECT_TRUE(m.Unlock().ok());
  EXPECT_EQ(raw.Int({"EXISTS", client::RedisLockKey(name)}), 0);
}

TEST_F(RedisTest, UsesTheDbOfTheUrl) {
  Client a = Connect(10s, Url() + "/3");
  Raw raw(Url());
  const std::string name = UniqueName("db");
  Mutex m = a.NewMutex(name);
  ASSERT_TRUE(m.TryLock().value());
  EXPECT_EQ(raw.Int({"EXISTS", client::RedisLockKey(name)}), 0);  // not in db 0
  EXPECT_EQ(raw.Run({"SELECT", "3"}).str, "OK");
  EXPECT_EQ(raw.Int({"EXISTS", client::RedisLockKey(name)}), 1);
  EXPECT_TRUE(m.Unlock().ok());
  EXPECT_EQ(raw.Int({"EXISTS", client::RedisLockKey(name)}), 0);
}

// --- Waiting -----------------------------------------------------------------------

TEST_F(RedisTest, WaiterSubscribesAndIsWokenByTheReleaseMessage) {
  Client a = Connect(10s);
  Client b = Connect(10s);
  Raw raw(Url());
  const std::string name = UniqueName("wake");
  const std::string channel = client::RedisReleaseChannel(name);
  Mutex ma = a.NewMutex(name);
  std::vector<int64_t> latencies_ms;
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(ma.Lock().ok());
    std::atomic<bool> got{false};
    std::atomic<int64_t> released_ns{0};
    std::atomic<int64_t> woke_ns{0};
    std::thread waiter([&] {
      Mutex mb = b.NewMutex(name);
      Status s = mb.Lock();
      woke_ns = Clock::now().time_since_epoch().count();
      EXPECT_TRUE(s.ok()) << s.ToString();
      got = true;
      EXPECT_TRUE(mb.Unlock().ok());
    });
    // The waiter is subscribed to the release channel while it waits.
    int64_t subscribers = 0;
    for (int i = 0; i < 100 && subscribers == 0; ++i) {
      std::this_thread::sleep_for(10ms);
      Value v = raw.Run({"PUBSUB", "NUMSUB", channel});
      if (v.elements.size() == 2) subscribers = v.elements[1].integer;
    }
    EXPECT_EQ(subscribers, 1);
    EXPECT_FALSE(got.load());
    released_ns = Clock::now().time_since_epoch().count();
    ASSERT_TRUE(ma.Unlock().ok());
    waiter.join();
    ASSERT_TRUE(got.load());
    latencies_ms.push_back((woke_ns.load() - released_ns.load()) / 1'000'000);
  }
  // Without the message the waiter would retry only after 200 ms (the lock's
  // PTTL is ~10 s). Loose: the median of three, on a busy machine.
  std::sort(latencies_ms.begin(), latencies_ms.end());
  EXPECT_LT(latencies_ms[1], 100) << latencies_ms[0] << " " << latencies_ms[1] << " "
                                  << latencies_ms[2];
  // The subscription is gone with the wait.
  Value v = raw.Run({"PUBSUB", "NUMSUB", channel});
  ASSERT_EQ(v.elements.size(), 2u);
  EXPECT_EQ(v.elements[1].integer, 0);
}

TEST_F(RedisTest, ReleasePublishesOnTheChannel) {
  Client a = Connect();
  Raw subscriber(Url());
  const std::string name = UniqueName("publish");
  Value confirm = subscriber.Run({"SUBSCRIBE", client::RedisReleaseChannel(name)});
  ASSERT_EQ(confirm.elements.size(), 3u);
  Mutex m = a.NewMutex(name);
  ASSERT_TRUE(m.Lock().ok());
  ASSERT_TRUE(m.Lock().ok());
  ASSERT_TRUE(m.Unlock().ok());  // nested: nothing is published
  Result<Value> none = subscriber.connection().Receive(Clock::now() + 100ms);
  EXPECT_EQ(none.status().code(), StatusCode::kTimeout);
  uint64_t token = m.token();
  ASSERT_TRUE(m.Unlock().ok());
  Result<Value> message = subscriber.connection().Receive(Clock::now() + 2s);
  ASSERT_TRUE(message.ok()) << message.status().ToString();
  ASSERT_EQ(message->elements.size(), 3u);
  EXPECT_EQ(message->elements[0].str, "message");
  EXPECT_EQ(message->elements[1].str, client::RedisReleaseChannel(name));
  EXPECT_EQ(message->elements[2].str, std::to_string(token));
}

TEST_F(RedisTest, OneConnectionIsEnoughForAWaiterAndAHolder) {
  // The waiter gives its pooled connection back between attempts, so a
  // pool of one does not starve the holder's release.
  Client a = Connect(10s, "", /*connections_max=*/1);
  const std::string name = UniqueName("pool1");
  Mutex m = a.NewMutex(name);
  ASSERT_TRUE(m.Lock().ok());
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    Mutex same = a.NewMutex(name);
    Result<bool> r = same.TryLockFor(10s);
    EXPECT_TRUE(r.ok() && r.value()) << r.status().ToString();
    got = true;
    if (r.ok() && r.value()) {
      EXPECT_TRUE(same.Unlock().ok());
    }
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(got.load());
  ASSERT_TRUE(m.Unlock().ok());
  waiter.join();
  EXPECT_TRUE(got.load());
}

TEST_F(RedisTest, CloseWakesABlockedLock) {
  Client holder = Connect();
  Client waiter_client = Connect();
  const std::string name = UniqueName("close");
  Mutex m = holder.NewMutex(name);
  ASSERT_TRUE(m.Lock().ok());
  Mutex w = waiter_client.NewMutex(name);
  std::atomic<int> code{-1};
  std::thread waiter([&] { code = static_cast<int>(w.Lock().code()); });
  std::this_thread::sleep_for(300ms);
  Clock::time_point start = Clock::now();
  EXPECT_TRUE(waiter_client.Close().ok());
  waiter.join();
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_EQ(code.load(), static_cast<int>(StatusCode::kSessionLost));
  EXPECT_TRUE(m.Unlock().ok());
}

// --- Leases --------------------------------------------------------------------------

TEST_F(RedisTest, WatchdogKeepsALockPastItsTtl) {
  Client a = Connect(1s);
  Client b = Connect(1s);
  const std::string name = UniqueName("renew");
  Mutex ma = a.NewMutex(name);
  ASSERT_TRUE(ma.Lock().ok());
  std::this_thread::sleep_for(2500ms);
  EXPECT_TRUE(a.SessionStatus().ok()) << a.SessionStatus().ToString();
  EXPECT_FALSE(b.NewMutex(name).TryLock().value());
  EXPECT_TRUE(ma.Unlock().ok());
}

TEST_F(RedisTest, KilledHolderProcessIsReleasedAfterTheTtl) {
  const std::string name = UniqueName("killed");
  testing::HolderProcess holder;
  Status started = holder.Start(Url(), name, 1s);
  ASSERT_TRUE(started.ok()) << started.ToString();
  // Let the holder's watchdog renew a few times: the lock outlives one TTL.
  std::this_thread::sleep_for(1500ms);
  Client other = Connect(1s);
  Mutex m = other.NewMutex(name);
  EXPECT_FALSE(m.TryLock().value()) << "the holder's watchdog did not keep the lock";
  holder.Kill();
  Clock::time_point killed = Clock::now();
  Result<bool> got = m.TryLockFor(10s);
  auto after = Clock::now() - killed;
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got.value());
  // The key had between 2/3 and all of its TTL left when the holder died.
  EXPECT_GE(after, 400ms);
  EXPECT_LT(after, 3s);
  EXPECT_TRUE(m.Unlock().ok());
}

TEST_F(RedisTest, LockDeletedBehindTheClientsBackEndsTheSession) {
  Client a = Connect(900ms);
  Raw raw(Url());
  testing::SessionLossWatch watch(a);
  const std::string name = UniqueName("stolen");
  Mutex m = a.NewMutex(name);
  ASSERT_TRUE(m.Lock().ok());
  EXPECT_EQ(raw.Int({"DEL", client::RedisLockKey(name)}), 1);
  ASSERT_TRUE(watch.WaitLost(5s));
  EXPECT_EQ(watch.why().code(), StatusCode::kSessionLost);
  EXPECT_NE(watch.why().message().find(name), std::string::npos) << watch.why().ToString();
  EXPECT_EQ(m.Lock().code(), StatusCode::kSessionLost);
}

TEST_F(RedisTest, ServerStoppedGivesPromptErrorsAndSessionLoss) {
  ExternalServer own("redis");
  ASSERT_TRUE(own.ok()) << own.error();
  ClientOptions options;
  options.session_ttl = 1500ms;
  options.op_timeout = 1s;
  options.connect_timeout = 500ms;
  Result<Client> connected = Client::Connect(own.url(), options);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  Client a = std::move(connected).value();
  Client b = Connect(10s, own.url());
  std::atomic<bool> lost{false};
  std::atomic<int64_t> lost_at_ns{0};
  a.OnSessionLost([&](const Status&) {
    lost_at_ns = Clock::now().time_since_epoch().count();
    lost = true;
  });
  const std::string name = UniqueName("stop");
  Mutex held = a.NewMutex(name);
  ASSERT_TRUE(held.Lock().ok());
  // b waits (subscribed) for the lock when the server goes.
  std::atomic<int> waiter_code{-1};
  std::thread waiter([&] {
    Mutex w = b.NewMutex(name);
    waiter_code = static_cast<int>(w.Lock().code());
  });
  std::this_thread::sleep_for(300ms);
  own.Stop(/*hard=*/true);
  Clock::time_point stopped = Clock::now();
  waiter.join();  // must end: the subscriber connection breaks
  EXPECT_LT(Clock::now() - stopped, 2s);
  EXPECT_NE(waiter_code.load(), static_cast<int>(StatusCode::kOk));

  Clock::time_point start = Clock::now();
  Result<bool> attempt = a.NewMutex(UniqueName("other")).TryLock();
  EXPECT_LT(Clock::now() - start, 2s);
  ASSERT_FALSE(attempt.ok());
  EXPECT_TRUE(attempt.status().code() == StatusCode::kUnavailable ||
              attempt.status().code() == StatusCode::kTimeout)
      << attempt.status().ToString();

  Clock::time_point deadline = stopped + 10s;
  while (!lost.load() && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(lost.load());
  auto lost_after = Clock::time_point(Clock::duration(lost_at_ns.load())) - stopped;
  EXPECT_LT(lost_after, options.session_ttl + 1s);
  EXPECT_EQ(held.Lock().code(), StatusCode::kSessionLost);
  EXPECT_EQ(held.hold_count(), 0u);
}

TEST_F(RedisTest, PasswordFromTheUrlIsUsed) {
  ExternalServer own("redis");
  ASSERT_TRUE(own.ok()) << own.error();
  {
    Raw raw(own.url());
    EXPECT_EQ(raw.Run({"CONFIG", "SET", "requirepass", "s3cret"}).str, "OK");
  }
  ClientOptions options;
  options.op_timeout = 2s;
  const std::string hostport = own.url().substr(std::string("redis://").size());
  Result<Client> none = Client::Connect(own.url(), options);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNoAuth) << none.status().ToString();
  Result<Client> wrong = Client::Connect("redis://:nope@" + hostport, options);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kWrongPass) << wrong.status().ToString();
  Result<Client> right = Client::Connect("redis://:s3cret@" + hostport, options);
  ASSERT_TRUE(right.ok()) << right.status().ToString();
  Mutex m = right->NewMutex("authed");
  EXPECT_TRUE(m.TryLock().value());
  EXPECT_TRUE(m.Unlock().ok());
  Result<Client> user = Client::Connect("redis://default:s3cret@" + hostport, options);
  ASSERT_TRUE(user.ok()) << user.status().ToString();
}

}  // namespace
}  // namespace tumbler

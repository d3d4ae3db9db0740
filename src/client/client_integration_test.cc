// The client library against a real tumblerd (started per test on a free
// loopback port with a temporary data directory; see test_server.h).
#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "client/channel.h"
#include "client/test_server.h"
#include "tumbler/client.h"
#include "tumbler/mutex.h"

namespace tumbler {
namespace {

using namespace std::chrono_literals;
using client::testing::TestServer;
using Clock = std::chrono::steady_clock;

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TestServer::BinaryPath().empty()) GTEST_SKIP() << "no tumblerd binary (set TUMBLERD)";
    Status status = server_.Start();
    ASSERT_TRUE(status.ok()) << status.ToString();
  }

  Client Connect(ClientOptions options = {}) {
    Result<Client> client = Client::Connect(server_.url(), std::move(options));
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    if (!client.ok()) throw std::runtime_error("connect failed");
    return std::move(client).value();
  }

  // One raw command, outside any Client.
  Result<protocol::Value> Raw(std::vector<std::string_view> args) {
    client::Channel channel(std::make_shared<client::EndpointSet>(
                                std::vector<client::Endpoint>{{"127.0.0.1", server_.port()}}),
                            client::ChannelOptions{});
    client::CallOptions call;
    call.deadline = Clock::now() + 5s;
    return channel.Call(args, call).reply;
  }

  TestServer server_;
};

TEST_F(ClientTest, ConnectOpensAndCloseEndsTheSession) {
  Client client = Connect();
  EXPECT_GT(client.SessionId(), 0u);
  EXPECT_GT(client.SafeUntil(), Clock::now());
  EXPECT_TRUE(client.SessionStatus().ok());
  std::string id = std::to_string(client.SessionId());
  ASSERT_TRUE(Raw({"SESSION", "INFO", id}).ok());
  EXPECT_TRUE(client.Close().ok());
  EXPECT_EQ(client.SessionId(), 0u);
  auto info = Raw({"SESSION", "INFO", id});
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kNoSession);
  EXPECT_TRUE(client.Close().ok());  // idempotent
}

TEST_F(ClientTest, ConnectToNothingIsUnavailable) {
  ClientOptions options;
  options.op_timeout = 300ms;
  auto start = Clock::now();
  Result<Client> client =
      Client::Connect("tumbler://127.0.0.1:" + std::to_string(client::testing::FreePort()), options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable) << client.status().ToString();
  EXPECT_LT(Clock::now() - start, 3s);
}

TEST_F(ClientTest, ConnectRejectsBadOptions) {
  ClientOptions options;
  options.session_ttl = 50ms;
  Result<Client> client = Client::Connect(server_.url(), options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Client::Connect("memcached://127.0.0.1:11211").status().code(), StatusCode::kUnsupported);
}

TEST_F(ClientTest, UniqueLockExcludesThreads) {
  Client client = Connect();
  Mutex m = client.NewMutex("counter");
  constexpr int kThreads = 8;
  constexpr int kRounds = 25;
  long counter = 0;  // deliberately not atomic: the lock protects it
  std::atomic<bool> inside{false};
  std::atomic<int> overlaps{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        std::unique_lock lock(m);
        if (inside.exchange(true)) overlaps++;
        long seen = counter;
        std::this_thread::yield();
        counter = seen + 1;
        inside.store(false);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(counter, kThreads * kRounds);
}

TEST_F(ClientTest, TwoClientsExcludeEachOther) {
  Client a = Connect();
  Client b = Connect();
  Mutex ma = a.NewMutex("shared-resource");
  Mutex mb = b.NewMutex("shared-resource");
  ASSERT_TRUE(ma.Lock().ok());
  Result<bool> got = mb.TryLock();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(*got);
  std::atomic<bool> b_has{false};
  std::thread waiter([&] {
    mb.lock();
    b_has = true;
    mb.unlock();
  });
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(b_has.load());
  ASSERT_TRUE(ma.Unlock().ok());
  waiter.join();
  EXPECT_TRUE(b_has.load());
}

TEST_F(ClientTest, TryLockAndTryLockForTimeOut) {
  Client client = Connect();
  Mutex m = client.NewMutex("busy");
  ASSERT_TRUE(m.Lock().ok());
  std::thread other([&] {
    EXPECT_FALSE(m.try_lock());
    auto start = Clock::now();
    EXPECT_FALSE(m.try_lock_for(300ms));
    auto took = Clock::now() - start;
    EXPECT_GE(took, 300ms);
    EXPECT_LT(took, 2s);
    start = Clock::now();
    EXPECT_FALSE(m.try_lock_until(std::chrono::system_clock::now() + 200ms));
    EXPECT_GE(Clock::now() - start, 150ms);
    Result<bool> r = m.TryLockFor(0ms);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(*r);
  });
  other.join();
  ASSERT_TRUE(m.Unlock().ok());
  std::thread later([&] {
    std::unique_lock lock(m, 1s);  // try_lock_for
    EXPECT_TRUE(lock.owns_lock());
  });
  later.join();
}

TEST_F(ClientTest, TryLockForIsGrantedWhenReleasedInTime) {
  Client client = Connect();
  Mutex m = client.NewMutex("handover");
  ASSERT_TRUE(m.Lock().ok());
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    got = m.try_lock_for(5s);
    if (got) m.unlock();
  });
  std::this_thread::sleep_for(200ms);
  ASSERT_TRUE(m.Unlock().ok());
  waiter.join();
  EXPECT_TRUE(got.load());
}

TEST_F(ClientTest, SameThreadIsReentrant) {
  Client client = Connect();
  Mutex m = client.NewMutex("reentrant");
  m.lock();
  uint64_t token = m.token();
  EXPECT_GT(token, 0u);
  m.lock();
  ASSERT_TRUE(m.try_lock());
  EXPECT_EQ(m.hold_count(), 3u);
  EXPECT_EQ(m.token(), token);  // nested holds share the first token
  std::thread other([&] {
    EXPECT_FALSE(m.try_lock());
    EXPECT_EQ(m.token(), 0u);  // this thread holds nothing
  });
  other.join();
  m.unlock();
  m.unlock();
  std::thread still([&] { EXPECT_FALSE(m.try_lock()); });
  still.join();
  m.unlock();
  EXPECT_EQ(m.hold_count(), 0u);
  std::thread free_now([&] {
    EXPECT_TRUE(m.try_lock());
    m.unlock();
  });
  free_now.join();
}

TEST_F(ClientTest, TokensIncrease) {
  Client client = Connect();
  Mutex a = client.NewMutex("token-a");
  Mutex b = client.NewMutex("token-b");
  uint64_t last = 0;
  for (int i = 0; i < 10; ++i) {
    Mutex& m = i % 2 ? a : b;
    std::unique_lock lock(m);
    EXPECT_GT(m.token(), last);
    last = m.token();
  }
  // Check with the server that the token is the holder's.
  std::unique_lock lock(a);
  auto check = Raw({"CHECK", "token-a", std::to_string(a.token())});
  ASSERT_TRUE(check.ok());
  EXPECT_EQ(check->integer, 1);
}

TEST_F(ClientTest, UnlockWithoutHoldIsAnError) {
  Client client = Connect();
  Mutex m = client.NewMutex("not-mine");
  Status status = m.Unlock();
  EXPECT_EQ(status.code(), StatusCode::kNotHeld);
  try {
    m.unlock();
    ADD_FAILURE() << "unlock() of a lock not held must throw";
  } catch (const LockError& e) {
    EXPECT_EQ(e.status().code(), StatusCode::kNotHeld);
    EXPECT_EQ(e.code(), std::errc::operation_not_permitted);
  }
  Mutex empty;
  EXPECT_EQ(empty.Lock().code(), StatusCode::kInvalidArgument);
  Mutex unnamed = client.NewMutex("");
  EXPECT_EQ(unnamed.Lock().code(), StatusCode::kInvalidArgument);
  Mutex too_long = client.NewMutex(std::string(1025, 'x'));
  EXPECT_EQ(too_long.TryLock().status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, ScopedLockTakesSeveral) {
  Client client = Connect();
  Mutex a = client.NewMutex("pair-a");
  Mutex b = client.NewMutex("pair-b");
  {
    std::scoped_lock both(a, b);
    EXPECT_GT(a.token(), 0u);
    EXPECT_GT(b.token(), 0u);
    std::thread other([&] {
      EXPECT_FALSE(a.try_lock());
      EXPECT_FALSE(b.try_lock());
    });
    other.join();
  }
  EXPECT_EQ(a.hold_count(), 0u);
  EXPECT_EQ(b.hold_count(), 0u);
}

TEST_F(ClientTest, SharedLocksAdmitReadersTogether) {
  Client client = Connect();
  SharedMutex m = client.NewSharedMutex("table");
  constexpr int kReaders = 4;
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0;
  bool all_met = false;
  std::vector<std::thread> readers;
  for (int i = 0; i < kReaders; ++i) {
    readers.emplace_back([&] {
      std::shared_lock lock(m);
      EXPECT_GT(m.token(), 0u);
      std::unique_lock<std::mutex> l(mu);
      ++inside;
      cv.notify_all();
      // Every reader is inside at once, or this times out.
      if (!cv.wait_for(l, 10s, [&] { return inside == kReaders; })) return;
      all_met = true;
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_TRUE(all_met);

  // A writer excludes readers, and readers exclude a writer.
  std::shared_lock read(m);
  std::thread writer([&] { EXPECT_FALSE(m.try_lock_for(100ms)); });
  writer.join();
  read.unlock();
  std::unique_lock write(m);
  std::thread reader([&] { EXPECT_FALSE(m.try_lock_shared_for(100ms)); });
  reader.join();
}

TEST_F(ClientTest, OneThreadCannotHoldBothModes) {
  Client client = Connect();
  SharedMutex m = client.NewSharedMutex("modes");
  ASSERT_TRUE(m.LockShared().ok());
  EXPECT_EQ(m.Lock().code(), StatusCode::kWrongMode);
  EXPECT_EQ(m.Unlock().code(), StatusCode::kNotHeld);  // held shared, not exclusive
  EXPECT_TRUE(m.UnlockShared().ok());
  EXPECT_EQ(m.UnlockShared().code(), StatusCode::kNotHeld);
}

TEST_F(ClientTest, DeadlockIsReported) {
  Client client = Connect();
  Mutex x = client.NewMutex("dl-x");
  Mutex y = client.NewMutex("dl-y");
  std::atomic<int> deadlocks{0};
  std::atomic<int> ready{0};
  auto run = [&](Mutex& first, Mutex& second) {
    std::unique_lock a(first);
    ready++;
    while (ready.load() < 2) std::this_thread::yield();
    try {
      std::unique_lock b(second);
    } catch (const LockError& e) {
      EXPECT_EQ(e.status().code(), StatusCode::kDeadlock) << e.what();
      EXPECT_EQ(e.code(), std::errc::resource_deadlock_would_occur);
      deadlocks++;
    }
  };
  std::thread t1([&] { run(x, y); });
  std::thread t2([&] { run(y, x); });
  t1.join();
  t2.join();
  EXPECT_EQ(deadlocks.load(), 1);
}

TEST_F(ClientTest, SessionLostWhenTheServerDies) {
  ClientOptions options;
  options.session_ttl = 1000ms;
  options.op_timeout = 500ms;
  Client client = Connect(options);
  Mutex m = client.NewMutex("doomed");
  ASSERT_TRUE(m.Lock().ok());
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  Status why;
  std::thread::id callback_thread;
  client.OnSessionLost([&](const Status& status) {
    std::lock_guard<std::mutex> lock(mu);
    ++calls;
    why = status;
    callback_thread = std::this_thread::get_id();
    cv.notify_all();
  });
  // A second thread blocks waiting for the lock the first holds.
  Result<bool> blocked_result = true;
  std::thread blocked([&] {
    Mutex same = client.NewMutex("doomed");
    Status s = same.Lock();
    blocked_result = s.ok() ? Result<bool>(true) : Result<bool>(s);
  });
  std::this_thread::sleep_for(100ms);
  auto killed_at = Clock::now();
  server_.Kill();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return calls > 0; }));
  }
  auto took = Clock::now() - killed_at;
  EXPECT_LT(took, 2500ms);
  EXPECT_GE(Clock::now(), client.SafeUntil());
  EXPECT_EQ(why.code(), StatusCode::kSessionLost);
  EXPECT_NE(callback_thread, std::this_thread::get_id());
  blocked.join();
  ASSERT_FALSE(blocked_result.ok());
  EXPECT_EQ(blocked_result.status().code(), StatusCode::kSessionLost);
  EXPECT_EQ(client.SessionStatus().code(), StatusCode::kSessionLost);
  EXPECT_EQ(m.TryLock().status().code(), StatusCode::kSessionLost);
  // The thread that held it can still balance its lock(): no exception.
  EXPECT_EQ(m.Unlock().code(), StatusCode::kSessionLost);
  std::this_thread::sleep_for(200ms);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(calls, 1);
}

TEST_F(ClientTest, SessionSurvivesAQuickServerRestart) {
  ClientOptions options;
  options.session_ttl = 4000ms;
  Client client = Connect(options);
  std::atomic<int> lost{0};
  client.OnSessionLost([&](const Status&) { lost++; });
  Mutex m = client.NewMutex("kept");
  ASSERT_TRUE(m.Lock().ok());
  uint64_t token = m.token();
  server_.Kill();
  ASSERT_TRUE(server_.Start().ok());
  // Renewals resume on a new connection.
  auto before = client.SafeUntil();
  auto deadline = Clock::now() + 5s;
  while (client.SafeUntil() == before && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  EXPECT_GT(client.SafeUntil(), before);
  EXPECT_EQ(lost.load(), 0);
  EXPECT_TRUE(client.SessionStatus().ok());
  // The hold survived the restart (it was committed before the reply).
  auto check = Raw({"CHECK", "kept", std::to_string(token)});
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_EQ(check->integer, 1);
  EXPECT_TRUE(m.Unlock().ok());
  Mutex n = client.NewMutex("after-restart");
  EXPECT_TRUE(n.Lock().ok());
  EXPECT_GT(n.token(), token);
  EXPECT_TRUE(n.Unlock().ok());
}

TEST_F(ClientTest, SessionClosedElsewhereIsLost) {
  ClientOptions options;
  options.session_ttl = 600ms;
  Client client = Connect(options);
  std::atomic<int> lost{0};
  client.OnSessionLost([&](const Status&) { lost++; });
  ASSERT_TRUE(Raw({"SESSION", "CLOSE", std::to_string(client.SessionId())}).ok());
  auto deadline = Clock::now() + 3s;
  while (lost.load() == 0 && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(lost.load(), 1);
  EXPECT_EQ(client.NewMutex("x").Lock().code(), StatusCode::kSessionLost);
}

TEST_F(ClientTest, CloseWakesABlockedLock) {
  Client holder = Connect();
  Mutex held = holder.NewMutex("contended");
  ASSERT_TRUE(held.Lock().ok());
  Client client = Connect();
  Mutex m = client.NewMutex("contended");
  Status result;
  std::thread blocked([&] { result = m.Lock(); });
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(client.Close().ok());
  blocked.join();
  EXPECT_EQ(result.code(), StatusCode::kSessionLost);
  // The server dropped the wait with the session: the holder's release frees it.
  ASSERT_TRUE(held.Unlock().ok());
  auto inspect = Raw({"INSPECT", "contended"});
  ASSERT_TRUE(inspect.ok());
  const protocol::Value* mode = inspect->Find("mode");
  ASSERT_NE(mode, nullptr);
  EXPECT_EQ(mode->str, "free");
}

TEST_F(ClientTest, CallbackMayCloseTheClient) {
  ClientOptions options;
  options.session_ttl = 500ms;
  auto client = std::make_unique<Client>(Connect(options));
  std::atomic<bool> done{false};
  client->OnSessionLost([&](const Status&) {
    client.reset();  // destroys the Client from its own watchdog thread
    done = true;
  });
  ASSERT_TRUE(Raw({"SESSION", "CLOSE", std::to_string(client->SessionId())}).ok());
  auto deadline = Clock::now() + 3s;
  while (!done.load() && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(done.load());
}

TEST_F(ClientTest, BlockedWaitSurvivesAServerRestart) {
  ClientOptions options;
  options.session_ttl = 5000ms;
  Client holder = Connect(options);
  Client waiter = Connect(options);
  Mutex held = holder.NewMutex("across-restart");
  ASSERT_TRUE(held.Lock().ok());
  Mutex wanted = waiter.NewMutex("across-restart");
  std::atomic<bool> got{false};
  Status result;
  uint64_t token = 0;
  std::thread blocked([&] {
    result = wanted.Lock();
    got = result.ok();
    token = wanted.token();
    if (got) {
      EXPECT_TRUE(wanted.Unlock().ok());
    }
  });
  std::this_thread::sleep_for(200ms);
  server_.Kill();
  ASSERT_TRUE(server_.Start().ok());
  std::this_thread::sleep_for(300ms);  // the waiter reconnects and asks again
  EXPECT_FALSE(got.load());
  ASSERT_TRUE(held.Unlock().ok());
  blocked.join();
  EXPECT_TRUE(result.ok()) << result.ToString();
  EXPECT_GT(token, 0u);
}

TEST_F(ClientTest, PoolIsBounded) {
  Client holder = Connect();
  Mutex held = holder.NewMutex("pool-a");
  ASSERT_TRUE(held.Lock().ok());
  ClientOptions options;
  options.connections_max = 1;
  options.op_timeout = 300ms;
  Client client = Connect(options);
  Mutex a = client.NewMutex("pool-a");
  Mutex b = client.NewMutex("pool-b");
  std::thread blocked([&] {  // takes the only connection
    EXPECT_TRUE(a.Lock().ok());
    EXPECT_TRUE(a.Unlock().ok());
  });
  std::this_thread::sleep_for(200ms);
  Result<bool> other = b.TryLock();
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kTimeout) << other.status().ToString();
  // The watchdog's connection is separate: renewals go on.
  auto before = client.SafeUntil();
  std::this_thread::sleep_for(std::chrono::milliseconds(options.session_ttl) / 3 + 500ms);
  EXPECT_GT(client.SafeUntil(), before);
  ASSERT_TRUE(held.Unlock().ok());
  blocked.join();
  Result<bool> now = b.TryLock();
  ASSERT_TRUE(now.ok()) << now.status().ToString();
  EXPECT_TRUE(*now);
}

TEST_F(ClientTest, UnconfirmedReleaseIsRetriedInTheBackground) {
  ClientOptions options;
  options.session_ttl = 6000ms;
  options.op_timeout = 300ms;
  Client client = Connect(options);
  Mutex m = client.NewMutex("stalled");
  ASSERT_TRUE(m.Lock().ok());
  server_.Signal(SIGSTOP);
  Status status = m.Unlock();
  server_.Signal(SIGCONT);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("background"), std::string::npos) << status.ToString();
  EXPECT_EQ(m.hold_count(), 0u);  // not held locally either way
  // The watchdog settles it: the lock ends up free on the server.
  auto deadline = Clock::now() + 5s;
  std::string mode;
  while (Clock::now() < deadline) {
    auto inspect = Raw({"INSPECT", "stalled"});
    if (inspect.ok() && inspect->Find("mode") != nullptr) mode = inspect->Find("mode")->str;
    if (mode == "free") break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(mode, "free");
  EXPECT_TRUE(client.SessionStatus().ok());
  // And the lock works normally afterwards.
  ASSERT_TRUE(m.Lock().ok());
  EXPECT_TRUE(m.Unlock().ok());
}

TEST_F(ClientTest, MovedClientKeepsItsSession) {
  Client a = Connect();
  uint64_t id = a.SessionId();
  Client b = std::move(a);
  EXPECT_EQ(b.SessionId(), id);
  EXPECT_EQ(a.SessionId(), 0u);  // NOLINT: moved-from is empty by contract
  Mutex m = b.NewMutex("moved");
  EXPECT_TRUE(m.Lock().ok());
  EXPECT_TRUE(m.Unlock().ok());
}

}  // namespace
}  // namespace tumbler

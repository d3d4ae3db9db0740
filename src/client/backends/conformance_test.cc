// The same contract over every backend: each test runs once per scheme
// (tumbler, redis, redlock, etcd, zookeeper, postgres, mysql) against a real
// server started by tests/backends/servers/<scheme>.sh. What a backend does
// not claim in its capability declaration (include/tumbler/backends.h) is
// checked to fail with kUnsupported instead.
//
// ctest runs one process per scheme (backend_conformance_<scheme>, filter
// "*/<scheme>"); a run of the binary without a filter tests them all.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "client/backends/test_support.h"
#include "tumbler/client.h"

namespace tumbler {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::ExternalServer;
using testing::UniqueName;

// One server per scheme for the whole process (started on first use).
ExternalServer& SharedServer(const std::string& scheme) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<ExternalServer>> servers;
  std::lock_guard lock(mu);
  auto& slot = servers[scheme];
  if (!slot) slot = std::make_unique<ExternalServer>(scheme);
  return *slot;
}

class ConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    server_ = &SharedServer(GetParam());
    ASSERT_TRUE(server_->ok()) << server_->error();
  }

  Client Connect(std::chrono::milliseconds ttl = 5s, const std::string& url = "") {
    ClientOptions options;
    options.session_ttl = ttl;
    options.op_timeout = 5s;
    Result<Client> client = Client::Connect(url.empty() ? server_->url() : url, options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    if (!client.ok()) std::abort();
    return std::move(client).value();
  }

  const BackendInfo& Info() const { return *FindBackend(GetParam()); }

  ExternalServer* server_ = nullptr;
};

TEST_P(ConformanceTest, ConnectsAndDeclaresItself) {
  Client client = Connect();
  EXPECT_EQ(client.backend().scheme, GetParam());
  EXPECT_NE(client.SessionId(), 0u);
  EXPECT_TRUE(client.SessionStatus().ok()) << client.SessionStatus().ToString();
  EXPECT_GT(client.SafeUntil(), Clock::now());
}

TEST_P(ConformanceTest, ThreadsOfOneClientExclude) {
  Client client = Connect();
  const std::string name = UniqueName("threads");
  constexpr int kThreads = 4;
  constexpr int kRounds = 15;
  int counter = 0;  // deliberately not atomic: the lock protects it
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      Mutex m = client.NewMutex(name);
      for (int i = 0; i < kRounds; ++i) {
        std::unique_lock lock(m);
        if (inside.fetch_add(1) != 0) overlap = true;
        int seen = counter;
        std::this_thread::sleep_for(1ms);
        counter = seen + 1;
        inside.fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(counter, kThreads * kRounds);
}

TEST_P(ConformanceTest, TwoProcessesExclude) {
  // Two `tumbler run` loops update one file with a read-sleep-write that
  // loses updates unless the lock excludes them.
  const std::string name = UniqueName("procs");
  const std::string file = server_->dir() + "/" + name + ".count";
  { std::ofstream(file) << 0; }
  constexpr int kRounds = 8;
  std::string loop = "for i in $(seq 1 " + std::to_string(kRounds) + "); do '" +
                     testing::CliPath() + "' --server '" + server_->url() +
                     "' run --lock '" + name + "' --ttl 10s -- sh -c 'n=$(cat \"" + file +
                     "\"); sleep 0.02; echo $((n+1)) > \"" + file +
                     "\"' || exit 1; done";
  std::vector<pid_t> children;
  for (int p = 0; p < 2; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", loop.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  std::ifstream in(file);
  int count = -1;
  in >> count;
  EXPECT_EQ(count, 2 * kRounds);
}

TEST_P(ConformanceTest, TryLockAndTimedWait) {
  Client a = Connect();
  Client b = Connect();
  const std::string name = UniqueName("try");
  Mutex ma = a.NewMutex(name);
  Mutex mb = b.NewMutex(name);
  ASSERT_TRUE(ma.TryLock().value());
  Result<bool> busy = mb.TryLock();
  ASSERT_TRUE(busy.ok()) << busy.status().ToString();
  EXPECT_FALSE(busy.value());
  Clock::time_point start = Clock::now();
  Result<bool> timed = mb.TryLockFor(400ms);
  auto took = Clock::now() - start;
  ASSERT_TRUE(timed.ok()) << timed.status().ToString();
  EXPECT_FALSE(timed.value());
  EXPECT_GE(took, 350ms);
  EXPECT_LT(took, 5s);
  EXPECT_TRUE(ma.Unlock().ok());
  Result<bool> free = mb.TryLockFor(3s);
  ASSERT_TRUE(free.ok()) << free.status().ToString();
  EXPECT_TRUE(free.value());
  EXPECT_TRUE(mb.Unlock().ok());
  // A timed-out wait leaves nothing behind: a try-lock by a third client works.
  Client c = Connect();
  Mutex mc = c.NewMutex(name);
  EXPECT_TRUE(mc.TryLock().value());
  EXPECT_TRUE(mc.Unlock().ok());
}

TEST_P(ConformanceTest, BlockedLockIsWokenByRelease) {
  Client a = Connect();
  Client b = Connect();
  const std::string name = UniqueName("wake");
  Mutex ma = a.NewMutex(name);
  ASSERT_TRUE(ma.Lock().ok());
  std::atomic<bool> got{false};
  Clock::time_point released;
  std::atomic<int64_t> woke_after_ms{-1};
  std::thread waiter([&] {
    Mutex mb = b.NewMutex(name);
    Status s = mb.Lock();
    EXPECT_TRUE(s.ok()) << s.ToString();
    woke_after_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - released)
                        .count();
    got = true;
    EXPECT_TRUE(mb.Unlock().ok());
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(got.load());
  released = Clock::now();
  ASSERT_TRUE(ma.Unlock().ok());
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_GE(woke_after_ms.load(), 0);
  EXPECT_LT(woke_after_ms.load(), 3000);
}

TEST_P(ConformanceTest, ReentrancyIsPerThread) {
  if (!Info().Supports(Property::kReentrancy)) {
    GTEST_FAIL() << "every backend counts nested holds (at least in the client)";
  }
  Client a = Connect();
  Client b = Connect();
  const std::string name = UniqueName("reent");
  Mutex ma = a.NewMutex(name);
  ASSERT_TRUE(ma.Lock().ok());
  ASSERT_TRUE(ma.Lock().ok());
  EXPECT_EQ(ma.hold_count(), 2u);
  Mutex mb = b.NewMutex(name);
  EXPECT_FALSE(mb.TryLock().value());
  ASSERT_TRUE(ma.Unlock().ok());
  EXPECT_EQ(ma.hold_count(), 1u);
  EXPECT_FALSE(mb.TryLock().value());
  ASSERT_TRUE(ma.Unlock().ok());
  EXPECT_EQ(ma.Unlock().code(), StatusCode::kNotHeld);
  EXPECT_TRUE(mb.TryLockFor(3s).value());
  EXPECT_TRUE(mb.Unlock().ok());
}

TEST_P(ConformanceTest, FencingTokensIncreaseOrAreUnsupported) {
  Client a = Connect();
  Client b = Connect();
  const std::string name = UniqueName("fence");
  Mutex ma = a.NewMutex(name);
  Mutex mb = b.NewMutex(name);
  if (!Info().Supports(Property::kFencing)) {
    ASSERT_TRUE(ma.Lock().ok());
    EXPECT_EQ(ma.FencingToken().status().code(), StatusCode::kUnsupported);
    EXPECT_EQ(ma.token(), 0u);
    EXPECT_TRUE(ma.Unlock().ok());
    return;
  }
  uint64_t last = 0;
  for (int i = 0; i < 6; ++i) {
    Mutex& m = i % 2 == 0 ? ma : mb;
    ASSERT_TRUE(m.Lock().ok());
    Result<uint64_t> token = m.FencingToken();
    ASSERT_TRUE(token.ok()) << token.status().ToString();
    EXPECT_EQ(token.value(), m.token());
    EXPECT_GT(token.value(), last) << "round " << i;
    last = token.value();
    ASSERT_TRUE(m.Unlock().ok());
  }
  EXPECT_EQ(ma.FencingToken().status().code(), StatusCode::kNotHeld);
}

TEST_P(ConformanceTest, SharedModeOrUnsupported) {
  Client a = Connect();
  Client b = Connect();
  const std::string name = UniqueName("shared");
  SharedMutex ra = a.NewSharedMutex(name);
  SharedMutex rb = b.NewSharedMutex(name);
  if (!Info().Supports(Property::kSharedMode)) {
    EXPECT_EQ(ra.LockShared().code(), StatusCode::kUnsupported);
    EXPECT_EQ(ra.TryLockShared().status().code(), StatusCode::kUnsupported);
    return;
  }
  ASSERT_TRUE(ra.LockShared().ok());
  Result<bool> second = rb.TryLockSharedFor(2s);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(second.value());
  Client c = Connect();
  Mutex writer = c.NewMutex(name);
  EXPECT_FALSE(writer.TryLock().value());
  EXPECT_TRUE(ra.UnlockShared().ok());
  EXPECT_TRUE(rb.UnlockShared().ok());
  EXPECT_TRUE(writer.TryLockFor(3s).value());
  EXPECT_TRUE(writer.Unlock().ok());
}

TEST_P(ConformanceTest, KilledHolderIsReleased) {
  // A `tumbler run` process holds the lock; kill -9 it (and its command).
  // The lease / session / connection must give the lock to someone else.
  const std::string name = UniqueName("killed");
  constexpr auto kTtl = 2s;
  testing::HolderProcess holder;
  Status started = holder.Start(server_->url(), name, kTtl);
  ASSERT_TRUE(started.ok()) << started.ToString();
  std::this_thread::sleep_for(100ms);
  holder.Kill();
  Clock::time_point killed = Clock::now();

  Client other = Connect();
  Mutex m = other.NewMutex(name);
  Result<bool> got = m.TryLockFor(kTtl + 20s);
  auto after = Clock::now() - killed;
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got.value()) << "the dead holder's lock was never released";
  // ZooKeeper's session timeout is clamped to at least 2 ticks (1 s in the
  // test config) and at most 20 ticks; every backend must release within a
  // few leases.
  EXPECT_LT(after, kTtl * 4 + 2s);
  EXPECT_TRUE(m.Unlock().ok());
}

TEST_P(ConformanceTest, ServerStoppedGivesErrorsAndSessionLoss) {
  // A server of its own, stopped while a lock is held.
  ExternalServer own(GetParam());
  ASSERT_TRUE(own.ok()) << own.error();
  ClientOptions options;
  options.session_ttl = 2s;
  options.op_timeout = 2s;
  options.connect_timeout = 1s;
  Result<Client> connected = Client::Connect(own.url(), options);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  Client client = std::move(connected).value();
  testing::SessionLossWatch watch(client);
  Mutex held = client.NewMutex("held");
  ASSERT_TRUE(held.Lock().ok());
  // A second client blocked on the held lock when the server goes.
  Result<Client> second = Client::Connect(own.url(), options);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  Status waited;
  std::atomic<bool> wait_ended{false};
  std::thread waiter([&] {
    waited = second->NewMutex("held").Lock();
    wait_ended = true;
  });
  std::this_thread::sleep_for(300ms);
  ASSERT_FALSE(wait_ended.load()) << "granted a held lock: " << waited.ToString();
  own.Stop(/*hard=*/true);
  Clock::time_point stopped = Clock::now();

  // Calls fail with an error within a bounded time rather than hang.
  Mutex other = client.NewMutex("other");
  Result<bool> attempt = other.TryLockFor(1s);
  EXPECT_LT(Clock::now() - stopped, 15s);
  if (attempt.ok()) {
    EXPECT_FALSE(attempt.value()) << "granted a lock by a stopped server";
  }

  Clock::time_point deadline = stopped + options.session_ttl + 20s;
  ASSERT_TRUE(watch.WaitLost(
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())))
      << "OnSessionLost never ran";
  EXPECT_EQ(watch.why().code(), StatusCode::kSessionLost);
  EXPECT_EQ(client.SessionStatus().code(), StatusCode::kSessionLost);
  EXPECT_EQ(other.Lock().code(), StatusCode::kSessionLost);
  EXPECT_EQ(held.token(), 0u);

  // The blocked lock() ends with an error once its session is gone: it does
  // not hang on a dead server.
  while (!wait_ended.load() && Clock::now() < deadline) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(wait_ended.load()) << "a blocked Lock() hung after the server stopped";
  if (!wait_ended.load()) second->Close().IgnoreError();  // wakes it, so the test can end
  waiter.join();
  EXPECT_FALSE(waited.ok());
}

TEST_P(ConformanceTest, DeadlockFailsOneWaitOrTimedWaitsEndIt) {
  // A holds x and wants y; B holds y and wants x. A backend that detects
  // deadlocks fails exactly one of the two waits with kDeadlock (the other
  // then gets its lock); one that does not must let timed waits end the
  // cycle: both time out (false), neither claims a deadlock, nothing hangs.
  const bool detects = Info().Supports(Property::kDeadlockDetection);
  Client a = Connect();
  Client b = Connect();
  const std::string x = UniqueName("dl-x"), y = UniqueName("dl-y");
  Mutex ax = a.NewMutex(x), ay = a.NewMutex(y);
  Mutex bx = b.NewMutex(x), by = b.NewMutex(y);
  ASSERT_TRUE(ax.Lock().ok());
  // Bounded either way, so that a detection that does not happen fails the
  // test (no kDeadlock within 10 s) instead of hanging it.
  auto wait = [&](Mutex& m) { return m.TryLockFor(detects ? 10s : 1s); };
  // Holders are threads: B's holds and wait are all on one thread of its own.
  Result<bool> b_got = false;
  std::atomic<int> b_state{0};  // 1: B holds y; -1: it could not lock y
  std::thread tb([&] {
    Status locked = by.Lock();
    if (!locked.ok()) {
      b_got = locked;
      b_state = -1;
      return;
    }
    b_state = 1;
    std::this_thread::sleep_for(200ms);  // A waits first
    b_got = wait(bx);
    if (b_got.ok() && b_got.value()) {
      EXPECT_TRUE(bx.Unlock().ok());
    }
    EXPECT_TRUE(by.Unlock().ok());
  });
  while (b_state.load() == 0) std::this_thread::sleep_for(5ms);
  if (b_state.load() < 0) {
    tb.join();
    FAIL() << "B could not lock y: " << b_got.status().ToString();
  }
  Clock::time_point start = Clock::now();
  Result<bool> a_got = wait(ay);
  if (a_got.ok() && a_got.value()) {
    EXPECT_TRUE(ay.Unlock().ok());
  }
  EXPECT_TRUE(ax.Unlock().ok());
  tb.join();
  EXPECT_LT(Clock::now() - start, 9s);
  auto is_deadlock = [](const Result<bool>& r) {
    return !r.ok() && r.status().code() == StatusCode::kDeadlock;
  };
  auto got = [](const Result<bool>& r) { return r.ok() && r.value(); };
  if (detects) {
    EXPECT_EQ(is_deadlock(a_got) + is_deadlock(b_got), 1)
        << a_got.status().ToString() << " / " << b_got.status().ToString();
    EXPECT_TRUE(got(a_got) || got(b_got));
  } else {
    EXPECT_TRUE(a_got.ok()) << a_got.status().ToString();
    EXPECT_TRUE(b_got.ok()) << b_got.status().ToString();
    EXPECT_FALSE(got(a_got) && got(b_got)) << "both held both locks";
  }
}

std::string SchemeName(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

INSTANTIATE_TEST_SUITE_P(All, ConformanceTest,
                         ::testing::Values("tumbler", "redis", "redlock", "etcd", "zookeeper",
                                           "postgres", "mysql"),
                         SchemeName);

}  // namespace
}  // namespace tumbler

// What is specific to the postgres:// backend, against a real PostgreSQL
// started by tests/backends/servers/postgres.sh: URL checks, the lock key
// hash as the server sees it (pg_locks), one connection per thread, the
// lease (idle_session_timeout) freeing a hung holder, deadlock detection,
// the connection bound, and Close / server loss waking blocked calls. The
// contract shared by all backends is in conformance_test.cc. The server is
// inspected with psql, as an operator would.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "client/backends/sql_backend.h"
#include "client/backends/test_support.h"
#include "tumbler/client.h"

namespace tumbler {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::ExternalServer;
using testing::UniqueName;

// The server shared by the tests that do not stop it.
ExternalServer& Shared() {
  // Destroyed at exit, which stops the server.
  static ExternalServer server("postgres");
  return server;
}

// Runs `sql` with psql on `url`; returns its unaligned, tuples-only output.
std::string Psql(const std::string& url, const std::string& sql) {
  std::string command = "timeout 20 psql '" + url + "' -XAtq -c \"" + sql + "\" 2>&1";
  int status = 0;
  std::string text = testing::CommandOutput(command, &status);
  if (status == -1) return "popen failed";
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

Client Connect(const std::string& url, std::chrono::milliseconds ttl = 5s,
               const std::string& session_name = "", size_t connections_max = 64,
               std::chrono::milliseconds op_timeout = 5s) {
  ClientOptions options;
  options.session_ttl = ttl;
  options.op_timeout = op_timeout;
  options.session_name = session_name;
  options.connections_max = connections_max;
  Result<Client> client = Client::Connect(url, options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  if (!client.ok()) std::abort();
  return std::move(client).value();
}

class PostgresTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(Shared().ok()) << Shared().error(); }
  const std::string& url() const { return Shared().url(); }
};

TEST(PostgresUrlTest, RejectsMalformedUrls) {
  for (const char* bad : {"postgres://u@127.0.0.1:notaport/db", "postgres://u@127.0.0.1:0/db",
                          "postgres://u@127.0.0.1:70000/db", "postgres://h/db?nosuchparam=1",
                          "postgres://u@[::1/db"}) {
    Result<Client> client = Client::Connect(bad);
    ASSERT_FALSE(client.ok()) << bad;
    EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument)
        << bad << ": " << client.status().ToString();
  }
  ClientOptions options;
  options.connections_max = 0;
  Result<Client> client = Client::Connect("postgres://u@127.0.0.1:5432/db", options);
  EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
}

TEST(PostgresUrlTest, UnreachableServerIsUnavailable) {
  ClientOptions options;
  options.connect_timeout = 1s;
  // Port 1 on loopback: nothing listens, the connect is refused at once.
  Result<Client> client = Client::Connect("postgres://u@127.0.0.1:1/db", options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable) << client.status().ToString();
}

TEST(PostgresKeyTest, NameHashIsFnv1a64) {
  // The documented mapping: key = (int64) FNV-1a-64(name).
  EXPECT_EQ(client::Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(client::Fnv1a64("orders/42"), 0xa62399f64f6961dfULL);
  EXPECT_EQ(static_cast<int64_t>(client::Fnv1a64("orders/42")), -6475162556055330337LL);
}

TEST_F(PostgresTest, ServerSeesTheDocumentedKeyOnTheThreadsOwnConnection) {
  const std::string session = UniqueName("keys");
  Client client = Connect(url(), 5s, session);
  Mutex m = client.NewMutex("orders/42");
  ASSERT_TRUE(m.Lock().ok());
  // A bigint advisory key shows as classid = high 32 bits, objid = low 32.
  std::string holder = Psql(url(),
                            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a "
                            "USING (pid) WHERE l.locktype = 'advisory' AND l.granted AND "
                            "l.classid = 2787351030 AND l.objid = 1332306399 AND l.objsubid = 1");
  EXPECT_EQ(holder, session);
  // Held on the thread's own connection, not the control connection.
  std::string pid = Psql(url(), "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND "
                                "classid = 2787351030 AND objid = 1332306399");
  EXPECT_NE(pid, std::to_string(client.SessionId()));
  ASSERT_TRUE(m.Unlock().ok());
  EXPECT_EQ(Psql(url(), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
                        "classid = 2787351030 AND objid = 1332306399"),
            "0");
}

TEST_F(PostgresTest, ThreadsOfOneClientHoldOnSeparateConnectionsAndExclude) {
  const std::string session = UniqueName("threads");
  Client client = Connect(url(), 5s, session);
  Client other = Connect(url());
  const std::string a = UniqueName("a"), b = UniqueName("b");
  Mutex ma = client.NewMutex(a);
  ASSERT_TRUE(ma.Lock().ok());
  std::thread t([&] {
    Mutex same = client.NewMutex(a);
    Result<bool> busy = same.TryLock();  // another thread: another holder
    ASSERT_TRUE(busy.ok()) << busy.status().ToString();
    EXPECT_FALSE(busy.value());
    Mutex mb = client.NewMutex(b);
    EXPECT_TRUE(mb.Lock().ok());
    // Two threads hold: two connections besides the control one.
    EXPECT_EQ(Psql(url(), "SELECT count(DISTINCT l.pid) FROM pg_locks l JOIN pg_stat_activity s "
                          "USING (pid) WHERE l.locktype = 'advisory' AND s.application_name = '" +
                              session + "'"),
              "2");
    EXPECT_TRUE(mb.Unlock().ok());
  });
  t.join();
  Mutex mo = other.NewMutex(a);
  EXPECT_FALSE(mo.TryLock().value());
  ASSERT_TRUE(ma.Unlock().ok());
  EXPECT_TRUE(mo.TryLock().value());
  EXPECT_TRUE(mo.Unlock().ok());
}

TEST_F(PostgresTest, TimedOutWaitLeavesNoLockOrWaiterBehind) {
  Client a = Connect(url());
  const std::string session = UniqueName("waiter");
  Client b = Connect(url(), 5s, session);
  const std::string name = UniqueName("timed");
  Mutex ma = a.NewMutex(name);
  ASSERT_TRUE(ma.Lock().ok());
  Mutex mb = b.NewMutex(name);
  Result<bool> got = mb.TryLockFor(300ms);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(got.value());
  EXPECT_EQ(Psql(url(), "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity s USING (pid) "
                        "WHERE l.locktype = 'advisory' AND s.application_name = '" + session + "'"),
            "0");
  ASSERT_TRUE(ma.Unlock().ok());
}

TEST_F(PostgresTest, TokensIncreaseAcrossClientsAndModes) {
  Client a = Connect(url());
  Client b = Connect(url());
  const std::string name = UniqueName("tokens");
  SharedMutex ma = a.NewSharedMutex(name);
  SharedMutex mb = b.NewSharedMutex(name);
  uint64_t last = 0;
  for (int i = 0; i < 10; ++i) {
    SharedMutex& m = i % 2 == 0 ? ma : mb;
    if (i % 3 == 0) {
      ASSERT_TRUE(m.LockShared().ok());
    } else {
      ASSERT_TRUE(m.Lock().ok());
    }
    uint64_t token = m.token();
    EXPECT_GT(token, last) << "grant " << i;
    last = token;
    ASSERT_TRUE((i % 3 == 0 ? m.UnlockShared() : m.Unlock()).ok());
  }
  // Two readers at once, each with its own token.
  ASSERT_TRUE(ma.LockShared().ok());
  ASSERT_TRUE(mb.TryLockShared().value());
  EXPECT_NE(ma.token(), mb.token());
  EXPECT_EQ(mb.TryLock().status().code(), StatusCode::kWrongMode);
  ASSERT_TRUE(ma.UnlockShared().ok());
  ASSERT_TRUE(mb.UnlockShared().ok());
}

TEST_F(PostgresTest, WriterWaitingBlocksNewReaders) {
  Client a = Connect(url());
  Client b = Connect(url());
  Client c = Connect(url());
  const std::string name = UniqueName("rw");
  SharedMutex ra = a.NewSharedMutex(name);
  ASSERT_TRUE(ra.LockShared().ok());
  std::atomic<bool> writer_has{false};
  std::thread writer([&] {
    SharedMutex w = b.NewSharedMutex(name);
    ASSERT_TRUE(w.Lock().ok());
    writer_has = true;
    std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(w.Unlock().ok());
  });
  std::this_thread::sleep_for(300ms);  // the writer is queued
  SharedMutex rc = c.NewSharedMutex(name);
  Result<bool> barged = rc.TryLockShared();
  ASSERT_TRUE(barged.ok());
  EXPECT_FALSE(barged.value()) << "a reader got past a waiting writer";
  ASSERT_TRUE(ra.UnlockShared().ok());
  writer.join();
  EXPECT_TRUE(writer_has.load());
}

TEST_F(PostgresTest, HungHolderIsReleasedAfterTheTtl) {
  // A holder process that stops (SIGSTOP) keeps its TCP connection open; the
  // server ends the connection once it has idled for the TTL.
  const std::string name = UniqueName("hung");
  testing::HolderProcess holder;
  Status started = holder.Start(url(), name, 1500ms);
  ASSERT_TRUE(started.ok()) << started.ToString();
  Client client = Connect(url());
  Mutex m = client.NewMutex(name);
  ASSERT_FALSE(m.TryLock().value()) << "the holder does not hold the lock";
  holder.Signal(SIGSTOP);
  Clock::time_point stopped = Clock::now();
  Result<bool> got = m.TryLockFor(10s);
  auto took = Clock::now() - stopped;
  holder.Kill();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got.value());
  EXPECT_LT(took, 5s);
  EXPECT_TRUE(m.Unlock().ok());
}

TEST_F(PostgresTest, ConnectionBoundGivesTimeout) {
  Client client = Connect(url(), 5s, "", /*connections_max=*/1, /*op_timeout=*/300ms);
  Mutex a = client.NewMutex(UniqueName("bound-a"));
  ASSERT_TRUE(a.Lock().ok());
  std::thread t([&] {
    Mutex b = client.NewMutex(UniqueName("bound-b"));
    Clock::time_point start = Clock::now();
    Result<bool> got = b.TryLock();
    EXPECT_EQ(got.status().code(), StatusCode::kTimeout) << got.status().ToString();
    EXPECT_GE(Clock::now() - start, 250ms);
  });
  t.join();
  ASSERT_TRUE(a.Unlock().ok());
  // Given back: another thread may use the one connection now.
  std::thread t2([&] {
    Mutex b = client.NewMutex(UniqueName("bound-b"));
    EXPECT_TRUE(b.TryLock().value());
    EXPECT_TRUE(b.Unlock().ok());
  });
  t2.join();
}

TEST_F(PostgresTest, CloseWakesABlockedLockAndReleasesOnTheServer) {
  Client a = Connect(url());
  Client b = Connect(url());
  const std::string name = UniqueName("close"), other = UniqueName("close-other");
  Mutex ma = a.NewMutex(name);
  ASSERT_TRUE(ma.Lock().ok());
  Mutex bo = b.NewMutex(other);
  ASSERT_TRUE(bo.Lock().ok());
  std::atomic<bool> done{false};
  Status waited;
  // Made here: Close() must not run concurrently with other calls on b.
  Mutex mb = b.NewMutex(name);
  std::thread t([&] {
    waited = mb.Lock();  // waits forever for a
    done = true;
  });
  std::this_thread::sleep_for(300ms);
  ASSERT_FALSE(done.load());
  Clock::time_point start = Clock::now();
  EXPECT_TRUE(b.Close().ok());
  t.join();
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(waited.code(), StatusCode::kSessionLost) << waited.ToString();
  // b's hold of `other` is gone on the server.
  Mutex ao = a.NewMutex(other);
  EXPECT_TRUE(ao.TryLockFor(2s).value());
  EXPECT_TRUE(ao.Unlock().ok());
  EXPECT_TRUE(ma.Unlock().ok());
}

TEST_F(PostgresTest, TerminatedHolderConnectionLosesTheSession) {
  const std::string session = UniqueName("terminated");
  Client client = Connect(url(), 900ms, session);
  std::atomic<bool> lost{false};
  client.OnSessionLost([&](const Status&) { lost = true; });
  Mutex m = client.NewMutex(UniqueName("term"));
  ASSERT_TRUE(m.Lock().ok());
  EXPECT_EQ(Psql(url(), "SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l JOIN "
                        "pg_stat_activity s USING (pid) WHERE l.locktype = 'advisory' AND "
                        "s.application_name = '" + session + "'"),
            "1");
  for (int i = 0; i < 100 && !lost; ++i) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(lost.load());
  EXPECT_EQ(client.SessionStatus().code(), StatusCode::kSessionLost);
  EXPECT_EQ(m.TryLock().status().code(), StatusCode::kSessionLost);
}

}  // namespace
}  // namespace tumbler

// What is specific to the mysql:// backend, against a real MariaDB started by
// tests/backends/servers/mysql.sh: URL checks, lock names (plain and hashed)
// as the server sees them (IS_USED_LOCK), one connection per thread, fencing
// rows trimmed, the lease (wait_timeout) freeing a hung holder, deadlock
// detection, and Close / KILL / server loss. The contract shared by all
// backends is in conformance_test.cc. The server is inspected with the
// mariadb command-line client, as an operator would.
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

// The server shared by the tests that do not stop it; destroyed at exit,
// which stops it.
ExternalServer& Shared() {
  static ExternalServer server("mysql");
  return server;
}

// Runs `sql` with the mariadb client on the server of `url`
// (mysql://tumbler:tumbler@127.0.0.1:PORT/tumbler, as mysql.sh prints it).
std::string Sql(const std::string& url, const std::string& sql) {
  std::string port = url.substr(url.rfind(':') + 1);
  port = port.substr(0, port.find('/'));
  std::string command = "timeout 20 mariadb --no-defaults -h127.0.0.1 -P" + port +
                        " -utumbler -ptumbler tumbler -N -B -e \"" + sql + "\" 2>&1";
  int status = 0;
  std::string text = testing::CommandOutput(command, &status);
  if (status == -1) return "popen failed";
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

Client Connect(const std::string& url, std::chrono::milliseconds ttl = 5s,
               std::chrono::milliseconds op_timeout = 5s) {
  ClientOptions options;
  options.session_ttl = ttl;
  options.op_timeout = op_timeout;
  Result<Client> client = Client::Connect(url, options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  if (!client.ok()) std::abort();
  return std::move(client).value();
}

class MySqlTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(Shared().ok()) << Shared().error(); }
  const std::string& url() const { return Shared().url(); }
};

TEST(MySqlUrlTest, RejectsMalformedUrls) {
  for (const char* bad :
       {"mysql://u:p@127.0.0.1:3306", "mysql://u:p@127.0.0.1:3306/", "mysql://u:p@127.0.0.1:x/db",
        "mysql://u:p@127.0.0.1:0/db", "mysql://u:p@127.0.0.1:70000/db", "mysql://u:p@127.0.0.1:/db",
        "mysql://u:p@/db", "mysql://u:p@127.0.0.1/db?ssl=1", "mysql://u:p@[::1/db",
        "mysql://u%zz:p@127.0.0.1/db", "mysql://u:p@127.0.0.1/db/extra"}) {
    Result<Client> client = Client::Connect(bad);
    ASSERT_FALSE(client.ok()) << bad;
    EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument)
        << bad << ": " << client.status().ToString();
  }
}

TEST_F(MySqlTest, WrongPasswordIsRefusedByTheServer) {
  std::string wrong = url();
  wrong.replace(wrong.find(":tumbler@"), 9, ":wrong@");
  Clock::time_point start = Clock::now();
  Result<Client> client = Client::Connect(wrong);
  EXPECT_LT(Clock::now() - start, 2s);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable) << client.status().ToString();
  EXPECT_NE(client.status().message().find("Access denied"), std::string::npos)
      << client.status().ToString();
}

TEST(MySqlNameTest, ShortPlainNamesPassLongOrOddOnesAreHashed) {
  EXPECT_EQ(client::MySqlLockName("orders/42"), "orders/42");
  EXPECT_EQ(client::MySqlLockName(std::string(64, 'x')), std::string(64, 'x'));
  // The documented hash: FNV-1a 128 ("a" is the published test vector).
  EXPECT_EQ(client::Fnv1a128Hex("a"), "d228cb696f1a8caf78912b704e4a8964");
  EXPECT_EQ(client::MySqlLockName(std::string(65, 'x')),
            "tumbler:e09d1c9073eb86771c3233a27c7d3d77");
  EXPECT_EQ(client::MySqlLockName("orders 42"), "tumbler:141005334d05db4997e2bf8f8bbec48e");
  // Quotes never reach the SQL text, and no plain name can pose as a hash.
  EXPECT_EQ(client::MySqlLockName("it's").rfind("tumbler:", 0), 0u);
  EXPECT_EQ(client::MySqlLockName("a\\b").rfind("tumbler:", 0), 0u);
  EXPECT_NE(client::MySqlLockName("tumbler:e09d1c9073eb86771c3233a27c7d3d77"),
            "tumbler:e09d1c9073eb86771c3233a27c7d3d77");
  EXPECT_EQ(client::MySqlLockName(std::string("\xff\x00z", 3)).size(), 40u);
}

TEST_F(MySqlTest, ServerSeesTheNameOnTheThreadsOwnConnection) {
  Client client = Connect(url());
  const std::string plain = UniqueName("plain");
  const std::string long_name = std::string(100, 'L') + UniqueName("");
  Mutex a = client.NewMutex(plain);
  Mutex b = client.NewMutex(long_name);
  ASSERT_TRUE(a.Lock().ok());
  ASSERT_TRUE(b.Lock().ok());
  std::string holder = Sql(url(), "SELECT IS_USED_LOCK('" + plain + "')");
  EXPECT_NE(holder, "NULL");
  EXPECT_NE(holder, std::to_string(client.SessionId()));  // not the control connection
  // Same thread, same connection.
  EXPECT_EQ(Sql(url(), "SELECT IS_USED_LOCK('" + client::MySqlLockName(long_name) + "')"), holder);
  ASSERT_TRUE(a.Unlock().ok());
  ASSERT_TRUE(b.Unlock().ok());
  EXPECT_EQ(Sql(url(), "SELECT IS_USED_LOCK('" + plain + "')"), "NULL");
}

TEST_F(MySqlTest, ThreadsOfOneClientHoldOnSeparateConnectionsAndExclude) {
  Client client = Connect(url());
  Client other = Connect(url());
  const std::string a = UniqueName("a"), b = UniqueName("b");
  Mutex ma = client.NewMutex(a);
  ASSERT_TRUE(ma.Lock().ok());
  std::thread t([&] {
    Mutex same = client.NewMutex(a);
    Result<bool> busy = same.TryLock();
    ASSERT_TRUE(busy.ok()) << busy.status().ToString();
    EXPECT_FALSE(busy.value());
    Mutex mb = client.NewMutex(b);
    EXPECT_TRUE(mb.Lock().ok());
    EXPECT_NE(Sql(url(), "SELECT IS_USED_LOCK('" + a + "')"),
              Sql(url(), "SELECT IS_USED_LOCK('" + b + "')"));
    EXPECT_TRUE(mb.Unlock().ok());
  });
  t.join();
  Mutex mo = other.NewMutex(a);
  EXPECT_FALSE(mo.TryLock().value());
  ASSERT_TRUE(ma.Unlock().ok());
  EXPECT_TRUE(mo.TryLock().value());
  EXPECT_TRUE(mo.Unlock().ok());
}

TEST_F(MySqlTest, TimedOutWaitLeavesNothingBehind) {
  Client a = Connect(url());
  Client b = Connect(url());
  const std::string name = UniqueName("timed");
  Mutex ma = a.NewMutex(name);
  ASSERT_TRUE(ma.Lock().ok());
  std::string holder = Sql(url(), "SELECT IS_USED_LOCK('" + name + "')");
  Mutex mb = b.NewMutex(name);
  Clock::time_point start = Clock::now();
  Result<bool> got = mb.TryLockFor(300ms);  // fractional GET_LOCK timeout
  auto took = Clock::now() - start;
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(got.value());
  EXPECT_GE(took, 290ms);
  EXPECT_LT(took, 1500ms);
  EXPECT_EQ(Sql(url(), "SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE "
                       "'SELECT GET_LOCK%'"),
            "0");
  ASSERT_TRUE(ma.Unlock().ok());
  EXPECT_TRUE(mb.TryLock().value());
  EXPECT_NE(Sql(url(), "SELECT IS_USED_LOCK('" + name + "')"), holder);
  EXPECT_TRUE(mb.Unlock().ok());
}

TEST_F(MySqlTest, TokensIncreaseAndOldRowsAreTrimmed) {
  Client a = Connect(url());
  Client b = Connect(url());
  const std::string name = UniqueName("tokens");
  Mutex ma = a.NewMutex(name);
  Mutex mb = b.NewMutex(name);
  uint64_t last = 0;
  // Alternating holders first, then enough grants of one client to pass its
  // trim period (256 grants).
  for (int i = 0; i < 300; ++i) {
    Mutex& m = i < 20 && i % 2 == 1 ? mb : ma;
    ASSERT_TRUE(m.Lock().ok());
    Result<uint64_t> token = m.FencingToken();
    ASSERT_TRUE(token.ok()) << token.status().ToString();
    EXPECT_GT(token.value(), last) << "grant " << i;
    last = token.value();
    ASSERT_TRUE(m.Unlock().ok());
  }
  // a trimmed at its 256th grant: the rows older than that grant are gone,
  // the newest is kept.
  int rows = std::stoi(Sql(url(), "SELECT COUNT(*) FROM tumbler_fencing"));
  EXPECT_LT(rows, 100);
  EXPECT_EQ(Sql(url(), "SELECT MAX(id) FROM tumbler_fencing"), std::to_string(last));
}

TEST_F(MySqlTest, SharedModeIsUnsupported) {
  Client a = Connect(url());
  SharedMutex m = a.NewSharedMutex(UniqueName("shared"));
  EXPECT_EQ(m.LockShared().code(), StatusCode::kUnsupported);
  EXPECT_EQ(m.TryLockShared().status().code(), StatusCode::kUnsupported);
}

TEST_F(MySqlTest, HungHolderIsReleasedAfterTheTtl) {
  // A stopped holder keeps its TCP connection open; the server ends it
  // after wait_timeout (the TTL, rounded up to 2 s here) of silence.
  const std::string name = UniqueName("hung");
  testing::HolderProcess holder;
  Status started = holder.Start(url(), name, 1500ms);
  ASSERT_TRUE(started.ok()) << started.ToString();
  ASSERT_EQ(Sql(url(), "SELECT IS_USED_LOCK('" + name + "') IS NOT NULL"), "1");
  holder.Signal(SIGSTOP);
  Clock::time_point stopped = Clock::now();
  Client client = Connect(url());
  Mutex m = client.NewMutex(name);
  Result<bool> got = m.TryLockFor(15s);
  auto took = Clock::now() - stopped;
  holder.Kill();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got.value());
  EXPECT_LT(took, 8s);
  EXPECT_TRUE(m.Unlock().ok());
}

TEST_F(MySqlTest, CloseWakesABlockedLockAndLeavesNoWaiterOnTheServer) {
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
    waited = mb.Lock();  // waits "forever" for a
    done = true;
  });
  std::this_thread::sleep_for(300ms);
  ASSERT_FALSE(done.load());
  Clock::time_point start = Clock::now();
  EXPECT_TRUE(b.Close().ok());
  t.join();
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(waited.code(), StatusCode::kSessionLost) << waited.ToString();
  EXPECT_EQ(Sql(url(), "SELECT IS_USED_LOCK('" + other + "')"), "NULL");
  // The server dropped the abandoned GET_LOCK wait (it watches for closed
  // clients), so a's release is not handed to a dead connection.
  std::string waiting;
  for (int i = 0; i < 60; ++i) {
    waiting = Sql(url(), "SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE "
                         "'SELECT GET_LOCK%'");
    if (waiting == "0") break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(waiting, "0");
  EXPECT_TRUE(ma.Unlock().ok());
}

TEST_F(MySqlTest, KilledHolderConnectionLosesTheSession) {
  Client client = Connect(url(), 900ms);
  std::atomic<bool> lost{false};
  client.OnSessionLost([&](const Status&) { lost = true; });
  const std::string name = UniqueName("killed");
  Mutex m = client.NewMutex(name);
  ASSERT_TRUE(m.Lock().ok());
  std::string id = Sql(url(), "SELECT IS_USED_LOCK('" + name + "')");
  Sql(url(), "KILL " + id);
  for (int i = 0; i < 100 && !lost; ++i) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(lost.load());
  EXPECT_EQ(client.SessionStatus().code(), StatusCode::kSessionLost);
  EXPECT_EQ(m.TryLock().status().code(), StatusCode::kSessionLost);
}

}  // namespace
}  // namespace tumbler

// Tests of the zookeeper:// backend (zookeeper.cc) against a real ZooKeeper
// started by tests/backends/servers/zookeeper.sh (tickTime 500 ms: session
// timeouts of 1..10 s). The test looks at the znodes itself through the C
// client, and at the server's watches through the `wchp` command, so that
// the recipe's claims (no node left behind, only the predecessor watched,
// FIFO order, czxid tokens) are checked where they happen.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
// The synchronous calls of libzookeeper_mt are declared only for its threaded
// build; the test inspects the server with them.
#define THREADED 1
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "client/backends/test_support.h"
#include "client/backends/zookeeper_path.h"
#include "tumbler/client.h"

namespace tumbler {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using client::zk::EscapeName;
using client::zk::ParseUrl;
using client::zk::UnescapeName;
using testing::ExternalServer;
using testing::UniqueName;

ExternalServer& SharedServer() {
  static ExternalServer server("zookeeper");
  return server;
}

// A plain synchronous ZooKeeper handle, to look at what the backend wrote.
class Inspector {
 public:
  explicit Inspector(const std::string& url) {
    Result<client::zk::Url> parsed = ParseUrl(url);
    if (!parsed.ok()) return;
    root_ = parsed->root;
    hosts_ = parsed->hosts;
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zh_ = zookeeper_init(hosts_.c_str(), nullptr, 10000, nullptr, nullptr, ZOO_NO_LOG_CLIENTENV);
    Clock::time_point deadline = Clock::now() + 10s;
    while (zh_ != nullptr && zoo_state(zh_) != ZOO_CONNECTED_STATE && Clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
  }
  ~Inspector() {
    if (zh_ != nullptr) zookeeper_close(zh_);
  }
  bool ok() const { return zh_ != nullptr && zoo_state(zh_) == ZOO_CONNECTED_STATE; }

  std::string LockDir(const std::string& name) const {
    return root_ + "/locks/" + EscapeName(name);
  }
  const std::string& root() const { return root_; }

  // Children of `path`, sorted; empty if it does not exist.
  std::vector<std::string> Children(const std::string& path) {
    String_vector strings{};
    std::vector<std::string> out;
    if (zoo_get_children(zh_, path.c_str(), 0, &strings) != ZOK) return out;
    for (int i = 0; i < strings.count; ++i) out.emplace_back(strings.data[i]);
    deallocate_String_vector(&strings);
    std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
      return a.substr(a.size() - 10) < b.substr(b.size() - 10);
    });
    return out;
  }
  // The lock nodes of `name` in queue order (full paths).
  std::vector<std::string> Queue(const std::string& name) {
    std::vector<std::string> out;
    for (const std::string& child : Children(LockDir(name))) out.push_back(LockDir(name) + "/" + child);
    return out;
  }
  int64_t Czxid(const std::string& path) {
    Stat stat{};
    return zoo_exists(zh_, path.c_str(), 0, &stat) == ZOK ? stat.czxid : -1;
  }
  std::string Data(const std::string& path) {
    char buf[1024];
    int len = sizeof(buf);
    if (zoo_get(zh_, path.c_str(), 0, buf, &len, nullptr) != ZOK || len < 0) return "";
    return std::string(buf, static_cast<size_t>(len));
  }
  // Waits until `name` has `count` lock nodes.
  bool WaitQueueSize(const std::string& name, size_t count, std::chrono::milliseconds timeout = 10s) {
    Clock::time_point deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (Queue(name).size() == count) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  // The server's watches by path: `wchp` lists each watched path followed by
  // the sessions watching it.
  std::map<std::string, std::set<std::string>> WatchesByPath() {
    std::map<std::string, std::set<std::string>> out;
    std::string port = hosts_.substr(hosts_.rfind(':') + 1);
    std::string command = "python3 -c 'import socket; s=socket.create_connection((\"127.0.0.1\"," +
                          port + "), timeout=5); s.sendall(b\"wchp\"); d=b\"\"\n"
                          "while True:\n c=s.recv(65536)\n if not c: break\n d+=c\n"
                          "print(d.decode())'";
    std::string text = testing::CommandOutput(command);
    std::istringstream lines(text);
    std::string line, path;
    while (std::getline(lines, line)) {
      if (line.empty()) continue;
      if (line[0] == '/') {
        path = line;
      } else if (!path.empty()) {
        out[path].insert(line.substr(line.find_first_not_of(" \t")));
      }
    }
    return out;
  }

 private:
  std::string root_;
  std::string hosts_;
  zhandle_t* zh_ = nullptr;
};

class ZooKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = &SharedServer();
    ASSERT_TRUE(server_->ok()) << server_->error();
    inspector_ = std::make_unique<Inspector>(server_->url());
    ASSERT_TRUE(inspector_->ok());
  }

  Client Connect(std::chrono::milliseconds ttl = 5s) {
    ClientOptions options;
    options.session_ttl = ttl;
    options.op_timeout = 5s;
    options.session_name = "zookeeper_test";
    Result<Client> client = Client::Connect(server_->url(), options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    if (!client.ok()) std::abort();
    return std::move(client).value();
  }

  ExternalServer* server_ = nullptr;
  std::unique_ptr<Inspector> inspector_;
};

// --- URL and names (no server) ---------------------------------------------------------

TEST(ZooKeeperUrlTest, ParsesHostsAndRoot) {
  Result<client::zk::Url> url = ParseUrl("zookeeper://127.0.0.1:2182");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->hosts, "127.0.0.1:2182");
  EXPECT_EQ(url->root, "/tumbler");

  url = ParseUrl("ZooKeeper://zk1,zk2:2190,[::1]:2191/apps/locks-1");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->hosts, "zk1:2181,zk2:2190,[::1]:2191");
  EXPECT_EQ(url->root, "/apps/locks-1");
}

TEST(ZooKeeperUrlTest, RejectsMalformedUrls) {
  const std::pair<const char*, const char*> kBad[] = {
      {"zookeeper://", "no host"},
      {"zookeeper:///tumbler", "no host"},
      {"zookeeper://h:0", "port out of range"},
      {"zookeeper://h:65536", "port out of range"},
      {"zookeeper://h:123456", "port out of range"},
      {"zookeeper://h:abc", "not a number"},
      {"zookeeper://h:", "empty port"},
      {"zookeeper://:2181", "empty host name"},
      {"zookeeper://h1,,h2", "empty host"},
      {"zookeeper://[::1", "IPv6"},
      {"zookeeper://[::1]x", "junk"},
      {"zookeeper://h_ost$:1", "invalid character"},
      {"zookeeper://h/", "empty root"},
      {"zookeeper://h/a//b", "empty component"},
      {"zookeeper://h/a/", "ends with /"},
      {"zookeeper://h/a/../b", "\"..\""},
      {"zookeeper://h/zookeeper/x", "/zookeeper"},
      {"zookeeper://h/a b", "may only use"},
      {"zookeeper://h:1?x=1", "query"},
      {"zookeeper://user@h:1", "user@"},
      {"redis://h:1", "does not start with zookeeper://"},
  };
  for (const auto& [url, why] : kBad) {
    Result<client::zk::Url> parsed = ParseUrl(url);
    ASSERT_FALSE(parsed.ok()) << url;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << url;
    EXPECT_NE(parsed.status().message().find(why), std::string::npos)
        << url << ": " << parsed.status().message();
  }
  std::string many = "zookeeper://";
  for (int i = 0; i < 65; ++i) many += (i ? ",h" : "h") + std::to_string(i);
  EXPECT_EQ(ParseUrl(many).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseUrl("zookeeper://h/" + std::string(600, 'a')).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ZooKeeperUrlTest, ConnectRejectsBadUrlsAndOptions) {
  Result<Client> bad = Client::Connect("zookeeper://h:99999");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("port"), std::string::npos) << bad.status().message();

  ClientOptions options;
  options.session_ttl = 50ms;
  bad = Client::Connect("zookeeper://127.0.0.1:2181", options);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("session_ttl"), std::string::npos);
}

TEST(ZooKeeperUrlTest, ConnectToNothingFailsWithinOpTimeout) {
  // A port nobody listens on: the C client keeps retrying; Connect gives up.
  ClientOptions options;
  options.op_timeout = 1500ms;
  Clock::time_point start = Clock::now();
  Result<Client> client = Client::Connect("zookeeper://127.0.0.1:1", options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable) << client.status().ToString();
  EXPECT_LT(Clock::now() - start, 5s);
}

TEST(ZooKeeperNameTest, EscapingRoundTripsOddNames) {
  std::vector<std::string> names = {"a",       "orders/42", "/",        ".",         "..",
                                    "...",     "a.b",       "%41",      "with space", "zookeeper",
                                    "tab\there", std::string("nul\0in", 6), "\xff\xfe\x80",
                                    "\xe2\x82\xac uro", std::string(1024, '\xff'),
                                    std::string(1024, '/')};
  std::set<std::string> escaped_all;
  for (const std::string& name : names) {
    std::string escaped = EscapeName(name);
    EXPECT_LE(escaped.size(), client::zk::kEscapedNameBytesMax);
    EXPECT_EQ(escaped.find('/'), std::string::npos) << escaped;
    EXPECT_NE(escaped, ".");
    EXPECT_NE(escaped, "..");
    for (unsigned char c : escaped) {
      EXPECT_TRUE(std::isalnum(c) || c == '%' || c == '_' || c == '-' || c == '.') << escaped;
    }
    std::optional<std::string> back = UnescapeName(escaped);
    ASSERT_TRUE(back.has_value()) << escaped;
    EXPECT_EQ(*back, name);
    EXPECT_TRUE(escaped_all.insert(escaped).second) << "two names share " << escaped;
  }
  EXPECT_EQ(EscapeName("a/b"), "a%2Fb");
  EXPECT_EQ(EscapeName(".."), "%2E%2E");
  EXPECT_EQ(EscapeName("%"), "%25");
  EXPECT_FALSE(UnescapeName("%2").has_value());
  EXPECT_FALSE(UnescapeName("%zz").has_value());
  EXPECT_FALSE(UnescapeName("a/b").has_value());
  EXPECT_FALSE(UnescapeName("").has_value());
}

TEST(ZooKeeperNameTest, ParsesQueueNodes) {
  auto node = client::zk::ParseQueueNode("abc-1-lock-0000000042");
  ASSERT_TRUE(node.has_value());
  EXPECT_EQ(node->sequence, 42);
  EXPECT_FALSE(node->shared);
  node = client::zk::ParseQueueNode("abc-2-read-0000000007");
  ASSERT_TRUE(node.has_value());
  EXPECT_TRUE(node->shared);
  // Another recipe's node counts as exclusive; a node without a sequence is
  // not in the queue.
  node = client::zk::ParseQueueNode("_c_123-__WRIT__0000000003");
  ASSERT_TRUE(node.has_value());
  EXPECT_FALSE(node->shared);
  EXPECT_FALSE(client::zk::ParseQueueNode("config").has_value());
  EXPECT_FALSE(client::zk::ParseQueueNode("x-lock-00000000a1").has_value());
}

// --- Against the server ----------------------------------------------------------------

TEST_F(ZooKeeperTest, DeclaresItsCapabilities) {
  Client c = Connect();
  EXPECT_EQ(c.backend().scheme, "zookeeper");
  ASSERT_EQ(c.backend().capabilities.size(), static_cast<size_t>(kPropertyCount));
  for (int i = 0; i < kPropertyCount; ++i) {
    EXPECT_EQ(c.backend().capabilities[i].property, static_cast<Property>(i));
  }
  EXPECT_FALSE(c.backend().Supports(Property::kDeadlockDetection));
  EXPECT_NE(c.SessionId(), 0u);
}

TEST_F(ZooKeeperTest, SessionTtlAboveTheServersMaximumIsRefused) {
  // The test server's maxSessionTimeout is 20 ticks = 10 s.
  ClientOptions options;
  options.session_ttl = 30s;
  Result<Client> client = Client::Connect(server_->url(), options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(client.status().message().find("10000 ms"), std::string::npos)
      << client.status().message();
}

TEST_F(ZooKeeperTest, OddNamesMapToOneEscapedFolder) {
  Client c = Connect();
  const std::string name = UniqueName("odd/name with ../\x01\xff");
  Mutex m = c.NewMutex(name);
  ASSERT_TRUE(m.Lock().ok());
  std::vector<std::string> folders = inspector_->Children(inspector_->root() + "/locks");
  bool found = false;
  for (const std::string& folder : folders) {
    std::optional<std::string> back = UnescapeName(folder);
    if (back && *back == name) found = true;
  }
  EXPECT_TRUE(found);
  std::vector<std::string> queue = inspector_->Queue(name);
  ASSERT_EQ(queue.size(), 1u);
  // The node says who holds it.
  std::string data = inspector_->Data(queue[0]);
  EXPECT_NE(data.find("session=zookeeper_test"), std::string::npos) << data;
  EXPECT_TRUE(m.Unlock().ok());
  EXPECT_TRUE(inspector_->Queue(name).empty());
}

TEST_F(ZooKeeperTest, ExcludesAnotherClientAndTryLockLeavesNoNode) {
  Client a = Connect();
  Client b = Connect();
  const std::string name = UniqueName("exclusive");
  Mutex ma = a.NewMutex(name);
  Mutex mb = b.NewMutex(name);
  ASSERT_TRUE(ma.Lock().ok());
  ASSERT_EQ(inspector_->Queue(name).size(), 1u);

  Result<bool> got = mb.TryLock();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(got.value());
  EXPECT_EQ(inspector_->Queue(name).size(), 1u) << "a failed try-lock left its node";

  Clock::time_point start = Clock::now();
  got = mb.TryLockFor(400ms);
  Clock::duration waited = Clock::now() - start;
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(got.value());
  EXPECT_GE(waited, 400ms);
  EXPECT_LT(waited, 3s);
  EXPECT_EQ(inspector_->Queue(name).size(), 1u) << "a timed-out wait left its node";

  EXPECT_TRUE(ma.Unlock().ok());
  got = mb.TryLock();
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got.value());
  EXPECT_TRUE(mb.Unlock().ok());
  EXPECT_TRUE(inspector_->Queue(name).empty());
}

TEST_F(ZooKeeperTest, ReentrancyIsCountedLocallyOnOneNode) {
  Client a = Connect();
  Client b = Connect();
  const std::string name = UniqueName("reentrant");
  Mutex m = a.NewMutex(name);
  ASSERT_TRUE(m.Lock().ok());
  ASSERT_TRUE(m.Lock().ok());
  EXPECT_EQ(m.hold_count(), 2u);
  EXPECT_EQ(inspector_->Queue(name).size(), 1u);
  EXPECT_TRUE(m.Unlock().ok());
  EXPECT_FALSE(b.NewMutex(name).TryLock().value());
  EXPECT_TRUE(m.Unlock().ok());
  EXPECT_TRUE(inspector_->Queue(name).empty());
  EXPECT_EQ(m.Unlock().code(), StatusCode::kNotHeld);
}

TEST_F(ZooKeeperTest, WaitersAreGrantedInFifoOrderAndWatchOnlyTheirPredecessor) {
  Client holder = Connect();
  const std::string name = UniqueName("fifo");
  Mutex first = holder.NewMutex(name);
  ASSERT_TRUE(first.Lock().ok());

  // Three waiters, each in a client (so a session) of its own, queued one
  // after the other.
  constexpr int kWaiters = 3;
  std::vector<Client> clients;
  for (int i = 0; i < kWaiters; ++i) clients.push_back(Connect());
  std::mutex mu;
  std::vector<int> order;
  std::atomic<int> granted{0};
  std::atomic<bool> release{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      Mutex m = clients[i].NewMutex(name);
      Status status = m.Lock();
      EXPECT_TRUE(status.ok()) << status.ToString();
      {
        std::lock_guard lock(mu);
        order.push_back(i);
      }
      granted.fetch_add(1);
      Clock::time_point deadline = Clock::now() + 20s;
      while (!release.load() && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
      EXPECT_TRUE(m.Unlock().ok());
    });
    ASSERT_TRUE(inspector_->WaitQueueSize(name, static_cast<size_t>(i) + 2));
  }
  std::vector<std::string> queue = inspector_->Queue(name);
  ASSERT_EQ(queue.size(), 4u);

  // Each waiter watches the node just ahead of it, and nothing else of this
  // lock is watched: the holder's release wakes one waiter.
  std::set<std::string> watched_here;
  Clock::time_point deadline = Clock::now() + 5s;
  for (;;) {
    watched_here.clear();
    for (const auto& [path, sessions] : inspector_->WatchesByPath()) {
      if (path.rfind(inspector_->LockDir(name) + "/", 0) != 0) continue;
      EXPECT_EQ(sessions.size(), 1u) << path;
      watched_here.insert(path);
    }
    if (watched_here.size() == 3 || Clock::now() > deadline) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(watched_here, (std::set<std::string>{queue[0], queue[1], queue[2]}));

  // Release the chain one by one: only the next waiter gets it each time.
  release = true;  // each waiter unlocks as soon as it holds
  EXPECT_TRUE(first.Unlock().ok());
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(inspector_->Queue(name).empty());
}

TEST_F(ZooKeeperTest, ReleaseWakesOnlyTheNextWaiter) {
  Client holder = Connect();
  const std::string name = UniqueName("noherd");
  Mutex first = holder.NewMutex(name);
  ASSERT_TRUE(first.Lock().ok());
  Client c1 = Connect();
  Client c2 = Connect();
  std::atomic<int> got1{0}, got2{0};
  std::thread t1([&] {
    Mutex m = c1.NewMutex(name);
    Result<bool> got = m.TryLockFor(10s);
    if (got.ok() && got.value()) {
      got1 = 1;
      std::this_thread::sleep_for(500ms);
      EXPECT_TRUE(m.Unlock().ok());
    }
  });
  ASSERT_TRUE(inspector_->WaitQueueSize(name, 2));
  std::thread t2([&] {
    Mutex m = c2.NewMutex(name);
    Result<bool> got = m.TryLockFor(10s);
    if (got.ok() && got.value()) {
      got2 = 1;
      EXPECT_TRUE(m.Unlock().ok());
    }
  });
  ASSERT_TRUE(inspector_->WaitQueueSize(name, 3));
  Clock::time_point released = Clock::now();
  EXPECT_TRUE(first.Unlock().ok());
  Clock::time_point deadline = Clock::now() + 5s;
  while (got1.load() == 0 && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(got1.load(), 1);
  // Woken by the watch, not by polling.
  EXPECT_LT(Clock::now() - released, 300ms);
  EXPECT_EQ(got2.load(), 0) << "the second waiter passed the first";
  t1.join();
  t2.join();
  EXPECT_EQ(got2.load(), 1);
}

TEST_F(ZooKeeperTest, TokensAreTheNodesCzxidAndIncrease) {
  Client a = Connect();
  Client b = Connect();
  const std::string name = UniqueName("tokens");
  Mutex ma = a.NewMutex(name);
  Mutex mb = b.NewMutex(name);
  uint64_t last = 0;
  for (int i = 0; i < 6; ++i) {
    Mutex& m = i % 2 == 0 ? ma : mb;
    ASSERT_TRUE(m.Lock().ok());
    Result<uint64_t> token = m.FencingToken();
    ASSERT_TRUE(token.ok()) << token.status().ToString();
    std::vector<std::string> queue = inspector_->Queue(name);
    ASSERT_EQ(queue.size(), 1u);
    EXPECT_EQ(static_cast<int64_t>(token.value()), inspector_->Czxid(queue[0]));
    EXPECT_GT(token.value(), last);
    last = token.value();
    ASSERT_TRUE(m.Unlock().ok());
  }
  // A lock of another name in between still yields a larger token.
  Mutex other = a.NewMutex(UniqueName("tokens-other"));
  ASSERT_TRUE(other.Lock().ok());
  EXPECT_GT(other.token(), last);
  EXPECT_TRUE(other.Unlock().ok());
}

TEST_F(ZooKeeperTest, ReadersShareAndDoNotPassAWaitingWriter) {
  Client r1c = Connect();
  Client r2c = Connect();
  Client wc = Connect();
  Client r3c = Connect();
  const std::string name = UniqueName("rw");
  SharedMutex r1 = r1c.NewSharedMutex(name);
  SharedMutex r2 = r2c.NewSharedMutex(name);
  SharedMutex w = wc.NewSharedMutex(name);
  SharedMutex r3 = r3c.NewSharedMutex(name);
  ASSERT_TRUE(r1.LockShared().ok());
  ASSERT_TRUE(r2.TryLockShared().value());
  EXPECT_FALSE(w.TryLock().value());
  std::atomic<bool> writer_got{false};
  std::thread writer([&] {
    ASSERT_TRUE(w.Lock().ok());
    writer_got = true;
    std::this_thread::sleep_for(200ms);
    EXPECT_TRUE(w.Unlock().ok());
  });
  ASSERT_TRUE(inspector_->WaitQueueSize(name, 3));
  // A reader behind a waiting writer waits.
  EXPECT_FALSE(r3.TryLockShared().value());
  EXPECT_FALSE(r3.TryLockSharedFor(200ms).value());
  EXPECT_TRUE(r1.UnlockShared().ok());
  EXPECT_FALSE(writer_got.load());
  EXPECT_TRUE(r2.UnlockShared().ok());
  Result<bool> got = r3.TryLockSharedFor(5s);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got.value());
  EXPECT_TRUE(writer_got.load()) << "the reader passed the writer";
  writer.join();
  EXPECT_TRUE(r3.UnlockShared().ok());
  // Same thread, other mode: kWrongMode.
  ASSERT_TRUE(r3.LockShared().ok());
  EXPECT_EQ(r3.Lock().code(), StatusCode::kWrongMode);
  EXPECT_TRUE(r3.UnlockShared().ok());
}

TEST_F(ZooKeeperTest, KilledHolderProcessIsReleasedAfterItsSessionTimeout) {
  const std::string name = UniqueName("killed");
  testing::HolderProcess holder;
  Status started = holder.Start(server_->url(), name, 2s);
  ASSERT_TRUE(started.ok()) << started.ToString();
  ASSERT_EQ(inspector_->Queue(name).size(), 1u);
  holder.Kill();
  Clock::time_point killed = Clock::now();

  Client waiter = Connect();
  Mutex m = waiter.NewMutex(name);
  Result<bool> got = m.TryLockFor(20s);
  Clock::duration after = Clock::now() - killed;
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got.value());
  // Not before the session could expire (a closed TCP connection does not end
  // a ZooKeeper session; the holder's last ping was at most ttl/3 before the
  // kill), and soon after: 2 s, rounded up to a 500 ms tick.
  EXPECT_GE(after, 1000ms);
  EXPECT_LT(after, 5s);
  EXPECT_TRUE(m.Unlock().ok());
}

// Servers of their own: these tests stop them.
class ZooKeeperServerStopTest : public ::testing::Test {};

TEST_F(ZooKeeperServerStopTest, StoppedServerGivesErrorsThenSessionLoss) {
  ExternalServer own("zookeeper");
  ASSERT_TRUE(own.ok()) << own.error();
  ClientOptions options;
  options.session_ttl = 2s;
  options.op_timeout = 1s;
  Result<Client> connected = Client::Connect(own.url(), options);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  Client client = std::move(connected).value();
  Result<Client> other_connected = Client::Connect(own.url(), options);
  ASSERT_TRUE(other_connected.ok());
  Client other_client = std::move(other_connected).value();
  Result<Client> closer_connected = Client::Connect(own.url(), options);
  ASSERT_TRUE(closer_connected.ok());
  Client closer = std::move(closer_connected).value();
  Mutex closer_held = closer.NewMutex("closer");
  ASSERT_TRUE(closer_held.Lock().ok());

  testing::SessionLossWatch watch(client);
  Mutex held = client.NewMutex("held");
  ASSERT_TRUE(held.Lock().ok());
  // A blocked waiter of the same client: it must be woken, not left hanging.
  std::atomic<bool> waiter_done{false};
  Status waiter_status;
  std::thread waiter([&] {
    Mutex m = client.NewMutex("held");  // another thread: another holder
    waiter_status = m.Lock();
    waiter_done = true;
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(waiter_done.load());

  own.Stop(/*hard=*/true);
  Clock::time_point stopped = Clock::now();
  // Closing while the server is gone (session not yet lost) ends promptly.
  Status closed = closer.Close();
  EXPECT_LT(Clock::now() - stopped, 4s) << closed.ToString();
  EXPECT_EQ(closer_held.Lock().code(), StatusCode::kSessionLost);
  stopped = Clock::now();
  Mutex other = client.NewMutex("other");
  Result<bool> attempt = other.TryLockFor(500ms);
  EXPECT_LT(Clock::now() - stopped, 4s);
  ASSERT_FALSE(attempt.ok() && attempt.value()) << "granted a lock by a stopped server";
  if (!attempt.ok()) {
    StatusCode code = attempt.status().code();
    EXPECT_TRUE(code == StatusCode::kUnavailable || code == StatusCode::kTimeout ||
                code == StatusCode::kSessionLost)
        << attempt.status().ToString();
  }

  Clock::time_point deadline = stopped + 10s;
  while (!(watch.lost() && waiter_done.load()) && Clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(watch.lost()) << "OnSessionLost never ran";
  // The session cannot outlive its timeout unnoticed: lost by ttl + a renewal.
  EXPECT_LT(Clock::now() - stopped, options.session_ttl + 2s);
  ASSERT_TRUE(waiter_done.load()) << "a blocked Lock() was not woken";
  waiter.join();
  EXPECT_EQ(waiter_status.code(), StatusCode::kSessionLost) << waiter_status.ToString();
  EXPECT_EQ(watch.why().code(), StatusCode::kSessionLost);
  EXPECT_EQ(client.SessionStatus().code(), StatusCode::kSessionLost);
  EXPECT_LT(client.SafeUntil(), Clock::now());
  EXPECT_EQ(other.Lock().code(), StatusCode::kSessionLost);
  EXPECT_EQ(held.token(), 0u);
  EXPECT_TRUE(client.Close().ok());
  Clock::time_point close_start = Clock::now();
  other_client.Close().IgnoreError();
  EXPECT_LT(Clock::now() - close_start, 5s);
}

TEST_F(ZooKeeperServerStopTest, SessionAndQueuePlaceSurviveAQuickServerRestart) {
  ExternalServer own("zookeeper");
  ASSERT_TRUE(own.ok()) << own.error();
  ClientOptions options;
  options.session_ttl = 10s;  // the test server's maximum
  options.op_timeout = 2s;
  Result<Client> a_connected = Client::Connect(own.url(), options);
  Result<Client> b_connected = Client::Connect(own.url(), options);
  ASSERT_TRUE(a_connected.ok() && b_connected.ok());
  Client a = std::move(a_connected).value();
  Client b = std::move(b_connected).value();
  std::atomic<bool> lost{false};
  a.OnSessionLost([&](const Status&) { lost = true; });
  b.OnSessionLost([&](const Status&) { lost = true; });
  Mutex ma = a.NewMutex("restart");
  ASSERT_TRUE(ma.Lock().ok());
  const uint64_t token = ma.token();
  std::atomic<bool> b_got{false};
  std::thread waiter([&] {
    Mutex mb = b.NewMutex("restart");
    Result<bool> got = mb.TryLockFor(30s);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (got.ok() && got.value()) {
      b_got = true;
      EXPECT_GT(mb.token(), token);
      EXPECT_TRUE(mb.Unlock().ok());
    }
  });
  std::this_thread::sleep_for(300ms);

  // kill -9 and start again on the same port and data.
  own.Stop(/*hard=*/true);
  Clock::time_point stopped = Clock::now();
  std::string restart = "bash '" + own.dir() + "/start-java.sh'";
  const long pid = std::atol(testing::CommandOutput(restart).c_str());
  ASSERT_GT(pid, 0);

  // The session comes back and is renewed again: past the TTL counted from
  // the stop, the lock is still held and the waiter still waits.
  while (Clock::now() < stopped + options.session_ttl + 2s && !lost.load()) {
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_FALSE(lost.load()) << "a session was lost across a quick restart";
  EXPECT_TRUE(a.SessionStatus().ok()) << a.SessionStatus().ToString();
  EXPECT_FALSE(b_got.load());
  EXPECT_EQ(ma.hold_count(), 1u);
  EXPECT_TRUE(ma.Unlock().ok());
  waiter.join();
  EXPECT_TRUE(b_got.load());
  EXPECT_FALSE(lost.load());
  a.Close().IgnoreError();
  b.Close().IgnoreError();
  ::kill(static_cast<pid_t>(pid), SIGKILL);
  testing::WaitGone(static_cast<pid_t>(pid), 10s);
}

}  // namespace
}  // namespace tumbler

// Channel and Connection against a scripted in-process RESP server: redirects,
// retries, timeouts, broken connections, interrupts.
#include "client/channel.h"
#include "client/test_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tumbler::client {
namespace {

using namespace std::chrono_literals;

// A loopback TCP server that answers each request with what a handler says.
class FakeServer {
 public:
  struct Action {
    std::string reply;          // raw RESP bytes ("" sends nothing)
    bool close = false;         // close the connection after (not) replying
    bool hang = false;          // never reply; keep the connection open
  };
  using Handler = std::function<Action(const std::vector<std::string>& args, int connection)>;

  explicit FakeServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listen_fd_, 16), 0);
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }

  ~FakeServer() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : workers_) t.join();
    for (int fd : fds_) ::close(fd);
    ::close(listen_fd_);
  }

  Endpoint endpoint() const { return Endpoint{"127.0.0.1", port_}; }
  int connections() const { return connections_.load(); }
  int requests() const { return requests_.load(); }

 private:
  void AcceptLoop() {
    while (!stop_) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      int n = connections_++;
      std::lock_guard<std::mutex> lock(mu_);
      fds_.push_back(fd);
      workers_.emplace_back([this, fd, n] { Serve(fd, n); });
    }
  }

  void Serve(int fd, int connection) {
    std::string in;
    char buf[4096];
    while (!stop_) {
      std::vector<std::string_view> views;
      size_t consumed = 0;
      std::string error;
      protocol::ParseResult r = in.empty() ? protocol::ParseResult::kIncomplete
                                           : protocol::ParseRequest(in, &views, &consumed, &error);
      if (r == protocol::ParseResult::kError) return;
      if (r == protocol::ParseResult::kIncomplete) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return;
        in.append(buf, static_cast<size_t>(n));
        continue;
      }
      std::vector<std::string> args(views.begin(), views.end());
      in.erase(0, consumed);
      ++requests_;
      Action action = handler_(args, connection);
      if (action.hang) {
        while (!stop_ && ::recv(fd, buf, sizeof buf, 0) > 0) {
        }
        return;
      }
      if (!action.reply.empty()) {
        (void)::send(fd, action.reply.data(), action.reply.size(), MSG_NOSIGNAL);
      }
      if (action.close) {
        ::shutdown(fd, SHUT_RDWR);
        return;
      }
    }
  }

  Handler handler_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> workers_;
};

// A loopback port with nothing listening on it.
uint16_t ClosedPort() { return testing::FreePort(); }

ChannelOptions FastOptions() {
  ChannelOptions options;
  options.connect_timeout = 500ms;
  options.reply_timeout = 500ms;
  return options;
}

CallOptions Within(Clock::duration d) {
  CallOptions call;
  call.deadline = Clock::now() + d;
  return call;
}

// The test servers' ports (test_server.h): free, distinct from the kernel's
// ephemeral range, raft port (+100) included, so no outgoing connection (and
// no client reconnecting to a stopped server) can take them.
TEST(TestServerPorts, FreeAndOutsideTheEphemeralRange) {
  auto [first, last] = testing::EphemeralRange();
  ASSERT_LE(first, last);
  for (int i = 0; i < 20; ++i) {
    uint16_t port = testing::FreePort();
    ASSERT_NE(port, 0);
    for (int p : {int{port}, port + 100}) {
      EXPECT_TRUE(p < first || p > last) << p << " in " << first << "-" << last;
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(p));
      EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << p;
      ::close(fd);
    }
  }
}

TEST(ErrorReplies, ToStatus) {
  Status s = ErrorReplyToStatus("NOSESSION session 7 does not exist");
  EXPECT_EQ(s.code(), StatusCode::kNoSession);
  EXPECT_EQ(s.message(), "session 7 does not exist");
  EXPECT_EQ(ErrorReplyToStatus("DEADLOCK").code(), StatusCode::kDeadlock);
  Status unknown = ErrorReplyToStatus("WRONGTYPE nope");
  EXPECT_EQ(unknown.code(), StatusCode::kErr);
  EXPECT_EQ(unknown.message(), "WRONGTYPE nope");
}

TEST(ErrorReplies, NotLeaderAddress) {
  EXPECT_EQ(ParseNotLeader("NOTLEADER 10.0.0.2:7421"), (Endpoint{"10.0.0.2", 7421}));
  EXPECT_EQ(ParseNotLeader("NOTLEADER [::1]:7"), (Endpoint{"::1", 7}));
  EXPECT_EQ(ParseNotLeader("NOTLEADER"), std::nullopt);
  EXPECT_EQ(ParseNotLeader("NOTLEADER "), std::nullopt);
  EXPECT_EQ(ParseNotLeader("NOTLEADER garbage:port"), std::nullopt);
}

TEST(EndpointSet, RotatesAndLearns) {
  EndpointSet set({{"a", 1}, {"b", 2}});
  EXPECT_EQ(set.Current(), (Endpoint{"a", 1}));
  set.MarkFailed({"b", 2});  // not current: no effect
  EXPECT_EQ(set.Current(), (Endpoint{"a", 1}));
  set.MarkFailed({"a", 1});
  EXPECT_EQ(set.Current(), (Endpoint{"b", 2}));
  set.SetLeader({"c", 3});
  EXPECT_EQ(set.Current(), (Endpoint{"c", 3}));
  EXPECT_EQ(set.size(), 3u);
  set.SetLeader({"a", 1});
  EXPECT_EQ(set.Current(), (Endpoint{"a", 1}));
  EXPECT_EQ(set.size(), 3u);
  for (int i = 0; i < 40; ++i) set.SetLeader({"n", static_cast<uint16_t>(100 + i)});
  EXPECT_EQ(set.size(), kEndpointsMax);
}

TEST(Channel, SendsAndReads) {
  FakeServer server([](const std::vector<std::string>& args, int) {
    if (args[0] == "PING") return FakeServer::Action{"+PONG\r\n"};
    if (args[0] == "BIG") {
      std::string big(std::stoul(args[1]), 'x');
      return FakeServer::Action{"$" + std::to_string(big.size()) + "\r\n" + big + "\r\n"};
    }
    return FakeServer::Action{"-NOSESSION no such session\r\n"};
  });
  Channel channel(std::make_shared<EndpointSet>(std::vector<Endpoint>{server.endpoint()}),
                  FastOptions());
  CallOutcome pong = channel.Call({"PING"}, Within(2s));
  ASSERT_TRUE(pong.reply.ok()) << pong.reply.status().ToString();
  EXPECT_EQ(pong.reply->str, "PONG");
  CallOutcome big = channel.Call({"BIG", "1000000"}, Within(2s));
  ASSERT_TRUE(big.reply.ok()) << big.reply.status().ToString();
  EXPECT_EQ(big.reply->str, std::string(1'000'000, 'x'));
  CallOutcome err = channel.Call({"SESSION", "KEEPALIVE", "9"}, Within(2s));
  ASSERT_FALSE(err.reply.ok());
  EXPECT_EQ(err.reply.status().code(), StatusCode::kNoSession);
  EXPECT_FALSE(err.maybe_applied);
  EXPECT_EQ(server.connections(), 1);  // one connection for all three
}

TEST(Channel, RefusedIsUnavailableAtTheDeadline) {
  Channel channel(std::make_shared<EndpointSet>(
                      std::vector<Endpoint>{{"127.0.0.1", ClosedPort()}}),
                  FastOptions());
  auto start = Clock::now();
  CallOutcome out = channel.Call({"PING"}, Within(300ms));
  auto took = Clock::now() - start;
  ASSERT_FALSE(out.reply.ok());
  EXPECT_EQ(out.reply.status().code(), StatusCode::kUnavailable) << out.reply.status().ToString();
  EXPECT_FALSE(out.maybe_applied);
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 2s);
}

TEST(Channel, FailsOverToTheNextSeed) {
  FakeServer server([](const std::vector<std::string>&, int) {
    return FakeServer::Action{"+PONG\r\n"};
  });
  auto endpoints = std::make_shared<EndpointSet>(
      std::vector<Endpoint>{{"127.0.0.1", ClosedPort()}, server.endpoint()});
  Channel channel(endpoints, FastOptions());
  CallOutcome out = channel.Call({"PING"}, Within(2s));
  ASSERT_TRUE(out.reply.ok()) << out.reply.status().ToString();
  EXPECT_EQ(endpoints->Current(), server.endpoint());
}

TEST(Channel, FollowsNotLeader) {
  FakeServer leader([](const std::vector<std::string>&, int) {
    return FakeServer::Action{":42\r\n"};
  });
  std::string redirect = "-NOTLEADER " + leader.endpoint().ToString() + "\r\n";
  FakeServer follower([&](const std::vector<std::string>&, int) {
    return FakeServer::Action{redirect};
  });
  auto endpoints = std::make_shared<EndpointSet>(std::vector<Endpoint>{follower.endpoint()});
  Channel channel(endpoints, FastOptions());
  CallOutcome out = channel.Call({"SESSION", "OPEN", "1000"}, Within(2s));
  ASSERT_TRUE(out.reply.ok()) << out.reply.status().ToString();
  EXPECT_EQ(out.reply->integer, 42);
  EXPECT_EQ(endpoints->Current(), leader.endpoint());
  EXPECT_EQ(follower.requests(), 1);
  // Later calls go straight to the leader.
  ASSERT_TRUE(channel.Call({"PING"}, Within(2s)).reply.ok());
  EXPECT_EQ(follower.requests(), 1);
}

TEST(Channel, RedirectLoopIsBounded) {
  std::string to_self;
  FakeServer self([&](const std::vector<std::string>&, int) {
    return FakeServer::Action{to_self};
  });
  to_self = "-NOTLEADER " + self.endpoint().ToString() + "\r\n";
  Channel channel(std::make_shared<EndpointSet>(std::vector<Endpoint>{self.endpoint()}),
                  FastOptions());
  CallOutcome out = channel.Call({"PING"}, Within(5s));
  ASSERT_FALSE(out.reply.ok());
  EXPECT_EQ(out.reply.status().code(), StatusCode::kNotLeader);
  EXPECT_EQ(self.requests(), Channel::kRedirectsMax + 1);
}

TEST(Channel, RetriesTryAgain) {
  std::atomic<int> calls{0};
  FakeServer server([&](const std::vector<std::string>&, int) {
    return FakeServer::Action{++calls < 3 ? "-TRYAGAIN no quorum\r\n" : "+OK\r\n"};
  });
  Channel channel(std::make_shared<EndpointSet>(std::vector<Endpoint>{server.endpoint()}),
                  FastOptions());
  CallOutcome out = channel.Call({"PING"}, Within(2s));
  ASSERT_TRUE(out.reply.ok()) << out.reply.status().ToString();
  EXPECT_EQ(calls.load(), 3);
  // Until the deadline, then the TRYAGAIN is the answer.
  FakeServer stuck([](const std::vector<std::string>&, int) {
    return FakeServer::Action{"-TRYAGAIN no quorum\r\n"};
  });
  Channel stuck_channel(std::make_shared<EndpointSet>(std::vector<Endpoint>{stuck.endpoint()}),
                        FastOptions());
  CallOutcome late = stuck_channel.Call({"PING"}, Within(200ms));
  ASSERT_FALSE(late.reply.ok());
  EXPECT_EQ(late.reply.status().code(), StatusCode::kTryAgain);
}

TEST(Channel, ReplyTimeoutIsUnsure) {
  FakeServer server([](const std::vector<std::string>&, int) {
    return FakeServer::Action{"", false, true};
  });
  Channel channel(std::make_shared<EndpointSet>(std::vector<Endpoint>{server.endpoint()}),
                  FastOptions());
  auto start = Clock::now();
  CallOutcome out = channel.Call({"UNLOCK", "x", "1"}, Within(5s));
  ASSERT_FALSE(out.reply.ok());
  EXPECT_EQ(out.reply.status().code(), StatusCode::kTimeout);
  EXPECT_TRUE(out.maybe_applied);
  EXPECT_LT(Clock::now() - start, 2s);  // reply_timeout, not the deadline
}

TEST(Channel, BrokenAfterSendIsUnsureUnlessResent) {
  FakeServer server([](const std::vector<std::string>&, int connection) {
    if (connection == 0) return FakeServer::Action{"", true};  // drop the first
    return FakeServer::Action{":1\r\n"};
  });
  auto endpoints = std::make_shared<EndpointSet>(std::vector<Endpoint>{server.endpoint()});
  Channel once(endpoints, FastOptions());
  CallOutcome out = once.Call({"UNLOCK", "x", "1"}, Within(2s));
  ASSERT_FALSE(out.reply.ok());
  EXPECT_EQ(out.reply.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(out.maybe_applied);
  // The next call reconnects.
  CallOutcome next = once.Call({"UNLOCK", "x", "1"}, Within(2s));
  ASSERT_TRUE(next.reply.ok()) << next.reply.status().ToString();
  EXPECT_EQ(server.connections(), 2);
}

TEST(Channel, ResendsWhenAllowed) {
  FakeServer server([](const std::vector<std::string>&, int connection) {
    if (connection == 0) return FakeServer::Action{"", true};
    return FakeServer::Action{":10000\r\n"};
  });
  Channel channel(std::make_shared<EndpointSet>(std::vector<Endpoint>{server.endpoint()}),
                  FastOptions());
  CallOptions call = Within(2s);
  call.resend_if_unsure = true;
  CallOutcome out = channel.Call({"SESSION", "KEEPALIVE", "1"}, call);
  ASSERT_TRUE(out.reply.ok()) << out.reply.status().ToString();
  EXPECT_EQ(out.reply->integer, 10000);
  EXPECT_FALSE(out.maybe_applied);
  EXPECT_EQ(server.requests(), 2);
}

TEST(Channel, ReconnectHookRunsOnReconnectOnly) {
  FakeServer server([](const std::vector<std::string>&, int) {
    return FakeServer::Action{"+OK\r\n", true};  // reply, then close
  });
  Channel channel(std::make_shared<EndpointSet>(std::vector<Endpoint>{server.endpoint()}),
                  FastOptions());
  int hooks = 0;
  channel.SetReconnectHook([&] { ++hooks; });
  ASSERT_TRUE(channel.Call({"PING"}, Within(2s)).reply.ok());
  EXPECT_EQ(hooks, 0);
  std::this_thread::sleep_for(50ms);
  channel.DropIfStale();  // the server closed it
  ASSERT_TRUE(channel.Call({"PING"}, Within(2s)).reply.ok());
  EXPECT_EQ(hooks, 1);
}

TEST(Channel, InterruptWakesABlockedWait) {
  FakeServer server([](const std::vector<std::string>&, int) {
    return FakeServer::Action{"", false, true};
  });
  Channel channel(std::make_shared<EndpointSet>(std::vector<Endpoint>{server.endpoint()}),
                  FastOptions());
  std::thread interrupter([&] {
    std::this_thread::sleep_for(200ms);
    channel.Interrupt();
  });
  CallOptions call;  // no deadline at all
  call.unbounded_reply = true;
  auto start = Clock::now();
  CallOutcome out = channel.Call({"LOCK", "x", "1", "WAIT", "FOREVER"}, call);
  interrupter.join();
  ASSERT_FALSE(out.reply.ok());
  EXPECT_EQ(out.reply.status().code(), StatusCode::kUnavailable);
  EXPECT_LT(Clock::now() - start, 2s);
  // And it stays interrupted.
  EXPECT_FALSE(channel.Call({"PING"}, Within(1s)).reply.ok());
}

TEST(Channel, InterruptEndsReconnectBackoff) {
  Channel channel(std::make_shared<EndpointSet>(
                      std::vector<Endpoint>{{"127.0.0.1", ClosedPort()}}),
                  FastOptions());
  std::thread interrupter([&] {
    std::this_thread::sleep_for(200ms);
    channel.Interrupt();
  });
  auto start = Clock::now();
  CallOutcome out = channel.Call({"PING"}, CallOptions{});  // no deadline
  interrupter.join();
  EXPECT_FALSE(out.reply.ok());
  EXPECT_LT(Clock::now() - start, 2s);
}

}  // namespace
}  // namespace tumbler::client

#include "client/test_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "client/channel.h"

#ifndef TUMBLERD_PATH
#define TUMBLERD_PATH ""
#endif

namespace tumbler::client::testing {
namespace {

using namespace std::chrono_literals;

bool PortFree(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// The end of the server's log, for an error message (the directory holding
// it is removed with the TestServer).
std::string LogTail(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  constexpr size_t kTailBytes = 2000;
  return text.size() > kTailBytes ? text.substr(text.size() - kTailBytes) : text;
}

}  // namespace

// The kernel's ephemeral port range (net.ipv4.ip_local_port_range): the local
// ports of outgoing connections come from it.
std::pair<int, int> EphemeralRange() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int first = 0;
  int last = 0;
  if (in >> first >> last && first >= 1 && first <= last && last <= 65535) return {first, last};
  return {32768, 60999};  // Linux's default
}

uint16_t FreePort() {
  // Outside the ephemeral range, as scripts/free_ports.py does for the scripts:
  // a port from that range (what binding port 0 returns) can be taken as the
  // local port of any outgoing connection between this pick and tumblerd's
  // bind, or while a test restarts the server on it; a client reconnecting to
  // a stopped server can even connect to itself. Below the range first, with
  // port + 100 (the default raft port) below it too; else above it.
  static std::mutex mu;
  static std::mt19937 rng(std::random_device{}());
  std::lock_guard<std::mutex> lock(mu);
  auto [first, last] = EphemeralRange();
  constexpr int kLowest = 10000;
  constexpr int kRaftOffset = 100;
  std::vector<std::pair<int, int>> windows;
  if (first - 1 - kRaftOffset >= kLowest + 100) windows.emplace_back(kLowest, first - 1 - kRaftOffset);
  if (65535 - kRaftOffset >= last + 1 + 100) windows.emplace_back(last + 1, 65535 - kRaftOffset);
  for (auto [lo, hi] : windows) {
    std::uniform_int_distribution<int> pick(lo, hi);
    for (int attempt = 0; attempt < 200; ++attempt) {
      auto port = static_cast<uint16_t>(pick(rng));
      if (PortFree(port) && PortFree(static_cast<uint16_t>(port + kRaftOffset))) return port;
    }
  }
  // No room outside the range: take what the kernel gives.
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(fd);
    uint16_t port = ntohs(addr.sin_port);
    if (port < 65000 && PortFree(port + kRaftOffset)) return port;
  }
  return 0;
}

std::string TestServer::BinaryPath() {
  const char* env = std::getenv("TUMBLERD");
  std::string path = env != nullptr && *env != '\0' ? env : TUMBLERD_PATH;
  if (path.empty() || ::access(path.c_str(), X_OK) != 0) return "";
  return path;
}

std::string TestServer::url() const { return "tumbler://127.0.0.1:" + std::to_string(port_); }

TestServer::~TestServer() {
  Stop();
  if (!data_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(data_dir_, ec);
  }
}

Status TestServer::Start(const std::vector<std::string>& extra_flags) {
  std::string binary = BinaryPath();
  if (binary.empty()) return Status(StatusCode::kUnavailable, "no tumblerd binary");
  if (running()) return Status(StatusCode::kInvalidArgument, "already running");
  if (port_ == 0) port_ = FreePort();
  if (data_dir_.empty()) {
    char tmpl[] = "/tmp/tumbler-client-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return Status(StatusCode::kUnavailable, "mkdtemp failed");
    data_dir_ = tmpl;
    log_path_ = data_dir_ + "/tumblerd.log";
  }
  std::vector<std::string> args = {binary, "--bind", "127.0.0.1", "--port",
                                   std::to_string(port_), "--data-dir", data_dir_ + "/data",
                                   "--log-level", "warn"};
  args.insert(args.end(), extra_flags.begin(), extra_flags.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Status(StatusCode::kUnavailable, "fork failed");
  if (pid == 0) {
    int log = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (log >= 0) {
      ::dup2(log, STDOUT_FILENO);
      ::dup2(log, STDERR_FILENO);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  pid_ = pid;
  // Ready when it answers PING.
  auto endpoints = std::make_shared<EndpointSet>(std::vector<Endpoint>{{"127.0.0.1", port_}});
  auto deadline = Clock::now() + 20s;
  while (Clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return Status(StatusCode::kUnavailable, "tumblerd exited at start: " + LogTail(log_path_));
    }
    ChannelOptions options;
    options.connect_timeout = 500ms;
    options.reply_timeout = 1s;
    Channel channel(endpoints, options);
    CallOptions call;
    call.deadline = Clock::now() + 1s;
    CallOutcome out = channel.Call({"PING"}, call);
    if (out.reply.ok()) return Status::Ok();
    std::this_thread::sleep_for(20ms);
  }
  Kill();
  return Status(StatusCode::kUnavailable, "tumblerd did not answer PING: " + LogTail(log_path_));
}

void TestServer::Signal(int signal) {
  if (pid_ > 0) ::kill(pid_, signal);
}

void TestServer::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void TestServer::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGCONT);  // in case a test left it stopped
  ::kill(pid_, SIGTERM);
  auto deadline = Clock::now() + 5s;
  while (Clock::now() < deadline) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(10ms);
  }
  Kill();
}

}  // namespace tumbler::client::testing

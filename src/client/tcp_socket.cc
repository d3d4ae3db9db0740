#include "client/tcp_socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

namespace tumbler::client {
namespace {

// TCP keepalive: a silent peer is declared dead after idle + interval * count.
constexpr int kKeepaliveIdleS = 10;
constexpr int kKeepaliveIntervalS = 5;
constexpr int kKeepaliveCount = 3;
// Bytes asked of recv() at a time.
constexpr size_t kReadChunkBytes = 64 * 1024;

// poll() timeout in ms for `deadline`, rounded up so that a wait never ends
// before its deadline; -1 for no deadline.
int PollTimeoutMs(Deadline deadline) {
  if (!deadline) return -1;
  auto left = *deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(ms);
}

void SetSocketOptions(int fd) {
  int one = 1;
  // Failures here cost latency or liveness detection, never correctness.
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  (void)::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  int idle = kKeepaliveIdleS, interval = kKeepaliveIntervalS, count = kKeepaliveCount;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

}  // namespace

void TcpSocket::SetFd(int fd) {
  std::lock_guard<std::mutex> lock(fd_mu_);
  fd_ = fd;
}

void TcpSocket::Close() {
  std::lock_guard<std::mutex> lock(fd_mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void TcpSocket::Shutdown() {
  std::lock_guard<std::mutex> lock(fd_mu_);
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

Status TcpSocket::Open(const Endpoint& endpoint, Clock::time_point deadline) {
  Close();
  endpoint_ = endpoint;
  struct addrinfo hints;
  std::memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  struct addrinfo* addresses = nullptr;
  std::string port = std::to_string(endpoint.port);
  // getaddrinfo has no timeout of its own; names are resolved rarely (once per
  // reconnect) and an address literal resolves without I/O.
  int rc = ::getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &addresses);
  if (rc != 0) {
    return Status(StatusCode::kUnavailable,
                  endpoint.ToString() + ": cannot resolve: " + ::gai_strerror(rc));
  }
  Status status(StatusCode::kUnavailable, endpoint.ToString() + ": no address");
  for (struct addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    status = ConnectOne(a, deadline);
    if (status.ok() || status.code() == StatusCode::kTimeout) break;
  }
  ::freeaddrinfo(addresses);
  return status;
}

Status TcpSocket::ConnectOne(const struct addrinfo* address, Clock::time_point deadline) {
  int fd = ::socket(address->ai_family, address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    address->ai_protocol);
  if (fd < 0) {
    return Status(StatusCode::kUnavailable, std::string("socket: ") + std::strerror(errno));
  }
  SetFd(fd);  // published first, so that Shutdown() can cut a slow connect short
  int rc = ::connect(fd, address->ai_addr, address->ai_addrlen);
  if (rc != 0 && errno != EINPROGRESS) {
    int err = errno;
    Close();
    return Status(StatusCode::kUnavailable, endpoint_.ToString() + ": " + std::strerror(err));
  }
  if (rc != 0) {
    Status ready = WaitReady(POLLOUT, deadline);
    if (!ready.ok()) {
      Close();
      if (ready.code() == StatusCode::kTimeout) {
        return Status(StatusCode::kTimeout, endpoint_.ToString() + ": connect timed out");
      }
      return ready;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
      Close();
      return Status(StatusCode::kUnavailable, endpoint_.ToString() + ": " + std::strerror(err));
    }
  }
  SetSocketOptions(fd);
  return Status::Ok();
}

Status TcpSocket::WaitReady(short events, Deadline deadline) const {
  while (true) {
    struct pollfd p = {fd_, events, 0};
    int n = ::poll(&p, 1, PollTimeoutMs(deadline));
    if (n > 0) return Status::Ok();
    if (n == 0) {
      if (deadline && Clock::now() >= *deadline) {
        return Status(StatusCode::kTimeout, endpoint_.ToString() + ": timed out");
      }
      continue;
    }
    if (errno == EINTR) continue;
    return Status(StatusCode::kUnavailable, std::string("poll: ") + std::strerror(errno));
  }
}

Status TcpSocket::SendAll(std::string_view data, Deadline deadline, bool* sent) {
  while (!data.empty()) {
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      *sent = true;
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      Status ready = WaitReady(POLLOUT, deadline);
      if (!ready.ok()) return ready;
      continue;
    }
    return Status(StatusCode::kUnavailable,
                  endpoint_.ToString() + ": send: " + std::strerror(n < 0 ? errno : EPIPE));
  }
  return Status::Ok();
}

Status TcpSocket::ReadAvailable(std::string* out, size_t max_bytes, bool* eof) {
  *eof = false;
  char chunk[kReadChunkBytes];
  size_t read = 0;
  while (read < max_bytes) {
    ssize_t n = ::recv(fd_, chunk, std::min(sizeof chunk, max_bytes - read), MSG_DONTWAIT);
    if (n > 0) {
      out->append(chunk, static_cast<size_t>(n));
      read += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      *eof = true;
      return Status::Ok();
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
    return Status(StatusCode::kUnavailable,
                  endpoint_.ToString() + ": recv: " + std::strerror(errno));
  }
  return Status::Ok();
}

bool TcpSocket::ReadableWhileIdle() const {
  if (fd_ < 0) return true;
  struct pollfd p = {fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}

}  // namespace tumbler::client

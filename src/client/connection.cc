#include "client/connection.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/limits.h"

namespace tumbler::client {
namespace {

// Bytes asked of recv() at a time.
constexpr size_t kReadChunkBytes = 64 * 1024;
// TCP keepalive: a silent peer is declared dead after idle + interval * count.
constexpr int kKeepaliveIdleS = 10;
constexpr int kKeepaliveIntervalS = 5;
constexpr int kKeepaliveCount = 3;

// poll() timeout in ms for `deadline`, rounded up so that a wait never ends
// before its deadline; -1 for no deadline.
int PollTimeoutMs(Deadline deadline) {
  if (!deadline) return -1;
  auto left = *deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(ms);
}

std::string ErrnoText(int err) { return std::strerror(err); }

// Waits until `fd` is ready for `events`. OK when ready (or when poll reports
// an error or hang-up condition: the following I/O call reports it precisely);
// kTimeout when the deadline passes.
Status WaitReady(int fd, short events, Deadline deadline) {
  while (true) {
    struct pollfd p = {fd, events, 0};
    int n = ::poll(&p, 1, PollTimeoutMs(deadline));
    if (n > 0) return Status::Ok();
    if (n == 0) {
      if (deadline && Clock::now() >= *deadline) {
        return Status(StatusCode::kTimeout, "timed out waiting for the server");
      }
      continue;
    }
    if (errno == EINTR) continue;
    return Status(StatusCode::kUnavailable, "poll: " + ErrnoText(errno));
  }
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

Connection::~Connection() { Close(); }

void Connection::SetFd(int fd) {
  std::lock_guard<std::mutex> lock(fd_mu_);
  fd_ = fd;
}

void Connection::Close() {
  std::lock_guard<std::mutex> lock(fd_mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  in_.clear();
}

void Connection::Shutdown() {
  std::lock_guard<std::mutex> lock(fd_mu_);
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

Status Connection::Open(const Endpoint& endpoint, Clock::time_point deadline) {
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

Status Connection::ConnectOne(const struct addrinfo* address, Clock::time_point deadline) {
  int fd = ::socket(address->ai_family, address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    address->ai_protocol);
  if (fd < 0) {
    return Status(StatusCode::kUnavailable, "socket: " + ErrnoText(errno));
  }
  SetFd(fd);  // published first, so that Shutdown() can cut a slow connect short
  int rc = ::connect(fd, address->ai_addr, address->ai_addrlen);
  if (rc != 0 && errno != EINPROGRESS) {
    int err = errno;
    Close();
    return Status(StatusCode::kUnavailable, endpoint_.ToString() + ": " + ErrnoText(err));
  }
  if (rc != 0) {
    Status ready = WaitReady(fd, POLLOUT, deadline);
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
      return Status(StatusCode::kUnavailable, endpoint_.ToString() + ": " + ErrnoText(err));
    }
  }
  SetSocketOptions(fd);
  return Status::Ok();
}

bool Connection::LooksBroken() const {
  if (fd_ < 0 || !in_.empty()) return true;
  struct pollfd p = {fd_, POLLIN, 0};
  int n = ::poll(&p, 1, 0);
  if (n == 0) return false;
  // Readable while idle means EOF, a reset, or bytes nobody asked for: in every
  // case the connection cannot carry a request/reply pair correctly any more.
  return true;
}

Result<protocol::Value> Connection::Call(const std::vector<std::string_view>& args,
                                         Deadline deadline, bool* sent) {
  bool sent_any = false;
  if (sent != nullptr) *sent = false;
  if (fd_ < 0) return Status(StatusCode::kUnavailable, "not connected");
  out_.clear();
  protocol::AppendCommand(&out_, args);
  Status status = SendAll(out_, deadline, &sent_any);
  if (sent != nullptr) *sent = sent_any;
  if (!status.ok()) {
    Close();
    return status;
  }
  Result<protocol::Value> reply = ReadReply(deadline);
  if (!reply.ok()) Close();
  return reply;
}

Result<protocol::Value> Connection::Receive(Deadline deadline) {
  if (fd_ < 0) return Status(StatusCode::kUnavailable, "not connected");
  Result<protocol::Value> message = ReadReply(deadline);
  if (!message.ok() && message.status().code() != StatusCode::kTimeout) Close();
  return message;
}

Status Connection::SendAll(std::string_view data, Deadline deadline, bool* sent) {
  while (!data.empty()) {
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      *sent = true;
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      Status ready = WaitReady(fd_, POLLOUT, deadline);
      if (!ready.ok()) return ready;
      continue;
    }
    return Status(StatusCode::kUnavailable,
                  endpoint_.ToString() + ": send: " + ErrnoText(n < 0 ? errno : EPIPE));
  }
  return Status::Ok();
}

Result<protocol::Value> Connection::ReadReply(Deadline deadline) {
  char chunk[kReadChunkBytes];
  Status peer_gone;  // EOF or an error seen after the last bytes
  while (true) {
    if (!in_.empty()) {
      protocol::Value value;
      size_t consumed = 0;
      std::string error;
      protocol::ParseResult result = protocol::ParseReply(in_, &value, &consumed, &error);
      if (result == protocol::ParseResult::kOk) {
        in_.erase(0, consumed);
        return value;
      }
      if (result == protocol::ParseResult::kError) {
        return Status(StatusCode::kProtocol, endpoint_.ToString() + ": bad reply: " + error);
      }
      if (in_.size() > limits::kReplyBytesMax) {
        return Status(StatusCode::kProtocol, endpoint_.ToString() + ": reply too large");
      }
    }
    // A reply the peer sent before closing is still a reply: only an
    // incomplete one is a failure.
    if (!peer_gone.ok()) return peer_gone;
    Status ready = WaitReady(fd_, POLLIN, deadline);
    if (!ready.ok()) return ready;
    // Drain what the socket holds before parsing again, so that a long reply
    // is not re-parsed once per chunk.
    while (in_.size() <= limits::kReplyBytesMax) {
      ssize_t n = ::recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT);
      if (n > 0) {
        in_.append(chunk, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) {
        peer_gone = Status(StatusCode::kUnavailable,
                           endpoint_.ToString() + ": connection closed by the server");
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      peer_gone = Status(StatusCode::kUnavailable,
                         endpoint_.ToString() + ": recv: " + ErrnoText(errno));
      break;
    }
  }
}

}  // namespace tumbler::client

#include "connection.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tumbler::bench {
namespace {

Status Unavailable(const Endpoint& e, std::string_view what, int err) {
  std::string text = "cannot connect to " + e.label;
  if (e.label != e.url) text += " (" + e.url + ")";
  text += ": ";
  text += what;
  if (err != 0) {
    text += ": ";
    text += std::strerror(err);
  }
  return Status(StatusCode::kUnavailable, text);
}

int ConnectOne(const addrinfo* ai, int timeout_ms, int* err) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                  ai->ai_protocol);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      *err = errno;
      close(fd);
      return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    const int n = poll(&p, 1, timeout_ms);
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    if (n <= 0) {
      *err = n == 0 ? ETIMEDOUT : errno;
      close(fd);
      return -1;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0 || so_error != 0) {
      *err = so_error != 0 ? so_error : errno;
      close(fd);
      return -1;
    }
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

}  // namespace

Result<std::unique_ptr<Connection>> Connection::Dial(const Endpoint& endpoint,
                                                     std::chrono::nanoseconds timeout,
                                                     int epoll_fd, uint64_t tag) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const std::string port = std::to_string(endpoint.port);
  const int gai = getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &list);
  if (gai != 0) return Unavailable(endpoint, gai_strerror(gai), 0);
  const int timeout_ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count());
  int fd = -1;
  int err = 0;
  for (const addrinfo* ai = list; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ConnectOne(ai, timeout_ms, &err);
  }
  freeaddrinfo(list);
  if (fd < 0) return Unavailable(endpoint, "connect", err);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
    err = errno;
    close(fd);
    return Unavailable(endpoint, "epoll_ctl", err);
  }
  return std::unique_ptr<Connection>(new Connection(fd, epoll_fd, tag));
}

Connection::Connection(int fd, int epoll_fd, uint64_t tag)
    : fd_(fd),
      epoll_fd_(epoll_fd),
      tag_(tag),
      in_(new char[kInputBytesInitial]),
      in_capacity_(kInputBytesInitial) {}

Connection::~Connection() {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd_, nullptr);
  close(fd_);
}

Status Connection::WatchWrite(bool on) {
  if (watching_write_ == on) return Status::Ok();
  epoll_event ev{};
  ev.events = on ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
  ev.data.u64 = tag_;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd_, &ev) != 0) {
    return Status(StatusCode::kUnavailable, std::string("epoll_ctl: ") + std::strerror(errno));
  }
  watching_write_ = on;
  return Status::Ok();
}

Status Connection::Send(std::string_view bytes) {
  if (out_begin_ < out_.size()) {  // keep order: queue behind what waits
    if (out_.size() - out_begin_ + bytes.size() > kOutputBytesMax) {
      return Status(StatusCode::kUnavailable, "server does not read its requests");
    }
    out_.append(bytes);
    return Status::Ok();
  }
  while (!bytes.empty()) {
    const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return Status(StatusCode::kUnavailable, std::string("send: ") + std::strerror(errno));
  }
  if (bytes.empty()) return Status::Ok();
  out_.assign(bytes);
  out_begin_ = 0;
  return WatchWrite(true);
}

Status Connection::Flush() {
  while (out_begin_ < out_.size()) {
    const ssize_t n = send(fd_, out_.data() + out_begin_, out_.size() - out_begin_,
                           MSG_NOSIGNAL);
    if (n > 0) {
      out_begin_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::Ok();
    return Status(StatusCode::kUnavailable, std::string("send: ") + std::strerror(errno));
  }
  out_.clear();
  out_begin_ = 0;
  return WatchWrite(false);
}

Status Connection::Read(bool* filled) {
  *filled = false;
  if (in_begin_ == in_end_) {
    in_begin_ = in_end_ = 0;
  } else if (in_begin_ > 0) {  // keep a partial reply at the front
    std::memmove(in_.get(), in_.get() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  if (in_end_ == in_capacity_) {
    if (in_capacity_ >= kInputBytesMax) {
      return Status(StatusCode::kProtocol, "a reply is larger than the input bound");
    }
    std::unique_ptr<char[]> bigger(new char[in_capacity_ * 2]);
    std::memcpy(bigger.get(), in_.get(), in_end_);
    in_ = std::move(bigger);
    in_capacity_ *= 2;
  }
  const size_t space = in_capacity_ - in_end_;
  ssize_t n;
  do {
    n = read(fd_, in_.get() + in_end_, space);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return Status(StatusCode::kUnavailable, "the server closed the connection");
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
    return Status(StatusCode::kUnavailable, std::string("read: ") + std::strerror(errno));
  }
  in_end_ += static_cast<size_t>(n);
  *filled = static_cast<size_t>(n) == space;
  return Status::Ok();
}

ScanResult Connection::NextReply(ReplyView* reply) {
  if (in_begin_ == in_end_) return ScanResult::kIncomplete;
  size_t consumed = 0;
  const ScanResult r = ScanReply(
      std::string_view(in_.get() + in_begin_, in_end_ - in_begin_), reply, &consumed);
  if (r == ScanResult::kOk) in_begin_ += consumed;
  return r;
}

}  // namespace tumbler::bench

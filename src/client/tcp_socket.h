// A client TCP socket with deadlines: what the RESP connection
// (connection.h) and the etcd HTTP connection (backends/etcd_http.h) share.
// Non-blocking socket + poll(), so every wait has a deadline; TCP_NODELAY and
// TCP keepalive on, so a peer that vanished without a FIN is noticed even
// during a long blocking wait.
//
// Threads: one thread owns the socket (Open, Close, I/O), except Shutdown(),
// which any thread may call while the object lives: it wakes the owner
// blocked in a wait (its call then fails with kUnavailable).
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "client/url.h"
#include "tumbler/status.h"

struct addrinfo;

namespace tumbler::client {

using Clock = std::chrono::steady_clock;
// nullopt: no deadline (wait until the peer answers or the socket breaks).
using Deadline = std::optional<Clock::time_point>;

class TcpSocket {
 public:
  TcpSocket() = default;
  ~TcpSocket() { Close(); }
  TcpSocket(const TcpSocket&) = delete;
  TcpSocket& operator=(const TcpSocket&) = delete;

  // Resolves `endpoint` and connects to its first address that accepts before
  // `deadline` (closing what was open). Errors: kUnavailable (resolution
  // failed, refused, unreachable, Shutdown; the message names the endpoint),
  // kTimeout (deadline passed).
  Status Open(const Endpoint& endpoint, Clock::time_point deadline);
  // Closes the socket. Owner only; idempotent.
  void Close();
  // Wakes the owner blocked on this socket. Any thread.
  void Shutdown();

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const Endpoint& endpoint() const { return endpoint_; }

  // OK once the socket is ready for `events` (POLLIN/POLLOUT), or in an error
  // or hang-up condition (the next I/O call says which); kTimeout when the
  // deadline passes first.
  Status WaitReady(short events, Deadline deadline) const;
  // Writes all of `data`. *sent is set once any byte may have reached the
  // peer. Errors: kUnavailable (naming the endpoint), kTimeout.
  Status SendAll(std::string_view data, Deadline deadline, bool* sent);
  // Appends what the socket holds now (without waiting), at most `max_bytes`.
  // OK with *eof set when the peer closed; kUnavailable on a socket error.
  Status ReadAvailable(std::string* out, size_t max_bytes, bool* eof);
  // True if the peer closed, reset, or sent something while nothing was
  // asked (checked without blocking).
  bool ReadableWhileIdle() const;

 private:
  Status ConnectOne(const ::addrinfo* address, Clock::time_point deadline);
  void SetFd(int fd);

  // fd_ is written by the owner under fd_mu_ and read by it without;
  // Shutdown() reads it under fd_mu_ so that it never touches a descriptor
  // number Close() has already given back.
  mutable std::mutex fd_mu_;
  int fd_ = -1;
  Endpoint endpoint_;
};

}  // namespace tumbler::client

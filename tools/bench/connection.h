// One non-blocking TCP connection to a server, registered with an epoll set:
// an input buffer that replies are scanned out of, and an output buffer for
// the bytes the kernel did not take at once (rare: requests are small).
//
// Thread safety: one thread owns a Connection and its epoll set.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "backend.h"
#include "reply_scanner.h"
#include "tumbler/status.h"

namespace tumbler::bench {

// Input buffer: starts small, grows for a long reply up to the maximum.
inline constexpr size_t kInputBytesInitial = 16 * 1024;
inline constexpr size_t kInputBytesMax = 4 * 1024 * 1024;
// Output queued while the socket is full; past this the peer is not reading.
inline constexpr size_t kOutputBytesMax = 64 * 1024 * 1024;

class Connection {
 public:
  // Connects (TCP_NODELAY, non-blocking) within `timeout` and adds the socket
  // to `epoll_fd` for reading, with `tag` as its epoll data.
  // Errors: kUnavailable with the endpoint and the reason.
  static Result<std::unique_ptr<Connection>> Dial(const Endpoint& endpoint,
                                                  std::chrono::nanoseconds timeout,
                                                  int epoll_fd, uint64_t tag);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends `bytes`, queueing what the socket does not take (and asking epoll
  // for writability). Errors: kUnavailable when the connection broke.
  Status Send(std::string_view bytes);
  // Called on EPOLLOUT: writes queued bytes.
  Status Flush();

  // Reads what the socket has (one read). *filled says the read filled the
  // whole free space, so the caller should read again after taking replies.
  // Errors: kUnavailable on EOF or a socket error.
  Status Read(bool* filled);
  // Takes the next complete reply from the input; kIncomplete when there is
  // none yet. The view is valid until the next Read.
  ScanResult NextReply(ReplyView* reply);

 private:
  Connection(int fd, int epoll_fd, uint64_t tag);
  Status WatchWrite(bool on);

  int fd_;
  int epoll_fd_;
  uint64_t tag_;
  bool watching_write_ = false;
  std::unique_ptr<char[]> in_;
  size_t in_capacity_ = 0;
  size_t in_begin_ = 0;
  size_t in_end_ = 0;
  std::string out_;  // bytes not yet taken by the kernel
  size_t out_begin_ = 0;
};

}  // namespace tumbler::bench

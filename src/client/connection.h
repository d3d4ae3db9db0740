// One TCP connection to one tumblerd node, speaking RESP2 (PROTOCOL.md
// "Transport"): send a command, read one reply, each bounded by a deadline.
//
// Blocking I/O with deadlines over a TcpSocket (tcp_socket.h: keepalive on, so
// a peer that vanished without a FIN is noticed even during a long blocking
// LOCK ... WAIT).
//
// Threads: one thread uses a Connection at a time, except Shutdown(), which any
// thread may call while another is blocked in it (the Channel uses it to
// interrupt a blocked wait).
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/tcp_socket.h"
#include "client/url.h"
#include "protocol/resp.h"
#include "tumbler/status.h"

namespace tumbler::client {

class Connection {
 public:
  Connection() = default;
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Resolves `endpoint` and connects to its first address that accepts before
  // `deadline`. Errors: kUnavailable (resolution failed, refused, unreachable;
  // the message names the endpoint and the reason), kTimeout (deadline passed).
  // Must not be called on an open connection.
  Status Open(const Endpoint& endpoint, Clock::time_point deadline);

  // Owning thread only.
  bool is_open() const { return socket_.is_open(); }
  const Endpoint& endpoint() const { return socket_.endpoint(); }

  // Writes one command (a RESP array of bulk strings) and reads one reply.
  // Error replies from the server come back as a Value with IsError(): they
  // are not transport failures. Transport failures close the connection:
  //   kUnavailable  the peer closed or reset the connection, or Shutdown()
  //   kTimeout      `deadline` passed before the whole reply arrived
  //   kProtocol     the bytes were not valid RESP or broke a bound of limits.h
  // *sent (may be null) is set to whether any byte of the command may have
  // reached the peer, i.e. whether the command may have taken effect.
  Result<protocol::Value> Call(const std::vector<std::string_view>& args,
                               Deadline deadline, bool* sent);

  // Reads one message the server sends without being asked: a pub/sub
  // message on a connection that has SUBSCRIBEd (the redis:// backend waits on
  // its lock's release channel with it). kTimeout when `deadline` passes first:
  // the connection stays open and keeps any partly received message for the
  // next call. Other failures close the connection, as Call's do.
  Result<protocol::Value> Receive(Deadline deadline);

  // True if the peer has closed the connection or sent something unasked for,
  // checked without blocking. A pooled connection is checked before reuse.
  bool LooksBroken() const;

  // Wakes a thread blocked in Open() or Call() on this connection (it fails
  // with kUnavailable). Safe from any thread while the Connection object
  // lives; does nothing if no socket is open.
  void Shutdown();

  // Closes the socket. Called by the owning thread only.
  void Close();

 private:
  Result<protocol::Value> ReadReply(Deadline deadline);

  TcpSocket socket_;
  std::string out_;  // the command being sent (reused buffer)
  std::string in_;   // bytes received and not yet parsed
};

}  // namespace tumbler::client

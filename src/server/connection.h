// One client connection: reads requests, keeps their replies in order, writes
// them back. Owned by the Server's loop; freed in the uv_close callback.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/resp.h"

namespace tumbler::server {

class Server;

class Connection {
 public:
  Connection(Server* server, uint64_t id);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  uv_tcp_t* handle() { return &tcp_; }
  uint64_t id() const { return id_; }
  Server* server() const { return server_; }

  // Starts reading. Called once after uv_accept.
  void Start();
  // Closes the connection (idempotent). Replies not yet written are dropped.
  void Close();
  // Writes what has been queued in out_ (called by the server before the loop
  // polls).
  void Flush();
  // Parses and runs buffered requests until one must wait.
  void Process();

  // Reply writer for this connection's protocol version; appends to out_.
  protocol::ReplyWriter writer() { return protocol::ReplyWriter(&out_, protover_); }
  // Marks that bytes were appended to out_.
  void Dirty();
  // Closes after the queued replies are written (QUIT, protocol errors).
  void CloseAfterFlush();

  // --- Request bookkeeping, used by the server and the command handlers. ----
  int protover() const { return protover_; }
  void set_protover(int v) { protover_ = v; }
  bool authenticated() const { return authenticated_; }
  void set_authenticated(bool v) { authenticated_ = v; }
  const std::string& name() const { return name_; }
  void set_name(std::string_view v) { name_.assign(v); }

  // Writes proposed for this connection whose replies are not out yet.
  uint32_t pending_writes() const { return pending_writes_; }
  void AddPendingWrite() { ++pending_writes_; }
  // A pending write's reply has been appended to out_; resumes processing.
  void PendingWriteDone();

  // A LOCK ... WAIT is in progress (proposed or queued): nothing behind it runs.
  bool blocked() const { return blocked_; }
  void Block(uint64_t wait_ms, bool forever);
  // The wait is queued in the state machine as `wait_id`: start its timer.
  void WaitQueued(uint64_t wait_id);
  uint64_t wait_id() const { return wait_id_; }
  // The read barrier a parked read waits for (Server::ReadReady); 0: none.
  uint64_t read_fence() const { return read_fence_; }
  void set_read_fence(uint64_t fence) { read_fence_ = fence; }
  // The blocking LOCK got its reply: stop the timer and resume processing.
  void Unblock();
  bool closing() const { return closing_; }

 private:
  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnWrite(uv_write_t* req, int status);
  static void OnClose(uv_handle_t* handle);
  static void OnWaitTimer(uv_timer_t* handle);
  static void OnTimerClosed(uv_handle_t* handle);
  void UpdateReading();
  void ProcessOne(std::vector<std::string_view>& args);

  Server* server_;
  uint64_t id_;
  uv_tcp_t tcp_;
  uv_timer_t wait_timer_;
  uv_write_t write_req_;
  int handles_open_ = 0;

  // Input: unparsed bytes are in_[in_start_, in_len_). Grows up to
  // limits::kInputBufferBytesMax; a full buffer stops reading.
  std::unique_ptr<char[]> in_;
  size_t in_cap_ = 0;
  size_t in_start_ = 0;
  size_t in_len_ = 0;
  std::string out_;          // replies not yet handed to the kernel
  std::string writing_;      // bytes of the uv_write in progress
  bool write_in_flight_ = false;
  bool reading_ = false;
  bool closing_ = false;
  bool close_after_flush_ = false;
  bool dirty_ = false;

  int protover_ = 2;
  bool authenticated_ = false;
  std::string name_;
  uint32_t pending_writes_ = 0;
  bool blocked_ = false;
  bool wait_forever_ = false;
  uint64_t wait_deadline_ms_ = 0;
  uint64_t read_fence_ = 0;
  uint64_t wait_id_ = 0;
  std::vector<std::string_view> args_;  // reused
};

}  // namespace tumbler::server

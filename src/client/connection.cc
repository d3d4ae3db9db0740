#include "client/connection.h"

#include <poll.h>

#include "core/limits.h"

namespace tumbler::client {

Connection::~Connection() { Close(); }

void Connection::Close() {
  socket_.Close();
  in_.clear();
}

void Connection::Shutdown() { socket_.Shutdown(); }

Status Connection::Open(const Endpoint& endpoint, Clock::time_point deadline) {
  Close();
  return socket_.Open(endpoint, deadline);
}

bool Connection::LooksBroken() const {
  // Readable while idle means EOF, a reset, or bytes nobody asked for: in every
  // case the connection cannot carry a request/reply pair correctly any more.
  return !in_.empty() || socket_.ReadableWhileIdle();
}

Result<protocol::Value> Connection::Call(const std::vector<std::string_view>& args,
                                         Deadline deadline, bool* sent) {
  bool sent_any = false;
  if (sent != nullptr) *sent = false;
  if (!socket_.is_open()) return Status(StatusCode::kUnavailable, "not connected");
  out_.clear();
  protocol::AppendCommand(&out_, args);
  Status status = socket_.SendAll(out_, deadline, &sent_any);
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
  if (!socket_.is_open()) return Status(StatusCode::kUnavailable, "not connected");
  Result<protocol::Value> message = ReadReply(deadline);
  if (!message.ok() && message.status().code() != StatusCode::kTimeout) Close();
  return message;
}

Result<protocol::Value> Connection::ReadReply(Deadline deadline) {
  Status peer_gone;  // EOF or an error seen after the last bytes
  const std::string& where = socket_.endpoint().ToString();
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
        return Status(StatusCode::kProtocol, where + ": bad reply: " + error);
      }
      if (in_.size() > limits::kReplyBytesMax) {
        return Status(StatusCode::kProtocol, where + ": reply too large");
      }
    }
    // A reply the peer sent before closing is still a reply: only an
    // incomplete one is a failure.
    if (!peer_gone.ok()) return peer_gone;
    Status ready = socket_.WaitReady(POLLIN, deadline);
    if (!ready.ok()) return ready;
    // Drain what the socket holds before parsing again, so that a long reply
    // is not re-parsed once per chunk.
    // At most one byte past the bound, which the parse above then refuses.
    size_t room = limits::kReplyBytesMax + 1 - in_.size();
    bool eof = false;
    Status read = socket_.ReadAvailable(&in_, room, &eof);
    if (!read.ok()) {
      peer_gone = read;
    } else if (eof) {
      peer_gone = Status(StatusCode::kUnavailable, where + ": connection closed by the server");
    }
  }
}

}  // namespace tumbler::client

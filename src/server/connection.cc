#include "server/connection.h"

#include <cassert>
#include <cstring>

#include "server/commands.h"
#include "server/log.h"
#include "server/server.h"

namespace tumbler::server {
namespace {
constexpr size_t kInputChunk = 16 * 1024;
}  // namespace

Connection::Connection(Server* server, uint64_t id) : server_(server), id_(id) {
  tcp_.data = this;
  wait_timer_.data = this;
}

void Connection::Start() {
  uv_timer_init(server_->loop(), &wait_timer_);
  wait_timer_.data = this;
  tcp_.data = this;
  handles_open_ = 2;
  uv_tcp_nodelay(&tcp_, 1);
  authenticated_ = server_->config().requirepass.empty();
  UpdateReading();
}

void Connection::UpdateReading() {
  if (closing_) return;
  // Stop reading while this connection cannot make progress (it waits for a
  // blocking LOCK or for its pipelined replies) and its buffer already holds a
  // whole request's worth: backpressure instead of unbounded buffering.
  bool want = !close_after_flush_ && in_len_ - in_start_ < limits::kInputBufferBytesMax &&
              !(blocked_ && in_len_ - in_start_ >= limits::kRequestBytesMax);
  if (want == reading_) return;
  auto* stream = reinterpret_cast<uv_stream_t*>(&tcp_);
  if (want) {
    uv_read_start(stream, OnAlloc, OnRead);
  } else {
    uv_read_stop(stream);
  }
  reading_ = want;
}

void Connection::OnAlloc(uv_handle_t* handle, size_t /*suggested*/, uv_buf_t* buf) {
  auto* self = static_cast<Connection*>(handle->data);
  if (self->in_start_ > 0 && self->in_start_ == self->in_len_) {
    self->in_start_ = self->in_len_ = 0;
  }
  if (self->in_cap_ - self->in_len_ < kInputChunk && self->in_start_ > 0) {
    memmove(self->in_.get(), self->in_.get() + self->in_start_, self->in_len_ - self->in_start_);
    self->in_len_ -= self->in_start_;
    self->in_start_ = 0;
  }
  if (self->in_cap_ - self->in_len_ < kInputChunk && self->in_cap_ < limits::kInputBufferBytesMax) {
    size_t cap = std::min(limits::kInputBufferBytesMax,
                          std::max(self->in_cap_ * 2, self->in_len_ + kInputChunk));
    std::unique_ptr<char[]> bigger(new char[cap]);
    if (self->in_len_ > 0) memcpy(bigger.get(), self->in_.get(), self->in_len_);
    self->in_ = std::move(bigger);
    self->in_cap_ = cap;
  }
  *buf = uv_buf_init(self->in_.get() + self->in_len_,
                     static_cast<unsigned>(self->in_cap_ - self->in_len_));
}

void Connection::OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* /*buf*/) {
  auto* self = static_cast<Connection*>(stream->data);
  if (nread < 0) {
    if (nread != UV_EOF) {
      TLOG_DEBUG("connection %llu read error: %s", static_cast<unsigned long long>(self->id_),
                 uv_strerror(static_cast<int>(nread)));
    }
    self->Close();
    return;
  }
  self->in_len_ += static_cast<size_t>(nread);
  self->Process();
}

void Connection::Process() {
  while (!closing_ && !close_after_flush_ && !blocked_ && in_start_ < in_len_) {
    if (pending_writes_ >= limits::kPipelineDepthMax) break;
    std::string_view in(in_.get() + in_start_, in_len_ - in_start_);
    size_t consumed = 0;
    std::string error;
    protocol::ParseResult r = protocol::ParseRequest(in, &args_, &consumed, &error);
    if (r == protocol::ParseResult::kIncomplete) break;
    if (r == protocol::ParseResult::kError) {
      // As Redis: answer the protocol error, then close.
      if (pending_writes_ > 0) break;  // answer it after the replies owed
      writer().Error("ERR Protocol error: " + error);
      Dirty();
      CloseAfterFlush();
      break;
    }
    if (args_.empty()) {
      in_start_ += consumed;
      continue;
    }
    // Replies keep request order: only log writes may pass pending writes.
    if (pending_writes_ > 0 && !IsPipelinedWrite(args_)) break;
    Dispatched d = Dispatch(*server_, *this, args_);
    if (d == Dispatched::kStall) {
      server_->AddStalled(this);
      break;
    }
    if (d == Dispatched::kParked) break;  // the server resumes it
    in_start_ += consumed;
  }
  if (in_start_ == in_len_) in_start_ = in_len_ = 0;
  UpdateReading();
}

void Connection::Dirty() {
  if (dirty_ || closing_) return;
  dirty_ = true;
  server_->MarkDirty(this);
}

void Connection::Flush() {
  dirty_ = false;
  if (closing_ || write_in_flight_) return;
  if (out_.empty()) {
    if (close_after_flush_) Close();
    return;
  }
  auto* stream = reinterpret_cast<uv_stream_t*>(&tcp_);
  uv_buf_t buf = uv_buf_init(out_.data(), static_cast<unsigned>(out_.size()));
  int n = uv_try_write(stream, &buf, 1);
  if (n == static_cast<int>(out_.size())) {
    out_.clear();
    if (close_after_flush_) Close();
    return;
  }
  if (n < 0 && n != UV_EAGAIN) {
    Close();
    return;
  }
  size_t written = n > 0 ? static_cast<size_t>(n) : 0;
  writing_.assign(out_, written, std::string::npos);
  out_.clear();
  uv_buf_t rest = uv_buf_init(writing_.data(), static_cast<unsigned>(writing_.size()));
  write_req_.data = this;
  if (uv_write(&write_req_, stream, &rest, 1, OnWrite) != 0) {
    Close();
    return;
  }
  write_in_flight_ = true;
}

void Connection::OnWrite(uv_write_t* req, int status) {
  auto* self = static_cast<Connection*>(req->data);
  self->write_in_flight_ = false;
  self->writing_.clear();
  if (status < 0 || self->closing_) {
    self->Close();
    return;
  }
  if (self->out_.size() > limits::kOutputBufferBytesMax) {
    TLOG_WARN("connection %llu: client does not read its replies (%zu bytes queued); closing",
              static_cast<unsigned long long>(self->id_), self->out_.size());
    self->Close();
    return;
  }
  self->Flush();
}

void Connection::CloseAfterFlush() {
  close_after_flush_ = true;
  Dirty();
}

void Connection::PendingWriteDone() {
  assert(pending_writes_ > 0);
  --pending_writes_;
  if (pending_writes_ == 0 && in_start_ < in_len_) server_->AddStalled(this);
}

void Connection::Block(uint64_t wait_ms, bool forever) {
  blocked_ = true;
  wait_forever_ = forever;
  wait_deadline_ms_ = Server::NowMs() + wait_ms;
}

void Connection::WaitQueued(uint64_t wait_id) {
  wait_id_ = wait_id;
  if (wait_forever_) return;
  uint64_t now = Server::NowMs();
  uint64_t left = wait_deadline_ms_ > now ? wait_deadline_ms_ - now : 0;
  // libuv counts a timer from the loop's cached time, which can be up to a
  // loop iteration old: one more millisecond keeps a WAIT from ending early.
  uv_timer_start(&wait_timer_, OnWaitTimer, left + 1, 0);
}

void Connection::OnWaitTimer(uv_timer_t* handle) {
  auto* self = static_cast<Connection*>(handle->data);
  if (self->wait_id_ != 0) self->server_->WaitTimedOut(self);
}

void Connection::Unblock() {
  blocked_ = false;
  wait_id_ = 0;
  wait_forever_ = false;
  if (!closing_) uv_timer_stop(&wait_timer_);
  if (in_start_ < in_len_) server_->AddStalled(this);
  UpdateReading();
}

void Connection::Close() {
  if (closing_) return;
  closing_ = true;
  server_->OnConnectionClosed(this);
  if (handles_open_ == 0) {
    // Never started (accept failed): only the tcp handle was initialised.
    handles_open_ = 1;
    tcp_.data = this;
    uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), OnClose);
    return;
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), OnClose);
  uv_close(reinterpret_cast<uv_handle_t*>(&wait_timer_), OnClose);
}

void Connection::OnClose(uv_handle_t* handle) {
  auto* self = static_cast<Connection*>(handle->data);
  if (--self->handles_open_ == 0) delete self;
}

}  // namespace tumbler::server

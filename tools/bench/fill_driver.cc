#include "fill_driver.h"

#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <vector>

#include "connection.h"

namespace tumbler::bench {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// One pipelined connection working through its share of the items: items
// conn, conn + C, conn + 2C, ... in order; replies come back in that order.
struct FillConn {
  std::unique_ptr<Connection> io;
  uint64_t next_send = 0;   // k: the next item sent is index + k*C
  uint64_t next_reply = 0;  // k of the item whose reply comes next
  uint64_t item_count = 0;
  int64_t last_progress_ns = 0;
};

class Filler {
 public:
  explicit Filler(const FillSpec& spec) : spec_(spec) {}
  ~Filler() {
    conns_.clear();
    if (epoll_fd_ >= 0) close(epoll_fd_);
  }

  Status Connect();
  // Phase: kSessions sends SESSION OPEN, kLocks sends LOCK / SET NX.
  enum class Phase { kSessions, kLocks };
  Status RunPhase(Phase phase, uint64_t items);

  const std::vector<int64_t>& session_ids() const { return session_ids_; }

 private:
  Status Refill(FillConn& c, int index);
  void EncodeItem(uint64_t item, std::string* out);
  Status OnReply(uint64_t item, const ReplyView& reply);
  Status Failure(StatusCode code, std::string_view what) const {
    return Status(code, spec_.endpoint.label + ": " + std::string(what));
  }

  const FillSpec& spec_;
  int epoll_fd_ = -1;
  std::vector<std::unique_ptr<FillConn>> conns_;
  Phase phase_ = Phase::kSessions;
  std::vector<int64_t> session_ids_;
  std::string ttl_text_;
  std::string batch_;
  std::string name_;
};

Status Filler::Connect() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return Failure(StatusCode::kUnavailable, std::strerror(errno));
  ttl_text_ = std::to_string(spec_.ttl_ms);
  for (int i = 0; i < spec_.clients; ++i) {
    auto io = Connection::Dial(spec_.endpoint, spec_.request_timeout, epoll_fd_,
                               static_cast<uint64_t>(i));
    if (!io.ok()) return io.status();
    auto c = std::make_unique<FillConn>();
    c->io = std::move(io.value());
    conns_.push_back(std::move(c));
  }
  return Status::Ok();
}

void Filler::EncodeItem(uint64_t item, std::string* out) {
  if (phase_ == Phase::kSessions) {
    EncodeCommand(out, {"SESSION", "OPEN", ttl_text_});
    return;
  }
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), item);
  name_.assign(spec_.prefix);
  name_.push_back(':');
  name_.append(digits, end);
  if (spec_.endpoint.backend == Backend::kRedis) {
    EncodeCommand(out, {"SET", name_, "fill", "NX", "PX", ttl_text_});
    return;
  }
  const int64_t sid = session_ids_[item % session_ids_.size()];
  auto [sid_end, ec2] = std::to_chars(digits, digits + sizeof(digits), sid);
  EncodeCommand(out, {"LOCK", name_, std::string_view(digits, sid_end - digits)});
}

Status Filler::Refill(FillConn& c, int index) {
  batch_.clear();
  while (c.next_send < c.item_count &&
         c.next_send - c.next_reply < static_cast<uint64_t>(spec_.pipeline)) {
    EncodeItem(static_cast<uint64_t>(index) + c.next_send * conns_.size(), &batch_);
    ++c.next_send;
  }
  if (batch_.empty()) return Status::Ok();
  if (Status s = c.io->Send(batch_); !s.ok()) return Failure(s.code(), s.message());
  return Status::Ok();
}

Status Filler::OnReply(uint64_t item, const ReplyView& reply) {
  if (phase_ == Phase::kSessions) {
    if (reply.kind != ReplyView::Kind::kInteger || reply.integer <= 0) {
      return Failure(StatusCode::kProtocol, "SESSION OPEN answered " + DescribeReply(reply));
    }
    session_ids_[item] = reply.integer;
    return Status::Ok();
  }
  const bool granted =
      spec_.endpoint.backend == Backend::kTumbler
          ? reply.kind == ReplyView::Kind::kArray
          : reply.kind == ReplyView::Kind::kSimple && reply.text == "OK";
  if (granted) return Status::Ok();
  if (reply.kind == ReplyView::Kind::kNull) {
    return Failure(StatusCode::kProtocol,
                   "lock " + spec_.prefix + ":" + std::to_string(item) +
                       " is already held: fill a fresh server or pass another --prefix");
  }
  return Failure(StatusCode::kProtocol, "lock " + spec_.prefix + ":" + std::to_string(item) +
                                            " answered " + DescribeReply(reply));
}

Status Filler::RunPhase(Phase phase, uint64_t items) {
  phase_ = phase;
  if (phase == Phase::kSessions) session_ids_.assign(items, 0);
  const uint64_t count = conns_.size();
  const int64_t start = NowNs();
  for (uint64_t i = 0; i < count; ++i) {
    FillConn& c = *conns_[i];
    c.next_send = c.next_reply = 0;
    c.item_count = items / count + (i < items % count ? 1 : 0);
    c.last_progress_ns = start;
    if (Status s = Refill(c, static_cast<int>(i)); !s.ok()) return s;
  }
  const int64_t timeout_ns = spec_.request_timeout.count();
  constexpr int kEventsMax = 256;
  epoll_event events[kEventsMax];
  while (true) {
    bool done = true;
    const int64_t now = NowNs();
    for (const auto& c : conns_) {
      if (c->next_reply < c->item_count) {
        done = false;
        if (now - c->last_progress_ns > timeout_ns) {
          return Failure(StatusCode::kTimeout,
                         "no reply within the request timeout during fill; is the server alive?");
        }
      }
    }
    if (done) return Status::Ok();
    const int n = epoll_wait(epoll_fd_, events, kEventsMax, 20);
    if (n < 0 && errno != EINTR) return Failure(StatusCode::kUnavailable, std::strerror(errno));
    for (int e = 0; e < n; ++e) {
      const int index = static_cast<int>(events[e].data.u64);
      FillConn& c = *conns_[index];
      if ((events[e].events & EPOLLOUT) != 0) {
        if (Status s = c.io->Flush(); !s.ok()) return Failure(s.code(), s.message());
      }
      if ((events[e].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) == 0) continue;
      bool filled = true;
      while (filled) {
        if (Status s = c.io->Read(&filled); !s.ok()) return Failure(s.code(), s.message());
        ReplyView reply;
        ScanResult r;
        while ((r = c.io->NextReply(&reply)) == ScanResult::kOk) {
          if (c.next_reply >= c.next_send) {
            return Failure(StatusCode::kProtocol, "a reply to no request");
          }
          const uint64_t item = static_cast<uint64_t>(index) + c.next_reply * count;
          if (Status s = OnReply(item, reply); !s.ok()) return s;
          ++c.next_reply;
        }
        if (r == ScanResult::kError) return Failure(StatusCode::kProtocol, "reply is not RESP");
      }
      c.last_progress_ns = NowNs();
      if (Status s = Refill(c, index); !s.ok()) return s;
    }
  }
}

}  // namespace

Result<FillResult> RunFill(const FillSpec& spec) {
  Filler filler(spec);
  if (Status s = filler.Connect(); !s.ok()) return s;
  FillResult result;
  const double cpu_start = ProcessCpuSeconds();
  int64_t t = NowNs();
  if (spec.endpoint.backend == Backend::kTumbler) {
    if (Status s = filler.RunPhase(Filler::Phase::kSessions, spec.sessions); !s.ok()) return s;
    result.sessions = spec.sessions;
  }
  result.sessions_s = (NowNs() - t) / 1e9;
  t = NowNs();
  if (Status s = filler.RunPhase(Filler::Phase::kLocks, spec.locks); !s.ok()) return s;
  result.locks = spec.locks;
  result.locks_s = (NowNs() - t) / 1e9;
  result.client_cpu_s = ProcessCpuSeconds() - cpu_start;
  return result;
}

}  // namespace tumbler::bench

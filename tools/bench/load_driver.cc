#include "load_driver.h"

#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "connection.h"
#include "host_steal.h"

namespace tumbler::bench {

std::string_view WorkloadName(Workload workload) {
  switch (workload) {
    case Workload::kUncontended: return "uncontended";
    case Workload::kContended: return "contended";
    case Workload::kHandoff: return "handoff";
    case Workload::kFill: return "fill";
  }
  return "?";
}

namespace {

using std::chrono::nanoseconds;

int64_t NowNs() {
  // steady_clock is CLOCK_MONOTONIC on Linux, the clock timerfd uses below.
  return std::chrono::duration_cast<nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

enum class ClientState : uint8_t {
  kSetup,      // SESSION OPEN / SCRIPT LOAD in flight
  kIdle,       // nothing in flight, nothing scheduled
  kLocking,    // LOCK / SET NX in flight
  kRetryWait,  // Redis: sleeping before the next SET NX
  kHolding,    // handoff: holding the lock until a timer fires
  kUnlocking,  // UNLOCK / EVALSHA in flight
  kClosing,    // SESSION CLOSE in flight
  kDone,
};

std::string_view InFlightName(ClientState state, Backend backend) {
  const bool tumbler = backend == Backend::kTumbler;
  switch (state) {
    case ClientState::kSetup: return tumbler ? "SESSION OPEN" : "SCRIPT LOAD";
    case ClientState::kLocking: return tumbler ? "LOCK" : "SET NX";
    case ClientState::kUnlocking: return tumbler ? "UNLOCK" : "EVALSHA (unlock)";
    case ClientState::kClosing: return "SESSION CLOSE";
    default: return "nothing";
  }
}

struct Client {
  std::unique_ptr<Connection> io;
  Dialect dialect;
  int index = 0;  // global client number
  ClientState state = ClientState::kSetup;
  std::string name;   // the lock this client takes
  std::string owner;  // Redis SET value: tells holders apart
  std::string lock_bytes;
  std::string unlock_bytes;
  int64_t acquire_start_ns = 0;  // first try of the current acquire
  int64_t deadline_ns = 0;       // reply due by; 0 when nothing is in flight
  uint64_t acquisitions = 0;     // while measuring

  Client(Backend backend, uint32_t ttl_ms) : dialect(backend, ttl_ms) {}
};

// The last UNLOCK sent on the contended name, packed into one word so that two
// threads can hand it over without a lock: (ns since base) << 11 | (client+1).
constexpr int kClientBits = 11;
static_assert(kClientsMax < (1 << kClientBits));

struct Shared {
  const LoadSpec* spec = nullptr;
  int64_t base_ns = 0;
  int64_t t0_ns = 0;  // start of warmup, set when every thread is set up
  std::atomic<uint64_t> last_unlock{0};
  std::atomic<bool> failed{false};
};

class LoadThread {
 public:
  LoadThread(Shared* shared, int first_client, int client_count, bool samples_cpu)
      : shared_(shared),
        spec_(*shared->spec),
        first_client_(first_client),
        client_count_(client_count),
        samples_cpu_(samples_cpu) {}
  ~LoadThread() {
    clients_.clear();  // connections leave the epoll set before it closes
    if (timer_fd_ >= 0) close(timer_fd_);
    if (epoll_fd_ >= 0) close(epoll_fd_);
  }

  Status Setup();
  Status Run();
  Status Teardown();
  void Summarize(LoadResult* out) const;

 private:
  bool InWindow(int64_t t) const { return t >= warm_end_ns_ && t < measure_end_ns_; }
  bool Stopping(int64_t t) const { return t >= measure_end_ns_; }
  bool Contended() const { return spec_.workload != Workload::kUncontended; }

  Status Poll(int timeout_ms);
  Status HandleReadable(Client& c);
  Status OnReply(Client& c, const ReplyView& reply, int64_t now);
  Status OnLockReply(Client& c, const ReplyView& reply, int64_t now);
  Status OnGranted(Client& c, int64_t now);
  Status StartAcquire(Client& c, int64_t now);
  Status SendLock(Client& c, int64_t now);
  Status SendUnlock(Client& c, int64_t now);
  Status FireTimers();
  void ArmTimer(int64_t when_ns, int local_index);
  void SetTimer(int64_t when_ns);
  Status CheckDeadlines(int64_t now);
  size_t CountIn(ClientState state) const;
  Status Fail(const Client& c, StatusCode code, std::string_view what) const;

  Shared* shared_;
  const LoadSpec& spec_;
  int first_client_;
  int client_count_;
  bool samples_cpu_;
  int epoll_fd_ = -1;
  int timer_fd_ = -1;
  std::vector<std::unique_ptr<Client>> clients_;
  // Min-heap of (due ns, local client index); each client has at most one.
  std::vector<std::pair<int64_t, int>> timers_;
  int64_t timer_armed_ns_ = 0;
  int64_t warm_end_ns_ = 0;
  int64_t measure_end_ns_ = 0;
  int64_t last_deadline_check_ns_ = 0;

  LoadResult result_;
  double cpu_start_s_ = 0;
  double cpu_end_s_ = 0;
  std::optional<double> steal_start_s_;
  std::optional<double> steal_end_s_;
  bool cpu_started_ = false;
  bool cpu_ended_ = false;
};

Status LoadThread::Fail(const Client& c, StatusCode code, std::string_view what) const {
  std::string text = spec_.endpoint.label;
  if (spec_.endpoint.label != spec_.endpoint.url) text += " (" + spec_.endpoint.url + ")";
  text += ", client " + std::to_string(c.index) + ": ";
  text += what;
  return Status(code, text);
}

Status LoadThread::Setup() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (epoll_fd_ < 0 || timer_fd_ < 0) {
    return Status(StatusCode::kUnavailable, std::string("epoll/timerfd: ") + std::strerror(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;  // tag 0 is the timer; clients are 1 + local index
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, timer_fd_, &ev) != 0) {
    return Status(StatusCode::kUnavailable, std::string("epoll_ctl: ") + std::strerror(errno));
  }
  timers_.reserve(client_count_ + 1);
  clients_.reserve(client_count_);
  const int64_t deadline = NowNs() + spec_.request_timeout.count();
  for (int i = 0; i < client_count_; ++i) {
    auto c = std::make_unique<Client>(spec_.endpoint.backend, spec_.ttl_ms);
    c->index = first_client_ + i;
    auto io = Connection::Dial(spec_.endpoint, spec_.request_timeout, epoll_fd_,
                               static_cast<uint64_t>(i) + 1);
    if (!io.ok()) return io.status();
    c->io = std::move(io.value());
    c->name = spec_.name_prefix +
              (Contended() ? std::string(":c") : ":u:" + std::to_string(c->index));
    c->owner = spec_.name_prefix + ":" + std::to_string(c->index);
    std::string setup;
    c->dialect.EncodeSetup(&setup);
    if (Status s = c->io->Send(setup); !s.ok()) return Fail(*c, s.code(), s.message());
    c->deadline_ns = deadline;
    clients_.push_back(std::move(c));
  }
  while (CountIn(ClientState::kSetup) > 0) {
    if (Status s = CheckDeadlines(NowNs()); !s.ok()) return s;
    if (shared_->failed.load(std::memory_order_relaxed)) return Status::Ok();
    if (Status s = Poll(20); !s.ok()) return s;
  }
  return Status::Ok();
}

size_t LoadThread::CountIn(ClientState state) const {
  size_t n = 0;
  for (const auto& c : clients_) n += c->state == state ? 1 : 0;
  return n;
}

Status LoadThread::Run() {
  warm_end_ns_ = shared_->t0_ns + spec_.warmup.count();
  measure_end_ns_ = warm_end_ns_ + spec_.duration.count();
  // Every request is bounded by its own deadline; this bounds the drain too.
  const int64_t drain_end_ns =
      measure_end_ns_ + 2 * (spec_.request_timeout.count() + spec_.wait_ms * 1'000'000);
  int64_t now = NowNs();
  for (auto& c : clients_) {
    if (Status s = StartAcquire(*c, now); !s.ok()) return s;
  }
  while (true) {
    now = NowNs();
    if (samples_cpu_ && !cpu_started_ && now >= warm_end_ns_) {
      cpu_start_s_ = ProcessCpuSeconds();
      steal_start_s_ = MachineStealSeconds();
      cpu_started_ = true;
    }
    if (samples_cpu_ && !cpu_ended_ && now >= measure_end_ns_) {
      cpu_end_s_ = ProcessCpuSeconds();
      steal_end_s_ = MachineStealSeconds();
      cpu_ended_ = true;
    }
    if (Stopping(now) && CountIn(ClientState::kIdle) == clients_.size()) break;
    if (now > drain_end_ns) {
      return Status(StatusCode::kTimeout, spec_.endpoint.label + ": clients did not drain");
    }
    if (shared_->failed.load(std::memory_order_relaxed)) return Status::Ok();
    if (now - last_deadline_check_ns_ > 20'000'000) {
      last_deadline_check_ns_ = now;
      if (Status s = CheckDeadlines(now); !s.ok()) return s;
    }
    // Wake for the next phase boundary; never sleep long so that deadlines
    // and the other thread's failure are noticed.
    int64_t next = now + 20'000'000;
    if (now < warm_end_ns_) next = std::min(next, warm_end_ns_);
    if (now < measure_end_ns_) next = std::min(next, measure_end_ns_);
    const int timeout_ms = static_cast<int>((next - now + 999'999) / 1'000'000);
    if (Status s = Poll(timeout_ms); !s.ok()) return s;
  }
  return Status::Ok();
}

Status LoadThread::Teardown() {
  const int64_t deadline = NowNs() + spec_.request_timeout.count();
  for (auto& c : clients_) {
    std::string bytes;
    if (!c->dialect.EncodeTeardown(&bytes)) {
      c->state = ClientState::kDone;
      continue;
    }
    if (Status s = c->io->Send(bytes); !s.ok()) return Fail(*c, s.code(), s.message());
    c->state = ClientState::kClosing;
    c->deadline_ns = deadline;
  }
  while (CountIn(ClientState::kClosing) > 0) {
    if (Status s = CheckDeadlines(NowNs()); !s.ok()) return s;
    if (Status s = Poll(20); !s.ok()) return s;
  }
  return Status::Ok();
}

Status LoadThread::Poll(int timeout_ms) {
  constexpr int kEventsMax = 256;
  epoll_event events[kEventsMax];
  const int n = epoll_wait(epoll_fd_, events, kEventsMax, timeout_ms);
  if (n < 0) {
    if (errno == EINTR) return Status::Ok();
    return Status(StatusCode::kUnavailable, std::string("epoll_wait: ") + std::strerror(errno));
  }
  for (int i = 0; i < n; ++i) {
    const uint64_t tag = events[i].data.u64;
    if (tag == 0) {
      if (Status s = FireTimers(); !s.ok()) return s;
      continue;
    }
    Client& c = *clients_[tag - 1];
    if ((events[i].events & EPOLLOUT) != 0) {
      if (Status s = c.io->Flush(); !s.ok()) return Fail(c, s.code(), s.message());
    }
    if ((events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) {
      if (Status s = HandleReadable(c); !s.ok()) return s;
    }
  }
  return Status::Ok();
}

Status LoadThread::HandleReadable(Client& c) {
  bool filled = true;
  while (filled) {
    if (Status s = c.io->Read(&filled); !s.ok()) {
      return Fail(c, s.code(),
                  s.message() + " while waiting for " +
                      std::string(InFlightName(c.state, spec_.endpoint.backend)));
    }
    const int64_t now = NowNs();  // one clock read per batch of replies
    ReplyView reply;
    ScanResult r;
    while ((r = c.io->NextReply(&reply)) == ScanResult::kOk) {
      if (Status s = OnReply(c, reply, now); !s.ok()) return s;
    }
    if (r == ScanResult::kError) return Fail(c, StatusCode::kProtocol, "reply is not RESP");
  }
  return Status::Ok();
}

Status LoadThread::OnReply(Client& c, const ReplyView& reply, int64_t now) {
  c.deadline_ns = 0;
  switch (c.state) {
    case ClientState::kSetup: {
      if (Status s = c.dialect.AcceptSetup(reply); !s.ok()) {
        return Fail(c, s.code(), s.message());
      }
      const int64_t wait_ms = Contended() ? spec_.wait_ms : -1;
      c.dialect.EncodeLock(&c.lock_bytes, c.name, c.owner, wait_ms);
      c.dialect.EncodeUnlock(&c.unlock_bytes, c.name, c.owner);
      c.state = ClientState::kIdle;
      return Status::Ok();
    }
    case ClientState::kLocking:
      return OnLockReply(c, reply, now);
    case ClientState::kUnlocking: {
      if (Status s = c.dialect.CheckUnlock(reply); !s.ok()) {
        return Fail(c, s.code(), s.message());
      }
      if (InWindow(now)) ++result_.pairs;
      return StartAcquire(c, now);
    }
    case ClientState::kClosing:
      if (reply.kind == ReplyView::Kind::kError) {
        return Fail(c, StatusCode::kProtocol, "SESSION CLOSE answered " + DescribeReply(reply));
      }
      c.state = ClientState::kDone;
      return Status::Ok();
    default:
      return Fail(c, StatusCode::kProtocol,
                  "unexpected reply with nothing in flight: " + DescribeReply(reply));
  }
}

Status LoadThread::OnLockReply(Client& c, const ReplyView& reply, int64_t now) {
  switch (c.dialect.ClassifyLock(reply)) {
    case LockOutcome::kGranted:
      return OnGranted(c, now);
    case LockOutcome::kFailed:
      return Fail(c, StatusCode::kProtocol,
                  std::string(InFlightName(c.state, spec_.endpoint.backend)) + " " + c.name +
                      " answered " + DescribeReply(reply));
    case LockOutcome::kBusy:
      break;
  }
  if (!Contended()) {
    return Fail(c, StatusCode::kProtocol,
                "uncontended lock " + c.name +
                    " is held by someone else (another client of this server?)");
  }
  if (InWindow(now)) ++result_.busy_replies;
  if (Stopping(now)) {
    c.state = ClientState::kIdle;
    return Status::Ok();
  }
  if (spec_.endpoint.backend == Backend::kTumbler) {
    return SendLock(c, now);  // the WAIT ran out: wait again
  }
  c.state = ClientState::kRetryWait;  // the usual Redis loop: sleep, try again
  ArmTimer(now + spec_.retry_sleep.count(), c.index - first_client_);
  return Status::Ok();
}

Status LoadThread::OnGranted(Client& c, int64_t now) {
  const bool counted = InWindow(now);
  if (counted) {
    ++result_.acquisitions;
    ++c.acquisitions;
    result_.acquire.Record(now - c.acquire_start_ns);
  }
  if (Contended()) {
    uint64_t last = shared_->last_unlock.load(std::memory_order_acquire);
    if (last != 0 && shared_->last_unlock.compare_exchange_strong(last, 0)) {
      const int who = static_cast<int>(last & ((1u << kClientBits) - 1)) - 1;
      const int64_t sent_ns = shared_->base_ns + static_cast<int64_t>(last >> kClientBits);
      if (counted && who == c.index) ++result_.self_reacquisitions;
      if (counted && who != c.index) result_.handoff.Record(now - sent_ns);
    }
  }
  if (spec_.workload == Workload::kHandoff && spec_.hold.count() > 0) {
    c.state = ClientState::kHolding;
    ArmTimer(now + spec_.hold.count(), c.index - first_client_);
    return Status::Ok();
  }
  return SendUnlock(c, now);
}

Status LoadThread::StartAcquire(Client& c, int64_t now) {
  if (Stopping(now)) {
    c.state = ClientState::kIdle;
    return Status::Ok();
  }
  c.acquire_start_ns = now;
  return SendLock(c, now);
}

Status LoadThread::SendLock(Client& c, int64_t now) {
  c.state = ClientState::kLocking;
  int64_t allowed = spec_.request_timeout.count();
  if (Contended() && spec_.endpoint.backend == Backend::kTumbler) {
    allowed += spec_.wait_ms * 1'000'000;
  }
  c.deadline_ns = now + allowed;
  if (Status s = c.io->Send(c.lock_bytes); !s.ok()) return Fail(c, s.code(), s.message());
  return Status::Ok();
}

Status LoadThread::SendUnlock(Client& c, int64_t now) {
  c.state = ClientState::kUnlocking;
  c.deadline_ns = now + spec_.request_timeout.count();
  if (Contended()) {
    const uint64_t packed = (static_cast<uint64_t>(now - shared_->base_ns) << kClientBits) |
                            static_cast<uint64_t>(c.index + 1);
    shared_->last_unlock.store(packed, std::memory_order_release);
  }
  if (Status s = c.io->Send(c.unlock_bytes); !s.ok()) return Fail(c, s.code(), s.message());
  return Status::Ok();
}

void LoadThread::ArmTimer(int64_t when_ns, int local_index) {
  timers_.emplace_back(when_ns, local_index);
  std::push_heap(timers_.begin(), timers_.end(), std::greater<>());
  if (timer_armed_ns_ != 0 && timer_armed_ns_ <= timers_.front().first) return;
  SetTimer(timers_.front().first);
}

void LoadThread::SetTimer(int64_t when_ns) {
  timer_armed_ns_ = when_ns;
  itimerspec spec{};
  spec.it_value.tv_sec = when_ns / 1'000'000'000;
  spec.it_value.tv_nsec = when_ns % 1'000'000'000;
  timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr);
}

Status LoadThread::FireTimers() {
  uint64_t expirations = 0;
  [[maybe_unused]] ssize_t n = read(timer_fd_, &expirations, sizeof(expirations));
  timer_armed_ns_ = 0;
  const int64_t now = NowNs();
  while (!timers_.empty() && timers_.front().first <= now) {
    std::pop_heap(timers_.begin(), timers_.end(), std::greater<>());
    Client& c = *clients_[timers_.back().second];
    timers_.pop_back();
    if (c.state == ClientState::kHolding) {
      if (Status s = SendUnlock(c, now); !s.ok()) return s;
    } else if (c.state == ClientState::kRetryWait) {
      if (Stopping(now)) {
        c.state = ClientState::kIdle;
      } else if (Status s = SendLock(c, now); !s.ok()) {
        return s;
      }
    }
  }
  if (!timers_.empty()) SetTimer(timers_.front().first);
  return Status::Ok();
}

Status LoadThread::CheckDeadlines(int64_t now) {
  for (const auto& c : clients_) {
    if (c->deadline_ns != 0 && now > c->deadline_ns) {
      const double allowed_s = spec_.request_timeout.count() / 1e9;
      char text[64];
      std::snprintf(text, sizeof(text), "%.3g s", allowed_s);
      return Fail(*c, StatusCode::kTimeout,
                  "no reply to " + std::string(InFlightName(c->state, spec_.endpoint.backend)) +
                      " within the request timeout (" + text +
                      (c->state == ClientState::kLocking && Contended() &&
                               spec_.endpoint.backend == Backend::kTumbler
                           ? " plus WAIT)"
                           : ")") +
                      "; is the server alive?");
    }
  }
  return Status::Ok();
}

void LoadThread::Summarize(LoadResult* out) const {
  out->pairs += result_.pairs;
  out->acquisitions += result_.acquisitions;
  out->acquire.Merge(result_.acquire);
  out->handoff.Merge(result_.handoff);
  out->busy_replies += result_.busy_replies;
  out->self_reacquisitions += result_.self_reacquisitions;
  for (const auto& c : clients_) {
    out->client_acquisitions_min = std::min(out->client_acquisitions_min, c->acquisitions);
    out->client_acquisitions_max = std::max(out->client_acquisitions_max, c->acquisitions);
  }
  if (samples_cpu_) {
    out->client_cpu_s = cpu_end_s_ - cpu_start_s_;
    if (steal_start_s_ && steal_end_s_) out->host_steal_s = *steal_end_s_ - *steal_start_s_;
  }
}

}  // namespace

Result<LoadResult> RunLoad(const LoadSpec& spec) {
  assert(spec.workload != Workload::kFill);
  assert(spec.clients >= 1 && spec.clients <= kClientsMax);
  const int threads = std::clamp(spec.threads, 1, std::min(kThreadsMax, spec.clients));
  Shared shared;
  shared.spec = &spec;
  shared.base_ns = NowNs();
  std::vector<std::unique_ptr<LoadThread>> workers;
  int first = 0;
  for (int t = 0; t < threads; ++t) {
    const int count = spec.clients / threads + (t < spec.clients % threads ? 1 : 0);
    workers.push_back(std::make_unique<LoadThread>(&shared, first, count, t == 0));
    first += count;
  }
  std::vector<Status> statuses(threads);
  std::barrier sync(threads, [&shared]() noexcept { shared.t0_ns = NowNs(); });
  auto body = [&](int t) {
    Status s = workers[t]->Setup();
    if (!s.ok()) shared.failed = true;
    sync.arrive_and_wait();
    if (s.ok() && !shared.failed) s = workers[t]->Run();
    if (!s.ok()) shared.failed = true;
    sync.arrive_and_wait();
    if (s.ok() && !shared.failed) s = workers[t]->Teardown();
    statuses[t] = std::move(s);
  };
  std::vector<std::thread> others;
  for (int t = 1; t < threads; ++t) others.emplace_back(body, t);
  body(0);
  for (auto& th : others) th.join();
  for (Status& s : statuses) {
    if (!s.ok()) return s;
  }
  LoadResult result;
  result.measured_s = spec.duration.count() / 1e9;
  result.client_acquisitions_min = UINT64_MAX;
  for (const auto& w : workers) w->Summarize(&result);
  return result;
}

}  // namespace tumbler::bench

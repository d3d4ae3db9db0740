// Not a test (no assertion on time or size): builds 1,000,000 locks held by
// 10,000 sessions, prints the resident memory it costs per lock, then times
// lock/unlock pairs against that state, snapshot encoding and restore.
//
//   core_memory_bench [locks] [sessions]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/state_machine.h"

namespace {

using tumbler::core::CommandType;
using tumbler::core::CommandView;
using tumbler::core::Effects;
using tumbler::core::StateMachine;

// Resident set size in KiB, from /proc/self/status.
long RssKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string LockName(uint64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "lock/%07llu", static_cast<unsigned long long>(i));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t locks = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
  uint64_t sessions = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 10'000;
  tumbler::core::Bounds bounds;
  bounds.sessions_max = static_cast<uint32_t>(sessions);
  bounds.locks_max = locks + 1;
  StateMachine sm(bounds);
  Effects fx;
  uint64_t now = 1;

  long rss_before = RssKib();
  for (uint64_t i = 0; i < sessions; ++i) {
    CommandView open;
    open.type = CommandType::kOpenSession;
    open.ttl_ms = 10'000;
    auto r = sm.Apply(open, now, &fx);
    if (!r.status.ok()) return 1;
  }
  auto start = std::chrono::steady_clock::now();
  std::string name;
  for (uint64_t i = 0; i < locks; ++i) {
    name = LockName(i);
    CommandView lock;
    lock.type = CommandType::kLock;
    lock.session = 1 + i % sessions;
    lock.name = name;
    auto r = sm.Apply(lock, now, &fx);
    if (!r.status.ok()) {
      std::fprintf(stderr, "lock %llu: %s\n", static_cast<unsigned long long>(i),
                   r.status.ToString().c_str());
      return 1;
    }
  }
  double build_s = SecondsSince(start);
  long rss_after = RssKib();
  double per_lock = (rss_after - rss_before) * 1024.0 / static_cast<double>(locks);
  std::printf("locks=%llu sessions=%llu build=%.2fs rss_before=%ldKiB rss_after=%ldKiB "
              "=> %.1f bytes/lock\n",
              static_cast<unsigned long long>(locks), static_cast<unsigned long long>(sessions),
              build_s, rss_before, rss_after, per_lock);

  // Lock + unlock of a new name on an existing session, among `locks` others.
  const int kPairs = 1'000'000;
  start = std::chrono::steady_clock::now();
  for (int i = 0; i < kPairs; ++i) {
    name = LockName(locks + 1 + static_cast<uint64_t>(i % 1000));
    CommandView lock;
    lock.type = CommandType::kLock;
    lock.session = 1 + static_cast<uint64_t>(i) % sessions;
    lock.name = name;
    auto r = sm.Apply(lock, now, &fx);
    CommandView unlock = lock;
    unlock.type = CommandType::kUnlock;
    auto u = sm.Apply(unlock, now, &fx);
    if (!r.status.ok() || !u.status.ok()) return 1;
  }
  std::printf("lock+unlock: %.0f pairs/s\n", kPairs / SecondsSince(start));

  std::string snap;
  start = std::chrono::steady_clock::now();
  sm.EncodeSnapshot(&snap);
  std::printf("snapshot: %zu bytes, encode %.3fs\n", snap.size(), SecondsSince(start));

  StateMachine restored(bounds);
  start = std::chrono::steady_clock::now();
  auto st = restored.DecodeSnapshot(snap);
  double restore_s = SecondsSince(start);
  std::printf("restore: %.3fs (%s), rss now %ldKiB\n", restore_s, st.ToString().c_str(),
              RssKib());
  std::string again;
  restored.EncodeSnapshot(&again);
  std::printf("re-encode identical: %s\n", again == snap ? "yes" : "NO");
  if (!st.ok() || again != snap) return 1;

  // Degenerate shapes: a full queue on one hot lock (every new waiter walks
  // the queue ahead of it for deadlock), and one lock shared by every session.
  StateMachine hot(bounds);
  Effects hot_fx;
  for (uint64_t i = 0; i < sessions; ++i) {
    CommandView open;
    open.type = CommandType::kOpenSession;
    open.ttl_ms = 10'000;
    (void)hot.Apply(open, now, &hot_fx);
  }
  CommandView lock;
  lock.type = CommandType::kLock;
  lock.name = "hot";
  lock.session = 1;
  (void)hot.Apply(lock, now, &hot_fx);
  lock.wait = true;
  uint64_t waiters = std::min<uint64_t>(sessions - 1, bounds.waiters_per_lock_max);
  start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < waiters; ++i) {
    lock.session = 2 + i;
    if (hot.Apply(lock, now, &hot_fx).lock_outcome != tumbler::core::LockOutcome::kQueued) {
      return 1;
    }
  }
  double queue_s = SecondsSince(start);
  std::printf("queue of %llu waiters on one lock: %.3fs\n",
              static_cast<unsigned long long>(waiters), queue_s);
  start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) {
    CommandView cancel_last;
    cancel_last.type = CommandType::kCancelWait;
    cancel_last.wait_id = hot.WaitIds().back();
    (void)hot.Apply(cancel_last, now, &hot_fx);
    lock.session = 2 + waiters - 1;
    (void)hot.Apply(lock, now, &hot_fx);
  }
  std::printf("enqueue behind %llu waiters: %.1f us\n",
              static_cast<unsigned long long>(waiters - 1), SecondsSince(start) * 1e6 / 100);

  StateMachine readers(bounds);
  for (uint64_t i = 0; i < sessions; ++i) {
    CommandView open;
    open.type = CommandType::kOpenSession;
    open.ttl_ms = 10'000;
    (void)readers.Apply(open, now, &hot_fx);
  }
  CommandView shared;
  shared.type = CommandType::kLock;
  shared.name = "cfg";
  shared.shared = true;
  start = std::chrono::steady_clock::now();
  for (uint64_t i = 1; i <= sessions; ++i) {
    shared.session = i;
    (void)readers.Apply(shared, now, &hot_fx);
  }
  CommandView unshare = shared;
  unshare.type = CommandType::kUnlock;
  for (uint64_t i = 1; i <= sessions; ++i) {
    unshare.session = i;
    (void)readers.Apply(unshare, now, &hot_fx);
  }
  std::printf("%llu readers join and leave one lock: %.3fs\n",
              static_cast<unsigned long long>(sessions), SecondsSince(start));
  return 0;
}

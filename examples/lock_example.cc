// lock-example: the tumbler client library in one page.
//
//   tumblerd --data-dir /tmp/tumbler-data &
//   build/lock-example [tumbler://127.0.0.1:7420]
//
// Four threads append to a shared "ledger" under one distributed lock; each
// passes its fencing token to the ledger, which refuses a token older than the
// newest it has seen (how a resource protects itself from a holder that
// paused past its lease). Then try_lock_for shows a bounded wait, and
// OnSessionLost shows what to do when the lease is gone.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "tumbler/client.h"
#include "tumbler/mutex.h"

using namespace std::chrono_literals;

namespace {

// A resource that checks fencing tokens: it remembers the highest token it
// has accepted and refuses older ones.
class Ledger {
 public:
  bool Append(uint64_t token, int entry) {
    std::lock_guard<std::mutex> lock(mu_);  // local: the ledger's own memory
    if (token < highest_token_) return false;
    highest_token_ = token;
    entries_.push_back(entry);
    return true;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size();
  }

 private:
  std::mutex mu_;
  uint64_t highest_token_ = 0;
  std::vector<int> entries_;
};

}  // namespace

int main(int argc, char** argv) {
  const char* url = argc > 1 ? argv[1] : "tumbler://127.0.0.1:7420";

  tumbler::ClientOptions options;
  options.session_ttl = 10s;  // renewed every ~3.3 s by the client's watchdog
  options.session_name = "lock-example";
  tumbler::Result<tumbler::Client> client = tumbler::Client::Connect(url, options);
  if (!client.ok()) {
    std::fprintf(stderr, "connect %s: %s\n", url, client.status().ToString().c_str());
    return 1;
  }
  std::printf("session %llu\n", static_cast<unsigned long long>(client->SessionId()));

  // Runs on the watchdog thread if the lease is lost (server unreachable for
  // longer than the TTL allows, or the session expired): every hold is gone.
  // Stop touching protected resources; here we just tell the main thread.
  std::atomic<bool> session_lost{false};
  client->OnSessionLost([&](const tumbler::Status& why) {
    std::fprintf(stderr, "session lost: %s\n", why.ToString().c_str());
    session_lost = true;
  });

  tumbler::Mutex mutex = client->NewMutex("examples/ledger");
  Ledger ledger;

  // 1. std::unique_lock: blocks until granted, in FIFO order across clients.
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < 5 && !session_lost; ++i) {
        try {
          std::unique_lock lock(mutex);
          uint64_t token = mutex.token();  // the fencing token of this hold
          // Before a slow action, check the lease still covers it.
          if (client->SafeUntil() - std::chrono::steady_clock::now() < 1s) continue;
          if (!ledger.Append(token, t * 100 + i)) {
            std::fprintf(stderr, "ledger refused stale token %llu\n",
                         static_cast<unsigned long long>(token));
          }
        } catch (const tumbler::LockError& e) {
          // lock() throws only when it cannot lock: session lost, deadlock...
          std::fprintf(stderr, "thread %d: %s\n", t, e.what());
          return;
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  std::printf("ledger has %zu entries\n", ledger.size());

  // 2. try_lock_for: a bounded wait. Hold the lock in this thread and let
  //    another thread give up after 300 ms.
  {
    std::unique_lock lock(mutex);
    std::thread impatient([&] {
      auto start = std::chrono::steady_clock::now();
      bool got = mutex.try_lock_for(300ms);
      auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
      std::printf("try_lock_for(300ms) while held elsewhere: %s after %lld ms\n",
                  got ? "acquired" : "timed out", static_cast<long long>(waited.count()));
      if (got) mutex.unlock();
    });
    impatient.join();
  }

  // 3. The primary API: errors as values, no exceptions.
  tumbler::Result<bool> got = mutex.TryLockFor(1s);
  if (!got.ok()) {
    std::fprintf(stderr, "TryLockFor: %s\n", got.status().ToString().c_str());
  } else if (*got) {
    std::printf("TryLockFor: acquired, token %llu\n",
                static_cast<unsigned long long>(mutex.token()));
    tumbler::Status released = mutex.Unlock();
    if (!released.ok()) std::fprintf(stderr, "Unlock: %s\n", released.ToString().c_str());
  }

  // Close() ends the session (SESSION CLOSE releases anything still held).
  // The destructor would do the same.
  tumbler::Status closed = client->Close();
  if (!closed.ok()) std::fprintf(stderr, "close: %s\n", closed.ToString().c_str());
  return session_lost ? 2 : 0;
}

// tumbler::Client: a connection to a tumbler cluster and the one session all
// of its locks are held under. DESIGN.md "The client library"; the protocol it
// speaks is PROTOCOL.md; user guide: docs/client.md.
//
//   Result<tumbler::Client> client = tumbler::Client::Connect("tumbler://127.0.0.1:7420");
//   if (!client.ok()) { ...client.status()... }
//   client->OnSessionLost([](const tumbler::Status& why) { ... });
//   tumbler::Mutex m = client->NewMutex("orders/42");
//
// The session. Connect() opens one session (SESSION OPEN ttl). A background
// watchdog thread renews it every TTL/3 (SESSION KEEPALIVE) for as long as the
// Client lives. The client keeps a local "safe until" deadline: the steady
// clock time at which the last acknowledged renewal was sent, plus the TTL.
// Until then the server cannot have expired the session, so the locks held
// under it are still held; a critical section that acts on a resource that
// cannot check fencing tokens should compare SafeUntil() with the time its
// action will take. The session is lost when the server says it no longer
// exists (NOSESSION) or when the watchdog could not renew it before SafeUntil()
// passed; then every hold is gone, OnSessionLost's callback runs once, and
// every later lock call fails with kSessionLost. A lost session is not
// replaced: make a new Client.
//
// Connections. The client keeps a small pool of TCP connections (at most
// ClientOptions::connections_max): one per call in flight, because a blocking
// LOCK ... WAIT holds back the replies behind it on its connection. The
// watchdog has a connection of its own, so renewals never queue behind a
// wait. A broken connection is reopened; the session survives it (the
// watchdog renews on the new connection at once). In a cluster, a
// `-NOTLEADER host:port` reply moves the client to the named leader.
//
// Threads: every method may be called from any thread concurrently, except
// that the move operations, Close() and the destructor must not run
// concurrently with other calls on the same Client object (Mutex handles may
// keep being used: they then fail with kSessionLost).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "tumbler/backends.h"
#include "tumbler/mutex.h"
#include "tumbler/status.h"

namespace tumbler {

struct ClientOptions {
  // The session's lease, 100 ms .. 3,600,000 ms. The watchdog renews every
  // session_ttl / 3, so the session survives a server or network pause of up
  // to about 2/3 of it.
  std::chrono::milliseconds session_ttl{10'000};
  // Bound on one TCP connect attempt to one node.
  std::chrono::milliseconds connect_timeout{2'000};
  // Bound on one request that does not wait for a lock, including reconnects,
  // leader redirects and TRYAGAIN retries. A lock wait gets its own duration
  // plus this.
  std::chrono::milliseconds op_timeout{5'000};
  // Optional session label (SESSION OPEN ... NAME label), shown by
  // `tumbler sessions`/SESSION INFO. At most 256 bytes.
  std::string session_name;
  // Pool bound: how many requests may be in flight at once (blocked waits
  // included), 1 .. 1024. A call that finds every connection busy waits for
  // one (within its deadline; forever for Lock()).
  size_t connections_max = 64;
};

class Client {
 public:
  // Parses `url`, connects, and opens the session. `url` is
  // "tumbler://host:port" or, for a cluster, "tumbler://h1:p1,h2:p2,..." (port
  // 7420 when omitted; IPv6 hosts in brackets), or the URL of another backend:
  // redis://, redlock://, etcd://, zookeeper://, postgres://, mysql:// (their
  // URL forms and guarantees: docs/backends.md; include/tumbler/backends.h).
  // Starts the watchdog thread. Takes at most about options.op_timeout. Errors:
  //   kInvalidArgument  a malformed URL, or an option out of range.
  //   kUnsupported      a scheme no backend serves.
  //   kUnavailable      no node could be reached; the message says why.
  //   kTimeout          a node was reached but did not answer in time.
  //   kNotLeader, kTryAgain: no leader could be found in time.
  //   kLimit            the server has too many sessions.
  //   kNoAuth, kErr     the server refused SESSION OPEN.
  static Result<Client> Connect(std::string_view url, ClientOptions options = {});

  // Moving transfers the session and the watchdog; the moved-from Client is
  // empty (its methods return kSessionLost / 0 / do nothing).
  Client(Client&& other) noexcept;
  Client& operator=(Client&& other) noexcept;  // Close()s this one first
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  // Close(), ignoring its status.
  ~Client();

  // A handle on the lock `name` (1..1024 bytes, binary-safe), held under this
  // Client's session. Does no I/O and cannot fail here: an invalid name makes
  // the handle's calls fail with kInvalidArgument.
  Mutex NewMutex(std::string name) const;
  // The same for a reader-writer lock.
  SharedMutex NewSharedMutex(std::string name) const;

  // The backend this Client talks to and what it can guarantee
  // (docs/backends.md).
  const BackendInfo& backend() const;

  // The session id the server gave (> 0); 0 for an empty Client.
  uint64_t SessionId() const;

  // The session is certainly alive on the server until this steady_clock time
  // (start of the last acknowledged renewal + TTL). In the past once the
  // session is lost or closed.
  std::chrono::steady_clock::time_point SafeUntil() const;

  // OK while the session is believed alive (not lost, not closed, and
  // SafeUntil() in the future); else kSessionLost with the reason.
  Status SessionStatus() const;

  // Sets the function called once when the session is lost (not when it is
  // closed with Close()). It runs on the watchdog thread, with the reason
  // (kSessionLost; the message says why). If the session is already lost and
  // no callback has run yet, it runs soon after. Replaces an earlier callback.
  // The callback may call any method of the Client, Close() and the
  // destructor included; it should not block for long, since no other watchdog
  // work happens meanwhile (there is none left after a loss).
  void OnSessionLost(std::function<void(const Status&)> callback);

  // Ends the session: stops the watchdog, sends SESSION CLOSE (which releases
  // every hold of the session and ends its waits on the server), and wakes
  // every call still blocked (they fail with kSessionLost). Idempotent; the
  // Client is then empty. Returns OK, or the error of SESSION CLOSE
  // (kUnavailable, kTimeout, ...): the server then expires the session after
  // its TTL instead. When the session was already lost, returns OK.
  Status Close();

 private:
  Client() = default;

  std::shared_ptr<client::Backend> state_;
  std::thread watchdog_;
};

}  // namespace tumbler

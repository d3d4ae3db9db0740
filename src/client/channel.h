// A Channel sends commands to "the cluster": it keeps one Connection to the
// node it believes is the leader, reconnects when the connection breaks,
// follows `-NOTLEADER host:port` redirects and retries `-TRYAGAIN`, all within
// the caller's deadline (PROTOCOL.md "Error codes": a request that fails with
// NOTLEADER or TRYAGAIN changed nothing, so it is always safe to send again).
//
// What is NOT automatic: sending a command again after it may have reached the
// server (the connection broke after the send). Whether that is safe depends on
// the command, so the caller says so per call (CallOptions::resend_if_unsure)
// and is told when the outcome is unknown (CallOutcome::maybe_applied).
//
// Threads: one thread calls Call() at a time (the client library leases a
// Channel to one thread from its pool). Interrupt() may be called from any
// thread at any time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/connection.h"
#include "client/url.h"
#include "protocol/resp.h"
#include "tumbler/status.h"

namespace tumbler::client {

// The nodes of one cluster as the client knows them, and which one it believes
// leads. Shared by every Channel of a Client (a redirect learnt on one
// connection steers the next connect of all). Thread-safe.
class EndpointSet {
 public:
  // `seeds` must not be empty.
  explicit EndpointSet(std::vector<Endpoint> seeds);

  // The node to try next.
  Endpoint Current() const;
  // A node named by NOTLEADER: becomes current (added if unknown, bounded by
  // kEndpointsMax: past it, replaces the last learnt one).
  void SetLeader(const Endpoint& leader);
  // `failed` could not be reached: if it is current, move on to the next node.
  void MarkFailed(const Endpoint& failed);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::vector<Endpoint> endpoints_;
  size_t current_ = 0;
};

struct ChannelOptions {
  std::chrono::milliseconds connect_timeout{2000};  // one TCP connect attempt
  std::chrono::milliseconds reply_timeout{5000};    // one reply, unless the call says otherwise
};

struct CallOptions {
  // Give up after this (kTimeout, or the last transport error); nullopt: never
  // (only Interrupt() stops the call). Applies to connecting, redirects,
  // TRYAGAIN backoff and reading the reply.
  Deadline deadline;
  // Per attempt: how long to wait for the reply once the command is sent.
  // false: ChannelOptions::reply_timeout; true: no limit other than
  // `deadline` (a blocking LOCK ... WAIT).
  bool unbounded_reply = false;
  // Send the command again (after reconnecting) if the connection broke after
  // it may have reached the server. Only for commands whose repetition is
  // harmless (KEEPALIVE, INSPECT, INFO, ...).
  bool resend_if_unsure = false;
};

struct CallOutcome {
  // The reply, or why there is none. Error replies other than NOTLEADER and
  // TRYAGAIN (which the channel handles) become a Status with the wire code
  // and text (e.g. kNoSession). Transport failures: kUnavailable, kTimeout,
  // kProtocol. NOTLEADER/TRYAGAIN come back only when the deadline or the
  // redirect bound runs out.
  Result<protocol::Value> reply = Status(StatusCode::kUnavailable, "not sent");
  // True if the call failed but the command may nevertheless have been applied
  // (sent, then the connection broke before the reply). False whenever a
  // reply arrived.
  bool maybe_applied = false;
};

// A NOTLEADER error's leader address ("NOTLEADER 10.0.0.2:7420" ->
// 10.0.0.2:7420), or nullopt when none is named or it does not parse.
std::optional<Endpoint> ParseNotLeader(std::string_view error_text);

// A wire error reply ("NOSESSION session 7 does not exist") as a Status.
Status ErrorReplyToStatus(std::string_view error_text);

class Channel {
 public:
  // Redirects followed by one call before it gives up with kNotLeader.
  static constexpr int kRedirectsMax = 8;

  Channel(std::shared_ptr<EndpointSet> endpoints, ChannelOptions options);
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Sends `args` (a command and its arguments) and returns the reply; see
  // CallOutcome for the errors. Fails at once with kUnavailable after
  // Interrupt().
  CallOutcome Call(const std::vector<std::string_view>& args, const CallOptions& options);

  // Makes the current call (if any) and every later one fail promptly with
  // kUnavailable: closes the blocked socket and ends backoff sleeps. Permanent.
  // Any thread.
  void Interrupt();
  bool interrupted() const { return interrupted_.load(std::memory_order_acquire); }

  // For reuse from a pool: drops the connection if the peer closed it while
  // idle, so the next call reconnects before sending rather than after.
  void DropIfStale();

  // `hook` runs (on the calling thread, inside Call) each time the channel
  // connects again after its first connection: the client uses it to renew
  // its session at once. Set before the first Call.
  void SetReconnectHook(std::function<void()> hook) { reconnect_hook_ = std::move(hook); }

 private:
  Status EnsureConnected(const Deadline& deadline);
  // Sleeps until min(now + d, deadline) or Interrupt().
  void Sleep(Clock::duration d, const Deadline& deadline);

  std::shared_ptr<EndpointSet> endpoints_;
  ChannelOptions options_;
  Connection connection_;
  Clock::duration backoff_;
  bool connected_before_ = false;
  std::function<void()> reconnect_hook_;
  std::atomic<bool> interrupted_{false};
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
};

}  // namespace tumbler::client

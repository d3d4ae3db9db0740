#include "client/channel.h"

#include <algorithm>
#include <cassert>

namespace tumbler::client {
namespace {

constexpr Clock::duration kBackoffMin = std::chrono::milliseconds(10);
constexpr Clock::duration kBackoffMax = std::chrono::milliseconds(500);

std::string_view FirstWord(std::string_view text) {
  return text.substr(0, text.find(' '));
}

std::string_view AfterFirstWord(std::string_view text) {
  size_t space = text.find(' ');
  if (space == std::string_view::npos) return {};
  text.remove_prefix(space + 1);
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\r' || text.back() == '\n')) {
    text.remove_suffix(1);
  }
  return text;
}

bool Passed(const Deadline& deadline) {
  return deadline && Clock::now() >= *deadline;
}

}  // namespace

// --- EndpointSet ----------------------------------------------------------------

EndpointSet::EndpointSet(std::vector<Endpoint> seeds) : endpoints_(std::move(seeds)) {
  assert(!endpoints_.empty());
}

Endpoint EndpointSet::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return endpoints_[current_];
}

void EndpointSet::SetLeader(const Endpoint& leader) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find(endpoints_.begin(), endpoints_.end(), leader);
  if (it != endpoints_.end()) {
    current_ = static_cast<size_t>(it - endpoints_.begin());
    return;
  }
  if (endpoints_.size() < kEndpointsMax) {
    endpoints_.push_back(leader);
  } else {
    endpoints_.back() = leader;
  }
  current_ = endpoints_.size() - 1;
}

void EndpointSet::MarkFailed(const Endpoint& failed) {
  std::lock_guard<std::mutex> lock(mu_);
  if (endpoints_[current_] == failed) current_ = (current_ + 1) % endpoints_.size();
}

size_t EndpointSet::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return endpoints_.size();
}

// --- Errors on the wire ---------------------------------------------------------------

std::optional<Endpoint> ParseNotLeader(std::string_view error_text) {
  std::string_view address = AfterFirstWord(error_text);
  address = FirstWord(address);
  if (address.empty()) return std::nullopt;
  Result<Endpoint> endpoint = ParseHostPort(address);
  if (!endpoint.ok()) return std::nullopt;
  return std::move(endpoint).value();
}

Status ErrorReplyToStatus(std::string_view error_text) {
  std::string_view word = FirstWord(error_text);
  StatusCode code = StatusCodeFromWire(word);
  if (code == StatusCode::kErr && word != "ERR") {
    // An error word this client does not know: keep it in the text.
    return Status(StatusCode::kErr, std::string(error_text));
  }
  return Status(code, std::string(AfterFirstWord(error_text)));
}

// --- Channel --------------------------------------------------------------------

Channel::Channel(std::shared_ptr<EndpointSet> endpoints, ChannelOptions options)
    : endpoints_(std::move(endpoints)), options_(options), backoff_(kBackoffMin) {}

void Channel::Interrupt() {
  interrupted_.store(true);
  connection_.Shutdown();
  std::lock_guard<std::mutex> lock(sleep_mu_);
  sleep_cv_.notify_all();
}

void Channel::DropIfStale() {
  if (connection_.is_open() && connection_.LooksBroken()) connection_.Close();
}

void Channel::Sleep(Clock::duration d, const Deadline& deadline) {
  Clock::time_point until = Clock::now() + d;
  if (deadline && *deadline < until) until = *deadline;
  std::unique_lock<std::mutex> lock(sleep_mu_);
  sleep_cv_.wait_until(lock, until, [this] { return interrupted(); });
}

Status Channel::EnsureConnected(const Deadline& deadline) {
  if (connection_.is_open()) return Status::Ok();
  Endpoint endpoint = endpoints_->Current();
  Clock::time_point connect_deadline = Clock::now() + options_.connect_timeout;
  if (deadline && *deadline < connect_deadline) connect_deadline = *deadline;
  Status status = connection_.Open(endpoint, connect_deadline);
  if (status.ok() && interrupted()) {
    // Interrupt() may have run before the socket existed; see it now.
    connection_.Close();
    return Status(StatusCode::kUnavailable, "interrupted");
  }
  if (status.ok()) {
    if (connected_before_ && reconnect_hook_) reconnect_hook_();
    connected_before_ = true;
    return status;
  }
  endpoints_->MarkFailed(endpoint);
  Sleep(backoff_, deadline);
  backoff_ = std::min(backoff_ * 2, kBackoffMax);
  return status;
}

CallOutcome Channel::Call(const std::vector<std::string_view>& args, const CallOptions& options) {
  CallOutcome out;
  Status last(StatusCode::kTimeout, "deadline passed before the request could be sent");
  int redirects = 0;
  int broken = 0;  // connections that broke during this call
  while (true) {
    if (interrupted()) {
      connection_.Close();
      out.reply = Status(StatusCode::kUnavailable, "interrupted");
      return out;
    }
    if (Passed(options.deadline)) {
      out.reply = last;
      return out;
    }
    Status connected = EnsureConnected(options.deadline);
    if (!connected.ok()) {
      last = connected;
      continue;
    }
    Deadline reply_deadline = options.deadline;
    if (!options.unbounded_reply) {
      Clock::time_point bound = Clock::now() + options_.reply_timeout;
      if (!reply_deadline || bound < *reply_deadline) reply_deadline = bound;
    }
    bool sent = false;
    Endpoint endpoint = connection_.endpoint();
    Result<protocol::Value> reply = connection_.Call(args, reply_deadline, &sent);
    if (!reply.ok()) {
      // The connection is closed now; the next round reconnects.
      last = reply.status();
      if (sent) out.maybe_applied = true;
      if (sent && !options.resend_if_unsure) {
        out.reply = last;
        return out;
      }
      if (last.code() != StatusCode::kTimeout) endpoints_->MarkFailed(endpoint);
      // The first break is usually a connection that went stale while idle:
      // reconnect at once. A peer that keeps breaking them gets backoff.
      if (++broken > 1) {
        Sleep(backoff_, options.deadline);
        backoff_ = std::min(backoff_ * 2, kBackoffMax);
      }
      continue;
    }
    const protocol::Value& value = reply.value();
    if (value.IsError()) {
      std::string_view word = FirstWord(value.str);
      if (word == "NOTLEADER") {
        last = ErrorReplyToStatus(value.str);
        connection_.Close();
        std::optional<Endpoint> leader = ParseNotLeader(value.str);
        if (leader && ++redirects <= kRedirectsMax) {
          endpoints_->SetLeader(*leader);
          continue;
        }
        if (leader) {
          out.reply = last;
          return out;
        }
        // No leader known yet (an election is running): wait and try again.
        endpoints_->MarkFailed(endpoint);
        Sleep(backoff_, options.deadline);
        backoff_ = std::min(backoff_ * 2, kBackoffMax);
        continue;
      }
      if (word == "TRYAGAIN") {
        // This node cannot commit now (no leader it knows of, no quorum, not
        // serving yet): try the next node of the cluster after a backoff,
        // since another may lead (a single node is tried again).
        last = ErrorReplyToStatus(value.str);
        if (endpoints_->size() > 1) {
          connection_.Close();
          endpoints_->MarkFailed(endpoint);
        }
        Sleep(backoff_, options.deadline);
        backoff_ = std::min(backoff_ * 2, kBackoffMax);
        continue;
      }
      out.maybe_applied = false;
      out.reply = ErrorReplyToStatus(value.str);
      backoff_ = kBackoffMin;
      return out;
    }
    out.maybe_applied = false;
    out.reply = std::move(reply);
    backoff_ = kBackoffMin;
    return out;
  }
}

}  // namespace tumbler::client

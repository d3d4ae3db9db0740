// tumbler::Client: the public handle over a client::Backend (backend.h).
#include "tumbler/client.h"

#include <utility>

#include "client/backend.h"

namespace tumbler {

namespace {

Status EmptyClient() { return Status(StatusCode::kSessionLost, "empty (moved-from or closed) Client"); }

}  // namespace

Result<Client> Client::Connect(std::string_view url, ClientOptions options) {
  Result<std::shared_ptr<client::Backend>> made = client::MakeBackend(url, options);
  if (!made.ok()) return made.status();
  std::shared_ptr<client::Backend> state = std::move(made).value();
  if (Status status = state->Open(); !status.ok()) return status;
  Client client;
  client.state_ = state;
  // The thread shares the state, so that it may outlive this handle when the
  // handle is destroyed from the thread itself (in the session-lost callback).
  client.watchdog_ = std::thread([state] { state->RunWatchdog(); });
  return client;
}

Client::Client(Client&& other) noexcept
    : state_(std::move(other.state_)), watchdog_(std::move(other.watchdog_)) {}

Client& Client::operator=(Client&& other) noexcept {
  if (this != &other) {
    Close().IgnoreError();
    state_ = std::move(other.state_);
    watchdog_ = std::move(other.watchdog_);
  }
  return *this;
}

Client::~Client() { Close().IgnoreError(); }

Status Client::Close() {
  if (!state_) return Status::Ok();
  std::shared_ptr<client::Backend> state = std::move(state_);
  state->BeginClose();
  if (watchdog_.joinable()) {
    if (watchdog_.get_id() == std::this_thread::get_id()) {
      // Called from the session-lost callback: the thread ends by itself once
      // the callback returns (it holds its own reference to the state).
      watchdog_.detach();
    } else {
      watchdog_.join();
    }
  }
  return state->FinishClose();
}

Mutex Client::NewMutex(std::string name) const { return Mutex(state_, std::move(name)); }

SharedMutex Client::NewSharedMutex(std::string name) const {
  return SharedMutex(state_, std::move(name));
}

const BackendInfo& Client::backend() const { return state_ ? state_->info() : *FindBackend("tumbler"); }

uint64_t Client::SessionId() const { return state_ ? state_->session_id() : 0; }

std::chrono::steady_clock::time_point Client::SafeUntil() const {
  return state_ ? state_->safe_until() : std::chrono::steady_clock::time_point();
}

Status Client::SessionStatus() const { return state_ ? state_->SessionStatus() : EmptyClient(); }

void Client::OnSessionLost(std::function<void(const Status&)> callback) {
  if (state_) state_->SetLostCallback(std::move(callback));
}

}  // namespace tumbler

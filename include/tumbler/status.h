// Errors as values for every tumbler module: the server, the core state
// machine, the protocol codec and the client library share this one type.
//
// The first codes map one to one onto the wire protocol's error codes
// (../shared/PROTOCOL.md, "Error codes"); the rest are client-side conditions
// that never travel on the wire. Header-only, standard library only, so that
// src/core can use it and still depend on nothing else.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tumbler {

enum class StatusCode : uint8_t {
  kOk = 0,
  // Wire error codes.
  kErr,        // syntax, unknown command, arity, number out of range
  kNoSession,  // the session does not exist or has expired
  kNotHeld,    // UNLOCK by a holder that does not hold the lock
  kWrongMode,  // a mode the holder cannot move to
  kDeadlock,   // the wait would close a cycle in the wait-for graph
  kLimit,      // a bound was reached
  kNotLeader,  // this node is a follower (message: leader host:port or empty)
  kTryAgain,   // the cluster cannot commit right now
  kNoAuth,
  kWrongPass,
  kNoPerm,
  // Client-side only.
  kUnavailable,  // could not reach the server, or the connection broke
  kTimeout,      // a client-side deadline passed
  kProtocol,     // the peer sent something that is not valid RESP / not expected
  kUnsupported,  // the backend cannot provide this operation or property
  kSessionLost,  // the client's session expired or was closed
  kInvalidArgument,  // a caller passed a value the API does not accept
};

// The word that starts a RESP error for this code ("NOSESSION"). For client-side
// codes it is a descriptive word that a server never sends.
constexpr std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kErr: return "ERR";
    case StatusCode::kNoSession: return "NOSESSION";
    case StatusCode::kNotHeld: return "NOTHELD";
    case StatusCode::kWrongMode: return "WRONGMODE";
    case StatusCode::kDeadlock: return "DEADLOCK";
    case StatusCode::kLimit: return "LIMIT";
    case StatusCode::kNotLeader: return "NOTLEADER";
    case StatusCode::kTryAgain: return "TRYAGAIN";
    case StatusCode::kNoAuth: return "NOAUTH";
    case StatusCode::kWrongPass: return "WRONGPASS";
    case StatusCode::kNoPerm: return "NOPERM";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kTimeout: return "TIMEOUT";
    case StatusCode::kProtocol: return "PROTOCOL";
    case StatusCode::kUnsupported: return "UNSUPPORTED";
    case StatusCode::kSessionLost: return "SESSIONLOST";
    case StatusCode::kInvalidArgument: return "INVALIDARGUMENT";
  }
  return "ERR";
}

// Maps the first word of a RESP error back to a code. Unknown words map to kErr,
// as a Redis client treats any unknown error prefix as a generic error.
inline StatusCode StatusCodeFromWire(std::string_view word) {
  for (uint8_t i = static_cast<uint8_t>(StatusCode::kErr);
       i <= static_cast<uint8_t>(StatusCode::kNoPerm); ++i) {
    auto code = static_cast<StatusCode>(i);
    if (StatusCodeName(code) == word) return code;
  }
  return StatusCode::kErr;
}

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  // Human-readable text, without the code word.
  const std::string& message() const { return message_; }
  // "NOSESSION session 7 does not exist": the form a RESP error takes.
  std::string ToString() const {
    std::string out(StatusCodeName(code_));
    if (!message_.empty()) {
      out += ' ';
      out += message_;
    }
    return out;
  }
  // Marks a Status as deliberately ignored.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or the Status that says why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: must not be OK

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tumbler

// How the bench speaks to each kind of server: the endpoint URL, and the
// commands that open a client's context, take and release a lock, and close.
//
//   tumbler://host:port   SESSION OPEN ttl -> sid; LOCK name sid [WAIT ms];
//                         UNLOCK name sid; SESSION CLOSE sid (PROTOCOL.md)
//   redis://host:port     SCRIPT LOAD <compare-and-delete> -> sha;
//                         SET name token NX PX ttl; EVALSHA sha 1 name token
//
// Redis has no server-side wait: a blocking acquire is the usual client retry
// loop (SET NX, sleep, try again), which the load driver runs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reply_scanner.h"
#include "tumbler/status.h"

namespace tumbler::bench {

// kLibrary: any URL of the client library, driven through tumbler::Mutex
// (library_driver.h): every scheme but tumbler:// and redis://, or either of
// those written with a "lib:" prefix.
enum class Backend : uint8_t { kTumbler, kRedis, kLibrary };

struct Endpoint {
  Backend backend = Backend::kTumbler;
  std::string host;
  uint16_t port = 0;
  // tumbler:// with several nodes: all of them (host/port is then the
  // leader's, found before each round).
  std::vector<std::pair<std::string, uint16_t>> nodes;
  std::string url;    // as given
  std::string label;  // shown in reports; defaults to url
};

// Parses "tumbler://host:port[,host:port...]" or "redis://host:port" (port
// defaults 7420 / 6379), or any other scheme / a "lib:" prefix as kLibrary
// (checked by the client library when the run starts). Errors:
// kInvalidArgument naming what is wrong.
Result<Endpoint> ParseEndpoint(std::string_view url);

// Appends a RESP array of bulk strings.
void EncodeCommand(std::string* out, std::initializer_list<std::string_view> args);

// The compare-and-delete script: deletes KEYS[1] only if it holds ARGV[1].
inline constexpr std::string_view kRedisUnlockScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end";

// What a lock request's reply means.
enum class LockOutcome : uint8_t { kGranted, kBusy, kFailed };

// Per-connection command builder. After the setup reply is accepted, the
// lock and unlock commands for a name are encoded once and resent as bytes.
class Dialect {
 public:
  Dialect(Backend backend, uint32_t ttl_ms) : backend_(backend), ttl_ms_(ttl_ms) {}

  Backend backend() const { return backend_; }

  // The first request on a connection (SESSION OPEN / SCRIPT LOAD).
  void EncodeSetup(std::string* out) const;
  // Accepts its reply; keeps the session id / script sha. Errors: kProtocol.
  Status AcceptSetup(const ReplyView& reply);

  // `owner_token` tells holders apart on Redis (the SET value); tumbler uses
  // the session. `wait_ms` < 0 means a try-lock.
  void EncodeLock(std::string* out, std::string_view name, std::string_view owner_token,
                  int64_t wait_ms) const;
  void EncodeUnlock(std::string* out, std::string_view name,
                    std::string_view owner_token) const;
  // The last request on a connection, or nothing (returns false).
  bool EncodeTeardown(std::string* out) const;

  LockOutcome ClassifyLock(const ReplyView& reply) const;
  // OK when the lock was released by this holder.
  Status CheckUnlock(const ReplyView& reply) const;

  int64_t session_id() const { return session_id_; }

 private:
  Backend backend_;
  uint32_t ttl_ms_;
  int64_t session_id_ = 0;
  std::string session_text_;
  std::string script_sha_;
};

// A short description of a reply for error messages ("-ERR unknown command").
std::string DescribeReply(const ReplyView& reply);

}  // namespace tumbler::bench

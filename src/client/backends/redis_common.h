// What the redis:// and redlock:// backends share: the URL form of a set of
// Redis servers, a bounded pool of RESP connections to one server, Lua
// scripts run with EVALSHA (EVAL when the server has not cached them), and
// the TTL the keys get on the server.
//
// Redis commands and scripting: https://redis.io/commands/ (SET, EVALSHA,
// SCRIPT LOAD, PUBLISH, SUBSCRIBE). Connections speak RESP2, so a Lua table
// comes back as an array and a pub/sub message as ["message", channel, data].
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "client/connection.h"
#include "client/url.h"
#include "protocol/resp.h"
#include "tumbler/client.h"
#include "tumbler/status.h"

namespace tumbler::client {

inline constexpr uint16_t kRedisDefaultPort = 6379;
// SELECT accepts 0 .. (databases - 1); no deployment configures more.
inline constexpr int kRedisDbMax = 65535;
// Keys per script call (renewals are batched); Lua's stack and the request
// size stay small.
inline constexpr size_t kRedisKeysPerScriptMax = 256;

// One Redis server and how to log in to it.
struct RedisServer {
  Endpoint endpoint;
  int db = 0;
  std::string user;      // empty: AUTH with the password alone (requirepass)
  std::string password;  // empty: no AUTH
};

// Parses "<scheme>://[[user]:password@]host[:port][,host[:port]...][/db]"
// into one RedisServer per host (port 6379 when omitted; IPv6 in brackets).
// The login and db apply to every host. Errors: kInvalidArgument naming what
// is wrong (not this scheme, no host, a bad host:port, db not a number in
// 0..65535, fewer than hosts_min or more than hosts_max hosts, a host named
// twice).
Result<std::vector<RedisServer>> ParseRedisUrl(std::string_view url, std::string_view scheme,
                                               size_t hosts_min, size_t hosts_max);

// The key holding lock `name` and the names derived from it. The hash tag
// {name} keeps a lock's keys in one slot (Redis Cluster style).
std::string RedisLockKey(std::string_view name);
std::string RedisTokenKey(std::string_view name);
std::string RedisReleaseChannel(std::string_view name);

// The TTL set on the server for a client-side TTL. The client believes a key
// alive until (start of the request that set it) + ttl; a server whose clock
// runs up to 1% fast, plus 2 ms of timer granularity (the drift Redlock
// assumes), must not expire it earlier, so the server is given
// ceil((ttl + 2 ms) / 0.99).
std::chrono::milliseconds RedisServerTtl(std::chrono::milliseconds ttl);

// A bounded pool of connections to one Redis server: at most `leases_max`
// connections are lent at a time (one per call in flight); a borrower beyond
// that waits for one to come back. Idle connections are kept (never more
// than leases_max) and checked before reuse. Every connection is logged in
// (AUTH) and has its db SELECTed before its first command.
//
// Threads: all methods may be called from any thread; a Lease is used by one
// thread at a time.
class RedisPool {
 public:
  RedisPool(RedisServer server, size_t leases_max, std::chrono::milliseconds connect_timeout);
  ~RedisPool();
  RedisPool(const RedisPool&) = delete;
  RedisPool& operator=(const RedisPool&) = delete;

  // A borrowed connection; goes back to the pool when destroyed. Move-only.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    ~Lease();

    // Runs one command, connecting first if the connection is not open
    // (connect bounded by the pool's connect timeout and `deadline`).
    // Transport failures as Connection::Call; an error reply is a Value with
    // IsError(), not a failed Result.
    Result<protocol::Value> Call(const std::vector<std::string_view>& args, Deadline deadline);

   private:
    friend class RedisPool;
    Lease(RedisPool* pool, std::unique_ptr<Connection> connection)
        : pool_(pool), connection_(std::move(connection)) {}
    void Return();

    RedisPool* pool_ = nullptr;  // borrowed; the pool outlives its leases
    std::unique_ptr<Connection> connection_;
  };

  // Borrows a connection, waiting for a free one until `deadline` (nullopt:
  // no bound). Errors: kTimeout (every connection stayed busy), kUnavailable
  // (Interrupt() ran while waiting).
  Result<Lease> Borrow(Deadline deadline);

  // Borrows, runs one command and gives the connection back.
  Result<protocol::Value> Call(const std::vector<std::string_view>& args, Deadline borrow_deadline,
                               Deadline call_deadline);

  // Opens `connection` to the server, logs in and selects the db, all before
  // `deadline` (and within the connect timeout for the TCP connect). Errors:
  // kUnavailable, kTimeout, kWrongPass / kNoAuth (refused login), kErr.
  Status Connect(Connection* connection, Clock::time_point deadline);

  // A connection that is not the pool's (a pub/sub subscriber) but must be
  // cut by Interrupt() too. Untrack before destroying it.
  void Track(Connection* connection);
  void Untrack(Connection* connection);

  // Shuts down every lent and tracked connection, so that calls blocked on
  // them fail at once with kUnavailable, and wakes Borrow() waiters (they fail
  // with kUnavailable). The pool stays usable.
  void Interrupt();

  const RedisServer& server() const { return server_; }

 private:
  void Return(std::unique_ptr<Connection> connection);

  const RedisServer server_;
  const size_t leases_max_;
  const std::chrono::milliseconds connect_timeout_;

  std::mutex mu_;
  std::condition_variable returned_cv_;
  std::vector<std::unique_ptr<Connection>> idle_;  // size <= leases_max_ - lent_
  std::set<Connection*> in_use_;                   // lent and tracked connections
  size_t lent_ = 0;
  uint64_t interrupts_ = 0;
};

// A Lua script, run by its SHA1 digest (EVALSHA) once the server told it
// (Load), else by its text (EVAL). A server that lost its script cache
// (restart, SCRIPT FLUSH) answers EVALSHA with NOSCRIPT; the script is then
// sent again with EVAL, which caches it there.
class RedisScript {
 public:
  explicit RedisScript(std::string body) : body_(std::move(body)) {}

  // SCRIPT LOAD on `lease`'s server, remembering the digest. Errors: the
  // transport's, or the server's refusal as a Status.
  Status Load(RedisPool::Lease& lease, Deadline deadline);

  // Runs the script with `keys` and `args`. The Value may be an error reply
  // (a script error, WRONGTYPE, ...): the caller turns it into a Status.
  Result<protocol::Value> Run(RedisPool::Lease& lease, const std::vector<std::string>& keys,
                              const std::vector<std::string>& args, Deadline deadline);

 private:
  std::string Sha() const;

  const std::string body_;
  mutable std::mutex mu_;
  std::string sha_;  // empty until Load succeeded
};

// An error reply as a Status: its own code word when it has one of tumbler's
// (NOAUTH, WRONGPASS, NOPERM), else kErr with the whole text ("WRONGTYPE
// Operation against a key holding the wrong kind of value"). `what` says which
// request it answered.
Status RedisErrorStatus(const protocol::Value& reply, std::string_view what);

// "\"name\"" for messages.
std::string QuotedName(std::string_view name);

// A transport error prefixed with which server it came from.
Status WithServer(const Status& status, const RedisServer& server);

}  // namespace tumbler::client

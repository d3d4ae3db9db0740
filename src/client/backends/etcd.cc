// etcd:// — locks held in etcd v3, spoken to through etcd's JSON gRPC
// gateway (POST /v3/...; etcd_http.h), so that no gRPC stack is needed.
//
//   etcd://host[:port][,host[:port]...][/namespace]
//
// Port 2379 when omitted. Several hosts are members of one cluster: a call
// goes to the current one and moves to the next when a member cannot be
// reached (etcd forwards writes to its leader itself). Lock keys live under
// "<namespace>/" (default "tumbler/locks"; letters, digits and . _ - /).
//
// Session = one etcd lease. Open() grants it with TTL = session_ttl rounded
// up to whole seconds; etcd raises a TTL below its minimum (3/2 of the
// election timeout: 2 s with default timings) to that minimum, so a crashed
// holder's locks may outlive a short session_ttl by that much. safe-until
// still counts session_ttl from each renewal, which is never longer than the
// lease, so it stays a safe bound. The watchdog renews with
// /v3/lease/keepalive (a stream: one request, the first answer read); an
// answer without TTL means the lease is gone (kSessionLost). Close revokes
// the lease, which deletes every key held under it. The session id is the
// lease id.
//
// Acquire: the create-revision recipe (etcd's own concurrency.Mutex), done
// here rather than with the v3lock service's /v3/lock/lock because that
// call blocks in the server with no way to bound it, and try-lock and
// timed waits need one. Each acquisition puts its own key
//   <namespace>/<len(name)>:<name>/<lease hex>/<owner tag>/<seq hex>
// under the lease (a txn that puts only if the key does not exist yet, so a
// retried request cannot move it). The length prefix keeps lock "a" and lock
// "a/b" apart; the sequence number makes every acquisition's key distinct,
// so a release retried late never deletes a newer hold. The key's create
// revision fixes its place in the queue: the holder is the key with the
// lowest create revision. A waiter reads (in one range) its own key and the
// key created just before it; if there is none it holds the lock, else it
// watches that one predecessor's deletion (/v3/watch from the revision of the
// read onwards, so no deletion is missed) and reads again. So waiters are
// granted in create-revision (FIFO) order and a release wakes only its
// successor. A try-lock first reads whether any key exists and writes nothing
// when one does. A wait that times out, or fails, deletes its key; a delete
// that fails is retried by the watchdog (until then the key only delays
// others, and dies with the lease at the latest).
//
// Fencing token: the create revision of the holder's key. Grants go in
// create-revision order and keys created later have higher revisions, so the
// tokens of successive holders of one lock strictly increase.
//
// Options: session_ttl -> lease TTL (above); connect_timeout bounds each TCP
// connect; op_timeout bounds each request that does not wait for a lock (a
// lock wait gets its duration plus this for the requests around it);
// connections_max bounds the pooled HTTP connections, watches included (the
// watchdog has one of its own); session_name is written into the value of
// each lock key (with the client id and owner tag), for `etcdctl get`.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "client/backends/backends.h"
#include "client/backends/etcd_http.h"
#include "client/basic_backend.h"
#include "client/url.h"
#include "core/limits.h"

namespace tumbler::client {
namespace {

using etcd::HttpConnection;
using etcd::Json;
using std::chrono::milliseconds;

constexpr uint16_t kEtcdDefaultPort = 2379;
constexpr std::string_view kDefaultNamespace = "tumbler/locks";
constexpr size_t kNamespaceBytesMax = 256;
// Keys whose delete failed, kept for the watchdog to retry; past this the
// oldest is dropped (its key then ends with the lease).
constexpr size_t kOrphanKeysMax = 1024;
// Pause between rounds of retries over every endpoint.
constexpr Clock::duration kBackoffMin = milliseconds(20);
constexpr Clock::duration kBackoffMax = milliseconds(500);
// A renewal attempt gets at least this long (a TTL/3 of 33 ms would starve a
// loaded machine), and at most op_timeout.
constexpr Clock::duration kRenewAttemptMin = milliseconds(300);
// Messages read after the first keepalive answer to finish its stream (the
// gateway ends it once it has answered our one request).
constexpr int kKeepaliveTailMessagesMax = 4;
// gRPC status codes the gateway reports ("code" / "grpc_code").
constexpr int64_t kGrpcDeadlineExceeded = 4;
constexpr int64_t kGrpcNotFound = 5;
constexpr int64_t kGrpcPermissionDenied = 7;
constexpr int64_t kGrpcResourceExhausted = 8;
constexpr int64_t kGrpcUnavailable = 14;
constexpr int64_t kGrpcUnauthenticated = 16;

constexpr Capability kCapabilities[] = {
    {Property::kMutualExclusion, Support::kYes,
     "the holder is the key with the lowest create revision under the lock's prefix; etcd "
     "commits every key through Raft and reads are linearizable"},
    {Property::kCrashRelease, Support::kYes,
     "lock keys are attached to the client's lease and deleted when it expires, after "
     "session_ttl rounded up to whole seconds (at least etcd's minimum TTL, 2 s by default)"},
    {Property::kRenewal, Support::kYes,
     "the watchdog sends a lease keepalive every session_ttl / 3"},
    {Property::kBlocking, Support::kYes,
     "a waiter watches the deletion of the key just ahead of it (`/v3/watch`); no polling"},
    {Property::kTryLock, Support::kYes,
     "one read of the lock's prefix; a busy lock costs no write"},
    {Property::kReentrancy, Support::kYes,
     "nested holds are counted in the client; only the first lock and last unlock reach etcd"},
    {Property::kFairness, Support::kYes,
     "waiters are granted in the create-revision order of their keys; a waiter keeps its place "
     "across reconnects"},
    {Property::kFencing, Support::kYes,
     "the token is the create revision of the holder's key, which increases with every grant"},
    {Property::kSharedMode, Support::kNo,
     "not implemented: the create-revision recipe here is exclusive only"},
    {Property::kNoHerd, Support::kYes,
     "each waiter watches only its predecessor's key, so a release wakes one waiter"},
    {Property::kDeadlockDetection, Support::kNo,
     "etcd has no wait-for graph; a cycle of waiters waits until a timeout or lease expiry"},
    {Property::kHighAvailability, Support::kYes,
     "an etcd cluster (Raft) survives the loss of a minority; list several members in the URL "
     "and the client moves between them"},
    {Property::kDurability, Support::kYes,
     "etcd fsyncs its Raft log before it acknowledges a write, so a granted lock survives a "
     "restart"},
};

Status Invalid(std::string what) {
  return Status(StatusCode::kInvalidArgument, "etcd URL: " + std::move(what));
}

struct EtcdUrl {
  std::vector<Endpoint> endpoints;
  std::string key_namespace;
};

Result<Endpoint> ParseEtcdHost(std::string_view text) {
  std::string with_port(text);
  // ParseHostPort's default port is tumblerd's: add etcd's when none is given.
  bool bracketed = !text.empty() && text.front() == '[';
  if ((bracketed && text.back() == ']') ||
      (!bracketed && text.find(':') == std::string_view::npos)) {
    with_port += ":" + std::to_string(kEtcdDefaultPort);
  }
  Result<Endpoint> endpoint = ParseHostPort(with_port);
  if (!endpoint.ok()) return Invalid(endpoint.status().message());
  return endpoint;
}

Result<EtcdUrl> ParseEtcdUrl(std::string_view url) {
  constexpr std::string_view kScheme = "etcd://";
  if (url.size() < kScheme.size() ||
      !std::equal(kScheme.begin(), kScheme.end(), url.begin(),
                  [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); })) {
    return Invalid("expected etcd://host[:port][,host[:port]...][/namespace]: \"" +
                   std::string(url) + "\"");
  }
  std::string_view rest = url.substr(kScheme.size());
  if (rest.find_first_of("?#@") != std::string_view::npos) {
    return Invalid("user info, query and fragment are not supported: \"" + std::string(url) +
                   "\"");
  }
  EtcdUrl out;
  size_t slash = rest.find('/');
  std::string_view hosts = rest.substr(0, slash);
  std::string_view ns =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  while (!ns.empty() && ns.back() == '/') ns.remove_suffix(1);
  if (ns.empty()) ns = kDefaultNamespace;
  if (ns.size() > kNamespaceBytesMax) {
    return Invalid("the namespace is longer than " + std::to_string(kNamespaceBytesMax) +
                   " bytes");
  }
  for (char c : ns) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' &&
        c != '/') {
      return Invalid("the namespace may hold letters, digits and . _ - / only: \"" +
                     std::string(ns) + "\"");
    }
  }
  out.key_namespace = std::string(ns);
  if (hosts.empty()) return Invalid("no host in \"" + std::string(url) + "\"");
  while (true) {
    size_t comma = hosts.find(',');
    std::string_view one = hosts.substr(0, comma);
    if (one.empty()) return Invalid("an empty host in \"" + std::string(url) + "\"");
    Result<Endpoint> endpoint = ParseEtcdHost(one);
    if (!endpoint.ok()) return endpoint.status();
    out.endpoints.push_back(std::move(endpoint).value());
    if (out.endpoints.size() > kEndpointsMax) {
      return Invalid("more than " + std::to_string(kEndpointsMax) + " hosts");
    }
    if (comma == std::string_view::npos) break;
    hosts.remove_prefix(comma + 1);
  }
  return out;
}

std::string Hex(uint64_t v, int width) {
  char out[17];
  std::snprintf(out, sizeof out, "%0*llx", width, static_cast<unsigned long long>(v));
  return out;
}

// The key that sorts right after every key starting with `prefix` (etcd's
// range_end for a prefix). `prefix` ends with '/', so no carry is needed.
std::string PrefixEnd(std::string prefix) {
  prefix.back() = static_cast<char>(prefix.back() + 1);
  return prefix;
}

std::string B64(std::string_view bytes) { return etcd::JsonQuote(etcd::Base64Encode(bytes)); }
std::string Int(int64_t v) { return "\"" + std::to_string(v) + "\""; }

int64_t IntField(const Json& object, std::string_view name) {
  const Json* field = object.Find(name);
  if (field == nullptr) return 0;  // the gateway omits zero values
  return field->AsInt64().value_or(-1);
}

// A Status for a gRPC error the gateway reported.
Status StatusFromGrpc(int64_t code, const std::string& message) {
  std::string text = "etcd: " + message;
  switch (code) {
    case kGrpcNotFound:
      if (message.find("lease not found") != std::string::npos) {
        return Status(StatusCode::kSessionLost, "the etcd lease expired or was revoked (" +
                                                    message + ")");
      }
      return Status(StatusCode::kErr, text);
    case kGrpcUnavailable: return Status(StatusCode::kUnavailable, text);
    case kGrpcDeadlineExceeded: return Status(StatusCode::kTimeout, text);
    case kGrpcResourceExhausted: return Status(StatusCode::kLimit, text);
    case kGrpcUnauthenticated: return Status(StatusCode::kNoAuth, text);
    case kGrpcPermissionDenied: return Status(StatusCode::kNoPerm, text);
    default: return Status(StatusCode::kErr, text + " (gRPC code " + std::to_string(code) + ")");
  }
}

// The error of a gateway reply: {"error": "...", "code": N, "message": "..."}
// for a unary call, {"error": {"grpc_code": N, "message": "..."}} in a stream.
std::optional<Status> ErrorOf(const Json& reply) {
  const Json* error = reply.Find("error");
  if (error == nullptr) return std::nullopt;
  if (error->is_object()) {
    const Json* message = error->Find("message");
    return StatusFromGrpc(IntField(*error, "grpc_code"), message ? message->text() : "");
  }
  const Json* message = reply.Find("message");
  return StatusFromGrpc(IntField(reply, "code"), message ? message->text() : error->text());
}

// Transport-level trouble worth another try (on another member).
bool Retryable(const Status& status) {
  return status.code() == StatusCode::kUnavailable || status.code() == StatusCode::kTimeout;
}

class EtcdBackend final : public BasicBackend {
 public:
  EtcdBackend(EtcdUrl url, ClientOptions options)
      : BasicBackend(std::move(options)),
        endpoints_(std::move(url.endpoints)),
        namespace_(std::move(url.key_namespace)) {}

  ~EtcdBackend() override = default;

  const BackendInfo& info() const override { return EtcdBackendInfo(); }

  Status Open() override {
    Clock::time_point started = Clock::now();
    Clock::time_point deadline = started + options().op_timeout;
    int64_t ttl_s = std::max<int64_t>(
        1, std::chrono::ceil<std::chrono::seconds>(options().session_ttl).count());
    Result<Json> reply = Call("/v3/lease/grant", "{\"TTL\":" + Int(ttl_s) + "}", deadline,
                              /*idempotent=*/true, &watchdog_conn_);
    // A retried grant can leave a second lease behind: nothing is attached to
    // it and it expires by itself after its TTL.
    if (!reply.ok()) return reply.status();
    int64_t id = IntField(*reply, "ID");
    if (id <= 0) return Status(StatusCode::kProtocol, "etcd granted no lease id");
    lease_id_ = id;
    lease_hex_ = Hex(static_cast<uint64_t>(id), 16);
    SetSessionId(static_cast<uint64_t>(id));
    MarkRenewed(started);
    return Status::Ok();
  }

 protected:
  Result<std::optional<Grant>> AcquireRemote(const std::string& name, const std::string& owner,
                                             LockMode, Deadline deadline,
                                             const Grant*) override {
    const std::string prefix = LockPrefix(name);
    const bool try_once = deadline && *deadline <= Clock::now();
    if (try_once) {
      // Nothing is written for a lock that is visibly taken.
      Result<bool> busy = AnyKey(prefix);
      if (!busy.ok()) return busy.status();
      if (*busy) return std::optional<Grant>();
    }
    const std::string key = prefix + lease_hex_ + "/" + owner + "/" +
                            Hex(sequence_.fetch_add(1, std::memory_order_relaxed), 1);
    Result<int64_t> revision = CreateKey(key, owner);
    if (!revision.ok()) {
      // The txn may have been applied: the key must not stay behind.
      ForgetKey(key);
      return revision.status();
    }
    Result<bool> granted = WaitTurn(prefix, key, *revision, deadline);
    if (!granted.ok() || !*granted) {
      ForgetKey(key);
      if (!granted.ok()) return granted.status();
      return std::optional<Grant>();
    }
    return std::optional<Grant>(Grant{static_cast<uint64_t>(*revision), key});
  }

  Status ReleaseRemote(const std::string& name, const std::string&, LockMode,
                       const Grant& grant, uint32_t) override {
    int attempts = 0;
    Result<Json> reply = Call("/v3/kv/deleterange", "{\"key\":" + B64(grant.handle) + "}",
                              Clock::now() + options().op_timeout, /*idempotent=*/true,
                              /*own=*/nullptr, &attempts);
    if (!reply.ok()) return reply.status();
    if (IntField(*reply, "deleted") > 0 || attempts > 1) return Status::Ok();
    // Gone before we deleted it (and not by an earlier try of ours).
    return Status(StatusCode::kNotHeld, "the etcd key of \"" + name +
                                            "\" was already gone (its lease expired, or it "
                                            "was deleted by someone else)");
  }

  Status Renew(const std::vector<HeldLock>&) override {
    Clock::time_point now = Clock::now();
    Clock::duration budget = std::max<Clock::duration>(kRenewAttemptMin, RenewInterval());
    Clock::time_point deadline = now + std::min<Clock::duration>(budget, options().op_timeout);
    Status status = KeepAlive(deadline);
    if (status.ok()) DeleteOrphans(deadline);
    return status;
  }

  Status CloseRemote(const std::vector<HeldLock>&) override {
    // Revoking the lease deletes every key attached to it: all holds and
    // waits of this client at once.
    HttpConnection conn;
    Result<Json> reply = Call("/v3/lease/revoke", "{\"ID\":" + Int(lease_id_) + "}",
                              Clock::now() + options().op_timeout, /*idempotent=*/true, &conn);
    if (!reply.ok() && reply.status().code() == StatusCode::kSessionLost) return Status::Ok();
    return reply.status();
  }

  void InterruptAll() override {
    std::lock_guard lock(pool_mu_);
    for (HttpConnection* conn : busy_) conn->Shutdown();
    pool_cv_.notify_all();
  }

 private:
  // A pooled connection checked out by one call; checked in when destroyed.
  class PooledConnection {
   public:
    PooledConnection(EtcdBackend* backend, std::unique_ptr<HttpConnection> conn)
        : backend_(backend), conn_(std::move(conn)) {}
    ~PooledConnection() { backend_->CheckIn(std::move(conn_)); }
    PooledConnection(const PooledConnection&) = delete;
    PooledConnection& operator=(const PooledConnection&) = delete;
    HttpConnection* get() const { return conn_.get(); }

   private:
    EtcdBackend* backend_;
    std::unique_ptr<HttpConnection> conn_;
  };

  std::string LockPrefix(const std::string& name) const {
    return namespace_ + "/" + std::to_string(name.size()) + ":" + name + "/";
  }

  // --- Connections --------------------------------------------------------------

  // Takes a connection from the pool (or a new, unopened one), waiting while
  // connections_max are in use, until `deadline`. kSessionLost once the
  // backend has ended: InterruptAll shuts down only what is checked out.
  Result<std::unique_ptr<PooledConnection>> CheckOut(Deadline deadline) {
    std::unique_lock lock(pool_mu_);
    while (true) {
      if (Ended()) return Status(StatusCode::kSessionLost, "the etcd session ended");
      if (busy_.size() < options().connections_max) break;
      if (!deadline) {
        pool_cv_.wait(lock);
      } else if (pool_cv_.wait_until(lock, *deadline) == std::cv_status::timeout) {
        return Status(StatusCode::kTimeout, "all " + std::to_string(options().connections_max) +
                                                " etcd connections stayed busy");
      }
    }
    std::unique_ptr<HttpConnection> conn;
    if (!idle_.empty()) {
      conn = std::move(idle_.back());
      idle_.pop_back();
    } else {
      conn = std::make_unique<HttpConnection>();
    }
    busy_.insert(conn.get());
    return std::make_unique<PooledConnection>(this, std::move(conn));
  }

  void CheckIn(std::unique_ptr<HttpConnection> conn) {
    std::lock_guard lock(pool_mu_);
    busy_.erase(conn.get());
    if (conn->Reusable() && !Ended() && idle_.size() < options().connections_max) {
      idle_.push_back(std::move(conn));
    }
    pool_cv_.notify_one();
  }

  // Makes `conn` usable: reuses it if it is open and idle, else connects to
  // the current member. A connection made on a pooled object is checked
  // against Ended() after its socket exists, so that an InterruptAll that
  // found no socket to shut down cannot be missed (it set Ended() first).
  Status Connect(HttpConnection* conn, Clock::time_point deadline, bool pooled) {
    if (conn->Reusable() && !conn->LooksBroken()) return Status::Ok();
    conn->Close();
    const Endpoint& endpoint = endpoints_[current_.load(std::memory_order_relaxed) %
                                          endpoints_.size()];
    Clock::time_point until =
        std::min(deadline, Clock::now() + options().connect_timeout);
    Status status = conn->Open(endpoint, until);
    if (status.ok() && pooled && Ended()) {
      conn->Close();
      return Status(StatusCode::kSessionLost, "the etcd session ended");
    }
    return status;
  }

  // The member `conn` was talking to failed: later connections go to the
  // next one.
  void MoveOn(const HttpConnection& conn) {
    size_t i = current_.load(std::memory_order_relaxed);
    if (endpoints_[i % endpoints_.size()] == conn.endpoint()) {
      current_.compare_exchange_strong(i, i + 1, std::memory_order_relaxed);
    }
  }

  // Sleeps until `until`; for `interruptible` callers (those on pooled
  // connections) also until the backend ends. The watchdog's and Close's
  // own requests are not cut short: they run when Ended() may already hold.
  void Pause(Clock::time_point until, bool interruptible) {
    std::unique_lock lock(pool_mu_);
    pool_cv_.wait_until(lock, until, [&] { return interruptible && Ended(); });
  }

  // One unary request on an open connection: the reply object or the error.
  Result<Json> Exchange(HttpConnection* conn, std::string_view path, std::string_view body,
                        Clock::time_point deadline, bool* sent) {
    Result<etcd::HttpHead> head = conn->Post(path, body, deadline, sent);
    if (!head.ok()) return head.status();
    Result<std::string> text = conn->ReadBody(deadline);
    if (!text.ok()) return text.status();
    Result<Json> reply = etcd::ParseJson(*text);
    if (!reply.ok() || !reply->is_object()) {
      conn->Close();
      return Status(StatusCode::kProtocol, "etcd answered " + std::string(path) + " with HTTP " +
                                               std::to_string(head->status) +
                                               " and no JSON object");
    }
    if (std::optional<Status> error = ErrorOf(*reply)) return *error;
    if (head->status != 200) {
      return Status(StatusCode::kErr, "etcd answered " + std::string(path) + " with HTTP " +
                                          std::to_string(head->status));
    }
    return reply;
  }

  // A unary request, on `own` (a connection of the caller's) or a pooled
  // connection. Transport failures move to the next member and try again
  // until `deadline` (a request that may have reached etcd only if
  // `idempotent`). *attempts (may be null) counts the requests sent.
  Result<Json> Call(std::string_view path, const std::string& body, Clock::time_point deadline,
                    bool idempotent, HttpConnection* own, int* attempts = nullptr) {
    Clock::duration backoff = kBackoffMin;
    Status last(StatusCode::kTimeout, "etcd did not answer " + std::string(path) + " in time");
    for (size_t round = 1;; ++round) {
      std::unique_ptr<PooledConnection> pooled;
      HttpConnection* conn = own;
      if (conn == nullptr) {
        Result<std::unique_ptr<PooledConnection>> taken = CheckOut(deadline);
        if (!taken.ok()) return taken.status();
        pooled = std::move(taken).value();
        conn = pooled->get();
      }
      bool sent = false;
      Status status = Connect(conn, deadline, own == nullptr);
      if (status.ok()) {
        Result<Json> reply = Exchange(conn, path, body, deadline, &sent);
        if (sent && attempts != nullptr) ++*attempts;
        if (reply.ok() || !Retryable(reply.status())) return reply;
        status = reply.status();
      }
      if (status.code() == StatusCode::kSessionLost) return status;
      last = status;
      // Unreachable, or reachable but unable to serve (no leader, a request
      // timed out in Raft): the next try goes to the next member.
      MoveOn(*conn);
      conn->Close();
      if (sent && !idempotent) return last;
      pooled.reset();
      if (Clock::now() >= deadline) return last;
      if (round % endpoints_.size() == 0) {
        Pause(std::min(deadline, Clock::now() + backoff), own == nullptr);
        backoff = std::min(backoff * 2, kBackoffMax);
        if (own == nullptr && Ended()) {
          return Status(StatusCode::kSessionLost, "the etcd session ended");
        }
      }
    }
  }

  // --- The recipe ---------------------------------------------------------------

  // Does any key exist under `prefix`?
  Result<bool> AnyKey(const std::string& prefix) {
    std::string body = "{\"key\":" + B64(prefix) + ",\"range_end\":" + B64(PrefixEnd(prefix)) +
                       ",\"limit\":\"1\",\"count_only\":true}";
    Result<Json> reply = Call("/v3/kv/range", body, Clock::now() + options().op_timeout,
                              /*idempotent=*/true, nullptr);
    if (!reply.ok()) return reply.status();
    return IntField(*reply, "count") > 0;
  }

  // Puts `key` under the lease unless it exists; its create revision.
  Result<int64_t> CreateKey(const std::string& key, const std::string& owner) {
    std::string value = "client " + client_id() + " owner " + owner;
    if (!options().session_name.empty()) value += " session " + options().session_name;
    std::string k = B64(key);
    std::string body = "{\"compare\":[{\"target\":\"CREATE\",\"key\":" + k +
                       ",\"result\":\"EQUAL\",\"create_revision\":\"0\"}],"
                       "\"success\":[{\"request_put\":{\"key\":" + k + ",\"value\":" + B64(value) +
                       ",\"lease\":" + Int(lease_id_) + "}}],"
                       "\"failure\":[{\"request_range\":{\"key\":" + k + "}}]}";
    Result<Json> reply = Call("/v3/kv/txn", body, Clock::now() + options().op_timeout,
                              /*idempotent=*/true, nullptr);
    if (!reply.ok()) return reply.status();
    const Json* header = reply->Find("header");
    const Json* succeeded = reply->Find("succeeded");
    if (succeeded != nullptr && succeeded->boolean()) {
      int64_t revision = header ? IntField(*header, "revision") : 0;
      if (revision <= 0) return Status(StatusCode::kProtocol, "etcd txn reply without a revision");
      return revision;
    }
    // An earlier try of this same txn created the key: take its revision.
    const Json* responses = reply->Find("responses");
    if (responses != nullptr && !responses->items().empty()) {
      const Json* range = responses->items()[0].Find("response_range");
      const Json* kvs = range ? range->Find("kvs") : nullptr;
      if (kvs != nullptr && !kvs->items().empty()) {
        int64_t revision = IntField(kvs->items()[0], "create_revision");
        if (revision > 0) return revision;
      }
    }
    return Status(StatusCode::kProtocol, "etcd txn neither created nor found the lock key");
  }

  // Where `key` (created at `revision`) stands: the key just before it, or
  // nullopt if it is first (it holds the lock). *read_revision is the store
  // revision of the read, from which a watch misses nothing.
  Result<std::optional<std::string>> Predecessor(const std::string& prefix,
                                                 const std::string& key, int64_t revision,
                                                 int64_t* read_revision) {
    std::string body = "{\"key\":" + B64(prefix) + ",\"range_end\":" + B64(PrefixEnd(prefix)) +
                       ",\"limit\":\"2\",\"sort_order\":\"DESCEND\",\"sort_target\":\"CREATE\","
                       "\"max_create_revision\":" + Int(revision) + ",\"keys_only\":true}";
    Result<Json> reply = Call("/v3/kv/range", body, Clock::now() + options().op_timeout,
                              /*idempotent=*/true, nullptr);
    if (!reply.ok()) return reply.status();
    const Json* header = reply->Find("header");
    *read_revision = header ? IntField(*header, "revision") : 0;
    if (*read_revision <= 0) return Status(StatusCode::kProtocol, "etcd range without a revision");
    const Json* kvs = reply->Find("kvs");
    static const std::vector<Json> kNone;
    const std::vector<Json>& items = kvs ? kvs->items() : kNone;
    std::optional<std::string> mine;
    if (!items.empty()) {
      const Json* k = items[0].Find("key");
      if (k != nullptr) mine = etcd::Base64Decode(k->text());
    }
    if (!mine || *mine != key) {
      return Status(StatusCode::kSessionLost,
                    "the etcd lock key vanished while waiting (lease expired or key deleted)");
    }
    if (items.size() < 2) return std::optional<std::string>();
    const Json* k = items[1].Find("key");
    std::optional<std::string> before = k ? etcd::Base64Decode(k->text()) : std::nullopt;
    if (!before) return Status(StatusCode::kProtocol, "etcd range returned a bad key");
    return before;
  }

  // Waits until `key` is first under `prefix`: true, or false when `deadline`
  // passes first. Transport failures are retried (the key keeps its place)
  // until the deadline, or, waiting forever, until the session ends.
  Result<bool> WaitTurn(const std::string& prefix, const std::string& key, int64_t revision,
                        Deadline deadline) {
    Clock::duration backoff = kBackoffMin;
    while (true) {
      if (Ended()) return Status(StatusCode::kSessionLost, "the etcd session ended");
      int64_t read_revision = 0;
      Result<std::optional<std::string>> before =
          Predecessor(prefix, key, revision, &read_revision);
      Status failure;
      if (before.ok()) {
        if (!before->has_value()) return true;
        if (deadline && Clock::now() >= *deadline) return false;
        Result<bool> deleted = WatchDeletion(**before, read_revision + 1, deadline);
        if (deleted.ok() && *deleted) {
          backoff = kBackoffMin;
          continue;  // look again: the new predecessor, or none
        }
        if (deleted.ok()) {
          // The deadline passed, or etcd cancelled the watch (compaction):
          // look again after a pause, so that repeated cancels cannot spin.
          if (deadline && Clock::now() >= *deadline) return false;
          Clock::time_point resume = Clock::now() + backoff;
          Pause(deadline ? std::min(*deadline, resume) : resume, /*interruptible=*/true);
          backoff = std::min(backoff * 2, kBackoffMax);
          continue;
        }
        failure = deleted.status();
      } else {
        failure = before.status();
      }
      if (!Retryable(failure)) return failure;
      if (deadline && Clock::now() >= *deadline) return failure;
      Clock::time_point resume = Clock::now() + backoff;
      Pause(deadline ? std::min(*deadline, resume) : resume, /*interruptible=*/true);
      backoff = std::min(backoff * 2, kBackoffMax);
    }
  }

  // Watches `key` from `start_revision` until it is deleted (true), the
  // watch is cancelled by etcd (false: look again), or `deadline` passes
  // (false). The watch has a connection of its own, closed afterwards
  // (closing it is what cancels the watch on the gateway).
  Result<bool> WatchDeletion(const std::string& key, int64_t start_revision, Deadline deadline) {
    Clock::time_point setup_deadline = Clock::now() + options().op_timeout;
    Result<std::unique_ptr<PooledConnection>> taken =
        CheckOut(deadline ? std::max(*deadline, setup_deadline) : deadline);
    if (!taken.ok()) return taken.status();
    HttpConnection* conn = (*taken)->get();
    struct CloseOnExit {
      HttpConnection* conn;
      ~CloseOnExit() { conn->Close(); }
    } close_on_exit{conn};
    conn->Close();  // a watch never shares a pooled connection
    if (Status s = Connect(conn, setup_deadline, /*pooled=*/true); !s.ok()) {
      MoveOn(*conn);
      return s;
    }
    std::string body = "{\"create_request\":{\"key\":" + B64(key) +
                       ",\"start_revision\":" + Int(start_revision) +
                       ",\"filters\":[\"NOPUT\"]}}";
    // gRPC metadata hasleader=true (the gateway forwards Grpc-Metadata-*
    // headers): a member cut off from its leader ends the watch instead of
    // leaving it silent, so the wait moves to another member.
    Result<etcd::HttpHead> head = conn->Post("/v3/watch", body, setup_deadline, nullptr,
                                             "Grpc-Metadata-hasleader: true\r\n");
    if (!head.ok()) {
      MoveOn(*conn);
      return head.status();
    }
    if (head->status != 200) {
      Result<std::string> text = conn->ReadBody(setup_deadline);
      Result<Json> reply = etcd::ParseJson(text.ok() ? *text : "");
      if (reply.ok()) {
        if (std::optional<Status> error = ErrorOf(*reply)) return *error;
      }
      return Status(StatusCode::kErr, "etcd answered /v3/watch with HTTP " +
                                          std::to_string(head->status));
    }
    // First the "created" answer (bounded by the setup deadline), then events
    // (bounded by the caller's deadline).
    bool created = false;
    while (true) {
      Deadline wait = created ? deadline : Deadline(setup_deadline);
      Result<std::optional<std::string>> message = conn->NextMessage(wait);
      if (!message.ok()) {
        if (Ended()) return Status(StatusCode::kSessionLost, "the etcd session ended");
        if (created && message.status().code() == StatusCode::kTimeout && deadline &&
            Clock::now() >= *deadline) {
          return false;
        }
        MoveOn(*conn);
        return message.status();
      }
      if (!message->has_value()) {
        return Status(StatusCode::kUnavailable, "etcd ended the watch stream");
      }
      Result<Json> reply = etcd::ParseJson(**message);
      if (!reply.ok()) return reply.status();
      if (std::optional<Status> error = ErrorOf(*reply)) return *error;
      const Json* result = reply->Find("result");
      if (result == nullptr) return Status(StatusCode::kProtocol, "etcd watch answer without result");
      const Json* canceled = result->Find("canceled");
      if (canceled != nullptr && canceled->boolean()) return false;  // e.g. compacted
      const Json* events = result->Find("events");
      if (events != nullptr && !events->items().empty()) return true;  // NOPUT: a delete
      const Json* created_field = result->Find("created");
      if (created_field != nullptr && created_field->boolean()) created = true;
    }
  }

  // Deletes `key` (a wait that ended without the lock, or a create whose
  // outcome is unknown); failing that, leaves it to the watchdog.
  void ForgetKey(const std::string& key) {
    if (Ended()) return;  // the lease (revoked or expired) takes the key
    Result<Json> reply = Call("/v3/kv/deleterange", "{\"key\":" + B64(key) + "}",
                              Clock::now() + options().op_timeout, /*idempotent=*/true, nullptr);
    if (reply.ok() || reply.status().code() == StatusCode::kSessionLost) return;
    std::lock_guard lock(orphans_mu_);
    if (orphans_.size() >= kOrphanKeysMax) orphans_.erase(orphans_.begin());
    orphans_.push_back(key);
  }

  // Watchdog: retries the deletes ForgetKey could not do.
  void DeleteOrphans(Clock::time_point deadline) {
    std::vector<std::string> keys;
    {
      std::lock_guard lock(orphans_mu_);
      keys.swap(orphans_);
    }
    size_t done = 0;
    for (; done < keys.size() && Clock::now() < deadline; ++done) {
      Result<Json> reply = Call("/v3/kv/deleterange", "{\"key\":" + B64(keys[done]) + "}",
                                deadline, /*idempotent=*/true, &watchdog_conn_);
      if (!reply.ok()) break;
    }
    std::lock_guard lock(orphans_mu_);
    for (size_t i = done; i < keys.size() && orphans_.size() < kOrphanKeysMax; ++i) {
      orphans_.push_back(std::move(keys[i]));
    }
  }

  // One lease keepalive, on the watchdog's connection, moving over the
  // members once until `deadline`.
  Status KeepAlive(Clock::time_point deadline) {
    Status last(StatusCode::kTimeout, "etcd did not answer the lease keepalive in time");
    for (size_t tries = 0; tries < endpoints_.size() && Clock::now() < deadline; ++tries) {
      Status status = KeepAliveOnce(deadline);
      if (status.ok() || !Retryable(status)) return status;
      last = status;
      MoveOn(watchdog_conn_);
      watchdog_conn_.Close();
    }
    return last;
  }

  Status KeepAliveOnce(Clock::time_point deadline) {
    HttpConnection* conn = &watchdog_conn_;
    if (Status s = Connect(conn, deadline, /*pooled=*/false); !s.ok()) return s;
    Result<etcd::HttpHead> head =
        conn->Post("/v3/lease/keepalive", "{\"ID\":" + Int(lease_id_) + "}", deadline, nullptr);
    if (!head.ok()) return head.status();
    Result<std::optional<std::string>> message = conn->NextMessage(deadline);
    if (!message.ok()) return message.status();
    if (!message->has_value()) {
      conn->Close();
      return Status(StatusCode::kUnavailable, "etcd ended the keepalive stream without an answer");
    }
    Result<Json> reply = etcd::ParseJson(**message);
    if (!reply.ok()) {
      conn->Close();
      return reply.status();
    }
    // Finish the stream so the connection can carry the next keepalive.
    for (int i = 0; i < kKeepaliveTailMessagesMax; ++i) {
      Result<std::optional<std::string>> tail = conn->NextMessage(deadline);
      if (!tail.ok() || !tail->has_value()) break;
    }
    if (!conn->Reusable()) conn->Close();
    if (std::optional<Status> error = ErrorOf(*reply)) return *error;
    const Json* result = reply->Find("result");
    if (result == nullptr) return Status(StatusCode::kProtocol, "etcd keepalive without result");
    if (IntField(*result, "TTL") <= 0) {
      return Status(StatusCode::kSessionLost,
                    "the etcd lease " + lease_hex_ + " expired or was revoked");
    }
    return Status::Ok();
  }

  const std::vector<Endpoint> endpoints_;
  const std::string namespace_;
  // Set by Open(), before any other thread uses the backend.
  int64_t lease_id_ = 0;
  std::string lease_hex_;
  std::atomic<uint64_t> sequence_{0};
  std::atomic<size_t> current_{0};  // index into endpoints_ (mod size)
  // The watchdog's own connection (Open, Renew), so renewals never wait
  // behind lock waits for a pooled one.
  HttpConnection watchdog_conn_;

  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::vector<std::unique_ptr<HttpConnection>> idle_;
  std::set<HttpConnection*> busy_;  // checked out; InterruptAll shuts them down

  std::mutex orphans_mu_;
  std::vector<std::string> orphans_;
};

}  // namespace

const BackendInfo& EtcdBackendInfo() {
  static const BackendInfo info{"etcd", "etcd v3",
                                "etcd://host:2379[,host:port...][/namespace]", kCapabilities};
  return info;
}

Result<std::shared_ptr<Backend>> MakeEtcdBackend(std::string_view url,
                                                 const ClientOptions& options) {
  Result<EtcdUrl> parsed = ParseEtcdUrl(url);
  if (!parsed.ok()) return parsed.status();
  return std::shared_ptr<Backend>(
      std::make_shared<EtcdBackend>(std::move(parsed).value(), options));
}

}  // namespace tumbler::client

#include "client/backends/redis_common.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace tumbler::client {
namespace {

using std::chrono::milliseconds;

Status Invalid(std::string_view what, std::string_view url) {
  return Status(StatusCode::kInvalidArgument,
                std::string(what) + ": \"" + std::string(url) + "\"");
}

// Whether "host[:port]" / "[v6][:port]" names a port (ParseHostPort would
// default it to tumbler's own port, not Redis').
bool HasPort(std::string_view text) {
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    return close != std::string_view::npos && close + 1 < text.size();
  }
  return text.find(':') != std::string_view::npos;
}

Status ReplyStatus(const protocol::Value& reply, std::string_view what) {
  if (reply.IsError()) return RedisErrorStatus(reply, what);
  return Status::Ok();
}

}  // namespace

Result<std::vector<RedisServer>> ParseRedisUrl(std::string_view url, std::string_view scheme,
                                               size_t hosts_min, size_t hosts_max) {
  std::string prefix = std::string(scheme) + "://";
  if (url.size() < prefix.size() ||
      !std::equal(prefix.begin(), prefix.end(), url.begin(), [](char a, char b) {
        return a == std::tolower(static_cast<unsigned char>(b));
      })) {
    return Invalid("expected a " + prefix + " URL", url);
  }
  std::string_view rest = url.substr(prefix.size());
  std::string user, password;
  // The login, if any, ends at the last '@' (a password may contain '@').
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view login = rest.substr(0, at);
    rest = rest.substr(at + 1);
    size_t colon = login.find(':');
    if (colon == std::string_view::npos) {
      return Invalid("the login before '@' must be user:password or :password", url);
    }
    user.assign(login.substr(0, colon));
    password.assign(login.substr(colon + 1));
    if (password.empty()) return Invalid("empty password before '@'", url);
  }
  int db = 0;
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view db_text = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db_text.empty()) {
      auto [end, ec] = std::from_chars(db_text.data(), db_text.data() + db_text.size(), db);
      if (ec != std::errc() || end != db_text.data() + db_text.size() || db < 0 ||
          db > kRedisDbMax) {
        return Invalid("the db after '/' must be a number in 0.." + std::to_string(kRedisDbMax),
                       url);
      }
    }
  }
  if (rest.empty()) return Invalid("no host in the URL", url);
  std::vector<RedisServer> servers;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view one = rest.substr(0, comma);
    if (servers.size() >= hosts_max) {
      return Invalid(std::string(scheme) + ":// takes at most " + std::to_string(hosts_max) +
                         (hosts_max == 1 ? " host" : " hosts"),
                     url);
    }
    Result<Endpoint> endpoint = ParseHostPort(one);
    if (!endpoint.ok()) {
      return Status(StatusCode::kInvalidArgument,
                    endpoint.status().message() + " in \"" + std::string(url) + "\"");
    }
    if (!HasPort(one)) endpoint->port = kRedisDefaultPort;
    for (const RedisServer& s : servers) {
      if (s.endpoint == *endpoint) {
        return Invalid("the host " + endpoint->ToString() + " is named twice", url);
      }
    }
    servers.push_back(RedisServer{std::move(endpoint).value(), db, user, password});
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (servers.size() < hosts_min) {
    return Invalid(std::string(scheme) + ":// needs at least " + std::to_string(hosts_min) +
                       " hosts",
                   url);
  }
  return servers;
}

std::string RedisLockKey(std::string_view name) {
  std::string key = "tumbler:{";
  key += name;
  key += '}';
  return key;
}

std::string RedisTokenKey(std::string_view name) { return RedisLockKey(name) + ":token"; }

std::string RedisReleaseChannel(std::string_view name) {
  return RedisLockKey(name) + ":released";
}

milliseconds RedisServerTtl(milliseconds ttl) {
  // ceil((ttl + 2) * 100 / 99) in integer arithmetic.
  int64_t ms = (ttl.count() + 2) * 100;
  return milliseconds((ms + 98) / 99);
}

Status RedisErrorStatus(const protocol::Value& reply, std::string_view what) {
  Status status = reply.ToStatus();
  return Status(status.code(), std::string(what) + ": " + status.ToString());
}

std::string QuotedName(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 2);
  out += '"';
  out += name;
  out += '"';
  return out;
}

Status WithServer(const Status& status, const RedisServer& server) {
  if (status.ok()) return status;
  const std::string& message = status.message();
  std::string where = server.endpoint.ToString();
  // Connection's messages usually start with the endpoint already.
  if (message.rfind(where, 0) == 0) return status;
  return Status(status.code(), where + ": " + message);
}

// --- RedisPool -------------------------------------------------------------------

RedisPool::RedisPool(RedisServer server, size_t leases_max, milliseconds connect_timeout)
    : server_(std::move(server)),
      leases_max_(std::max<size_t>(1, leases_max)),
      connect_timeout_(connect_timeout) {}

RedisPool::~RedisPool() = default;

RedisPool::Lease::Lease(Lease&& other) noexcept
    : pool_(other.pool_), connection_(std::move(other.connection_)) {
  other.pool_ = nullptr;
}

RedisPool::Lease& RedisPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Return();
    pool_ = other.pool_;
    connection_ = std::move(other.connection_);
    other.pool_ = nullptr;
  }
  return *this;
}

RedisPool::Lease::~Lease() { Return(); }

void RedisPool::Lease::Return() {
  if (pool_ != nullptr && connection_) pool_->Return(std::move(connection_));
  pool_ = nullptr;
}

Result<protocol::Value> RedisPool::Lease::Call(const std::vector<std::string_view>& args,
                                               Deadline deadline) {
  if (!connection_->is_open()) {
    Clock::time_point connect_deadline = Clock::now() + pool_->connect_timeout_;
    if (deadline) connect_deadline = std::min(connect_deadline, *deadline);
    if (Status status = pool_->Connect(connection_.get(), connect_deadline); !status.ok()) {
      return status;
    }
  }
  Result<protocol::Value> reply = connection_->Call(args, deadline, nullptr);
  if (!reply.ok()) return WithServer(reply.status(), pool_->server_);
  return reply;
}

Result<RedisPool::Lease> RedisPool::Borrow(Deadline deadline) {
  std::unique_lock lock(mu_);
  const uint64_t interrupts_at_start = interrupts_;
  while (lent_ >= leases_max_) {
    if (interrupts_ != interrupts_at_start) {
      return Status(StatusCode::kUnavailable, "interrupted while waiting for a connection");
    }
    if (!deadline) {
      returned_cv_.wait(lock);
    } else if (returned_cv_.wait_until(lock, *deadline) == std::cv_status::timeout &&
               lent_ >= leases_max_) {
      return Status(StatusCode::kTimeout,
                    "all " + std::to_string(leases_max_) + " connections to " +
                        server_.endpoint.ToString() + " stayed busy");
    }
  }
  std::unique_ptr<Connection> connection;
  if (!idle_.empty()) {
    connection = std::move(idle_.back());
    idle_.pop_back();
  } else {
    connection = std::make_unique<Connection>();
  }
  ++lent_;
  in_use_.insert(connection.get());
  lock.unlock();
  // A connection the server closed while it sat idle (timeout, restart) is
  // reopened by the first Call instead of failing it.
  if (connection->is_open() && connection->LooksBroken()) connection->Close();
  return Lease(this, std::move(connection));
}

void RedisPool::Return(std::unique_ptr<Connection> connection) {
  std::lock_guard lock(mu_);
  in_use_.erase(connection.get());
  --lent_;
  if (connection->is_open() && idle_.size() < leases_max_) idle_.push_back(std::move(connection));
  returned_cv_.notify_one();
  // A connection not kept closes when `connection` goes; it is already out of
  // in_use_, so Interrupt() cannot touch it meanwhile.
}

Result<protocol::Value> RedisPool::Call(const std::vector<std::string_view>& args,
                                        Deadline borrow_deadline, Deadline call_deadline) {
  Result<Lease> lease = Borrow(borrow_deadline);
  if (!lease.ok()) return lease.status();
  return lease->Call(args, call_deadline);
}

Status RedisPool::Connect(Connection* connection, Clock::time_point deadline) {
  Clock::time_point tcp_deadline = std::min(deadline, Clock::now() + connect_timeout_);
  if (Status status = connection->Open(server_.endpoint, tcp_deadline); !status.ok()) {
    return WithServer(status, server_);
  }
  auto setup = [&](const std::vector<std::string_view>& args, std::string_view what) -> Status {
    Result<protocol::Value> reply = connection->Call(args, deadline, nullptr);
    if (!reply.ok()) return WithServer(reply.status(), server_);
    if (Status status = ReplyStatus(*reply, what); !status.ok()) {
      connection->Close();
      return WithServer(status, server_);
    }
    return Status::Ok();
  };
  if (!server_.password.empty()) {
    Status status = server_.user.empty()
                        ? setup({"AUTH", server_.password}, "AUTH")
                        : setup({"AUTH", server_.user, server_.password}, "AUTH");
    if (!status.ok()) return status;
  }
  if (server_.db != 0) {
    std::string db = std::to_string(server_.db);
    if (Status status = setup({"SELECT", db}, "SELECT " + db); !status.ok()) return status;
  }
  return Status::Ok();
}

void RedisPool::Track(Connection* connection) {
  std::lock_guard lock(mu_);
  in_use_.insert(connection);
}

void RedisPool::Untrack(Connection* connection) {
  std::lock_guard lock(mu_);
  in_use_.erase(connection);
}

void RedisPool::Interrupt() {
  std::lock_guard lock(mu_);
  ++interrupts_;
  for (Connection* connection : in_use_) connection->Shutdown();
  returned_cv_.notify_all();
}

// --- RedisScript -----------------------------------------------------------------

std::string RedisScript::Sha() const {
  std::lock_guard lock(mu_);
  return sha_;
}

Status RedisScript::Load(RedisPool::Lease& lease, Deadline deadline) {
  Result<protocol::Value> reply = lease.Call({"SCRIPT", "LOAD", body_}, deadline);
  if (!reply.ok()) return reply.status();
  if (reply->IsError()) return RedisErrorStatus(*reply, "SCRIPT LOAD");
  if (reply->type != protocol::Value::Type::kBulk || reply->str.size() != 40) {
    return Status(StatusCode::kProtocol, "SCRIPT LOAD answered something else than a digest");
  }
  std::lock_guard lock(mu_);
  sha_ = reply->str;
  return Status::Ok();
}

Result<protocol::Value> RedisScript::Run(RedisPool::Lease& lease,
                                         const std::vector<std::string>& keys,
                                         const std::vector<std::string>& args,
                                         Deadline deadline) {
  std::string sha = Sha();
  std::string key_count = std::to_string(keys.size());
  std::vector<std::string_view> command;
  command.reserve(3 + keys.size() + args.size());
  command.push_back(sha.empty() ? "EVAL" : "EVALSHA");
  command.push_back(sha.empty() ? std::string_view(body_) : std::string_view(sha));
  command.push_back(key_count);
  for (const std::string& k : keys) command.push_back(k);
  for (const std::string& a : args) command.push_back(a);
  Result<protocol::Value> reply = lease.Call(command, deadline);
  if (sha.empty() || !reply.ok() || !reply->IsError() || reply->str.rfind("NOSCRIPT", 0) != 0) {
    return reply;
  }
  // The server forgot the script (restart, SCRIPT FLUSH): EVAL runs it and
  // caches it again, so the next EVALSHA finds it.
  command[0] = "EVAL";
  command[1] = body_;
  return lease.Call(command, deadline);
}

}  // namespace tumbler::client

// The mysql:// backend: locks are MySQL / MariaDB user-level locks
// (GET_LOCK / RELEASE_LOCK), through the MariaDB client library's
// non-blocking API (libmariadb, Debian's libmariadb-dev).
//
//   mysql://[user[:password]@]host[:port]/dbname
//
// user and password may be %-encoded; the port defaults to 3306; an IPv6 host
// goes in brackets. dbname is required: the fencing table lives there. No
// query parameters are accepted. ClientOptions:
//   session_ttl      the lease: every connection gets wait_timeout = the TTL
//                    rounded up to whole seconds, so the server ends a
//                    connection the watchdog has not pinged for that long.
//   connect_timeout  bound on opening each connection.
//   op_timeout       bound on each request that does not wait for a lock; a
//                    lock wait gets its deadline plus this.
//   session_name     the connection attribute program_name.
//   connections_max  connections for threads that hold or wait (plus one
//                    control connection).
//
// How (sql_backend.h has the connection model):
//   * lock names: a name of 1..64 bytes of printable ASCII other than space,
//     quotes, backslash and backquote that does not start with "tumbler:" is
//     used as it is (MySQL limits names to 64 characters). Any other name is
//     replaced by "tumbler:" + its 128-bit FNV-1a in hex; two such names
//     collide with odds of about n^2 / 2^129 for n names. MariaDB compares
//     names byte for byte; a server that compares them case-insensitively
//     makes names differing in case exclude each other (never the reverse);
//   * try-lock: GET_LOCK(name, 0); a wait: GET_LOCK(name, seconds left, with
//     a fractional part), or repeated GET_LOCK(name, one year) for Lock();
//   * fencing token: an INSERT into the AUTO_INCREMENT table tumbler_fencing
//     right after the grant, while the lock is held; the next holder is
//     granted only after this one released, so its INSERT comes later and
//     InnoDB hands it a larger id. InnoDB keeps the counter across restarts
//     (MariaDB 10.2.4+, MySQL 8.0); to be safe on older servers, which
//     restart it at max(id) + 1, the trimming of old rows (every 256 grants
//     of a client) keeps the newest row;
//   * a cycle of GET_LOCK waits fails one of them at once with ER_LOCK_DEADLOCK
//     (MariaDB) or ER_USER_LOCK_DEADLOCK (MySQL): kDeadlock;
//   * an interrupted or timed-out request: mariadb_cancel shuts the socket,
//     the connection is closed, and the server (which watches for closed
//     clients while GET_LOCK waits) drops its wait and its locks.
#include <mysql.h>
#include <errmsg.h>
#include <mysqld_error.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "client/backends/backends.h"
#include "client/backends/sql_backend.h"

namespace tumbler::client {

namespace {

using std::chrono::milliseconds;

constexpr Capability kCapabilities[] = {
    {Property::kMutualExclusion, Support::kYes,
     "`GET_LOCK` user locks; names over 64 bytes or with unusual characters become `tumbler:` + "
     "a 128-bit FNV-1a hash (collisions, odds about n²/2¹²⁹, merely exclude each other)."},
    {Property::kCrashRelease, Support::kPartial,
     "A lock belongs to its holder's connection: when the holder dies the kernel closes it and the "
     "server releases at once; an idle hung or cut-off holder is dropped after the TTL "
     "(`wait_timeout`, whole seconds), but one cut off while it waits for a lock keeps its locks "
     "until the server's TCP keepalive gives up."},
    {Property::kRenewal, Support::kYes,
     "User locks never expire; the watchdog pings every connection that holds locks each TTL/3, "
     "which restarts the server's `wait_timeout`, and a connection found broken ends the session."},
    {Property::kBlocking, Support::kYes,
     "`GET_LOCK(name, seconds)` waits in the server (fractional seconds); no polling."},
    {Property::kTryLock, Support::kYes, "`GET_LOCK(name, 0)`."},
    {Property::kReentrancy, Support::kYes,
     "Nested holds are counted in the client; each thread's locks are on a connection of its own."},
    {Property::kFairness, Support::kPartial,
     "Waiters queue in the server's metadata-lock manager, which hands a released lock over in "
     "request order in practice but does not promise it; threads waiting for a free connection "
     "(connections_max) are not ordered."},
    {Property::kFencing, Support::kYes,
     "An `INSERT` into the AUTO_INCREMENT table `tumbler_fencing` right after the grant, while the "
     "lock is held, so a later holder always gets a larger id (InnoDB keeps the counter across "
     "restarts)."},
    {Property::kSharedMode, Support::kNo, "`GET_LOCK` has no shared mode."},
    {Property::kNoHerd, Support::kYes,
     "A release hands the lock to one waiter; the others stay asleep in the server."},
    {Property::kDeadlockDetection, Support::kYes,
     "The server detects a cycle of `GET_LOCK` waits (every thread has its own connection) and "
     "fails one of them with kDeadlock at once (MariaDB 10.0.2+, MySQL 5.7+)."},
    {Property::kHighAvailability, Support::kNo,
     "One server: user locks live in its memory and are not replicated, so a failover loses every "
     "lock."},
    {Property::kDurability, Support::kNo,
     "User locks are in memory: a server restart drops them (clients see their session lost); only "
     "the fencing counter is durable."},
};

constexpr char kTable[] = "tumbler_fencing";
constexpr char kHashedPrefix[] = "tumbler:";
// Lock() waits in slices of a year (GET_LOCK's timeout must be finite).
constexpr int kForeverSeconds = 31'536'000;
// Old token rows are deleted every this many grants of a client.
constexpr uint64_t kTrimEvery = 256;
// Bound on the calls that finish a cancelled request (each fails at once).
constexpr int kDrainCallsMax = 64;

struct MySqlUrl {
  std::string user;
  std::string password;
  std::string host;
  unsigned port = 3306;
  std::string db;
};

Result<MySqlUrl> ParseMySqlUrl(std::string_view url) {
  auto bad = [&](const std::string& why) {
    return Status(StatusCode::kInvalidArgument,
                  "bad mysql:// URL \"" + std::string(url) + "\": " + why +
                      " (expected mysql://user:password@host:port/dbname)");
  };
  constexpr std::string_view kScheme = "mysql://";
  if (url.size() < kScheme.size()) return bad("no mysql:// scheme");
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(url[i])) != kScheme[i]) {
      return bad("no mysql:// scheme");
    }
  }
  std::string_view rest = url.substr(kScheme.size());
  if (rest.find_first_of("?#") != std::string_view::npos) return bad("parameters are not supported");
  size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return bad("no database name");
  std::string_view authority = rest.substr(0, slash);
  std::string_view db = rest.substr(slash + 1);
  if (db.empty()) return bad("no database name");
  if (db.find('/') != std::string_view::npos) return bad("the path must be just the database name");
  MySqlUrl out;
  std::optional<std::string> decoded_db = PercentDecode(db);
  if (!decoded_db) return bad("malformed %-escape in the database name");
  out.db = *decoded_db;
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    size_t colon = userinfo.find(':');
    std::optional<std::string> user = PercentDecode(userinfo.substr(0, colon));
    std::optional<std::string> password =
        colon == std::string_view::npos ? std::optional<std::string>("")
                                        : PercentDecode(userinfo.substr(colon + 1));
    if (!user || !password) return bad("malformed %-escape in the user or password");
    out.user = *user;
    out.password = *password;
  }
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unterminated [IPv6 address]");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("junk after the [IPv6 address]");
      port = after.substr(1);
      if (port.empty()) return bad("empty port");
    }
  } else {
    size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) return bad("empty port");
    }
  }
  if (out.host.empty()) return bad("no host");
  if (!port.empty()) {
    unsigned value = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || value > 65535) return bad("invalid port");
      value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (value < 1 || value > 65535) return bad("invalid port");
    out.port = value;
  }
  return out;
}

// libmariadb's global state is set up by the first mysql_init, which is not
// thread-safe: do it once.
void InitLibrary() {
  static std::once_flag once;
  std::call_once(once, [] { mysql_library_init(0, nullptr, nullptr); });
}

class MyConnection : public SqlConnection {
 public:
  explicit MyConnection(MYSQL* m) : m_(m) {}
  ~MyConnection() override {
    // A connection whose cancelled request could not be finished is leaked
    // rather than closed under the library's feet (never seen; bounded by
    // the pool).
    if (stuck_) return;
    if (broken) mariadb_cancel(m_);
    mysql_close(m_);
  }
  MYSQL* m() const { return m_; }
  void MarkStuck() { stuck_ = true; }

 private:
  MYSQL* const m_;
  bool stuck_ = false;
};

MyConnection& AsMy(SqlConnection& c) { return static_cast<MyConnection&>(c); }

// A query's outcome: the first column of the first row (nullopt for NULL or
// no row) and the AUTO_INCREMENT id it generated.
struct Reply {
  std::optional<std::string> value;
  uint64_t insert_id = 0;
};

bool IsConnectionError(unsigned error) {
  // 2xxx are the client library's own errors (server gone, lost, ...).
  return (error >= 2000 && error < 3000) || error == ER_CONNECTION_KILLED ||
         error == ER_SERVER_SHUTDOWN || error == ER_QUERY_INTERRUPTED;
}

class MySqlBackend : public SqlBackend {
 public:
  MySqlBackend(MySqlUrl url, ClientOptions options)
      : SqlBackend(std::move(options)), url_(std::move(url)) {}

  const BackendInfo& info() const override { return MySqlBackendInfo(); }

 protected:
  Result<std::unique_ptr<SqlConnection>> Connect(Clock::time_point deadline) override {
    InitLibrary();
    MYSQL* m = mysql_init(nullptr);
    if (m == nullptr) return Status(StatusCode::kUnavailable, "libmariadb: out of memory");
    auto conn = std::make_unique<MyConnection>(m);
    unsigned connect_s = static_cast<unsigned>(std::max<int64_t>(
        1, std::chrono::ceil<std::chrono::seconds>(deadline - Clock::now()).count()));
    mysql_options(m, MYSQL_OPT_NONBLOCK, nullptr);
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &connect_s);
    std::string program = options().session_name.empty() ? "tumbler" : options().session_name;
    mysql_optionsv(m, MYSQL_OPT_CONNECT_ATTR_ADD, "program_name", program.c_str());
    MYSQL* connected = nullptr;
    int status = mysql_real_connect_start(&connected, m, url_.host.c_str(), url_.user.c_str(),
                                          url_.password.c_str(), url_.db.c_str(), url_.port,
                                          nullptr, 0);
    // The library's own connect timeout ends the TCP connect (before which a
    // connection cannot be cancelled); the handshake after it is bounded by
    // `deadline` plus a second of slack.
    Status driven = Drive(*conn, status, deadline + std::chrono::seconds(1), [&](int ready) {
      return mysql_real_connect_cont(&connected, m, ready);
    });
    if (!driven.ok()) return driven;
    if (connected == nullptr) {
      return Status(StatusCode::kUnavailable,
                    "cannot connect to mysql: " + std::string(mysql_error(m)));
    }
    std::string lease = std::to_string(
        std::max<int64_t>(1, std::chrono::ceil<std::chrono::seconds>(options().session_ttl).count()));
    Result<Reply> configured = Exec(*conn, "SET SESSION wait_timeout = " + lease,
                                    std::max(deadline, OpDeadline()));
    if (!configured.ok()) return configured.status();
    return std::unique_ptr<SqlConnection>(std::move(conn));
  }

  Status PrepareSession(SqlConnection& control) override {
    std::string sql = std::string("CREATE TABLE IF NOT EXISTS ") + kTable +
                      " (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY) ENGINE=InnoDB";
    Result<Reply> created = Exec(control, sql, OpDeadline());
    if (!created.ok()) {
      return Status(created.status().code(), std::string("cannot create the table ") + kTable +
                                                 " for fencing tokens: " +
                                                 created.status().message());
    }
    return Status::Ok();
  }

  uint64_t ConnectionId(SqlConnection& c) override { return mysql_thread_id(AsMy(c).m()); }

  Result<std::optional<uint64_t>> LockOn(SqlConnection& c, const std::string& name,
                                         LockMode /*mode*/, Deadline deadline) override {
    std::string lock_name = MySqlLockName(name);
    for (;;) {
      Clock::time_point now = Clock::now();
      std::string seconds;
      Deadline exec_deadline;
      if (!deadline) {
        seconds = std::to_string(kForeverSeconds);
      } else if (*deadline <= now) {
        seconds = "0";
        exec_deadline = OpDeadline();
      } else {
        auto ms = std::chrono::ceil<milliseconds>(*deadline - now).count();
        char text[32];
        std::snprintf(text, sizeof(text), "%lld.%03lld", static_cast<long long>(ms / 1000),
                      static_cast<long long>(ms % 1000));
        seconds = text;
        exec_deadline = *deadline + options().op_timeout;
      }
      Result<Reply> got =
          Exec(c, "SELECT GET_LOCK('" + lock_name + "', " + seconds + ")", exec_deadline);
      if (!got.ok()) return got.status();
      if (!got.value().value) {
        // NULL: an error the server did not report as one; the connection's
        // state is unclear, so drop it (which releases what it held).
        c.broken = true;
        return Status(StatusCode::kErr, "GET_LOCK returned NULL");
      }
      if (*got.value().value == "1") break;
      if (deadline) return std::optional<uint64_t>();  // timed out
      if (Ended()) return EndedStatus();
      // A year passed for Lock(): ask again.
    }
    return TakeToken(c);
  }

  Status UnlockOn(SqlConnection& c, const std::string& name, LockMode /*mode*/) override {
    Result<Reply> released =
        Exec(c, "SELECT RELEASE_LOCK('" + MySqlLockName(name) + "')", OpDeadline());
    if (!released.ok()) return released.status();
    if (released.value().value == "1") return Status::Ok();
    return Status(StatusCode::kNotHeld, "mysql says this connection does not hold \"" + name + "\"");
  }

  Status PingOn(SqlConnection& c) override {
    Result<Reply> pinged = Exec(c, "DO 1", OpDeadline());
    return pinged.ok() ? Status::Ok() : pinged.status();
  }

  bool LooksClosed(SqlConnection& c) override {
    // Nothing is due on an idle connection: anything readable is the server
    // ending it (wait_timeout, KILL, shutdown).
    return IdleSocketReadable(mysql_get_socket(AsMy(c).m()));
  }

 private:
  // The token of the grant just made on `c`; on failure the connection is
  // dropped so that the lock does not stay behind without a token.
  Result<std::optional<uint64_t>> TakeToken(SqlConnection& c) {
    Result<Reply> inserted =
        Exec(c, std::string("INSERT INTO ") + kTable + " () VALUES ()", OpDeadline());
    if (!inserted.ok() || inserted.value().insert_id == 0) {
      c.broken = true;
      if (!inserted.ok()) return inserted.status();
      return Status(StatusCode::kProtocol, "the fencing INSERT generated no id");
    }
    uint64_t token = inserted.value().insert_id;
    if (grants_.fetch_add(1, std::memory_order_relaxed) % kTrimEvery == kTrimEvery - 1) {
      // Best effort: a failure here costs only table space, unless the
      // connection broke (which Exec records).
      Result<Reply> trimmed = Exec(c, std::string("DELETE FROM ") + kTable + " WHERE id < " +
                                          std::to_string(token), OpDeadline());
      if (!trimmed.ok() && c.broken) return trimmed.status();
    }
    return std::optional<uint64_t>(token);
  }

  // Runs one statement on `c` by `deadline` (nullopt: no bound but
  // InterruptAll). A connection failure, a timeout or an interruption marks
  // `c` broken.
  Result<Reply> Exec(SqlConnection& c, const std::string& sql, Deadline deadline) {
    MYSQL* m = AsMy(c).m();
    int error = 0;
    int status = mysql_real_query_start(&error, m, sql.data(), sql.size());
    Status driven =
        Drive(c, status, deadline, [&](int ready) { return mysql_real_query_cont(&error, m, ready); });
    if (!driven.ok()) return driven;
    if (error != 0) return QueryError(c);
    Reply reply;
    reply.insert_id = mysql_insert_id(m);
    if (mysql_field_count(m) == 0) return reply;
    MYSQL_RES* res = nullptr;
    status = mysql_store_result_start(&res, m);
    driven = Drive(c, status, deadline, [&](int ready) { return mysql_store_result_cont(&res, m, ready); });
    if (!driven.ok()) return driven;
    if (res == nullptr) return QueryError(c);
    MYSQL_ROW row = mysql_fetch_row(res);  // stored: no I/O
    if (row != nullptr && mysql_num_fields(res) > 0 && row[0] != nullptr) {
      unsigned long* lengths = mysql_fetch_lengths(res);
      reply.value = std::string(row[0], lengths[0]);
    }
    mysql_free_result(res);
    return reply;
  }

  Status QueryError(SqlConnection& c) {
    MYSQL* m = AsMy(c).m();
    unsigned error = mysql_errno(m);
    std::string what = "mysql: " + std::string(mysql_error(m)) + " (" + std::to_string(error) + ")";
    if (error == ER_LOCK_DEADLOCK || error == ER_USER_LOCK_DEADLOCK) {
      return Status(StatusCode::kDeadlock, what);
    }
    if (IsConnectionError(error)) {
      c.broken = true;
      return Status(StatusCode::kUnavailable, what);
    }
    return Status(StatusCode::kErr, what);
  }

  // Runs a started non-blocking call to its end: waits for what the library
  // asks for (socket events, its own timeout) and calls `cont`. When
  // `deadline` passes or InterruptAll wakes it, cancels the request (the
  // socket is shut down, so the library's remaining calls fail at once) and
  // marks `c` broken.
  Status Drive(SqlConnection& c, int status, Deadline deadline, const std::function<int(int)>& cont) {
    MYSQL* m = AsMy(c).m();
    while (status != 0) {
      Deadline wait_until = deadline;
      std::optional<Clock::time_point> library_deadline;
      if ((status & MYSQL_WAIT_TIMEOUT) != 0) {
        library_deadline = Clock::now() + milliseconds(mysql_get_timeout_value_ms(m));
        if (!wait_until || *library_deadline < *wait_until) wait_until = library_deadline;
      }
      short events = 0;
      if ((status & MYSQL_WAIT_READ) != 0) events |= POLLIN;
      if ((status & MYSQL_WAIT_WRITE) != 0) events |= POLLOUT;
      if ((status & MYSQL_WAIT_EXCEPT) != 0) events |= POLLPRI;
      short revents = 0;
      FdWait waited = WaitForFd(mysql_get_socket(m), events, wait_until, wake_fd(), &revents);
      int ready = 0;
      if (waited == FdWait::kReady) {
        if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) ready |= MYSQL_WAIT_READ;
        if ((revents & (POLLOUT | POLLHUP | POLLERR)) != 0) ready |= MYSQL_WAIT_WRITE;
        if ((revents & POLLPRI) != 0) ready |= MYSQL_WAIT_EXCEPT;
      } else if (waited == FdWait::kTimedOut && library_deadline &&
                 Clock::now() >= *library_deadline && (!deadline || Clock::now() < *deadline)) {
        ready = MYSQL_WAIT_TIMEOUT;
      } else {
        Cancel(c, status, cont);
        if (waited == FdWait::kWoken) return EndedStatus();
        if (waited == FdWait::kTimedOut) {
          return Status(StatusCode::kTimeout, "mysql did not answer in time");
        }
        return Status(StatusCode::kUnavailable, "poll failed");
      }
      status = cont(ready);
    }
    return Status::Ok();
  }

  static void Cancel(SqlConnection& c, int status, const std::function<int(int)>& cont) {
    c.broken = true;
    mariadb_cancel(AsMy(c).m());
    for (int i = 0; status != 0 && i < kDrainCallsMax; ++i) {
      status = cont(status & (MYSQL_WAIT_READ | MYSQL_WAIT_WRITE | MYSQL_WAIT_EXCEPT | MYSQL_WAIT_TIMEOUT));
    }
    if (status != 0) AsMy(c).MarkStuck();
  }

  const MySqlUrl url_;
  std::atomic<uint64_t> grants_{0};
};

}  // namespace

std::string MySqlLockName(std::string_view name) {
  bool plain = !name.empty() && name.size() <= 64 && name.rfind(kHashedPrefix, 0) != 0;
  for (char c : name) {
    if (c <= ' ' || c > '~' || c == '\'' || c == '"' || c == '\\' || c == '`') plain = false;
  }
  if (plain) return std::string(name);
  return kHashedPrefix + Fnv1a128Hex(name);
}

const BackendInfo& MySqlBackendInfo() {
  static const BackendInfo info{"mysql", "MySQL / MariaDB (GET_LOCK)",
                                "mysql://user:password@host[:port]/dbname", kCapabilities};
  return info;
}

Result<std::shared_ptr<Backend>> MakeMySqlBackend(std::string_view url, const ClientOptions& options) {
  Result<MySqlUrl> parsed = ParseMySqlUrl(url);
  if (!parsed.ok()) return parsed.status();
  return std::shared_ptr<Backend>(std::make_shared<MySqlBackend>(std::move(parsed).value(), options));
}

}  // namespace tumbler::client

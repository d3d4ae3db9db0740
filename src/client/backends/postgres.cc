// The postgres:// backend: locks are PostgreSQL session-level advisory locks
// (https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS),
// through libpq's non-blocking API.
//
//   postgres://user[:password]@host[:port]/dbname[?libpq parameters]
//
// The URL goes to libpq as it is (any libpq URI parameter works, e.g.
// sslmode=require); ClientOptions supply defaults it may override:
//   session_ttl      the lease: every connection gets idle_session_timeout =
//                    TTL (PostgreSQL 14+), so the server ends a connection the
//                    watchdog has not pinged for the TTL, and TCP keepalives
//                    (server and client side) that give up on a silent peer
//                    after about the TTL (whole seconds, at least 3 s).
//   connect_timeout  bound on opening each connection.
//   op_timeout       bound on each request that does not wait for a lock; a
//                    lock wait gets its deadline plus this.
//   session_name     application_name (shown in pg_stat_activity).
//   connections_max  connections for threads that hold or wait (plus one
//                    control connection).
//
// How (sql_backend.h has the connection model):
//   * a lock name maps to the bigint key Fnv1a64(name) (as a signed 64-bit
//     number). Different names with the same key exclude each other; with n
//     names in use the odds of any collision are about n^2 / 2^65;
//   * try-lock: pg_try_advisory_lock; a wait: SET LOCAL lock_timeout to what
//     is left, then pg_advisory_lock (55P03 lock_not_available = not acquired
//     in time). Shared mode uses the *_shared functions;
//   * fencing token: nextval('tumbler_fencing_seq'), evaluated in the same
//     statement once the lock is granted, so while it is held. The next
//     holder of the lock is granted only after this holder released it,
//     which is after this nextval returned, so its nextval comes later and
//     the sequence (CACHE 1, so ordered across connections) makes it larger;
//   * the server's deadlock detector sees advisory-lock waits: 40P01 ->
//     kDeadlock.
#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "client/backends/backends.h"
#include "client/backends/sql_backend.h"

namespace tumbler::client {
namespace {

using std::chrono::milliseconds;

constexpr Capability kCapabilities[] = {
    {Property::kMutualExclusion, Support::kYes,
     "Session-level advisory locks (`pg_advisory_lock`) on a 64-bit key, the FNV-1a hash of the "
     "name; two names with the same key (odds about n²/2⁶⁵ for n names) merely exclude each other."},
    {Property::kCrashRelease, Support::kPartial,
     "A lock belongs to its holder's connection: when the holder dies the kernel closes it and the "
     "server releases at once; a hung or cut-off holder is dropped after the TTL of silence "
     "(`idle_session_timeout`, PostgreSQL 14+; TCP keepalives, about the TTL, while it waits or on "
     "older servers)."},
    {Property::kRenewal, Support::kYes,
     "Advisory locks never expire; the watchdog pings every connection that holds locks each TTL/3, "
     "which restarts the server's idle timeout, and a connection found broken ends the session."},
    {Property::kBlocking, Support::kYes,
     "`pg_advisory_lock` waits in the server's lock manager, bounded by `lock_timeout`; no "
     "polling."},
    {Property::kTryLock, Support::kYes, "`pg_try_advisory_lock`."},
    {Property::kReentrancy, Support::kYes,
     "Nested holds are counted in the client; each thread's locks are on a connection of its own."},
    {Property::kFairness, Support::kPartial,
     "Waiters queue in the server's lock manager, which grants in arrival order, but its deadlock "
     "detector may reorder a queue, and threads waiting for a free connection (connections_max) "
     "are not ordered."},
    {Property::kFencing, Support::kYes,
     "`nextval` of the sequence `tumbler_fencing_seq` (CACHE 1, created at connect), taken in the "
     "granting statement while the lock is held, so a later holder always gets a larger number."},
    {Property::kSharedMode, Support::kYes,
     "`pg_advisory_lock_shared`; a shared request queues behind a waiting exclusive one."},
    {Property::kNoHerd, Support::kYes,
     "A release wakes only the waiters the server's lock manager grants the lock to."},
    {Property::kDeadlockDetection, Support::kYes,
     "The server's deadlock detector covers advisory-lock waits (every thread has its own "
     "connection): one wait of a cycle fails with kDeadlock after `deadlock_timeout` (1 s by "
     "default)."},
    {Property::kHighAvailability, Support::kNo,
     "One server: advisory locks live in its memory and are not replicated to standbys, so a "
     "failover loses every lock."},
    {Property::kDurability, Support::kNo,
     "Advisory locks are in memory: a server restart drops them (clients see their session lost); "
     "only the fencing sequence is durable."},
};

constexpr char kSequence[] = "tumbler_fencing_seq";

struct PgResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, PgResultDeleter>;

void IgnoreNotice(void*, const char*) {}

class PgConnection : public SqlConnection {
 public:
  explicit PgConnection(PGconn* pg) : pg_(pg) {}
  ~PgConnection() override { PQfinish(pg_); }
  PGconn* pg() const { return pg_; }

 private:
  PGconn* const pg_;
};

PgConnection& AsPg(SqlConnection& c) { return static_cast<PgConnection&>(c); }

std::string Trimmed(const char* message) {
  std::string out = message == nullptr ? "" : message;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// Whole seconds, at least `min`, rounding up.
int64_t Seconds(Clock::duration d, int64_t min) {
  return std::max<int64_t>(min, std::chrono::ceil<std::chrono::seconds>(d).count());
}

class PostgresBackend : public SqlBackend {
 public:
  PostgresBackend(std::string url, ClientOptions options)
      : SqlBackend(std::move(options)), url_(std::move(url)) {}

  const BackendInfo& info() const override { return PostgresBackendInfo(); }

 protected:
  Result<std::unique_ptr<SqlConnection>> Connect(Clock::time_point deadline) override {
    // Server-side keepalive: probes every `interval` after `interval` of
    // silence, three of them, so a silent peer is dropped no sooner than
    // about the TTL after it fell silent (sql_backend.h "the lease").
    std::string interval = std::to_string(Seconds(options().session_ttl / 3, 1));
    std::string app = options().session_name.empty() ? "tumbler" : options().session_name;
    // dbname comes last: what the URL says overrides these defaults.
    const char* keys[] = {"keepalives",       "keepalives_idle", "keepalives_interval",
                          "keepalives_count", "application_name", "dbname", nullptr};
    const char* values[] = {"1", interval.c_str(), interval.c_str(), "3", app.c_str(),
                            url_.c_str(), nullptr};
    PGconn* pg = PQconnectStartParams(keys, values, /*expand_dbname=*/1);
    if (pg == nullptr) return Status(StatusCode::kUnavailable, "libpq: out of memory");
    auto conn = std::make_unique<PgConnection>(pg);
    if (PQstatus(pg) == CONNECTION_BAD) return ConnectError(pg);
    PostgresPollingStatusType polling = PGRES_POLLING_WRITING;
    while (polling != PGRES_POLLING_OK) {
      if (polling == PGRES_POLLING_FAILED) return ConnectError(pg);
      short events = polling == PGRES_POLLING_READING ? POLLIN : POLLOUT;
      short revents = 0;
      FdWait waited = WaitForFd(PQsocket(pg), events, deadline, wake_fd(), &revents);
      if (waited == FdWait::kWoken) return EndedStatus();
      if (waited == FdWait::kTimedOut) {
        return Status(StatusCode::kTimeout, "connecting to postgres took longer than connect_timeout");
      }
      if (waited == FdWait::kFailed) return Status(StatusCode::kUnavailable, "poll failed");
      polling = PQconnectPoll(pg);
    }
    PQsetNoticeProcessor(pg, IgnoreNotice, nullptr);
    if (PQsetnonblocking(pg, 1) != 0) return ConnectError(pg);
    if (Status status = Configure(*conn, deadline); !status.ok()) return status;
    return std::unique_ptr<SqlConnection>(std::move(conn));
  }

  Status PrepareSession(SqlConnection& control) override {
    std::string create = std::string("CREATE SEQUENCE IF NOT EXISTS ") + kSequence;
    std::string sqlstate;
    Result<PgResult> created = Exec(control, create, OpDeadline(), &sqlstate);
    if (!created.ok() && control.broken) return created.status();
    // Two clients creating it at once: the loser gets a unique violation
    // although the sequence now exists, hence the check that follows either way.
    std::string check = std::string("SELECT seqcache, seqcycle FROM pg_sequence WHERE seqrelid = "
                                    "to_regclass('") + kSequence + "')";
    Result<PgResult> checked = Exec(control, check, OpDeadline(), &sqlstate);
    if (!checked.ok()) return checked.status();
    if (PQntuples(checked.value().get()) != 1) {
      return Status(StatusCode::kErr, std::string("cannot create the sequence ") + kSequence +
                                          " for fencing tokens: " +
                                          (created.ok() ? "not found" : created.status().message()));
    }
    // With CACHE > 1 each connection hands out numbers from its own block,
    // so a later holder could get a smaller token.
    if (std::strcmp(PQgetvalue(checked.value().get(), 0, 0), "1") != 0 ||
        std::strcmp(PQgetvalue(checked.value().get(), 0, 1), "f") != 0) {
      return Status(StatusCode::kErr, std::string("the sequence ") + kSequence +
                                          " must have CACHE 1 and NO CYCLE for fencing tokens");
    }
    return Status::Ok();
  }

  uint64_t ConnectionId(SqlConnection& c) override {
    return static_cast<uint64_t>(PQbackendPID(AsPg(c).pg()));
  }

  Result<std::optional<uint64_t>> LockOn(SqlConnection& c, const std::string& name, LockMode mode,
                                         Deadline deadline) override {
    std::string key = Key(name);
    const char* suffix = mode == LockMode::kShared ? "_shared" : "";
    std::string sql;
    Deadline exec_deadline;
    Clock::time_point now = Clock::now();
    if (deadline && *deadline <= now) {
      // CASE evaluates THEN only when WHEN is true: no number is drawn for
      // a lock that was not granted.
      sql = std::string("SELECT CASE WHEN pg_try_advisory_lock") + suffix + "(" + key +
            ") THEN nextval('" + kSequence + "') ELSE 0 END";
      exec_deadline = OpDeadline();
    } else {
      int64_t wait_ms = 0;  // 0: no lock_timeout, wait until granted
      if (deadline) {
        wait_ms = std::max<int64_t>(
            1, std::chrono::ceil<milliseconds>(*deadline - now).count());
        exec_deadline = *deadline + options().op_timeout;
      }
      // The two statements run as one implicit transaction, so SET LOCAL
      // applies to this wait only. The subquery is evaluated before the
      // outer select list, so nextval runs only once the lock is granted.
      // A session-level advisory lock survives the end of the transaction.
      sql = "SET LOCAL lock_timeout = " + std::to_string(wait_ms) + "; SELECT nextval('" +
            kSequence + "') FROM (SELECT pg_advisory_lock" + suffix + "(" + key + ")) AS granted";
    }
    std::string sqlstate;
    Result<PgResult> result = Exec(c, sql, exec_deadline, &sqlstate);
    if (!result.ok()) {
      if (sqlstate == "55P03") return std::optional<uint64_t>();  // lock_not_available
      if (sqlstate == "40P01") return result.status();            // deadlock_detected
      // Anything else may have struck after the grant (nextval failed...):
      // drop the connection, which releases whatever it took.
      c.broken = true;
      return result.status();
    }
    const PGresult* r = result.value().get();
    if (PQntuples(r) != 1 || PQnfields(r) != 1) {
      c.broken = true;
      return Status(StatusCode::kProtocol, "unexpected reply to the lock query");
    }
    uint64_t token = std::strtoull(PQgetvalue(r, 0, 0), nullptr, 10);
    if (token == 0) return std::optional<uint64_t>();
    return std::optional<uint64_t>(token);
  }

  Status UnlockOn(SqlConnection& c, const std::string& name, LockMode mode) override {
    std::string sql = std::string("SELECT pg_advisory_unlock") +
                      (mode == LockMode::kShared ? "_shared" : "") + "(" + Key(name) + ")";
    std::string sqlstate;
    Result<PgResult> result = Exec(c, sql, OpDeadline(), &sqlstate);
    if (!result.ok()) return result.status();
    const PGresult* r = result.value().get();
    if (PQntuples(r) == 1 && std::strcmp(PQgetvalue(r, 0, 0), "t") == 0) return Status::Ok();
    return Status(StatusCode::kNotHeld, "postgres says this connection does not hold \"" + name + "\"");
  }

  Status PingOn(SqlConnection& c) override {
    std::string sqlstate;
    Result<PgResult> result = Exec(c, "SELECT 1", OpDeadline(), &sqlstate);
    return result.ok() ? Status::Ok() : result.status();
  }

  bool LooksClosed(SqlConnection& c) override {
    PGconn* pg = AsPg(c).pg();
    // Nothing is due on an idle connection: anything readable is the server
    // ending it (idle_session_timeout, shutdown) or a notice we do not need.
    return PQstatus(pg) != CONNECTION_OK || IdleSocketReadable(PQsocket(pg));
  }

 private:
  static std::string Key(const std::string& name) {
    return std::to_string(static_cast<int64_t>(Fnv1a64(name)));
  }

  static Status ConnectError(PGconn* pg) {
    return Status(StatusCode::kUnavailable, "cannot connect to postgres: " + Trimmed(PQerrorMessage(pg)));
  }

  // Session settings: no server-side statement or idle-in-transaction limits
  // (the client bounds its requests), the lease and the keepalives.
  Status Configure(SqlConnection& c, Clock::time_point deadline) {
    PGconn* pg = AsPg(c).pg();
    auto ttl_ms = std::chrono::duration_cast<milliseconds>(options().session_ttl).count();
    std::string interval = std::to_string(Seconds(options().session_ttl / 3, 1));
    std::string sql =
        "SET statement_timeout = 0; SET lock_timeout = 0; "
        "SET idle_in_transaction_session_timeout = 0; SET tcp_keepalives_idle = " + interval +
        "; SET tcp_keepalives_interval = " + interval + "; SET tcp_keepalives_count = 3";
    if (PQserverVersion(pg) >= 140000) {
      // The lease: the server ends a connection left idle for the TTL. And a
      // waiting backend checks every second (at most) whether its client is
      // still there, so a dead waiter leaves the queue promptly.
      auto check_ms = std::clamp<int64_t>(ttl_ms / 3, 100, 1000);
      sql += "; SET idle_session_timeout = " + std::to_string(ttl_ms) +
             "; SET client_connection_check_interval = " + std::to_string(check_ms);
    }
    std::string sqlstate;
    Result<PgResult> result = Exec(c, sql, std::max(deadline, OpDeadline()), &sqlstate);
    return result.ok() ? Status::Ok() : result.status();
  }

  // Runs `sql` (one or more statements, simple query protocol) on `c` until
  // `deadline` (nullopt: no bound but InterruptAll). Returns the last result;
  // on an SQL error, the first error with *sqlstate set. A connection failure,
  // a timeout or an interruption marks `c` broken.
  Result<PgResult> Exec(SqlConnection& c, const std::string& sql, Deadline deadline,
                        std::string* sqlstate) {
    sqlstate->clear();
    PGconn* pg = AsPg(c).pg();
    auto broke = [&](StatusCode code, std::string why) -> Status {
      c.broken = true;
      return Status(code, std::move(why));
    };
    if (PQsendQuery(pg, sql.c_str()) == 0) {
      return broke(StatusCode::kUnavailable, "postgres connection failed: " + Trimmed(PQerrorMessage(pg)));
    }
    PgResult last;
    Status error;
    bool flushing = true;
    for (;;) {
      if (flushing) {
        int flushed = PQflush(pg);
        if (flushed < 0) {
          return broke(StatusCode::kUnavailable, "postgres connection failed: " + Trimmed(PQerrorMessage(pg)));
        }
        flushing = flushed == 1;
      }
      if (!flushing && PQisBusy(pg) == 0) {
        PgResult r(PQgetResult(pg));
        if (r == nullptr) break;  // every result of the query string is in
        ExecStatusType status = PQresultStatus(r.get());
        if (status == PGRES_FATAL_ERROR || status == PGRES_NONFATAL_ERROR ||
            status == PGRES_BAD_RESPONSE) {
          if (error.ok()) {
            const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
            *sqlstate = state == nullptr ? "" : state;
            error = Status(*sqlstate == "40P01" ? StatusCode::kDeadlock : StatusCode::kErr,
                           "postgres: " + Trimmed(PQresultErrorMessage(r.get())));
          }
        } else {
          last = std::move(r);
        }
        continue;
      }
      short revents = 0;
      short events = static_cast<short>(POLLIN | (flushing ? POLLOUT : 0));
      FdWait waited = WaitForFd(PQsocket(pg), events, deadline, wake_fd(), &revents);
      if (waited == FdWait::kWoken) {
        c.broken = true;
        return EndedStatus();
      }
      if (waited == FdWait::kTimedOut) {
        return broke(StatusCode::kTimeout, "postgres did not answer in time");
      }
      if (waited == FdWait::kFailed) return broke(StatusCode::kUnavailable, "poll failed");
      if ((revents & (POLLIN | POLLERR | POLLHUP)) != 0 && PQconsumeInput(pg) == 0) {
        return broke(StatusCode::kUnavailable, "postgres connection failed: " + Trimmed(PQerrorMessage(pg)));
      }
    }
    if (PQstatus(pg) != CONNECTION_OK) {
      // A FATAL error (server shutdown, terminated backend) ends the session.
      c.broken = true;
      return Status(StatusCode::kUnavailable,
                    error.ok() ? "postgres closed the connection" : error.message());
    }
    if (!error.ok()) return error;
    if (last == nullptr) {
      return broke(StatusCode::kProtocol, "postgres sent no result");
    }
    return last;
  }

  const std::string url_;
};

}  // namespace

const BackendInfo& PostgresBackendInfo() {
  static const BackendInfo info{"postgres", "PostgreSQL (advisory locks)",
                                "postgres://user[:password]@host[:port]/dbname[?param=value...]",
                                kCapabilities};
  return info;
}

Result<std::shared_ptr<Backend>> MakePostgresBackend(std::string_view url,
                                                     const ClientOptions& options) {
  std::string text(url);
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(text.c_str(), &error);
  if (parsed == nullptr) {
    std::string why = error != nullptr ? Trimmed(error) : "out of memory";
    PQfreemem(error);
    return Status(StatusCode::kInvalidArgument, "bad postgres:// URL: " + why);
  }
  std::string port;
  for (PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
    if (std::strcmp(o->keyword, "port") == 0 && o->val != nullptr) port = o->val;
  }
  PQconninfoFree(parsed);
  // libpq checks the port only when it connects; a typo is the caller's.
  if (!port.empty()) {
    for (size_t start = 0; start <= port.size();) {
      size_t end = std::min(port.find(',', start), port.size());
      std::string one = port.substr(start, end - start);
      char* rest = nullptr;
      long value = std::strtol(one.c_str(), &rest, 10);
      if (one.empty() || *rest != '\0' || value < 1 || value > 65535) {
        return Status(StatusCode::kInvalidArgument, "bad postgres:// URL: invalid port \"" + one + "\"");
      }
      start = end + 1;
    }
  }
  return std::shared_ptr<Backend>(std::make_shared<PostgresBackend>(std::move(text), options));
}

}  // namespace tumbler::client

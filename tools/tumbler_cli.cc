// tumbler: the command-line client (docs/cli.md).
//
// Most subcommands are one or two requests sent with the client library's
// internal Channel (leader redirects, retries, timeouts); `run` uses the public
// Client and Mutex, so that the lock is renewed by the library's watchdog while
// the command runs.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends_table.h"
#include "cli_args.h"
#include "client/channel.h"
#include "client/url.h"
#include "core/limits.h"
#include "protocol/resp.h"
#include "tumbler/backends.h"
#include "tumbler/client.h"
#include "tumbler/mutex.h"

extern char** environ;

#ifndef TUMBLER_VERSION
#define TUMBLER_VERSION "unknown"
#endif

namespace tumbler::cli {
namespace {

using std::chrono::milliseconds;
using client::Clock;
using protocol::Value;

constexpr const char* kDefaultServer = "tumbler://127.0.0.1:7420";
constexpr milliseconds kDefaultTtl{10'000};
constexpr milliseconds kDefaultTimeout{5'000};
constexpr milliseconds kDefaultGrace{10'000};

// --- Help ---------------------------------------------------------------------

const char* kMainHelp = R"(usage: tumbler [--server URL] [--timeout DURATION] COMMAND [ARGS...]

A client for tumblerd, the distributed lock server.

Commands:
  lock NAME        acquire a lock and print its fencing token
  unlock NAME      release a lock held under a session
  run              hold a lock while a command runs
  session          open, close, renew or show a session
  inspect NAME     show a lock's holders and waiters
  locks            list existing locks
  sessions         list session ids
  info [SECTION]   show server facts (INFO)
  check NAME TOKEN is TOKEN a current holder's token of NAME?
  cluster          show or change the cluster's membership
  backends         what each backend (tumbler://, redis://, ...) guarantees
  help [COMMAND]   this text, or a command's

Global options (before or after the command):
  --server URL        tumbler://host:port[,host:port...]; default $TUMBLER_SERVER,
                      else tumbler://127.0.0.1:7420. `run` also takes the URL of
                      another backend (redis://, redlock://, etcd://,
                      zookeeper://, postgres://, mysql://: `tumbler backends`)
  --timeout DURATION  bound on each request that does not wait for a lock
                      (connect, redirects, retries, reply); default 5s
  --help              help for the command
  --version           print the version

Durations: 500ms, 10s, 1.5s, 2m, 1h, 0, forever.

Exit codes:
  0    success
  1    lock not acquired (busy, wait ran out, deadlock, wrong mode), lock not
       held (unlock), token not valid (check)
  2    usage error
  3    server unreachable, timed out, or answered an error
  4    the session does not exist (expired, closed, lost)
  run: the command's exit code (128+N if it was killed by signal N), or
  122  the session was lost while the command ran (the command got SIGTERM)
  124  the lock was not acquired within --wait (the command did not run)
  125  usage or server error before the command ran
  126  the command could not be executed; 127 the command was not found
)";

struct CommandHelp {
  const char* name;
  const char* text;
};

const CommandHelp kCommandHelp[] = {
    {"lock", R"(usage: tumbler lock NAME [--wait DURATION] [--shared] [--session ID]
                   [--owner TAG] [--ttl DURATION]

Acquires the lock NAME and prints its fencing token on a line of its own.

  --wait DURATION  how long to wait for the lock: 0 tries once, forever (the
                   default) waits until it is granted. The session is renewed
                   while waiting.
  --shared         a shared (reader) hold instead of an exclusive one
  --session ID     hold it under this existing session (see `tumbler session
                   open`); the lock stays held until `tumbler unlock` or the
                   session ends
  --owner TAG      the owner tag within the session (default: empty). The
                   same session and tag relocking is reentrant.
  --ttl DURATION   without --session: the TTL of the session opened for this
                   lock (default 10s). That session is NOT renewed after this
                   command exits: the lock is released when the TTL runs out
                   unless it is renewed with `tumbler session keepalive ID`.
                   Its id is printed on stderr.

Exit: 0 acquired, 1 not acquired (busy, wait ran out, deadlock, held in the
other mode), 3 server error, 4 no such session.
)"},
    {"unlock", R"(usage: tumbler unlock NAME --session ID [--owner TAG]

Gives up one hold of NAME by (session ID, owner TAG) and prints what is left.
Exit: 0 released (or one of several reentrant holds released), 1 not held,
3 server error, 4 no such session.
)"},
    {"run", R"(usage: tumbler run --lock NAME [--wait DURATION] [--shared] [--ttl DURATION]
                  [--grace DURATION] -- COMMAND [ARGS...]

Acquires NAME, runs COMMAND while holding it, and releases it when COMMAND
exits. The session is renewed every TTL/3 while the command runs. The command
gets these environment variables:
  TUMBLER_TOKEN    the fencing token (hand it to the resource you protect)
  TUMBLER_LOCK     NAME
  TUMBLER_SESSION  the session id
  TUMBLER_SERVER   the server URL
SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to tumbler with kill(2) are
forwarded to the command (a terminal's Ctrl-C already reaches both).

If the session is lost while the command runs (the server unreachable for
longer than the TTL allows, or the session expired), the lock may be granted
to someone else at any moment, so tumbler sends SIGTERM to the command, then
SIGKILL after --grace, and exits with 122.

  --lock NAME      the lock (required)
  --wait DURATION  how long to wait for the lock (default forever)
  --shared         a shared (reader) hold
  --ttl DURATION   session TTL (default 10s)
  --grace DURATION after a session loss, time between SIGTERM and SIGKILL
                   (default 10s)

Exit: the command's code (128+N if killed by signal N); 122 session lost while
it ran; 124 lock not acquired within --wait; 125 usage or server error before
it ran; 126 not executable; 127 not found.
)"},
    {"session", R"(usage: tumbler session open [--ttl DURATION] [--name LABEL]
       tumbler session close ID
       tumbler session keepalive ID [--every DURATION]
       tumbler session info ID

open       opens a session and prints its id (ttl default 10s). It expires
           unless renewed: use `keepalive --every` in the background.
close      closes it, releasing all its holds; prints how many.
keepalive  renews it once, or every DURATION until the session is gone or
           tumbler is killed (exit 4 when the session is gone).
info       shows its TTL, time left, holds and waits.
Exit: 0 ok, 3 server error, 4 no such session.
)"},
    {"inspect", R"(usage: tumbler inspect NAME

Shows the lock's mode, newest token, holders (session, owner, count, token)
and waiters in queue order. A lock that does not exist is shown as free.
)"},
    {"locks", R"(usage: tumbler locks [--match PREFIX] [--count N]

Prints the names of existing locks (held, waited on, or in lock-delay) that
start with PREFIX, one per line, in byte order; at most N (default 1000).
)"},
    {"sessions", R"(usage: tumbler sessions [--count N]

Prints session ids, one per line, ascending; at most N (default 1000).
)"},
    {"info", R"(usage: tumbler info [SECTION]

Prints the server's INFO text: role, leader, term, commit_index, sessions,
locks, waiters, connections, uptime_s, version.
)"},
    {"cluster", R"(usage: tumbler cluster status
       tumbler cluster add ID HOST:RAFTPORT
       tumbler cluster remove ID
       tumbler cluster transfer [ID]

status    the members (id, raft address, role) and which one leads, as the
          node reached first sees them.
add       adds node ID, started with `tumblerd --join ...` and listening for
          raft on HOST:RAFTPORT; it becomes a voter once it has caught up.
remove    removes node ID (its process may then be stopped).
transfer  hands leadership to node ID, or to the most up-to-date voter: for
          planned restarts of the leader.
Changes go to the leader (followed through NOTLEADER); one at a time.
Exit: 0 ok, 2 usage, 3 server error or refused change.
)"},
    {"backends", R"(usage: tumbler backends [--markdown]

Prints which properties each lock backend of the client library provides
(yes / partial / no) and how. --markdown prints the table of docs/backends.md.
Needs no server. Exit: 0.
)"},
    {"check", R"(usage: tumbler check NAME TOKEN

Prints 1 and exits 0 if TOKEN is the token of a current holder of NAME, else
prints 0 and exits 1.
)"},
};

const char* HelpFor(std::string_view command) {
  for (const CommandHelp& h : kCommandHelp) {
    if (command == h.name) return h.text;
  }
  return nullptr;
}

// --- Output -------------------------------------------------------------------

// Names and tags are binary-safe: show control bytes escaped so that one
// name stays on one line.
std::string Printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string Text(const Value* v) {
  if (v == nullptr) return "-";
  if (v->type == Value::Type::kInteger || v->type == Value::Type::kBoolean) {
    return std::to_string(v->integer);
  }
  if (v->type == Value::Type::kNull) return "-";
  return Printable(v->str);
}

int Fail(const Status& status, int code) {
  std::cerr << "tumbler: " << status.ToString() << "\n";
  return code;
}

int Fail(const Status& status) { return Fail(status, ExitCodeFor(status)); }

int Usage(const std::string& message, const char* command) {
  std::cerr << "tumbler: " << message << "\n";
  if (command != nullptr) {
    std::cerr << "run `tumbler " << command << " --help` for usage\n";
  } else {
    std::cerr << "run `tumbler --help` for usage\n";
  }
  return kExitUsage;
}

// --- Server access ------------------------------------------------------------

struct Globals {
  std::string server = kDefaultServer;
  milliseconds timeout = kDefaultTimeout;
};

// Sends single commands to the cluster named by --server.
class Server {
 public:
  static Result<std::unique_ptr<Server>> Open(const Globals& globals) {
    auto endpoints = client::ParseServerUrl(globals.server);
    if (!endpoints.ok()) return endpoints.status();
    return std::unique_ptr<Server>(new Server(std::move(endpoints).value(), globals.timeout));
  }

  // A request that does not block: bounded by --timeout, sent again after a
  // broken connection only if `idempotent`.
  Result<Value> Call(const std::vector<std::string_view>& args, bool idempotent = true) {
    client::CallOptions call;
    call.deadline = Clock::now() + timeout_;
    call.resend_if_unsure = idempotent;
    return channel_->Call(args, call).reply;
  }

  // A LOCK ... WAIT: no bound on the reply beyond the wait itself (+ timeout).
  client::CallOutcome CallWaiting(const std::vector<std::string_view>& args,
                                  std::optional<milliseconds> wait) {
    client::CallOptions call;
    if (wait) call.deadline = Clock::now() + *wait + timeout_;
    call.unbounded_reply = true;
    call.resend_if_unsure = false;
    return channel_->Call(args, call);
  }

  // Another Server on the same endpoints (for a concurrent keepalive).
  std::unique_ptr<Server> Sibling() const {
    return std::unique_ptr<Server>(new Server(endpoints_, timeout_));
  }

 private:
  Server(std::vector<client::Endpoint> endpoints, milliseconds timeout)
      : Server(std::make_shared<client::EndpointSet>(std::move(endpoints)), timeout) {}
  Server(std::shared_ptr<client::EndpointSet> endpoints, milliseconds timeout)
      : endpoints_(std::move(endpoints)), timeout_(timeout) {
    client::ChannelOptions options;
    options.connect_timeout = std::min(timeout_, milliseconds(2000));
    options.reply_timeout = timeout_;
    channel_ = std::make_unique<client::Channel>(endpoints_, options);
  }

  std::shared_ptr<client::EndpointSet> endpoints_;
  milliseconds timeout_;
  std::unique_ptr<client::Channel> channel_;
};

// Renews a session from a thread of its own while the main thread is blocked
// in a LOCK ... WAIT (the wait itself renews only when it starts).
class KeepaliveThread {
 public:
  KeepaliveThread(std::unique_ptr<Server> server, std::string session, milliseconds every)
      : server_(std::move(server)), session_(std::move(session)), every_(every) {
    thread_ = std::thread([this] { Run(); });
  }
  ~KeepaliveThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, every_, [this] { return stop_; })) {
      lock.unlock();
      Result<Value> reply = server_->Call({"SESSION", "KEEPALIVE", session_});
      lock.lock();
      // A lost session ends the wait with NOSESSION: the main thread reports.
      if (!reply.ok() && reply.status().code() == StatusCode::kNoSession) return;
    }
  }

  std::unique_ptr<Server> server_;
  std::string session_;
  milliseconds every_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// --- Option helpers -----------------------------------------------------------

const std::vector<FlagSpec> kGlobalFlags = {{"--server", true}, {"--timeout", true},
                                            {"--help", false}};

std::vector<FlagSpec> WithGlobals(std::vector<FlagSpec> spec) {
  spec.insert(spec.end(), kGlobalFlags.begin(), kGlobalFlags.end());
  return spec;
}

// Applies --server / --timeout given after the command.
Status ApplyGlobals(const ParsedArgs& args, Globals* globals) {
  if (args.has("--server")) globals->server = args.get("--server");
  if (args.has("--timeout")) {
    auto d = ParseDuration(args.get("--timeout"));
    if (!d.ok()) return d.status();
    if (!d->has_value() || **d <= milliseconds(0)) {
      return Status(StatusCode::kInvalidArgument, "--timeout must be a positive duration");
    }
    globals->timeout = **d;
  }
  return Status::Ok();
}

Result<std::optional<milliseconds>> WaitFlag(const ParsedArgs& args) {
  if (!args.has("--wait")) return std::optional<milliseconds>();
  auto d = ParseDuration(args.get("--wait"));
  if (!d.ok()) return d.status();
  if (d->has_value() && static_cast<uint64_t>((*d)->count()) > limits::kWaitMsMax) {
    return Status(StatusCode::kInvalidArgument, "--wait is at most 24h (or forever)");
  }
  return d;
}

Result<milliseconds> TtlFlag(const ParsedArgs& args, const char* flag = "--ttl") {
  if (!args.has(flag)) return kDefaultTtl;
  auto d = ParseDuration(args.get(flag));
  if (!d.ok()) return d.status();
  if (!d->has_value() || **d < milliseconds(limits::kSessionTtlMsMin) ||
      **d > milliseconds(limits::kSessionTtlMsMax)) {
    return Status(StatusCode::kInvalidArgument, std::string(flag) + " must be 100ms .. 1h");
  }
  return **d;
}

// Parses a subcommand's arguments; on --help prints its help and sets
// *exit_code to 0; on an error prints usage and sets *exit_code to 2.
std::optional<ParsedArgs> ParseCommand(const char* command, const std::vector<std::string>& argv,
                                       const std::vector<FlagSpec>& spec, bool allow_dashes,
                                       Globals* globals, int* exit_code,
                                       int usage_code = kExitUsage) {
  Result<ParsedArgs> args = ParseArgs(argv, WithGlobals(spec), allow_dashes);
  if (args.ok() && args->has("--help")) {
    std::cout << HelpFor(command);
    *exit_code = kExitOk;
    return std::nullopt;
  }
  Status status = args.ok() ? ApplyGlobals(*args, globals) : args.status();
  if (!status.ok()) {
    Usage(status.message(), command);
    *exit_code = usage_code;
    return std::nullopt;
  }
  return std::move(args).value();
}

// --- Commands -----------------------------------------------------------------

int CmdLock(Globals globals, const std::vector<std::string>& argv) {
  int code = 0;
  auto args = ParseCommand("lock", argv,
                           {{"--wait", true}, {"--shared", false}, {"--session", true},
                            {"--owner", true}, {"--ttl", true}},
                           false, &globals, &code);
  if (!args) return code;
  if (args->positional.size() != 1) return Usage("lock takes one lock NAME", "lock");
  const std::string& name = args->positional[0];
  auto wait = WaitFlag(*args);
  if (!wait.ok()) return Usage(wait.status().message(), "lock");
  auto ttl = TtlFlag(*args);
  if (!ttl.ok()) return Usage(ttl.status().message(), "lock");
  if (args->has("--session") && args->has("--ttl")) {
    return Usage("--ttl applies only without --session", "lock");
  }
  auto server = Server::Open(globals);
  if (!server.ok()) return Fail(server.status());

  // The session: given, or opened here.
  std::string session;
  milliseconds session_ttl = *ttl;
  bool own_session = !args->has("--session");
  if (!own_session) {
    auto id = ParseUnsigned(args->get("--session"), "session id");
    if (!id.ok()) return Usage(id.status().message(), "lock");
    session = std::to_string(*id);
    // Its TTL sets the renewal period while waiting.
    auto info = (*server)->Call({"SESSION", "INFO", session});
    if (!info.ok()) return Fail(info.status());
    const Value* ttl_ms = info->Find("ttl_ms");
    if (ttl_ms != nullptr && ttl_ms->integer > 0) session_ttl = milliseconds(ttl_ms->integer);
  } else {
    std::string ttl_text = std::to_string(ttl->count());
    auto opened = (*server)->Call({"SESSION", "OPEN", ttl_text, "NAME", "tumbler lock"});
    if (!opened.ok()) return Fail(opened.status());
    session = std::to_string(opened->integer);
  }
  auto close_own = [&] {
    if (own_session) (*server)->Call({"SESSION", "CLOSE", session}).status().IgnoreError();
  };

  std::vector<std::string_view> lock = {"LOCK", name, session};
  std::string owner = args->get("--owner");
  if (!owner.empty()) {
    lock.push_back("OWNER");
    lock.push_back(owner);
  }
  if (args->has("--shared")) lock.push_back("SHARED");
  std::string wait_text;
  bool waits = !wait->has_value() || (*wait)->count() > 0;
  if (waits) {
    wait_text = wait->has_value() ? std::to_string((*wait)->count()) : "FOREVER";
    lock.push_back("WAIT");
    lock.push_back(wait_text);
  }
  client::CallOutcome outcome;
  {
    std::optional<KeepaliveThread> keepalive;
    if (waits) keepalive.emplace((*server)->Sibling(), session, session_ttl / 3);
    outcome = (*server)->CallWaiting(lock, waits ? *wait : std::optional<milliseconds>(milliseconds(0)));
  }
  if (!outcome.reply.ok()) {
    const Status& status = outcome.reply.status();
    if (outcome.maybe_applied) {
      std::cerr << "tumbler: the connection broke after LOCK was sent: the lock may be held; "
                   "check with `tumbler inspect`\n";
    } else {
      close_own();
    }
    return Fail(status);
  }
  if (outcome.reply->IsNull()) {
    close_own();
    std::cerr << "tumbler: " << Printable(name) << " not acquired"
              << (waits ? " within " + FormatDuration(*wait) : std::string(": held by another"))
              << "\n";
    return kExitNotAcquired;
  }
  const Value& grant = outcome.reply.value();
  if (grant.type != Value::Type::kArray || grant.elements.size() != 2) {
    return Fail(Status(StatusCode::kProtocol, "unexpected reply to LOCK"));
  }
  std::cout << grant.elements[0].integer << std::endl;
  if (own_session) {
    std::cerr << "tumbler: held under session " << session << " (ttl " << FormatDuration(*ttl)
              << "), which is not renewed: renew with `tumbler session keepalive " << session
              << "`, release with `tumbler unlock " << Printable(name) << " --session " << session
              << "`\n";
  }
  return kExitOk;
}

int CmdUnlock(Globals globals, const std::vector<std::string>& argv) {
  int code = 0;
  auto args = ParseCommand("unlock", argv, {{"--session", true}, {"--owner", true}}, false,
                           &globals, &code);
  if (!args) return code;
  if (args->positional.size() != 1) return Usage("unlock takes one lock NAME", "unlock");
  if (!args->has("--session")) return Usage("unlock needs --session ID", "unlock");
  auto id = ParseUnsigned(args->get("--session"), "session id");
  if (!id.ok()) return Usage(id.status().message(), "unlock");
  auto server = Server::Open(globals);
  if (!server.ok()) return Fail(server.status());
  std::string session = std::to_string(*id);
  std::vector<std::string_view> unlock = {"UNLOCK", args->positional[0], session};
  std::string owner = args->get("--owner");
  if (!owner.empty()) {
    unlock.push_back("OWNER");
    unlock.push_back(owner);
  }
  // Not idempotent: a second UNLOCK would release a reentrant hold too.
  auto reply = (*server)->Call(unlock, /*idempotent=*/false);
  if (!reply.ok()) return Fail(reply.status());
  if (reply->integer == 0) {
    std::cout << "released " << Printable(args->positional[0]) << "\n";
  } else {
    std::cout << Printable(args->positional[0]) << " still held (" << reply->integer
              << " reentrant holds left)\n";
  }
  return kExitOk;
}

void PrintSessionInfo(const Value& info) {
  auto list = [](const Value* v) {
    if (v == nullptr || v->elements.empty()) return std::string("-");
    std::string out;
    for (const Value& e : v->elements) {
      if (!out.empty()) out += ", ";
      out += Printable(e.str);
    }
    return out;
  };
  std::cout << "id:            " << Text(info.Find("id")) << "\n"
            << "name:          " << Text(info.Find("name")) << "\n"
            << "ttl_ms:        " << Text(info.Find("ttl_ms")) << "\n"
            << "expires_in_ms: " << Text(info.Find("expires_in_ms")) << "\n"
            << "holds:         " << list(info.Find("holds")) << "\n"
            << "waiting:       " << list(info.Find("waiting")) << "\n";
}

int CmdSession(Globals globals, const std::vector<std::string>& argv) {
  int code = 0;
  auto args = ParseCommand("session", argv, {{"--ttl", true}, {"--name", true}, {"--every", true}},
                           false, &globals, &code);
  if (!args) return code;
  if (args->positional.empty()) return Usage("session needs open|close|keepalive|info", "session");
  const std::string& action = args->positional[0];
  auto server = Server::Open(globals);
  if (!server.ok()) return Fail(server.status());

  if (action == "open") {
    if (args->positional.size() != 1) return Usage("session open takes no arguments", "session");
    auto ttl = TtlFlag(*args);
    if (!ttl.ok()) return Usage(ttl.status().message(), "session");
    std::string ttl_text = std::to_string(ttl->count());
    std::vector<std::string_view> open = {"SESSION", "OPEN", ttl_text};
    std::string label = args->get("--name");
    if (!label.empty()) {
      open.push_back("NAME");
      open.push_back(label);
    }
    // Not resent: a duplicate would leave an unused session until its TTL.
    auto reply = (*server)->Call(open, /*idempotent=*/false);
    if (!reply.ok()) return Fail(reply.status());
    std::cout << reply->integer << "\n";
    return kExitOk;
  }
  if (args->positional.size() != 2) {
    return Usage("session " + action + " takes one session ID", "session");
  }
  auto id = ParseUnsigned(args->positional[1], "session id");
  if (!id.ok()) return Usage(id.status().message(), "session");
  std::string session = std::to_string(*id);
  if (action == "close") {
    auto reply = (*server)->Call({"SESSION", "CLOSE", session});
    if (!reply.ok()) return Fail(reply.status());
    std::cout << "closed session " << session << " (" << reply->integer << " holds released)\n";
    return kExitOk;
  }
  if (action == "info") {
    auto reply = (*server)->Call({"SESSION", "INFO", session});
    if (!reply.ok()) return Fail(reply.status());
    PrintSessionInfo(*reply);
    return kExitOk;
  }
  if (action == "keepalive") {
    std::optional<milliseconds> every;
    if (args->has("--every")) {
      auto d = ParseDuration(args->get("--every"));
      if (!d.ok() || !d->has_value() || **d <= milliseconds(0)) {
        return Usage("--every needs a positive duration", "session");
      }
      every = **d;
    }
    while (true) {
      auto reply = (*server)->Call({"SESSION", "KEEPALIVE", session});
      if (!every) {
        if (!reply.ok()) return Fail(reply.status());
        std::cout << "session " << session << " renewed for "
                  << FormatDuration(milliseconds(reply->integer)) << "\n";
        return kExitOk;
      }
      // In a loop, only the session's end stops it: a transient error is
      // retried on the next round.
      if (!reply.ok()) {
        if (ExitCodeFor(reply.status()) == kExitSessionLost) return Fail(reply.status());
        std::cerr << "tumbler: " << reply.status().ToString() << " (retrying)\n";
      }
      std::this_thread::sleep_for(*every);
    }
  }
  return Usage("unknown session action \"" + action + "\"", "session");
}

int CmdInspect(Globals globals, const std::vector<std::string>& argv) {
  int code = 0;
  auto args = ParseCommand("inspect", argv, {}, false, &globals, &code);
  if (!args) return code;
  if (args->positional.size() != 1) return Usage("inspect takes one lock NAME", "inspect");
  auto server = Server::Open(globals);
  if (!server.ok()) return Fail(server.status());
  auto reply = (*server)->Call({"INSPECT", args->positional[0]});
  if (!reply.ok()) return Fail(reply.status());
  const Value& v = *reply;
  std::cout << "name:    " << Text(v.Find("name")) << "\n"
            << "mode:    " << Text(v.Find("mode")) << "\n"
            << "token:   " << Text(v.Find("token")) << "\n";
  const Value* delay = v.Find("lock_delay_ms");
  if (delay != nullptr && delay->integer > 0) {
    std::cout << "lock-delay: " << delay->integer << " ms left\n";
  }
  const Value* holders = v.Find("holders");
  size_t holders_count = holders != nullptr ? holders->elements.size() : 0;
  std::cout << "holders: " << holders_count << "\n";
  for (size_t i = 0; i < holders_count; ++i) {
    const Value& h = holders->elements[i];
    std::cout << "  session " << Text(h.Find("session")) << "  owner \"" << Text(h.Find("owner"))
              << "\"  count " << Text(h.Find("count")) << "  token " << Text(h.Find("token"))
              << "\n";
  }
  const Value* waiters = v.Find("waiters");
  size_t waiters_count = waiters != nullptr ? waiters->elements.size() : 0;
  std::cout << "waiters: " << waiters_count << "\n";
  for (size_t i = 0; i < waiters_count; ++i) {
    const Value& w = waiters->elements[i];
    std::cout << "  " << i + 1 << ". session " << Text(w.Find("session")) << "  owner \""
              << Text(w.Find("owner")) << "\"  " << Text(w.Find("mode")) << "\n";
  }
  return kExitOk;
}

// LOCKS / SESSION LIST: one element per line.
int PrintList(const Result<Value>& reply) {
  if (!reply.ok()) return Fail(reply.status());
  for (const Value& e : reply->elements) std::cout << Text(&e) << "\n";
  return kExitOk;
}

Result<std::string> CountFlag(const ParsedArgs& args) {
  if (!args.has("--count")) return std::string();
  auto n = ParseUnsigned(args.get("--count"), "count");
  if (!n.ok()) return n.status();
  if (*n < 1 || *n > limits::kListCountMax) {
    return Status(StatusCode::kInvalidArgument, "--count must be 1 .. 100000");
  }
  return std::to_string(*n);
}

int CmdLocks(Globals globals, const std::vector<std::string>& argv) {
  int code = 0;
  auto args = ParseCommand("locks", argv, {{"--match", true}, {"--count", true}}, false, &globals,
                           &code);
  if (!args) return code;
  if (!args->positional.empty()) return Usage("locks takes no arguments", "locks");
  auto count = CountFlag(*args);
  if (!count.ok()) return Usage(count.status().message(), "locks");
  auto server = Server::Open(globals);
  if (!server.ok()) return Fail(server.status());
  std::vector<std::string_view> cmd = {"LOCKS"};
  std::string prefix = args->get("--match");
  if (args->has("--match")) {
    cmd.push_back("MATCH");
    cmd.push_back(prefix);
  }
  if (!count->empty()) {
    cmd.push_back("COUNT");
    cmd.push_back(*count);
  }
  return PrintList((*server)->Call(cmd));
}

int CmdSessions(Globals globals, const std::vector<std::string>& argv) {
  int code = 0;
  auto args = ParseCommand("sessions", argv, {{"--count", true}}, false, &globals, &code);
  if (!args) return code;
  if (!args->positional.empty()) return Usage("sessions takes no arguments", "sessions");
  auto count = CountFlag(*args);
  if (!count.ok()) return Usage(count.status().message(), "sessions");
  auto server = Server::Open(globals);
  if (!server.ok()) return Fail(server.status());
  std::vector<std::string_view> cmd = {"SESSION", "LIST"};
  if (!count->empty()) {
    cmd.push_back("COUNT");
    cmd.push_back(*count);
  }
  return PrintList((*server)->Call(cmd));
}

int CmdInfo(Globals globals, const std::vector<std::string>& argv) {
  int code = 0;
  auto args = ParseCommand("info", argv, {}, false, &globals, &code);
  if (!args) return code;
  if (args->positional.size() > 1) return Usage("info takes at most one SECTION", "info");
  auto server = Server::Open(globals);
  if (!server.ok()) return Fail(server.status());
  std::vector<std::string_view> cmd = {"INFO"};
  if (!args->positional.empty()) cmd.push_back(args->positional[0]);
  auto reply = (*server)->Call(cmd);
  if (!reply.ok()) return Fail(reply.status());
  std::cout << reply->str;
  if (!reply->str.empty() && reply->str.back() != '\n') std::cout << "\n";
  return kExitOk;
}

int CmdCheck(Globals globals, const std::vector<std::string>& argv) {
  int code = 0;
  auto args = ParseCommand("check", argv, {}, false, &globals, &code);
  if (!args) return code;
  if (args->positional.size() != 2) return Usage("check takes NAME and TOKEN", "check");
  auto token = ParseUnsigned(args->positional[1], "token");
  if (!token.ok()) return Usage(token.status().message(), "check");
  auto server = Server::Open(globals);
  if (!server.ok()) return Fail(server.status());
  auto reply = (*server)->Call({"CHECK", args->positional[0], args->positional[1]});
  if (!reply.ok()) return Fail(reply.status());
  std::cout << reply->integer << "\n";
  return reply->integer == 1 ? kExitOk : kExitNotAcquired;
}

// --- run ----------------------------------------------------------------------

// Signals and the session-lost callback reach the main loop through this pipe
// (async-signal-safe): one byte each, the signal number or kLostByte.
int g_wake_pipe[2] = {-1, -1};
constexpr unsigned char kLostByte = 0;
constexpr unsigned char kChildByte = 255;

void OnSignal(int signal, siginfo_t* info, void*) {
  int saved_errno = errno;
  unsigned char byte = static_cast<unsigned char>(signal);
  if (signal == SIGCHLD) {
    byte = kChildByte;
  } else if (info != nullptr && info->si_code > 0) {
    // Sent by the kernel (a terminal's Ctrl-C, Ctrl-\, hang-up): the command,
    // in the same process group, got it too. Do not send it twice.
    errno = saved_errno;
    return;
  }
  ssize_t n = ::write(g_wake_pipe[1], &byte, 1);
  (void)n;
  errno = saved_errno;
}

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

Status InstallHandlers() {
  if (::pipe2(g_wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Status(StatusCode::kUnavailable, std::string("pipe: ") + std::strerror(errno));
  }
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_sigaction = OnSignal;
  action.sa_flags = SA_SIGINFO | SA_RESTART | SA_NOCLDSTOP;
  sigemptyset(&action.sa_mask);
  for (int signal : kForwardedSignals) ::sigaction(signal, &action, nullptr);
  ::sigaction(SIGCHLD, &action, nullptr);
  return Status::Ok();
}

// The command's environment: ours plus the TUMBLER_* variables. Built before
// fork(): the child of a multi-threaded process may only call
// async-signal-safe functions until it execs.
std::vector<std::string> ChildEnvironment(const std::vector<std::pair<std::string, std::string>>& add) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (const auto& [key, value] : add) {
      if (entry.substr(0, key.size() + 1) == key + "=") replaced = true;
    }
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [key, value] : add) env.push_back(key + "=" + value);
  return env;
}

int CmdRun(Globals globals, const std::vector<std::string>& argv) {
  int code = 0;
  auto args = ParseCommand("run", argv,
                           {{"--lock", true}, {"--wait", true}, {"--ttl", true},
                            {"--shared", false}, {"--grace", true}},
                           true, &globals, &code, kExitRunFailed);
  if (!args) return code;
  auto usage = [](const std::string& message) {
    Usage(message, "run");
    return kExitRunFailed;
  };
  if (!args->has("--lock") || args->get("--lock").empty()) return usage("run needs --lock NAME");
  if (!args->positional.empty()) return usage("put the command after \"--\"");
  if (args->after_dashes.empty()) return usage("run needs a command after \"--\"");
  auto wait = WaitFlag(*args);
  if (!wait.ok()) return usage(wait.status().message());
  auto ttl = TtlFlag(*args);
  if (!ttl.ok()) return usage(ttl.status().message());
  milliseconds grace = kDefaultGrace;
  if (args->has("--grace")) {
    auto d = ParseDuration(args->get("--grace"));
    if (!d.ok() || !d->has_value()) return usage("--grace needs a duration");
    grace = **d;
  }
  const std::string name = args->get("--lock");
  const bool shared = args->has("--shared");

  ClientOptions options;
  options.session_ttl = *ttl;
  options.op_timeout = globals.timeout;
  options.connect_timeout = std::min(globals.timeout, milliseconds(2000));
  options.session_name = "tumbler run";
  Result<Client> client = Client::Connect(globals.server, options);
  if (!client.ok()) return Fail(client.status(), kExitRunFailed);

  SharedMutex lock = client->NewSharedMutex(name);
  Result<bool> got = true;
  if (!wait->has_value()) {
    Status s = shared ? lock.LockShared() : lock.Lock();
    if (!s.ok()) got = s;
  } else {
    got = shared ? lock.TryLockSharedFor(**wait) : lock.TryLockFor(**wait);
  }
  if (!got.ok()) {
    if (got.status().code() == StatusCode::kDeadlock) {
      return Fail(got.status(), kExitRunNotAcquired);
    }
    return Fail(got.status(), kExitRunFailed);
  }
  if (!*got) {
    std::cerr << "tumbler: " << Printable(name) << " not acquired within "
              << FormatDuration(*wait) << "; the command was not run\n";
    return kExitRunNotAcquired;
  }
  const uint64_t token = lock.token();

  if (Status s = InstallHandlers(); !s.ok()) return Fail(s, kExitRunFailed);
  client->OnSessionLost([](const Status&) {
    unsigned char byte = kLostByte;
    ssize_t n = ::write(g_wake_pipe[1], &byte, 1);
    (void)n;
  });

  std::vector<std::string> env = ChildEnvironment({{"TUMBLER_TOKEN", std::to_string(token)},
                                                   {"TUMBLER_LOCK", name},
                                                   {"TUMBLER_SESSION", std::to_string(client->SessionId())},
                                                   {"TUMBLER_SERVER", globals.server}});
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> command = args->after_dashes;
  std::vector<char*> child_argv;
  for (std::string& a : command) child_argv.push_back(a.data());
  child_argv.push_back(nullptr);
  const std::string not_found = "tumbler: " + command[0] + ": command not found\n";
  const std::string cannot_exec = "tumbler: " + command[0] + ": cannot execute\n";

  pid_t child = ::fork();
  if (child < 0) {
    return Fail(Status(StatusCode::kUnavailable, std::string("fork: ") + std::strerror(errno)),
                kExitRunFailed);
  }
  if (child == 0) {
    // Async-signal-safe calls only from here to exec.
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int signal : kForwardedSignals) ::sigaction(signal, &dfl, nullptr);
    ::sigaction(SIGCHLD, &dfl, nullptr);
    ::execvpe(child_argv[0], child_argv.data(), envp.data());
    int err = errno;
    const std::string& message = err == ENOENT ? not_found : cannot_exec;
    ssize_t n = ::write(STDERR_FILENO, message.data(), message.size());
    (void)n;
    ::_exit(err == ENOENT ? kExitRunNotFound : kExitRunCannotExec);
  }

  bool lost = false;
  // After a session loss: when SIGKILL follows the SIGTERM (if kill_pending).
  bool kill_pending = false;
  Clock::time_point kill_at{};
  int wait_status = 0;
  while (true) {
    pid_t done = ::waitpid(child, &wait_status, WNOHANG);
    if (done == child) break;
    int timeout_ms = -1;
    if (kill_pending) {
      auto left = std::chrono::ceil<milliseconds>(kill_at - Clock::now()).count();
      timeout_ms = left < 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1'000'000));
    }
    struct pollfd p = {g_wake_pipe[0], POLLIN, 0};
    int n = ::poll(&p, 1, timeout_ms);
    if (n < 0 && errno != EINTR) break;
    if (kill_pending && Clock::now() >= kill_at) {
      std::cerr << "tumbler: the command did not exit within " << FormatDuration(grace)
                << " of SIGTERM; sending SIGKILL\n";
      ::kill(child, SIGKILL);
      kill_pending = false;
    }
    unsigned char bytes[64];
    ssize_t got_bytes;
    while ((got_bytes = ::read(g_wake_pipe[0], bytes, sizeof bytes)) > 0) {
      for (ssize_t i = 0; i < got_bytes; ++i) {
        unsigned char b = bytes[i];
        if (b == kChildByte) continue;  // waitpid at the top of the loop
        if (b == kLostByte) {
          if (lost) continue;
          lost = true;
          std::cerr << "tumbler: " << client->SessionStatus().ToString()
                    << "; the lock may be granted to another holder: sending SIGTERM to the "
                       "command\n";
          ::kill(child, SIGTERM);
          kill_at = Clock::now() + grace;
          kill_pending = true;
          continue;
        }
        ::kill(child, b);  // a forwarded signal
      }
    }
  }
  int child_code = WIFEXITED(wait_status)   ? WEXITSTATUS(wait_status)
                   : WIFSIGNALED(wait_status) ? 128 + WTERMSIG(wait_status)
                                              : kExitRunFailed;
  if (lost) return kExitRunSessionLost;
  Status unlocked = shared ? lock.UnlockShared() : lock.Unlock();
  Status closed = client->Close();
  if (!unlocked.ok() || !closed.ok()) {
    std::cerr << "tumbler: warning: the release was not confirmed ("
              << (!unlocked.ok() ? unlocked : closed).ToString()
              << "); the session's TTL will release the lock\n";
  }
  return child_code;
}

// --- main ---------------------------------------------------------------------

struct Command {
  const char* name;
  int (*run)(Globals, const std::vector<std::string>&);
};

int CmdCluster(Globals globals, const std::vector<std::string>& argv) {
  int code = 0;
  auto args = ParseCommand("cluster", argv, {}, false, &globals, &code);
  if (!args) return code;
  const std::vector<std::string>& p = args->positional;
  if (p.empty()) return Usage("cluster needs status, add, remove or transfer", "cluster");
  std::vector<std::string_view> cmd = {"CLUSTER"};
  if (p[0] == "status" && p.size() == 1) {
    cmd.push_back("STATUS");
  } else if (p[0] == "add" && p.size() == 3) {
    auto id = ParseUnsigned(p[1], "node id");
    if (!id.ok()) return Usage(id.status().message(), "cluster");
    if (p[2].find(':') == std::string::npos) return Usage("add needs HOST:RAFTPORT", "cluster");
    cmd.insert(cmd.end(), {"ADD", p[1], p[2]});
  } else if (p[0] == "remove" && p.size() == 2) {
    auto id = ParseUnsigned(p[1], "node id");
    if (!id.ok()) return Usage(id.status().message(), "cluster");
    cmd.insert(cmd.end(), {"REMOVE", p[1]});
  } else if (p[0] == "transfer" && p.size() <= 2) {
    cmd.push_back("TRANSFER");
    if (p.size() == 2) {
      auto id = ParseUnsigned(p[1], "node id");
      if (!id.ok()) return Usage(id.status().message(), "cluster");
      cmd.push_back(p[1]);
    }
  } else {
    return Usage("unknown cluster subcommand or wrong arguments", "cluster");
  }
  auto server = Server::Open(globals);
  if (!server.ok()) return Fail(server.status());
  // Membership changes are not resent after a broken connection: the change
  // may have happened.
  auto reply = (*server)->Call(cmd, /*idempotent=*/p[0] == "status");
  if (!reply.ok()) return Fail(reply.status());
  if (p[0] != "status") {
    std::cout << "ok\n";
    return kExitOk;
  }
  std::cout << "id  role     leader  raft_address           client_address\n";
  for (const Value& node : reply->elements) {
    std::string id = Text(node.Find("id"));
    std::string role = Text(node.Find("role"));
    std::string leader = Text(node.Find("leader")) == "1" ? "*" : "";
    std::string raft = Text(node.Find("raft_address"));
    std::string client_address = Text(node.Find("client_address"));
    std::printf("%-3s %-8s %-7s %-22s %s\n", id.c_str(), role.c_str(), leader.c_str(),
                raft.c_str(), client_address.c_str());
  }
  return kExitOk;
}

int CmdBackends(Globals globals, const std::vector<std::string>& argv) {
  int code = 0;
  auto args = ParseCommand("backends", argv, {{"--markdown", false}}, false, &globals, &code);
  if (!args) return code;
  if (!args->positional.empty()) return Usage("backends takes no arguments", "backends");
  if (args->has("--markdown")) {
    std::cout << BackendsMarkdown();
    return kExitOk;
  }
  for (const BackendInfo& b : Backends()) {
    std::cout << b.scheme << "://  " << b.name << "  (" << b.url << ")\n";
    for (const Capability& c : b.capabilities) {
      std::string_view word = c.support == Support::kYes       ? "yes"
                              : c.support == Support::kPartial ? "partial"
                                                               : "no";
      std::cout << "  " << PropertyName(c.property) << ": " << word << " - " << c.note << "\n";
    }
    std::cout << "\n";
  }
  return kExitOk;
}

const Command kCommands[] = {
    {"lock", CmdLock},       {"unlock", CmdUnlock}, {"run", CmdRun},
    {"session", CmdSession}, {"inspect", CmdInspect}, {"locks", CmdLocks},
    {"sessions", CmdSessions}, {"info", CmdInfo},    {"check", CmdCheck},
    {"cluster", CmdCluster},   {"backends", CmdBackends},
};

int Main(int argc, char** argv) {
  Globals globals;
  if (const char* env = std::getenv("TUMBLER_SERVER"); env != nullptr && *env != '\0') {
    globals.server = env;
  }
  // Global options before the command.
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kMainHelp;
      return kExitOk;
    }
    if (arg == "--version") {
      std::cout << "tumbler " << TUMBLER_VERSION << "\n";
      return kExitOk;
    }
    if (arg.rfind("--", 0) != 0) break;
    std::string flag = arg;
    std::string value;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return Usage(flag + " needs a value", nullptr);
    }
    ParsedArgs parsed;
    if (flag != "--server" && flag != "--timeout") return Usage("unknown option " + flag, nullptr);
    parsed.flags[flag] = value;
    if (Status s = ApplyGlobals(parsed, &globals); !s.ok()) return Usage(s.message(), nullptr);
  }
  if (i >= argc) {
    std::cerr << kMainHelp;
    return kExitUsage;
  }
  std::string name = argv[i];
  std::vector<std::string> rest(argv + i + 1, argv + argc);
  if (name == "help") {
    if (rest.empty()) {
      std::cout << kMainHelp;
      return kExitOk;
    }
    const char* help = HelpFor(rest[0]);
    if (help == nullptr) return Usage("no such command \"" + rest[0] + "\"", nullptr);
    std::cout << help;
    return kExitOk;
  }
  for (const Command& command : kCommands) {
    if (name == command.name) return command.run(globals, rest);
  }
  return Usage("no such command \"" + name + "\"", nullptr);
}

}  // namespace
}  // namespace tumbler::cli

int main(int argc, char** argv) { return tumbler::cli::Main(argc, argv); }

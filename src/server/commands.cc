// Command handlers. Each validates its request completely before anything is
// changed (error precedence in docs/commands.md: syntax, ranges, lengths, then
// state), then either answers at once or appends one command to the batch.
#include "server/commands.h"

#include <unistd.h>

#include <charconv>
#include <string>

#include "core/limits.h"
#include "server/connection.h"
#include "server/server.h"

namespace tumbler::server {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'a' && x <= 'z') x = static_cast<char>(x - 32);
    if (y >= 'a' && y <= 'z') y = static_cast<char>(y - 32);
    if (x != y) return false;
  }
  return true;
}

// Strict decimal: digits only, no sign, no spaces, no overflow.
bool ParseU64(std::string_view text, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  }
  return out;
}

Dispatched Reply(Connection& conn, const Status& status) {
  conn.writer().Error(status);
  conn.Dirty();
  return Dispatched::kDone;
}

Dispatched ReplyErr(Connection& conn, std::string message) {
  return Reply(conn, Status(StatusCode::kErr, std::move(message)));
}

Status ParseSession(std::string_view text, uint64_t* session) {
  if (!ParseU64(text, session)) {
    return Status(StatusCode::kErr, "session id is not an integer or out of range");
  }
  return Status::Ok();
}

// A count for LOCKS / SESSION LIST: 1..kListCountMax.
Status ParseCount(std::string_view text, uint32_t* count) {
  uint64_t v = 0;
  if (!ParseU64(text, &v) || v < 1 || v > limits::kListCountMax) {
    return Status(StatusCode::kErr,
                  "COUNT must be an integer from 1 to " + std::to_string(limits::kListCountMax));
  }
  *count = static_cast<uint32_t>(v);
  return Status::Ok();
}

Status CheckName(std::string_view name) {
  if (name.empty()) return Status(StatusCode::kErr, "lock name must not be empty");
  if (name.size() > limits::kLockNameBytesMax) {
    return Status(StatusCode::kLimit, "lock name is longer than " +
                                          std::to_string(limits::kLockNameBytesMax) + " bytes");
  }
  return Status::Ok();
}

Status CheckOwner(std::string_view owner) {
  if (owner.size() > limits::kOwnerBytesMax) {
    return Status(StatusCode::kLimit, "owner tag is longer than " +
                                          std::to_string(limits::kOwnerBytesMax) + " bytes");
  }
  return Status::Ok();
}

Dispatched Enqueue(Server& server, Connection& conn, const core::CommandView& cmd,
                   ReplyKind kind) {
  return server.Enqueue(cmd, &conn, kind) ? Dispatched::kDone : Dispatched::kStall;
}

// --- Connection commands ---------------------------------------------------------

Dispatched CmdPing(Server&, Connection& conn, Args args) {
  protocol::ReplyWriter w = conn.writer();
  if (args.size() == 2) {
    w.Bulk(args[1]);
  } else {
    w.SimpleString("PONG");
  }
  conn.Dirty();
  return Dispatched::kDone;
}

Dispatched CmdQuit(Server&, Connection& conn, Args) {
  conn.writer().SimpleString("OK");
  conn.CloseAfterFlush();
  return Dispatched::kDone;
}

Status CheckPassword(const Server& server, std::string_view user, std::string_view password) {
  if (server.config().requirepass.empty()) {
    return Status(StatusCode::kErr,
                  "AUTH <password> called without any password configured for the default "
                  "user. Are you sure your configuration is correct?");
  }
  if (user != "default" || password != server.config().requirepass) {
    return Status(StatusCode::kWrongPass,
                  "invalid username-password pair or user is disabled.");
  }
  return Status::Ok();
}

Dispatched CmdAuth(Server& server, Connection& conn, Args args) {
  std::string_view user = args.size() == 3 ? args[1] : std::string_view("default");
  Status st = CheckPassword(server, user, args.back());
  if (!st.ok()) return Reply(conn, st);
  conn.set_authenticated(true);
  conn.writer().SimpleString("OK");
  conn.Dirty();
  return Dispatched::kDone;
}

Dispatched CmdHello(Server& server, Connection& conn, Args args) {
  int protover = conn.protover();
  size_t i = 1;
  if (args.size() >= 2) {
    uint64_t v = 0;
    if (!ParseU64(args[1], &v)) {
      return ReplyErr(conn, "Protocol version is not an integer or out of range");
    }
    if (v != 2 && v != 3) {
      conn.writer().Error("NOPROTO sorry, this protocol version is not supported");
      conn.Dirty();
      return Dispatched::kDone;
    }
    protover = static_cast<int>(v);
    i = 2;
  }
  std::string_view setname;
  bool has_setname = false;
  bool authed_now = false;
  for (; i < args.size(); ++i) {
    if (EqualsIgnoreCase(args[i], "AUTH") && i + 2 < args.size()) {
      Status st = CheckPassword(server, args[i + 1], args[i + 2]);
      if (!st.ok()) return Reply(conn, st);
      authed_now = true;
      i += 2;
    } else if (EqualsIgnoreCase(args[i], "SETNAME") && i + 1 < args.size()) {
      setname = args[++i];
      has_setname = true;
    } else {
      return ReplyErr(conn, "syntax error in HELLO option '" + std::string(args[i]) + "'");
    }
  }
  if (!conn.authenticated() && !authed_now) {
    return Reply(conn, Status(StatusCode::kNoAuth, "HELLO must be called with the client already "
                                                    "authenticated, otherwise the HELLO <proto> "
                                                    "AUTH <user> <pass> option can be used"));
  }
  if (authed_now) conn.set_authenticated(true);
  if (has_setname) conn.set_name(setname);
  conn.set_protover(protover);
  protocol::ReplyWriter w = conn.writer();
  w.MapHeader(7);
  w.Bulk("server");
  w.Bulk("tumbler");
  w.Bulk("version");
  w.Bulk(TUMBLER_VERSION);
  w.Bulk("proto");
  w.Integer(protover);
  w.Bulk("id");
  w.Integer(static_cast<int64_t>(conn.id()));
  w.Bulk("mode");
  w.Bulk("standalone");
  w.Bulk("role");
  w.Bulk(replication::RoleName(server.EffectiveRole()));
  w.Bulk("modules");
  w.ArrayHeader(0);
  conn.Dirty();
  return Dispatched::kDone;
}

Dispatched CmdClient(Server&, Connection& conn, Args args) {
  protocol::ReplyWriter w = conn.writer();
  if (EqualsIgnoreCase(args[1], "ID") && args.size() == 2) {
    w.Integer(static_cast<int64_t>(conn.id()));
  } else if (EqualsIgnoreCase(args[1], "GETNAME") && args.size() == 2) {
    if (conn.name().empty()) {
      w.Null();
    } else {
      w.Bulk(conn.name());
    }
  } else if (EqualsIgnoreCase(args[1], "SETNAME") && args.size() == 3) {
    if (args[2].find_first_of(" \n\r") != std::string_view::npos || args[2].size() > 256) {
      return ReplyErr(conn, "Client names cannot contain spaces, newlines or special characters.");
    }
    conn.set_name(args[2]);
    w.SimpleString("OK");
  } else {
    return ReplyErr(conn, "unknown subcommand or wrong number of arguments for 'CLIENT|" +
                              std::string(args[1]) + "'");
  }
  conn.Dirty();
  return Dispatched::kDone;
}

Dispatched CmdCommand(Server&, Connection& conn, Args args) {
  protocol::ReplyWriter w = conn.writer();
  auto table = CommandTable();
  if (args.size() == 1) {
    w.ArrayHeader(table.size());
    for (const CommandSpec& spec : table) {
      w.ArrayHeader(6);
      w.Bulk(Lower(spec.name));
      w.Integer(spec.args_max == spec.args_min ? spec.args_min : -spec.args_min);
      w.ArrayHeader((spec.flags & kFlagWrite) ? 1 : 0);
      if (spec.flags & kFlagWrite) w.SimpleString("write");
      w.Integer(0);
      w.Integer(0);
      w.Integer(0);
    }
  } else if (EqualsIgnoreCase(args[1], "COUNT") && args.size() == 2) {
    w.Integer(static_cast<int64_t>(table.size()));
  } else if (EqualsIgnoreCase(args[1], "DOCS")) {
    // redis-cli asks for docs at start-up; tumbler's docs live in docs/.
    w.MapHeader(0);
  } else {
    return ReplyErr(conn, "unknown subcommand '" + std::string(args[1]) + "'");
  }
  conn.Dirty();
  return Dispatched::kDone;
}

// --- Sessions ----------------------------------------------------------------

Dispatched CmdSessionOpen(Server& server, Connection& conn, Args args) {
  uint64_t ttl = 0;
  if (!ParseU64(args[2], &ttl) || ttl < limits::kSessionTtlMsMin || ttl > limits::kSessionTtlMsMax) {
    return ReplyErr(conn, "ttl_ms must be an integer from " +
                              std::to_string(limits::kSessionTtlMsMin) + " to " +
                              std::to_string(limits::kSessionTtlMsMax));
  }
  std::string_view label;
  if (args.size() == 5) {
    if (!EqualsIgnoreCase(args[3], "NAME")) return ReplyErr(conn, "syntax error");
    label = args[4];
  } else if (args.size() != 3) {
    return ReplyErr(conn, "syntax error");
  }
  if (label.size() > limits::kSessionLabelBytesMax) {
    return Reply(conn, Status(StatusCode::kLimit,
                              "session name is longer than " +
                                  std::to_string(limits::kSessionLabelBytesMax) + " bytes"));
  }
  core::CommandView cmd;
  cmd.type = core::CommandType::kOpenSession;
  cmd.ttl_ms = static_cast<uint32_t>(ttl);
  cmd.name = label;
  return Enqueue(server, conn, cmd, ReplyKind::kSessionOpen);
}

// Validates a session argument of a read command and renews its lease.
Status LiveSession(Server& server, std::string_view text, uint64_t* session) {
  Status st = ParseSession(text, session);
  if (!st.ok()) return st;
  if (!server.state().SessionExists(*session) || !server.TouchSession(*session)) {
    return Status(StatusCode::kNoSession, "session " + std::string(text) + " does not exist");
  }
  return Status::Ok();
}

Dispatched CmdSessionKeepalive(Server& server, Connection& conn, Args args) {
  uint64_t session = 0;
  Status st = LiveSession(server, args[2], &session);
  if (!st.ok()) return Reply(conn, st);
  std::optional<core::SessionInfo> info = server.state().GetSession(session);
  conn.writer().Integer(info ? info->ttl_ms : 0);
  conn.Dirty();
  return Dispatched::kDone;
}

Dispatched CmdSessionClose(Server& server, Connection& conn, Args args) {
  uint64_t session = 0;
  Status st = ParseSession(args[2], &session);
  if (!st.ok()) return Reply(conn, st);
  core::CommandView cmd;
  cmd.type = core::CommandType::kCloseSession;
  cmd.session = session;
  return Enqueue(server, conn, cmd, ReplyKind::kSessionClose);
}

void WriteNames(protocol::ReplyWriter& w, const std::vector<std::string>& names) {
  w.ArrayHeader(names.size());
  for (const std::string& n : names) w.Bulk(n);
}

Dispatched CmdSessionInfo(Server& server, Connection& conn, Args args) {
  if (!server.ReadReady(&conn)) return Dispatched::kParked;
  uint64_t session = 0;
  Status st = LiveSession(server, args[2], &session);
  if (!st.ok()) return Reply(conn, st);
  std::optional<core::SessionInfo> info = server.state().GetSession(session);
  protocol::ReplyWriter w = conn.writer();
  w.MapHeader(6);
  w.Bulk("id");
  w.Integer(static_cast<int64_t>(info->id));
  w.Bulk("name");
  w.Bulk(info->label);
  w.Bulk("ttl_ms");
  w.Integer(info->ttl_ms);
  w.Bulk("expires_in_ms");
  w.Integer(server.SessionExpiresInMs(session));
  w.Bulk("holds");
  WriteNames(w, info->holds);
  w.Bulk("waiting");
  WriteNames(w, info->waiting);
  conn.Dirty();
  return Dispatched::kDone;
}

Dispatched CmdSessionList(Server& server, Connection& conn, Args args) {
  if (!server.ReadReady(&conn)) return Dispatched::kParked;
  uint32_t count = limits::kListCountDefault;
  if (args.size() == 4) {
    if (!EqualsIgnoreCase(args[2], "COUNT")) return ReplyErr(conn, "syntax error");
    Status st = ParseCount(args[3], &count);
    if (!st.ok()) return Reply(conn, st);
  } else if (args.size() != 2) {
    return ReplyErr(conn, "syntax error");
  }
  std::vector<uint64_t> ids = server.state().ListSessions(count);
  protocol::ReplyWriter w = conn.writer();
  w.ArrayHeader(ids.size());
  for (uint64_t id : ids) w.Integer(static_cast<int64_t>(id));
  conn.Dirty();
  return Dispatched::kDone;
}

// --- Locks -----------------------------------------------------------------------

Dispatched CmdLock(Server& server, Connection& conn, Args args) {
  core::CommandView cmd;
  cmd.type = core::CommandType::kLock;
  bool has_owner = false, has_wait = false, forever = false;
  uint64_t wait_ms = 0;
  for (size_t i = 3; i < args.size(); ++i) {
    if (EqualsIgnoreCase(args[i], "OWNER") && i + 1 < args.size() && !has_owner) {
      cmd.owner = args[++i];
      has_owner = true;
    } else if (EqualsIgnoreCase(args[i], "SHARED") && !cmd.shared) {
      cmd.shared = true;
    } else if (EqualsIgnoreCase(args[i], "WAIT") && i + 1 < args.size() && !has_wait) {
      has_wait = true;
      ++i;
      if (EqualsIgnoreCase(args[i], "FOREVER")) {
        forever = true;
      } else if (!ParseU64(args[i], &wait_ms) || wait_ms > limits::kWaitMsMax) {
        return ReplyErr(conn, "WAIT must be FOREVER or an integer from 0 to " +
                                  std::to_string(limits::kWaitMsMax));
      }
    } else {
      return ReplyErr(conn, "syntax error");
    }
  }
  Status st = ParseSession(args[2], &cmd.session);
  if (st.ok()) st = CheckName(args[1]);
  if (st.ok()) st = CheckOwner(cmd.owner);
  if (!st.ok()) return Reply(conn, st);
  cmd.name = args[1];
  cmd.wait = forever || wait_ms > 0;
  server.TouchSession(cmd.session);
  if (!cmd.wait) return Enqueue(server, conn, cmd, ReplyKind::kLock);
  Dispatched d = Enqueue(server, conn, cmd, ReplyKind::kLockWait);
  if (d == Dispatched::kDone) conn.Block(wait_ms, forever);
  return d;
}

Dispatched CmdUnlock(Server& server, Connection& conn, Args args) {
  core::CommandView cmd;
  cmd.type = core::CommandType::kUnlock;
  if (args.size() == 5) {
    if (!EqualsIgnoreCase(args[3], "OWNER")) return ReplyErr(conn, "syntax error");
    cmd.owner = args[4];
  } else if (args.size() != 3) {
    return ReplyErr(conn, "syntax error");
  }
  Status st = ParseSession(args[2], &cmd.session);
  if (st.ok()) st = CheckName(args[1]);
  if (st.ok()) st = CheckOwner(cmd.owner);
  if (!st.ok()) return Reply(conn, st);
  cmd.name = args[1];
  server.TouchSession(cmd.session);
  return Enqueue(server, conn, cmd, ReplyKind::kUnlock);
}

Dispatched CmdCheck(Server& server, Connection& conn, Args args) {
  if (!server.ReadReady(&conn)) return Dispatched::kParked;
  uint64_t token = 0;
  if (!ParseU64(args[2], &token)) {
    return ReplyErr(conn, "token is not an integer or out of range");
  }
  Status st = CheckName(args[1]);
  if (!st.ok()) return Reply(conn, st);
  conn.writer().Integer(server.state().Check(args[1], token) ? 1 : 0);
  conn.Dirty();
  return Dispatched::kDone;
}

std::string_view ModeName(core::LockMode mode) {
  switch (mode) {
    case core::LockMode::kFree: return "free";
    case core::LockMode::kExclusive: return "exclusive";
    case core::LockMode::kShared: return "shared";
  }
  return "free";
}

Dispatched CmdInspect(Server& server, Connection& conn, Args args) {
  if (!server.ReadReady(&conn)) return Dispatched::kParked;
  Status st = CheckName(args[1]);
  if (!st.ok()) return Reply(conn, st);
  std::optional<core::LockInfo> info = server.state().Inspect(args[1]);
  core::LockInfo free_lock;
  if (!info) {
    free_lock.name = std::string(args[1]);
    info = std::move(free_lock);
  }
  uint64_t log_now = server.LogClockMs();
  protocol::ReplyWriter w = conn.writer();
  w.MapHeader(6);
  w.Bulk("name");
  w.Bulk(args[1]);
  w.Bulk("mode");
  w.Bulk(ModeName(info->mode));
  w.Bulk("token");
  w.Integer(static_cast<int64_t>(info->token));
  w.Bulk("holders");
  w.ArrayHeader(info->holders.size());
  for (const core::HolderInfo& h : info->holders) {
    w.MapHeader(4);
    w.Bulk("session");
    w.Integer(static_cast<int64_t>(h.session));
    w.Bulk("owner");
    w.Bulk(h.owner);
    w.Bulk("count");
    w.Integer(h.count);
    w.Bulk("token");
    w.Integer(static_cast<int64_t>(h.token));
  }
  w.Bulk("waiters");
  w.ArrayHeader(info->waiters.size());
  for (const core::WaiterInfo& wt : info->waiters) {
    w.MapHeader(3);
    w.Bulk("session");
    w.Integer(static_cast<int64_t>(wt.session));
    w.Bulk("owner");
    w.Bulk(wt.owner);
    w.Bulk("mode");
    w.Bulk(wt.shared ? "shared" : "exclusive");
  }
  w.Bulk("lock_delay_ms");
  w.Integer(info->delay_until_ms > log_now ? static_cast<int64_t>(info->delay_until_ms - log_now)
                                           : 0);
  conn.Dirty();
  return Dispatched::kDone;
}

Dispatched CmdLocks(Server& server, Connection& conn, Args args) {
  if (!server.ReadReady(&conn)) return Dispatched::kParked;
  std::string_view prefix;
  uint32_t count = limits::kListCountDefault;
  bool has_match = false, has_count = false;
  for (size_t i = 1; i < args.size(); ++i) {
    if (EqualsIgnoreCase(args[i], "MATCH") && i + 1 < args.size() && !has_match) {
      prefix = args[++i];
      has_match = true;
    } else if (EqualsIgnoreCase(args[i], "COUNT") && i + 1 < args.size() && !has_count) {
      Status st = ParseCount(args[++i], &count);
      if (!st.ok()) return Reply(conn, st);
      has_count = true;
    } else {
      return ReplyErr(conn, "syntax error");
    }
  }
  if (prefix.size() > limits::kLockNameBytesMax) {
    return Reply(conn, Status(StatusCode::kLimit, "MATCH prefix is longer than a lock name may be"));
  }
  std::vector<std::string> names = server.state().ListLocks(prefix, count);
  protocol::ReplyWriter w = conn.writer();
  WriteNames(w, names);
  conn.Dirty();
  return Dispatched::kDone;
}

// A checksum of the whole state machine as of applied_index: two nodes at the
// same applied_index must show the same digest. It encodes the whole state on
// the loop (a 1M-lock state takes ~0.4 s), so only `INFO digest` computes it.
std::string StateDigest(const Server& server) {
  std::string snapshot;
  server.state().EncodeSnapshot(&snapshot);
  char hex[9];
  // The encoding ends with its own CRC, and a CRC over data plus its CRC is
  // a constant: digest what the CRC covers.
  std::string_view covered(snapshot.data(), snapshot.size() - 4);
  std::snprintf(hex, sizeof(hex), "%08x", core::Crc32c(covered));
  return hex;
}

// --- CLUSTER ---------------------------------------------------------------------

// Answers a membership request when the log reports its outcome: from the
// check phase (Server::Defer), never inside the raft callback.
replication::ReplicatedLog::DoneFn AnswerLater(Server& server, Connection& conn) {
  conn.AddPendingWrite();
  uint64_t conn_id = conn.id();
  Server* s = &server;
  return [s, conn_id](Status status) {
    s->Defer([s, conn_id, status] {
      Connection* c = s->FindConnectionById(conn_id);
      if (c == nullptr) return;
      if (status.ok()) {
        c->writer().SimpleString("OK");
      } else {
        c->writer().Error(status);
      }
      c->Dirty();
      c->PendingWriteDone();
    });
  };
}

// A membership call returned `st`: OK, the reply comes from AnswerLater's
// callback; an error was refused before anything changed: answer it now.
Dispatched ChangeStarted(Server& server, Connection& conn, const Status& st) {
  if (st.ok()) return Dispatched::kDone;
  conn.PendingWriteDone();
  return Reply(conn, st.code() == StatusCode::kNotLeader ? server.NotServingStatus() : st);
}

Dispatched CmdClusterStatus(Server& server, Connection& conn, Args) {
  replication::LogStatus ls = server.log_status();
  protocol::ReplyWriter w = conn.writer();
  std::vector<replication::PeerStatus> peers = server.log().Peers();
  w.ArrayHeader(peers.size());
  for (const replication::PeerStatus& p : peers) {
    bool leader = p.id == ls.leader_id;
    std::string client;
    if (leader && p.id == ls.node_id) {
      client = server.config().AdvertisedAddress();
    } else if (leader && server.state().announced_node_id() == p.id) {
      client = server.state().announced_address();
    }
    w.MapHeader(5);
    w.Bulk("id");
    w.Integer(static_cast<int64_t>(p.id));
    w.Bulk("raft_address");
    w.Bulk(p.address);
    w.Bulk("role");
    w.Bulk(p.role);
    w.Bulk("leader");
    w.Integer(leader ? 1 : 0);
    w.Bulk("client_address");
    w.Bulk(client);
  }
  conn.Dirty();
  return Dispatched::kDone;
}

Dispatched CmdClusterAdd(Server& server, Connection& conn, Args args) {
  uint64_t id = 0;
  if (!ParseU64(args[2], &id) || id == 0) return ReplyErr(conn, "node id must be a number > 0");
  std::string address(args[3]);
  if (address.size() > limits::kAddressBytesMax || address.find(':') == std::string::npos) {
    return ReplyErr(conn, "raft address must be host:port");
  }
  Status st = server.log().AddVoter(id, address, AnswerLater(server, conn));
  return ChangeStarted(server, conn, st);
}

Dispatched CmdClusterRemove(Server& server, Connection& conn, Args args) {
  uint64_t id = 0;
  if (!ParseU64(args[2], &id) || id == 0) return ReplyErr(conn, "node id must be a number > 0");
  Status st = server.log().RemoveNode(id, AnswerLater(server, conn));
  return ChangeStarted(server, conn, st);
}

Dispatched CmdClusterTransfer(Server& server, Connection& conn, Args args) {
  uint64_t id = 0;
  if (args.size() == 3 && (!ParseU64(args[2], &id) || id == 0)) {
    return ReplyErr(conn, "node id must be a number > 0");
  }
  Status st = server.log().TransferLeadership(id, AnswerLater(server, conn));
  return ChangeStarted(server, conn, st);
}

Dispatched CmdInfo(Server& server, Connection& conn, Args args) {
  std::string section = args.size() == 2 ? Lower(args[1]) : "all";
  bool all = section == "all" || section == "default" || section == "everything";
  if (section == "digest") {
    replication::LogStatus ls = server.log_status();
    conn.writer().Bulk("applied_index:" + std::to_string(ls.applied_index) +
                       "\r\nstate_digest:" + StateDigest(server) + "\r\n");
    conn.Dirty();
    return Dispatched::kDone;
  }
  if (!all && section != "server" && section != "replication" && section != "stats") {
    conn.writer().Bulk("");  // as Redis: an unknown section is empty
    conn.Dirty();
    return Dispatched::kDone;
  }
  replication::LogStatus ls = server.log_status();
  core::Stats stats = server.state().GetStats();
  const Config& c = server.config();
  std::string text;
  auto line = [&text](std::string_view key, const std::string& value) {
    text.append(key);
    text += ':';
    text += value;
    text += "\r\n";
  };
  if (all || section == "server") {
    text += "# Server\r\n";
    line("version", TUMBLER_VERSION);
    line("process_id", std::to_string(getpid()));
    line("tcp_port", std::to_string(c.port));
    line("uptime_s", std::to_string(server.uptime_s()));
    line("durability", c.durability == Durability::kRaft ? "raft" : "none");
    line("data_dir", c.durability == Durability::kRaft ? c.data_dir : "");
    line("lock_delay_ms", std::to_string(c.lock_delay_ms));
    line("connections", std::to_string(server.connections_count()));
    line("blocked_clients", std::to_string(server.blocked_count()));
    text += "\r\n";
  }
  if (all || section == "replication") {
    text += "# Replication\r\n";
    line("role", std::string(replication::RoleName(server.EffectiveRole())));
    line("serving", server.serving() ? "1" : "0");
    line("node_id", std::to_string(ls.node_id));
    std::string leader;
    if (ls.leader_id != 0 && ls.leader_id == ls.node_id) {
      leader = c.AdvertisedAddress();
    } else if (ls.leader_id != 0 && server.state().announced_node_id() == ls.leader_id) {
      leader = server.state().announced_address();
    }
    line("leader", leader);
    line("leader_id", std::to_string(ls.leader_id));
    line("advertised_address", c.AdvertisedAddress());
    line("term", std::to_string(ls.term));
    line("commit_index", std::to_string(ls.commit_index));
    line("applied_index", std::to_string(ls.applied_index));
    line("last_index", std::to_string(ls.last_index));
    line("election_timeout_ms", std::to_string(c.election_timeout_ms));
    std::vector<replication::PeerStatus> peers = server.log().Peers();
    line("peers", std::to_string(peers.size()));
    for (size_t i = 0; i < peers.size(); ++i) {
      const replication::PeerStatus& p = peers[i];
      line("peer" + std::to_string(i),
           "id=" + std::to_string(p.id) + ",raft_address=" + p.address + ",role=" + p.role +
               (p.id == ls.leader_id ? ",leader=1" : ",leader=0"));
    }
    text += "\r\n";
  }
  if (all || section == "stats") {
    text += "# Stats\r\n";
    line("sessions", std::to_string(stats.sessions));
    line("locks", std::to_string(stats.locks));
    line("holds", std::to_string(stats.holds));
    line("waiters", std::to_string(stats.waiters));
    line("last_token", std::to_string(stats.last_token));
    line("log_time_ms", std::to_string(stats.log_time_ms));
  }
  conn.writer().Bulk(text);
  conn.Dirty();
  return Dispatched::kDone;
}

// Every command. args_min/args_max count all words, including the command's.
constexpr CommandSpec kCommands[] = {
    {"PING", 1, 2, kFlagNoAuth, "PING [message]", "Answers PONG, or echoes message.", CmdPing},
    {"HELLO", 1, 7, kFlagNoAuth, "HELLO [protover [AUTH username password] [SETNAME name]]",
     "Switches RESP version and returns server facts.", CmdHello},
    {"AUTH", 2, 3, kFlagNoAuth, "AUTH [username] password", "Authenticates the connection.",
     CmdAuth},
    {"QUIT", 1, 1, kFlagNoAuth, "QUIT", "Closes the connection.", CmdQuit},
    {"COMMAND", 1, -1, 0, "COMMAND [COUNT|DOCS]", "Lists the commands.", CmdCommand},
    {"CLIENT", 2, 3, 0, "CLIENT ID|GETNAME|SETNAME name", "Connection name and id.", CmdClient},
    {"SESSION OPEN", 3, 5, kFlagWrite | kFlagNeedsState, "SESSION OPEN ttl_ms [NAME label]",
     "Opens a session; replies its id.", CmdSessionOpen},
    {"SESSION KEEPALIVE", 3, 3, kFlagNeedsState, "SESSION KEEPALIVE session",
     "Renews the session's lease; replies ttl_ms.", CmdSessionKeepalive},
    {"SESSION CLOSE", 3, 3, kFlagWrite | kFlagNeedsState, "SESSION CLOSE session",
     "Closes the session, releasing every hold.", CmdSessionClose},
    {"SESSION INFO", 3, 3, kFlagNeedsState, "SESSION INFO session",
     "Describes the session.", CmdSessionInfo},
    {"SESSION LIST", 2, 4, kFlagNeedsState, "SESSION LIST [COUNT n]", "Lists session ids.",
     CmdSessionList},
    {"LOCK", 3, 9, kFlagWrite | kFlagNeedsState,
     "LOCK name session [OWNER tag] [SHARED] [WAIT ms | WAIT FOREVER]",
     "Acquires (or waits for) a lock; replies [token, hold_count] or null.", CmdLock},
    {"UNLOCK", 3, 5, kFlagWrite | kFlagNeedsState, "UNLOCK name session [OWNER tag]",
     "Releases one hold; replies the hold count left.", CmdUnlock},
    {"CHECK", 3, 3, kFlagNeedsState, "CHECK name token",
     "1 if token belongs to a current holder of name.", CmdCheck},
    {"INSPECT", 2, 2, kFlagNeedsState, "INSPECT name", "Describes a lock.", CmdInspect},
    {"LOCKS", 1, 5, kFlagNeedsState, "LOCKS [MATCH prefix] [COUNT n]",
     "Lists existing locks by prefix.", CmdLocks},
    {"INFO", 1, 2, 0, "INFO [section]", "Server facts as key:value lines.", CmdInfo},
    {"CLUSTER STATUS", 2, 2, 0, "CLUSTER STATUS",
     "The raft configuration: id, raft address, role, leader flag per node.", CmdClusterStatus},
    {"CLUSTER ADD", 4, 4, kFlagNeedsState, "CLUSTER ADD id raft_host:port",
     "Adds a node (started with --join) and makes it a voter once caught up.", CmdClusterAdd},
    {"CLUSTER REMOVE", 3, 3, kFlagNeedsState, "CLUSTER REMOVE id",
     "Removes a node from the configuration.", CmdClusterRemove},
    {"CLUSTER TRANSFER", 2, 3, kFlagNeedsState, "CLUSTER TRANSFER [id]",
     "Hands leadership to node id (or the most up-to-date voter).", CmdClusterTransfer},
};

}  // namespace

std::span<const CommandSpec> CommandTable() { return kCommands; }

const CommandSpec* FindCommand(Args args) {
  if (args.empty()) return nullptr;
  for (const CommandSpec& spec : kCommands) {
    std::string_view name = spec.name;
    size_t space = name.find(' ');
    if (space == std::string_view::npos) {
      if (EqualsIgnoreCase(args[0], name)) return &spec;
    } else if (args.size() >= 2 && EqualsIgnoreCase(args[0], name.substr(0, space)) &&
               EqualsIgnoreCase(args[1], name.substr(space + 1))) {
      return &spec;
    }
  }
  return nullptr;
}

bool IsPipelinedWrite(Args args) {
  const CommandSpec* spec = FindCommand(args);
  return spec != nullptr && (spec->flags & kFlagWrite) != 0;
}

Dispatched Dispatch(Server& server, Connection& conn, Args args) {
  const CommandSpec* spec = FindCommand(args);
  if (spec == nullptr) {
    std::string msg;
    if (args.size() >= 2 && EqualsIgnoreCase(args[0], "SESSION")) {
      msg = "unknown subcommand '" + std::string(args[1]).substr(0, 128) +
            "'. Try SESSION OPEN|KEEPALIVE|CLOSE|INFO|LIST.";
    } else {
      msg = "unknown command '" + std::string(args[0]).substr(0, 128) + "'";
    }
    if (!conn.authenticated()) return Reply(conn, Status(StatusCode::kNoAuth, "Authentication required."));
    return ReplyErr(conn, msg);
  }
  if (!conn.authenticated() && (spec->flags & kFlagNoAuth) == 0) {
    return Reply(conn, Status(StatusCode::kNoAuth, "Authentication required."));
  }
  int n = static_cast<int>(args.size());
  if (n < spec->args_min || (spec->args_max >= 0 && n > spec->args_max)) {
    return ReplyErr(conn, "wrong number of arguments for '" + Lower(spec->name) + "' command");
  }
  if ((spec->flags & kFlagNeedsState) != 0 && !server.serving()) {
    // A read parked for a barrier of a term that ended is answered here: its
    // fence must not satisfy a later read of this connection.
    conn.set_read_fence(0);
    return Reply(conn, server.NotServingStatus());
  }
  if ((spec->flags & kFlagWrite) != 0 && server.QuorumSuspect()) {
    return Reply(conn, Status(StatusCode::kTryAgain,
                              "no quorum: the log is not committing (nothing was changed)"));
  }
  return spec->handler(server, conn, args);
}

}  // namespace tumbler::server

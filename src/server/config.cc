#include "server/config.h"

#include <charconv>
#include <cstdio>
#include <string_view>

namespace tumbler::server {
namespace {

Status FlagError(std::string_view flag, std::string_view why) {
  return Status(StatusCode::kInvalidArgument,
                std::string(flag) + ": " + std::string(why) + " (see --help)");
}

bool ParseU64(std::string_view text, uint64_t* out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

// Parses an integer flag value within [min, max].
template <typename T>
Status ParseBounded(std::string_view flag, std::string_view text, uint64_t min, uint64_t max,
                    T* out) {
  uint64_t v = 0;
  if (!ParseU64(text, &v) || v < min || v > max) {
    return FlagError(flag, "expects a whole number from " + std::to_string(min) + " to " +
                               std::to_string(max) + ", got '" + std::string(text) + "'");
  }
  *out = static_cast<T>(v);
  return Status::Ok();
}

}  // namespace

std::string UsageText() {
  std::string s;
  s += "usage: tumblerd [flags]\n";
  s += "\n";
  s += "A durable lock server speaking RESP (redis-cli works). Flags take a value as\n";
  s += "'--flag value' or '--flag=value'.\n";
  s += "\n";
  s += "  --bind ADDR                  address to listen on (default 127.0.0.1)\n";
  s += "  --port N                     client port (default 7420)\n";
  s += "  --data-dir DIR               raft log and snapshots (default ./data; created)\n";
  s += "  --durability raft|none       raft: fsync before every reply that reports a change\n";
  s += "                               (default); none: memory only, state lost on exit\n";
  s += "  --lock-delay-ms N            after a session EXPIRES, its locks are granted to no\n";
  s += "                               one for N ms (default 0, max 60000)\n";
  s += "  --max-connections N          default 10000\n";
  s += "  --max-sessions N             default 100000\n";
  s += "  --max-locks N                default 4000000\n";
  s += "  --max-waiters-per-lock N     default 10000\n";
  s += "  --max-holds-per-session N    holds plus waits of one session (default 1000000)\n";
  s += "  --requirepass PASSWORD       require AUTH before any other command\n";
  s += "  --snapshot-threshold N       log entries between snapshots (default 65536)\n";
  s += "  --raft-port N                raft transport port on 127.0.0.1 (default: --port + 100;\n";
  s += "                               0 = any free port; a single node never dials it)\n";
  s += "  --log-level LEVEL            error|warn|info|debug (default info)\n";
  s += "  --help                       this text\n";
  s += "  --version                    print the version\n";
  s += "\n";
  s += "Signals: SIGTERM/SIGINT stop the server (stop accepting, drain, exit).\n";
  s += "Docs: docs/operations.md, docs/commands.md, docs/protocol.md.\n";
  return s;
}

Status ParseFlags(int argc, char** argv, Config* c, bool* exit_now) {
  *exit_now = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      fputs(UsageText().c_str(), stdout);
      *exit_now = true;
      return Status::Ok();
    }
    if (arg == "--version") {
      printf("tumblerd %s\n", TUMBLER_VERSION);
      *exit_now = true;
      return Status::Ok();
    }
    if (arg.substr(0, 2) != "--") return FlagError(arg, "unexpected argument");
    std::string_view flag = arg;
    std::string_view value;
    if (size_t eq = arg.find('='); eq != std::string_view::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else {
      if (i + 1 >= argc) return FlagError(flag, "needs a value");
      value = argv[++i];
    }
    Status st;
    if (flag == "--bind") {
      if (value.empty()) return FlagError(flag, "needs an address");
      c->bind = std::string(value);
    } else if (flag == "--port") {
      st = ParseBounded(flag, value, 1, 65535, &c->port);
    } else if (flag == "--data-dir") {
      if (value.empty()) return FlagError(flag, "needs a directory");
      c->data_dir = std::string(value);
    } else if (flag == "--durability") {
      if (value == "raft") c->durability = Durability::kRaft;
      else if (value == "none") c->durability = Durability::kNone;
      else return FlagError(flag, "expects 'raft' or 'none'");
    } else if (flag == "--lock-delay-ms") {
      st = ParseBounded(flag, value, 0, limits::kLockDelayMsMax, &c->lock_delay_ms);
    } else if (flag == "--max-connections") {
      st = ParseBounded(flag, value, 1, limits::kConnectionsMax, &c->connections_max);
    } else if (flag == "--max-sessions") {
      st = ParseBounded(flag, value, 1, limits::kSessionsMax, &c->bounds.sessions_max);
    } else if (flag == "--max-locks") {
      st = ParseBounded(flag, value, 1, limits::kLocksMax, &c->bounds.locks_max);
    } else if (flag == "--max-waiters-per-lock") {
      st = ParseBounded(flag, value, 1, limits::kWaitersPerLockMax,
                        &c->bounds.waiters_per_lock_max);
    } else if (flag == "--max-holds-per-session") {
      st = ParseBounded(flag, value, 1, limits::kHoldsPerSessionMax,
                        &c->bounds.holds_per_session_max);
    } else if (flag == "--requirepass") {
      if (value.empty() || value.size() > 512) return FlagError(flag, "needs 1..512 bytes");
      c->requirepass = std::string(value);
    } else if (flag == "--snapshot-threshold") {
      st = ParseBounded(flag, value, 64, 1u << 30, &c->snapshot_threshold);
    } else if (flag == "--raft-port") {
      st = ParseBounded(flag, value, 0, 65535, &c->raft_port);
      c->raft_port_set = true;
    } else if (flag == "--log-level") {
      if (!ParseLogLevel(value, &c->log_level)) {
        return FlagError(flag, "expects error|warn|info|debug");
      }
    } else {
      return FlagError(flag, "unknown flag");
    }
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

}  // namespace tumbler::server

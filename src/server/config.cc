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
  s += "\nCluster (docs/operations.md \"Cluster\"):\n";
  s += "  --node-id N                  this node's id, 1..2^63 (default 1)\n";
  s += "  --peers ID=HOST:PORT,...     the initial voters' raft addresses, this node included;\n";
  s += "                               every node of a new cluster gets the same list\n";
  s += "  --join                       start empty and wait to be added (tumbler cluster add)\n";
  s += "  --raft-bind HOST:PORT        where raft listens, if not this node's --peers address\n";
  s += "  --advertise HOST:PORT        client address named in NOTLEADER (default bind:port)\n";
  s += "  --election-timeout-ms N      50..60000 (default 300); heartbeats every N/10\n";
  s += "  --help                       this text\n";
  s += "  --version                    print the version\n";
  s += "\n";
  s += "Signals: SIGTERM/SIGINT stop the server (stop accepting, drain, exit).\n";
  s += "Docs: docs/operations.md, docs/commands.md, docs/protocol.md.\n";
  return s;
}

namespace {

// "host:port" with a port 1..65535 (IPv6 hosts in brackets).
bool LooksLikeHostPort(std::string_view text) {
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) return false;
  if (text.size() > limits::kAddressBytesMax) return false;
  uint32_t port = 0;
  for (char ch : text.substr(colon + 1)) {
    if (ch < '0' || ch > '9') return false;
    port = port * 10 + static_cast<uint32_t>(ch - '0');
    if (port > 65535) return false;
  }
  return port > 0;
}

Status ParsePeers(std::string_view flag, std::string_view text,
                  std::vector<std::pair<uint64_t, std::string>>* peers) {
  peers->clear();
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) return FlagError(flag, "expects ID=HOST:PORT,...");
    uint64_t id = 0;
    Status st = ParseBounded(flag, item.substr(0, eq), 1, uint64_t{1} << 63, &id);
    if (!st.ok()) return st;
    std::string_view address = item.substr(eq + 1);
    if (!LooksLikeHostPort(address)) return FlagError(flag, "expects ID=HOST:PORT,...");
    for (const auto& [other, addr] : *peers) {
      if (other == id) return FlagError(flag, "node id " + std::to_string(id) + " twice");
      if (addr == address) return FlagError(flag, "address " + addr + " twice");
    }
    if (peers->size() == 16) return FlagError(flag, "at most 16 nodes");
    peers->emplace_back(id, std::string(address));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  if (peers->empty()) return FlagError(flag, "expects ID=HOST:PORT,...");
  return Status::Ok();
}

}  // namespace

std::string Config::RaftAddress() const {
  for (const auto& [id, address] : peers) {
    if (id == node_id) return address;
  }
  // A joining node has no --peers: its --raft-bind, unless a wildcard, is
  // the address the others are told with CLUSTER ADD.
  if (!raft_bind.empty() && raft_bind.rfind("0.0.0.0:", 0) != 0 &&
      raft_bind.rfind("[::]:", 0) != 0) {
    return raft_bind;
  }
  uint32_t port = raft_port_set ? raft_port : (this->port + 100u) % 65536u;
  return "127.0.0.1:" + std::to_string(port);
}

std::string Config::AdvertisedAddress() const {
  if (!advertise.empty()) return advertise;
  if (bind.find(':') != std::string::npos) return "[" + bind + "]:" + std::to_string(port);
  return bind + ":" + std::to_string(port);
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
    if (arg == "--join") {  // the one flag without a value
      c->join = true;
      continue;
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
    } else if (flag == "--node-id") {
      st = ParseBounded(flag, value, 1, uint64_t{1} << 63, &c->node_id);
    } else if (flag == "--peers") {
      st = ParsePeers(flag, value, &c->peers);
    } else if (flag == "--raft-bind") {
      if (!LooksLikeHostPort(value)) return FlagError(flag, "expects HOST:PORT");
      c->raft_bind = std::string(value);
    } else if (flag == "--advertise") {
      if (!LooksLikeHostPort(value)) return FlagError(flag, "expects HOST:PORT");
      c->advertise = std::string(value);
    } else if (flag == "--election-timeout-ms") {
      st = ParseBounded(flag, value, 50, 60000, &c->election_timeout_ms);
    } else if (flag == "--log-level") {
      if (!ParseLogLevel(value, &c->log_level)) {
        return FlagError(flag, "expects error|warn|info|debug");
      }
    } else {
      return FlagError(flag, "unknown flag");
    }
    if (!st.ok()) return st;
  }
  if (!c->peers.empty()) {
    bool self = false;
    for (const auto& [id, address] : c->peers) self = self || id == c->node_id;
    if (!self) {
      return FlagError("--peers", "does not name this node (--node-id " +
                                      std::to_string(c->node_id) + ")");
    }
    if (c->durability == Durability::kNone) {
      return FlagError("--peers", "a cluster needs --durability raft");
    }
  }
  if (c->join && !c->peers.empty()) {
    return FlagError("--join", "a joining node is given no --peers (the leader adds it)");
  }
  if ((c->bind == "0.0.0.0" || c->bind == "::") && c->advertise.empty() &&
      (!c->peers.empty() || c->join)) {
    return FlagError("--advertise", "needed when --bind is a wildcard in a cluster");
  }
  return Status::Ok();
}

}  // namespace tumbler::server

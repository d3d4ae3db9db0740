// tumblerd's configuration: command-line flags, their defaults and checks.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/state_machine.h"
#include "server/log.h"
#include "tumbler/status.h"

namespace tumbler::server {

enum class Durability : uint8_t {
  kRaft,  // fsync'd raft log: a reply that reports a change follows its fsync
  kNone,  // in memory only: everything is lost when the process ends
};

struct Config {
  std::string bind = "127.0.0.1";
  uint16_t port = 7420;
  std::string data_dir = "./data";
  Durability durability = Durability::kRaft;
  uint32_t lock_delay_ms = 0;
  uint32_t connections_max = limits::kConnectionsDefault;
  core::Bounds bounds;
  LogLevel log_level = LogLevel::kInfo;
  std::string requirepass;        // empty: no AUTH needed
  uint32_t snapshot_threshold = 65536;
  uint64_t node_id = 1;
  uint16_t raft_port = 0;         // with raft_port_set; otherwise port + 100
  bool raft_port_set = false;     // --raft-port given (0 = any free port)
  // Cluster mode (docs/operations.md "Cluster"): the initial voters, this
  // node included, by id and raft address; empty: a single node.
  std::vector<std::pair<uint64_t, std::string>> peers;
  std::string raft_bind;          // where raft listens if not our --peers address
  std::string advertise;          // client address named in NOTLEADER; "" = bind:port
  bool join = false;              // start empty; a leader adds us (CLUSTER ADD)
  uint32_t election_timeout_ms = 300;

  // This node's raft address: its --peers entry, else its --raft-bind (if not
  // a wildcard), else 127.0.0.1:raft port.
  std::string RaftAddress() const;
  // The client address clients are sent to: --advertise, else bind:port.
  std::string AdvertisedAddress() const;
};

// Parses argv. On --help / --version, prints and sets *exit_now. Errors name
// the flag and the allowed range.
Status ParseFlags(int argc, char** argv, Config* config, bool* exit_now);

// The --help text.
std::string UsageText();

}  // namespace tumbler::server

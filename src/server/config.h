// tumblerd's configuration: command-line flags, their defaults and checks.
#pragma once

#include <cstdint>
#include <string>

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
};

// Parses argv. On --help / --version, prints and sets *exit_now. Errors name
// the flag and the allowed range.
Status ParseFlags(int argc, char** argv, Config* config, bool* exit_now);

// The --help text.
std::string UsageText();

}  // namespace tumbler::server

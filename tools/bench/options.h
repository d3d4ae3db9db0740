// Command line of tumbler-bench (see Usage() and docs/benchmarks.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backend.h"
#include "load_driver.h"
#include "tumbler/status.h"

namespace tumbler::bench {

inline constexpr int kPeersMax = 8;

enum class OutputFormat : uint8_t { kTable, kMarkdown, kJson };

struct Options {
  bool help = false;
  Endpoint target;
  bool has_target = false;
  std::vector<Endpoint> peers;
  std::vector<Workload> workloads;
  int clients = 64;
  int threads = 1;
  std::chrono::nanoseconds duration = std::chrono::seconds(5);
  std::chrono::nanoseconds warmup = std::chrono::seconds(1);
  // Pair workloads run the servers interleaved, round by round, this many
  // times (rounds.h); 1 is one run each.
  int rounds = 1;
  std::chrono::nanoseconds request_timeout = std::chrono::seconds(5);
  std::chrono::nanoseconds retry_sleep = std::chrono::milliseconds(1);
  std::chrono::nanoseconds hold = std::chrono::milliseconds(1);
  uint32_t ttl_ms = 30'000;
  int64_t wait_ms = 10'000;
  // fill
  uint32_t sessions = 10'000;
  uint64_t locks = 1'000'000;
  int pipeline = 128;
  std::string prefix = "fill";
  // output
  OutputFormat format = OutputFormat::kTable;
  std::string json_out;  // also write JSON here
  // fsync probe mode
  std::string fsync_probe_dir;
  int samples = 200;
};

// Parses argv. Errors: kInvalidArgument with a message for the user.
Result<Options> ParseOptions(int argc, char** argv);

// "5s", "250ms", "100us", "2m", "1500ns"; a bare number is seconds.
Result<std::chrono::nanoseconds> ParseDuration(std::string_view text);

std::string Usage();

}  // namespace tumbler::bench

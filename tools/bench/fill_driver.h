// The fill workload: puts a large, known state into a server so that its
// memory and restart time can be measured (bench/run.sh does the measuring).
//
// It opens `sessions` sessions and takes `locks` locks named
// "<prefix>:<i>" (i = 0..locks-1), lock i held by session i % sessions, with
// up to `pipeline` requests in flight on each of `clients` connections. It
// then disconnects and leaves everything held: the sessions live on for
// ttl_ms without keepalives, so pass a TTL longer than the measurement.
// Against Redis it does SET "<prefix>:<i>" v NX PX ttl (no sessions).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "backend.h"
#include "tumbler/status.h"

namespace tumbler::bench {

inline constexpr uint32_t kFillSessionsMax = 10'000'000;
inline constexpr uint64_t kFillLocksMax = 64'000'000;
inline constexpr int kFillPipelineMax = 1000;  // under the server's 1024 bound

struct FillSpec {
  Endpoint endpoint;
  int clients = 16;
  uint32_t sessions = 10'000;
  uint64_t locks = 1'000'000;
  int pipeline = 128;
  uint32_t ttl_ms = 600'000;
  std::string prefix = "fill";
  std::chrono::nanoseconds request_timeout{0};
};

struct FillResult {
  uint32_t sessions = 0;
  uint64_t locks = 0;
  double sessions_s = 0;  // time to open the sessions
  double locks_s = 0;     // time to take the locks
  double client_cpu_s = 0;
};

// Errors: kUnavailable, kTimeout, kProtocol (a lock already held: fill a fresh
// server or change the prefix), naming the endpoint.
Result<FillResult> RunFill(const FillSpec& spec);

}  // namespace tumbler::bench

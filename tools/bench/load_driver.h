// The closed-loop load generator: C client connections, each a small state
// machine with one request in flight, driven from one or two threads with
// epoll. Workloads (docs/benchmarks.md):
//
//   uncontended  every client locks and unlocks its own name, back to back;
//   contended    every client competes for one name; tumbler clients wait on
//                the server (LOCK ... WAIT), Redis clients retry SET NX after
//                sleeping retry_sleep;
//   handoff      as contended, but a client holds the lock for `hold` before
//                unlocking, so that the others are already waiting; the
//                figure of merit is the time from UNLOCK sent to the next
//                client's grant received.
//
// Phases: setup (connect, SESSION OPEN / SCRIPT LOAD), warmup (run, not
// counted), measure (counted), drain (no new acquires; holders unlock),
// teardown (SESSION CLOSE). Every phase is bounded; any request without a
// reply after request_timeout (plus the WAIT it asked for) fails the run.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "backend.h"
#include "histogram.h"
#include "tumbler/status.h"

namespace tumbler::bench {

enum class Workload : uint8_t { kUncontended, kContended, kHandoff, kFill };
std::string_view WorkloadName(Workload workload);

inline constexpr int kClientsMax = 1024;
inline constexpr int kThreadsMax = 2;

struct LoadSpec {
  Workload workload = Workload::kUncontended;
  Endpoint endpoint;
  int clients = 1;   // 1..kClientsMax
  int threads = 1;   // 1..kThreadsMax, never more than clients
  std::chrono::nanoseconds warmup{0};
  std::chrono::nanoseconds duration{0};
  std::chrono::nanoseconds request_timeout{0};
  std::chrono::nanoseconds retry_sleep{0};  // Redis retry loop
  std::chrono::nanoseconds hold{0};         // handoff: time a lock is held
  uint32_t ttl_ms = 30000;   // session TTL (tumbler) / key PX (Redis)
  int64_t wait_ms = 10000;   // tumbler LOCK ... WAIT for contended / handoff
  std::string name_prefix;   // lock names start with it; unique per run
};

struct LoadResult {
  double measured_s = 0;          // the measure phase's length
  uint64_t pairs = 0;             // lock+unlock cycles completed while measuring
  uint64_t acquisitions = 0;      // grants received while measuring
  LatencyHistogram acquire;       // first LOCK/SET sent -> grant received
  LatencyHistogram handoff;       // UNLOCK sent -> another client's grant
  uint64_t busy_replies = 0;      // Redis SET NX refused / tumbler WAIT ran out
  uint64_t self_reacquisitions = 0;  // grant to the client that just unlocked
  uint64_t client_acquisitions_min = 0;
  uint64_t client_acquisitions_max = 0;
  double client_cpu_s = 0;        // getrusage(RUSAGE_SELF) over the measure phase
  // Host steal of all CPUs over the measure phase (host_steal.h); < 0: unknown.
  double host_steal_s = -1;
};

// Runs one workload against one endpoint. Errors: kUnavailable (connect or a
// broken connection), kTimeout (no reply in time), kProtocol (an unexpected
// reply, e.g. a RESP error), each naming the endpoint.
Result<LoadResult> RunLoad(const LoadSpec& spec);

}  // namespace tumbler::bench

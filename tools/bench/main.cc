// tumbler-bench: lock workloads against tumblerd and against Redis in one run.
// What it measures and how: docs/benchmarks.md. It starts no server.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "fill_driver.h"
#include "fsync_probe.h"
#include "library_driver.h"
#include "load_driver.h"
#include "options.h"
#include "report.h"
#include "rounds.h"

namespace tumbler::bench {
namespace {

// One mode's samples as JSON: {"p50_us", "p99_us", "max_us", "samples_us"},
// or null when the mode could not be measured (an error is on stderr).
std::string FsyncJson(const Result<std::vector<int64_t>>& samples) {
  if (!samples.ok()) return "null";
  LatencyHistogram h;
  for (int64_t ns : samples.value()) h.Record(ns);
  char text[128];
  std::snprintf(text, sizeof(text), "{\"p50_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f",
                h.Percentile(0.5) / 1e3, h.Percentile(0.99) / 1e3, h.max_ns() / 1e3);
  std::string out = text;
  out += ", \"samples_us\": [";
  for (size_t i = 0; i < samples.value().size(); ++i) {
    std::snprintf(text, sizeof(text), "%s%.1f", i == 0 ? "" : ", ", samples.value()[i] / 1e3);
    out += text;
  }
  return out + "]}";
}

std::string FsyncLine(const Result<std::vector<int64_t>>& samples) {
  if (!samples.ok()) return "not measured (" + samples.status().message() + ")";
  LatencyHistogram h;
  for (int64_t ns : samples.value()) h.Record(ns);
  return "median " + FormatLatency(h.Percentile(0.5)) + ", p99 " +
         FormatLatency(h.Percentile(0.99)) + ", max " + FormatLatency(h.max_ns());
}

// Append and overwrite must work on any writable directory: their failure
// fails the probe. O_DIRECT is refused by some filesystems (tmpfs), so its
// failure is reported and the other two still are.
int RunFsyncProbe(const Options& o) {
  constexpr FsyncMode kModes[] = {FsyncMode::kAppend, FsyncMode::kOverwrite,
                                  FsyncMode::kDirectDsync};
  std::vector<Result<std::vector<int64_t>>> results;
  for (FsyncMode mode : kModes) {
    results.push_back(ProbeFsync(o.fsync_probe_dir, o.samples, mode));
    if (!results.back().ok()) {
      std::fprintf(stderr, "tumbler-bench: %s\n", results.back().status().ToString().c_str());
      if (mode != FsyncMode::kDirectDsync) return 1;
    }
  }
  if (o.format == OutputFormat::kJson) {
    std::printf("{\"fsync\": {\"samples\": %d", o.samples);
    for (size_t i = 0; i < results.size(); ++i) {
      std::printf(",\n  \"%s\": %s", std::string(FsyncModeName(kModes[i])).c_str(),
                  FsyncJson(results[i]).c_str());
    }
    std::printf("}}\n");
    return 0;
  }
  std::printf("4 KiB writes made durable in %s (%d samples each):\n", o.fsync_probe_dir.c_str(),
              o.samples);
  std::printf("  append + fdatasync:                  %s\n", FsyncLine(results[0]).c_str());
  std::printf("  overwrite preallocated + fdatasync:  %s\n", FsyncLine(results[1]).c_str());
  std::printf("  O_DIRECT|O_DSYNC, fallocated file:   %s\n", FsyncLine(results[2]).c_str());
  return 0;
}

// A prefix for lock names that no earlier run against the same server used,
// so that keys a killed run left behind (until their TTL) do not collide.
std::string RunPrefix() {
  const auto now = std::chrono::system_clock::now().time_since_epoch().count();
  char text[64];
  std::snprintf(text, sizeof(text), "bench:%x%llx", static_cast<unsigned>(getpid()),
                static_cast<unsigned long long>(now) & 0xffffffffffULL);
  return text;
}

Status RunFillOnce(const Options& o, const Endpoint& endpoint, RunRecord* record) {
  std::fprintf(stderr, "fill %s: %u sessions, %llu locks, %d connections x %d pipelined\n",
               endpoint.label.c_str(), endpoint.backend == Backend::kTumbler ? o.sessions : 0u,
               static_cast<unsigned long long>(o.locks), o.clients, o.pipeline);
  if (endpoint.backend == Backend::kLibrary) {
    return Status(StatusCode::kInvalidArgument, "fill needs the raw RESP driver (tumbler:// or redis://)");
  }
  FillSpec spec;
  spec.endpoint = endpoint;
  if (!endpoint.nodes.empty()) {
    if (Status s = ResolveLeader(&spec.endpoint, std::chrono::seconds(10)); !s.ok()) return s;
  }
  spec.clients = o.clients;
  spec.sessions = o.sessions;
  spec.locks = o.locks;
  spec.pipeline = o.pipeline;
  spec.ttl_ms = o.ttl_ms;
  spec.prefix = o.prefix;
  spec.request_timeout = o.request_timeout;
  auto r = RunFill(spec);
  if (!r.ok()) return r.status();
  record->fill = r.value();
  return Status::Ok();
}

// One round of a pair workload against one endpoint. Its lock names start
// with `prefix:rROUND:` and its sessions are its own (opened and closed by the
// round's connections), so no round sees another's state.
Result<LoadResult> RunRound(const Options& o, Workload workload, const Endpoint& endpoint,
                            const std::string& prefix, int round) {
  std::fprintf(stderr, "round %d/%d: %s %s: %d clients, %.3gs (+%.3gs warmup)", round + 1,
               o.rounds, std::string(WorkloadName(workload)).c_str(), endpoint.label.c_str(),
               o.clients, o.duration.count() / 1e9, o.warmup.count() / 1e9);
  LoadSpec spec;
  spec.workload = workload;
  spec.endpoint = endpoint;
  spec.clients = o.clients;
  spec.threads = o.threads;
  spec.warmup = o.warmup;
  spec.duration = o.duration;
  spec.request_timeout = o.request_timeout;
  spec.retry_sleep = o.retry_sleep;
  spec.hold = o.hold;
  spec.ttl_ms = o.ttl_ms;
  spec.wait_ms = o.wait_ms;
  spec.name_prefix = prefix + ":r" + std::to_string(round) + ":" + std::string(WorkloadName(workload));
  if (!endpoint.nodes.empty()) {
    // A cluster: the raw driver talks to the leader (as the library would
    // after a redirect).
    if (Status s = ResolveLeader(&spec.endpoint, std::chrono::seconds(10)); !s.ok()) return s;
  }
  auto r = endpoint.backend == Backend::kLibrary ? RunLibraryLoad(spec) : RunLoad(spec);
  std::fprintf(stderr, r.ok() ? ": %.0f pairs/s\n" : ": failed\n",
               r.ok() ? PairsPerSecond(r.value()) : 0.0);
  return r;
}

// Runs `workload` against every endpoint, interleaved round by round (target,
// peers, target, peers, ...), and appends one record per endpoint to `runs`.
Status RunWorkload(const Options& o, Workload workload, const std::vector<Endpoint>& endpoints,
                   const std::string& prefix, std::vector<RunRecord>* runs) {
  std::vector<RunRecord> records(endpoints.size());
  for (size_t i = 0; i < endpoints.size(); ++i) {
    records[i].workload = workload;
    records[i].endpoint = endpoints[i];
    records[i].is_target = i == 0;
    records[i].clients = o.clients;
    records[i].threads = o.threads;
  }
  auto failed = [&](size_t i, const Status& s) {
    return Status(s.code(), std::string(WorkloadName(workload)) + " against " +
                                endpoints[i].label + " failed: " + s.ToString());
  };
  if (workload == Workload::kFill) {  // a fill leaves state behind: once only
    for (size_t i = 0; i < endpoints.size(); ++i) {
      if (Status s = RunFillOnce(o, endpoints[i], &records[i]); !s.ok()) return failed(i, s);
    }
  } else {
    for (int round = 0; round < o.rounds; ++round) {
      for (size_t i = 0; i < endpoints.size(); ++i) {
        auto r = RunRound(o, workload, endpoints[i], prefix, round);
        if (!r.ok()) return failed(i, r.status());
        records[i].rounds.push_back(std::move(r.value()));
      }
    }
    for (RunRecord& record : records) record.load = PoolRounds(record.rounds);
  }
  for (RunRecord& record : records) runs->push_back(std::move(record));
  return Status::Ok();
}

int Main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  auto parsed = ParseOptions(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "tumbler-bench: %s\n(tumbler-bench --help for usage)\n",
                 parsed.status().message().c_str());
    return 2;
  }
  const Options& o = parsed.value();
  if (o.help) {
    std::fputs(Usage().c_str(), stdout);
    return 0;
  }
  if (!o.fsync_probe_dir.empty()) return RunFsyncProbe(o);

  std::vector<Endpoint> endpoints = {o.target};
  endpoints.insert(endpoints.end(), o.peers.begin(), o.peers.end());
  const std::string prefix = RunPrefix();
  std::vector<RunRecord> runs;
  for (Workload workload : o.workloads) {
    if (Status s = RunWorkload(o, workload, endpoints, prefix, &runs); !s.ok()) {
      std::fprintf(stderr, "tumbler-bench: %s\n", s.message().c_str());
      return 1;
    }
  }
  switch (o.format) {
    case OutputFormat::kTable: std::fputs(FormatTable(runs).c_str(), stdout); break;
    case OutputFormat::kMarkdown: std::fputs(FormatMarkdown(runs).c_str(), stdout); break;
    case OutputFormat::kJson: std::fputs(FormatJson(runs).c_str(), stdout); break;
  }
  if (!o.json_out.empty()) {
    std::ofstream file(o.json_out);
    file << FormatJson(runs);
    if (!file) {
      std::fprintf(stderr, "tumbler-bench: cannot write %s\n", o.json_out.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace tumbler::bench

int main(int argc, char** argv) { return tumbler::bench::Main(argc, argv); }

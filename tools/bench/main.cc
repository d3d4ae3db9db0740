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
#include "load_driver.h"
#include "options.h"
#include "report.h"

namespace tumbler::bench {
namespace {

int RunFsyncProbe(const Options& o) {
  auto append = ProbeFsync(o.fsync_probe_dir, o.samples, FsyncMode::kAppend);
  if (!append.ok()) {
    std::fprintf(stderr, "tumbler-bench: %s\n", append.status().ToString().c_str());
    return 1;
  }
  auto overwrite = ProbeFsync(o.fsync_probe_dir, o.samples, FsyncMode::kOverwrite);
  if (!overwrite.ok()) {
    std::fprintf(stderr, "tumbler-bench: %s\n", overwrite.status().ToString().c_str());
    return 1;
  }
  const LatencyHistogram& a = append.value();
  const LatencyHistogram& w = overwrite.value();
  if (o.format == OutputFormat::kJson) {
    std::printf("{\"fsync\": {\"samples\": %d,\n"
                "  \"append\": {\"p50_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f},\n"
                "  \"overwrite\": {\"p50_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f}}}\n",
                o.samples, a.Percentile(0.5) / 1e3, a.Percentile(0.99) / 1e3, a.max_ns() / 1e3,
                w.Percentile(0.5) / 1e3, w.Percentile(0.99) / 1e3, w.max_ns() / 1e3);
    return 0;
  }
  std::printf("fsync of 4 KiB in %s (%d samples each):\n", o.fsync_probe_dir.c_str(), o.samples);
  std::printf("  append + fdatasync:                   median %s, p99 %s, max %s\n",
              FormatLatency(a.Percentile(0.5)).c_str(), FormatLatency(a.Percentile(0.99)).c_str(),
              FormatLatency(a.max_ns()).c_str());
  std::printf("  overwrite preallocated + fdatasync:   median %s, p99 %s, max %s\n",
              FormatLatency(w.Percentile(0.5)).c_str(), FormatLatency(w.Percentile(0.99)).c_str(),
              FormatLatency(w.max_ns()).c_str());
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

Status RunOne(const Options& o, Workload workload, const Endpoint& endpoint,
              const std::string& prefix, RunRecord* record) {
  record->workload = workload;
  record->endpoint = endpoint;
  record->clients = o.clients;
  record->threads = o.threads;
  if (workload == Workload::kFill) {
    std::fprintf(stderr, "fill %s: %u sessions, %llu locks, %d connections x %d pipelined\n",
                 endpoint.label.c_str(),
                 endpoint.backend == Backend::kTumbler ? o.sessions : 0u,
                 static_cast<unsigned long long>(o.locks), o.clients, o.pipeline);
    FillSpec spec;
    spec.endpoint = endpoint;
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
  std::fprintf(stderr, "%s %s: %d clients, %.3gs (+%.3gs warmup)\n",
               std::string(WorkloadName(workload)).c_str(), endpoint.label.c_str(), o.clients,
               o.duration.count() / 1e9, o.warmup.count() / 1e9);
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
  spec.name_prefix = prefix + ":" + std::string(WorkloadName(workload));
  auto r = RunLoad(spec);
  if (!r.ok()) return r.status();
  record->load = std::move(r.value());
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
    for (size_t i = 0; i < endpoints.size(); ++i) {
      RunRecord record;
      record.is_target = i == 0;
      if (Status s = RunOne(o, workload, endpoints[i], prefix, &record); !s.ok()) {
        std::fprintf(stderr, "tumbler-bench: %s against %s failed: %s\n",
                     std::string(WorkloadName(workload)).c_str(), endpoints[i].label.c_str(),
                     s.ToString().c_str());
        return 1;
      }
      runs.push_back(std::move(record));
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

// raft-log-bench: entries/s and commit latency of the raft log on one node,
// with 1, 16 and 256 proposals in flight, the way the server drives it (a
// uv_check handle tops up the window after each loop turn; nothing is
// proposed from a callback). Compare with LIBRAFT.md's "Measured" table.
//
//   raft-log-bench DATA_DIR [--seconds S] [--entry-bytes N]
//                  [--snapshot-threshold N] [--address HOST:PORT]
//
// DATA_DIR is created if missing; entries are appended to whatever log it
// holds. Latency is from Propose to done(OK).
#include <uv.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/limits.h"
#include "replication/replicated_log.h"

namespace {

using tumbler::Status;
using tumbler::replication::OpenRaftLog;
using tumbler::replication::RaftOptions;
using tumbler::replication::ReplicatedLog;
using tumbler::replication::StateMachineHooks;

class CountingHooks final : public StateMachineHooks {
 public:
  void ApplyEntry(std::string_view entry) override {
    ++entries_applied_;
    bytes_applied_ += entry.size();
  }
  void EncodeSnapshot(std::string* out) override {
    out->append(reinterpret_cast<const char*>(&entries_applied_), sizeof entries_applied_);
  }
  Status RestoreSnapshot(std::string_view snapshot) override {
    if (snapshot.size() != sizeof entries_applied_) {
      return Status(tumbler::StatusCode::kErr, "not a raft-log-bench snapshot");
    }
    std::memcpy(&entries_applied_, snapshot.data(), sizeof entries_applied_);
    return Status::Ok();
  }

 private:
  uint64_t entries_applied_ = 0;
  uint64_t bytes_applied_ = 0;
};

struct Bench {
  ReplicatedLog* log = nullptr;
  std::string payload;
  uint32_t window = 1;
  bool proposing = false;
  bool measuring = false;
  uint64_t completed = 0;
  uint64_t failed = 0;
  std::vector<uint32_t> latencies_us;
};

void TopUp(Bench* bench) {
  while (bench->proposing && bench->log->in_flight() < bench->window) {
    uint64_t start_ns = uv_hrtime();
    bool measured = bench->measuring;
    Status status = bench->log->Propose(bench->payload, [bench, start_ns, measured](Status done) {
      if (!done.ok()) {
        ++bench->failed;
        return;
      }
      if (!measured || !bench->measuring) return;
      ++bench->completed;
      bench->latencies_us.push_back(static_cast<uint32_t>((uv_hrtime() - start_ns) / 1000));
    });
    if (!status.ok()) {
      std::fprintf(stderr, "raft-log-bench: propose: %s\n", status.ToString().c_str());
      std::_Exit(1);
    }
  }
}

void RunFor(uv_loop_t* loop, uint64_t duration_ns) {
  uint64_t end_ns = uv_hrtime() + duration_ns;
  while (uv_hrtime() < end_ns) uv_run(loop, UV_RUN_ONCE);
}

uint32_t Percentile(std::vector<uint32_t>& sorted, double fraction) {
  if (sorted.empty()) return 0;
  size_t index = static_cast<size_t>(fraction * static_cast<double>(sorted.size() - 1));
  return sorted[index];
}

[[noreturn]] void Usage() {
  std::fprintf(stderr,
               "usage: raft-log-bench DATA_DIR [--seconds S] [--entry-bytes N]\n"
               "                      [--snapshot-threshold N] [--address HOST:PORT]\n");
  std::_Exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) Usage();
  RaftOptions options;
  options.data_dir = argv[1];
  options.raft_address = "127.0.0.1:0";
  double seconds = 3;
  size_t entry_bytes = 64;
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc) Usage();
    std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--seconds") {
      seconds = std::atof(value);
    } else if (flag == "--entry-bytes") {
      entry_bytes = std::strtoul(value, nullptr, 10);
    } else if (flag == "--snapshot-threshold") {
      options.snapshot_threshold = static_cast<uint32_t>(std::strtoul(value, nullptr, 10));
    } else if (flag == "--address") {
      options.raft_address = value;
    } else {
      Usage();
    }
  }
  if (seconds <= 0 || entry_bytes > tumbler::limits::kEntryBytesMax) Usage();

  uv_loop_t loop;
  uv_loop_init(&loop);
  CountingHooks hooks;
  auto opened = OpenRaftLog(&loop, options, &hooks);
  if (!opened.ok()) {
    std::fprintf(stderr, "raft-log-bench: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<ReplicatedLog> log = std::move(opened).value();

  Bench bench;
  bench.log = log.get();
  bench.payload.assign(entry_bytes, 'e');

  // A new leader commits a barrier first; it also applies an earlier run's log.
  bool ready = false;
  if (!log->Barrier([&](Status s) { ready = s.ok(); }).ok()) _exit(1);
  while (!ready) uv_run(&loop, UV_RUN_ONCE);

  uv_check_t check;
  uv_check_init(&loop, &check);
  check.data = &bench;
  uv_check_start(&check, [](uv_check_t* handle) { TopUp(static_cast<Bench*>(handle->data)); });

  std::printf("raft-log-bench: %zu-byte entries, snapshot threshold %u, %s\n", entry_bytes,
              options.snapshot_threshold, options.data_dir.c_str());
  std::printf("%10s %10s %12s %9s %9s %9s\n", "in_flight", "entries", "entries/s", "p50_us",
              "p99_us", "max_us");
  for (uint32_t window : {1u, 16u, 256u}) {
    bench.window = window;
    bench.proposing = true;
    bench.measuring = false;
    TopUp(&bench);
    RunFor(&loop, 300'000'000);  // warm up
    bench.completed = 0;
    bench.latencies_us.clear();
    bench.measuring = true;
    uint64_t start_ns = uv_hrtime();
    RunFor(&loop, static_cast<uint64_t>(seconds * 1e9));
    bench.measuring = false;
    double elapsed_s = static_cast<double>(uv_hrtime() - start_ns) / 1e9;
    bench.proposing = false;
    while (log->in_flight() > 0) uv_run(&loop, UV_RUN_ONCE);

    std::sort(bench.latencies_us.begin(), bench.latencies_us.end());
    std::printf("%10u %10llu %12.0f %9u %9u %9u\n", window,
                static_cast<unsigned long long>(bench.completed),
                static_cast<double>(bench.completed) / elapsed_s,
                Percentile(bench.latencies_us, 0.50), Percentile(bench.latencies_us, 0.99),
                bench.latencies_us.empty() ? 0 : bench.latencies_us.back());
    std::fflush(stdout);
  }
  if (bench.failed > 0) {
    std::fprintf(stderr, "raft-log-bench: %llu proposals failed\n",
                 static_cast<unsigned long long>(bench.failed));
  }
  std::fflush(stdout);
  // Crash-only shutdown (docs/replication.md): no raft_close.
  _exit(bench.failed > 0 ? 1 : 0);
}

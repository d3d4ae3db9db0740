#include "options.h"

#include "fill_driver.h"
#include "fsync_probe.h"
#include "rounds.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace tumbler::bench {
namespace {

Status Invalid(std::string text) {
  return Status(StatusCode::kInvalidArgument, std::move(text));
}

template <typename T>
Status ParseInteger(std::string_view flag, std::string_view text, T lo, T hi, T* out) {
  T value{};
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return Invalid(std::string(flag) + ": '" + std::string(text) + "' is not a whole number");
  }
  if (value < lo || value > hi) {
    return Invalid(std::string(flag) + ": " + std::string(text) + " is outside " +
                   std::to_string(lo) + ".." + std::to_string(hi));
  }
  *out = value;
  return Status::Ok();
}

Status ParseDurationFlag(std::string_view flag, std::string_view text,
                         std::chrono::nanoseconds lo, std::chrono::nanoseconds hi,
                         std::chrono::nanoseconds* out) {
  auto d = ParseDuration(text);
  if (!d.ok()) return Invalid(std::string(flag) + ": " + d.status().message());
  if (*d < lo || *d > hi) {
    return Invalid(std::string(flag) + ": " + std::string(text) + " is out of range");
  }
  *out = *d;
  return Status::Ok();
}

Status ParseWorkloads(std::string_view text, std::vector<Workload>* out) {
  out->clear();
  if (text == "all") {
    *out = {Workload::kUncontended, Workload::kContended, Workload::kHandoff};
    return Status::Ok();
  }
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view word = text.substr(0, comma);
    if (word == "uncontended") {
      out->push_back(Workload::kUncontended);
    } else if (word == "contended") {
      out->push_back(Workload::kContended);
    } else if (word == "handoff") {
      out->push_back(Workload::kHandoff);
    } else if (word == "fill") {
      out->push_back(Workload::kFill);
    } else {
      return Invalid("--workload: '" + std::string(word) +
                     "' is not one of uncontended, contended, handoff, fill, all");
    }
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return Status::Ok();
}

}  // namespace

Result<std::chrono::nanoseconds> ParseDuration(std::string_view text) {
  size_t digits_end = 0;
  while (digits_end < text.size() &&
         ((text[digits_end] >= '0' && text[digits_end] <= '9') || text[digits_end] == '.')) {
    ++digits_end;
  }
  const std::string number(text.substr(0, digits_end));
  const std::string_view unit = text.substr(digits_end);
  if (number.empty()) return Invalid("'" + std::string(text) + "' is not a duration");
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value)) {
    return Invalid("'" + std::string(text) + "' is not a duration");
  }
  double scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1e9;
  } else if (unit == "ms") {
    scale = 1e6;
  } else if (unit == "us") {
    scale = 1e3;
  } else if (unit == "ns") {
    scale = 1;
  } else if (unit == "m") {
    scale = 60e9;
  } else {
    return Invalid("'" + std::string(text) + "': unit must be ns, us, ms, s or m");
  }
  const double ns = value * scale;
  if (ns > 1e15) return Invalid("'" + std::string(text) + "' is too long");
  return std::chrono::nanoseconds(static_cast<int64_t>(std::llround(ns)));
}

Result<Options> ParseOptions(int argc, char** argv) {
  using std::chrono::hours;
  using std::chrono::milliseconds;
  using std::chrono::minutes;
  using std::chrono::nanoseconds;
  Options o;
  o.workloads = {Workload::kUncontended};
  bool last_was_peer = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string_view value;
    bool has_value = false;
    if (const size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    auto take = [&](std::string_view* v) -> Status {
      if (has_value) {
        *v = value;
        return Status::Ok();
      }
      if (i + 1 >= argc) return Invalid(std::string(arg) + " needs a value");
      *v = argv[++i];
      return Status::Ok();
    };
    std::string_view v;
    Status s;
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      return o;
    }
    if (arg == "--durability" || arg.starts_with("--durability")) {
      return Invalid("--durability is a tumblerd flag (tumblerd --durability=none), not a "
                     "bench flag: start the server with it and point --target at it");
    }
    if (!(s = take(&v)).ok()) return s;
    if (arg == "--target") {
      auto e = ParseEndpoint(v);
      if (!e.ok()) return e.status();
      o.target = std::move(e.value());
      o.has_target = true;
      last_was_peer = false;
    } else if (arg == "--peer") {
      if (o.peers.size() >= kPeersMax) return Invalid("at most 8 --peer");
      auto e = ParseEndpoint(v);
      if (!e.ok()) return e.status();
      o.peers.push_back(std::move(e.value()));
      last_was_peer = true;
    } else if (arg == "--target-label") {
      o.target.label = std::string(v);
      if (!o.has_target) return Invalid("--target-label must come after --target");
    } else if (arg == "--peer-label") {
      if (!last_was_peer) return Invalid("--peer-label must follow the --peer it names");
      o.peers.back().label = std::string(v);
    } else if (arg == "--workload") {
      s = ParseWorkloads(v, &o.workloads);
    } else if (arg == "--clients") {
      s = ParseInteger<int>(arg, v, 1, kClientsMax, &o.clients);
    } else if (arg == "--threads") {
      s = ParseInteger<int>(arg, v, 1, kThreadsMax, &o.threads);
    } else if (arg == "--duration") {
      s = ParseDurationFlag(arg, v, milliseconds(10), hours(1), &o.duration);
    } else if (arg == "--warmup") {
      s = ParseDurationFlag(arg, v, nanoseconds(0), minutes(10), &o.warmup);
    } else if (arg == "--rounds") {
      s = ParseInteger<int>(arg, v, 1, kRoundsMax, &o.rounds);
    } else if (arg == "--timeout") {
      s = ParseDurationFlag(arg, v, milliseconds(1), minutes(10), &o.request_timeout);
    } else if (arg == "--retry-sleep") {
      s = ParseDurationFlag(arg, v, nanoseconds(0), std::chrono::seconds(10), &o.retry_sleep);
    } else if (arg == "--hold") {
      s = ParseDurationFlag(arg, v, nanoseconds(0), std::chrono::seconds(10), &o.hold);
    } else if (arg == "--ttl") {
      s = ParseInteger<uint32_t>(arg, v, 100, 3'600'000, &o.ttl_ms);
    } else if (arg == "--wait") {
      s = ParseInteger<int64_t>(arg, v, 0, 86'400'000, &o.wait_ms);
    } else if (arg == "--sessions") {
      s = ParseInteger<uint32_t>(arg, v, 1, kFillSessionsMax, &o.sessions);
    } else if (arg == "--locks") {
      s = ParseInteger<uint64_t>(arg, v, 1, kFillLocksMax, &o.locks);
    } else if (arg == "--pipeline") {
      s = ParseInteger<int>(arg, v, 1, kFillPipelineMax, &o.pipeline);
    } else if (arg == "--prefix") {
      if (v.empty() || v.size() > 256) return Invalid("--prefix: 1..256 bytes");
      o.prefix = std::string(v);
    } else if (arg == "--format") {
      if (v == "table") {
        o.format = OutputFormat::kTable;
      } else if (v == "markdown") {
        o.format = OutputFormat::kMarkdown;
      } else if (v == "json") {
        o.format = OutputFormat::kJson;
      } else {
        return Invalid("--format: table, markdown or json");
      }
    } else if (arg == "--json-out") {
      o.json_out = std::string(v);
    } else if (arg == "--fsync-probe") {
      o.fsync_probe_dir = std::string(v);
    } else if (arg == "--samples") {
      s = ParseInteger<int>(arg, v, 1, kFsyncSamplesMax, &o.samples);
    } else {
      return Invalid("unknown flag '" + std::string(arg) + "'");
    }
    if (!s.ok()) return s;
  }
  if (o.fsync_probe_dir.empty() && !o.has_target) return Invalid("--target is required");
  if (o.ttl_ms * int64_t{1'000'000} <= o.hold.count() + o.request_timeout.count()) {
    return Invalid("--ttl must be longer than --hold plus --timeout, or Redis keys expire "
                   "while held");
  }
  return o;
}

std::string Usage() {
  return R"(usage: tumbler-bench --target URL [--peer URL [--peer-label LABEL]]... [options]
       tumbler-bench --fsync-probe DIR [--samples N]

Runs lock workloads against a running server and the same workloads against
each peer, and prints pairs/s, acquire latency, client CPU and the ratios.
It starts no server. URLs:
  tumbler://host:port          raw RESP driver (one connection per client)
  tumbler://h1:p1,h2:p2,...    a cluster: the raw driver talks to its leader
  redis://host:port            raw RESP driver: SET NX PX + compare-and-delete
  etcd://, zookeeper://, postgres://, mysql://, redlock://, lib:redis://,
  lib:tumbler://               through the client library (tumbler::Mutex): one
                               thread and one Client per client; uncontended
                               and contended only

  --target URL          server under test
  --target-label TEXT   name shown for it (default: the URL)
  --peer URL            server to compare with; repeatable (at most 8)
  --peer-label TEXT     name of the --peer just before it
  --workload W[,W]      uncontended | contended | handoff | fill | all
                        (all = uncontended,contended,handoff; default uncontended)
  --clients N           connections, 1..1024 (default 64)
  --threads N           driver threads, 1..2 (default 1)
  --duration D          measured time (default 5s); D like 500ms, 5s, 1m
  --warmup D            run before measuring, not counted (default 1s)
  --rounds N            run the servers interleaved N times, 1..20 (default 1):
                        target, peers, target, peers, ... each for warmup +
                        duration; results are pooled over the rounds and each
                        ratio is the median of the per-round ratios (fill
                        runs once)
  --timeout D           per-request timeout; a LOCK ... WAIT gets WAIT on top
                        (default 5s); a request that times out fails the run
  --ttl MS              tumbler session TTL / Redis key PX (default 30000)
  --wait MS             tumbler LOCK ... WAIT for contended/handoff (default 10000)
  --retry-sleep D       Redis retry loop: sleep between SET NX tries (default 1ms)
  --hold D              handoff: time each grant is held (default 1ms)
  --sessions N          fill: sessions to open (default 10000)
  --locks N             fill: locks to take, named PREFIX:0.. (default 1000000)
  --pipeline N          fill: requests in flight per connection (default 128)
  --prefix TEXT         fill: lock name prefix (default fill)
  --format F            table | markdown | json on stdout (default table)
  --json-out FILE       also write the results as JSON to FILE
  --fsync-probe DIR     time 4 KiB writes made durable in DIR and exit: append +
                        fdatasync, overwrite + fdatasync, O_DIRECT|O_DSYNC
  --samples N           fsync probe samples (default 200)

Exit status: 0 ok, 1 a run failed (server unreachable, timeout, bad reply),
2 bad usage. --durability is a tumblerd flag, not a bench flag.
)";
}

}  // namespace tumbler::bench

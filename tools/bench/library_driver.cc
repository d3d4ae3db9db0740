#include "library_driver.h"

#include <sys/resource.h>

#include <atomic>
#include <barrier>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "client/connection.h"
#include "client/url.h"
#include "host_steal.h"
#include "tumbler/client.h"

namespace tumbler::bench {
namespace {

using Clock = std::chrono::steady_clock;

double CpuSeconds() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct PerClient {
  LatencyHistogram acquire;
  uint64_t pairs = 0;
  uint64_t acquisitions = 0;
  uint64_t busy = 0;
  Status status;
};

}  // namespace

Result<LoadResult> RunLibraryLoad(const LoadSpec& spec) {
  if (spec.workload != Workload::kUncontended && spec.workload != Workload::kContended) {
    return Status(StatusCode::kInvalidArgument,
                  std::string(WorkloadName(spec.workload)) + " needs the raw RESP driver (" +
                      spec.endpoint.label + " is driven through the client library)");
  }
  const int n = spec.clients;
  std::vector<PerClient> per(n);
  std::vector<Client> clients;
  ClientOptions options;
  options.session_ttl = std::chrono::milliseconds(spec.ttl_ms);
  options.op_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(spec.request_timeout);
  options.connections_max = 2;
  options.session_name = "tumbler-bench";
  for (int i = 0; i < n; ++i) {
    Result<Client> c = Client::Connect(spec.endpoint.url, options);
    if (!c.ok()) {
      return Status(c.status().code(), spec.endpoint.label + ": " + c.status().ToString());
    }
    clients.push_back(std::move(c).value());
  }
  std::atomic<bool> measuring{false};
  std::atomic<bool> stop{false};
  auto body = [&](int i) {
    Mutex m = clients[i].NewMutex(spec.workload == Workload::kUncontended
                                      ? spec.name_prefix + ":" + std::to_string(i)
                                      : spec.name_prefix + ":one");
    PerClient& p = per[i];
    while (!stop.load(std::memory_order_relaxed)) {
      Clock::time_point t0 = Clock::now();
      Result<bool> got = spec.workload == Workload::kUncontended
                             ? Result<bool>(true)
                             : m.TryLockFor(std::chrono::milliseconds(spec.wait_ms));
      if (spec.workload == Workload::kUncontended) {
        Status s = m.Lock();
        if (!s.ok()) got = s;
      }
      if (!got.ok()) {
        p.status = got.status();
        return;
      }
      if (!got.value()) {
        ++p.busy;
        continue;
      }
      bool counted = measuring.load(std::memory_order_relaxed);
      if (counted) {
        p.acquire.Record(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0)
                             .count());
        ++p.acquisitions;
      }
      Status s = m.Unlock();
      if (!s.ok()) {
        p.status = s;
        return;
      }
      if (counted && measuring.load(std::memory_order_relaxed)) ++p.pairs;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back(body, i);
  std::this_thread::sleep_for(spec.warmup);
  double cpu0 = CpuSeconds();
  std::optional<double> steal0 = MachineStealSeconds();
  Clock::time_point t0 = Clock::now();
  measuring = true;
  std::this_thread::sleep_for(spec.duration);
  measuring = false;
  Clock::time_point t1 = Clock::now();
  double cpu1 = CpuSeconds();
  std::optional<double> steal1 = MachineStealSeconds();
  stop = true;
  for (auto& t : threads) t.join();
  for (Client& c : clients) c.Close().IgnoreError();
  LoadResult r;
  r.measured_s = std::chrono::duration<double>(t1 - t0).count();
  r.client_cpu_s = cpu1 - cpu0;
  if (steal0 && steal1) r.host_steal_s = *steal1 - *steal0;
  r.client_acquisitions_min = UINT64_MAX;
  for (const PerClient& p : per) {
    if (!p.status.ok()) {
      return Status(p.status.code(), spec.endpoint.label + ": " + p.status.ToString());
    }
    r.pairs += p.pairs;
    r.acquisitions += p.acquisitions;
    r.busy_replies += p.busy;
    r.acquire.Merge(p.acquire);
    r.client_acquisitions_min = std::min(r.client_acquisitions_min, p.acquisitions);
    r.client_acquisitions_max = std::max(r.client_acquisitions_max, p.acquisitions);
  }
  return r;
}

Status ResolveLeader(Endpoint* endpoint, std::chrono::nanoseconds timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    for (const auto& [host, port] : endpoint->nodes) {
      client::Connection conn;
      client::Endpoint e{host, port};
      Clock::time_point call_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(1));
      if (!conn.Open(e, call_deadline).ok()) continue;
      Result<protocol::Value> info = conn.Call({"INFO", "replication"}, call_deadline, nullptr);
      if (info.ok() && info->str.find("role:leader") != std::string::npos) {
        endpoint->host = host;
        endpoint->port = port;
        return Status::Ok();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status(StatusCode::kUnavailable, endpoint->label + ": no node says role:leader");
}

}  // namespace tumbler::bench

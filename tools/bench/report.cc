#include "report.h"

#include "rounds.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <thread>

namespace tumbler::bench {
namespace {

using Table = std::vector<std::vector<std::string>>;

std::string Printf(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

std::string Thousands(double value) {
  const auto n = static_cast<uint64_t>(value + 0.5);
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

double PairsPerSecond(const RunRecord& r) { return PairsPerSecond(r.load); }

// The target's run of the same workload and client count, if any.
const RunRecord* TargetOf(const std::vector<RunRecord>& runs, const RunRecord& r) {
  for (const RunRecord& t : runs) {
    if (t.is_target && t.workload == r.workload && t.clients == r.clients) return &t;
  }
  return nullptr;
}

std::vector<LoadResult> RoundsOf(const RunRecord& r) {
  return r.rounds.empty() ? std::vector<LoadResult>{r.load} : r.rounds;
}

// Target pairs/s over r's, round by round; nullopt for the target itself and
// when there is no ratio.
std::optional<RatioSummary> RatioOf(const std::vector<RunRecord>& runs, const RunRecord& r) {
  if (r.is_target || r.workload == Workload::kFill) return std::nullopt;
  const RunRecord* t = TargetOf(runs, r);
  if (t == nullptr) return std::nullopt;
  const std::vector<LoadResult> target_rounds = RoundsOf(*t);
  const std::vector<LoadResult> rounds = RoundsOf(r);
  if (target_rounds.size() != rounds.size()) return std::nullopt;
  return SummarizeRatios(target_rounds, rounds);
}

std::string RatioText(const std::vector<RunRecord>& runs, const RunRecord& r) {
  if (r.is_target) return "-";
  const auto ratio = RatioOf(runs, r);
  if (!ratio) return "n/a";
  return Printf("%.2fx", ratio->median);
}

// "(median of 5 rounds; min 0.71, max 0.86; per round 0.78 0.71 ...)", or ""
// for a single round.
std::string RoundsText(const RatioSummary& ratio) {
  if (ratio.per_round.size() <= 1) return "";
  std::string text = " (median of " + std::to_string(ratio.rounds_used) + " rounds";
  if (static_cast<size_t>(ratio.rounds_used) < ratio.per_round.size()) {
    text += " of " + std::to_string(ratio.per_round.size());
  }
  text += Printf("; min %.2f", ratio.min) + Printf(", max %.2f", ratio.max) + "; per round";
  for (const auto& v : ratio.per_round) text += v ? Printf(" %.2f", *v) : " n/a";
  return text + ")";
}

// Past this share of one core the single-threaded driver, not the server, may
// be what limits pairs/s: the cell says so.
constexpr double kClientBoundCpuShare = 0.85;

std::string ClientCpuText(double cpu_share) {
  std::string text = Printf("%.0f%%", 100.0 * cpu_share);
  if (cpu_share >= kClientBoundCpuShare) text += " (client-bound?)";
  return text;
}

// The share of the machine's CPU time (all CPUs) the host took during the
// measure phase (host_steal.h).
std::string HostStealText(const LoadResult& l) {
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  if (l.host_steal_s < 0 || l.measured_s <= 0) return "-";
  return Printf("%.1f%%", 100.0 * l.host_steal_s / (l.measured_s * cpus));
}

std::string LatencyOrDash(const LatencyHistogram& h, double q) {
  return h.count() == 0 ? "-" : FormatLatency(h.Percentile(q));
}

Table LoadTable(const std::vector<RunRecord>& runs) {
  Table t = {{"workload", "clients", "server", "pairs/s", "target/this", "acquire p50",
              "p99", "p999", "handoff p50", "p99", "p999", "retries/s", "self re-acq", "per-client min/max",
              "client CPU", "CPU/pair", "host steal"}};
  for (const RunRecord& r : runs) {
    if (r.workload == Workload::kFill) continue;
    const LoadResult& l = r.load;
    const double seconds = l.measured_s > 0 ? l.measured_s : 1;
    const bool contended = r.workload != Workload::kUncontended;
    t.push_back({std::string(WorkloadName(r.workload)), std::to_string(r.clients),
                 r.endpoint.label, Thousands(PairsPerSecond(r)), RatioText(runs, r),
                 LatencyOrDash(l.acquire, 0.5), LatencyOrDash(l.acquire, 0.99),
                 LatencyOrDash(l.acquire, 0.999), LatencyOrDash(l.handoff, 0.5),
                 LatencyOrDash(l.handoff, 0.99), LatencyOrDash(l.handoff, 0.999),
                 contended ? Thousands(l.busy_replies / seconds) : "-",
                 contended && l.acquisitions > 0
                     ? Printf("%.0f%%", 100.0 * l.self_reacquisitions / l.acquisitions)
                     : "-",
                 contended ? std::to_string(l.client_acquisitions_min) + "/" +
                                 std::to_string(l.client_acquisitions_max)
                           : "-",
                 ClientCpuText(l.client_cpu_s / seconds),
                 l.pairs == 0 ? "-" : Printf("%.1fus", 1e6 * l.client_cpu_s / l.pairs),
                 HostStealText(l)});
  }
  return t;
}

Table FillTable(const std::vector<RunRecord>& runs) {
  Table t = {{"workload", "clients", "server", "sessions", "locks", "sessions/s", "locks/s",
              "client CPU s"}};
  for (const RunRecord& r : runs) {
    if (r.workload != Workload::kFill) continue;
    const FillResult& f = r.fill;
    const bool has_sessions = f.sessions > 0 && f.sessions_s > 0;
    t.push_back({"fill", std::to_string(r.clients), r.endpoint.label,
                 has_sessions ? Thousands(f.sessions) : "-", Thousands(f.locks),
                 has_sessions ? Thousands(f.sessions / f.sessions_s) : "-",
                 f.locks_s > 0 ? Thousands(f.locks / f.locks_s) : "-",
                 Printf("%.2f", f.client_cpu_s)});
  }
  return t;
}

std::string Render(const Table& t, bool markdown) {
  if (t.size() <= 1) return "";
  std::vector<size_t> width(t[0].size(), 0);
  for (const auto& row : t) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (size_t r = 0; r < t.size(); ++r) {
    if (markdown) out += "| ";
    for (size_t i = 0; i < t[r].size(); ++i) {
      const std::string& cell = t[r][i];
      const size_t pad = width[i] - cell.size();
      const bool left = i <= 2;  // names left, numbers right
      if (!left) out.append(pad, ' ');
      out += cell;
      if (left && i + 1 < t[r].size()) out.append(pad, ' ');
      if (i + 1 < t[r].size()) out += markdown ? " | " : "  ";
    }
    out += markdown ? " |\n" : "\n";
    if (r == 0 && markdown) {
      out += "|";
      for (size_t i = 0; i < width.size(); ++i) {
        out += i <= 2 ? " " + std::string(width[i], '-') + " |"
                      : " " + std::string(width[i] - 1, '-') + ": |";
      }
      out += "\n";
    }
  }
  return out;
}

std::string RatioLines(const std::vector<RunRecord>& runs, bool markdown) {
  std::string out;
  for (const RunRecord& r : runs) {
    const auto ratio = RatioOf(runs, r);
    if (!ratio) continue;
    out += markdown ? "- " : "  ";
    out += std::string(WorkloadName(r.workload)) + ", " + std::to_string(r.clients) +
           " clients: " + TargetOf(runs, r)->endpoint.label + " / " + r.endpoint.label +
           " = " + Printf("%.2fx", ratio->median) + " pairs/s" + RoundsText(*ratio) + "\n";
  }
  return out;
}

void JsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof(esc), "\\u%04x", c);
      out->append(esc);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

void JsonHistogram(std::string* out, const LatencyHistogram& h) {
  char text[256];
  std::snprintf(text, sizeof(text),
                "{\"count\": %" PRIu64 ", \"p50_us\": %.1f, \"p99_us\": %.1f, "
                "\"p999_us\": %.1f, \"max_us\": %.1f, \"mean_us\": %.1f}",
                h.count(), h.Percentile(0.5) / 1e3, h.Percentile(0.99) / 1e3,
                h.Percentile(0.999) / 1e3, h.max_ns() / 1e3, h.mean_ns() / 1e3);
  out->append(text);
}

std::string JsonNumber(const std::optional<RatioSummary>& ratio, double RatioSummary::*field) {
  return ratio ? Printf("%.4f", (*ratio).*field) : "null";
}

// "per_round": one object per round, in round order.
void JsonRounds(std::string* out, const std::vector<LoadResult>& rounds,
                const std::optional<RatioSummary>& ratio) {
  *out += ", \"per_round\": [";
  char text[1024];
  for (size_t i = 0; i < rounds.size(); ++i) {
    const LoadResult& l = rounds[i];
    std::optional<double> round_ratio;
    if (ratio && i < ratio->per_round.size()) round_ratio = ratio->per_round[i];
    std::snprintf(text, sizeof(text),
                  "%s{\"round\": %zu, \"measured_s\": %.3f, \"pairs\": %" PRIu64
                  ", \"pairs_per_s\": %.1f, \"target_over_this\": %s"
                  ", \"acquire_p99_us\": %.1f, \"handoff_p50_us\": %.1f"
                  ", \"handoff_p99_us\": %.1f, \"client_cpu_s\": %.3f"
                  ", \"host_steal_s\": %s}",
                  i == 0 ? "" : ", ", i + 1, l.measured_s, l.pairs, PairsPerSecond(l),
                  round_ratio ? Printf("%.4f", *round_ratio).c_str() : "null",
                  l.acquire.Percentile(0.99) / 1e3, l.handoff.Percentile(0.5) / 1e3,
                  l.handoff.Percentile(0.99) / 1e3, l.client_cpu_s,
                  l.host_steal_s < 0 ? "null" : Printf("%.3f", l.host_steal_s).c_str());
    *out += text;
  }
  *out += "]";
}

}  // namespace

std::string FormatLatency(int64_t ns) {
  if (ns < 1'000'000) return Printf("%.0fus", ns / 1e3);
  if (ns < 1'000'000'000) return Printf(ns < 10'000'000 ? "%.2fms" : "%.1fms", ns / 1e6);
  return Printf("%.2fs", ns / 1e9);
}

std::string FormatTable(const std::vector<RunRecord>& runs) {
  std::string out = Render(LoadTable(runs), false);
  const std::string ratios = RatioLines(runs, false);
  if (!ratios.empty()) out += "\nratios (target pairs/s over peer pairs/s):\n" + ratios;
  const std::string fill = Render(FillTable(runs), false);
  if (!fill.empty()) out += (out.empty() ? "" : "\n") + fill;
  return out;
}

std::string FormatMarkdown(const std::vector<RunRecord>& runs) {
  std::string out = Render(LoadTable(runs), true);
  const std::string ratios = RatioLines(runs, true);
  if (!ratios.empty()) out += "\n" + ratios;
  const std::string fill = Render(FillTable(runs), true);
  if (!fill.empty()) out += (out.empty() ? "" : "\n") + fill;
  return out;
}

std::string FormatJson(const std::vector<RunRecord>& runs) {
  std::string out = "{\"runs\": [";
  char text[1024];
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunRecord& r = runs[i];
    out += i == 0 ? "\n  {" : ",\n  {";
    out += "\"workload\": ";
    JsonString(&out, WorkloadName(r.workload));
    out += ", \"label\": ";
    JsonString(&out, r.endpoint.label);
    out += ", \"url\": ";
    JsonString(&out, r.endpoint.url);
    std::snprintf(text, sizeof(text), ", \"target\": %s, \"clients\": %d, \"threads\": %d",
                  r.is_target ? "true" : "false", r.clients, r.threads);
    out += text;
    if (r.workload == Workload::kFill) {
      const FillResult& f = r.fill;
      std::snprintf(text, sizeof(text),
                    ", \"sessions\": %u, \"locks\": %" PRIu64
                    ", \"sessions_s\": %.3f, \"locks_s\": %.3f, \"client_cpu_s\": %.3f}",
                    f.sessions, f.locks, f.sessions_s, f.locks_s, f.client_cpu_s);
      out += text;
      continue;
    }
    const LoadResult& l = r.load;
    const auto ratio = RatioOf(runs, r);
    const RunRecord* t = r.is_target ? nullptr : TargetOf(runs, r);
    std::snprintf(text, sizeof(text),
                  ", \"measured_s\": %.3f, \"pairs\": %" PRIu64 ", \"pairs_per_s\": %.1f"
                  ", \"acquisitions\": %" PRIu64
                  ", \"busy_replies\": %" PRIu64 ", \"self_reacquisitions\": %" PRIu64
                  ", \"client_acquisitions_min\": %" PRIu64
                  ", \"client_acquisitions_max\": %" PRIu64
                  ", \"client_cpu_s\": %.3f, \"client_cpu_us_per_pair\": %.2f"
                  ", \"host_steal_s\": %s",
                  l.measured_s, l.pairs, PairsPerSecond(r), l.acquisitions,
                  l.busy_replies, l.self_reacquisitions, l.client_acquisitions_min,
                  l.client_acquisitions_max, l.client_cpu_s,
                  l.pairs > 0 ? 1e6 * l.client_cpu_s / l.pairs : 0.0,
                  l.host_steal_s < 0 ? "null" : Printf("%.3f", l.host_steal_s).c_str());
    out += text;
    // target_over_this: the median of the per-round ratios (null for the
    // target); _pooled: total pairs/s over total pairs/s, for comparison.
    out += ", \"rounds\": " + std::to_string(RoundsOf(r).size());
    out += ", \"target_over_this\": " + JsonNumber(ratio, &RatioSummary::median);
    out += ", \"target_over_this_min\": " + JsonNumber(ratio, &RatioSummary::min);
    out += ", \"target_over_this_max\": " + JsonNumber(ratio, &RatioSummary::max);
    out += ", \"target_over_this_pooled\": ";
    out += t != nullptr && PairsPerSecond(r) > 0
               ? Printf("%.4f", PairsPerSecond(*t) / PairsPerSecond(r))
               : std::string("null");
    JsonRounds(&out, RoundsOf(r), ratio);
    out += text;
    out += ", \"acquire\": ";
    JsonHistogram(&out, l.acquire);
    out += ", \"handoff\": ";
    JsonHistogram(&out, l.handoff);
    out += "}";
  }
  out += "\n]}\n";
  return out;
}

}  // namespace tumbler::bench

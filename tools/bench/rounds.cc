#include "rounds.h"

#include <algorithm>
#include <cassert>
#include <cstdint>

namespace tumbler::bench {

LoadResult PoolRounds(const std::vector<LoadResult>& rounds) {
  LoadResult pooled;
  if (rounds.empty()) return pooled;
  pooled.client_acquisitions_min = UINT64_MAX;
  pooled.host_steal_s = 0;
  for (const LoadResult& r : rounds) {
    // Unknown in one round: unknown pooled.
    pooled.host_steal_s = pooled.host_steal_s < 0 || r.host_steal_s < 0
                              ? -1
                              : pooled.host_steal_s + r.host_steal_s;
    pooled.measured_s += r.measured_s;
    pooled.pairs += r.pairs;
    pooled.acquisitions += r.acquisitions;
    pooled.acquire.Merge(r.acquire);
    pooled.handoff.Merge(r.handoff);
    pooled.busy_replies += r.busy_replies;
    pooled.self_reacquisitions += r.self_reacquisitions;
    pooled.client_acquisitions_min =
        std::min(pooled.client_acquisitions_min, r.client_acquisitions_min);
    pooled.client_acquisitions_max =
        std::max(pooled.client_acquisitions_max, r.client_acquisitions_max);
    pooled.client_cpu_s += r.client_cpu_s;
  }
  return pooled;
}

double PairsPerSecond(const LoadResult& result) {
  return result.measured_s > 0 ? result.pairs / result.measured_s : 0;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  if (values.size() % 2 == 1) return values[mid];
  return (values[mid - 1] + values[mid]) / 2;
}

std::optional<RatioSummary> SummarizeRatios(const std::vector<LoadResult>& target,
                                            const std::vector<LoadResult>& other) {
  assert(target.size() == other.size());
  const size_t rounds = std::min(target.size(), other.size());
  RatioSummary summary;
  std::vector<double> used;
  for (size_t i = 0; i < rounds; ++i) {
    const double denominator = PairsPerSecond(other[i]);
    if (denominator <= 0) {
      summary.per_round.push_back(std::nullopt);
      continue;
    }
    const double ratio = PairsPerSecond(target[i]) / denominator;
    summary.per_round.push_back(ratio);
    used.push_back(ratio);
  }
  if (used.empty()) return std::nullopt;
  summary.rounds_used = static_cast<int>(used.size());
  summary.min = *std::min_element(used.begin(), used.end());
  summary.max = *std::max_element(used.begin(), used.end());
  summary.median = Median(std::move(used));
  return summary;
}

}  // namespace tumbler::bench

// Interleaved rounds: the same workload is run against every server in turn,
// round by round (target, peer 1, ..., target, peer 1, ...), because on a
// shared machine the speed drifts over minutes and a ratio between two runs
// taken at different moments mostly measures the drift. Two runs of one round
// are seconds apart, so their ratio holds; the median over the rounds is the
// reported ratio (docs/benchmarks.md, "How ratios are measured").
//
// Pure functions on results; no I/O. Used by main.cc and report.cc.
#pragma once

#include <optional>
#include <vector>

#include "load_driver.h"

namespace tumbler::bench {

inline constexpr int kRoundsMax = 20;

// The rounds of one server as one result: pairs, acquisitions, retries and
// client CPU are summed, histograms merged, and measured_s is the total
// measured time (so pairs / measured_s is total pairs over total time).
// client_acquisitions_min/max are the extremes over the rounds, i.e. the
// fewest and most grants one client got in one round. Empty input gives an
// empty result.
LoadResult PoolRounds(const std::vector<LoadResult>& rounds);

// Pairs per second of one result; 0 when nothing was measured.
double PairsPerSecond(const LoadResult& result);

// The median of `values` (the mean of the two middle ones for an even count);
// 0 when empty.
double Median(std::vector<double> values);

struct RatioSummary {
  // target pairs/s over this server's, round by round, in round order; empty
  // (nullopt) for a round in which this server completed no pair.
  std::vector<std::optional<double>> per_round;
  int rounds_used = 0;  // rounds with a ratio; median/min/max are over them
  double median = 0;
  double min = 0;
  double max = 0;
};

// Ratios of `target` over `other`, round i against round i. Both must have
// the same number of rounds (the caller ran them interleaved). nullopt when
// no round gives a ratio.
std::optional<RatioSummary> SummarizeRatios(const std::vector<LoadResult>& target,
                                            const std::vector<LoadResult>& other);

}  // namespace tumbler::bench

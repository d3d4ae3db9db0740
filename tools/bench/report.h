// Formats the results of one invocation: a table for people, a markdown table
// for docs/benchmarks.md, and JSON for scripts.
#pragma once

#include <string>
#include <vector>

#include "fill_driver.h"
#include "load_driver.h"

namespace tumbler::bench {

struct RunRecord {
  Workload workload = Workload::kUncontended;
  Endpoint endpoint;
  bool is_target = false;
  int clients = 0;
  int threads = 1;
  // Pair workloads: one result per round (rounds.h), in round order, and
  // `load`, the rounds pooled. A record with no rounds counts as one round,
  // `load`. Ratios against the target are taken round by round.
  std::vector<LoadResult> rounds;
  LoadResult load;
  FillResult fill;  // the fill workload
};

// Tables and ratio lines; with more than one round each ratio is the median
// of the per-round ratios, and the lines list every round's.
std::string FormatTable(const std::vector<RunRecord>& runs);
std::string FormatMarkdown(const std::vector<RunRecord>& runs);
std::string FormatJson(const std::vector<RunRecord>& runs);

// "850us", "1.23ms", "2.5s".
std::string FormatLatency(int64_t ns);

}  // namespace tumbler::bench

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
  LoadResult load;  // pair workloads
  FillResult fill;  // the fill workload
};

std::string FormatTable(const std::vector<RunRecord>& runs);
std::string FormatMarkdown(const std::vector<RunRecord>& runs);
std::string FormatJson(const std::vector<RunRecord>& runs);

// "850us", "1.23ms", "2.5s".
std::string FormatLatency(int64_t ns);

}  // namespace tumbler::bench

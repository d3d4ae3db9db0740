#include "host_steal.h"

#include <unistd.h>

#include <charconv>
#include <fstream>
#include <string>

namespace tumbler::bench {

std::optional<unsigned long long> ParseStealTicks(std::string_view proc_stat) {
  // The first line is the aggregate one: "cpu  user nice system idle iowait
  // irq softirq steal guest guest_nice".
  constexpr std::string_view kPrefix = "cpu ";
  if (proc_stat.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::string_view line = proc_stat.substr(0, proc_stat.find('\n'));
  line.remove_prefix(kPrefix.size());
  constexpr int kStealField = 8;  // 1-based among the numbers
  for (int field = 1; field <= kStealField; ++field) {
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    unsigned long long value = 0;
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), value);
    if (ec != std::errc() || end == line.data()) return std::nullopt;
    if (field == kStealField) return value;
    line.remove_prefix(static_cast<size_t>(end - line.data()));
  }
  return std::nullopt;
}

std::optional<double> MachineStealSeconds() {
  std::ifstream in("/proc/stat");
  if (!in) return std::nullopt;
  std::string first_line;
  std::getline(in, first_line);
  std::optional<unsigned long long> ticks = ParseStealTicks(first_line);
  const long hz = sysconf(_SC_CLK_TCK);
  if (!ticks || hz <= 0) return std::nullopt;
  return static_cast<double>(*ticks) / static_cast<double>(hz);
}

}  // namespace tumbler::bench

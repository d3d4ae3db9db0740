// Time the hypervisor took from this machine's CPUs while a run measured.
//
// On a virtual machine the host can stop the guest's CPUs, for instance when
// the guest has used up a CPU quota; the guest kernel counts that time as
// "steal" in /proc/stat. A run that was stopped for part of its measure phase
// is slower for a reason that is not the server's, so tumbler-bench reports
// the stolen share next to each result (docs/benchmarks.md, "What limits").
#pragma once

#include <optional>
#include <string_view>

namespace tumbler::bench {

// The steal field (the 8th number) of the aggregate "cpu " line of a
// /proc/stat text, in clock ticks. nullopt when the line or field is missing
// or malformed (kernels before 2.6.11 have no steal field).
std::optional<unsigned long long> ParseStealTicks(std::string_view proc_stat);

// Steal time of all CPUs together, in seconds, read now from /proc/stat;
// nullopt when unavailable.
std::optional<double> MachineStealSeconds();

}  // namespace tumbler::bench

// Measures how long the disk under a directory takes to make a small write
// durable: 4 KiB written and fdatasync'd, `samples` times, in two ways:
//
//   kAppend     appending to a new file (the size changes, so the filesystem
//               also commits metadata): the literal "write 4 KiB + fdatasync";
//   kOverwrite  overwriting a file written and synced beforehand, as a log
//               with preallocated segments (libraft's) does.
//
// The file is removed afterwards.
#pragma once

#include <string>

#include "histogram.h"
#include "tumbler/status.h"

namespace tumbler::bench {

inline constexpr int kFsyncSamplesMax = 100'000;

enum class FsyncMode : uint8_t { kAppend, kOverwrite };

// Errors: kUnavailable when the directory cannot be written.
Result<LatencyHistogram> ProbeFsync(const std::string& dir, int samples, FsyncMode mode);

}  // namespace tumbler::bench

// Measures how long the disk under a directory takes to make a small write
// durable: 4 KiB written and made durable, `samples` times, in three ways:
//
//   kAppend       write() appending to a new file, then fdatasync(): the size
//                 changes, so the filesystem also commits metadata. The
//                 literal "write 4 KiB + fsync", and the figure the
//                 project's hand-off target is judged against;
//   kOverwrite    write() over a file written and synced beforehand, then
//                 fdatasync(): no metadata changes;
//   kDirectDsync  pwrite() of 4 KiB-aligned blocks, sequentially, into a file
//                 opened O_DIRECT|O_DSYNC and fallocate()d to 8 MiB (synced
//                 before timing): what libraft's log does per commit. Past
//                 8 MiB of samples the offsets wrap and overwrite.
//
// The file is removed afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tumbler/status.h"

namespace tumbler::bench {

inline constexpr int kFsyncSamplesMax = 100'000;
inline constexpr int64_t kDirectProbeFileBytes = 8 << 20;

enum class FsyncMode : uint8_t { kAppend, kOverwrite, kDirectDsync };
std::string_view FsyncModeName(FsyncMode mode);  // "append", "overwrite", "direct_dsync"

// The time of each write made durable, in ns, in the order taken.
// Errors: kUnavailable when the directory cannot be written, or (kDirectDsync)
// when its filesystem refuses O_DIRECT or fallocate (tmpfs does).
Result<std::vector<int64_t>> ProbeFsync(const std::string& dir, int samples, FsyncMode mode);

}  // namespace tumbler::bench

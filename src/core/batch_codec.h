// Log entry format: one entry carries a batch of commands (group commit: every
// command that arrived during one loop iteration). Format documented in
// docs/log-format.md:
//
//   u8  version (=1)
//   u64 log_time_ms   leader's log clock when the batch was built
//   u64 origin        the proposing process's incarnation (random per start);
//                     lets the proposer match results to waiting requests and
//                     makes replayed entries from an earlier run match nothing
//   u64 seq           the proposer's batch sequence number
//   u32 count         number of commands, 1..limits::kBatchCommandsMax
//   count x command   (see docs/log-format.md)
//   u32 crc32c        of every byte before it
//
// Integers are little-endian fixed width; strings are u16/u32 length + bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/state_machine.h"
#include "tumbler/status.h"

namespace tumbler::core {

struct BatchHeader {
  uint64_t log_time_ms = 0;
  uint64_t origin = 0;
  uint64_t seq = 0;
};

// Builds one entry. Reuse one builder: Begin() clears it without freeing memory.
class BatchBuilder {
 public:
  void Begin(const BatchHeader& header);
  // The command's strings must be within limits.h bounds (asserted).
  void Add(const CommandView& cmd);
  uint32_t count() const { return count_; }
  // Completes the entry (count and checksum) and returns it; valid until the
  // next Begin().
  std::string_view Finish();

 private:
  std::string buf_;
  uint32_t count_ = 0;
  bool finished_ = false;  // Finish() was called; Add() needs Begin() again
};

// Parses an entry. The views in *commands point into `entry`. Returns kErr if
// the entry is larger than limits::kEntryBytesMax, truncated, has trailing
// bytes, a bad checksum or version, a command count outside
// 1..limits::kBatchCommandsMax, an unknown command type, unknown Lock flag bits,
// or a string longer than its limits.h bound. Value ranges (ttl, lock-delay,
// empty names) are not checked here: StateMachine::Apply answers those. On
// error nothing useful is in the outputs; a corrupt entry is a bug or disk
// corruption, and the caller treats it as fatal.
Status DecodeBatch(std::string_view entry, BatchHeader* header,
                   std::vector<CommandView>* commands);

// CRC-32C (Castagnoli), as used by the snapshot and log entry formats.
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);

}  // namespace tumbler::core

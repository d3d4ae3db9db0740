// How tumbler's bytes are framed inside libraft: log entries and snapshots.
// Both formats are on disk and are documented in docs/replication.md.
//
// Entry frame. libraft 0.15 requires every entry payload to be a multiple of
// 8 bytes long: its segment writer pads entries to 8 bytes but its loader does
// not skip the padding, so after a restart everything behind the first
// unaligned entry is taken for a torn write and truncated away (canonical/raft
// issues #189, #304; the TODO in uv_segment.c). So each entry is stored as
//
//   entry bytes | 0..7 zero bytes | u8 pad_count
//
// where pad_count (1..8) counts the bytes after the entry, itself included,
// and the frame length is a multiple of 8. An empty entry is 7 zeros and 8.
//
// Snapshot frame, all integers little-endian:
//
//   offset  0  u32  magic kSnapshotFrameMagic ("TSNP")
//   offset  4  u32  format version, kSnapshotFrameVersion
//   offset  8  u64  payload length in bytes
//   offset 16  u64  FNV-1a 64 of the payload
//   offset 24       payload: StateMachineHooks::EncodeSnapshot's bytes
//
// so that a snapshot is checked again after it is read back (STYLE.md 3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tumbler/status.h"

namespace tumbler::replication {

// --- Entry frame. --------------------------------------------------------------

inline constexpr size_t kEntryFrameAlignBytes = 8;

// Bytes of the frame around an entry of `entry_bytes` bytes: the smallest
// multiple of 8 that is greater than `entry_bytes`.
constexpr size_t EntryFrameBytes(size_t entry_bytes) {
  return (entry_bytes / kEntryFrameAlignBytes + 1) * kEntryFrameAlignBytes;
}

// Writes the frame of `entry` to `out`, which has EntryFrameBytes(entry.size())
// bytes.
void WriteEntryFrame(std::string_view entry, char* out);

// Checks a frame read back from the log and returns the entry (a view into
// `frame`), or kErr naming what is wrong: length not a positive multiple of 8,
// pad count out of range, non-zero padding.
Result<std::string_view> ReadEntryFrame(std::string_view frame);

// --- Snapshot frame. -----------------------------------------------------------

inline constexpr size_t kSnapshotFrameHeaderBytes = 24;
inline constexpr uint32_t kSnapshotFrameMagic = 0x504E5354;  // "TSNP" read as little-endian
inline constexpr uint32_t kSnapshotFrameVersion = 1;

// FNV-1a, 64 bits: cheap, and enough to catch a torn or misdirected read.
uint64_t Fnv1a64(std::string_view bytes);

// `framed` holds kSnapshotFrameHeaderBytes placeholder bytes followed by the
// payload; overwrites the placeholder with the header. Asserts the placeholder
// is there.
void SealSnapshotFrame(std::string* framed);

// Checks a frame read back from disk and returns its payload (a view into
// `framed`), or kErr naming what is wrong: too short, bad magic, unknown
// version, length mismatch, checksum mismatch.
Result<std::string_view> OpenSnapshotFrame(std::string_view framed);

}  // namespace tumbler::replication

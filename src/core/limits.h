// Every bound tumbler enforces, in one place, with their relations checked at
// compile time. A bound that a flag can lower or raise has a default here and a
// hard maximum that the flag may not exceed. Reaching a bound is answered with
// the protocol's LIMIT error (or ERR for a number out of range); it never
// crashes and never changes state.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tumbler::limits {

// --- Names and tags (PROTOCOL.md: a lock name is 1..1024 bytes). -------------
inline constexpr size_t kLockNameBytesMax = 1024;
inline constexpr size_t kOwnerBytesMax = 256;
inline constexpr size_t kSessionLabelBytesMax = 256;
// A node's client address ("host:port") as a leader announces it.
inline constexpr size_t kAddressBytesMax = 255;

// --- Numbers on the wire. ----------------------------------------------------
inline constexpr uint32_t kSessionTtlMsMin = 100;
inline constexpr uint32_t kSessionTtlMsMax = 3'600'000;
inline constexpr uint64_t kWaitMsMax = 86'400'000;
inline constexpr uint32_t kListCountDefault = 1000;   // LOCKS / SESSION LIST
inline constexpr uint32_t kListCountMax = 100'000;
inline constexpr uint32_t kLockDelayMsMax = 60'000;

// --- Requests. ----------------------------------------------------------------
// The largest command: LOCK name session OWNER tag SHARED WAIT ms.
inline constexpr size_t kRequestArgsMax = 32;
inline constexpr size_t kRequestArgBytesMax = 4096;
inline constexpr size_t kRequestBytesMax = 16 * 1024;
inline constexpr size_t kInlineRequestBytesMax = 16 * 1024;
// Replies a client reads (client side): a LOCKS or SESSION LIST reply can be long.
inline constexpr size_t kReplyBytesMax = 64 * 1024 * 1024;
inline constexpr size_t kReplyElementsMax = 4 * 1024 * 1024;
inline constexpr size_t kReplyDepthMax = 16;

// --- Server-wide counts (defaults; flags may change them within the max). ----
inline constexpr uint32_t kConnectionsDefault = 10'000;
inline constexpr uint32_t kConnectionsMax = 100'000;
inline constexpr uint32_t kSessionsDefault = 100'000;
inline constexpr uint32_t kSessionsMax = 10'000'000;
inline constexpr uint64_t kLocksDefault = 4'000'000;
inline constexpr uint64_t kLocksMax = 64'000'000;
inline constexpr uint32_t kWaitersPerLockDefault = 10'000;
inline constexpr uint32_t kWaitersPerLockMax = 1'000'000;
inline constexpr uint32_t kHoldsPerSessionDefault = 1'000'000;
inline constexpr uint32_t kHoldsPerSessionMax = 64'000'000;
inline constexpr uint32_t kHoldCountMax = 1'000'000;  // reentrant depth

// --- Per connection. -----------------------------------------------------------
// Replies owed to one connection (pipelined requests not yet answered).
inline constexpr uint32_t kPipelineDepthMax = 1024;
// Bytes of replies queued to a client that does not read; past it, disconnect.
inline constexpr size_t kOutputBufferBytesMax = 64 * 1024 * 1024;
inline constexpr size_t kInputBufferBytesMax = kRequestBytesMax * 4;

// --- Log entries (group commit). ---------------------------------------------
inline constexpr uint32_t kBatchCommandsMax = 4096;
inline constexpr uint32_t kBatchesInFlightMax = 256;
inline constexpr size_t kCommandEncodedBytesMax =
    64 + kLockNameBytesMax + kOwnerBytesMax + kSessionLabelBytesMax;
inline constexpr size_t kEntryBytesMax = 64 + kBatchCommandsMax * kCommandEncodedBytesMax;

// --- Deadlock detection walks at most this many wait-for edges per request. ---
inline constexpr uint32_t kDeadlockVisitMax = 1'000'000;

// --- Error text: a DEADLOCK message naming a very long cycle is cut here. ------
inline constexpr size_t kErrorMessageBytesMax = 16 * 1024;

// --- Snapshots: counters (tokens, session and wait ids) above this are corrupt;
// at one increment per command they cannot get near it, and it leaves room to
// increment without overflow. ------------------------------------------------
inline constexpr uint64_t kSnapshotCounterMax = uint64_t{1} << 62;

static_assert(kLockNameBytesMax + kOwnerBytesMax + 64 <= kRequestArgBytesMax * 2);
static_assert(kLockNameBytesMax <= kRequestArgBytesMax);
static_assert(kOwnerBytesMax <= kRequestArgBytesMax);
static_assert(kSessionLabelBytesMax <= kRequestArgBytesMax);
static_assert(kRequestArgBytesMax <= kRequestBytesMax);
static_assert(kRequestBytesMax <= kInputBufferBytesMax);
static_assert(kInlineRequestBytesMax <= kInputBufferBytesMax);
static_assert(kSessionTtlMsMin < kSessionTtlMsMax);
static_assert(kListCountDefault <= kListCountMax);
static_assert(kConnectionsDefault <= kConnectionsMax);
static_assert(kSessionsDefault <= kSessionsMax);
static_assert(kLocksDefault <= kLocksMax);
static_assert(kWaitersPerLockDefault <= kWaitersPerLockMax);
static_assert(kHoldsPerSessionDefault <= kHoldsPerSessionMax);
static_assert(kCommandEncodedBytesMax * kBatchCommandsMax < kEntryBytesMax);
static_assert(kEntryBytesMax < (64u << 20), "one log entry stays well under 64 MiB");

}  // namespace tumbler::limits

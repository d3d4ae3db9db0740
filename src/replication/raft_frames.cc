// See raft_frames.h; the formats are documented in docs/replication.md.
#include "replication/raft_frames.h"

#include <cassert>
#include <cstring>

namespace tumbler::replication {
namespace {

void PutU32(char* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
}

void PutU64(char* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
}

uint32_t GetU32(const char* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= uint32_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return value;
}

uint64_t GetU64(const char* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return value;
}

}  // namespace

void WriteEntryFrame(std::string_view entry, char* out) {
  size_t frame_bytes = EntryFrameBytes(entry.size());
  size_t pad_count = frame_bytes - entry.size();
  assert(pad_count >= 1);
  assert(pad_count <= kEntryFrameAlignBytes);
  if (!entry.empty()) std::memcpy(out, entry.data(), entry.size());
  std::memset(out + entry.size(), 0, pad_count - 1);
  out[frame_bytes - 1] = static_cast<char>(pad_count);
}

Result<std::string_view> ReadEntryFrame(std::string_view frame) {
  if (frame.empty() || frame.size() % kEntryFrameAlignBytes != 0) {
    return Status(StatusCode::kErr, "log entry frame of " + std::to_string(frame.size()) +
                                        " bytes is not a positive multiple of 8");
  }
  size_t pad_count = static_cast<unsigned char>(frame.back());
  if (pad_count < 1 || pad_count > kEntryFrameAlignBytes) {
    return Status(StatusCode::kErr,
                  "log entry frame pad count " + std::to_string(pad_count) + " is out of range");
  }
  size_t entry_bytes = frame.size() - pad_count;
  for (size_t i = entry_bytes; i + 1 < frame.size(); ++i) {
    if (frame[i] != 0) return Status(StatusCode::kErr, "log entry frame padding is not zero");
  }
  return frame.substr(0, entry_bytes);
}

uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

void SealSnapshotFrame(std::string* framed) {
  assert(framed != nullptr);
  assert(framed->size() >= kSnapshotFrameHeaderBytes);
  std::string_view payload = std::string_view(*framed).substr(kSnapshotFrameHeaderBytes);
  char* header = framed->data();
  PutU32(header, kSnapshotFrameMagic);
  PutU32(header + 4, kSnapshotFrameVersion);
  PutU64(header + 8, payload.size());
  PutU64(header + 16, Fnv1a64(payload));
}

Result<std::string_view> OpenSnapshotFrame(std::string_view framed) {
  if (framed.size() < kSnapshotFrameHeaderBytes) {
    return Status(StatusCode::kErr, "snapshot shorter than its frame header");
  }
  const char* header = framed.data();
  if (GetU32(header) != kSnapshotFrameMagic) {
    return Status(StatusCode::kErr, "snapshot frame has a bad magic number");
  }
  if (GetU32(header + 4) != kSnapshotFrameVersion) {
    return Status(StatusCode::kErr,
                  "snapshot frame version " + std::to_string(GetU32(header + 4)) + " is unknown");
  }
  std::string_view payload = framed.substr(kSnapshotFrameHeaderBytes);
  if (GetU64(header + 8) != payload.size()) {
    return Status(StatusCode::kErr, "snapshot frame length does not match its payload");
  }
  if (GetU64(header + 16) != Fnv1a64(payload)) {
    return Status(StatusCode::kErr, "snapshot payload checksum mismatch");
  }
  return payload;
}

}  // namespace tumbler::replication

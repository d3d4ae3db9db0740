// Log entry encoding: docs/log-format.md (keep the two in step).
#include "core/batch_codec.h"

#include <cassert>

#include "core/limits.h"
#include "core/wire.h"

namespace tumbler::core {
namespace {

constexpr uint8_t kBatchVersion = 1;
constexpr size_t kCountOffset = 1 + 8 + 8 + 8;
constexpr size_t kHeaderBytes = kCountOffset + 4;
constexpr size_t kCrcBytes = 4;
constexpr uint8_t kLockShared = 1;
constexpr uint8_t kLockWait = 2;

Status Bad(const std::string& what) { return Status(StatusCode::kErr, "log entry: " + what); }

// Reads the fields of one command of type `type`; false on truncation or an
// over-long string.
bool ReadCommand(wire::Reader* r, CommandType type, CommandView* cmd) {
  cmd->type = type;
  switch (type) {
    case CommandType::kOpenSession:
      r->U32(&cmd->ttl_ms);
      return r->Str16(&cmd->name, limits::kSessionLabelBytesMax);
    case CommandType::kCloseSession:
      return r->U64(&cmd->session);
    case CommandType::kExpireSession:
      r->U64(&cmd->session);
      return r->U32(&cmd->lock_delay_ms);
    case CommandType::kLock: {
      uint8_t flags = 0;
      r->U64(&cmd->session);
      r->U8(&flags);
      r->Str16(&cmd->name, limits::kLockNameBytesMax);
      if (!r->Str16(&cmd->owner, limits::kOwnerBytesMax)) return false;
      if ((flags & ~(kLockShared | kLockWait)) != 0) return false;
      cmd->shared = (flags & kLockShared) != 0;
      cmd->wait = (flags & kLockWait) != 0;
      return true;
    }
    case CommandType::kUnlock:
      r->U64(&cmd->session);
      r->Str16(&cmd->name, limits::kLockNameBytesMax);
      return r->Str16(&cmd->owner, limits::kOwnerBytesMax);
    case CommandType::kCancelWait:
      return r->U64(&cmd->wait_id);
    case CommandType::kCancelAllWaits:
    case CommandType::kTick:
      return !r->failed();
    case CommandType::kAnnounce:
      r->U64(&cmd->node_id);
      return r->Str16(&cmd->name, limits::kAddressBytesMax);
  }
  return false;
}

bool KnownType(uint8_t type) {
  return type >= static_cast<uint8_t>(CommandType::kOpenSession) &&
         type <= static_cast<uint8_t>(CommandType::kAnnounce);
}

}  // namespace

void BatchBuilder::Begin(const BatchHeader& header) {
  buf_.clear();
  count_ = 0;
  finished_ = false;
  wire::PutU8(&buf_, kBatchVersion);
  wire::PutU64(&buf_, header.log_time_ms);
  wire::PutU64(&buf_, header.origin);
  wire::PutU64(&buf_, header.seq);
  wire::PutU32(&buf_, 0);  // count, set by Finish()
  assert(buf_.size() == kHeaderBytes);
}

void BatchBuilder::Add(const CommandView& cmd) {
  assert(buf_.size() >= kHeaderBytes && "Begin() first");
  assert(!finished_);
  assert(count_ < limits::kBatchCommandsMax);
  assert(cmd.name.size() <= limits::kLockNameBytesMax);
  assert(cmd.owner.size() <= limits::kOwnerBytesMax);
  wire::PutU8(&buf_, static_cast<uint8_t>(cmd.type));
  switch (cmd.type) {
    case CommandType::kOpenSession:
      assert(cmd.name.size() <= limits::kSessionLabelBytesMax);
      wire::PutU32(&buf_, cmd.ttl_ms);
      wire::PutStr16(&buf_, cmd.name);
      break;
    case CommandType::kCloseSession:
      wire::PutU64(&buf_, cmd.session);
      break;
    case CommandType::kExpireSession:
      wire::PutU64(&buf_, cmd.session);
      wire::PutU32(&buf_, cmd.lock_delay_ms);
      break;
    case CommandType::kLock:
      wire::PutU64(&buf_, cmd.session);
      wire::PutU8(&buf_, (cmd.shared ? kLockShared : 0) | (cmd.wait ? kLockWait : 0));
      wire::PutStr16(&buf_, cmd.name);
      wire::PutStr16(&buf_, cmd.owner);
      break;
    case CommandType::kUnlock:
      wire::PutU64(&buf_, cmd.session);
      wire::PutStr16(&buf_, cmd.name);
      wire::PutStr16(&buf_, cmd.owner);
      break;
    case CommandType::kCancelWait:
      wire::PutU64(&buf_, cmd.wait_id);
      break;
    case CommandType::kCancelAllWaits:
    case CommandType::kTick:
      break;
    case CommandType::kAnnounce:
      assert(cmd.name.size() <= limits::kAddressBytesMax);
      wire::PutU64(&buf_, cmd.node_id);
      wire::PutStr16(&buf_, cmd.name);
      break;
    default:
      assert(false && "unknown command type");
  }
  ++count_;
}

std::string_view BatchBuilder::Finish() {
  assert(!finished_);
  assert(count_ >= 1 && "an entry carries at least one command");
  wire::SetU32(&buf_, kCountOffset, count_);
  wire::PutU32(&buf_, Crc32c(buf_));
  finished_ = true;
  assert(buf_.size() <= limits::kEntryBytesMax);
  return buf_;
}

Status DecodeBatch(std::string_view entry, BatchHeader* header,
                   std::vector<CommandView>* commands) {
  commands->clear();
  if (entry.size() > limits::kEntryBytesMax) return Bad("too large");
  if (entry.size() < kHeaderBytes + kCrcBytes) return Bad("truncated");
  std::string_view covered = entry.substr(0, entry.size() - kCrcBytes);
  uint32_t stored_crc = 0;
  bool read = wire::Reader(entry.substr(covered.size())).U32(&stored_crc);
  assert(read);
  (void)read;
  if (Crc32c(covered) != stored_crc) return Bad("checksum mismatch");

  wire::Reader r(covered);
  uint8_t version = 0;
  uint32_t count = 0;
  r.U8(&version);
  r.U64(&header->log_time_ms);
  r.U64(&header->origin);
  r.U64(&header->seq);
  r.U32(&count);
  assert(!r.failed());  // kHeaderBytes were there
  if (version != kBatchVersion) return Bad("unsupported version " + std::to_string(version));
  if (count == 0 || count > limits::kBatchCommandsMax) {
    return Bad("command count " + std::to_string(count) + " out of range");
  }
  commands->reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    uint8_t type = 0;
    if (!r.U8(&type)) return Bad("truncated");
    if (!KnownType(type)) return Bad("unknown command type " + std::to_string(type));
    CommandView cmd;
    if (!ReadCommand(&r, static_cast<CommandType>(type), &cmd)) {
      return Bad("command " + std::to_string(i) + " truncated or malformed");
    }
    commands->push_back(cmd);
  }
  if (r.remaining() != 0) return Bad("trailing bytes after the commands");
  return Status::Ok();
}

}  // namespace tumbler::core

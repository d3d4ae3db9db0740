// Log entry codec (docs/log-format.md) and CRC-32C.
#include "core/batch_codec.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/crc32c_internal.h"

namespace tumbler::core {
namespace {

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);       // RFC 3720 B.4
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
}

TEST(Crc32cTest, Chains) {
  std::string data = "The quick brown fox jumps over the lazy dog, twice or more.";
  for (size_t cut = 0; cut <= data.size(); ++cut) {
    EXPECT_EQ(Crc32c(data.substr(cut), Crc32c(data.substr(0, cut))), Crc32c(data)) << cut;
  }
}

// The portable and the instruction-based code agree on every length 0..300 at
// every alignment 0..7 (the instruction path handles 8 bytes at a time, then
// the tail bytewise), and with a starting crc.
TEST(Crc32cTest, HardwareAndPortableAgree) {
#if defined(__x86_64__)
  // Every x86-64 processor since 2008 has SSE 4.2: Crc32c must take the fast path.
  ASSERT_TRUE(internal::Crc32cHardwareAvailable());
#endif
  std::mt19937 rng(42);
  std::string buf(300 + 8, '\0');
  for (char& ch : buf) ch = static_cast<char>(rng());
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t len = 0; len <= 300; ++len) {
      std::string_view data(buf.data() + offset, len);
      uint32_t portable = internal::Crc32cPortable(data, 0);
      EXPECT_EQ(Crc32c(data), portable) << offset << " " << len;
      if (internal::Crc32cHardwareAvailable()) {
        EXPECT_EQ(internal::Crc32cHardware(data, 0), portable) << offset << " " << len;
        EXPECT_EQ(internal::Crc32cHardware(data, 0x12345678u),
                  internal::Crc32cPortable(data, 0x12345678u))
            << offset << " " << len;
      }
    }
  }
  EXPECT_EQ(internal::Crc32cPortable("123456789", 0), 0xE3069283u);
}

std::vector<CommandView> AllKinds() {
  static const std::string kLongName(limits::kLockNameBytesMax, 'n');
  static const std::string kLongOwner(limits::kOwnerBytesMax, 'o');
  static const std::string kBinary("a\0\xff\n", 4);
  std::vector<CommandView> cmds;
  CommandView c;
  c.type = CommandType::kOpenSession;
  c.ttl_ms = 30'000;
  c.name = kBinary;
  cmds.push_back(c);
  c = {};
  c.type = CommandType::kCloseSession;
  c.session = 0xFFFFFFFFFFFFFFFFull;
  cmds.push_back(c);
  c = {};
  c.type = CommandType::kExpireSession;
  c.session = 7;
  c.lock_delay_ms = 1500;
  cmds.push_back(c);
  for (int flags = 0; flags < 4; ++flags) {
    c = {};
    c.type = CommandType::kLock;
    c.session = 3;
    c.name = flags == 3 ? std::string_view(kLongName) : std::string_view("orders/42");
    c.owner = flags == 3 ? std::string_view(kLongOwner) : std::string_view(kBinary);
    c.shared = (flags & 1) != 0;
    c.wait = (flags & 2) != 0;
    cmds.push_back(c);
  }
  c = {};
  c.type = CommandType::kUnlock;
  c.session = 3;
  c.name = "orders/42";
  cmds.push_back(c);
  c = {};
  c.type = CommandType::kCancelWait;
  c.wait_id = 99;
  cmds.push_back(c);
  c = {};
  c.type = CommandType::kCancelAllWaits;
  cmds.push_back(c);
  c = {};
  c.type = CommandType::kTick;
  cmds.push_back(c);
  return cmds;
}

void ExpectSame(const CommandView& a, const CommandView& b) {
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.session, b.session);
  EXPECT_EQ(a.ttl_ms, b.ttl_ms);
  EXPECT_EQ(a.lock_delay_ms, b.lock_delay_ms);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.owner, b.owner);
  EXPECT_EQ(a.shared, b.shared);
  EXPECT_EQ(a.wait, b.wait);
  EXPECT_EQ(a.wait_id, b.wait_id);
}

std::string BuildAll(BatchBuilder* builder) {
  builder->Begin({.log_time_ms = 123456, .origin = 0xABCDEF, .seq = 77});
  for (const CommandView& c : AllKinds()) builder->Add(c);
  return std::string(builder->Finish());
}

TEST(BatchCodecTest, RoundTrip) {
  BatchBuilder builder;
  std::string entry = BuildAll(&builder);
  EXPECT_EQ(builder.count(), AllKinds().size());
  BatchHeader header;
  std::vector<CommandView> cmds;
  Status st = DecodeBatch(entry, &header, &cmds);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(header.log_time_ms, 123456u);
  EXPECT_EQ(header.origin, 0xABCDEFu);
  EXPECT_EQ(header.seq, 77u);
  std::vector<CommandView> want = AllKinds();
  ASSERT_EQ(cmds.size(), want.size());
  for (size_t i = 0; i < cmds.size(); ++i) ExpectSame(cmds[i], want[i]);
}

TEST(BatchCodecTest, ExactLayoutOfOneCommand) {
  BatchBuilder builder;
  builder.Begin({.log_time_ms = 1, .origin = 2, .seq = 3});
  CommandView c;
  c.type = CommandType::kLock;
  c.session = 5;
  c.name = "ab";
  c.owner = "o";
  c.shared = true;
  c.wait = true;
  builder.Add(c);
  std::string entry(builder.Finish());
  std::string want("\x01"                               // version
                   "\x01\0\0\0\0\0\0\0"                 // log_time_ms
                   "\x02\0\0\0\0\0\0\0"                 // origin
                   "\x03\0\0\0\0\0\0\0"                 // seq
                   "\x01\0\0\0"                         // count
                   "\x04"                               // type Lock
                   "\x05\0\0\0\0\0\0\0"                 // session
                   "\x03"                               // flags: shared | wait
                   "\x02\0ab"                           // name
                   "\x01\0o",                           // owner
                   1 + 8 * 3 + 4 + 1 + 8 + 1 + 4 + 3);
  ASSERT_EQ(entry.size(), want.size() + 4);
  EXPECT_EQ(entry.substr(0, want.size()), want);
  uint32_t crc = Crc32c(want);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(static_cast<uint8_t>(entry[want.size() + i]), (crc >> (8 * i)) & 0xFF);
  }
}

TEST(BatchCodecTest, BuilderIsReusable) {
  BatchBuilder builder;
  std::string first = BuildAll(&builder);
  builder.Begin({.log_time_ms = 9});
  CommandView tick;
  tick.type = CommandType::kTick;
  builder.Add(tick);
  std::string second(builder.Finish());
  EXPECT_EQ(builder.count(), 1u);
  BatchHeader header;
  std::vector<CommandView> cmds;
  ASSERT_TRUE(DecodeBatch(second, &header, &cmds).ok());
  EXPECT_EQ(cmds.size(), 1u);
  EXPECT_EQ(header.log_time_ms, 9u);
  EXPECT_EQ(BuildAll(&builder), first);
}

TEST(BatchCodecTest, MaximumCount) {
  BatchBuilder builder;
  builder.Begin({});
  CommandView c;
  c.type = CommandType::kCancelWait;
  for (uint32_t i = 0; i < limits::kBatchCommandsMax; ++i) {
    c.wait_id = i;
    builder.Add(c);
  }
  std::string entry(builder.Finish());
  BatchHeader header;
  std::vector<CommandView> cmds;
  ASSERT_TRUE(DecodeBatch(entry, &header, &cmds).ok());
  ASSERT_EQ(cmds.size(), limits::kBatchCommandsMax);
  EXPECT_EQ(cmds.back().wait_id, limits::kBatchCommandsMax - 1);
}

Status Decode(std::string_view entry) {
  BatchHeader header;
  std::vector<CommandView> cmds;
  return DecodeBatch(entry, &header, &cmds);
}

TEST(BatchCodecTest, EveryTruncationRejected) {
  BatchBuilder builder;
  std::string entry = BuildAll(&builder);
  for (size_t n = 0; n < entry.size(); ++n) {
    EXPECT_EQ(Decode(entry.substr(0, n)).code(), StatusCode::kErr) << n;
  }
}

// Recomputes the checksum, so that content checks (not the CRC) must catch it.
std::string WithCrc(std::string body) {
  uint32_t crc = Crc32c(body);
  for (int i = 0; i < 4; ++i) body.push_back(static_cast<char>(crc >> (8 * i)));
  return body;
}

TEST(BatchCodecTest, EveryTruncationWithValidCrcRejected) {
  BatchBuilder builder;
  std::string body = BuildAll(&builder);
  body.resize(body.size() - 4);
  for (size_t n = 0; n < body.size(); ++n) {
    EXPECT_EQ(Decode(WithCrc(body.substr(0, n))).code(), StatusCode::kErr) << n;
  }
  EXPECT_TRUE(Decode(WithCrc(body)).ok());
}

TEST(BatchCodecTest, EveryFlippedByteRejected) {
  BatchBuilder builder;
  std::string entry = BuildAll(&builder);
  for (size_t i = 0; i < entry.size(); ++i) {
    std::string bad = entry;
    bad[i] = static_cast<char>(bad[i] ^ 0x20);
    EXPECT_EQ(Decode(bad).code(), StatusCode::kErr) << i;
  }
}

// A one-command entry with the given bytes after the header.
std::string Entry(uint32_t count, std::string_view commands, uint8_t version = 1) {
  std::string b(1, static_cast<char>(version));
  b.append(24, '\0');
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<char>(count >> (8 * i)));
  b.append(commands);
  return WithCrc(b);
}

TEST(BatchCodecTest, BadContentRejected) {
  const std::string tick("\x08", 1);
  ASSERT_TRUE(Decode(Entry(1, tick)).ok());
  EXPECT_EQ(Decode(Entry(0, "")).code(), StatusCode::kErr);
  EXPECT_EQ(Decode(Entry(limits::kBatchCommandsMax + 1, tick)).code(), StatusCode::kErr);
  EXPECT_EQ(Decode(Entry(0xFFFFFFFFu, tick)).code(), StatusCode::kErr);
  EXPECT_EQ(Decode(Entry(2, tick)).code(), StatusCode::kErr);          // fewer than count
  EXPECT_EQ(Decode(Entry(1, tick + tick)).code(), StatusCode::kErr);   // trailing
  EXPECT_EQ(Decode(Entry(1, tick, 2)).code(), StatusCode::kErr);       // version
  EXPECT_EQ(Decode(Entry(1, std::string("\x00", 1))).code(), StatusCode::kErr);  // type 0
  EXPECT_EQ(Decode(Entry(1, "\x09")).code(), StatusCode::kErr);       // type 9
  // Lock with an unknown flag bit.
  std::string lock("\x04" "\x01\0\0\0\0\0\0\0" "\x04" "\x01\0n" "\0\0", 15);
  EXPECT_EQ(Decode(Entry(1, lock)).code(), StatusCode::kErr);
  lock[9] = '\x03';
  EXPECT_TRUE(Decode(Entry(1, lock)).ok());
  // A lock name over its bound.
  std::string long_name("\x05" "\x01\0\0\0\0\0\0\0" "\x01\x04", 11);  // Unlock, 1025 bytes
  long_name.append(1025, 'n');
  long_name.append(std::string("\0\0", 2));
  EXPECT_EQ(Decode(Entry(1, long_name)).code(), StatusCode::kErr);
  // An owner over its bound.
  std::string long_owner("\x05" "\x01\0\0\0\0\0\0\0" "\x01\0n" "\x01\x01", 14);  // 257 bytes
  long_owner.append(257, 'o');
  EXPECT_EQ(Decode(Entry(1, long_owner)).code(), StatusCode::kErr);
  // A label over its bound.
  std::string long_label("\x01" "\xe8\x03\0\0" "\x01\x01", 7);
  long_label.append(257, 'l');
  EXPECT_EQ(Decode(Entry(1, long_label)).code(), StatusCode::kErr);
  // Larger than any entry may be.
  EXPECT_EQ(Decode(std::string(limits::kEntryBytesMax + 1, '\x01')).code(), StatusCode::kErr);
}

}  // namespace
}  // namespace tumbler::core

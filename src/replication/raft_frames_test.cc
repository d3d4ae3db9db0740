// The entry and snapshot frames: round trips, and every way a frame read
// back can be bad.
#include "replication/raft_frames.h"

#include <string>

#include <gtest/gtest.h>

namespace tumbler::replication {
namespace {

std::string Framed(std::string_view entry) {
  std::string frame(EntryFrameBytes(entry.size()), '?');
  WriteEntryFrame(entry, frame.data());
  return frame;
}

TEST(EntryFrameTest, IsAMultipleOfEightAndRoundTrips) {
  for (size_t size = 0; size <= 33; ++size) {
    std::string entry(size, 'e');
    for (size_t i = 0; i < size; ++i) entry[i] = static_cast<char>(i * 37);
    std::string frame = Framed(entry);
    EXPECT_EQ(frame.size() % 8, 0u) << size;
    EXPECT_GT(frame.size(), size);
    EXPECT_LE(frame.size(), size + 8);
    Result<std::string_view> read = ReadEntryFrame(frame);
    ASSERT_TRUE(read.ok()) << size << " " << read.status().ToString();
    EXPECT_EQ(*read, entry);
  }
}

TEST(EntryFrameTest, Layout) {
  EXPECT_EQ(Framed(""), std::string("\0\0\0\0\0\0\0\x08", 8));
  EXPECT_EQ(Framed("abcdefg"), std::string("abcdefg\x01", 8));
  EXPECT_EQ(Framed("abcdefgh"), std::string("abcdefgh\0\0\0\0\0\0\0\x08", 16));
  EXPECT_EQ(Framed("abc"), std::string("abc\0\0\0\0\x05", 8));
}

TEST(EntryFrameTest, RejectsBadFrames) {
  EXPECT_FALSE(ReadEntryFrame("").ok());
  EXPECT_FALSE(ReadEntryFrame("abc").ok());                                // not a multiple of 8
  EXPECT_FALSE(ReadEntryFrame(std::string("abcdefg\0", 8)).ok());          // pad count 0
  EXPECT_FALSE(ReadEntryFrame(std::string("abcdefg\x09", 8)).ok());        // pad count 9
  EXPECT_FALSE(ReadEntryFrame(std::string("abcdefg\xff", 8)).ok());        // pad count 255
  EXPECT_FALSE(ReadEntryFrame(std::string("abc\0\x01\0\0\x05", 8)).ok());  // padding not zero
  Result<std::string_view> bad = ReadEntryFrame(std::string("abcdefghijklmnop").substr(0, 12));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kErr);
  EXPECT_NE(bad.status().message().find("multiple of 8"), std::string::npos);
}

std::string Sealed(std::string_view payload) {
  std::string framed(kSnapshotFrameHeaderBytes, '?');
  framed.append(payload);
  SealSnapshotFrame(&framed);
  return framed;
}

TEST(SnapshotFrameTest, RoundTrips) {
  for (std::string payload : {std::string(), std::string("x"), std::string(100000, '\xff')}) {
    std::string framed = Sealed(payload);
    EXPECT_EQ(framed.size(), kSnapshotFrameHeaderBytes + payload.size());
    Result<std::string_view> opened = OpenSnapshotFrame(framed);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    EXPECT_TRUE(*opened == payload);
  }
}

TEST(SnapshotFrameTest, HeaderIsLittleEndian) {
  std::string framed = Sealed("abc");
  EXPECT_EQ(framed.substr(0, 4), "TSNP");
  EXPECT_EQ(framed.substr(4, 4), std::string("\x01\x00\x00\x00", 4));
  EXPECT_EQ(framed.substr(8, 8), std::string("\x03\x00\x00\x00\x00\x00\x00\x00", 8));
}

TEST(SnapshotFrameTest, RejectsTruncated) {
  std::string framed = Sealed("payload");
  for (size_t size = 0; size < framed.size(); ++size) {
    Result<std::string_view> opened = OpenSnapshotFrame(std::string_view(framed).substr(0, size));
    EXPECT_FALSE(opened.ok()) << size;
    EXPECT_EQ(opened.status().code(), StatusCode::kErr);
  }
}

TEST(SnapshotFrameTest, RejectsEveryFlippedBit) {
  std::string framed = Sealed("some state");
  for (size_t byte = 0; byte < framed.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = framed;
      bad[byte] = static_cast<char>(bad[byte] ^ (1 << bit));
      EXPECT_FALSE(OpenSnapshotFrame(bad).ok()) << byte << ":" << bit;
    }
  }
}

TEST(SnapshotFrameTest, RejectsTrailingBytesAndNamesTheProblem) {
  std::string framed = Sealed("abc") + "z";
  Result<std::string_view> opened = OpenSnapshotFrame(framed);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("length"), std::string::npos);

  std::string version = Sealed("abc");
  version[4] = 2;
  opened = OpenSnapshotFrame(version);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("version 2"), std::string::npos);
}

TEST(SnapshotFrameTest, Fnv1a64KnownValues) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

}  // namespace
}  // namespace tumbler::replication

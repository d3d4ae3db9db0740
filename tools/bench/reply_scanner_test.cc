#include "reply_scanner.h"

#include <gtest/gtest.h>

#include <string>

namespace tumbler::bench {
namespace {

ScanResult Scan(std::string_view in, ReplyView* v, size_t* consumed) {
  return ScanReply(in, v, consumed);
}

TEST(ReplyScannerTest, SimpleErrorInteger) {
  ReplyView v;
  size_t n = 0;
  ASSERT_EQ(Scan("+OK\r\n", &v, &n), ScanResult::kOk);
  EXPECT_EQ(v.kind, ReplyView::Kind::kSimple);
  EXPECT_EQ(v.text, "OK");
  EXPECT_EQ(n, 5u);
  ASSERT_EQ(Scan("-NOSESSION no such session\r\n", &v, &n), ScanResult::kOk);
  EXPECT_EQ(v.kind, ReplyView::Kind::kError);
  EXPECT_EQ(v.text, "NOSESSION no such session");
  ASSERT_EQ(Scan(":-42\r\n:1\r\n", &v, &n), ScanResult::kOk);
  EXPECT_EQ(v.integer, -42);
  EXPECT_EQ(n, 6u);
}

TEST(ReplyScannerTest, BulkAndNulls) {
  ReplyView v;
  size_t n = 0;
  ASSERT_EQ(Scan("$5\r\nhe\r\no\r\n", &v, &n), ScanResult::kOk);
  EXPECT_EQ(v.kind, ReplyView::Kind::kBulk);
  EXPECT_EQ(v.text, "he\r\no");
  for (std::string_view null : {"$-1\r\n", "*-1\r\n", "_\r\n"}) {
    ASSERT_EQ(Scan(null, &v, &n), ScanResult::kOk) << null;
    EXPECT_EQ(v.kind, ReplyView::Kind::kNull);
    EXPECT_EQ(n, null.size());
  }
}

TEST(ReplyScannerTest, LockGrantArray) {
  ReplyView v;
  size_t n = 0;
  const std::string grant = "*2\r\n:17\r\n:1\r\n";
  ASSERT_EQ(Scan(grant, &v, &n), ScanResult::kOk);
  EXPECT_EQ(v.kind, ReplyView::Kind::kArray);
  EXPECT_EQ(v.integer, 2);
  EXPECT_TRUE(v.has_first_integer);
  EXPECT_EQ(v.first_integer, 17);
  EXPECT_EQ(n, grant.size());
}

TEST(ReplyScannerTest, NestedMapSkipped) {
  ReplyView v;
  size_t n = 0;
  const std::string map = "%2\r\n+name\r\n$1\r\na\r\n+holders\r\n*1\r\n%1\r\n+s\r\n:3\r\n+tail\r\n";
  ASSERT_EQ(Scan(map, &v, &n), ScanResult::kOk);
  EXPECT_EQ(v.kind, ReplyView::Kind::kArray);
  EXPECT_EQ(v.integer, 4);
  EXPECT_EQ(map.substr(n), "+tail\r\n");
}

TEST(ReplyScannerTest, EveryTruncationIsIncomplete) {
  const std::string full = "*3\r\n$3\r\nabc\r\n:5\r\n*1\r\n+x\r\n";
  ReplyView v;
  size_t n = 0;
  for (size_t len = 0; len < full.size(); ++len) {
    EXPECT_EQ(Scan(std::string_view(full).substr(0, len), &v, &n), ScanResult::kIncomplete)
        << len;
  }
  EXPECT_EQ(Scan(full, &v, &n), ScanResult::kOk);
}

TEST(ReplyScannerTest, BadInputIsAnError) {
  ReplyView v;
  size_t n = 0;
  for (std::string_view bad : {"?x\r\n", ":12a\r\n", "$-2\r\n", "$3\r\nabcd\r\n", "+OK\rx",
                               "*99999999999\r\n", ":\r\n", "$99999999999\r\n"}) {
    EXPECT_EQ(Scan(bad, &v, &n), ScanResult::kError) << bad;
  }
}

TEST(ReplyScannerTest, DepthIsBounded) {
  std::string deep;
  for (int i = 0; i < kScanDepthMax + 2; ++i) deep += "*1\r\n";
  deep += ":1\r\n";
  ReplyView v;
  size_t n = 0;
  EXPECT_EQ(Scan(deep, &v, &n), ScanResult::kError);
}

}  // namespace
}  // namespace tumbler::bench

// Table tests of the RESP codec: good input of every kind, and bad input as
// carefully: truncated at every byte, oversize, malformed numbers, bad quoting.
#include "protocol/resp.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>
#include <vector>

// Counts allocations so that tests can check the parsers' allocation promises.
namespace {
std::atomic<size_t> g_allocations{0};
}  // namespace

// Not inlined: GCC would otherwise see free() meet a pointer from operator new
// at call sites and warn (-Wmismatched-new-delete), though the pair is ours.
[[gnu::noinline]] void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace tumbler::protocol {
namespace {

using namespace std::string_literals;
using Args = std::vector<std::string>;

std::string Repeat(std::string_view s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

Args ToArgs(const std::vector<std::string_view>& views) {
  return Args(views.begin(), views.end());
}

// --- Requests: good input. ------------------------------------------------------

struct GoodRequest {
  std::string in;
  Args args;
  size_t consumed = 0;  // 0: all of `in`
};

std::vector<GoodRequest> GoodRequests() {
  return {
      {"*1\r\n$4\r\nPING\r\n", {"PING"}},
      {"*2\r\n$4\r\nPING\r\n$0\r\n\r\n", {"PING", ""}},
      {"*2\r\n$4\r\nLOCK\r\n$3\r\na\0b\r\n"s, {"LOCK", "a\0b"s}},
      {"*1\r\n$4\r\n\r\n\r\n\r\n", {"\r\n\r\n"}},
      {"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*1\r\n$4\r\nPING\r\n", {"SET", "k", "v"}, 27},
      {"*0\r\n", {}},
      {"*-1\r\n", {}},
      {"*-5\r\n", {}},
      {"*-9223372036854775808\r\n", {}},
      {"*1\r\n$4096\r\n" + std::string(4096, 'x') + "\r\n", {std::string(4096, 'x')}},
      {"*32\r\n" + Repeat("$1\r\na\r\n", 32), Args(32, "a")},
      // Inline.
      {"PING\r\n", {"PING"}},
      {"PING\n", {"PING"}},
      {"PING hi\r\n", {"PING", "hi"}},
      {"  SET  a   b \t\r\n", {"SET", "a", "b"}},
      {"\r\n", {}},
      {"\n", {}},
      {"  \t \r\n", {}},
      {"PING\r\nPING\r\n", {"PING"}, 6},
      {"a\rb\n", {"a", "b"}},
      {"\vPING\n", {"PING"}},
      {"PI\vNG\n", {"PI\vNG"}},
      {"PING\0ignored \"\r\n"s, {"PING"}},
      {"SET \"a b\" 'c d'\r\n", {"SET", "a b", "c d"}},
      {"\"\" ''\r\n", {"", ""}},
      {"\"\\x41\\x4a\\x4A\\n\\r\\t\\b\\a\\\\\\\"\\q\"\r\n", {"AJJ\n\r\t\b\a\\\"q"}},
      {"\"\\x4\"\r\n", {"x4"}},
      {"\"\\x00\"\r\n", {"\0"s}},
      {"'it\\'s' 'a\\nb'\r\n", {"it's", "a\\nb"}},
      {"foo\"bar baz\" x\r\n", {"foobar baz", "x"}},
      {"a'b c'\r\n", {"ab c"}},
      {"\"a\\x41\" \"b\\x42\" \"c\" 'd\\'' e\r\n", {"aA", "bB", "c", "d'", "e"}},
      {"\"quoted\"\r\n", {"quoted"}},
      {"x\"a\"\ty\n", {"xa", "y"}},
      {Repeat("a ", 32) + "\r\n", Args(32, "a")},
      {std::string(4096, 'a') + "\n", {std::string(4096, 'a')}},
      {"PING" + std::string(16384 - 4 - 2, ' ') + "x\n", {"PING", "x"}},
  };
}

TEST(ParseRequest, GoodInput) {
  for (const GoodRequest& t : GoodRequests()) {
    SCOPED_TRACE(t.in.substr(0, 80));
    std::vector<std::string_view> args;
    size_t consumed = 99;
    std::string error;
    ASSERT_EQ(ParseRequest(t.in, &args, &consumed, &error), ParseResult::kOk) << error;
    EXPECT_EQ(consumed, t.consumed ? t.consumed : t.in.size());
    EXPECT_EQ(ToArgs(args), t.args);
  }
}

TEST(ParseRequest, EveryTruncationIsIncomplete) {
  for (const GoodRequest& t : GoodRequests()) {
    const size_t size = t.consumed ? t.consumed : t.in.size();
    for (size_t n = 0; n < size; ++n) {
      SCOPED_TRACE(testing::Message() << n << " bytes of " << t.in.substr(0, 60));
      std::vector<std::string_view> args{"stale"};
      size_t consumed = 99;
      std::string error;
      ASSERT_EQ(ParseRequest(std::string_view(t.in).substr(0, n), &args, &consumed, &error),
                ParseResult::kIncomplete);
      EXPECT_EQ(consumed, 0u);
      EXPECT_TRUE(args.empty());
    }
  }
}

TEST(ParseRequest, PipelinedOneAfterAnother) {
  std::string in;
  Args expected_flat;
  std::vector<Args> expected;
  for (const GoodRequest& t : GoodRequests()) {
    const size_t size = t.consumed ? t.consumed : t.in.size();
    in += t.in.substr(0, size);
    expected.push_back(t.args);
  }
  std::string_view rest = in;
  std::vector<std::string_view> args;
  for (const Args& want : expected) {
    size_t consumed = 0;
    std::string error;
    ASSERT_EQ(ParseRequest(rest, &args, &consumed, &error), ParseResult::kOk) << error;
    EXPECT_EQ(ToArgs(args), want);
    rest.remove_prefix(consumed);
  }
  EXPECT_TRUE(rest.empty());
}

// --- Requests: bad input. --------------------------------------------------------

struct BadRequest {
  std::string in;
  std::string error;  // the exact text
};

const std::string kMultibulkLength = "invalid multibulk length";
const std::string kBulkLength = "invalid bulk length";
const std::string kQuotes = "unbalanced quotes in request";
const std::string kTooBig = "too big request";

std::string BigArg() { return "$4096\r\n" + std::string(4096, 'x') + "\r\n"; }

std::vector<BadRequest> BadRequests() {
  return {
      {"*x\r\n", kMultibulkLength},
      {"*x", kMultibulkLength},  // malformed already: no need to wait
      {"*\r\n", kMultibulkLength},
      {"*01\r\n", kMultibulkLength},
      {"*-0\r\n", kMultibulkLength},
      {"*+1\r\n", kMultibulkLength},
      {"* 1\r\n", kMultibulkLength},
      {"*1 \r\n", kMultibulkLength},
      {"*1\n", kMultibulkLength},
      {"*1\r\r", kMultibulkLength},
      {"*33\r\n", kMultibulkLength},
      {"*33", kMultibulkLength},  // incomplete but over kRequestArgsMax
      {"*100", kMultibulkLength},
      {"*99999999999999999999\r\n", kMultibulkLength},
      {"*-9223372036854775809\r\n", kMultibulkLength},
      {"*1\r\n+PING\r\n", "expected '$', got '+'"},
      {"*2\r\n$4\r\nPING\r\nx", "expected '$', got 'x'"},
      {"*1\r\n$-1\r\n", kBulkLength},
      {"*1\r\n$-", kBulkLength},
      {"*1\r\n$4097\r\n", kBulkLength},
      {"*1\r\n$4097", kBulkLength},
      {"*1\r\n$5000", kBulkLength},
      {"*1\r\n$01\r\n", kBulkLength},
      {"*1\r\n$x\r\n", kBulkLength},
      {"*1\r\n$\r\n", kBulkLength},
      {"*1\r\n$4\r\nPINGxx", "expected CRLF after bulk data"},
      {"*1\r\n$4\r\nPING\rx", "expected CRLF after bulk data"},
      {"*1\r\n$3\r\nPING\r\n", "expected CRLF after bulk data"},
      // Four 4096-byte arguments are more than kRequestBytesMax, complete or not.
      {"*4\r\n" + Repeat(BigArg(), 4), kTooBig},
      {"*4\r\n" + Repeat(BigArg(), 3) + "$4096\r\n", kTooBig},
      {"*5\r\n" + Repeat(BigArg(), 3) + "$4051\r\n", kTooBig},  // + one empty arg
      {"*32\r\n" + Repeat(BigArg(), 3) + "$4000\r\n", kTooBig},
      // Inline.
      {"\"abc\r\n", kQuotes},
      {"'abc\r\n", kQuotes},
      {"\"abc\"def\r\n", kQuotes},
      {"'a'b\r\n", kQuotes},
      {"\"a\\\"\r\n", kQuotes},
      {"\"a\\\r\n", kQuotes},
      {"'a\\'\r\n", kQuotes},
      {"SET \"a\0\"\r\n"s, kQuotes},
      {std::string(16384, 'a'), "too big inline request"},
      {std::string(16384, 'a') + "\n", "too big inline request"},
      {"PING" + std::string(16384 - 4 - 1, ' ') + "x\n", "too big inline request"},
      {Repeat("a ", 33) + "\r\n", "too many arguments in inline request"},
      {std::string(4097, 'a') + "\r\n", "too big argument in inline request"},
      {"\"" + std::string(4097, 'a') + "\"\r\n",
       "too big argument in inline request"},
  };
}

TEST(ParseRequest, BadInput) {
  for (const BadRequest& t : BadRequests()) {
    SCOPED_TRACE(t.in.substr(0, 80));
    std::vector<std::string_view> args{"stale"};
    size_t consumed = 99;
    std::string error;
    ASSERT_EQ(ParseRequest(t.in, &args, &consumed, &error), ParseResult::kError);
    EXPECT_EQ(error, t.error);
    EXPECT_EQ(consumed, 0u);
    EXPECT_TRUE(args.empty());
  }
}

TEST(ParseRequest, InlineJustUnderTheLineBoundIsIncomplete) {
  std::vector<std::string_view> args;
  size_t consumed = 0;
  std::string error;
  const std::string in(limits::kInlineRequestBytesMax - 1, 'a');
  EXPECT_EQ(ParseRequest(in, &args, &consumed, &error), ParseResult::kIncomplete);
}

TEST(ParseRequest, AllocatesNothingOnceWarm) {
  const std::string resp = "*3\r\n$4\r\nLOCK\r\n$1\r\na\r\n$2\r\n17\r\n";
  const std::string quoted = "LOCK \"a\\x41\" '1\\'7'\r\n";
  std::vector<std::string_view> args;
  size_t consumed = 0;
  std::string error;
  ASSERT_EQ(ParseRequest(resp, &args, &consumed, &error), ParseResult::kOk);
  ASSERT_EQ(ParseRequest(quoted, &args, &consumed, &error), ParseResult::kOk);
  const size_t before = g_allocations.load();
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(ParseRequest(resp, &args, &consumed, &error), ParseResult::kOk);
    ASSERT_EQ(ParseRequest(quoted, &args, &consumed, &error), ParseResult::kOk);
    ASSERT_EQ(ParseRequest(std::string_view(resp).substr(0, 20), &args, &consumed, &error),
              ParseResult::kIncomplete);
  }
  EXPECT_EQ(g_allocations.load(), before);
  EXPECT_EQ(ToArgs(args), Args{});
}

TEST(ParseRequest, PlainArgumentsViewTheInput) {
  const std::string in = "*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n";
  std::vector<std::string_view> args;
  size_t consumed = 0;
  std::string error;
  ASSERT_EQ(ParseRequest(in, &args, &consumed, &error), ParseResult::kOk);
  ASSERT_EQ(args.size(), 2u);
  EXPECT_EQ(args[0].data(), in.data() + 8);
  EXPECT_EQ(args[1].data(), in.data() + 18);
}

TEST(AppendCommand, RoundTripsThroughParseRequest) {
  const std::vector<Args> commands = {
      {"PING"},
      {"LOCK", "orders/42", "7", "OWNER", "t\r\n\0x"s, "WAIT", "FOREVER"},
      {""},
      Args(32, std::string(400, 'z')),
  };
  std::string out;
  for (const Args& command : commands) {
    AppendCommand(&out, std::vector<std::string_view>(command.begin(), command.end()));
  }
  EXPECT_EQ(out.substr(0, 14), "*1\r\n$4\r\nPING\r\n");
  std::string_view rest = out;
  std::vector<std::string_view> args;
  for (const Args& command : commands) {
    size_t consumed = 0;
    std::string error;
    ASSERT_EQ(ParseRequest(rest, &args, &consumed, &error), ParseResult::kOk) << error;
    EXPECT_EQ(ToArgs(args), command);
    rest.remove_prefix(consumed);
  }
  EXPECT_TRUE(rest.empty());
}

// --- Replies. ------------------------------------------------------------------------

// A compact rendering of a Value for table comparisons.
std::string Describe(const Value& v) {
  using T = Value::Type;
  auto list = [&](std::string open) {
    std::string s = std::move(open);
    for (size_t i = 0; i < v.elements.size(); ++i) {
      if (i) s += ' ';
      s += Describe(v.elements[i]);
    }
    return s + "]";
  };
  switch (v.type) {
    case T::kSimple: return "+" + v.str;
    case T::kError: return "-" + v.str;
    case T::kInteger: return ":" + std::to_string(v.integer);
    case T::kBulk: return "$" + v.str;
    case T::kNull: return "null";
    case T::kArray: return list("*[");
    case T::kMap: return list("%[");
    case T::kSet: return list("~[");
    case T::kPush: return list(">[");
    case T::kDouble: return "," + v.str;
    case T::kBoolean: return "#" + std::to_string(v.integer);
    case T::kBigNumber: return "(" + v.str;
    case T::kVerbatim: return "=" + v.str;
  }
  return "?";
}

struct GoodReply {
  std::string in;
  std::string want;  // Describe() of the value
  size_t consumed = 0;  // 0: all of `in`
};

std::vector<GoodReply> GoodReplies() {
  return {
      {"+OK\r\n", "+OK"},
      {"+\r\n", "+"},
      {"+a\nb\r\n", "+a\nb"},
      {"-ERR bad thing\r\n", "-ERR bad thing"},
      {":0\r\n", ":0"},
      {":-42\r\n", ":-42"},
      {":9223372036854775807\r\n", ":9223372036854775807"},
      {":-9223372036854775808\r\n", ":-9223372036854775808"},
      {"$5\r\nhello\r\n", "$hello"},
      {"$0\r\n\r\n", "$"},
      {"$2\r\n\r\n\r\n", "$\r\n"},
      {"$-1\r\n", "null"},
      {"*-1\r\n", "null"},
      {"_\r\n", "null"},
      {"*0\r\n", "*[]"},
      {"*2\r\n:1\r\n$1\r\na\r\n", "*[:1 $a]"},
      {"*2\r\n*1\r\n+x\r\n*-1\r\n", "*[*[+x] null]"},
      {"%1\r\n+k\r\n:1\r\n", "%[+k :1]"},
      {"%0\r\n", "%[]"},
      {"~2\r\n+a\r\n+b\r\n", "~[+a +b]"},
      {">2\r\n+message\r\n$1\r\nx\r\n", ">[+message $x]"},
      {",1.5\r\n", ",1.5"},
      {",-1.5e-05\r\n", ",-1.5e-05"},
      {",1E+20\r\n", ",1E+20"},
      {",10\r\n", ",10"},
      {",inf\r\n", ",inf"},
      {",-inf\r\n", ",-inf"},
      {",nan\r\n", ",nan"},
      {"#t\r\n", "#1"},
      {"#f\r\n", "#0"},
      {"(3492890328409238509324850943850943825024385\r\n",
       "(3492890328409238509324850943850943825024385"},
      {"(-1\r\n", "(-1"},
      {"=15\r\ntxt:Some string\r\n", "=Some string"},
      {"=4\r\nmkd:\r\n", "="},
      {"!21\r\nSYNTAX invalid syntax\r\n", "-SYNTAX invalid syntax"},
      {"!0\r\n\r\n", "-"},
      // Attributes are dropped, at the top and inside aggregates.
      {"|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n"
       "*2\r\n:2039123\r\n:9543892\r\n",
       "*[:2039123 :9543892]"},
      {"*2\r\n:1\r\n|1\r\n+a\r\n+b\r\n:2\r\n", "*[:1 :2]"},
      {"|0\r\n|0\r\n+OK\r\n", "+OK"},
      {"%2\r\n+server\r\n+tumbler\r\n+proto\r\n:3\r\n", "%[+server +tumbler +proto :3]"},
      {Repeat("*1\r\n", limits::kReplyDepthMax) + ":1\r\n",
       Repeat("*[", limits::kReplyDepthMax) + ":1" + Repeat("]", limits::kReplyDepthMax)},
      {"+OK\r\n:1\r\n", "+OK", 5},
      {"*1\r\n$1\r\na\r\n+more", "*[$a]", 11},
  };
}

TEST(ParseReply, GoodInput) {
  for (const GoodReply& t : GoodReplies()) {
    SCOPED_TRACE(t.in);
    Value value;
    value.elements.resize(3);  // stale contents must go
    size_t consumed = 99;
    std::string error;
    ASSERT_EQ(ParseReply(t.in, &value, &consumed, &error), ParseResult::kOk) << error;
    EXPECT_EQ(consumed, t.consumed ? t.consumed : t.in.size());
    EXPECT_EQ(Describe(value), t.want);
  }
}

TEST(ParseReply, EveryTruncationIsIncomplete) {
  for (const GoodReply& t : GoodReplies()) {
    const size_t size = t.consumed ? t.consumed : t.in.size();
    for (size_t n = 0; n < size; ++n) {
      SCOPED_TRACE(testing::Message() << n << " bytes of " << t.in.substr(0, 60));
      Value value;
      value.str = "untouched";
      size_t consumed = 99;
      std::string error;
      ASSERT_EQ(ParseReply(std::string_view(t.in).substr(0, n), &value, &consumed, &error),
                ParseResult::kIncomplete);
      EXPECT_EQ(consumed, 0u);
      EXPECT_EQ(value.str, "untouched");
    }
  }
}

TEST(ParseReply, PipelinedOneAfterAnother) {
  std::string in;
  for (const GoodReply& t : GoodReplies()) in += t.in.substr(0, t.consumed ? t.consumed : t.in.size());
  std::string_view rest = in;
  for (const GoodReply& t : GoodReplies()) {
    Value value;
    size_t consumed = 0;
    std::string error;
    ASSERT_EQ(ParseReply(rest, &value, &consumed, &error), ParseResult::kOk) << error;
    EXPECT_EQ(Describe(value), t.want);
    rest.remove_prefix(consumed);
  }
  EXPECT_TRUE(rest.empty());
}

struct BadReply {
  std::string in;
  std::string error;  // the exact text
};

std::vector<BadReply> BadReplies() {
  const std::string kAggregate = "invalid aggregate length";
  const std::string kBulk = "invalid bulk length";
  const std::string kInteger = "invalid integer";
  return {
      {"x\r\n", "invalid reply type 'x'"},
      {"\r\n", "invalid reply type '\r'"},
      {";4\r\nabcd\r\n", "invalid reply type ';'"},
      {"+OK\rX", "expected '\\n' after '\\r'"},
      {":\r\n", kInteger},
      {":abc\r\n", kInteger},
      {":01\r\n", kInteger},
      {":-0\r\n", kInteger},
      {":+1\r\n", kInteger},
      {":1.5\r\n", kInteger},
      {":99999999999999999999\r\n", kInteger},
      {":9223372036854775808\r\n", kInteger},
      {":-9223372036854775809", kInteger},
      {"$-2\r\n", kBulk},
      {"$x\r\n", kBulk},
      {"$67108865\r\n", kBulk},
      {"$67108864\r\n", "too big reply"},
      {"$?\r\n;4\r\nabcd\r\n;0\r\n", "streamed strings are not supported"},
      {"$3\r\nabcde", "expected CRLF after bulk data"},
      {"!-1\r\n", kBulk},
      {"=-1\r\n", kBulk},
      {"=3\r\ntxt\r\n", "invalid verbatim string"},
      {"=5\r\ntxt!a\r\n", "invalid verbatim string"},
      {"*?\r\n:1\r\n.\r\n", "streamed aggregates are not supported"},
      {"%?\r\n", "streamed aggregates are not supported"},
      {"*-2\r\n", kAggregate},
      {"%-1\r\n", kAggregate},
      {"~-1\r\n", kAggregate},
      {"*2000000000\r\n", kAggregate},
      {"*2000000000", kAggregate},  // incomplete but over the bound
      {"*4194305\r\n", kAggregate},
      {"%2097153\r\n", kAggregate},
      {"|2097153\r\n", kAggregate},
      {"*4194304\r\n*4194304\r\n", "too many elements in reply"},
      {"%2097152\r\n*1\r\n", "too many elements in reply"},
      {Repeat("*1\r\n", limits::kReplyDepthMax + 1), "too deeply nested reply"},
      {Repeat("|1\r\n", limits::kReplyDepthMax + 1), "too deeply nested reply"},
      {",abc\r\n", "invalid double"},
      {",\r\n", "invalid double"},
      {",1.\r\n", "invalid double"},
      {",1e\r\n", "invalid double"},
      {",.5\r\n", "invalid double"},
      {"(1.5\r\n", "invalid big number"},
      {"(\r\n", "invalid big number"},
      {"#x\r\n", "invalid boolean"},
      {"#tt\r\n", "invalid boolean"},
      {"#T\r\n", "invalid boolean"},
      {"_x\r\n", "invalid null"},
      {"_\rx", "invalid null"},
      {"*2\r\n:1\r\nx", "invalid reply type 'x'"},
  };
}

TEST(ParseReply, BadInput) {
  for (const BadReply& t : BadReplies()) {
    SCOPED_TRACE(t.in.substr(0, 80));
    Value value;
    value.str = "untouched";
    size_t consumed = 99;
    std::string error;
    ASSERT_EQ(ParseReply(t.in, &value, &consumed, &error), ParseResult::kError);
    EXPECT_EQ(error, t.error);
    EXPECT_EQ(consumed, 0u);
    EXPECT_EQ(value.str, "untouched");
  }
}

TEST(ParseReply, HugeCountsAllocateNothing) {
  Value value;
  size_t consumed = 0;
  std::string error;
  error.reserve(256);
  const size_t before = g_allocations.load();
  // Within the bound but incomplete: nothing may be reserved for it.
  EXPECT_EQ(ParseReply("*4194304\r\n:1\r\n", &value, &consumed, &error), ParseResult::kIncomplete);
  EXPECT_EQ(ParseReply("%2097152\r\n", &value, &consumed, &error), ParseResult::kIncomplete);
  EXPECT_EQ(ParseReply("$67108800\r\nabc", &value, &consumed, &error), ParseResult::kIncomplete);
  EXPECT_EQ(ParseReply("*2000000000\r\n", &value, &consumed, &error), ParseResult::kError);
  EXPECT_EQ(g_allocations.load(), before);
}

TEST(ParseReply, OverTheByteBound) {
  Value value;
  size_t consumed = 0;
  std::string error;
  std::string in = "+" + std::string(limits::kReplyBytesMax, 'a');
  EXPECT_EQ(ParseReply(in, &value, &consumed, &error), ParseResult::kError);
  EXPECT_EQ(error, "too big reply");
  in.resize(limits::kReplyBytesMax - 2);
  EXPECT_EQ(ParseReply(in, &value, &consumed, &error), ParseResult::kIncomplete);
  in += "\r\n";
  ASSERT_EQ(ParseReply(in, &value, &consumed, &error), ParseResult::kOk);
  EXPECT_EQ(consumed, limits::kReplyBytesMax);
  EXPECT_EQ(value.str.size(), limits::kReplyBytesMax - 3);
}

TEST(Value, FindInMapsAndFlatArrays) {
  for (const std::string in : {"%2\r\n+id\r\n:7\r\n$4\r\nname\r\n$3\r\nweb\r\n",
                               "*4\r\n$2\r\nid\r\n:7\r\n$4\r\nname\r\n$3\r\nweb\r\n"}) {
    SCOPED_TRACE(in);
    Value value;
    size_t consumed = 0;
    std::string error;
    ASSERT_EQ(ParseReply(in, &value, &consumed, &error), ParseResult::kOk);
    ASSERT_NE(value.Find("id"), nullptr);
    EXPECT_EQ(value.Find("id")->integer, 7);
    ASSERT_NE(value.Find("name"), nullptr);
    EXPECT_EQ(value.Find("name")->str, "web");
    EXPECT_EQ(value.Find("web"), nullptr);  // a value is not a key
    EXPECT_EQ(value.Find("missing"), nullptr);
  }
  Value odd;
  odd.type = Value::Type::kArray;
  odd.elements.resize(1);
  odd.elements[0].type = Value::Type::kBulk;
  odd.elements[0].str = "k";
  EXPECT_EQ(odd.Find("k"), nullptr);
  Value bulk;
  bulk.type = Value::Type::kBulk;
  EXPECT_EQ(bulk.Find(""), nullptr);
}

TEST(Value, ToStatus) {
  struct Case {
    std::string in;
    Status want;
  };
  const std::vector<Case> cases = {
      {"+OK\r\n", Status::Ok()},
      {"$-1\r\n", Status::Ok()},
      {"-NOSESSION session 7 does not exist\r\n",
       Status(StatusCode::kNoSession, "session 7 does not exist")},
      {"-NOTLEADER 127.0.0.1:7421\r\n", Status(StatusCode::kNotLeader, "127.0.0.1:7421")},
      {"-NOTLEADER\r\n", Status(StatusCode::kNotLeader, "")},
      {"-ERR unknown command\r\n", Status(StatusCode::kErr, "unknown command")},
      {"-LIMIT name too long\r\n", Status(StatusCode::kLimit, "name too long")},
      {"-WRONGTYPE Operation against a key\r\n",
       Status(StatusCode::kErr, "WRONGTYPE Operation against a key")},
      {"-UNAVAILABLE client-side words are not wire codes\r\n",
       Status(StatusCode::kErr, "UNAVAILABLE client-side words are not wire codes")},
      {"!12\r\nDEADLOCK a b\r\n", Status(StatusCode::kDeadlock, "a b")},
      {"-\r\n", Status(StatusCode::kErr, "")},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.in);
    Value value;
    size_t consumed = 0;
    std::string error;
    ASSERT_EQ(ParseReply(c.in, &value, &consumed, &error), ParseResult::kOk);
    EXPECT_EQ(value.ToStatus(), c.want);
  }
}

// --- Writing replies. -------------------------------------------------------------

std::string WriteAll(int protover) {
  std::string out;
  ReplyWriter w(&out, protover);
  w.SimpleString("OK");
  w.SimpleString("a\r\nb");
  w.Error("NOSESSION session 7 does not exist");
  w.Error("ERR bad\nname");
  w.Error(Status(StatusCode::kNotLeader, "10.0.0.2:7420"));
  w.Error(Status(StatusCode::kTryAgain, ""));
  w.Integer(0);
  w.Integer(-1);
  w.Integer(INT64_MIN);
  w.Integer(INT64_MAX);
  w.Bulk("hello");
  w.Bulk("");
  w.Bulk("a\r\nb");
  w.Null();
  w.NullArray();
  w.ArrayHeader(0);
  w.ArrayHeader(2);
  w.MapHeader(2);
  w.Boolean(true);
  w.Boolean(false);
  return out;
}

TEST(ReplyWriter, Resp2Bytes) {
  EXPECT_EQ(WriteAll(2),
            "+OK\r\n"
            "+a  b\r\n"
            "-NOSESSION session 7 does not exist\r\n"
            "-ERR bad name\r\n"
            "-NOTLEADER 10.0.0.2:7420\r\n"
            "-TRYAGAIN\r\n"
            ":0\r\n"
            ":-1\r\n"
            ":-9223372036854775808\r\n"
            ":9223372036854775807\r\n"
            "$5\r\nhello\r\n"
            "$0\r\n\r\n"
            "$4\r\na\r\nb\r\n"
            "$-1\r\n"
            "*-1\r\n"
            "*0\r\n"
            "*2\r\n"
            "*4\r\n"
            ":1\r\n"
            ":0\r\n");
}

TEST(ReplyWriter, Resp3Bytes) {
  EXPECT_EQ(WriteAll(3),
            "+OK\r\n"
            "+a  b\r\n"
            "-NOSESSION session 7 does not exist\r\n"
            "-ERR bad name\r\n"
            "-NOTLEADER 10.0.0.2:7420\r\n"
            "-TRYAGAIN\r\n"
            ":0\r\n"
            ":-1\r\n"
            ":-9223372036854775808\r\n"
            ":9223372036854775807\r\n"
            "$5\r\nhello\r\n"
            "$0\r\n\r\n"
            "$4\r\na\r\nb\r\n"
            "_\r\n"
            "_\r\n"
            "*0\r\n"
            "*2\r\n"
            "%2\r\n"
            "#t\r\n"
            "#f\r\n");
  EXPECT_EQ(ReplyWriter(nullptr, 3).protover(), 3);
}

TEST(ReplyWriter, RepliesParseBack) {
  for (int protover : {2, 3}) {
    SCOPED_TRACE(protover);
    std::string out;
    ReplyWriter w(&out, protover);
    w.MapHeader(2);
    w.Bulk("token");
    w.Integer(42);
    w.Bulk("shared");
    w.Boolean(true);
    Value value;
    size_t consumed = 0;
    std::string error;
    ASSERT_EQ(ParseReply(out, &value, &consumed, &error), ParseResult::kOk);
    EXPECT_EQ(consumed, out.size());
    ASSERT_NE(value.Find("token"), nullptr);
    EXPECT_EQ(value.Find("token")->integer, 42);
    ASSERT_NE(value.Find("shared"), nullptr);
    EXPECT_EQ(value.Find("shared")->integer, 1);
  }
}

}  // namespace
}  // namespace tumbler::protocol

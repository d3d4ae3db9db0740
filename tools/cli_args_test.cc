#include "cli_args.h"

#include <gtest/gtest.h>

namespace tumbler::cli {
namespace {

using std::chrono::milliseconds;

milliseconds Ms(std::string_view text) {
  auto d = ParseDuration(text);
  EXPECT_TRUE(d.ok()) << text << ": " << d.status().ToString();
  EXPECT_TRUE(d.ok() && d->has_value()) << text;
  return d.ok() && d->has_value() ? **d : milliseconds(-1);
}

TEST(ParseDuration, Units) {
  EXPECT_EQ(Ms("500ms"), milliseconds(500));
  EXPECT_EQ(Ms("10s"), milliseconds(10'000));
  EXPECT_EQ(Ms("1.5s"), milliseconds(1500));
  EXPECT_EQ(Ms("2m"), milliseconds(120'000));
  EXPECT_EQ(Ms("1h"), milliseconds(3'600'000));
  EXPECT_EQ(Ms("0"), milliseconds(0));
  EXPECT_EQ(Ms("0s"), milliseconds(0));
  EXPECT_EQ(Ms(".5s"), milliseconds(500));
}

TEST(ParseDuration, Forever) {
  auto d = ParseDuration("forever");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->has_value());
}

TEST(ParseDuration, RejectsBadForms) {
  for (const char* bad : {"", "10", "s", "ms", "-1s", "1.2.3s", "10 s", "10sec", "1d", "FOREVER",
                          "1e3ms", "99999999999999999999999h", "1000000000h", "10s5"}) {
    auto d = ParseDuration(bad);
    EXPECT_FALSE(d.ok()) << bad;
    if (!d.ok()) {
      EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(FormatDuration, ShortestExact) {
  EXPECT_EQ(FormatDuration(std::nullopt), "forever");
  EXPECT_EQ(FormatDuration(milliseconds(0)), "0ms");
  EXPECT_EQ(FormatDuration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(FormatDuration(milliseconds(10'000)), "10s");
  EXPECT_EQ(FormatDuration(milliseconds(120'000)), "2m");
  EXPECT_EQ(FormatDuration(milliseconds(7'200'000)), "2h");
}

TEST(ParseUnsigned, Numbers) {
  EXPECT_EQ(*ParseUnsigned("42", "session"), 42u);
  EXPECT_EQ(*ParseUnsigned("18446744073709551615", "token"), UINT64_MAX);
  for (const char* bad : {"", "-1", "4x", " 4", "18446744073709551616"}) {
    EXPECT_FALSE(ParseUnsigned(bad, "n").ok()) << bad;
  }
}

const std::vector<FlagSpec> kSpec = {{"--wait", true}, {"--shared", false}, {"--ttl", true}};

TEST(ParseArgs, FlagsAndPositionals) {
  auto p = ParseArgs({"name", "--wait", "5s", "--shared", "--ttl=10s", "extra"}, kSpec, false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->positional, (std::vector<std::string>{"name", "extra"}));
  EXPECT_EQ(p->get("--wait"), "5s");
  EXPECT_TRUE(p->has("--shared"));
  EXPECT_EQ(p->get("--ttl"), "10s");
  EXPECT_FALSE(p->has("--nope"));
  EXPECT_EQ(p->get("--nope", "x"), "x");
}

TEST(ParseArgs, DashesEndOptions) {
  auto p = ParseArgs({"--wait", "1s", "--", "sh", "-c", "--wait"}, kSpec, true);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->after_dashes, (std::vector<std::string>{"sh", "-c", "--wait"}));
  EXPECT_FALSE(ParseArgs({"--"}, kSpec, false).ok());
}

TEST(ParseArgs, Errors) {
  EXPECT_FALSE(ParseArgs({"--bogus"}, kSpec, false).ok());
  EXPECT_FALSE(ParseArgs({"--wait"}, kSpec, false).ok());
  EXPECT_FALSE(ParseArgs({"--shared=yes"}, kSpec, false).ok());
}

TEST(ParseArgs, SingleDashIsPositional) {
  auto p = ParseArgs({"-", "-x"}, kSpec, false);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->positional.size(), 2u);
}

TEST(ExitCodeFor, Mapping) {
  EXPECT_EQ(ExitCodeFor(Status()), kExitOk);
  EXPECT_EQ(ExitCodeFor(Status(StatusCode::kNoSession, "")), kExitSessionLost);
  EXPECT_EQ(ExitCodeFor(Status(StatusCode::kNotHeld, "")), kExitNotAcquired);
  EXPECT_EQ(ExitCodeFor(Status(StatusCode::kDeadlock, "")), kExitNotAcquired);
  EXPECT_EQ(ExitCodeFor(Status(StatusCode::kUnavailable, "")), kExitServer);
  EXPECT_EQ(ExitCodeFor(Status(StatusCode::kInvalidArgument, "")), kExitUsage);
}

}  // namespace
}  // namespace tumbler::cli

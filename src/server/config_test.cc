#include "server/config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tumbler::server {
namespace {

Status Parse(std::vector<std::string> args, Config* c, bool* exit_now) {
  std::vector<char*> argv;
  static std::string prog = "tumblerd";
  argv.push_back(prog.data());
  for (std::string& a : args) argv.push_back(a.data());
  return ParseFlags(static_cast<int>(argv.size()), argv.data(), c, exit_now);
}

TEST(ConfigTest, DefaultsMatchTheProtocol) {
  Config c;
  bool exit_now = true;
  ASSERT_TRUE(Parse({}, &c, &exit_now).ok());
  EXPECT_FALSE(exit_now);
  EXPECT_EQ(c.port, 7420);
  EXPECT_EQ(c.bind, "127.0.0.1");
  EXPECT_EQ(c.durability, Durability::kRaft);
  EXPECT_EQ(c.lock_delay_ms, 0u);
}

TEST(ConfigTest, BothFlagFormsAreAccepted) {
  Config c;
  bool exit_now = false;
  ASSERT_TRUE(Parse({"--port", "7500", "--data-dir=/tmp/x", "--durability=none",
                     "--lock-delay-ms", "250", "--max-sessions=7", "--log-level", "debug"},
                    &c, &exit_now)
                  .ok());
  EXPECT_EQ(c.port, 7500);
  EXPECT_EQ(c.data_dir, "/tmp/x");
  EXPECT_EQ(c.durability, Durability::kNone);
  EXPECT_EQ(c.lock_delay_ms, 250u);
  EXPECT_EQ(c.bounds.sessions_max, 7u);
  EXPECT_EQ(c.log_level, LogLevel::kDebug);
}

TEST(ConfigTest, BadValuesNameTheFlag) {
  const std::vector<std::vector<std::string>> bad = {
      {"--port", "0"},           {"--port", "65536"},        {"--port", "12x"},
      {"--port"},                {"--durability", "fast"},   {"--lock-delay-ms", "60001"},
      {"--max-sessions", "0"},   {"--log-level", "loud"},    {"--frobnicate", "1"},
      {"stray"},                 {"--max-locks", "-1"},      {"--data-dir="},
  };
  for (const auto& args : bad) {
    Config c;
    bool exit_now = false;
    Status st = Parse(args, &c, &exit_now);
    EXPECT_FALSE(st.ok()) << args[0];
    EXPECT_NE(st.message().find(args[0].substr(0, args[0].find('='))), std::string::npos)
        << st.message();
  }
}

TEST(ConfigTest, HelpExitsAndMentionsEveryFlag) {
  std::string usage = UsageText();
  for (const char* flag : {"--bind", "--port", "--data-dir", "--durability", "--lock-delay-ms",
                           "--max-connections", "--max-sessions", "--max-locks",
                           "--max-waiters-per-lock", "--max-holds-per-session", "--requirepass",
                           "--log-level"}) {
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace tumbler::server

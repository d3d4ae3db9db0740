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

TEST(ConfigTest, ClusterFlags) {
  Config c;
  bool exit_now = false;
  ASSERT_TRUE(Parse({"--node-id", "2", "--port", "7422", "--peers",
                     "1=127.0.0.1:7521,2=127.0.0.1:7522,3=127.0.0.1:7523",
                     "--election-timeout-ms", "500", "--advertise", "10.0.0.2:7422"},
                    &c, &exit_now)
                  .ok());
  EXPECT_EQ(c.node_id, 2u);
  ASSERT_EQ(c.peers.size(), 3u);
  EXPECT_EQ(c.peers[2], std::make_pair(uint64_t{3}, std::string("127.0.0.1:7523")));
  EXPECT_EQ(c.RaftAddress(), "127.0.0.1:7522");
  EXPECT_EQ(c.AdvertisedAddress(), "10.0.0.2:7422");
  EXPECT_EQ(c.election_timeout_ms, 500u);

  Config j;
  ASSERT_TRUE(Parse({"--join", "--node-id", "4", "--raft-bind", "10.0.0.4:7520"}, &j, &exit_now)
                  .ok());
  EXPECT_TRUE(j.join);
  EXPECT_EQ(j.RaftAddress(), "10.0.0.4:7520");
  EXPECT_EQ(j.AdvertisedAddress(), "127.0.0.1:7420");

  Config w;
  ASSERT_TRUE(Parse({"--join", "--port", "7430", "--raft-bind", "0.0.0.0:7530"}, &w, &exit_now)
                  .ok());
  EXPECT_EQ(w.RaftAddress(), "127.0.0.1:7530");  // a wildcard is not dialled: port + 100
}

TEST(ConfigTest, BadClusterFlagsAreRefused) {
  const std::vector<std::vector<std::string>> bad = {
      {"--peers", ""},
      {"--peers", "1=127.0.0.1"},                                // no port
      {"--peers", "0=127.0.0.1:7521"},                           // id 0
      {"--peers", "x=127.0.0.1:7521"},
      {"--peers", "1=127.0.0.1:7521,1=127.0.0.1:7522"},          // id twice
      {"--peers", "1=127.0.0.1:7521,2=127.0.0.1:7521"},          // address twice
      {"--node-id", "5", "--peers", "1=127.0.0.1:7521"},         // not naming this node
      {"--join", "--peers", "1=127.0.0.1:7521"},                 // join with peers
      {"--durability", "none", "--peers", "1=127.0.0.1:7521"},   // a cluster needs raft
      {"--bind", "0.0.0.0", "--peers", "1=127.0.0.1:7521"},      // wildcard without --advertise
      {"--election-timeout-ms", "10"},
      {"--advertise", "nohostport"},
      {"--raft-bind", "127.0.0.1:99999"},
  };
  for (const auto& args : bad) {
    Config c;
    bool exit_now = false;
    Status st = Parse(args, &c, &exit_now);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << joined;
  }
}

}  // namespace
}  // namespace tumbler::server

#include "options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tumbler::bench {
namespace {

Result<Options> Parse(std::vector<std::string> args) {
  std::vector<char*> argv = {const_cast<char*>("tumbler-bench")};
  for (auto& a : args) argv.push_back(a.data());
  return ParseOptions(static_cast<int>(argv.size()), argv.data());
}

TEST(OptionsTest, Durations) {
  EXPECT_EQ(*ParseDuration("5s"), std::chrono::seconds(5));
  EXPECT_EQ(*ParseDuration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(*ParseDuration("1.5"), std::chrono::milliseconds(1500));
  EXPECT_EQ(*ParseDuration("2m"), std::chrono::seconds(120));
  EXPECT_FALSE(ParseDuration("5h").ok());
  EXPECT_FALSE(ParseDuration("").ok());
  EXPECT_FALSE(ParseDuration("ms").ok());
}

TEST(OptionsTest, TargetPeersAndLabels) {
  auto o = Parse({"--target", "tumbler://127.0.0.1:7421", "--peer", "redis://127.0.0.1:6380",
                  "--peer-label", "always", "--peer=redis://localhost", "--workload", "all",
                  "--clients", "16", "--duration", "2s"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->target.backend, Backend::kTumbler);
  EXPECT_EQ(o->target.port, 7421);
  ASSERT_EQ(o->peers.size(), 2u);
  EXPECT_EQ(o->peers[0].label, "always");
  EXPECT_EQ(o->peers[1].port, 6379);
  EXPECT_EQ(o->workloads.size(), 3u);
  EXPECT_EQ(o->clients, 16);
}

TEST(OptionsTest, RejectsOutOfBounds) {
  EXPECT_FALSE(Parse({}).ok());
  EXPECT_FALSE(Parse({"--target", "tumbler://h:1", "--clients", "1025"}).ok());
  EXPECT_FALSE(Parse({"--target", "tumbler://h:1", "--clients", "0"}).ok());
  EXPECT_FALSE(Parse({"--target", "tumbler://h:1", "--threads", "3"}).ok());
  EXPECT_FALSE(Parse({"--target", "http://h:1"}).ok());
  EXPECT_FALSE(Parse({"--target", "redis://h:99999"}).ok());
  EXPECT_FALSE(Parse({"--target", "tumbler://h:1", "--workload", "bogus"}).ok());
  EXPECT_FALSE(Parse({"--peer-label", "x"}).ok());
  EXPECT_FALSE(Parse({"--target", "tumbler://h:1", "--ttl", "50"}).ok());
}

TEST(OptionsTest, Rounds) {
  auto o = Parse({"--target", "tumbler://h:1"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->rounds, 1);
  o = Parse({"--target", "tumbler://h:1", "--rounds", "5"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->rounds, 5);
  EXPECT_TRUE(Parse({"--target", "tumbler://h:1", "--rounds=20"}).ok());
  EXPECT_FALSE(Parse({"--target", "tumbler://h:1", "--rounds", "0"}).ok());
  EXPECT_FALSE(Parse({"--target", "tumbler://h:1", "--rounds", "21"}).ok());
  EXPECT_FALSE(Parse({"--target", "tumbler://h:1", "--rounds", "2x"}).ok());
}

TEST(OptionsTest, DurabilityIsAServerFlag) {
  auto o = Parse({"--target", "tumbler://h:1", "--durability=none"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("tumblerd flag"), std::string::npos);
}

TEST(OptionsTest, Ipv6Endpoint) {
  auto e = ParseEndpoint("redis://[::1]:6390");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->port, 6390);
}

}  // namespace
}  // namespace tumbler::bench

#include "client/url.h"

#include <gtest/gtest.h>

namespace tumbler::client {
namespace {

TEST(ParseHostPort, HostAndPort) {
  Result<Endpoint> e = ParseHostPort("example.com:7421");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->host, "example.com");
  EXPECT_EQ(e->port, 7421);
}

TEST(ParseHostPort, DefaultPort) {
  Result<Endpoint> e = ParseHostPort("10.0.0.1");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host, "10.0.0.1");
  EXPECT_EQ(e->port, kDefaultPort);
}

TEST(ParseHostPort, Ipv6InBrackets) {
  Result<Endpoint> e = ParseHostPort("[::1]:9000");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->port, 9000);
  EXPECT_EQ(e->ToString(), "[::1]:9000");
  Result<Endpoint> bare = ParseHostPort("[fe80::2]");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->port, kDefaultPort);
}

TEST(ParseHostPort, RejectsBadInput) {
  for (const char* bad : {"", ":7420", "host:", "host:0", "host:65536", "host:-1", "host:12x",
                          "host:99999999999", "::1", "[::1", "[::1]x", "[]:1", "a b:1",
                          "user@host:1", "[::1]:"}) {
    Result<Endpoint> e = ParseHostPort(bad);
    EXPECT_FALSE(e.ok()) << bad;
    if (!e.ok()) {
      EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
  EXPECT_FALSE(ParseHostPort(std::string(300, 'h')).ok());
}

TEST(ParseHostPort, PortBounds) {
  EXPECT_EQ(ParseHostPort("h:1")->port, 1);
  EXPECT_EQ(ParseHostPort("h:65535")->port, 65535);
}

TEST(ParseServerUrl, OneHost) {
  auto endpoints = ParseServerUrl("tumbler://127.0.0.1:7420");
  ASSERT_TRUE(endpoints.ok()) << endpoints.status().ToString();
  ASSERT_EQ(endpoints->size(), 1u);
  EXPECT_EQ((*endpoints)[0], (Endpoint{"127.0.0.1", 7420}));
}

TEST(ParseServerUrl, SeveralHostsKeepOrder) {
  auto endpoints = ParseServerUrl("tumbler://h1:1,h2,[::1]:3/");
  ASSERT_TRUE(endpoints.ok()) << endpoints.status().ToString();
  ASSERT_EQ(endpoints->size(), 3u);
  EXPECT_EQ((*endpoints)[0], (Endpoint{"h1", 1}));
  EXPECT_EQ((*endpoints)[1], (Endpoint{"h2", kDefaultPort}));
  EXPECT_EQ((*endpoints)[2], (Endpoint{"::1", 3}));
}

TEST(ParseServerUrl, SchemeIsCaseInsensitive) {
  EXPECT_TRUE(ParseServerUrl("TUMBLER://h:1").ok());
}

TEST(ParseServerUrl, OtherBackendsAreUnsupported) {
  for (const char* url : {"redis://h:6379", "etcd://h:2379", "zookeeper://h", "postgres://h",
                          "mysql://h", "redlock://a,b,c"}) {
    auto endpoints = ParseServerUrl(url);
    ASSERT_FALSE(endpoints.ok()) << url;
    EXPECT_EQ(endpoints.status().code(), StatusCode::kUnsupported) << url;
  }
}

TEST(ParseServerUrl, RejectsMalformed) {
  for (const char* bad : {"", "127.0.0.1:7420", "tumbler://", "tumbler:///", "http://h",
                          "tumbler://h:1,", "tumbler://,h", "tumbler://h:1/path",
                          "tumbler://h?x=1", "tumbler://h:1,,h:2", "tumbler://h:0"}) {
    auto endpoints = ParseServerUrl(bad);
    ASSERT_FALSE(endpoints.ok()) << bad;
    EXPECT_EQ(endpoints.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ParseServerUrl, BoundsHostCount) {
  std::string url = "tumbler://";
  for (size_t i = 0; i < kEndpointsMax; ++i) url += (i ? ",h" : "h") + std::to_string(i);
  EXPECT_TRUE(ParseServerUrl(url).ok());
  url += ",one-too-many";
  EXPECT_FALSE(ParseServerUrl(url).ok());
}

}  // namespace
}  // namespace tumbler::client

#include "client/owner.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "core/limits.h"

namespace tumbler::client {
namespace {

TEST(ThreadOwnerTag, StableWithinAThread) {
  const std::string& a = ThreadOwnerTag();
  const std::string& b = ThreadOwnerTag();
  EXPECT_EQ(&a, &b);
  EXPECT_FALSE(a.empty());
  EXPECT_LE(a.size(), limits::kOwnerBytesMax);
}

TEST(ThreadOwnerTag, DistinctAcrossThreads) {
  std::vector<std::string> tags(16);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < tags.size(); ++i) {
    threads.emplace_back([&tags, i] { tags[i] = ThreadOwnerTag(); });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> unique(tags.begin(), tags.end());
  unique.insert(ThreadOwnerTag());
  EXPECT_EQ(unique.size(), tags.size() + 1);
}

TEST(ThreadOwnerTag, NotReusedAfterAThreadEnds) {
  // OS thread ids are reused; tags must not be, or a new thread could inherit
  // a dead thread's holds.
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    std::string tag;
    std::thread([&tag] { tag = ThreadOwnerTag(); }).join();
    EXPECT_TRUE(seen.insert(tag).second) << tag;
  }
}

}  // namespace
}  // namespace tumbler::client

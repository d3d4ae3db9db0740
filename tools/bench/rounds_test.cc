#include "rounds.h"

#include <gtest/gtest.h>

#include <vector>

namespace tumbler::bench {
namespace {

LoadResult Round(double measured_s, uint64_t pairs) {
  LoadResult r;
  r.measured_s = measured_s;
  r.pairs = pairs;
  r.acquisitions = pairs;
  return r;
}

TEST(RoundsTest, MedianOddEvenEmpty) {
  EXPECT_DOUBLE_EQ(Median({}), 0);
  EXPECT_DOUBLE_EQ(Median({3}), 3);
  EXPECT_DOUBLE_EQ(Median({5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(Median({0.9, 0.7, 0.8, 10.0, 0.75}), 0.8);  // an outlier does not move it
}

TEST(RoundsTest, PoolSumsCountsAndTimeAndMergesHistograms) {
  LoadResult a = Round(2.0, 1000);
  a.busy_replies = 5;
  a.self_reacquisitions = 1;
  a.client_acquisitions_min = 10;
  a.client_acquisitions_max = 20;
  a.client_cpu_s = 0.5;
  a.host_steal_s = 0.125;
  a.acquire.Record(100);
  a.handoff.Record(1'000);
  LoadResult b = Round(3.0, 4000);
  b.busy_replies = 7;
  b.self_reacquisitions = 2;
  b.client_acquisitions_min = 5;
  b.client_acquisitions_max = 15;
  b.client_cpu_s = 0.25;
  b.host_steal_s = 0.25;
  b.acquire.Record(200);
  b.acquire.Record(300);
  b.handoff.Record(2'000'000);

  const LoadResult p = PoolRounds({a, b});
  EXPECT_DOUBLE_EQ(p.measured_s, 5.0);
  EXPECT_EQ(p.pairs, 5000u);
  EXPECT_EQ(p.acquisitions, 5000u);
  EXPECT_DOUBLE_EQ(PairsPerSecond(p), 1000.0);  // total pairs / total time, not a mean of rates
  EXPECT_EQ(p.busy_replies, 12u);
  EXPECT_EQ(p.self_reacquisitions, 3u);
  EXPECT_EQ(p.client_acquisitions_min, 5u);
  EXPECT_EQ(p.client_acquisitions_max, 20u);
  EXPECT_DOUBLE_EQ(p.client_cpu_s, 0.75);
  EXPECT_DOUBLE_EQ(p.host_steal_s, 0.375);
  EXPECT_EQ(p.acquire.count(), 3u);
  EXPECT_EQ(p.acquire.min_ns(), 100);
  EXPECT_EQ(p.acquire.max_ns(), 300);
  EXPECT_EQ(p.handoff.count(), 2u);
  EXPECT_EQ(p.handoff.max_ns(), 2'000'000);
}

TEST(RoundsTest, PooledStealIsUnknownWhenOneRoundsIs) {
  LoadResult a = Round(2.0, 1000);
  a.host_steal_s = 0.5;
  LoadResult b = Round(2.0, 1000);  // host_steal_s left unknown
  EXPECT_LT(PoolRounds({a, b}).host_steal_s, 0);
  EXPECT_LT(PoolRounds({b, a}).host_steal_s, 0);
  b.host_steal_s = 0;
  EXPECT_DOUBLE_EQ(PoolRounds({a, b}).host_steal_s, 0.5);
}

TEST(RoundsTest, PoolOfNothingIsEmpty) {
  const LoadResult p = PoolRounds({});
  EXPECT_EQ(p.pairs, 0u);
  EXPECT_DOUBLE_EQ(PairsPerSecond(p), 0);
  EXPECT_EQ(p.client_acquisitions_min, 0u);
}

TEST(RoundsTest, RatiosAreTakenWithinEachRound) {
  // The machine halves its speed after round 1: both servers slow down
  // together, so every per-round ratio is 2 while the pooled rates differ.
  const std::vector<LoadResult> target = {Round(1, 2000), Round(1, 1000), Round(1, 1000)};
  const std::vector<LoadResult> peer = {Round(1, 1000), Round(1, 500), Round(1, 500)};
  const auto r = SummarizeRatios(target, peer);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->per_round.size(), 3u);
  for (const auto& v : r->per_round) EXPECT_DOUBLE_EQ(v.value(), 2.0);
  EXPECT_EQ(r->rounds_used, 3);
  EXPECT_DOUBLE_EQ(r->median, 2.0);
  EXPECT_DOUBLE_EQ(r->min, 2.0);
  EXPECT_DOUBLE_EQ(r->max, 2.0);
}

TEST(RoundsTest, MedianMinMaxOfPerRoundRatios) {
  const std::vector<LoadResult> target = {Round(2, 800), Round(2, 700), Round(2, 900),
                                          Round(2, 600)};
  const std::vector<LoadResult> peer = {Round(2, 1000), Round(2, 1000), Round(2, 1000),
                                        Round(2, 1000)};
  const auto r = SummarizeRatios(target, peer);
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(*r->per_round[0], 0.8);
  EXPECT_DOUBLE_EQ(*r->per_round[3], 0.6);
  EXPECT_DOUBLE_EQ(r->median, 0.75);
  EXPECT_DOUBLE_EQ(r->min, 0.6);
  EXPECT_DOUBLE_EQ(r->max, 0.9);
}

TEST(RoundsTest, RoundWithoutPeerPairsHasNoRatio) {
  const std::vector<LoadResult> target = {Round(1, 100), Round(1, 100), Round(1, 100)};
  const std::vector<LoadResult> peer = {Round(1, 50), Round(1, 0), Round(0, 0)};
  const auto r = SummarizeRatios(target, peer);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->per_round.size(), 3u);
  EXPECT_FALSE(r->per_round[1].has_value());
  EXPECT_FALSE(r->per_round[2].has_value());
  EXPECT_EQ(r->rounds_used, 1);
  EXPECT_DOUBLE_EQ(r->median, 2.0);

  EXPECT_FALSE(SummarizeRatios({Round(1, 100)}, {Round(1, 0)}).has_value());
  EXPECT_FALSE(SummarizeRatios({}, {}).has_value());
}

}  // namespace
}  // namespace tumbler::bench

#include "histogram.h"

#include <gtest/gtest.h>

namespace tumbler::bench {
namespace {

TEST(LatencyHistogramTest, BucketsAreContiguousAndOrdered) {
  for (int b = 0; b + 1 < LatencyHistogram::kBucketCount; ++b) {
    ASSERT_EQ(LatencyHistogram::BucketHigh(b) + 1, LatencyHistogram::BucketLow(b + 1)) << b;
    ASSERT_EQ(LatencyHistogram::BucketOf(LatencyHistogram::BucketLow(b)), b);
    ASSERT_EQ(LatencyHistogram::BucketOf(LatencyHistogram::BucketHigh(b)), b);
  }
}

TEST(LatencyHistogramTest, RelativeErrorUnderOneThirtySecond) {
  for (int64_t v = 1; v < (int64_t{1} << 40); v = v * 3 / 2 + 1) {
    const int b = LatencyHistogram::BucketOf(v);
    const int64_t width = LatencyHistogram::BucketHigh(b) - LatencyHistogram::BucketLow(b) + 1;
    ASSERT_LE(width * 32, v * 2 + 32) << v;
  }
}

TEST(LatencyHistogramTest, HugeAndNegativeValuesAreClamped) {
  LatencyHistogram h;
  h.Record(-5);
  h.Record(int64_t{1} << 50);
  EXPECT_EQ(h.count(), 2u);
  EXPECT_EQ(h.min_ns(), 0);
  EXPECT_EQ(h.max_ns(), int64_t{1} << 50);
  EXPECT_EQ(LatencyHistogram::BucketOf(int64_t{1} << 50), LatencyHistogram::kBucketCount - 1);
}

TEST(LatencyHistogramTest, Percentiles) {
  LatencyHistogram h;
  EXPECT_EQ(h.Percentile(0.5), 0);
  for (int64_t v = 1; v <= 1000; ++v) h.Record(v * 1000);  // 1us .. 1ms
  EXPECT_EQ(h.count(), 1000u);
  EXPECT_NEAR(h.Percentile(0.5), 500'000, 500'000 / 16);
  EXPECT_NEAR(h.Percentile(0.99), 990'000, 990'000 / 16);
  EXPECT_EQ(h.Percentile(1.0), h.max_ns());
  EXPECT_NEAR(h.mean_ns(), 500'500, 1);
}

TEST(LatencyHistogramTest, Merge) {
  LatencyHistogram a, b;
  a.Record(10);
  b.Record(1'000'000);
  a.Merge(b);
  EXPECT_EQ(a.count(), 2u);
  EXPECT_EQ(a.min_ns(), 10);
  EXPECT_EQ(a.max_ns(), 1'000'000);
}

}  // namespace
}  // namespace tumbler::bench

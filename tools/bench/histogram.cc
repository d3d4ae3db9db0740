#include "histogram.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>

namespace tumbler::bench {

int LatencyHistogram::BucketOf(int64_t value_ns) {
  if (value_ns < kSubCount) return value_ns < 0 ? 0 : static_cast<int>(value_ns);
  const uint64_t v = static_cast<uint64_t>(value_ns);
  const int exponent = 63 - std::countl_zero(v);  // >= kSubBits
  if (exponent > kMaxExponent) return kBucketCount - 1;
  const int shift = exponent - kSubBits;
  const int sub = static_cast<int>((v >> shift) & (kSubCount - 1));
  return (exponent - kSubBits + 1) * kSubCount + sub;
}

int64_t LatencyHistogram::BucketLow(int bucket) {
  assert(bucket >= 0);
  assert(bucket < kBucketCount);
  if (bucket < kSubCount) return bucket;
  const int exponent = bucket / kSubCount + kSubBits - 1;
  const int sub = bucket % kSubCount;
  return static_cast<int64_t>(kSubCount + sub) << (exponent - kSubBits);
}

int64_t LatencyHistogram::BucketHigh(int bucket) {
  if (bucket < kSubCount) return bucket;
  const int exponent = bucket / kSubCount + kSubBits - 1;
  return BucketLow(bucket) + (int64_t{1} << (exponent - kSubBits)) - 1;
}

void LatencyHistogram::Record(int64_t value_ns) {
  if (value_ns < 0) value_ns = 0;  // a clock can only be read in order; be safe
  ++buckets_[BucketOf(value_ns)];
  ++count_;
  min_ns_ = std::min(min_ns_, value_ns);
  max_ns_ = std::max(max_ns_, value_ns);
  sum_ns_ += value_ns;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (int i = 0; i < kBucketCount; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  min_ns_ = std::min(min_ns_, other.min_ns_);
  max_ns_ = std::max(max_ns_, other.max_ns_);
  sum_ns_ += other.sum_ns_;
}

double LatencyHistogram::mean_ns() const {
  return count_ == 0 ? 0.0 : static_cast<double>(sum_ns_ / count_);
}

int64_t LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  rank = std::clamp<uint64_t>(rank, 1, count_);
  uint64_t seen = 0;
  for (int i = 0; i < kBucketCount; ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      const int64_t mid = BucketLow(i) + (BucketHigh(i) - BucketLow(i)) / 2;
      return std::clamp(mid, min_ns(), max_ns_);
    }
  }
  return max_ns_;
}

}  // namespace tumbler::bench

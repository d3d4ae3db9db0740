// A latency histogram with fixed log-linear buckets, in nanoseconds.
//
// Recording is one array increment: no allocation, no lock, so the load
// generator can record every request. Values from 0 ns to 2^40 ns (~18 min)
// are kept with a relative error under 1/32 (~3%); larger values are clamped
// into the last bucket (and still counted in max_ns()).
//
// Thread safety: one thread records into one histogram; merge them afterwards.
#pragma once

#include <array>
#include <cstdint>

namespace tumbler::bench {

class LatencyHistogram {
 public:
  // Sub-buckets per power of two: 2^kSubBits.
  static constexpr int kSubBits = 5;
  static constexpr int kSubCount = 1 << kSubBits;
  static constexpr int kMaxExponent = 40;  // values up to 2^40 ns
  static constexpr int kBucketCount = (kMaxExponent - kSubBits + 2) * kSubCount;

  void Record(int64_t value_ns);
  void Merge(const LatencyHistogram& other);
  void Clear() { *this = LatencyHistogram(); }

  uint64_t count() const { return count_; }
  int64_t min_ns() const { return count_ == 0 ? 0 : min_ns_; }
  int64_t max_ns() const { return max_ns_; }
  double mean_ns() const;
  // The smallest recorded value v such that a fraction q (0..1] of samples are
  // <= v, reported as the middle of v's bucket (clamped to [min, max]).
  // 0 when empty.
  int64_t Percentile(double q) const;

  // Bucket arithmetic, exposed for tests.
  static int BucketOf(int64_t value_ns);
  static int64_t BucketLow(int bucket);
  static int64_t BucketHigh(int bucket);  // inclusive

 private:
  std::array<uint64_t, kBucketCount> buckets_{};
  uint64_t count_ = 0;
  int64_t min_ns_ = INT64_MAX;
  int64_t max_ns_ = 0;
  long double sum_ns_ = 0;
};

}  // namespace tumbler::bench

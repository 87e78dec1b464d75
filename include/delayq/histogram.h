// A latency histogram with fixed buckets, from 100 us to 60 s (the
// /metrics histograms of the engine, the store and the Redis calls: one
// set of bounds, so that they read alike and a dashboard can sum them).
// Observing is a few comparisons and three additions: cheap enough for
// every job.
//
// Thread: LatencyHistogram is not synchronised (each belongs to one
// thread); SharedLatencyHistogram is observed on one thread and read on any.
#ifndef DELAYQ_HISTOGRAM_H_
#define DELAYQ_HISTOGRAM_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace delayq {

struct LatencyHistogram {
  // Upper bounds of the buckets, in microseconds (inclusive, as
  // Prometheus's `le`); a last bucket holds what is above them all.
  static constexpr std::array<int64_t, 18> kBoundsUs = {
      100,       250,       500,       1'000,      2'500,      5'000,
      10'000,    25'000,    50'000,    100'000,    250'000,    500'000,
      1'000'000, 2'500'000, 5'000'000, 10'000'000, 30'000'000, 60'000'000};

  // Not cumulative: counts[i] is what fell in bucket i (<= kBoundsUs[i]
  // and above the bound before), counts.back() what is above every bound.
  std::array<uint64_t, kBoundsUs.size() + 1> counts{};
  uint64_t count = 0;
  int64_t sum_us = 0;

  // The bucket an observation of `us` (>= 0) falls in.
  static size_t BucketOf(int64_t us) {
    return static_cast<size_t>(std::lower_bound(kBoundsUs.begin(), kBoundsUs.end(), us) -
                               kBoundsUs.begin());
  }

  void Observe(int64_t us) {
    us = std::max<int64_t>(us, 0);
    counts[BucketOf(us)]++;
    count++;
    sum_us += us;
  }
};

// A LatencyHistogram for a figure timed on one thread (the store's writer,
// its syncer) and read on another (a scrape): relaxed atomics, so a reader
// may see an observation's bucket before its sum; every figure only grows.
struct SharedLatencyHistogram {
  std::array<std::atomic<uint64_t>, LatencyHistogram::kBoundsUs.size() + 1> counts{};
  std::atomic<int64_t> sum_us{0};

  void Observe(int64_t us) {
    us = std::max<int64_t>(us, 0);
    counts[LatencyHistogram::BucketOf(us)].fetch_add(1, std::memory_order_relaxed);
    sum_us.fetch_add(us, std::memory_order_relaxed);
  }
  LatencyHistogram Snapshot() const {
    LatencyHistogram h;
    for (size_t i = 0; i < counts.size(); ++i) {
      h.counts[i] = counts[i].load(std::memory_order_relaxed);
      h.count += h.counts[i];
    }
    h.sum_us = sum_us.load(std::memory_order_relaxed);
    return h;
  }
};

}  // namespace delayq

#endif  // DELAYQ_HISTOGRAM_H_

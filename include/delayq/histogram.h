// A latency histogram with fixed buckets, from 100 us to 60 s (the
// /metrics histograms of the engine, the store and the Redis calls: one
// set of bounds, so that they read alike and a dashboard can sum them).
// Observing is a few comparisons and three additions: cheap enough for
// every job.
//
// Thread: not synchronised; each histogram belongs to one thread.
#ifndef DELAYQ_HISTOGRAM_H_
#define DELAYQ_HISTOGRAM_H_

#include <algorithm>
#include <array>
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

  void Observe(int64_t us) {
    us = std::max<int64_t>(us, 0);
    const size_t i = static_cast<size_t>(std::lower_bound(kBoundsUs.begin(), kBoundsUs.end(), us) -
                                         kBoundsUs.begin());
    counts[i]++;
    count++;
    sum_us += us;
  }
};

}  // namespace delayq

#endif  // DELAYQ_HISTOGRAM_H_

// Time for the backends: epoch time that never goes backwards, in
// microseconds (NowUs: the Local backend's engine runs on it) and in whole
// milliseconds (Now, rounded down: stats, replies, the Redis backend).
// Taken from the wall clock once at start, then advanced by the monotonic
// clock, so a wall-clock step (NTP, an operator) neither fires delayed jobs
// early nor freezes TTRs. The cost: after a wall-clock step, run_at times
// are honoured against the clock as it was at start.
#ifndef DELAYQ_BACKEND_CLOCK_H_
#define DELAYQ_BACKEND_CLOCK_H_

#include <algorithm>
#include <chrono>

#include "delayq/types.h"

namespace delayq::backend {

// Epoch microseconds.
using TimeUs = int64_t;

class Clock {
 public:
  Clock()
      : epoch_base_us_(std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count()),
        steady_base_(std::chrono::steady_clock::now()) {}
  virtual ~Clock() = default;

  // The one reading every other is made from (a test's clock overrides it).
  virtual TimeUs NowUs() const {
    return epoch_base_us_ + std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::steady_clock::now() - steady_base_)
                                .count();
  }
  // NowUs() in whole milliseconds, rounded down.
  TimeMs Now() const {
    TimeUs us = NowUs();
    return us / 1000 - (us % 1000 < 0);
  }
  // The steady-clock instant at which NowUs() reaches `t`; at most a
  // century ahead (a due time may lie 4,400 years ahead, but a steady-clock
  // time point overflows its nanoseconds after 292 years).
  std::chrono::steady_clock::time_point SteadyAtUs(TimeUs t) const {
    constexpr TimeUs kCentury = TimeUs{100} * 365 * 24 * 3600 * 1'000'000;
    return steady_base_ + std::chrono::microseconds(std::min(t - epoch_base_us_, kCentury));
  }
  // The same for Now() reaching `t` (kNever: a century ahead).
  std::chrono::steady_clock::time_point SteadyAt(TimeMs t) const {
    return SteadyAtUs(t > kNever / 1000 ? kNever : t * 1000);
  }

 private:
  TimeUs epoch_base_us_;
  std::chrono::steady_clock::time_point steady_base_;
};

}  // namespace delayq::backend

#endif  // DELAYQ_BACKEND_CLOCK_H_

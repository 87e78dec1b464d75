// Time for the backends: epoch milliseconds that never go backwards.
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

class Clock {
 public:
  Clock()
      : epoch_base_(std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count()),
        steady_base_(std::chrono::steady_clock::now()) {}
  virtual ~Clock() = default;

  virtual TimeMs Now() const {
    return epoch_base_ + std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - steady_base_)
                             .count();
  }
  // The steady-clock instant at which Now() reaches `t`; at most a century
  // ahead (a due time may lie 4,400 years ahead, but a steady-clock time
  // point overflows its nanoseconds after 292 years).
  std::chrono::steady_clock::time_point SteadyAt(TimeMs t) const {
    constexpr TimeMs kCentury = TimeMs{100} * 365 * 24 * 3600 * 1000;
    return steady_base_ + std::chrono::milliseconds(std::min(t - epoch_base_, kCentury));
  }

 private:
  TimeMs epoch_base_;
  std::chrono::steady_clock::time_point steady_base_;
};

}  // namespace delayq::backend

#endif  // DELAYQ_BACKEND_CLOCK_H_

// A backend clock that stands still until a test moves it (`now`, in
// milliseconds), for the unit tests of the backends and the front-ends.
#ifndef DELAYQ_TESTS_MANUAL_CLOCK_H_
#define DELAYQ_TESTS_MANUAL_CLOCK_H_

#include "backend/clock.h"
#include "delayq/types.h"

namespace delayq::testing {

class ManualClock : public backend::Clock {
 public:
  backend::TimeUs NowUs() const override { return now * 1000; }
  TimeMs now = 1'700'000'000'000;
};

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_MANUAL_CLOCK_H_

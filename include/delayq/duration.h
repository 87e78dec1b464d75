// Human durations and back-off specs, shared by the protocol front-ends and
// the CLI: "250ms", "30s", "4m", "1h", "2d", or a bare number of ms.
#ifndef DELAYQ_DURATION_H_
#define DELAYQ_DURATION_H_

#include <string>
#include <string_view>

#include "delayq/status.h"
#include "delayq/types.h"

namespace delayq {

// Returns kInvalidArgument for anything but <digits>[ms|s|m|h|d] within
// 0..kMaxDelayMs.
Result<TimeMs> ParseDuration(std::string_view text);

// "4m,10m,10m,1h" (a list, at most 64), or "exp:<base>:<cap>" (exponential),
// or "none". Returns kInvalidArgument otherwise.
Result<Backoff> ParseBackoff(std::string_view text);

// The inverse, for display: "4m,10m" / "exp:1s:1h" / "none".
std::string FormatBackoff(const Backoff& b);
std::string FormatDuration(TimeMs ms);

}  // namespace delayq

#endif  // DELAYQ_DURATION_H_

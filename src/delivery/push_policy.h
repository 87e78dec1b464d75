// What a push's answer means for its job (docs/push.md, "Retries"): a 2xx
// delivers it (the job is finished); 410 Gone buries it at once; any other
// answer, a timeout or a failed connection is a failed try, retried after
// its back-off, or after Retry-After on a 429 or 503 that sends one; a try
// that reaches the job's max_tries buries it (the dead letter).
#ifndef DELAYQ_DELIVERY_PUSH_POLICY_H_
#define DELAYQ_DELIVERY_PUSH_POLICY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "delayq/types.h"
#include "delivery/push_client.h"

namespace delayq::delivery {

// The back-off of a push topic whose jobs name none: 4 tries after the
// first, then every 6 hours, as payment providers resend a notification
// (30 s, 2 min, 10 min, 1 h, 6 h ...).
Backoff DefaultPushBackoff();
// Tries of a push job that names no max_tries (0 would retry forever).
inline constexpr uint32_t kDefaultPushMaxTries = 10;
// The longest Retry-After honoured; a longer one is cut to it.
inline constexpr TimeMs kMaxRetryAfterMs = 24 * 3600 * 1000;

// A Retry-After header's delay from `now` (epoch ms): delta-seconds ("120")
// or an HTTP date ("Wed, 21 Oct 2026 07:28:00 GMT", RFC 9110's IMF-fixdate);
// nullopt when it is neither. A date already past is 0. Cut to
// kMaxRetryAfterMs.
std::optional<TimeMs> RetryAfterDelay(std::string_view value, TimeMs now);

struct PushVerdict {
  enum class Kind : uint8_t { kDelivered, kRetry, kBury };
  Kind kind = Kind::kRetry;
  // kRetry: the delay the answer asks for (Retry-After); nullopt: the
  // back-off's.
  std::optional<TimeMs> delay_ms;
  // For the job's record and the logs: "200", "500: <first bytes>",
  // "timeout: ...", "410 Gone".
  std::string note;
};

PushVerdict JudgePush(const PushResponse& r, TimeMs now);

}  // namespace delayq::delivery

#endif  // DELAYQ_DELIVERY_PUSH_POLICY_H_

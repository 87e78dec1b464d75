// What each answer to a push means for its job, and Retry-After in both its
// forms.
#include "delivery/push_policy.h"

#include <gtest/gtest.h>

namespace delayq::delivery {
namespace {

constexpr TimeMs kNow = 1'793'000'000'000;  // 2026-10-26T07:33:20Z

PushResponse Status(int status, std::optional<std::string> retry_after = std::nullopt) {
  PushResponse r;
  r.status = status;
  r.retry_after = std::move(retry_after);
  return r;
}

TEST(PushPolicy, EachAnswerHasItsVerdict) {
  for (int s : {200, 201, 202, 204, 299})
    EXPECT_EQ(JudgePush(Status(s), kNow).kind, PushVerdict::Kind::kDelivered) << s;
  EXPECT_EQ(JudgePush(Status(410), kNow).kind, PushVerdict::Kind::kBury);
  for (int s : {100, 301, 302, 400, 401, 404, 409, 429, 500, 502, 503, 504}) {
    PushVerdict v = JudgePush(Status(s), kNow);
    EXPECT_EQ(v.kind, PushVerdict::Kind::kRetry) << s;
    EXPECT_FALSE(v.delay_ms.has_value()) << s;  // the back-off's
  }
  // Retry-After counts on 429 and 503 only.
  EXPECT_EQ(JudgePush(Status(429, "7"), kNow).delay_ms, 7'000);
  EXPECT_EQ(JudgePush(Status(503, "120"), kNow).delay_ms, 120'000);
  EXPECT_FALSE(JudgePush(Status(500, "7"), kNow).delay_ms.has_value());
  EXPECT_FALSE(JudgePush(Status(429, "soon"), kNow).delay_ms.has_value());
  // No answer: a failed try, saying why.
  PushResponse t;
  t.failure = PushFailure::kTimeout;
  t.error = "Operation timed out after 300 milliseconds";
  PushVerdict v = JudgePush(t, kNow);
  EXPECT_EQ(v.kind, PushVerdict::Kind::kRetry);
  EXPECT_EQ(v.note, "timeout: Operation timed out after 300 milliseconds");
  PushResponse body = Status(500);
  body.body_prefix = "db down";
  EXPECT_EQ(JudgePush(body, kNow).note, "500: db down");
}

TEST(PushPolicy, RetryAfterInSecondsOrAsADate) {
  EXPECT_EQ(RetryAfterDelay("0", kNow), 0);
  EXPECT_EQ(RetryAfterDelay(" 30 ", kNow), 30'000);
  EXPECT_EQ(RetryAfterDelay("99999999999999999999", kNow), kMaxRetryAfterMs);  // cut
  // kNow is 2026-10-26T07:33:20Z.
  EXPECT_EQ(RetryAfterDelay("Mon, 26 Oct 2026 07:34:20 GMT", kNow), 60'000);
  EXPECT_EQ(RetryAfterDelay("Mon, 26 Oct 2026 07:33:19 GMT", kNow), 0);  // past
  EXPECT_EQ(RetryAfterDelay("Sun, 26 Oct 2036 06:13:20 GMT", kNow), kMaxRetryAfterMs);
  for (const char* bad : {"", "-5", "1.5", "soon", "Mon, 26 Oct 2026 06:14:20 UTC",
                          "Mon, 26 Foo 2026 06:14:20 GMT", "Monday, 26-Oct-26 06:14:20 GMT"})
    EXPECT_FALSE(RetryAfterDelay(bad, kNow).has_value()) << bad;
}

TEST(PushPolicy, TheDefaultBackoffGrows) {
  Backoff b = DefaultPushBackoff();
  TimeMs last = 0;
  for (uint32_t failures = 1; failures <= kDefaultPushMaxTries; ++failures) {
    TimeMs d = b.DelayFor(failures);
    EXPECT_GE(d, last) << failures;
    last = d;
  }
  EXPECT_EQ(b.DelayFor(1), 30'000);
  EXPECT_EQ(b.DelayFor(9), 21'600'000);
}

}  // namespace
}  // namespace delayq::delivery

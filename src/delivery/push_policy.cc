#include "delivery/push_policy.h"

#include <date/date.h>

#include <array>
#include <cctype>
#include <cstdio>

namespace delayq::delivery {

namespace {

// "Sun, 06 Nov 1994 08:49:37 GMT" -> epoch ms.
std::optional<TimeMs> ParseImfFixdate(std::string_view v) {
  static constexpr std::array<std::string_view, 12> kMonths = {
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (v.size() != 29 || v[3] != ',' || v.substr(25) != " GMT") return std::nullopt;
  const std::string s(v);
  int day = 0, year = 0, h = 0, mi = 0, sec = 0;
  char mon[4] = {};
  int used = 0;
  if (std::sscanf(s.c_str() + 5, "%2d %3s %4d %2d:%2d:%2d%n", &day, mon, &year, &h, &mi, &sec,
                  &used) != 6 ||
      used != 20)
    return std::nullopt;
  unsigned month = 0;
  for (size_t i = 0; i < kMonths.size(); ++i)
    if (kMonths[i] == mon) month = static_cast<unsigned>(i) + 1;
  if (month == 0 || day < 1 || day > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
  const date::year_month_day ymd{date::year{year}, date::month{month},
                                 date::day{static_cast<unsigned>(day)}};
  if (!ymd.ok()) return std::nullopt;
  const int64_t days = date::sys_days{ymd}.time_since_epoch().count();
  return ((days * 24 + h) * 60 + mi) * 60'000 + int64_t{sec} * 1000;
}

}  // namespace

Backoff DefaultPushBackoff() {
  return Backoff::List({30'000, 120'000, 600'000, 3'600'000, 21'600'000});
}

std::optional<TimeMs> RetryAfterDelay(std::string_view value, TimeMs now) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  if (std::isdigit(static_cast<unsigned char>(value[0]))) {
    int64_t secs = 0;
    for (char c : value) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
      secs = std::min<int64_t>(secs * 10 + (c - '0'), kMaxRetryAfterMs / 1000);
    }
    return secs * 1000;
  }
  std::optional<TimeMs> at = ParseImfFixdate(value);
  if (!at) return std::nullopt;
  return std::clamp<TimeMs>(*at - now, 0, kMaxRetryAfterMs);
}

PushVerdict JudgePush(const PushResponse& r, TimeMs now) {
  PushVerdict v;
  if (r.failure != PushFailure::kNone) {
    v.kind = PushVerdict::Kind::kRetry;
    v.note = std::string(PushFailureName(r.failure)) + ": " + r.error;
    return v;
  }
  v.note = std::to_string(r.status);
  if (!r.body_prefix.empty()) v.note += ": " + r.body_prefix;
  if (r.status >= 200 && r.status < 300) {
    v.kind = PushVerdict::Kind::kDelivered;
  } else if (r.status == 410) {
    v.kind = PushVerdict::Kind::kBury;
  } else {
    v.kind = PushVerdict::Kind::kRetry;
    if ((r.status == 429 || r.status == 503) && r.retry_after)
      v.delay_ms = RetryAfterDelay(*r.retry_after, now);
  }
  return v;
}

}  // namespace delayq::delivery

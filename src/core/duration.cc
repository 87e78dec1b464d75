#include "delayq/duration.h"

#include <charconv>

namespace delayq {

Result<TimeMs> ParseDuration(std::string_view text) {
  uint64_t n = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, n);
  if (ec != std::errc() || p == text.data()) return Status::InvalidArgument("bad duration");
  std::string_view unit(p, static_cast<size_t>(end - p));
  uint64_t scale;
  if (unit.empty() || unit == "ms") {
    scale = 1;
  } else if (unit == "s") {
    scale = 1000;
  } else if (unit == "m") {
    scale = 60'000;
  } else if (unit == "h") {
    scale = 3'600'000;
  } else if (unit == "d") {
    scale = 86'400'000;
  } else {
    return Status::InvalidArgument("bad duration unit (ms, s, m, h, d)");
  }
  if (n > static_cast<uint64_t>(kMaxDelayMs) / scale)
    return Status::InvalidArgument("duration too long");
  return static_cast<TimeMs>(n * scale);
}

Result<Backoff> ParseBackoff(std::string_view text) {
  if (text == "none") return Backoff{};
  if (text.substr(0, 4) == "exp:") {
    std::string_view rest = text.substr(4);
    size_t colon = rest.find(':');
    if (colon == std::string_view::npos) return Status::InvalidArgument("exp:<base>:<cap>");
    auto base = ParseDuration(rest.substr(0, colon));
    auto cap = ParseDuration(rest.substr(colon + 1));
    if (!base.ok() || !cap.ok() || *base <= 0 || *cap < *base)
      return Status::InvalidArgument("exp:<base>:<cap> with 0 < base <= cap");
    return Backoff::Exponential(*base, *cap);
  }
  std::vector<TimeMs> delays;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    auto d = ParseDuration(
        text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    if (!d.ok()) return d.status();
    delays.push_back(*d);
    if (delays.size() > 64) return Status::InvalidArgument("at most 64 back-off delays");
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return Backoff::List(std::move(delays));
}

std::string FormatDuration(TimeMs ms) {
  struct Unit {
    TimeMs scale;
    const char* name;
  };
  static constexpr Unit kUnits[] = {
      {86'400'000, "d"}, {3'600'000, "h"}, {60'000, "m"}, {1000, "s"}};
  for (const Unit& u : kUnits)
    if (ms > 0 && ms % u.scale == 0) return std::to_string(ms / u.scale) + u.name;
  return std::to_string(ms) + "ms";
}

std::string FormatBackoff(const Backoff& b) {
  switch (b.kind) {
    case Backoff::Kind::kNone:
      return "none";
    case Backoff::Kind::kExponential:
      return "exp:" + FormatDuration(b.base_ms) + ":" + FormatDuration(b.cap_ms);
    case Backoff::Kind::kList: {
      std::string s;
      for (TimeMs d : b.delays_ms) {
        if (!s.empty()) s += ',';
        s += FormatDuration(d);
      }
      return s;
    }
  }
  return "none";
}

}  // namespace delayq

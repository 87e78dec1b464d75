#include "delivery/cron.h"

#include <date/date.h>
#include <date/tz.h>

#include <array>
#include <cctype>
#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include "delayq/duration.h"

namespace delayq::delivery {

namespace {

using std::chrono::seconds;

constexpr std::array<std::string_view, 12> kMonthNames = {"jan", "feb", "mar", "apr", "may", "jun",
                                                          "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<std::string_view, 7> kDayNames = {"sun", "mon", "tue", "wed",
                                                       "thu", "fri", "sat"};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// One field's values as bits lo..hi. `names` (may be empty) are the values
// lo, lo+1, ... spelled as words. With `sunday7`, 7 is 0 (day of week).
struct FieldSpec {
  const char* what;
  int lo, hi;
  const std::string_view* names;
  size_t name_count;
  int name_base;  // the value of names[0]
  bool sunday7;
  bool question = false;  // takes ? for * (the day fields)
};

Result<int> FieldValue(std::string_view text, const FieldSpec& f) {
  if (text.empty()) return Status::InvalidArgument(std::string(f.what) + ": a value is missing");
  if (std::isdigit(static_cast<unsigned char>(text[0]))) {
    int v = 0;
    for (char c : text) {
      if (!std::isdigit(static_cast<unsigned char>(c)) || v > 1000)
        return Status::InvalidArgument(std::string(f.what) + ": '" + std::string(text) +
                                       "' is not a number");
      v = v * 10 + (c - '0');
    }
    if (f.sunday7 && v == 7) v = 0;
    if (v < f.lo || v > f.hi)
      return Status::InvalidArgument(std::string(f.what) + ": " + std::to_string(v) +
                                     " is out of range " + std::to_string(f.lo) + ".." +
                                     std::to_string(f.sunday7 ? 7 : f.hi));
    return v;
  }
  const std::string word = Lower(text);
  for (size_t i = 0; i < f.name_count; ++i)
    if (f.names[i] == word) return f.name_base + static_cast<int>(i);
  return Status::InvalidArgument(std::string(f.what) + ": '" + std::string(text) +
                                 "' is not a value of this field");
}

// Sets the bits `text` names; *star: it starts with * or ? (Vixie cron's
// rule for the day fields).
template <size_t N>
Status ParseField(std::string_view text, const FieldSpec& f, std::bitset<N>* bits, bool* star) {
  *star = !text.empty() && (text[0] == '*' || text[0] == '?');
  while (true) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    int step = 1;
    bool stepped = false;
    if (size_t slash = item.find('/'); slash != std::string_view::npos) {
      std::string_view s = item.substr(slash + 1);
      int v = 0;
      for (char c : s) {
        if (!std::isdigit(static_cast<unsigned char>(c)) || v > 1000)
          return Status::InvalidArgument(std::string(f.what) + ": bad step '" + std::string(s) +
                                         "'");
        v = v * 10 + (c - '0');
      }
      if (s.empty() || v < 1)
        return Status::InvalidArgument(std::string(f.what) + ": a step is at least 1");
      step = v;
      stepped = true;
      item = item.substr(0, slash);
    }
    int from = f.lo, to = f.hi;
    if (item == "*" || item == "?") {
      if (item == "?" && !f.question)
        return Status::InvalidArgument(std::string(f.what) + ": '?' is only for the day fields");
    } else if (size_t dash = item.find('-'); dash != std::string_view::npos) {
      Result<int> a = FieldValue(item.substr(0, dash), f);
      if (!a.ok()) return a.status();
      // 7 (or SUN) closes a day-of-week range that starts later in the
      // week as Sunday's 7, not 0 (MON-SUN, 5-7); SUN-SUN is Sunday alone.
      std::string_view end = item.substr(dash + 1);
      Result<int> b = f.sunday7 && *a > 0 && (end == "7" || Lower(end) == "sun")
                          ? Result<int>(7)
                          : FieldValue(end, f);
      if (!b.ok()) return b.status();
      from = *a;
      to = *b;
      if (from > to)
        return Status::InvalidArgument(std::string(f.what) + ": the range '" + std::string(item) +
                                       "' ends before it starts");
    } else {
      Result<int> a = FieldValue(item, f);
      if (!a.ok()) return a.status();
      from = *a;
      // "a/n": from a to the end; "a": a alone.
      to = stepped ? f.hi : *a;
    }
    for (int v = from; v <= to; v += step)
      bits->set(static_cast<size_t>(f.sunday7 && v == 7 ? 0 : v));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return Status::InvalidArgument(std::string(f.what) + ": a list ends in ','");
  }
  return Status::Ok();
}

std::vector<std::string_view> Words(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

Result<CronSchedule> CronSchedule::Parse(std::string_view expr, std::string_view tz) {
  CronSchedule c;
  c.expr_ = std::string(expr);
  std::vector<std::string_view> words = Words(expr);
  if (words.empty()) return Status::InvalidArgument("the cron expression is empty");
  // A zone in the expression (robfig/cron, QStash): CRON_TZ=Europe/Berlin.
  for (std::string_view prefix : {"CRON_TZ=", "TZ="}) {
    if (words[0].rfind(prefix, 0) != 0) continue;
    std::string_view named = words[0].substr(prefix.size());
    if (!tz.empty() && tz != named)
      return Status::InvalidArgument("two time zones: " + std::string(tz) + " and " +
                                     std::string(named));
    tz = named;
    words.erase(words.begin());
    break;
  }
  if (!tz.empty() && tz != "UTC" && tz != "Etc/UTC") {
    try {
      c.zone_ = date::locate_zone(tz);
    } catch (const std::exception&) {
      return Status::InvalidArgument("unknown time zone '" + std::string(tz) +
                                     "' (an IANA name such as Europe/Berlin)");
    }
  }
  c.zone_name_ = std::string(tz);
  if (words.empty()) return Status::InvalidArgument("the cron expression has no fields");

  std::vector<std::string> fields;
  if (words[0][0] == '@') {
    const std::string d = Lower(words[0]);
    if (d == "@every") {
      if (words.size() != 2) return Status::InvalidArgument("@every takes one duration (30s, 5m)");
      Result<TimeMs> ms = ParseDuration(words[1]);
      if (!ms.ok()) return Status::InvalidArgument("@every: " + ms.status().message());
      if (*ms < kMinEveryMs)
        return Status::InvalidArgument("@every: at least " + std::to_string(kMinEveryMs) + "ms");
      c.every_ms_ = *ms;
      return c;
    }
    if (words.size() != 1)
      return Status::InvalidArgument(std::string(words[0]) + " takes nothing after it");
    if (d == "@yearly" || d == "@annually")
      fields = {"0", "0", "1", "1", "*"};
    else if (d == "@monthly")
      fields = {"0", "0", "1", "*", "*"};
    else if (d == "@weekly")
      fields = {"0", "0", "*", "*", "0"};
    else if (d == "@daily" || d == "@midnight")
      fields = {"0", "0", "*", "*", "*"};
    else if (d == "@hourly")
      fields = {"0", "*", "*", "*", "*"};
    else
      return Status::InvalidArgument("unknown descriptor " + std::string(words[0]));
  } else {
    for (std::string_view w : words) fields.emplace_back(w);
  }
  if (fields.size() == 5) fields.insert(fields.begin(), "0");
  if (fields.size() != 6)
    return Status::InvalidArgument(
        "a cron expression has 5 fields (minute hour day month weekday), "
        "or 6 with seconds first; this one has " +
        std::to_string(words.size()));
  const FieldSpec sec{"second", 0, 59, nullptr, 0, 0, false};
  const FieldSpec min{"minute", 0, 59, nullptr, 0, 0, false};
  const FieldSpec hour{"hour", 0, 23, nullptr, 0, 0, false};
  const FieldSpec dom{"day of month", 1, 31, nullptr, 0, 0, false, true};
  const FieldSpec mon{"month", 1, 12, kMonthNames.data(), kMonthNames.size(), 1, false};
  const FieldSpec dow{"day of week", 0, 6, kDayNames.data(), kDayNames.size(), 0, true, true};
  bool star = false;
  if (Status st = ParseField(fields[0], sec, &c.seconds_, &star); !st.ok()) return st;
  if (Status st = ParseField(fields[1], min, &c.minutes_, &star); !st.ok()) return st;
  if (Status st = ParseField(fields[2], hour, &c.hours_, &star); !st.ok()) return st;
  if (Status st = ParseField(fields[3], dom, &c.days_, &c.any_day_); !st.ok()) return st;
  if (Status st = ParseField(fields[4], mon, &c.months_, &star); !st.ok()) return st;
  if (Status st = ParseField(fields[5], dow, &c.weekdays_, &c.any_weekday_); !st.ok()) return st;
  return c;
}

bool CronSchedule::DayMatches(int year, unsigned month, unsigned day) const {
  const date::year_month_day ymd{date::year{year}, date::month{month}, date::day{day}};
  const bool dom = days_[day];
  const bool dow = weekdays_[date::weekday{date::sys_days{ymd}}.c_encoding()];
  return any_day_ || any_weekday_ ? dom && dow : dom || dow;
}

std::optional<TimeMs> CronSchedule::Next(TimeMs after, TimeMs anchor) const {
  if (every_ms_ == 0) return NextCron(after);
  if (after < anchor) return anchor;
  const TimeMs k = (after - anchor) / every_ms_ + 1;
  return anchor + k * every_ms_;
}

std::optional<TimeMs> CronSchedule::NextCron(TimeMs after) const {
  using date::days;
  using date::floor;
  // Whole seconds strictly after `after`.
  const date::sys_seconds first{seconds{(after >= 0 ? after / 1000 : (after - 999) / 1000) + 1}};
  date::local_seconds local =
      zone_ != nullptr ? zone_->to_local(first) : date::local_seconds{first.time_since_epoch()};
  const int last_year = int(date::year_month_day{floor<days>(local)}.year()) + 8;
  while (true) {
    const date::local_days day = floor<days>(local);
    const date::year_month_day ymd{day};
    const int year = int(ymd.year());
    if (year > last_year) return std::nullopt;
    const unsigned month = unsigned(ymd.month()), dom = unsigned(ymd.day());
    if (!months_[month]) {  // the first of the next month
      local = date::local_days{(ymd.year() / ymd.month() / 1) + date::months{1}};
      continue;
    }
    if (!DayMatches(year, month, dom)) {
      local = day + days{1};
      continue;
    }
    const date::hh_mm_ss<seconds> tod{local - day};
    const auto h = static_cast<size_t>(tod.hours().count());
    const auto m = static_cast<size_t>(tod.minutes().count());
    const auto s = static_cast<size_t>(tod.seconds().count());
    if (!hours_[h]) {
      local = day + std::chrono::hours{h + 1};
      continue;
    }
    if (!minutes_[m]) {
      local = day + std::chrono::hours{h} + std::chrono::minutes{m + 1};
      continue;
    }
    if (!seconds_[s]) {
      local += seconds{1};
      continue;
    }
    // A local time that matches: the moment it is.
    date::sys_seconds at{local.time_since_epoch()};
    if (zone_ != nullptr) {
      const date::local_info info = zone_->get_info(local);
      if (info.result == date::local_info::nonexistent)
        at = info.first.end;  // skipped: the moment of the change
      else
        at = date::sys_seconds{local.time_since_epoch()} - info.first.offset;  // the first
    }
    const TimeMs ms = at.time_since_epoch().count() * 1000;
    if (ms > after) return ms;
    local += seconds{1};  // a repeated time whose first occurrence is past
  }
}

}  // namespace delayq::delivery

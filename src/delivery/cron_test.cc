// CronSchedule against a table of expected fire times (UTC), computed by
// hand and checked against Python's zoneinfo: daylight-saving changes in
// Europe/Berlin and America/New_York both ways, a leap day, Vixie cron's
// day-of-month OR day-of-week, seconds, descriptors and @every; and the
// expressions it refuses.
#include "delivery/cron.h"

#include <date/date.h>
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "delayq/text.h"

namespace delayq::delivery {
namespace {

// "2026-03-29T01:00:00Z" -> epoch ms, and back.
TimeMs Utc(const std::string& iso) {
  std::optional<TimeMs> ms = ParseRfc3339(iso);
  EXPECT_TRUE(ms.has_value()) << iso;
  return ms.value_or(0);
}

std::string Iso(TimeMs ms) {
  return date::format("%FT%TZ", date::sys_seconds{std::chrono::seconds{ms / 1000}});
}

struct Case {
  const char* expr;
  const char* tz;
  const char* after;
  std::vector<const char*> fires;  // the next ones, in order
};

TEST(Cron, FireTimesAcrossDaylightSavingChangesLeapDaysAndFields) {
  const std::vector<Case> cases = {
      // Europe/Berlin, 2026-03-29: 02:00 CET -> 03:00 CEST (01:00Z). 02:30
      // is skipped: it fires at the change.
      {"30 2 * * *",
       "Europe/Berlin",
       "2026-03-28T12:00:00Z",
       {"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
      // Every skipped time of that night fires as one, at the change.
      {"*/15 2 * * *",
       "Europe/Berlin",
       "2026-03-28T12:00:00Z",
       {"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-30T00:15:00Z"}},
      // A time just after the gap is not moved.
      {"0 3 * * *",
       "Europe/Berlin",
       "2026-03-28T12:00:00Z",
       {"2026-03-29T01:00:00Z", "2026-03-30T01:00:00Z"}},
      // 2026-10-25: 03:00 CEST -> 02:00 CET (01:00Z). 02:30 comes twice:
      // it fires at the first (00:30Z), not the second (01:30Z).
      {"30 2 * * *",
       "Europe/Berlin",
       "2026-10-24T12:00:00Z",
       {"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
      // Every half hour: the repeated 02:00 and 02:30 fire once each.
      {"*/30 * * * *",
       "Europe/Berlin",
       "2026-10-25T00:00:00Z",
       {"2026-10-25T00:30:00Z", "2026-10-25T02:00:00Z", "2026-10-25T02:30:00Z"}},
      // America/New_York, 2026-03-08: 02:00 EST -> 03:00 EDT (07:00Z).
      {"0 2 * * *",
       "America/New_York",
       "2026-03-07T12:00:00Z",
       {"2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z"}},
      // 2026-11-01: 02:00 EDT -> 01:00 EST (06:00Z); 01:30 fires once.
      {"30 1 * * *",
       "America/New_York",
       "2026-10-31T12:00:00Z",
       {"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
      // The zone in the expression, as robfig/cron and QStash take it.
      {"CRON_TZ=America/New_York 30 1 * * *", "", "2026-10-31T12:00:00Z", {"2026-11-01T05:30:00Z"}},
      // A leap day: every four years.
      {"0 12 29 2 *", "", "2026-03-01T00:00:00Z", {"2028-02-29T12:00:00Z", "2032-02-29T12:00:00Z"}},
      {"0 12 29 2 *", "Europe/Berlin", "2028-02-28T00:00:00Z", {"2028-02-29T11:00:00Z"}},
      // Day of month OR day of week, both restricted (Vixie cron).
      {"0 9 13 * FRI",
       "UTC",
       "2026-11-01T00:00:00Z",
       {"2026-11-06T09:00:00Z", "2026-11-13T09:00:00Z", "2026-11-20T09:00:00Z",
        "2026-11-27T09:00:00Z", "2026-12-04T09:00:00Z", "2026-12-11T09:00:00Z",
        "2026-12-13T09:00:00Z"}},
      // One of them *: AND (here every Friday).
      {"0 9 * * fri", "", "2026-11-01T00:00:00Z", {"2026-11-06T09:00:00Z", "2026-11-13T09:00:00Z"}},
      // Names, a range of days, the zone's offset.
      {"0 9 * * MON-FRI",
       "Europe/Berlin",
       "2026-11-27T07:00:00Z",
       {"2026-11-27T08:00:00Z", "2026-11-30T08:00:00Z"}},
      // 7 is Sunday; a range may end at 7.
      {"0 0 * * 7", "", "2026-11-27T00:00:00Z", {"2026-11-29T00:00:00Z"}},
      {"0 0 * * 6-7", "", "2026-11-27T00:00:00Z", {"2026-11-28T00:00:00Z", "2026-11-29T00:00:00Z"}},
      {"0 0 * * SUN-SUN",
       "",
       "2026-11-27T00:00:00Z",
       {"2026-11-29T00:00:00Z", "2026-12-06T00:00:00Z"}},
      {"0 0 * * 7-7", "", "2026-11-27T00:00:00Z", {"2026-11-29T00:00:00Z", "2026-12-06T00:00:00Z"}},
      {"0 0 * * 0-0", "", "2026-11-27T00:00:00Z", {"2026-11-29T00:00:00Z"}},
      // Seconds first, six fields.
      {"*/20 * * * * *",
       "",
       "2026-01-01T00:00:05Z",
       {"2026-01-01T00:00:20Z", "2026-01-01T00:00:40Z", "2026-01-01T00:01:00Z"}},
      // Steps from a value; lists; month names.
      {"10/25 0 1 jan,JUL *",
       "",
       "2026-06-30T00:00:00Z",
       {"2026-07-01T00:10:00Z", "2026-07-01T00:35:00Z", "2027-01-01T00:10:00Z"}},
      {"@hourly", "", "2026-01-01T00:00:00Z", {"2026-01-01T01:00:00Z"}},
      {"@daily", "Europe/Berlin", "2026-01-01T00:00:00Z", {"2026-01-01T23:00:00Z"}},
      {"@weekly", "", "2026-11-27T00:00:00Z", {"2026-11-29T00:00:00Z"}},
      {"@monthly", "", "2026-11-27T00:00:00Z", {"2026-12-01T00:00:00Z"}},
      {"@yearly", "", "2026-11-27T00:00:00Z", {"2027-01-01T00:00:00Z"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.expr) + " in '" + c.tz + "' after " + c.after);
    Result<CronSchedule> s = CronSchedule::Parse(c.expr, c.tz);
    ASSERT_TRUE(s.ok()) << s.status().message();
    TimeMs at = Utc(c.after);
    for (const char* want : c.fires) {
      std::optional<TimeMs> next = s->Next(at);
      ASSERT_TRUE(next.has_value());
      EXPECT_EQ(Iso(*next), want);
      EXPECT_GT(*next, at);
      at = *next;
    }
  }
}

TEST(Cron, NextIsStrictlyAfterToTheMillisecond) {
  Result<CronSchedule> s = CronSchedule::Parse("0 9 * * MON-FRI", "Europe/Berlin");
  ASSERT_TRUE(s.ok());
  const TimeMs nine = Utc("2026-11-27T08:00:00Z");  // 09:00 CET, a Friday
  EXPECT_EQ(s->Next(nine - 1), nine);
  EXPECT_EQ(Iso(*s->Next(nine)), "2026-11-30T08:00:00Z");  // Monday
  EXPECT_EQ(Iso(*s->Next(nine + 1)), "2026-11-30T08:00:00Z");
}

TEST(Cron, AnImpossibleDateNeverFires) {
  Result<CronSchedule> s = CronSchedule::Parse("0 0 30 2 *");
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->Next(Utc("2026-01-01T00:00:00Z")).has_value());
  Result<CronSchedule> april31 = CronSchedule::Parse("0 0 31 4 *");
  ASSERT_TRUE(april31.ok());
  EXPECT_FALSE(april31->Next(Utc("2026-01-01T00:00:00Z")).has_value());
}

TEST(Cron, EveryCountsFromItsAnchor) {
  Result<CronSchedule> s = CronSchedule::Parse("@every 30s");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->every());
  EXPECT_EQ(s->Next(1'000), 30'000);
  EXPECT_EQ(s->Next(30'000), 60'000);
  EXPECT_EQ(s->Next(29'999), 30'000);
  // From an anchor: anchor + k * 30 s; before it, the anchor itself.
  EXPECT_EQ(s->Next(1'000, 5'000), 5'000);
  EXPECT_EQ(s->Next(5'000, 5'000), 35'000);
  EXPECT_EQ(s->Next(100'000, 5'000), 125'000);
  // The zone does not move it.
  Result<CronSchedule> z = CronSchedule::Parse("@every 1h", "Europe/Berlin");
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->Next(Utc("2026-10-25T00:30:00Z")), Utc("2026-10-25T01:00:00Z"));
  EXPECT_EQ(z->Next(Utc("2026-10-25T01:00:00Z")), Utc("2026-10-25T02:00:00Z"));
  Result<CronSchedule> fast = CronSchedule::Parse("@every 250ms");
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(fast->Next(1'000), 1'250);
}

TEST(Cron, RefusesWhatItCannotRead) {
  for (auto [expr, tz] : std::vector<std::pair<const char*, const char*>>{
           {"", ""},
           {"* * * *", ""},
           {"* * * * * * *", ""},
           {"61 * * * *", ""},
           {"* 24 * * *", ""},
           {"* * 0 * *", ""},
           {"* * 32 * *", ""},
           {"* * * 13 *", ""},
           {"* * * * 8", ""},
           {"5-3 * * * *", ""},
           {"*/0 * * * *", ""},
           {"*/x * * * *", ""},
           {"a b c d e", ""},
           {"1,,2 * * * *", ""},
           {"1, * * * *", ""},
           {"? * * * *", ""},
           {"* * * ? *", ""},
           {"* * * * FUNDAY", ""},
           {"@every", ""},
           {"@every 10ms", ""},
           {"@every soon", ""},
           {"@daily 5", ""},
           {"@fortnightly", ""},
           {"0 9 * * *", "Mars/Olympus_Mons"},
           {"CRON_TZ=Europe/Berlin 0 9 * * *", "America/New_York"},
           {"CRON_TZ=", ""},
       }) {
    Result<CronSchedule> s = CronSchedule::Parse(expr, tz);
    EXPECT_FALSE(s.ok()) << "'" << expr << "' in '" << tz << "' was taken";
    if (!s.ok()) {
      EXPECT_EQ(s.code(), Code::kInvalidArgument) << expr;
      EXPECT_FALSE(s.status().message().empty()) << expr;
    }
  }
  // ? stands for * in the day fields.
  EXPECT_TRUE(CronSchedule::Parse("0 9 ? * MON").ok());
  EXPECT_TRUE(CronSchedule::Parse("0 9 1 * ?").ok());
}

}  // namespace
}  // namespace delayq::delivery

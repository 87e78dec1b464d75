// When a recurring schedule fires (docs/schedules.md): a cron expression in
// a time zone, or a fixed interval.
//
//   "0 9 * * MON-FRI"        minute hour day-of-month month day-of-week
//   "*/10 * * * * *"         with a seconds field first (six fields)
//   "@daily", "@hourly", ... @yearly (@annually), @monthly, @weekly,
//                            @daily (@midnight), @hourly
//   "@every 30s"             every 30 s from the schedule's anchor
//
// Fields take `*`, numbers, ranges `a-b`, steps `*/n` and `a-b/n`, lists
// `a,b-c`, month and day names (JAN..DEC, SUN..SAT, any case), 7 for Sunday
// and `?` for `*` in the day fields. When both day-of-month and day-of-week
// are restricted, a day matches either (as in Vixie cron).
//
// Cron times are local times of the zone (an IANA name, from the system's
// tzdb; "" or "UTC": UTC). Daylight-saving changes: a local time the clock
// skips fires once, at the moment of the change (every skipped time of that
// night fires there, as one firing); a local time the clock repeats fires
// once, at its first occurrence. `@every` intervals are absolute time and
// ignore the zone.
//
// Thread: a CronSchedule is immutable; Next may be called from any thread.
#ifndef DELAYQ_DELIVERY_CRON_H_
#define DELAYQ_DELIVERY_CRON_H_

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "delayq/status.h"
#include "delayq/types.h"

namespace date {
class time_zone;
}

namespace delayq::delivery {

class CronSchedule {
 public:
  // Shortest @every interval.
  static constexpr TimeMs kMinEveryMs = 100;

  // kInvalidArgument, naming the field or the zone, for anything else.
  static Result<CronSchedule> Parse(std::string_view expr, std::string_view tz = {});

  // The first fire time strictly after `after` (epoch ms), or nullopt when
  // there is none in the next 8 years (`0 0 30 2 *`). `anchor` (epoch ms)
  // is where @every counts its intervals from: fire times are anchor + k *
  // interval (k >= 0); cron expressions ignore it.
  std::optional<TimeMs> Next(TimeMs after, TimeMs anchor = 0) const;

  const std::string& expression() const { return expr_; }
  // The zone's name as given ("" for UTC).
  const std::string& zone() const { return zone_name_; }
  bool every() const { return every_ms_ > 0; }

 private:
  std::optional<TimeMs> NextCron(TimeMs after) const;
  bool DayMatches(int year, unsigned month, unsigned day) const;

  std::string expr_;
  std::string zone_name_;
  const date::time_zone* zone_ = nullptr;  // null: UTC
  TimeMs every_ms_ = 0;                    // > 0: @every
  std::bitset<60> seconds_, minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_;                      // 1..31
  std::bitset<13> months_;                    // 1..12
  std::bitset<7> weekdays_;                   // 0 = Sunday
  bool any_day_ = true, any_weekday_ = true;  // the field was * or ?
};

}  // namespace delayq::delivery

#endif  // DELAYQ_DELIVERY_CRON_H_

// A recurring schedule (docs/schedules.md): when it fires (a cron
// expression in a time zone, between optional start and end times), the job
// each firing puts into its topic, what becomes of firings missed while no
// instance ran, and whether it is paused. Kept as a named object of kind
// ObjectKind::kSchedule, whose value is ScheduleToJson's text.
//
// Thread: any (values and pure functions).
#ifndef DELAYQ_DELIVERY_SCHEDULE_H_
#define DELAYQ_DELIVERY_SCHEDULE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"
#include "delayq/types.h"
#include "delivery/cron.h"

namespace delayq::delivery {

// The longest schedule name: its firings' keys (FiringKey) must fit in
// kMaxKeyLength with the fire time.
inline constexpr size_t kMaxScheduleNameLength = 150;
// The most schedules a queue holds (docs/limits.md).
inline constexpr size_t kMaxSchedules = 100'000;
// The most fire times GET /schedules/{name} shows.
inline constexpr size_t kShownFireTimes = 5;

// Firings that fell due while no instance ran: none of them is made
// (kSkip), or the last of them is made once, late (kOne).
enum class MissedPolicy : uint8_t { kSkip, kOne };
std::string_view MissedPolicyName(MissedPolicy p);  // "skip", "one"

// The job each firing puts: a put's fields.
struct ScheduleJob {
  std::string body;
  uint32_t priority = kDefaultPriority;
  TimeMs ttr_ms = 60'000;
  TimeMs delay_ms = 0;  // after the fire time
  uint32_t max_tries = 0;
  Backoff backoff;
  bool operator==(const ScheduleJob&) const = default;
};

struct Schedule {
  std::string name;
  std::string cron;  // CronSchedule's expression
  std::string tz;    // IANA name; "" for UTC
  std::string topic;
  ScheduleJob job;
  std::optional<TimeMs> start_ms;  // no firing before it
  std::optional<TimeMs> end_ms;    // no firing after it
  MissedPolicy missed = MissedPolicy::kSkip;
  bool paused = false;
  // Where `@every` counts its intervals from: start_ms if set, else the
  // time the schedule was first put (kept by later upserts).
  TimeMs anchor_ms = 0;
  bool operator==(const Schedule&) const = default;
};

// 1 to kMaxScheduleNameLength bytes of A-Z a-z 0-9 . _ -; kInvalidArgument
// naming the rule otherwise.
delayq::Status CheckScheduleName(std::string_view name);

// The key of the job the firing of `schedule` at `fire_ms` puts:
// "<schedule>@<fire_ms>" (epoch milliseconds in decimal), so that the job is
// found and cancelled by key, and one firing never puts two jobs.
std::string FiringKey(std::string_view schedule, TimeMs fire_ms);

// A schedule's revision: 16 hex digits of a 64-bit FNV-1a hash of its
// stored value, the same in every instance and version, that names the
// version of a schedule that made a firing (Backend::FireSchedule), so
// that a firing made ahead by a version since changed is taken back.
std::string ScheduleRevision(std::string_view stored);

// The stored value (and the API's view): a JSON object with name, cron, tz,
// topic, job {body | body_base64, priority, ttr_ms, delay_ms, max_tries,
// backoff}, start_ms, end_ms, missed, paused, anchor_ms.
std::string ScheduleToJson(const Schedule& s);
// Reads ScheduleToJson's text back; kCorruption when it is not that.
Result<Schedule> ScheduleFromJson(std::string_view json);

// A schedule's fire times: its cron expression, within its start and end.
class FireTimes {
 public:
  // kInvalidArgument for a bad expression or zone.
  static Result<FireTimes> Of(const Schedule& s);
  // The first fire time strictly after `after`, or nullopt: none (past
  // the end, or the expression never matches).
  std::optional<TimeMs> Next(TimeMs after) const;
  // The last fire time at or before `at`, looking back to `since` at most
  // (exclusive); nullopt when there is none.
  std::optional<TimeMs> LastAtOrBefore(TimeMs at, TimeMs since) const;
  // Up to `n` fire times after `after`.
  std::vector<TimeMs> NextN(TimeMs after, size_t n) const;

 private:
  FireTimes(CronSchedule cron, const Schedule& s);
  CronSchedule cron_;
  std::optional<TimeMs> start_ms_, end_ms_;
  TimeMs anchor_ms_;
};

// A fire time as the schedule's zone reads it, to the second, with its
// offset: "2026-03-29T03:00:00+02:00" ("...Z" in UTC, or for an unknown
// zone).
std::string FormatFireTime(TimeMs fire_ms, std::string_view tz);

// The put a firing at `fire_ms` makes; its views point into `s` and `key`.
PutRequest FiringRequest(const Schedule& s, TimeMs fire_ms, const std::string& key);

}  // namespace delayq::delivery

#endif  // DELAYQ_DELIVERY_SCHEDULE_H_

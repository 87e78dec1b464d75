// PUT /schedules/{name} apart from HTTP (docs/schedules.md): reading a
// schedule from the route's JSON body, and storing it as the route does
// (the @every anchor kept by a replacement, the limit on how many there
// are, nothing written when nothing changed). The route
// (http_schedules.cc) and delayqd's [schedule."name"] tables of the config
// file (docs/configuration.md) both go through these functions, so
// that a schedule given in the file is stored exactly as a PUT of it
// would be.
//
// Thread: UpsertSchedule on the backend's loop thread; ParseSchedule any.
#ifndef DELAYQ_SERVER_SCHEDULE_PUT_H_
#define DELAYQ_SERVER_SCHEDULE_PUT_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "delayq/status.h"
#include "delayq/types.h"
#include "delivery/schedule.h"

namespace delayq::server {

// The schedule `json` (the body of PUT /schedules/{name}) describes, named
// `name`: all of it but its anchor, which UpsertSchedule sets. Its name,
// expression and zone are checked here, never at its first firing.
// kInvalidArgument naming what is wrong (a message that starts
// "bad_json:" when `json` is not JSON), kJobTooBig for a body over
// `max_job_size`.
Result<delivery::Schedule> ParseSchedule(std::string_view name, std::string_view json,
                                         size_t max_job_size, TimeMs now);

// What UpsertSchedule did.
struct UpsertedSchedule {
  delivery::Schedule schedule;  // as stored, anchor included
  bool created = false;         // there was none of its name (201)
  bool written = false;         // false: stored already, exactly so
};

// Stores `s` (from ParseSchedule) in `backend`'s schedules: its anchor is
// its start, else the anchor of the schedule of its name it replaces, else
// `now` (so that a replacement does not move its @every firings); a
// schedule stored already with every field the same is not written again.
// `may_replace` is asked about the schedule it replaces (the route checks
// the caller's right on that one's topic); its refusal is the answer. A
// new schedule past delivery::kMaxSchedules is refused
// (kResourceExhausted). `done` gets the outcome once the write is as
// durable as the backend's jobs; the caller tells the scheduler.
// REQUIRES: `backend` outlives the call.
void UpsertSchedule(backend::Backend& backend, delivery::Schedule s, TimeMs now,
                    std::function<Status(const delivery::Schedule& old)> may_replace,
                    std::function<void(Result<UpsertedSchedule>)> done);

// Stores each of `schedules` (from ParseSchedule; distinct names) as
// UpsertSchedule would with nothing refused by `may_replace`, listing the
// stored schedules once for them all (delayqd's config file at start: a
// list each would make a file of thousands of schedules quadratic).
// `each` gets each one's outcome (every one gets the list's failure when it
// fails), then `done` is called once.
void UpsertSchedules(backend::Backend& backend, std::vector<delivery::Schedule> schedules,
                     TimeMs now,
                     std::function<void(const std::string& name, Result<UpsertedSchedule>)> each,
                     std::function<void()> done);

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_SCHEDULE_PUT_H_

// The schedules' routes (docs/schedules.md; docs/http-api.md, "Schedules"):
// a schedule is a named object of kind kSchedule whose value is
// delivery::ScheduleToJson's text. A change needs the admin right on the
// schedule's topic, a read the read right (checked on a copy of the
// caller: on Redis the list comes after the connection may be gone); each route makes its backend
// calls, then tells this instance's scheduler (ServerContext::
// schedules_changed), which the other instances learn of by polling.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "delayq/text.h"
#include "delivery/schedule.h"
#include "server/http_api_internal.h"
#include "server/json_input.h"
#include "server/schedule_put.h"

namespace delayq::server {

namespace {

using delivery::Schedule;

// The schedule named `name` among `all`, parsed; nullopt when there is none.
Result<std::optional<Schedule>> FindSchedule(const std::vector<StoredObject>& all,
                                             std::string_view name) {
  for (const StoredObject& o : all) {
    if (o.name != name) continue;
    auto s = delivery::ScheduleFromJson(o.value);
    if (!s.ok()) return s.status();
    s->name = o.name;
    return std::optional<Schedule>(std::move(s).value());
  }
  return std::optional<Schedule>();
}

HttpReply NoSchedule(std::string_view name) {
  return ErrorReply(404, "not_found", "no schedule '" + std::string(name) + "'");
}

// A schedule as the API shows it: its stored form and its next fire times
// (epoch ms, and as its zone reads them).
std::string ScheduleView(const Schedule& s, TimeMs now) {
  std::string out = delivery::ScheduleToJson(s);
  out.pop_back();  // '}'
  out += R"(,"next":[)";
  if (auto times = delivery::FireTimes::Of(s); times.ok()) {
    bool first = true;
    for (TimeMs t : times->NextN(now, delivery::kShownFireTimes)) {
      if (!first) out += ',';
      first = false;
      out += R"({"at_ms":)" + std::to_string(t) + R"(,"at":")" + delivery::FormatFireTime(t, s.tz) +
             "\"}";
    }
  }
  out += "]}";
  return out;
}

// A time of the body: epoch milliseconds or an RFC 3339 string, at most
// kMaxDelayMs (2^47 ms, in the year 6429: as far as a job's due time may
// lie). A start near the end of int64 sent the fire times' search past
// what the calendar can hold: the PUT's reply never came, and the loop
// thread spun.
Status TimeField(Fields& f, const char* name, std::optional<TimeMs>* out) {
  const rapidjson::Value* v = f.Get(name);
  if (v == nullptr) return Status::Ok();
  std::optional<TimeMs> t;
  if (v->IsInt64()) t = v->GetInt64();
  if (v->IsString()) t = ParseRfc3339(std::string_view(v->GetString(), v->GetStringLength()));
  if (t && *t >= 0 && *t <= kMaxDelayMs) {
    *out = *t;
    return Status::Ok();
  }
  return f.Bad(name, "epoch milliseconds or an RFC 3339 time, from 1970 to the year 6429");
}

// Reads the body of PUT /schedules/{name} into `s` (all but its name and
// its anchor).
Status ParseScheduleBody(std::string_view body, TimeMs now, size_t max_job_size, Schedule* s) {
  rapidjson::Document doc;
  if (Status st = ParseJsonObject(body, &doc, false); !st.ok()) return st;
  Fields f(doc, "");
  std::string_view cron, tz, topic, missed = "skip";
  if (Status st = f.String("cron", &cron); !st.ok()) return st;
  if (Status st = f.String("tz", &tz); !st.ok()) return st;
  if (Status st = f.String("topic", &topic); !st.ok()) return st;
  if (Status st = f.String("missed", &missed); !st.ok()) return st;
  if (cron.empty()) return Status::InvalidArgument("'cron' is required");
  if (topic.empty()) return Status::InvalidArgument("'topic' is required");
  if (Status st = CheckTopic(topic); !st.ok()) return st;
  if (missed != "skip" && missed != "one") return f.Bad("missed", "\"skip\" or \"one\"");
  if (Status st = TimeField(f, "start", &s->start_ms); !st.ok()) return st;
  if (Status st = TimeField(f, "end", &s->end_ms); !st.ok()) return st;
  if (const rapidjson::Value* p = f.Get("paused"); p != nullptr) {
    if (!p->IsBool()) return f.Bad("paused", "true or false");
    s->paused = p->GetBool();
  }
  const rapidjson::Value* job = f.Get("job");
  if (job == nullptr || !job->IsObject())
    return f.Bad("job", "an object: the job each firing puts");
  if (Status st = f.Unknown(); !st.ok()) return st;
  PutSpec spec;
  if (Status st = ParsePut(*job, "job: ", now, &spec); !st.ok()) return st;
  if (!spec.req.key.empty() || spec.has_run_at)
    return Status::InvalidArgument(
        "job: a schedule's job takes no key and no run_at (each firing's key is "
        "<schedule>@<fire time in ms>, and its time the fire time)");
  if (spec.req.body.size() > max_job_size)
    return Status::JobTooBig("job: the body exceeds the maximum job size");
  if (s->start_ms && s->end_ms && *s->end_ms < *s->start_ms)
    return Status::InvalidArgument("'end' is before 'start'");
  s->cron = cron;
  s->tz = tz;
  s->topic = topic;
  s->missed = missed == "one" ? delivery::MissedPolicy::kOne : delivery::MissedPolicy::kSkip;
  s->job.body = spec.req.body;
  s->job.priority = spec.req.priority;
  s->job.ttr_ms = spec.req.ttr_ms;
  s->job.delay_ms = spec.req.delay_ms;
  s->job.max_tries = spec.req.max_tries;
  s->job.backoff = spec.req.backoff;
  // The expression and the zone are checked here, not at the first firing.
  if (auto times = delivery::FireTimes::Of(*s); !times.ok()) return times.status();
  return Status::Ok();
}

// Stores `s` and answers its view with `status`; tells the scheduler.
void StoreSchedule(backend::Backend& backend, ServerContext& ctx, Schedule s, int status,
                   HttpApi::Reply done) {
  std::string value = delivery::ScheduleToJson(s);
  const std::string name = s.name;  // `s` moves into the completion
  backend.PutObject(ObjectKind::kSchedule, name, value,
                    [&backend, &ctx, s = std::move(s), status, done = std::move(done)](Status st) {
                      if (!st.ok()) return done(StatusReply(st));
                      if (ctx.schedules_changed) ctx.schedules_changed();
                      done(HttpReply{status, ScheduleView(s, backend.Now()), {}});
                    });
}

}  // namespace

Result<Schedule> ParseSchedule(std::string_view name, std::string_view json, size_t max_job_size,
                               TimeMs now) {
  if (Status st = delivery::CheckScheduleName(name); !st.ok()) return st;
  Schedule s;
  s.name = name;
  if (Status st = ParseScheduleBody(json, now, max_job_size, &s); !st.ok()) return st;
  return s;
}

namespace {

// What a PUT of `s` stores, given `old`, the schedule of its name stored now
// (nullptr: none, or one too damaged to read), and how many schedules are
// stored: `s` with its anchor, whether it is new, and whether it must be
// written (written false: stored already, exactly so). kResourceExhausted
// for a new one past kMaxSchedules.
Result<UpsertedSchedule> PlanUpsert(Schedule s, const Schedule* old, size_t stored, TimeMs now) {
  if (old == nullptr && stored >= delivery::kMaxSchedules)
    return Status::ResourceExhausted("there are " + std::to_string(delivery::kMaxSchedules) +
                                     " schedules already");
  // @every counts from the start, else from when the schedule was first
  // put: an upsert keeps the fire times it had.
  s.anchor_ms = s.start_ms ? *s.start_ms : old != nullptr ? old->anchor_ms : now;
  // The same schedule again (delayqd restarted with the same config file,
  // a PUT retried) writes nothing: no store write, and on Redis no version
  // moved for every instance to list the schedules again.
  const bool same = old != nullptr && *old == s;
  return UpsertedSchedule{std::move(s), /*created=*/old == nullptr, /*written=*/!same};
}

// Writes the plan's schedule if it must be, then tells `done`.
void StorePlanned(backend::Backend& backend, UpsertedSchedule plan,
                  std::function<void(Result<UpsertedSchedule>)> done) {
  if (!plan.written) return done(std::move(plan));
  std::string value = delivery::ScheduleToJson(plan.schedule);
  const std::string name = plan.schedule.name;  // `plan` moves into the completion
  backend.PutObject(ObjectKind::kSchedule, name, value,
                    [plan = std::move(plan), done = std::move(done)](Status st) mutable {
                      if (!st.ok()) return done(st);
                      done(std::move(plan));
                    });
}

}  // namespace

void UpsertSchedule(backend::Backend& backend, Schedule s, TimeMs now,
                    std::function<Status(const Schedule& old)> may_replace,
                    std::function<void(Result<UpsertedSchedule>)> done) {
  backend.ListObjects(ObjectKind::kSchedule,
                      [&backend, s = std::move(s), now, may_replace = std::move(may_replace),
                       done = std::move(done)](Result<std::vector<StoredObject>> all) mutable {
                        if (!all.ok()) return done(all.status());
                        // A damaged one of the same name is replaced as if there were none.
                        auto old = FindSchedule(*all, s.name);
                        const Schedule* was = old.ok() && old->has_value() ? &**old : nullptr;
                        if (was != nullptr) {
                          if (Status st = may_replace(*was); !st.ok()) return done(st);
                        }
                        auto plan = PlanUpsert(std::move(s), was, all->size(), now);
                        if (!plan.ok()) return done(plan.status());
                        StorePlanned(backend, *std::move(plan), std::move(done));
                      });
}

void UpsertSchedules(backend::Backend& backend, std::vector<Schedule> schedules, TimeMs now,
                     std::function<void(const std::string& name, Result<UpsertedSchedule>)> each,
                     std::function<void()> done) {
  backend.ListObjects(ObjectKind::kSchedule, [&backend, schedules = std::move(schedules), now,
                                              each = std::move(each), done = std::move(done)](
                                                 Result<std::vector<StoredObject>> all) mutable {
    if (!all.ok()) {
      for (const Schedule& s : schedules) each(s.name, all.status());
      return done();
    }
    // By name, read once: a file of many schedules costs one list, not one
    // a schedule.
    std::map<std::string, Schedule, std::less<>> stored;
    for (const StoredObject& o : *all) {
      auto s = delivery::ScheduleFromJson(o.value);
      if (!s.ok()) continue;  // damaged: replaced as if there were none
      s->name = o.name;
      stored.emplace(o.name, *std::move(s));
    }
    size_t count = all->size();
    auto left = std::make_shared<size_t>(schedules.size() + 1);
    auto one_done = [left, done] {
      if (--*left == 0) done();
    };
    for (Schedule& s : schedules) {
      const std::string name = s.name;
      auto it = stored.find(name);
      auto plan = PlanUpsert(std::move(s), it == stored.end() ? nullptr : &it->second, count, now);
      if (!plan.ok()) {
        each(name, plan.status());
        one_done();
        continue;
      }
      count += plan->created ? 1 : 0;
      StorePlanned(backend, *std::move(plan),
                   [name, each, one_done](Result<UpsertedSchedule> r) mutable {
                     each(name, std::move(r));
                     one_done();
                   });
    }
    one_done();
  });
}

void HttpApiRoutes::PutSchedule(HttpApi& api, const HttpRequest& req, const Params& p,
                                HttpApi::Reply&& done, HttpApi::CallId*) {
  const TimeMs now = api.backend_.Now();
  auto s = ParseSchedule(p[0], req.body, api.ctx_.max_job_size, now);
  if (!s.ok()) return done(BadInput(s.status()));
  if (Status st = req.caller->Check(Scope::kAdmin, s->topic); !st.ok())
    return done(StatusReply(st));
  UpsertSchedule(
      api.backend_, *std::move(s), now,
      // Replacing it needs the right on the topic it had too.
      [caller = *req.caller](const Schedule& old) {
        return caller.CheckFound(Scope::kAdmin, old.topic, kSchedulesTopic);
      },
      [&api, done = std::move(done)](Result<UpsertedSchedule> r) {
        if (!r.ok()) return done(StatusReply(r.status()));
        if (r->written && api.ctx_.schedules_changed) api.ctx_.schedules_changed();
        done(HttpReply{r->created ? 201 : 200, ScheduleView(r->schedule, api.backend_.Now()), {}});
      });
}

void HttpApiRoutes::PauseSchedule(HttpApi& api, const HttpRequest& req, const Params& p,
                                  HttpApi::Reply&& done, HttpApi::CallId*) {
  if (Status st = delivery::CheckScheduleName(p[0]); !st.ok()) return done(StatusReply(st));
  rapidjson::Document doc;
  if (Status st = ParseJsonObject(req.body, &doc, true); !st.ok()) return done(BadInput(st));
  if (Status st = Fields(doc, "").Unknown(); !st.ok()) return done(StatusReply(st));
  const bool pause = req.target.find("/resume") == std::string_view::npos;
  api.backend_.ListObjects(
      ObjectKind::kSchedule,
      [&api, name = p[0], pause, caller = *req.caller,
       done = std::move(done)](Result<std::vector<StoredObject>> all) mutable {
        if (!all.ok()) return done(StatusReply(all.status()));
        auto s = FindSchedule(*all, name);
        if (!s.ok()) return done(StatusReply(s.status()));
        if (!*s) return done(NoSchedule(name));
        if (Status st = caller.CheckFound(Scope::kAdmin, (*s)->topic, kSchedulesTopic); !st.ok())
          return done(StatusReply(st));
        Schedule changed = **s;
        changed.paused = pause;
        StoreSchedule(api.backend_, api.ctx_, std::move(changed), 200, std::move(done));
      });
}

void HttpApiRoutes::ListSchedules(HttpApi& api, const HttpRequest& req, const Params&,
                                  HttpApi::Reply&& done, HttpApi::CallId*) {
  api.backend_.ListObjects(ObjectKind::kSchedule,
                           [&api, caller = *req.caller,
                            done = std::move(done)](Result<std::vector<StoredObject>> all) mutable {
                             if (!all.ok()) return done(StatusReply(all.status()));
                             // Those of topics the caller may read, by name.
                             std::string out = R"({"schedules":[)";
                             bool first = true;
                             for (const StoredObject& o : *all) {
                               auto s = delivery::ScheduleFromJson(o.value);
                               if (!s.ok() || !caller.May(Scope::kRead, s->topic)) continue;
                               s->name = o.name;
                               if (!first) out += ',';
                               first = false;
                               out += ScheduleView(*s, api.backend_.Now());
                             }
                             out += "]}";
                             done(HttpReply{200, std::move(out), {}});
                           });
}

void HttpApiRoutes::GetSchedule(HttpApi& api, const HttpRequest& req, const Params& p,
                                HttpApi::Reply&& done, HttpApi::CallId*) {
  if (Status st = delivery::CheckScheduleName(p[0]); !st.ok()) return done(StatusReply(st));
  api.backend_.ListObjects(
      ObjectKind::kSchedule, [&api, name = p[0], caller = *req.caller, done = std::move(done)](
                                 Result<std::vector<StoredObject>> all) mutable {
        if (!all.ok()) return done(StatusReply(all.status()));
        auto s = FindSchedule(*all, name);
        if (!s.ok()) return done(StatusReply(s.status()));
        if (!*s) return done(NoSchedule(name));
        if (Status st = caller.CheckFound(Scope::kRead, (*s)->topic, kSchedulesTopic); !st.ok())
          return done(StatusReply(st));
        done(HttpReply{200, ScheduleView(**s, api.backend_.Now()), {}});
      });
}

void HttpApiRoutes::DeleteSchedule(HttpApi& api, const HttpRequest& req, const Params& p,
                                   HttpApi::Reply&& done, HttpApi::CallId*) {
  if (Status st = delivery::CheckScheduleName(p[0]); !st.ok()) return done(StatusReply(st));
  api.backend_.ListObjects(
      ObjectKind::kSchedule, [&api, name = p[0], caller = *req.caller, done = std::move(done)](
                                 Result<std::vector<StoredObject>> all) mutable {
        if (!all.ok()) return done(StatusReply(all.status()));
        auto s = FindSchedule(*all, name);
        if (s.ok() && !*s) return done(NoSchedule(name));
        // A damaged one may still be deleted, by an admin of every topic.
        Status allowed = s.ok() ? caller.CheckFound(Scope::kAdmin, (*s)->topic, kSchedulesTopic)
                         : caller.Everywhere(Scope::kAdmin)
                             ? Status::Ok()
                             : Status::PermissionDenied("the schedule's topic is unknown");
        if (!allowed.ok()) return done(StatusReply(allowed));
        api.backend_.DeleteObject(ObjectKind::kSchedule, name,
                                  [&api, name, done = std::move(done)](Status st) {
                                    if (st.code() == Code::kNotFound) return done(NoSchedule(name));
                                    if (!st.ok()) return done(StatusReply(st));
                                    if (api.ctx_.schedules_changed) api.ctx_.schedules_changed();
                                    done(HttpReply{200, R"({"deleted":")" + name + "\"}", {}});
                                  });
      });
}

}  // namespace delayq::server

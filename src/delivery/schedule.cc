#include "delivery/schedule.h"

#include <date/date.h>
#include <date/tz.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <exception>

#include "delayq/duration.h"
#include "delayq/text.h"

namespace delayq::delivery {

namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void Text(Writer& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// The members of a stored schedule, read with their types checked: any
// mismatch marks the whole value bad.
class StoredReader {
 public:
  explicit StoredReader(const rapidjson::Value& o) : o_(o) {}
  bool ok() const { return ok_; }
  const rapidjson::Value* Get(const char* name) {
    auto it = o_.FindMember(name);
    return it == o_.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
  }
  std::string Str(const char* name) {
    const rapidjson::Value* v = Get(name);
    if (v == nullptr) return {};
    if (!v->IsString()) return ok_ = false, std::string();
    return std::string(v->GetString(), v->GetStringLength());
  }
  int64_t Int(const char* name, int64_t absent) {
    const rapidjson::Value* v = Get(name);
    if (v == nullptr) return absent;
    if (!v->IsInt64()) return ok_ = false, absent;
    return v->GetInt64();
  }
  std::optional<TimeMs> Opt(const char* name) {
    if (Get(name) == nullptr) return std::nullopt;
    return Int(name, 0);
  }

 private:
  const rapidjson::Value& o_;
  bool ok_ = true;
};

}  // namespace

std::string_view MissedPolicyName(MissedPolicy p) {
  return p == MissedPolicy::kOne ? "one" : "skip";
}

Status CheckScheduleName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= kMaxScheduleNameLength;
  for (char c : name)
    ok &= (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-';
  if (ok) return Status::Ok();
  return Status::InvalidArgument("a schedule name is 1 to " +
                                 std::to_string(kMaxScheduleNameLength) +
                                 " bytes of A-Z a-z 0-9 . _ -");
}

std::string FiringKey(std::string_view schedule, TimeMs fire_ms) {
  std::string key(schedule);
  key += '@';
  key += std::to_string(fire_ms);
  return key;
}

std::string ScheduleRevision(std::string_view stored) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : stored) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016" PRIx64, h);
  return std::string(out, 16);
}

std::string ScheduleToJson(const Schedule& s) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("name");
  Text(w, s.name);
  w.Key("cron");
  Text(w, s.cron);
  w.Key("tz");
  Text(w, s.tz);
  w.Key("topic");
  Text(w, s.topic);
  w.Key("job");
  w.StartObject();
  if (IsText(s.job.body)) {
    w.Key("body");
    Text(w, s.job.body);
  } else {
    w.Key("body_base64");
    Text(w, Base64Encode(s.job.body));
  }
  w.Key("priority");
  w.Uint(s.job.priority);
  w.Key("ttr_ms");
  w.Int64(s.job.ttr_ms);
  w.Key("delay_ms");
  w.Int64(s.job.delay_ms);
  w.Key("max_tries");
  w.Uint(s.job.max_tries);
  w.Key("backoff");
  Text(w, FormatBackoff(s.job.backoff));
  w.EndObject();
  w.Key("start_ms");
  s.start_ms ? w.Int64(*s.start_ms) : w.Null();
  w.Key("end_ms");
  s.end_ms ? w.Int64(*s.end_ms) : w.Null();
  w.Key("missed");
  Text(w, MissedPolicyName(s.missed));
  w.Key("paused");
  w.Bool(s.paused);
  w.Key("anchor_ms");
  w.Int64(s.anchor_ms);
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

Result<Schedule> ScheduleFromJson(std::string_view json) {
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  if (d.HasParseError() || !d.IsObject())
    return Status::Corruption("a stored schedule is not JSON");
  StoredReader in(d);
  Schedule s;
  s.name = in.Str("name");
  s.cron = in.Str("cron");
  s.tz = in.Str("tz");
  s.topic = in.Str("topic");
  const rapidjson::Value* job = in.Get("job");
  if (job == nullptr || !job->IsObject())
    return Status::Corruption("stored schedule " + s.name + " has no job");
  StoredReader j(*job);
  s.job.body = j.Str("body");
  if (std::string b64 = j.Str("body_base64"); !b64.empty() && !Base64Decode(b64, &s.job.body))
    return Status::Corruption("stored schedule " + s.name + ": bad body_base64");
  s.job.priority = static_cast<uint32_t>(j.Int("priority", kDefaultPriority));
  s.job.ttr_ms = j.Int("ttr_ms", 60'000);
  s.job.delay_ms = j.Int("delay_ms", 0);
  s.job.max_tries = static_cast<uint32_t>(j.Int("max_tries", 0));
  auto backoff = ParseBackoff(j.Str("backoff").empty() ? "none" : j.Str("backoff"));
  if (!backoff.ok())
    return Status::Corruption("stored schedule " + s.name + ": " + backoff.status().message());
  s.job.backoff = *backoff;
  s.start_ms = in.Opt("start_ms");
  s.end_ms = in.Opt("end_ms");
  s.missed = in.Str("missed") == "one" ? MissedPolicy::kOne : MissedPolicy::kSkip;
  const rapidjson::Value* paused = in.Get("paused");
  s.paused = paused != nullptr && paused->IsBool() && paused->GetBool();
  s.anchor_ms = in.Int("anchor_ms", 0);
  if (!in.ok() || !j.ok()) return Status::Corruption("stored schedule " + s.name + " is damaged");
  return s;
}

Result<FireTimes> FireTimes::Of(const Schedule& s) {
  auto cron = CronSchedule::Parse(s.cron, s.tz);
  if (!cron.ok()) return cron.status();
  return FireTimes(std::move(cron).value(), s);
}

FireTimes::FireTimes(CronSchedule cron, const Schedule& s)
    : cron_(std::move(cron)), start_ms_(s.start_ms), end_ms_(s.end_ms), anchor_ms_(s.anchor_ms) {}

std::optional<TimeMs> FireTimes::Next(TimeMs after) const {
  if (start_ms_ && after < *start_ms_ - 1) after = *start_ms_ - 1;
  std::optional<TimeMs> t = cron_.Next(after, anchor_ms_);
  if (t && end_ms_ && *t > *end_ms_) return std::nullopt;
  return t;
}

std::optional<TimeMs> FireTimes::LastAtOrBefore(TimeMs at, TimeMs since) const {
  // Forward from `since`: cron has no backward step. Bounded, so that a
  // schedule firing every 100 ms and a long outage cost at most ~10^6 steps.
  constexpr int kMaxSteps = 1'000'000;
  std::optional<TimeMs> last;
  TimeMs t = since;
  for (int i = 0; i < kMaxSteps; ++i) {
    std::optional<TimeMs> n = Next(t);
    if (!n || *n > at) return last;
    last = t = *n;
  }
  return last;
}

std::vector<TimeMs> FireTimes::NextN(TimeMs after, size_t n) const {
  std::vector<TimeMs> out;
  for (std::optional<TimeMs> t = Next(after); t && out.size() < n; t = Next(*t)) out.push_back(*t);
  return out;
}

std::string FormatFireTime(TimeMs fire_ms, std::string_view tz) {
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  date::sys_time<seconds> t =
      date::floor<seconds>(date::sys_time<milliseconds>(milliseconds(fire_ms)));
  if (!tz.empty() && tz != "UTC") {
    try {
      return date::format("%FT%T%Ez", date::zoned_time<seconds>(std::string(tz), t));
    } catch (const std::exception&) {
      // an unknown zone (the schedule was checked when put): UTC below
    }
  }
  return date::format("%FT%TZ", t);
}

PutRequest FiringRequest(const Schedule& s, TimeMs fire_ms, const std::string& key) {
  PutRequest r;
  r.topic = s.topic;
  r.body = s.job.body;
  r.priority = s.job.priority;
  // Due at the fire time plus the job's delay however late the put is.
  r.run_at = fire_ms + s.job.delay_ms;
  r.ttr_ms = s.job.ttr_ms;
  r.key = key;
  r.max_tries = s.job.max_tries;
  r.backoff = s.job.backoff;
  return r;
}

}  // namespace delayq::delivery

#include "server/http_api.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <unordered_set>
#include <utility>

#include "delayq/duration.h"
#include "delayq/engine.h"
#include "delayq/text.h"
#include "server/json_input.h"

namespace delayq::server {

namespace {

using backend::Backend;
using backend::Jobs;
using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// ---- errors -------------------------------------------------------------------

// The HTTP status of a backend error (docs/http-api.md, "Errors").
int HttpStatusFor(Code code) {
  switch (code) {
    case Code::kOk:
      return 200;
    case Code::kNotFound:
      return 404;
    case Code::kInvalidArgument:
    case Code::kNotIgnored:
      return 400;
    case Code::kConflict:
    case Code::kDeadlineSoon:
    case Code::kLeaseLost:
      return 409;
    case Code::kJobTooBig:
      return 413;
    case Code::kTimedOut:
      return 408;
    case Code::kDraining:
    case Code::kResourceExhausted:
    case Code::kUnavailable:
      return 503;
    case Code::kInternal:
    case Code::kCorruption:
      break;
  }
  return 500;
}

// Messages may quote what the client sent: keep them printable ASCII.
std::string Printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  return out;
}

HttpReply ErrorReply(int status, std::string_view code, std::string_view message) {
  return HttpReply{status, HttpErrorBody(code, message), {}};
}

HttpReply StatusReply(const Status& st) {
  std::string msg = st.message();
  if (msg.empty()) {
    switch (st.code()) {
      case Code::kNotFound:
        msg = "not found";
        break;
      case Code::kJobTooBig:
        msg = "the job body is larger than the maximum job size";
        break;
      case Code::kDraining:
        msg = "the server is draining: it takes no new jobs";
        break;
      default:
        msg = std::string(CodeName(st.code()));
    }
  }
  return ErrorReply(HttpStatusFor(st.code()), CodeName(st.code()), msg);
}

// ---- text helpers -------------------------------------------------------------

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes one path segment. False on a malformed escape.
bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

}  // namespace

std::string_view HttpReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

std::string HttpErrorBody(std::string_view code, std::string_view message) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  std::string msg = Printable(message);
  w.StartObject();
  w.Key("error");
  w.StartObject();
  w.Key("code");
  w.String(code.data(), static_cast<rapidjson::SizeType>(code.size()));
  w.Key("message");
  w.String(msg.data(), static_cast<rapidjson::SizeType>(msg.size()));
  w.EndObject();
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

namespace {

// ---- JSON output --------------------------------------------------------------

void Str(JsonWriter& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// {"urgent":..,"ready":..,"reserved":..,"delayed":..,"buried":..} of server
// or topic stats.
template <typename Writer, typename Counts>
void JobCounts(Writer& w, const Counts& c) {
  w.StartObject();
  w.Key("urgent");
  w.Uint64(c.urgent);
  w.Key("ready");
  w.Uint64(c.ready);
  w.Key("reserved");
  w.Uint64(c.reserved);
  w.Key("delayed");
  w.Uint64(c.delayed);
  w.Key("buried");
  w.Uint64(c.buried);
  w.EndObject();
}

void Body(JsonWriter& w, std::string_view body) {
  if (IsText(body)) {
    w.Key("body");
    Str(w, body);
  } else {
    w.Key("body_base64");
    Str(w, Base64Encode(body));
  }
}

// A job that was handed out (reserve, peek): owned copies of its view.
// A job's view with its strings owned: `fig` holds the state and figures
// (its own string views are left empty).
struct OwnedJob {
  JobId id = 0;
  std::string topic, key, body, lease;
  JobView fig;
};

OwnedJob Own(const JobView& v) {
  OwnedJob o{
      v.id, std::string(v.topic), std::string(v.key), std::string(v.body), std::string(v.lease), v};
  o.fig.topic = o.fig.key = o.fig.body = o.fig.lease = {};
  return o;
}

// A job as the API shows it (docs/http-api.md, "Jobs"): the lease only in
// the answer to the reserve that took it.
void JobObject(JsonWriter& w, const OwnedJob& j, bool with_body) {
  const JobView& f = j.fig;
  w.StartObject();
  w.Key("id");
  w.Uint64(j.id);
  w.Key("topic");
  Str(w, j.topic);
  if (!j.key.empty()) {
    w.Key("key");
    Str(w, j.key);
  }
  w.Key("state");
  Str(w, JobStateName(f.state));
  if (!j.lease.empty()) {
    w.Key("lease");
    Str(w, j.lease);
  }
  w.Key("priority");
  w.Uint(f.priority);
  if (f.state == JobState::kDelayed) {
    w.Key("due_ms");
    w.Int64(f.due_ms);
  } else if (f.state == JobState::kReserved) {
    w.Key("deadline_ms");
    w.Int64(f.due_ms);
  }
  w.Key("created_ms");
  w.Int64(f.created_ms);
  w.Key("ttr_ms");
  w.Int64(f.ttr_ms);
  w.Key("delay_ms");
  w.Int64(f.delay_ms);
  w.Key("max_tries");
  w.Uint(f.max_tries);
  w.Key("reserves");
  w.Uint(f.reserves);
  w.Key("timeouts");
  w.Uint(f.timeouts);
  w.Key("releases");
  w.Uint(f.releases);
  w.Key("buries");
  w.Uint(f.buries);
  w.Key("kicks");
  w.Uint(f.kicks);
  if (with_body) Body(w, j.body);
  w.EndObject();
}

std::string Done(rapidjson::StringBuffer& sb) { return std::string(sb.GetString(), sb.GetSize()); }

// What an operation on one job left it as: {"id":N,"state":"...",
// "priority":P} and the due time (delayed) or TTR deadline (reserved).
std::string ChangeBody(const JobChange& c) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("id");
  w.Uint64(c.id);
  w.Key("state");
  Str(w, JobStateName(c.state));
  w.Key("priority");
  w.Uint(c.priority);
  if (c.state == JobState::kDelayed) {
    w.Key("due_ms");
    w.Int64(c.due_ms);
  } else if (c.state == JobState::kReserved) {
    w.Key("deadline_ms");
    w.Int64(c.due_ms);
  }
  w.EndObject();
  return Done(sb);
}

HttpReply DeletedReply(const Result<JobChange>& r) {
  if (!r.ok()) return StatusReply(r.status());
  return HttpReply{200, R"({"id":)" + std::to_string(r->id) + R"(,"deleted":true})", {}};
}

HttpReply ChangeReply(const Result<JobChange>& r) {
  if (!r.ok()) return StatusReply(r.status());
  return HttpReply{200, ChangeBody(*r), {}};
}

// ---- JSON input ---------------------------------------------------------------

// Reads the members of one JSON object by name, remembering which were
// asked for, so that Unknown() can name a member nobody reads (a typo).
class Fields {
 public:
  Fields(const rapidjson::Value& obj, std::string prefix) : obj_(obj), prefix_(std::move(prefix)) {}

  const rapidjson::Value* Get(const char* name) {
    known_.push_back(name);
    auto it = obj_.FindMember(name);
    return it == obj_.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
  }
  bool Has(const char* name) const {
    auto it = obj_.FindMember(name);
    return it != obj_.MemberEnd() && !it->value.IsNull();
  }

  Status Int(const char* name, int64_t lo, int64_t hi, int64_t* out) {
    const rapidjson::Value* v = Get(name);
    if (v == nullptr) return Status::Ok();
    if (!v->IsInt64() || v->GetInt64() < lo || v->GetInt64() > hi)
      return Bad(name, "an integer " + std::to_string(lo) + ".." + std::to_string(hi));
    *out = v->GetInt64();
    return Status::Ok();
  }
  template <typename T>
  Status Num(const char* name, int64_t lo, int64_t hi, T* out) {
    int64_t v = static_cast<int64_t>(*out);
    if (Status st = Int(name, lo, hi, &v); !st.ok()) return st;
    *out = static_cast<T>(v);
    return Status::Ok();
  }
  Status String(const char* name, std::string_view* out) {
    const rapidjson::Value* v = Get(name);
    if (v == nullptr) return Status::Ok();
    if (!v->IsString()) return Bad(name, "a string");
    *out = std::string_view(v->GetString(), v->GetStringLength());
    return Status::Ok();
  }
  Status Unknown() const {
    for (auto it = obj_.MemberBegin(); it != obj_.MemberEnd(); ++it) {
      std::string_view n(it->name.GetString(), it->name.GetStringLength());
      if (std::find(known_.begin(), known_.end(), n) == known_.end())
        return Status::InvalidArgument(prefix_ + "unknown field '" + std::string(n) + "'");
    }
    return Status::Ok();
  }
  Status Bad(std::string_view name, std::string_view want) const {
    return Status::InvalidArgument(prefix_ + "'" + std::string(name) + "' must be " +
                                   std::string(want));
  }

 private:
  const rapidjson::Value& obj_;
  std::string prefix_;
  std::vector<std::string_view> known_;
};

bool IsValidKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxKeyLength) return false;
  for (char c : key)
    if (c <= 0x20 || c >= 0x7f) return false;
  return true;
}

Status CheckTopic(std::string_view topic) {
  if (IsValidTopicName(topic)) return Status::Ok();
  return Status::InvalidArgument("bad topic name '" + std::string(topic) +
                                 "': 1-200 bytes of A-Za-z0-9-+/;.$_() not starting with '-'");
}

Status CheckKey(std::string_view key) {
  if (IsValidKey(key)) return Status::Ok();
  return Status::InvalidArgument("bad key '" + std::string(key) +
                                 "': 1-200 bytes of printable ASCII without spaces");
}

// A duration in a back-off list: a number of ms or a string like "4m".
Result<TimeMs> DurationValue(const rapidjson::Value& v) {
  if (v.IsInt64() && v.GetInt64() >= 0 && v.GetInt64() <= kMaxDelayMs) return v.GetInt64();
  if (v.IsString()) return ParseDuration(std::string_view(v.GetString(), v.GetStringLength()));
  return Status::InvalidArgument("a back-off delay must be ms or a duration like \"4m\"");
}

Result<Backoff> ParseBackoffValue(const rapidjson::Value& v) {
  if (v.IsString()) return ParseBackoff(std::string_view(v.GetString(), v.GetStringLength()));
  if (v.IsArray()) {
    if (v.Empty() || v.Size() > 64)
      return Status::InvalidArgument("'backoff' as a list takes 1 to 64 delays");
    std::vector<TimeMs> delays;
    for (const auto& e : v.GetArray()) {
      auto d = DurationValue(e);
      if (!d.ok()) return d.status();
      delays.push_back(*d);
    }
    return Backoff::List(std::move(delays));
  }
  if (v.IsObject()) {
    Fields f(v, "backoff: ");
    int64_t base = -1, cap = -1;
    if (Status st = f.Int("base_ms", 1, kMaxDelayMs, &base); !st.ok()) return st;
    if (Status st = f.Int("cap_ms", 1, kMaxDelayMs, &cap); !st.ok()) return st;
    if (Status st = f.Unknown(); !st.ok()) return st;
    if (base < 0 || cap < 0 || cap < base)
      return Status::InvalidArgument("'backoff' as an object needs base_ms <= cap_ms");
    return Backoff::Exponential(base, cap);
  }
  return Status::InvalidArgument(
      "'backoff' must be a list of delays, {\"base_ms\":..,\"cap_ms\":..}, or a spec string");
}

// One job of a put: the request points into the JSON document and `body`.
struct PutSpec {
  PutRequest req;
  std::string decoded;  // body_base64, decoded
  bool has_run_at = false;
};

Status ParsePut(const rapidjson::Value& v, std::string_view prefix, TimeMs now, PutSpec* p) {
  if (!v.IsObject())
    return Status::InvalidArgument(std::string(prefix) + "a job must be an object");
  Fields f(v, std::string(prefix));
  PutRequest& r = p->req;
  if (Status st = f.String("body", &r.body); !st.ok()) return st;
  std::string_view b64;
  if (Status st = f.String("body_base64", &b64); !st.ok()) return st;
  if (f.Has("body") && f.Has("body_base64"))
    return Status::InvalidArgument(std::string(prefix) + "give 'body' or 'body_base64', not both");
  if (f.Has("body_base64")) {
    if (!Base64Decode(b64, &p->decoded)) return f.Bad("body_base64", "base64");
    r.body = p->decoded;
  }
  if (Status st = f.Num("priority", 0, UINT32_MAX, &r.priority); !st.ok()) return st;
  if (Status st = f.Num("delay_ms", 0, kMaxDelayMs, &r.delay_ms); !st.ok()) return st;
  if (Status st = f.Num("ttr_ms", 1, kMaxDelayMs, &r.ttr_ms); !st.ok()) return st;
  if (Status st = f.Num("max_tries", 0, UINT32_MAX, &r.max_tries); !st.ok()) return st;
  if (Status st = f.String("key", &r.key); !st.ok()) return st;
  if (f.Has("key")) {
    if (Status st = CheckKey(r.key); !st.ok())
      return Status::InvalidArgument(std::string(prefix) + st.message());
  }
  if (const rapidjson::Value* at = f.Get("run_at"); at != nullptr) {
    if (f.Has("delay_ms"))
      return Status::InvalidArgument(std::string(prefix) + "give 'delay_ms' or 'run_at', not both");
    if (at->IsInt64() && at->GetInt64() >= 0 && at->GetInt64() <= now + kMaxDelayMs) {
      r.run_at = at->GetInt64();
    } else if (at->IsString()) {
      auto t = ParseRfc3339(std::string_view(at->GetString(), at->GetStringLength()));
      if (!t || *t > now + kMaxDelayMs)
        return f.Bad("run_at", "epoch milliseconds or an RFC 3339 time");
      r.run_at = std::max<TimeMs>(*t, 0);
    } else {
      return f.Bad("run_at", "epoch milliseconds or an RFC 3339 time");
    }
    p->has_run_at = true;
  }
  if (const rapidjson::Value* b = f.Get("backoff"); b != nullptr) {
    auto bo = ParseBackoffValue(*b);
    if (!bo.ok()) return Status::InvalidArgument(std::string(prefix) + bo.status().message());
    r.backoff = std::move(bo).value();
  }
  return f.Unknown();
}

// "ready", "delayed", "buried" names to a ClearMask.
Result<uint8_t> ParseStates(const rapidjson::Value* v) {
  if (v == nullptr) return static_cast<uint8_t>(kClearAll);
  if (!v->IsArray() || v->Empty())
    return Status::InvalidArgument("'states' must be a list of ready, delayed, buried");
  uint8_t mask = 0;
  for (const auto& e : v->GetArray()) {
    std::string_view s = e.IsString() ? std::string_view(e.GetString(), e.GetStringLength()) : "";
    if (s == "ready") {
      mask |= kClearReady;
    } else if (s == "delayed") {
      mask |= kClearDelayed;
    } else if (s == "buried") {
      mask |= kClearBuried;
    } else {
      return Status::InvalidArgument("'states' must be a list of ready, delayed, buried");
    }
  }
  return mask;
}

Result<JobId> ParseId(std::string_view s) {
  JobId id = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
  if (ec != std::errc() || p != s.data() + s.size() || id == 0)
    return Status::InvalidArgument("bad job id '" + std::string(s) + "'");
  return id;
}

// The most topics one reserve may name (HTTP /reserve and Youzan /pop).
constexpr size_t kMaxReserveTopics = 1024;
// The bodies one reserve's reply may carry at most, counted at the maximum
// job size: 128 jobs of 64 KiB, 1000 (the most of any reserve) up to 8 KiB.
constexpr size_t kReserveReplyBudget = 8 * 1024 * 1024;
// The longest lease a finish, release, bury or touch may name (the
// backends' are 16 to 40 characters).
constexpr size_t kMaxLeaseLength = 64;

// Splits "a,b" (Youzan) into names, each once, in order. False when there
// are more than kMaxReserveTopics different names.
bool SplitTopics(std::string_view s, std::vector<std::string>* out) {
  std::unordered_set<std::string_view> seen;
  while (!s.empty()) {
    size_t c = s.find(',');
    std::string_view t = s.substr(0, c);
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    if (!t.empty() && seen.insert(t).second) {
      if (seen.size() > kMaxReserveTopics) return false;
      out->emplace_back(t);
    }
    if (c == std::string_view::npos) break;
    s.remove_prefix(c + 1);
  }
  return true;
}

std::string YouzanBody(int code, std::string_view message,
                       const std::function<void(JsonWriter&)>& data = nullptr) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  std::string msg = Printable(message);
  w.StartObject();
  w.Key("code");
  w.Int(code);
  w.Key("message");
  Str(w, msg);
  w.Key("data");
  if (data) {
    data(w);
  } else {
    w.Null();
  }
  w.EndObject();
  return Done(sb);
}

HttpReply YouzanFail(std::string_view message) {
  return HttpReply{200, YouzanBody(1, message), {}};
}
// A backend's refusal: its message, or its code's name when it has none.
HttpReply YouzanFail(const Status& st) {
  return YouzanFail(st.message().empty() ? CodeName(st.code()) : std::string_view(st.message()));
}

}  // namespace

// ---- the API ---------------------------------------------------------------------

// A reserve in progress.
struct HttpApi::Wait {
  CallId id = 0;
  SessionId session = 0;
  bool counted = false;  // in ServerContext::waiting
  std::vector<std::string> topics;
  std::function<void(Status, std::vector<OwnedJob>)> finish;
  bool finished = false;
};

// The route handlers, with access to the API's state.
struct HttpApiRoutes {
  using Params = std::vector<std::string>;
  using Handler = void (*)(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                           HttpApi::CallId*);
  struct Route {
    std::string_view method;
    std::vector<std::string_view> path;  // ":x" segments capture
    Handler handler;
  };
  static const std::vector<Route>& Table();

  // ---- shared steps ----
  static void Reserve(HttpApi& api, std::vector<std::string> topics, TimeMs timeout_ms,
                      uint32_t count, std::function<void(Status, std::vector<OwnedJob>)> finish,
                      HttpApi::CallId* call);
  static void ReplyJobs(std::vector<OwnedJob> jobs, HttpApi::Reply done);
  static void ReplyJob(Status st, Jobs jobs, HttpApi::Reply done);
  // An operation on one job that a lease holds: the body's "lease" read
  // here, `op` reads the rest of the body and makes the one backend call,
  // and `reply` words its answer.
  static void LeaseOp(const HttpRequest& req, const Params& p, HttpApi::Reply&& done,
                      const std::function<void(const backend::Claim&, JobId, Fields&,
                                               backend::Callback<JobChange>)>& op,
                      HttpReply (*reply)(const Result<JobChange>&) = ChangeReply);
  static void PutMany(HttpApi& api, std::string topic, std::shared_ptr<std::vector<PutSpec>> specs,
                      bool batch, std::shared_ptr<rapidjson::Document> doc, HttpApi::Reply done);

  // ---- native routes ----
  static void Healthz(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                      HttpApi::CallId*);
  static void ServerStats(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                          HttpApi::CallId*);
  static void ListTopics(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                         HttpApi::CallId*);
  static void TopicStats(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                         HttpApi::CallId*);
  static void Put(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&, HttpApi::CallId*);
  static void ReserveRoute(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                           HttpApi::CallId*);
  static void GetJob(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                     HttpApi::CallId*);
  static void GetByKey(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                       HttpApi::CallId*);
  static void DeleteJob(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                        HttpApi::CallId*);
  static void DeleteByKey(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                          HttpApi::CallId*);
  static void Finish(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                     HttpApi::CallId*);
  static void Release(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                      HttpApi::CallId*);
  static void Bury(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&, HttpApi::CallId*);
  static void Touch(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                    HttpApi::CallId*);
  static void KickJob(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                      HttpApi::CallId*);
  static void KickTopic(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                        HttpApi::CallId*);
  static void Pause(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                    HttpApi::CallId*);
  static void Clear(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                    HttpApi::CallId*);
  // ---- Youzan-style routes ----
  static void YPush(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                    HttpApi::CallId*);
  static void YPop(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&, HttpApi::CallId*);
  static void YFinish(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                      HttpApi::CallId*);
  static void YDelete(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                      HttpApi::CallId*);
  static void YById(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&, bool finish);
  static void YGet(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&, HttpApi::CallId*);
};

const std::vector<HttpApiRoutes::Route>& HttpApiRoutes::Table() {
  using R = HttpApiRoutes;
  static const std::vector<Route> table = {
      {"GET", {"healthz"}, &R::Healthz},
      {"GET", {"stats"}, &R::ServerStats},
      {"GET", {"topics"}, &R::ListTopics},
      {"GET", {"topics", ":topic"}, &R::TopicStats},
      {"POST", {"topics", ":topic", "jobs"}, &R::Put},
      {"POST", {"topics", ":topic", "reserve"}, &R::ReserveRoute},
      {"POST", {"topics", ":topic", "kick"}, &R::KickTopic},
      {"POST", {"topics", ":topic", "pause"}, &R::Pause},
      {"POST", {"topics", ":topic", "clear"}, &R::Clear},
      {"GET", {"topics", ":topic", "keys", ":key"}, &R::GetByKey},
      {"DELETE", {"topics", ":topic", "keys", ":key"}, &R::DeleteByKey},
      {"POST", {"reserve"}, &R::ReserveRoute},
      {"GET", {"jobs", ":id"}, &R::GetJob},
      {"DELETE", {"jobs", ":id"}, &R::DeleteJob},
      {"POST", {"jobs", ":id", "finish"}, &R::Finish},
      {"POST", {"jobs", ":id", "release"}, &R::Release},
      {"POST", {"jobs", ":id", "bury"}, &R::Bury},
      {"POST", {"jobs", ":id", "touch"}, &R::Touch},
      {"POST", {"jobs", ":id", "kick"}, &R::KickJob},
      {"POST", {"push"}, &R::YPush},
      {"POST", {"pop"}, &R::YPop},
      {"POST", {"finish"}, &R::YFinish},
      {"POST", {"delete"}, &R::YDelete},
      {"POST", {"get"}, &R::YGet},
  };
  return table;
}

HttpApi::HttpApi(ServerContext& ctx, HttpApiOptions options)
    : ctx_(ctx), backend_(ctx.backend), options_(options) {}

HttpApi::~HttpApi() {
  *alive_ = false;
  for (auto& [id, w] : waits_) {
    Uncount(*w);
    backend_.CloseSession(w->session);
  }
  for (Pooled& p : pool_) backend_.CloseSession(p.session);
}

Result<SessionId> HttpApi::ReserveSession(const std::vector<std::string>& topics) {
  for (const std::string& t : topics)
    if (Status st = CheckTopic(t); !st.ok()) return st;
  Pooled p;
  if (!pool_.empty()) {
    p = std::move(pool_.back());
    pool_.pop_back();
  } else {
    p.session = backend_.OpenSession();
    p.watched = {backend_.UsedTopic(p.session)};  // a new session watches its used topic
  }
  if (p.watched != topics) {
    for (const std::string& t : topics) {
      if (auto r = backend_.Watch(p.session, t); !r.ok()) {
        backend_.CloseSession(p.session);
        return r.status();
      }
    }
    for (const std::string& t : p.watched) {
      if (std::find(topics.begin(), topics.end(), t) != topics.end()) continue;
      if (auto r = backend_.Ignore(p.session, t); !r.ok()) {
        backend_.CloseSession(p.session);
        return r.status();
      }
    }
  }
  return p.session;
}

void HttpApi::ReleaseSession(SessionId s, std::vector<std::string> topics) {
  if (pool_.size() >= options_.session_pool) {
    backend_.CloseSession(s);
    return;
  }
  pool_.push_back(Pooled{s, std::move(topics)});
}

void HttpApi::Cancel(CallId id) {
  auto it = waits_.find(id);
  if (it == waits_.end()) return;
  std::shared_ptr<Wait> w = it->second;
  waits_.erase(it);
  w->finished = true;
  Uncount(*w);
  backend_.CloseSession(w->session);
}

void HttpApi::WakeWaiters() {
  auto all = std::move(waits_);
  waits_.clear();
  for (auto& [id, w] : all) {
    if (w->finished) continue;
    w->finished = true;
    Uncount(*w);
    backend_.CloseSession(w->session);
    w->finish(Status::TimedOut(), {});
  }
}

HttpApi::CallId HttpApi::Handle(const HttpRequest& request, Reply done) {
  std::string_view target = request.target;
  target = target.substr(0, target.find('?'));
  std::string_view method = request.method == "HEAD" ? "GET" : request.method;
  if (target.empty() || target.front() != '/') {
    done(ErrorReply(400, "bad_request", "the target must be an absolute path"));
    return 0;
  }
  // Raw segments: a topic name may hold '/', sent as %2F.
  std::vector<std::string_view> segs;
  for (std::string_view rest = target.substr(1);;) {
    size_t slash = rest.find('/');
    segs.push_back(rest.substr(0, slash));
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  std::string allow;
  for (const HttpApiRoutes::Route& r : HttpApiRoutes::Table()) {
    if (r.path.size() != segs.size()) continue;
    bool match = true;
    for (size_t i = 0; i < segs.size() && match; ++i)
      match = r.path[i].front() == ':' ? !segs[i].empty() : r.path[i] == segs[i];
    if (!match) continue;
    if (r.method != method) {
      if (allow.find(r.method) == std::string::npos) {
        if (!allow.empty()) allow += ", ";
        allow += r.method;
      }
      continue;
    }
    HttpApiRoutes::Params params;
    for (size_t i = 0; i < segs.size(); ++i) {
      if (r.path[i].front() != ':') continue;
      std::string decoded;
      if (!PercentDecode(segs[i], &decoded)) {
        done(ErrorReply(400, "bad_request", "bad percent-encoding in the path"));
        return 0;
      }
      params.push_back(std::move(decoded));
    }
    CallId call = 0;
    r.handler(*this, request, params, std::move(done), &call);
    return call;
  }
  if (!allow.empty()) {
    if (allow.find("GET") != std::string::npos) allow += ", HEAD";
    HttpReply rep = ErrorReply(405, "method_not_allowed",
                               std::string(request.method) + " is not allowed here; use " + allow);
    rep.allow = allow;
    done(std::move(rep));
    return 0;
  }
  done(ErrorReply(404, "not_found", "no route " + std::string(target)));
  return 0;
}

// ---- shared steps ---------------------------------------------------------------

namespace {

// The error reply of a request body that did not parse or validate.
HttpReply BadInput(const Status& st) {
  constexpr std::string_view kBadJson = "bad_json:";
  std::string_view msg = st.message();
  if (msg.substr(0, kBadJson.size()) == kBadJson)
    return ErrorReply(400, "bad_json",
                      "the body is not valid JSON: " + std::string(msg.substr(kBadJson.size())));
  return StatusReply(st);
}

}  // namespace

void HttpApiRoutes::Reserve(HttpApi& api, std::vector<std::string> topics, TimeMs timeout_ms,
                            uint32_t count,
                            std::function<void(Status, std::vector<OwnedJob>)> finish,
                            HttpApi::CallId* call) {
  auto s = api.ReserveSession(topics);
  if (!s.ok()) return finish(s.status(), {});
  auto w = std::make_shared<HttpApi::Wait>();
  w->id = api.next_call_++;
  w->session = *s;
  w->topics = std::move(topics);
  w->finish = std::move(finish);
  api.waits_.emplace(w->id, w);
  std::weak_ptr<bool> alive = api.alive_;
  api.backend_.Reserve(ReserveRequest{*s, api.ctx_.WaitFor(timeout_ms, "http"), count,
                                      /*detach=*/true},
                       [&api, alive, w](Status st, Jobs jobs) {
                         if (alive.expired() || w->finished) return;
                         w->finished = true;
                         api.Uncount(*w);
                         api.waits_.erase(w->id);
                         std::vector<OwnedJob> owned;
                         owned.reserve(jobs.size());
                         for (const JobView& v : jobs) owned.push_back(Own(v));
                         api.ReleaseSession(w->session, std::move(w->topics));
                         w->finish(st, std::move(owned));
                       });
  if (!w->finished) {
    *call = w->id;  // it waits
    w->counted = true;
    api.ctx_.waiting++;
  }
}

void HttpApi::Uncount(Wait& w) {
  if (!w.counted) return;
  w.counted = false;
  ctx_.waiting--;
}

void HttpApiRoutes::ReplyJobs(std::vector<OwnedJob> js, HttpApi::Reply done) {
  // Memory: the reply may be megabytes (a reserve of many large jobs). Its
  // buffer is sized once (escaping may double a body; base64 adds a third),
  // and the jobs and the buffer are gone before the reply is handed on.
  std::string body;
  {
    size_t estimate = 16;
    for (const OwnedJob& j : js) estimate += 2 * j.body.size() + j.key.size() + 512;
    rapidjson::StringBuffer sb(nullptr, estimate);
    JsonWriter w(sb);
    w.StartObject();
    w.Key("jobs");
    w.StartArray();
    for (OwnedJob& j : js) {
      JobObject(w, j, true);
      std::string().swap(j.body);
    }
    w.EndArray();
    w.EndObject();
    body = Done(sb);
  }
  done(HttpReply{200, std::move(body), {}});
}

void HttpApiRoutes::ReplyJob(Status st, Jobs jobs, HttpApi::Reply done) {
  if (!st.ok() || jobs.empty()) return done(StatusReply(st.ok() ? Status::NotFound() : st));
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  JobObject(w, Own(jobs.front()), true);
  done(HttpReply{200, Done(sb), {}});
}

// ---- native routes ----------------------------------------------------------------

void HttpApiRoutes::Healthz(HttpApi& api, const HttpRequest&, const Params&, HttpApi::Reply&& done,
                            HttpApi::CallId*) {
  done(HttpReply{200,
                 api.ctx_.draining ? R"({"status":"ok","draining":true})"
                                   : R"({"status":"ok","draining":false})",
                 {}});
}

void HttpApiRoutes::ServerStats(HttpApi& api, const HttpRequest&, const Params&,
                                HttpApi::Reply&& done, HttpApi::CallId*) {
  api.backend_.Stats([&api, done = std::move(done)](Result<EngineStats> r) {
    if (!r.ok()) return done(StatusReply(r.status()));
    const EngineStats& e = *r;
    TimeMs now = api.backend_.Now();
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    w.StartObject();
    w.Key("version");
    Str(w, kVersion);
    w.Key("id");
    Str(w, api.ctx_.instance_id);
    w.Key("now_ms");
    w.Int64(now);
    w.Key("uptime_ms");
    w.Int64(now - api.ctx_.started_ms);
    w.Key("draining");
    w.Bool(api.ctx_.draining);
    w.Key("jobs");
    JobCounts(w, e);
    w.Key("total_jobs");
    w.Uint64(e.total_jobs);
    w.Key("job_timeouts");
    w.Uint64(e.job_timeouts);
    w.Key("topics");
    w.Uint64(e.topics);
    w.Key("waiting");
    w.Uint64(e.waiting);
    w.Key("beanstalk_connections");
    w.Uint64(api.ctx_.counters.connections);
    w.Key("max_job_size");
    w.Uint64(api.ctx_.max_job_size);
    w.EndObject();
    done(HttpReply{200, Done(sb), {}});
  });
}

void HttpApiRoutes::ListTopics(HttpApi& api, const HttpRequest&, const Params&,
                               HttpApi::Reply&& done, HttpApi::CallId*) {
  api.backend_.ListTopics([done = std::move(done)](Result<std::vector<std::string>> r) {
    if (!r.ok()) return done(StatusReply(r.status()));
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    w.StartObject();
    w.Key("topics");
    w.StartArray();
    for (const std::string& t : *r) Str(w, t);
    w.EndArray();
    w.EndObject();
    done(HttpReply{200, Done(sb), {}});
  });
}

void HttpApiRoutes::TopicStats(HttpApi& api, const HttpRequest&, const Params& p,
                               HttpApi::Reply&& done, HttpApi::CallId*) {
  if (Status st = CheckTopic(p[0]); !st.ok()) return done(StatusReply(st));
  api.backend_.StatsTopic(
      p[0], [done = std::move(done), topic = p[0]](Result<delayq::TopicStats> r) {
        if (!r.ok()) {
          return done(r.code() == Code::kNotFound
                          ? StatusReply(Status::NotFound("no topic '" + topic + "'"))
                          : StatusReply(r.status()));
        }
        const delayq::TopicStats& t = *r;
        rapidjson::StringBuffer sb;
        JsonWriter w(sb);
        w.StartObject();
        w.Key("name");
        Str(w, t.name);
        w.Key("jobs");
        JobCounts(w, t);
        w.Key("total_jobs");
        w.Uint64(t.total_jobs);
        w.Key("watching");
        w.Uint64(t.watching);
        w.Key("waiting");
        w.Uint64(t.waiting);
        w.Key("paused");
        w.Bool(t.pause_time_left_ms > 0);
        w.Key("pause_ms");
        w.Int64(t.pause_ms);
        w.Key("pause_time_left_ms");
        w.Int64(t.pause_time_left_ms);
        w.Key("cmd_delete");
        w.Uint64(t.cmd_delete);
        w.Key("cmd_pause");
        w.Uint64(t.cmd_pause);
        w.EndObject();
        done(HttpReply{200, Done(sb), {}});
      });
}

namespace {

// A put's "state" (and "due_ms" when delayed).
void PutState(JsonWriter& w, const PutResult& r) {
  w.Key("state");
  Str(w, JobStateName(r.state));
  if (r.state == JobState::kDelayed) {
    w.Key("due_ms");
    w.Int64(r.due_ms);
  }
}

}  // namespace

void HttpApiRoutes::PutMany(HttpApi& api, std::string topic,
                            std::shared_ptr<std::vector<PutSpec>> specs, bool batch,
                            std::shared_ptr<rapidjson::Document> doc, HttpApi::Reply done) {
  struct State {
    std::vector<Result<PutResult>> results;
    size_t pending = 0;
    HttpApi::Reply done;
  };
  auto st = std::make_shared<State>();
  st->done = std::move(done);
  const size_t n = specs->size();
  st->results.assign(n, Status::Internal("no reply"));
  st->pending = n;
  auto finish = [st, batch, n] {
    if (!batch) {
      const Result<PutResult>& r = st->results[0];
      if (!r.ok()) return st->done(StatusReply(r.status()));
      rapidjson::StringBuffer sb;
      JsonWriter w(sb);
      w.StartObject();
      w.Key("id");
      w.Uint64(r->id);
      w.Key("created");
      w.Bool(r->created);
      PutState(w, *r);
      w.EndObject();
      return st->done(HttpReply{r->created ? 201 : 200, Done(sb), {}});
    }
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    w.StartObject();
    w.Key("jobs");
    w.StartArray();
    for (size_t i = 0; i < n; ++i) {
      const Result<PutResult>& r = st->results[i];
      w.StartObject();
      if (!r.ok()) {
        std::string msg = Printable(r.status().message());
        w.Key("error");
        w.StartObject();
        w.Key("code");
        Str(w, CodeName(r.code()));
        w.Key("message");
        Str(w, msg.empty() ? std::string(CodeName(r.code())) : msg);
        w.EndObject();
      } else {
        w.Key("id");
        w.Uint64(r->id);
        w.Key("created");
        w.Bool(r->created);
        PutState(w, *r);
      }
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    st->done(HttpReply{200, Done(sb), {}});
  };
  for (size_t i = 0; i < n; ++i) {
    PutRequest& r = (*specs)[i].req;
    r.topic = topic;
    if (Status admit = api.ctx_.AdmitPut(); !admit.ok()) {
      st->results[i] = std::move(admit);
      if (--st->pending == 0) finish();
      continue;
    }
    api.backend_.Put(SessionId{0}, r, [st, i, finish, specs, doc](Result<PutResult> res) {
      st->results[i] = std::move(res);
      if (--st->pending == 0) finish();
    });
  }
}

void HttpApiRoutes::Put(HttpApi& api, const HttpRequest& req, const Params& p,
                        HttpApi::Reply&& done, HttpApi::CallId*) {
  if (Status st = CheckTopic(p[0]); !st.ok()) return done(StatusReply(st));
  auto doc = std::make_shared<rapidjson::Document>();
  if (Status st = ParseJsonObject(req.body, doc.get(), false); !st.ok()) return done(BadInput(st));
  TimeMs now = api.backend_.Now();
  auto specs = std::make_shared<std::vector<PutSpec>>();
  auto jobs = doc->FindMember("jobs");
  bool batch = jobs != doc->MemberEnd();
  if (batch) {
    if (doc->MemberCount() != 1 || !jobs->value.IsArray())
      return done(
          StatusReply(Status::InvalidArgument("a batch put is {\"jobs\":[...]} and nothing else")));
    const auto& arr = jobs->value;
    if (arr.Empty() || arr.Size() > api.options_.max_batch)
      return done(StatusReply(Status::InvalidArgument(
          "a batch holds 1 to " + std::to_string(api.options_.max_batch) + " jobs")));
    specs->resize(arr.Size());
    for (rapidjson::SizeType i = 0; i < arr.Size(); ++i) {
      if (Status st = ParsePut(arr[i], "jobs[" + std::to_string(i) + "]: ", now, &(*specs)[i]);
          !st.ok())
        return done(StatusReply(st));
    }
  } else {
    specs->resize(1);
    if (Status st = ParsePut(*doc, "", now, &(*specs)[0]); !st.ok()) return done(StatusReply(st));
  }
  PutMany(api, p[0], std::move(specs), batch, std::move(doc), std::move(done));
}

void HttpApiRoutes::ReserveRoute(HttpApi& api, const HttpRequest& req, const Params& p,
                                 HttpApi::Reply&& done, HttpApi::CallId* call) {
  rapidjson::Document doc;
  if (Status st = ParseJsonObject(req.body, &doc, true); !st.ok()) return done(BadInput(st));
  Fields f(doc, "");
  std::vector<std::string> topics;
  if (!p.empty()) {
    topics.push_back(p[0]);
  } else {
    const rapidjson::Value* t = f.Get("topics");
    if (t == nullptr) return done(StatusReply(Status::InvalidArgument("'topics' is required")));
    if (t->IsString()) {
      topics.emplace_back(t->GetString(), t->GetStringLength());
    } else if (t->IsArray() && !t->Empty() && t->Size() <= kMaxReserveTopics) {
      std::unordered_set<std::string_view> seen;
      for (const auto& e : t->GetArray()) {
        if (!e.IsString()) return done(StatusReply(f.Bad("topics", "a list of topic names")));
        std::string_view name(e.GetString(), e.GetStringLength());
        if (seen.insert(name).second) topics.emplace_back(name);
      }
    } else {
      return done(StatusReply(f.Bad("topics", "a topic name or a list of 1 to " +
                                                  std::to_string(kMaxReserveTopics) + " of them")));
    }
  }
  int64_t timeout_ms = 0, count = 1;
  if (Status st = f.Int("timeout_ms", 0, kMaxDelayMs, &timeout_ms); !st.ok())
    return done(StatusReply(st));
  if (Status st = f.Int("count", 1, static_cast<int64_t>(api.options_.max_batch), &count); !st.ok())
    return done(StatusReply(st));
  if (Status st = f.Unknown(); !st.ok()) return done(StatusReply(st));
  // One reply holds at most kReserveReplyBudget of bodies at the maximum
  // job size: its memory is bounded whatever the jobs hold.
  const int64_t fit = std::max<int64_t>(
      1, static_cast<int64_t>(kReserveReplyBudget / std::max<size_t>(api.ctx_.max_job_size, 1)));
  count = std::min(count, fit);
  Reserve(
      api, std::move(topics), timeout_ms, static_cast<uint32_t>(count),
      [&api, done = std::move(done)](Status st, std::vector<OwnedJob> jobs) {
        if (!st.ok() && st.code() != Code::kTimedOut && st.code() != Code::kDeadlineSoon)
          return done(StatusReply(st));
        ReplyJobs(std::move(jobs), done);
      },
      call);
}

void HttpApiRoutes::GetJob(HttpApi& api, const HttpRequest&, const Params& p, HttpApi::Reply&& done,
                           HttpApi::CallId*) {
  auto id = ParseId(p[0]);
  if (!id.ok()) return done(StatusReply(id.status()));
  api.backend_.Peek(SessionId{0}, Backend::PeekKind::kId, *id, {}, {},
                    [done = std::move(done), id = *id](Status st, Jobs jobs) {
                      ReplyJob(st.ok() || st.code() != Code::kNotFound
                                   ? st
                                   : Status::NotFound("no job " + std::to_string(id)),
                               jobs, done);
                    });
}

void HttpApiRoutes::GetByKey(HttpApi& api, const HttpRequest&, const Params& p,
                             HttpApi::Reply&& done, HttpApi::CallId*) {
  if (Status st = CheckTopic(p[0]); !st.ok()) return done(StatusReply(st));
  if (Status st = CheckKey(p[1]); !st.ok()) return done(StatusReply(st));
  std::string what = "no job with key '" + p[1] + "' in topic '" + p[0] + "'";
  api.backend_.Peek(SessionId{0}, Backend::PeekKind::kKey, 0, p[0], p[1],
                    [done = std::move(done), what](Status st, Jobs jobs) {
                      ReplyJob(st.code() == Code::kNotFound ? Status::NotFound(what) : st, jobs,
                               done);
                    });
}

// An operator's delete: any job, in any state, with no lease.
void HttpApiRoutes::DeleteJob(HttpApi& api, const HttpRequest&, const Params& p,
                              HttpApi::Reply&& done, HttpApi::CallId*) {
  auto id = ParseId(p[0]);
  if (!id.ok()) return done(StatusReply(id.status()));
  api.backend_.Delete(SessionId{0}, *id,
                      [done = std::move(done)](Result<JobChange> r) { done(DeletedReply(r)); });
}

void HttpApiRoutes::DeleteByKey(HttpApi& api, const HttpRequest&, const Params& p,
                                HttpApi::Reply&& done, HttpApi::CallId*) {
  if (Status st = CheckTopic(p[0]); !st.ok()) return done(StatusReply(st));
  if (Status st = CheckKey(p[1]); !st.ok()) return done(StatusReply(st));
  api.backend_.DeleteByKey(SessionId{0}, p[0], p[1], [done = std::move(done)](Result<JobChange> r) {
    done(DeletedReply(r));
  });
}

void HttpApiRoutes::LeaseOp(const HttpRequest& req, const Params& p, HttpApi::Reply&& done,
                            const std::function<void(const backend::Claim&, JobId, Fields&,
                                                     backend::Callback<JobChange>)>& op,
                            HttpReply (*reply)(const Result<JobChange>&)) {
  auto id = ParseId(p[0]);
  if (!id.ok()) return done(StatusReply(id.status()));
  rapidjson::Document doc;
  if (Status st = ParseJsonObject(req.body, &doc, true); !st.ok()) return done(BadInput(st));
  Fields f(doc, "");
  const rapidjson::Value* lease = f.Get("lease");
  if (lease == nullptr || !lease->IsString() || lease->GetStringLength() == 0 ||
      lease->GetStringLength() > kMaxLeaseLength)
    return done(StatusReply(Status::InvalidArgument(
        "'lease' is required: the lease the reserve answered with this job")));
  std::string token(lease->GetString(), lease->GetStringLength());
  // op reads its own fields, checks them and calls the backend (or replies).
  op(backend::Claim(SessionId{0}, token), *id, f,
     [done = std::move(done), reply](Result<JobChange> r) { done(reply(r)); });
}

void HttpApiRoutes::Finish(HttpApi& api, const HttpRequest& req, const Params& p,
                           HttpApi::Reply&& done, HttpApi::CallId*) {
  LeaseOp(
      req, p, std::move(done),
      [&api](const backend::Claim& c, JobId id, Fields& f, backend::Callback<JobChange> d) {
        if (Status st = f.Unknown(); !st.ok()) return d(st);
        api.backend_.Finish(c, id, std::move(d));
      },
      DeletedReply);
}

namespace {

// An optional "priority" member.
Status OptionalPriority(Fields& f, std::optional<uint32_t>* out) {
  int64_t priority = -1;
  if (Status st = f.Int("priority", 0, UINT32_MAX, &priority); !st.ok()) return st;
  if (priority >= 0) *out = static_cast<uint32_t>(priority);
  return Status::Ok();
}

}  // namespace

void HttpApiRoutes::Release(HttpApi& api, const HttpRequest& req, const Params& p,
                            HttpApi::Reply&& done, HttpApi::CallId*) {
  LeaseOp(req, p, std::move(done),
          [&api](const backend::Claim& c, JobId id, Fields& f, backend::Callback<JobChange> d) {
            std::optional<uint32_t> priority;
            int64_t delay = -1;
            if (Status st = OptionalPriority(f, &priority); !st.ok()) return d(st);
            if (Status st = f.Int("delay_ms", 0, kMaxDelayMs, &delay); !st.ok()) return d(st);
            if (Status st = f.Unknown(); !st.ok()) return d(st);
            std::optional<TimeMs> dl;
            if (delay >= 0) dl = delay;
            api.backend_.Release(c, id, priority, dl, std::move(d));
          });
}

void HttpApiRoutes::Bury(HttpApi& api, const HttpRequest& req, const Params& p,
                         HttpApi::Reply&& done, HttpApi::CallId*) {
  LeaseOp(req, p, std::move(done),
          [&api](const backend::Claim& c, JobId id, Fields& f, backend::Callback<JobChange> d) {
            std::optional<uint32_t> priority;
            if (Status st = OptionalPriority(f, &priority); !st.ok()) return d(st);
            if (Status st = f.Unknown(); !st.ok()) return d(st);
            api.backend_.Bury(c, id, priority, std::move(d));
          });
}

void HttpApiRoutes::Touch(HttpApi& api, const HttpRequest& req, const Params& p,
                          HttpApi::Reply&& done, HttpApi::CallId*) {
  LeaseOp(req, p, std::move(done),
          [&api](const backend::Claim& c, JobId id, Fields& f, backend::Callback<JobChange> d) {
            if (Status st = f.Unknown(); !st.ok()) return d(st);
            api.backend_.Touch(c, id, std::move(d));
          });
}

void HttpApiRoutes::KickJob(HttpApi& api, const HttpRequest&, const Params& p,
                            HttpApi::Reply&& done, HttpApi::CallId*) {
  auto id = ParseId(p[0]);
  if (!id.ok()) return done(StatusReply(id.status()));
  api.backend_.KickJob(SessionId{0}, *id,
                       [done = std::move(done)](Result<JobChange> r) { done(ChangeReply(r)); });
}

namespace {

HttpReply CountReply(std::string_view name, const Result<uint64_t>& r) {
  if (!r.ok()) return StatusReply(r.status());
  return HttpReply{200, "{\"" + std::string(name) + "\":" + std::to_string(*r) + "}", {}};
}

}  // namespace

void HttpApiRoutes::KickTopic(HttpApi& api, const HttpRequest& req, const Params& p,
                              HttpApi::Reply&& done, HttpApi::CallId*) {
  if (Status st = CheckTopic(p[0]); !st.ok()) return done(StatusReply(st));
  rapidjson::Document doc;
  if (Status st = ParseJsonObject(req.body, &doc, true); !st.ok()) return done(BadInput(st));
  Fields f(doc, "");
  int64_t bound = 1;
  if (Status st = f.Int("bound", 1, UINT32_MAX, &bound); !st.ok()) return done(StatusReply(st));
  if (Status st = f.Unknown(); !st.ok()) return done(StatusReply(st));
  api.backend_.Kick(
      SessionId{0}, p[0], static_cast<uint64_t>(bound),
      [done = std::move(done)](Result<uint64_t> r) { done(CountReply("kicked", r)); });
}

void HttpApiRoutes::Pause(HttpApi& api, const HttpRequest& req, const Params& p,
                          HttpApi::Reply&& done, HttpApi::CallId*) {
  if (Status st = CheckTopic(p[0]); !st.ok()) return done(StatusReply(st));
  rapidjson::Document doc;
  if (Status st = ParseJsonObject(req.body, &doc, false); !st.ok()) return done(BadInput(st));
  Fields f(doc, "");
  int64_t delay = -1;
  if (Status st = f.Int("delay_ms", 0, kMaxDelayMs, &delay); !st.ok()) return done(StatusReply(st));
  if (Status st = f.Unknown(); !st.ok()) return done(StatusReply(st));
  if (delay < 0) return done(StatusReply(Status::InvalidArgument("'delay_ms' is required")));
  std::string topic = p[0];
  api.backend_.PauseTopic(topic, delay, [done = std::move(done), topic, delay](Status st) {
    if (!st.ok())
      return done(StatusReply(
          st.code() == Code::kNotFound ? Status::NotFound("no topic '" + topic + "'") : st));
    done(HttpReply{
        200, R"({"topic":")" + topic + R"(","pause_ms":)" + std::to_string(delay) + "}", {}});
  });
}

void HttpApiRoutes::Clear(HttpApi& api, const HttpRequest& req, const Params& p,
                          HttpApi::Reply&& done, HttpApi::CallId*) {
  if (Status st = CheckTopic(p[0]); !st.ok()) return done(StatusReply(st));
  rapidjson::Document doc;
  if (Status st = ParseJsonObject(req.body, &doc, true); !st.ok()) return done(BadInput(st));
  Fields f(doc, "");
  auto mask = ParseStates(f.Get("states"));
  if (!mask.ok()) return done(StatusReply(mask.status()));
  if (Status st = f.Unknown(); !st.ok()) return done(StatusReply(st));
  api.backend_.ClearTopic(SessionId{0}, p[0], *mask, [done = std::move(done)](Result<uint64_t> r) {
    done(CountReply("cleared", r));
  });
}

// ---- Youzan-style routes ----------------------------------------------------------
// Replies are always HTTP 200 with {code, message, data}: code 0 success, 1
// failure, as in the Go implementation of Youzan's design. User ids are
// delayq keys; delay and ttr are seconds.

namespace {

// Parses the body, or replies the Youzan-style failure and returns false.
bool YouzanObject(const HttpRequest& req, rapidjson::Document* d, HttpApi::Reply& done) {
  if (Status st = ParseJsonObject(req.body, d, false); !st.ok()) {
    done(YouzanFail(st.message().rfind("bad_json:", 0) == 0 ? "the body is not valid JSON"
                                                            : st.message()));
    return false;
  }
  return true;
}

// A Youzan id of the form "#<number>" (a job without a name, as /pop shows
// it): the number; else 0.
JobId NumberedId(std::string_view id) {
  return id.size() > 1 && id[0] == '#' ? ParseDecimalId(id.substr(1)) : 0;
}

// A job's Youzan id: its name, or "#<number>" for a job put without one
// (docs/http-api.md, "Youzan-style routes").
std::string YouzanId(const OwnedJob& j) { return j.fig.named ? j.key : "#" + std::to_string(j.id); }

// A trimmed string member, or empty.
std::string_view YouzanString(const rapidjson::Value& d, const char* name) {
  auto it = d.FindMember(name);
  if (it == d.MemberEnd() || !it->value.IsString()) return {};
  std::string_view s(it->value.GetString(), it->value.GetStringLength());
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

void HttpApiRoutes::YPush(HttpApi& api, const HttpRequest& req, const Params&,
                          HttpApi::Reply&& done, HttpApi::CallId*) {
  rapidjson::Document d;
  if (!YouzanObject(req, &d, done)) return;
  std::string_view id = YouzanString(d, "id"), topic = YouzanString(d, "topic");
  if (id.empty()) return done(YouzanFail("id must not be empty"));
  if (topic.empty()) return done(YouzanFail("topic must not be empty"));
  if (!IsValidKey(id)) return done(YouzanFail(CheckKey(id).message()));
  if (NumberedId(id) != 0)
    return done(YouzanFail("id '" + std::string(id) +
                           "' has the form #<number>, which names a job by its number"));
  if (!IsValidTopicName(topic)) return done(YouzanFail(CheckTopic(topic).message()));
  auto num = [&d](const char* name, int64_t lo, int64_t hi, int64_t* out) {
    auto it = d.FindMember(name);
    if (it == d.MemberEnd() || !it->value.IsInt64() || it->value.GetInt64() < lo ||
        it->value.GetInt64() > hi)
      return false;
    *out = it->value.GetInt64();
    return true;
  };
  int64_t delay = 0, ttr = 0;
  if (!num("delay", 0, kMaxDelayMs / 1000, &delay))
    return done(YouzanFail("delay must be a number of seconds >= 0"));
  if (!num("ttr", 1, 86400, &ttr)) return done(YouzanFail("ttr must be 1 - 86400 seconds"));
  auto body = d.FindMember("body");
  if (body != d.MemberEnd() && !body->value.IsString())
    return done(YouzanFail("body must be a string"));
  if (api.ctx_.draining) return done(YouzanFail("the server is draining: it takes no new jobs"));
  if (Status admit = api.ctx_.AdmitPut(); !admit.ok()) return done(YouzanFail(admit.message()));
  PutRequest r;
  r.topic = topic;
  r.key = id;
  r.named = true;
  r.delay_ms = delay * 1000;
  r.ttr_ms = ttr * 1000;
  if (body != d.MemberEnd())
    r.body = std::string_view(body->value.GetString(), body->value.GetStringLength());
  api.backend_.Put(SessionId{0}, r, [done = std::move(done)](Result<PutResult> res) {
    if (!res.ok()) return done(YouzanFail(res.status()));
    done(HttpReply{200, YouzanBody(0, res->created ? "added" : "exists"), {}});
  });
}

void HttpApiRoutes::YPop(HttpApi& api, const HttpRequest& req, const Params&, HttpApi::Reply&& done,
                         HttpApi::CallId* call) {
  rapidjson::Document d;
  if (!YouzanObject(req, &d, done)) return;
  std::vector<std::string> topics;
  if (!SplitTopics(YouzanString(d, "topic"), &topics))
    return done(
        YouzanFail("topic names more than " + std::to_string(kMaxReserveTopics) + " topics"));
  if (topics.empty()) return done(YouzanFail("topic must not be empty"));
  for (const std::string& t : topics)
    if (!IsValidTopicName(t)) return done(YouzanFail(CheckTopic(t).message()));
  TimeMs timeout = api.options_.pop_wait_ms;
  if (auto it = d.FindMember("timeout"); it != d.MemberEnd()) {
    if (!it->value.IsInt64() || it->value.GetInt64() < 0 || it->value.GetInt64() > 86400)
      return done(YouzanFail("timeout must be 0 - 86400 seconds"));
    timeout = it->value.GetInt64() * 1000;
  }
  Reserve(
      api, std::move(topics), timeout, 1,
      [done = std::move(done)](Status st, std::vector<OwnedJob> jobs) {
        if (!st.ok() && st.code() != Code::kTimedOut && st.code() != Code::kDeadlineSoon)
          return done(YouzanFail(st));
        if (jobs.empty()) return done(HttpReply{200, YouzanBody(0, "ok"), {}});
        const OwnedJob& j = jobs.front();
        done(HttpReply{200,
                       YouzanBody(0, "ok",
                                  [&j](JsonWriter& w) {
                                    w.StartObject();
                                    w.Key("id");
                                    Str(w, YouzanId(j));
                                    w.Key("topic");
                                    Str(w, j.topic);
                                    Body(w, j.body);
                                    w.EndObject();
                                  }),
                       {}});
      },
      call);
}

void HttpApiRoutes::YFinish(HttpApi& api, const HttpRequest& req, const Params& p,
                            HttpApi::Reply&& done, HttpApi::CallId*) {
  YById(api, req, p, std::move(done), /*finish=*/true);
}

void HttpApiRoutes::YDelete(HttpApi& api, const HttpRequest& req, const Params& p,
                            HttpApi::Reply&& done, HttpApi::CallId*) {
  YById(api, req, p, std::move(done), /*finish=*/false);
}

// One backend call: by number for "#<number>", else by name (which falls
// back to a job without a name whose id the name is in decimal).
void HttpApiRoutes::YById(HttpApi& api, const HttpRequest& req, const Params&,
                          HttpApi::Reply&& done, bool finish) {
  rapidjson::Document d;
  if (!YouzanObject(req, &d, done)) return;
  std::string id(YouzanString(d, "id"));
  if (id.empty()) return done(YouzanFail("id must not be empty"));
  if (!IsValidKey(id)) return done(YouzanFail(CheckKey(id).message()));
  auto reply = [finish, id, done = std::move(done)](Result<JobChange> r) {
    // As in the original, deleting an id that is not there succeeds; a
    // finish says that it finished nothing.
    if (r.ok() || (!finish && r.code() == Code::kNotFound))
      return done(HttpReply{200, YouzanBody(0, "ok"), {}});
    if (r.code() == Code::kNotFound) return done(YouzanFail("no job has id '" + id + "'"));
    done(YouzanFail(r.status()));
  };
  const JobId number = NumberedId(id);
  if (number != 0 && finish) return api.backend_.Finish(SessionId{0}, number, std::move(reply));
  if (number != 0) return api.backend_.Delete(SessionId{0}, number, std::move(reply));
  if (finish) return api.backend_.FinishByName(id, std::move(reply));
  api.backend_.DeleteByName(id, std::move(reply));
}

void HttpApiRoutes::YGet(HttpApi& api, const HttpRequest& req, const Params&, HttpApi::Reply&& done,
                         HttpApi::CallId*) {
  rapidjson::Document d;
  if (!YouzanObject(req, &d, done)) return;
  std::string id(YouzanString(d, "id"));
  if (id.empty()) return done(YouzanFail("id must not be empty"));
  if (!IsValidKey(id)) return done(YouzanFail(CheckKey(id).message()));
  const JobId number = NumberedId(id);
  auto reply = [&api, done = std::move(done)](Status st, Jobs jobs) {
    if (st.code() == Code::kNotFound || (st.ok() && jobs.empty()))
      return done(HttpReply{200, YouzanBody(0, "ok"), {}});
    if (!st.ok()) return done(YouzanFail(st));
    const OwnedJob j = Own(jobs.front());
    const JobView& s = j.fig;
    TimeMs now = api.backend_.Now();
    done(HttpReply{200,
                   YouzanBody(0, "ok",
                              [&](JsonWriter& w) {
                                w.StartObject();
                                w.Key("topic");
                                Str(w, j.topic);
                                w.Key("id");
                                Str(w, YouzanId(j));
                                w.Key("delay");
                                w.Int64(s.state == JobState::kDelayed
                                            ? std::max<TimeMs>(s.due_ms - now, 0) / 1000
                                            : 0);
                                w.Key("ttr");
                                w.Int64(s.ttr_ms / 1000);
                                Body(w, j.body);
                                w.Key("state");
                                Str(w, JobStateName(s.state));
                                w.EndObject();
                              }),
                   {}});
  };
  if (number != 0)
    return api.backend_.Peek(SessionId{0}, Backend::PeekKind::kId, number, {}, {},
                             std::move(reply));
  api.backend_.Peek(SessionId{0}, Backend::PeekKind::kName, 0, {}, id, std::move(reply));
}

}  // namespace delayq::server

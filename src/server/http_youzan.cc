// The Youzan-style routes of the HTTP API (/push /pop /finish /delete /get,
// as the widely used Go delay queue after Youzan's design; docs/http-api.md,
// "Youzan-style routes") and their replies {code, message, data}.
#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "delayq/text.h"
#include "server/http_api_internal.h"
#include "server/json_input.h"

namespace delayq::server {

using backend::Backend;
using backend::Jobs;

// ---- Youzan-style routes ----------------------------------------------------------
// Replies are always HTTP 200 with {code, message, data}: code 0 success, 1
// failure, as in the Go implementation of Youzan's design. User ids are
// delayq keys; delay and ttr are seconds.

namespace {

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
  rapidjson::Document doc;
  if (!YouzanObject(req, &doc, done)) return;
  const rapidjson::Document& d = doc;  // const iterators: C++20 compares them unambiguously
  std::string_view id = YouzanString(d, "id"), topic = YouzanString(d, "topic");
  if (id.empty()) return done(YouzanFail("id must not be empty"));
  if (topic.empty()) return done(YouzanFail("topic must not be empty"));
  if (!IsValidKey(id)) return done(YouzanFail(CheckKey(id).message()));
  if (NumberedId(id) != 0)
    return done(YouzanFail("id '" + std::string(id) +
                           "' has the form #<number>, which names a job by its number"));
  if (!IsValidTopicName(topic)) return done(YouzanFail(CheckTopic(topic).message()));
  if (Status st = CheckEach(req, Scope::kProduce, {std::string(topic)}); !st.ok())
    return done(StatusReply(st));
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
  // The id held in another topic: the refusal names that topic only to a
  // caller that may read every topic.
  const bool sees_all = req.caller == nullptr || req.caller->Everywhere(Scope::kRead);
  api.backend_.Put(SessionId{0}, r,
                   [done = std::move(done), sees_all, id = std::string(id)](Result<PutResult> res) {
                     if (!res.ok() && res.status().code() == Code::kConflict && !sees_all &&
                         res.status().message().starts_with("id '"))
                       return done(YouzanFail("id '" + id + "' belongs to a job in another topic"));
                     if (!res.ok()) return done(YouzanFail(res.status()));
                     done(HttpReply{200, YouzanBody(0, res->created ? "added" : "exists"), {}});
                   });
}

void HttpApiRoutes::YPop(HttpApi& api, const HttpRequest& req, const Params&, HttpApi::Reply&& done,
                         HttpApi::CallId* call) {
  rapidjson::Document doc;
  if (!YouzanObject(req, &doc, done)) return;
  const rapidjson::Document& d = doc;  // const iterators: C++20 compares them unambiguously
  std::vector<std::string> topics;
  if (!SplitTopics(YouzanString(d, "topic"), &topics))
    return done(
        YouzanFail("topic names more than " + std::to_string(kMaxReserveTopics) + " topics"));
  if (topics.empty()) return done(YouzanFail("topic must not be empty"));
  for (const std::string& t : topics)
    if (!IsValidTopicName(t)) return done(YouzanFail(CheckTopic(t).message()));
  if (Status st = CheckEach(req, Scope::kConsume, topics); !st.ok()) return done(StatusReply(st));
  TimeMs timeout = api.options_.pop_wait_ms;
  if (auto it = d.FindMember("timeout"); it != d.MemberEnd()) {
    if (!it->value.IsInt64() || it->value.GetInt64() < 0 || it->value.GetInt64() > 86400)
      return done(YouzanFail("timeout must be 0 - 86400 seconds"));
    timeout = it->value.GetInt64() * 1000;
  }
  Reserve(
      api, req.caller, std::move(topics), timeout, 1,
      [done = std::move(done)](Status st, std::vector<OwnedJob> jobs) {
        // A reload took the caller's right while it waited: refused as the
        // request would be now.
        if (st.code() == Code::kUnauthenticated || st.code() == Code::kPermissionDenied)
          return done(AccessReply(st));
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
                                    WriteJsonBody(w, j.body);
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
  const JobId number = NumberedId(id);
  IfMayOnJob(api, req, finish ? Scope::kConsume : Scope::kAdmin, number, id, std::move(done),
             [&api, finish, number, id](HttpApi::Reply done) {
               auto reply = [finish, id, done = std::move(done)](Result<JobChange> r) {
                 // As in the original, deleting an id that is not there succeeds; a
                 // finish says that it finished nothing.
                 if (r.ok() || (!finish && r.code() == Code::kNotFound))
                   return done(HttpReply{200, YouzanBody(0, "ok"), {}});
                 if (r.code() == Code::kNotFound)
                   return done(YouzanFail("no job has id '" + id + "'"));
                 done(YouzanFail(r.status()));
               };
               if (number != 0 && finish)
                 return api.backend_.Finish(SessionId{0}, number, std::move(reply));
               if (number != 0) return api.backend_.Delete(SessionId{0}, number, std::move(reply));
               if (finish) return api.backend_.FinishByName(id, std::move(reply));
               api.backend_.DeleteByName(id, std::move(reply));
             });
}

void HttpApiRoutes::YGet(HttpApi& api, const HttpRequest& req, const Params&, HttpApi::Reply&& done,
                         HttpApi::CallId*) {
  rapidjson::Document d;
  if (!YouzanObject(req, &d, done)) return;
  std::string id(YouzanString(d, "id"));
  if (id.empty()) return done(YouzanFail("id must not be empty"));
  if (!IsValidKey(id)) return done(YouzanFail(CheckKey(id).message()));
  const JobId number = NumberedId(id);
  // A copy of the caller: the completion may come after the connection is
  // gone (on Redis).
  std::optional<Caller> caller;
  if (req.caller != nullptr) caller.emplace(*req.caller);
  auto reply = [&api, caller, done = std::move(done)](Status st, Jobs jobs) {
    if (st.code() == Code::kNotFound || (st.ok() && jobs.empty()))
      return done(HttpReply{200, YouzanBody(0, "ok"), {}});
    if (!st.ok()) return done(YouzanFail(st));
    if (caller) {
      if (Status ok = caller->CheckFound(Scope::kRead, jobs.front().topic, kJobsTopic); !ok.ok())
        return done(StatusReply(ok));
    }
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
                                WriteJsonBody(w, j.body);
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

// The native routes of the HTTP API (/healthz, /stats, /topics/..., /jobs/...,
// /reserve; docs/http-api.md) and the steps they share: replying jobs,
// operations under a lease, puts one by one or in a batch.
#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <unordered_set>
#include <utility>

#include "delayq/engine.h"
#include "delayq/version.h"
#include "server/http_api_internal.h"
#include "server/json_input.h"

namespace delayq::server {

using backend::Backend;
using backend::Jobs;

namespace {

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

}  // namespace

// ---- shared steps ---------------------------------------------------------------

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

namespace {

// "operations": the operations asked for so far, by the operation table's
// names and protocol, those asked for at least once.
void OperationCounts(JsonWriter& w, const ServerCounters& c) {
  w.Key("operations");
  w.StartObject();
  for (const Operation& o : kOperations) {
    if (c.Of(Protocol::kBeanstalk, o.op) + c.Of(Protocol::kHttp, o.op) == 0) continue;
    w.Key(o.name.data(), static_cast<rapidjson::SizeType>(o.name.size()));
    w.StartObject();
    for (Protocol p : {Protocol::kBeanstalk, Protocol::kHttp}) {
      if (c.Of(p, o.op) == 0) continue;
      std::string_view name = ProtocolName(p);
      w.Key(name.data(), static_cast<rapidjson::SizeType>(name.size()));
      w.Uint64(c.Of(p, o.op));
    }
    w.EndObject();
  }
  w.EndObject();
}

}  // namespace

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
    OperationCounts(w, api.ctx_.counters);
    w.EndObject();
    done(HttpReply{200, Done(sb), {}});
  });
}

namespace {

// A topic's figures, as GET /topics/{topic} and GET /topics?stats=true
// show them.
void TopicStatsObject(JsonWriter& w, const delayq::TopicStats& t) {
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
}

}  // namespace

void HttpApiRoutes::ListTopics(HttpApi& api, const HttpRequest& req, const Params&,
                               HttpApi::Reply&& done, HttpApi::CallId*) {
  Result<std::map<std::string, std::string>> query = ParseQuery(req.target, {"stats"});
  if (!query.ok()) return done(StatusReply(query.status()));
  Result<bool> stats = QueryFlag(*query, "stats", false);
  if (!stats.ok()) return done(StatusReply(stats.status()));
  // A copy of the caller: the completion may come after the connection is
  // gone (on Redis).
  std::optional<Caller> caller;
  if (req.caller != nullptr) caller.emplace(*req.caller);
  if (*stats) {
    api.backend_.TopicsStats(
        [caller, done = std::move(done)](Result<std::vector<delayq::TopicStats>> r) {
          if (!r.ok()) return done(StatusReply(r.status()));
          rapidjson::StringBuffer sb;
          JsonWriter w(sb);
          w.StartObject();
          w.Key("topics");
          w.StartArray();
          for (const delayq::TopicStats& t : *r)
            if (!caller || caller->Sees(t.name)) TopicStatsObject(w, t);  // those it may see
          w.EndArray();
          w.EndObject();
          done(HttpReply{200, Done(sb), {}});
        });
    return;
  }
  api.backend_.ListTopics([caller, done = std::move(done)](Result<std::vector<std::string>> r) {
    if (!r.ok()) return done(StatusReply(r.status()));
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    w.StartObject();
    w.Key("topics");
    w.StartArray();
    for (const std::string& t : *r)
      if (!caller || caller->Sees(t)) Str(w, t);  // only those it may see
    w.EndArray();
    w.EndObject();
    done(HttpReply{200, Done(sb), {}});
  });
}

void HttpApiRoutes::TopicStats(HttpApi& api, const HttpRequest& req, const Params& p,
                               HttpApi::Reply&& done, HttpApi::CallId*) {
  if (Status st = CheckTopic(p[0]); !st.ok()) return done(StatusReply(st));
  // ?empty=true: a topic that does not exist (no jobs, no watchers) is
  // answered as empty rather than 404 (for a page that polls a topic which
  // comes and goes).
  Result<std::map<std::string, std::string>> query = ParseQuery(req.target, {"empty"});
  if (!query.ok()) return done(StatusReply(query.status()));
  Result<bool> empty = QueryFlag(*query, "empty", false);
  if (!empty.ok()) return done(StatusReply(empty.status()));
  api.backend_.StatsTopic(
      p[0], [done = std::move(done), topic = p[0], empty = *empty](Result<delayq::TopicStats> r) {
        if (!r.ok() && !(empty && r.code() == Code::kNotFound)) {
          return done(r.code() == Code::kNotFound
                          ? StatusReply(Status::NotFound("no topic '" + topic + "'"))
                          : StatusReply(r.status()));
        }
        delayq::TopicStats none;
        none.name = topic;
        rapidjson::StringBuffer sb;
        JsonWriter w(sb);
        TopicStatsObject(w, r.ok() ? *r : none);
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
  const rapidjson::Document& body = *doc;
  auto jobs = body.FindMember("jobs");
  bool batch = jobs != body.MemberEnd();
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
  if (Status st = CheckEach(req, Scope::kConsume, topics); !st.ok()) return done(StatusReply(st));
  // One reply holds at most kReserveReplyBudget of bodies at the maximum
  // job size: its memory is bounded whatever the jobs hold.
  const int64_t fit = std::max<int64_t>(
      1, static_cast<int64_t>(kReserveReplyBudget / std::max<size_t>(api.ctx_.max_job_size, 1)));
  count = std::min(count, fit);
  Reserve(
      api, req.caller, std::move(topics), timeout_ms, static_cast<uint32_t>(count),
      [done = std::move(done)](Status st, std::vector<OwnedJob> jobs) {
        if (!st.ok() && st.code() != Code::kTimedOut && st.code() != Code::kDeadlineSoon)
          return done(AccessReply(st));  // a reload's refusal among them
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

namespace {

// {"jobs":[...]} of jobs without their bodies (body_bytes instead), and
// "next" when `next` is not 0.
HttpReply JobListReply(Jobs jobs, JobId next) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("jobs");
  w.StartArray();
  for (const JobView& v : jobs) JobObject(w, Own(v, false), false);
  w.EndArray();
  if (next != 0) {
    w.Key("next");
    Str(w, std::to_string(next));
  }
  w.EndObject();
  return HttpReply{200, Done(sb), {}};
}

}  // namespace

void HttpApiRoutes::ListJobs(HttpApi& api, const HttpRequest& req, const Params& p,
                             HttpApi::Reply&& done, HttpApi::CallId*) {
  if (Status st = CheckTopic(p[0]); !st.ok()) return done(StatusReply(st));
  auto q = ParseQuery(req.target, {"state", "limit", "order", "after"});
  if (!q.ok()) return done(StatusReply(q.status()));
  ListJobsRequest r;
  r.topic = p[0];
  r.limit = kDefaultPageJobs;
  auto state = q->find("state");
  const std::string kStates = "ready, delayed, reserved or buried";
  if (state == q->end())
    return done(StatusReply(Status::InvalidArgument("'state' is required: " + kStates)));
  if (state->second == "ready") {
    r.state = JobState::kReady;
  } else if (state->second == "delayed") {
    r.state = JobState::kDelayed;
  } else if (state->second == "reserved") {
    r.state = JobState::kReserved;
  } else if (state->second == "buried") {
    r.state = JobState::kBuried;
  } else {
    return done(StatusReply(Status::InvalidArgument("'state' must be " + kStates + ", not '" +
                                                    Printable(state->second) + "'")));
  }
  if (auto limit = q->find("limit"); limit != q->end()) {
    uint32_t n = 0;
    const std::string& text = limit->second;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > kMaxPageJobs)
      return done(StatusReply(Status::InvalidArgument("'limit' must be an integer 1.." +
                                                      std::to_string(kMaxPageJobs))));
    r.limit = n;
  }
  if (auto order = q->find("order"); order != q->end()) {
    if (order->second != "asc" && order->second != "desc")
      return done(StatusReply(
          Status::InvalidArgument("'order' must be asc (oldest first) or desc (newest first)")));
    r.desc = order->second == "desc";
  }
  if (auto after = q->find("after"); after != q->end()) {
    auto id = ParseId(after->second);
    if (!id.ok())
      return done(StatusReply(Status::InvalidArgument(
          "'after' must be the 'next' of an earlier reply (a job id), not '" +
          Printable(after->second) + "'")));
    r.after = *id;
  }
  api.backend_.ListJobs(r, [done = std::move(done)](Status st, Jobs jobs, bool more) {
    if (!st.ok()) return done(StatusReply(st));
    done(JobListReply(jobs, more && !jobs.empty() ? jobs.back().id : 0));
  });
}

void HttpApiRoutes::FindJobs(HttpApi& api, const HttpRequest& req, const Params&,
                             HttpApi::Reply&& done, HttpApi::CallId*) {
  auto q = ParseQuery(req.target, {"key"});
  if (!q.ok()) return done(StatusReply(q.status()));
  auto key = q->find("key");
  if (key == q->end())
    return done(StatusReply(Status::InvalidArgument(
        "'key' is required: GET /jobs?key=K finds the jobs with key K in every topic")));
  if (Status st = CheckKey(key->second); !st.ok()) return done(StatusReply(st));
  // A copy of the caller: the completion may come after the connection is
  // gone (on Redis).
  std::optional<Caller> caller;
  if (req.caller != nullptr) caller.emplace(*req.caller);
  api.backend_.FindKey(key->second, [caller, done = std::move(done)](Status st, Jobs jobs) {
    if (!st.ok()) return done(StatusReply(st));
    std::vector<JobView> seen;  // only those in topics it may see
    for (const JobView& v : jobs)
      if (!caller || caller->Sees(v.topic)) seen.push_back(v);
    done(JobListReply(seen, 0));
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

}  // namespace delayq::server

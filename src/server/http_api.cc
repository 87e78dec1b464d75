// HttpApi itself: the routes (made from the operation table's `http`
// column, delayq/operations.h, each with the handler it maps to), the
// dispatch of a request to its route (path segments, percent-decoding, 404
// and 405), the reserve sessions and waiting reserves the API holds, and
// the reserve that both faces share. The handlers are in http_native.cc and
// http_youzan.cc; JSON in and out in http_input.h and http_json.h.
#include "server/http_api.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "delayq/text.h"
#include "delivery/push_target.h"
#include "server/http_api_internal.h"

namespace delayq::server {

using backend::Jobs;

namespace {

// A path parameter: "{topic}".
bool IsParam(std::string_view seg) { return !seg.empty() && seg.front() == '{'; }

// The segments of a path after its leading '/', raw ("a/b" -> a, b; a
// topic name holding '/' comes as %2F and stays one segment).
std::vector<std::string_view> PathSegments(std::string_view path) {
  std::vector<std::string_view> segs;
  for (std::string_view rest = path.substr(1);;) {
    size_t slash = rest.find('/');
    segs.push_back(rest.substr(0, slash));
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  return segs;
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
  // Who asked, as admitted (none: trusted, in this process); a reload
  // checks it again.
  std::optional<Caller> caller;
};

// The HTTP front-end's mapping: a handler for each route of the operation
// table's `http` column (delayq/operations.h), spelled as there.
const std::vector<HttpApiRoutes::Mapping>& HttpApiRoutes::Handlers() {
  using R = HttpApiRoutes;
  static const std::vector<Mapping> handlers = {
      {"GET /healthz", &R::Healthz},
      {"GET /stats", &R::ServerStats},
      {"GET /metrics", &R::Metrics},
      {"GET /ui", &R::Ui},
      {"GET /ui/{file}", &R::Ui},
      {"GET /whoami", &R::Whoami},
      {"GET /topics", &R::ListTopics},
      {"GET /topics/{topic}", &R::TopicStats},
      {"POST /topics/{topic}/jobs", &R::Put},
      {"POST /topics/{topic}/reserve", &R::ReserveRoute},
      {"POST /topics/{topic}/kick", &R::KickTopic},
      {"POST /topics/{topic}/pause", &R::Pause},
      {"POST /topics/{topic}/clear", &R::Clear},
      {"GET /topics/{topic}/keys/{key}", &R::GetByKey},
      {"GET /topics/{topic}/jobs", &R::ListJobs},
      {"GET /jobs", &R::FindJobs},
      {"DELETE /topics/{topic}/keys/{key}", &R::DeleteByKey},
      {"POST /reserve", &R::ReserveRoute},
      {"GET /jobs/{id}", &R::GetJob},
      {"DELETE /jobs/{id}", &R::DeleteJob},
      {"POST /jobs/{id}/finish", &R::Finish},
      {"POST /jobs/{id}/release", &R::Release},
      {"POST /jobs/{id}/bury", &R::Bury},
      {"POST /jobs/{id}/touch", &R::Touch},
      {"POST /jobs/{id}/kick", &R::KickJob},
      {"PUT /topics/{topic}/push", &R::SetPush},
      {"GET /topics/{topic}/push", &R::GetPush},
      {"DELETE /topics/{topic}/push", &R::DeletePush},
      {"POST /push", &R::YPush},
      {"POST /pop", &R::YPop},
      {"POST /finish", &R::YFinish},
      {"POST /delete", &R::YDelete},
      {"POST /get", &R::YGet},
      {"PUT /schedules/{name}", &R::PutSchedule},
      {"POST /schedules/{name}/pause", &R::PauseSchedule},
      {"POST /schedules/{name}/resume", &R::PauseSchedule},
      {"GET /schedules", &R::ListSchedules},
      {"GET /schedules/{name}", &R::GetSchedule},
      {"DELETE /schedules/{name}", &R::DeleteSchedule},
  };
  return handlers;
}

// The routes, in the operation table's order: each row's `http` routes
// with the handler Handlers() maps them to. A route without one is left
// out (Operations.TheHttpRoutesAreTheTablesRoutes fails on it).
const std::vector<HttpApiRoutes::Route>& HttpApiRoutes::Table() {
  static const std::vector<Route> table = [] {
    std::vector<Route> routes;
    for (const Operation& o : kOperations) {
      for (std::string_view spec : HttpRoutesOf(o)) {
        auto h = std::find_if(Handlers().begin(), Handlers().end(),
                              [&](const Mapping& m) { return m.route == spec; });
        if (h == Handlers().end()) continue;
        const size_t space = spec.find(' ');
        routes.push_back(
            Route{o.op, spec.substr(0, space), PathSegments(spec.substr(space + 1)), h->handler});
      }
    }
    return routes;
  }();
  return table;
}

HttpApi::HttpApi(ServerContext& ctx, HttpApiOptions options)
    : ctx_(ctx), backend_(ctx.backend), options_(options), local_(ctx.access, std::nullopt) {
  ctx_.access_listeners.insert(this);
}

HttpApi::~HttpApi() {
  ctx_.access_listeners.erase(this);
  *alive_ = false;
  for (auto& [id, w] : waits_) {
    Uncount(*w);
    backend_.CloseSession(w->session);
  }
  for (Pooled& p : pool_) backend_.CloseSession(p.session);
}

Result<SessionId> HttpApi::ReserveSession(const std::vector<std::string>& topics) {
  for (const std::string& t : topics) {
    if (Status st = CheckTopic(t); !st.ok()) return st;
    // A push topic's jobs go to its target alone (docs/push.md, "Workers").
    if (ctx_.push_targets != nullptr && ctx_.push_targets->IsPushTopic(t))
      return Status::Conflict("topic '" + t +
                              "' is a push topic: delayqd sends its jobs to its target, and "
                              "workers do not reserve them");
  }
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
  Drop(*w);
}

void HttpApi::Drop(Wait& w) {
  w.finished = true;
  Uncount(w);
  backend_.CloseSession(w.session);
}

void HttpApi::AccessChanged() {
  std::vector<std::shared_ptr<Wait>> refused;
  std::vector<Status> why;
  for (auto& [id, w] : waits_) {
    // Served before the reload: its answer, on its way, is not taken back.
    if (w->finished || !w->caller || backend_.ReserveServed(w->session)) continue;
    Status st = w->caller->Readmit();
    for (size_t i = 0; st.ok() && i < w->topics.size(); ++i)
      st = w->caller->Check(Scope::kConsume, w->topics[i]);
    if (st.ok()) continue;
    refused.push_back(w);
    why.push_back(std::move(st));
  }
  // Answered after the walk: an answer may end its connection, and with it
  // other calls (Cancel).
  for (size_t i = 0; i < refused.size(); ++i) {
    Wait& w = *refused[i];
    if (w.finished) continue;
    waits_.erase(w.id);
    Drop(w);
    w.finish(why[i], {});
  }
}

void HttpApi::WakeWaiters() {
  auto all = std::move(waits_);
  waits_.clear();
  for (auto& [id, w] : all) {
    if (w->finished) continue;
    Drop(*w);
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
  const std::vector<std::string_view> segs = PathSegments(target);
  std::string allow;
  for (const HttpApiRoutes::Route& r : HttpApiRoutes::Table()) {
    if (r.path.size() != segs.size()) continue;
    bool match = true;
    for (size_t i = 0; i < segs.size() && match; ++i)
      match = IsParam(r.path[i]) ? !segs[i].empty() : r.path[i] == segs[i];
    if (!match) continue;
    if (r.method != method) {
      if (allow.find(r.method) == std::string::npos) {
        if (!allow.empty()) allow += ", ";
        allow += r.method;
      }
      continue;
    }
    HttpApiRoutes::Params params;
    std::optional<size_t> topic_param, id_param;
    for (size_t i = 0; i < segs.size(); ++i) {
      if (!IsParam(r.path[i])) continue;
      std::string decoded;
      if (!PercentDecode(segs[i], &decoded)) {
        done(ErrorReply(400, "bad_request", "bad percent-encoding in the path"));
        return 0;
      }
      if (r.path[i] == "{topic}") topic_param = params.size();
      if (r.path[i] == "{id}") id_param = params.size();
      params.push_back(std::move(decoded));
    }
    ctx_.counters.Count(Protocol::kHttp, r.op);
    HttpRequest req = request;
    req.caller = request.caller != nullptr ? request.caller : &local_;
    if (std::optional<HttpReply> refusal = HttpApiRoutes::Admit(*this, req, r.op)) {
      done(std::move(*refusal));
      return 0;
    }
    // The right the row names, on the topic the path names, or on the
    // topic of the job it names (looked up first unless the caller has the
    // right on every topic). Routes that name topics or jobs in their body
    // check them in their handlers.
    const Scope scope = OperationOf(r.op).scope;
    Status allowed;
    if (topic_param) allowed = req.caller->Check(scope, params[*topic_param]);
    if ((r.op == Op::kStats || r.op == Op::kMetrics) && !req.caller->Everywhere(Scope::kAdmin))
      allowed = Status::PermissionDenied("server-wide stats need the admin right on every topic");
    if (!allowed.ok()) {
      done(StatusReply(allowed));
      return 0;
    }
    // (A bad id is the handler's to answer: 400.)
    if (auto id = id_param ? ParseId(params[*id_param]) : Result<JobId>(Status::NotFound());
        id.ok() && !req.caller->Everywhere(scope)) {
      HttpApiRoutes::IfMayOnJob(*this, req, scope, *id, {}, std::move(done),
                                [this, req, params, handler = r.handler](HttpApi::Reply d) {
                                  CallId ignored = 0;  // no reserve is named by id: nothing waits
                                  handler(*this, req, params, std::move(d), &ignored);
                                });
      return 0;
    }
    CallId call = 0;
    r.handler(*this, req, params, std::move(done), &call);
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

// ---- access -----------------------------------------------------------------------

std::optional<HttpReply> HttpApiRoutes::Admit(HttpApi& api, const HttpRequest& req, Op op) {
  Caller& caller = *req.caller;
  caller.Reset();
  if (!req.authorization.empty()) {
    // RFC 6750: "Bearer" (any case), one space or more, the token.
    std::string_view v = req.authorization;
    constexpr std::string_view kScheme = "bearer";
    bool bearer = v.size() > kScheme.size() && (v[kScheme.size()] == ' ');
    for (size_t i = 0; bearer && i < kScheme.size(); ++i)
      bearer = (v[i] | 0x20) == kScheme[i];  // ASCII letters in any case
    std::string_view secret = bearer ? v.substr(kScheme.size()) : std::string_view();
    while (!secret.empty() && secret.front() == ' ') secret.remove_prefix(1);
    while (!secret.empty() && secret.back() == ' ') secret.remove_suffix(1);
    if (!bearer || secret.empty()) {
      HttpReply r =
          ErrorReply(401, "unauthenticated", "the Authorization header is not 'Bearer <token>'");
      r.headers = "WWW-Authenticate: Bearer realm=\"delayq\", error=\"invalid_request\"\r\n";
      return r;
    }
    if (Status st = caller.Authenticate(secret); !st.ok()) {
      // As the beanstalkd protocol's `auth` (rate-limited, no secret).
      api.ctx_.warn.Warn("auth_failed", "protocol=http peer=" + caller.PeerText() + " reason=\"" +
                                            st.message() + "\"");
      HttpReply r = ErrorReply(401, "unauthenticated", "the bearer token is not valid");
      r.headers = "WWW-Authenticate: Bearer realm=\"delayq\", error=\"invalid_token\"\r\n";
      return r;
    }
  }
  int64_t retry_ms = 0;
  Status st = caller.Admit(op, &retry_ms);
  if (st.ok()) return std::nullopt;
  return AccessReply(st, retry_ms);
}

HttpReply HttpApiRoutes::AccessReply(const Status& st, int64_t retry_ms) {
  HttpReply r = StatusReply(st);
  if (st.code() == Code::kUnauthenticated)
    r.headers = "WWW-Authenticate: Bearer realm=\"delayq\"\r\n";
  if (st.code() == Code::kRateLimited)
    r.headers = "Retry-After: " + std::to_string((retry_ms + 999) / 1000) + "\r\n";
  return r;
}

void HttpApiRoutes::IfMayOnJob(HttpApi& api, const HttpRequest& req, Scope scope, JobId id,
                               std::string name, HttpApi::Reply done,
                               std::function<void(HttpApi::Reply)> then) {
  if (req.caller == nullptr || req.caller->Everywhere(scope)) return then(std::move(done));
  // A job the backend knows the topic of at once (in memory): no look-up.
  if (id != 0) {
    if (std::optional<std::string_view> topic = api.backend_.KnownTopicOf(id)) {
      if (Status ok = req.caller->CheckFound(scope, *topic, kJobsTopic); !ok.ok())
        return done(StatusReply(ok));
      return then(std::move(done));
    }
  }
  using K = backend::Backend::PeekKind;
  // A copy of the caller: the completion may come after the connection
  // that asked is gone (on Redis).
  api.backend_.Peek(SessionId{0}, id != 0 ? K::kId : K::kName, id, {}, name,
                    [caller = *req.caller, scope, done = std::move(done), then = std::move(then)](
                        Status st, Jobs jobs) mutable {
                      // No such job: the operation answers that itself. A
                      // look-up that failed (Redis away, a store read error)
                      // leaves the job's topic unknown: refused, not run.
                      if (st.code() == Code::kNotFound || (st.ok() && jobs.empty()))
                        return then(std::move(done));
                      if (!st.ok()) return done(StatusReply(st));
                      if (Status ok = caller.CheckFound(scope, jobs.front().topic, kJobsTopic);
                          !ok.ok())
                        return done(StatusReply(ok));
                      then(std::move(done));
                    });
}

Status HttpApiRoutes::CheckEach(const HttpRequest& req, Scope scope,
                                const std::vector<std::string>& topics) {
  if (req.caller == nullptr) return Status::Ok();
  for (const std::string& t : topics)
    if (Status st = req.caller->Check(scope, t); !st.ok()) return st;
  return Status::Ok();
}

// ---- the reserve both faces share -----------------------------------------------

void HttpApiRoutes::Reserve(HttpApi& api, const Caller* caller, std::vector<std::string> topics,
                            TimeMs timeout_ms, uint32_t count,
                            std::function<void(Status, std::vector<OwnedJob>)> finish,
                            HttpApi::CallId* call) {
  auto s = api.ReserveSession(topics);
  if (!s.ok()) return finish(s.status(), {});
  auto w = std::make_shared<HttpApi::Wait>();
  w->id = api.next_call_++;
  w->session = *s;
  w->topics = std::move(topics);
  w->finish = std::move(finish);
  if (caller != nullptr) w->caller.emplace(*caller);
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

}  // namespace delayq::server

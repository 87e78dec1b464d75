// What the HTTP API's sources share besides JSON in and out: HttpApiRoutes,
// HttpApi's friend that holds the route table and every route's handler.
// http_api.cc defines the table, the dispatch and the reserve both faces
// use; http_native.cc the native routes and their shared steps;
// http_youzan.cc the Youzan-style routes; http_metrics.cc GET /metrics;
// http_ui.cc the dashboard's files and GET /whoami; http_schedules.cc the
// schedules' routes.
//
// Private to those files. Thread: the loop thread, as HttpApi.
#ifndef DELAYQ_SERVER_HTTP_API_INTERNAL_H_
#define DELAYQ_SERVER_HTTP_API_INTERNAL_H_

#include <rapidjson/document.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "delayq/operations.h"
#include "server/http_api.h"
#include "server/http_input.h"
#include "server/http_json.h"

namespace delayq::server {

// What a refusal names instead of the topic of a job or schedule found by
// its id or name (Caller::CheckFound).
inline constexpr std::string_view kJobsTopic = "this job's topic";
inline constexpr std::string_view kSchedulesTopic = "this schedule's topic";

// The route handlers, with access to the API's state.
struct HttpApiRoutes {
  using Params = std::vector<std::string>;
  using Handler = void (*)(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                           HttpApi::CallId*);
  struct Route {
    Op op;  // its row of the operation table
    std::string_view method;
    std::vector<std::string_view> path;  // "{x}" segments capture
    Handler handler;
  };
  // Every route the API serves, made from the operation table.
  static const std::vector<Route>& Table();
  // The front-end's mapping: the handler of each route ("POST /push").
  struct Mapping {
    std::string_view route;
    Handler handler;
  };
  static const std::vector<Mapping>& Handlers();

  // ---- access (docs/security.md) ----
  // Authenticates the request's caller from its Authorization header and
  // admits it for `op`: nullopt, or the refusal (401 with WWW-Authenticate,
  // 429 with Retry-After). REQUIRES: req.caller.
  static std::optional<HttpReply> Admit(HttpApi& api, const HttpRequest& req, Op op);
  // Calls `then` with `done` if the caller has `scope` on the topic of the
  // job `id` (or, id 0, of the job named `name`), or if there is no such
  // job; else answers 403.
  static void IfMayOnJob(HttpApi& api, const HttpRequest& req, Scope scope, JobId id,
                         std::string name, HttpApi::Reply done,
                         std::function<void(HttpApi::Reply)> then);

  // The caller's right `scope` on each of `topics`: the first refusal.
  static Status CheckEach(const HttpRequest& req, Scope scope,
                          const std::vector<std::string>& topics);

  // ---- shared steps ----
  // A refusal by access (401 with WWW-Authenticate, 403, 429), or any
  // other error, as StatusReply words it.
  static HttpReply AccessReply(const Status& st, int64_t retry_ms = 0);
  // A reserve of `caller` (null: trusted, in this process) that may wait:
  // a reload that takes its `consume` right on one of `topics` ends it,
  // answered with the refusal (HttpApi::AccessChanged).
  static void Reserve(HttpApi& api, const Caller* caller, std::vector<std::string> topics,
                      TimeMs timeout_ms, uint32_t count,
                      std::function<void(Status, std::vector<OwnedJob>)> finish,
                      HttpApi::CallId* call);
  static void ReplyJobs(std::vector<OwnedJob> jobs, HttpApi::Reply done);
  static void ReplyJob(Status st, backend::Jobs jobs, HttpApi::Reply done);
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
  // GET /metrics (http_metrics.cc).
  static void Metrics(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                      HttpApi::CallId*);
  // The exposition of GET /metrics from the backend's stats and topics
  // (null: the backend could not give them; their metrics are left out).
  static HttpReply MetricsReply(HttpApi& api, const EngineStats* e,
                                const std::vector<delayq::TopicStats>* topics);
  // GET /ui, GET /ui/{file}, GET /whoami (http_ui.cc).
  static void Ui(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&, HttpApi::CallId*);
  // PUT, GET and DELETE /topics/{topic}/push (http_push.cc).
  static void SetPush(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                      HttpApi::CallId*);
  static void GetPush(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                      HttpApi::CallId*);
  static void DeletePush(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                         HttpApi::CallId*);
  static void Whoami(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
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
  // GET /topics/{topic}/jobs and GET /jobs?key=K (docs/http-api.md,
  // "Browsing jobs").
  static void ListJobs(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                       HttpApi::CallId*);
  static void FindJobs(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
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
  // ---- schedules (http_schedules.cc; docs/schedules.md) ----
  static void PutSchedule(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                          HttpApi::CallId*);
  // POST /schedules/{name}/pause and /resume.
  static void PauseSchedule(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                            HttpApi::CallId*);
  static void ListSchedules(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                            HttpApi::CallId*);
  static void GetSchedule(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
                          HttpApi::CallId*);
  static void DeleteSchedule(HttpApi&, const HttpRequest&, const Params&, HttpApi::Reply&&,
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

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_HTTP_API_INTERNAL_H_

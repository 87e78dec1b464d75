// The HTTP/JSON API's logic, free of sockets and of Beast: a request
// (method, target, body) in, a status and a JSON body out, through the
// backend. docs/http-api.md describes every route; this file is its one
// implementation, and the routing table in http_api.cc is its one list
// (the handlers: http_native.cc and http_youzan.cc).
//
// Two faces share it: delayq's own REST-style routes (/topics/..., /jobs/...,
// /reserve, /stats, /healthz) and the Youzan-style routes of the widely used
// Go delay queue (/push /pop /finish /delete /get, replies {code,message,data}).
//
// Sessions: requests that touch no reserved job run as session 0. An
// operation on a reserved job (finish, release, bury, touch, delete) opens a
// session for its length, so that a job a beanstalkd connection holds is
// refused while detached reservations are not. A reserve opens a session,
// watches the asked topics, reserves with `detach` (the jobs then belong to
// no session: any request may finish them; they come back after their TTR),
// and closes the session when it completes, or on Cancel(). Between
// requests the API holds no session, so it shows in no topic's counts.
//
// Thread: the loop thread that owns the backend.
#ifndef DELAYQ_SERVER_HTTP_API_H_
#define DELAYQ_SERVER_HTTP_API_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "server/server_context.h"

namespace delayq::server {

struct HttpRequest {
  std::string_view method;  // "GET", "POST", "DELETE", ... (HEAD is served as GET)
  std::string_view target;  // origin form: "/topics/a/jobs?x=1"
  std::string_view body;
  // The Authorization header's value ("Bearer dq_..."), empty if none.
  std::string_view authorization = {};
  // Who asks: the connection's caller (its peer address decides whether it
  // is trusted). nullptr: a caller in this process (tests), trusted.
  Caller* caller = nullptr;
};

inline constexpr std::string_view kJsonContentType = "application/json";

struct HttpReply {
  int status = 200;
  // JSON, without a trailing newline (the server adds one); a body of
  // another content type goes out exactly as it is.
  std::string body;
  std::string allow;  // 405: the methods the route takes ("GET, POST")
  // More header lines, each ending in CRLF (WWW-Authenticate, Retry-After).
  std::string headers = {};
  // Its Content-Type (a string that outlives the reply: a literal).
  std::string_view content_type = kJsonContentType;
};

struct HttpApiOptions {
  // Most jobs in one batch put, and most jobs one reserve may take.
  size_t max_batch = 1000;
  // How long a Youzan-style /pop waits for a job when it names no timeout.
  TimeMs pop_wait_ms = 10'000;
  // Idle reserve sessions kept for reuse. 0 (the default): none, since an
  // idle session still counts as watching its topics in their stats and
  // keeps them listed.
  size_t session_pool = 0;
  // The dashboard (GET /ui) offers no action that changes the queue
  // (--ui-read-only); the API itself is not restricted by it.
  bool ui_read_only = false;
};

// The reason phrase of an HTTP status ("Not Found").
std::string_view HttpReasonPhrase(int status);

// The JSON error body {"error":{"code":...,"message":...}}.
std::string HttpErrorBody(std::string_view code, std::string_view message);

class HttpApi final : public AccessListener {
 public:
  using Reply = std::function<void(HttpReply)>;
  using CallId = uint64_t;

  HttpApi(ServerContext& ctx, HttpApiOptions options = {});
  // Closes every session the API opened; pending completions are dropped.
  ~HttpApi();
  HttpApi(const HttpApi&) = delete;
  HttpApi& operator=(const HttpApi&) = delete;

  // Runs one request. `done` is called exactly once, before Handle returns
  // or later from a backend completion, unless Cancel(id) comes first.
  // Returns the call's id while it is pending (a reserve that waits), else 0.
  CallId Handle(const HttpRequest& request, Reply done);
  // The client went away: a waiting reserve is dropped (its completion is
  // never called; jobs it got meanwhile come back after their TTR).
  void Cancel(CallId id);
  // Answers every waiting reserve now as if its timeout had passed (the
  // server is stopping).
  void WakeWaiters();
  // After a reload (SIGHUP): a waiting reserve whose caller may no longer
  // consume one of its topics is answered with the refusal (401, 403).
  void AccessChanged() override;
  size_t waiting() const { return waits_.size(); }

 private:
  struct Wait;
  friend struct HttpApiRoutes;

  // A session watching exactly `topics`, from the pool or new.
  Result<SessionId> ReserveSession(const std::vector<std::string>& topics);
  void ReleaseSession(SessionId s, std::vector<std::string> topics);
  // A reserve stopped waiting: no longer in ServerContext::waiting.
  void Uncount(Wait& w);
  // A waiting reserve ends unanswered by the backend (its client went, the
  // server stops, a reload refused it): its session closes, and a job it
  // got meanwhile comes back after its TTR.
  void Drop(Wait& w);

  ServerContext& ctx_;
  backend::Backend& backend_;
  HttpApiOptions options_;
  Caller local_;  // for requests without a caller
  CallId next_call_ = 1;
  struct Pooled {
    SessionId session;
    std::vector<std::string> watched;
  };
  std::vector<Pooled> pool_;
  // Reserves that wait, by call id.
  std::unordered_map<CallId, std::shared_ptr<Wait>> waits_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_HTTP_API_H_

// PUT, GET and DELETE /topics/{topic}/push: a topic's push target
// (docs/push.md, docs/http-api.md "Push topics"). The target is read and
// checked by delivery/push_target.h; GET never shows the secret, only
// whether it is set; PUT shows it once, when delayqd made it.
#include <rapidjson/document.h>

#include <memory>
#include <string>

#include "delivery/push_target.h"
#include "server/http_api_internal.h"
#include "server/json_input.h"
#include "server/server_context.h"

namespace delayq::server {

namespace {

HttpReply PushOff() {
  return ErrorReply(404, "not_found", "push topics are not served by this delayqd");
}

}  // namespace

void HttpApiRoutes::SetPush(HttpApi& api, const HttpRequest& req, const Params& p,
                            HttpApi::Reply&& done, HttpApi::CallId*) {
  if (Status st = CheckTopic(p[0]); !st.ok()) return done(StatusReply(st));
  delivery::PushTargets* targets = api.ctx_.push_targets;
  if (targets == nullptr) return done(PushOff());
  // The body passes the checks of every JSON body first (depth, UTF-8,
  // NUL bytes, a member named twice): the target's own parse below is
  // RapidJSON's recursive one, which JSON nested 300,000 deep took past
  // the end of the stack (SIGSEGV).
  rapidjson::Document doc;
  if (Status st = ParseJsonObject(req.body, &doc, false); !st.ok()) return done(BadInput(st));
  const delivery::PushTarget* was = targets->Find(p[0]);
  // A PUT without a secret keeps the one the target has, else gets a new one.
  auto t = delivery::ParsePushTarget(p[0], req.body, was != nullptr ? was->secret : "");
  if (!t.ok()) return done(StatusReply(t.status()));
  const bool made_secret = was == nullptr && !doc.HasMember("secret");
  const int status = was == nullptr ? 201 : 200;
  auto shown = std::make_shared<delivery::PushTarget>(*t);
  targets->Save(*std::move(t), [done = std::move(done), shown, made_secret, status](Status st) {
    if (!st.ok()) return done(StatusReply(st));
    std::string body = delivery::ShownJson(*shown);
    // The secret delayqd made is shown this once: the receiver needs it.
    if (made_secret) body.insert(body.size() - 1, R"(,"secret":")" + shown->secret + "\"");
    done(HttpReply{status, std::move(body), {}});
  });
}

void HttpApiRoutes::GetPush(HttpApi& api, const HttpRequest& req, const Params& p,
                            HttpApi::Reply&& done, HttpApi::CallId*) {
  if (Status st = CheckTopic(p[0]); !st.ok()) return done(StatusReply(st));
  delivery::PushTargets* targets = api.ctx_.push_targets;
  if (targets == nullptr) return done(PushOff());
  const delivery::PushTarget* t = targets->Find(p[0]);
  if (t == nullptr)
    return done(ErrorReply(404, "not_found", "topic '" + p[0] + "' has no push target"));
  // Header values to who may set them (admin on the topic): they may
  // carry the receiver's credentials.
  const bool admin = req.caller == nullptr || req.caller->May(Scope::kAdmin, p[0]);
  done(HttpReply{200, delivery::ShownJson(*t, admin), {}});
}

void HttpApiRoutes::DeletePush(HttpApi& api, const HttpRequest&, const Params& p,
                               HttpApi::Reply&& done, HttpApi::CallId*) {
  if (Status st = CheckTopic(p[0]); !st.ok()) return done(StatusReply(st));
  delivery::PushTargets* targets = api.ctx_.push_targets;
  if (targets == nullptr) return done(PushOff());
  targets->Drop(p[0], [done = std::move(done), topic = p[0]](Status st) {
    if (!st.ok()) return done(StatusReply(st));
    done(HttpReply{200, R"({"topic":")" + topic + R"(","push":false})", {}});
  });
}

}  // namespace delayq::server

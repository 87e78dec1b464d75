// The dashboard (docs/operations.md, "Dashboard"): GET /ui serves its page,
// GET /ui/{file} its script and style sheet, all built into the binary
// (server/ui_files.h, made from src/ui/ by cmake/embed_ui.cmake). The page
// reads and acts through the API itself, with the caller's token, so it can
// do nothing its user could not do with curl. GET /whoami tells a caller
// who it is to the server and what it may do: the page shows no action its
// token lacks the right for.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "delayq/text.h"
#include "server/access.h"
#include "server/http_api_internal.h"
#include "server/ui_files.h"

namespace delayq::server {

namespace {

// Headers of every dashboard file: never cached without asking again (a new
// delayqd may serve new files), its scripts and styles from this server
// only, never framed (a page that acts with the user's token must not be
// clickjacked).
constexpr std::string_view kUiHeaders =
    "Cache-Control: no-cache\r\n"
    "X-Content-Type-Options: nosniff\r\n"
    "X-Frame-Options: DENY\r\n"
    "Referrer-Policy: no-referrer\r\n"
    "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'\r\n";

const UiFile* FindUiFile(std::string_view name) {
  auto it = std::find_if(std::begin(kUiFiles), std::end(kUiFiles),
                         [&](const UiFile& f) { return f.name == name; });
  return it == std::end(kUiFiles) ? nullptr : &*it;
}

// The page, told whether --ui-read-only is set: its <body> carries it.
std::string UiPage(bool read_only) {
  const UiFile* page = FindUiFile("index.html");
  if (page == nullptr) return {};
  std::string text(page->body);
  constexpr std::string_view kMark = "data-read-only=\"false\"";
  if (size_t at = text.find(kMark); read_only && at != std::string::npos)
    text.replace(at, kMark.size(), "data-read-only=\"true\"");
  return text;
}

}  // namespace

void HttpApiRoutes::Ui(HttpApi& api, const HttpRequest&, const Params& p, HttpApi::Reply&& done,
                       HttpApi::CallId*) {
  const std::string_view name = p.empty() ? "index.html" : std::string_view(p[0]);
  const UiFile* file = FindUiFile(name);
  if (file == nullptr)
    return done(ErrorReply(404, "not_found", "no file /ui/" + std::string(name)));
  HttpReply reply{200, std::string(file->body), {}, std::string(kUiHeaders)};
  if (name == "index.html") reply.body = UiPage(api.options_.ui_read_only);
  reply.content_type = file->content_type;
  done(std::move(reply));
}

void HttpApiRoutes::Whoami(HttpApi&, const HttpRequest& req, const Params&, HttpApi::Reply&& done,
                           HttpApi::CallId*) {
  const Caller& caller = *req.caller;
  Result<std::map<std::string, std::string>> query = ParseQuery(req.target, {"topic"});
  if (!query.ok()) return done(StatusReply(query.status()));
  std::optional<std::string> topic;
  if (auto it = query->find("topic"); it != query->end()) {
    if (Status st = CheckTopic(it->second); !st.ok()) return done(StatusReply(st));
    topic = it->second;
  }
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("trusted");
  w.Bool(caller.trusted());
  w.Key("token");
  if (caller.token() != nullptr)
    Str(w, caller.token()->name);
  else
    w.Null();
  if (topic) {
    w.Key("topic");
    Str(w, *topic);
  }
  // The rights on that topic, or on every topic.
  w.Key("rights");
  w.StartObject();
  for (auto [name, scope] :
       {std::pair{"produce", Scope::kProduce}, std::pair{"consume", Scope::kConsume},
        std::pair{"admin", Scope::kAdmin}}) {
    w.Key(name);
    w.Bool(topic ? caller.May(scope, *topic) : caller.Everywhere(scope));
  }
  w.EndObject();
  w.EndObject();
  done(HttpReply{200, Done(sb), {}});
}

}  // namespace delayq::server

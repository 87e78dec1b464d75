// The JSON replies that both faces of the HTTP API share (the native routes
// and the Youzan-style ones): the HTTP status of a backend error and the
// error replies built on it, a job as JSON (OwnedJob, a job's view with its
// strings owned, and JobObject), a body as text or base64, and what an
// operation left one job as. http_json.cc also defines HttpReasonPhrase and
// HttpErrorBody (declared in http_api.h).
//
// Private to the HTTP API's sources (http_api.cc, http_native.cc,
// http_youzan.cc). Thread: any (pure functions).
#ifndef DELAYQ_SERVER_HTTP_JSON_H_
#define DELAYQ_SERVER_HTTP_JSON_H_

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <string>
#include <string_view>

#include "delayq/engine.h"
#include "delayq/status.h"
#include "server/http_api.h"

namespace delayq::server {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// ---- errors -------------------------------------------------------------------

// Messages may quote what the client sent: keep them printable ASCII.
std::string Printable(std::string_view s);

// A reply with the JSON error body of HttpErrorBody.
HttpReply ErrorReply(int status, std::string_view code, std::string_view message);

// The error reply of a backend error: its code's HTTP status and name, and
// its message (a default one when it has none).
HttpReply StatusReply(const Status& st);
// The error reply of a request body that did not parse or validate: 400
// bad_json for a body that is not JSON (ParseJsonObject's "bad_json:"),
// else StatusReply.
HttpReply BadInput(const Status& st);

// ---- JSON output --------------------------------------------------------------

// Writes `s` as a JSON string.
void Str(JsonWriter& w, std::string_view s);

// A job that was handed out (reserve, peek): owned copies of its view.
// A job's view with its strings owned: `fig` holds the state and figures
// (its own string views are left empty).
struct OwnedJob {
  JobId id = 0;
  std::string topic, key, body, lease;
  std::string answer_text;  // fig.answered
  JobView fig;
  size_t body_bytes = 0;  // the body's size (also when `body` is left out)
};

// Copies the strings of `v`, which last only as long as the call that gave
// it; with_body false leaves the body out (its size is kept).
OwnedJob Own(const JobView& v, bool with_body = true);

// A job as the API shows it (docs/http-api.md, "A job"): the lease only in
// the answer to the reserve that took it; without the body, its size as
// "body_bytes" (the listings: docs/http-api.md, "Browsing jobs").
void JobObject(JsonWriter& w, const OwnedJob& j, bool with_body);

// The JSON written into `sb`.
std::string Done(rapidjson::StringBuffer& sb);

// The reply of a delete or finish: {"id":N,"deleted":true}, or the error.
HttpReply DeletedReply(const Result<JobChange>& r);

// The reply of an operation on one job: what it left the job as ({"id":N,
// "state":"...","priority":P} and the due time (delayed) or TTR deadline
// (reserved)), or the error.
HttpReply ChangeReply(const Result<JobChange>& r);

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_HTTP_JSON_H_

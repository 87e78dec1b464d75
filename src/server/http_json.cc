// The JSON replies both faces of the HTTP API share (see http_json.h): the
// HTTP status of a backend error, error bodies, reason phrases, and jobs and
// the changes made to them as JSON.
#include "server/http_json.h"

#include "delayq/text.h"

namespace delayq::server {

namespace {

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
    case Code::kUnauthenticated:
      return 401;
    case Code::kPermissionDenied:
      return 403;
    case Code::kRateLimited:
      return 429;
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

}  // namespace

std::string Printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  return out;
}

HttpReply ErrorReply(int status, std::string_view code, std::string_view message) {
  return HttpReply{status, HttpErrorBody(code, message), {}};
}

HttpReply BadInput(const Status& st) {
  constexpr std::string_view kBadJson = "bad_json:";
  std::string_view msg = st.message();
  if (msg.substr(0, kBadJson.size()) == kBadJson)
    return ErrorReply(400, "bad_json",
                      "the body is not valid JSON: " + std::string(msg.substr(kBadJson.size())));
  return StatusReply(st);
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
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 429:
      return "Too Many Requests";
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
void Str(JsonWriter& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

OwnedJob Own(const JobView& v, bool with_body) {
  OwnedJob o{v.id,
             std::string(v.topic),
             std::string(v.key),
             with_body ? std::string(v.body) : std::string(),
             std::string(v.lease),
             std::string(v.answer_text),
             v,
             v.body.size()};
  o.fig.topic = o.fig.key = o.fig.body = o.fig.lease = o.fig.answer_text = {};
  return o;
}

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
  if (f.answered) {
    // The last push try's outcome (docs/push.md, "Retries"); its text as
    // the body is shown: as text, or base64 when it is not.
    w.Key("last_answer");
    w.StartObject();
    w.Key("status");
    w.Uint(f.answer_status);
    if (IsText(j.answer_text)) {
      w.Key("text");
      Str(w, j.answer_text);
    } else {
      w.Key("text_base64");
      Str(w, Base64Encode(j.answer_text));
    }
    w.EndObject();
  }
  if (with_body) {
    WriteJsonBody(w, j.body);
  } else {
    w.Key("body_bytes");
    w.Uint64(j.body_bytes);
  }
  w.EndObject();
}

std::string Done(rapidjson::StringBuffer& sb) { return std::string(sb.GetString(), sb.GetSize()); }

HttpReply DeletedReply(const Result<JobChange>& r) {
  if (!r.ok()) return StatusReply(r.status());
  return HttpReply{200, R"({"id":)" + std::to_string(r->id) + R"(,"deleted":true})", {}};
}

HttpReply ChangeReply(const Result<JobChange>& r) {
  if (!r.ok()) return StatusReply(r.status());
  return HttpReply{200, ChangeBody(*r), {}};
}

}  // namespace delayq::server

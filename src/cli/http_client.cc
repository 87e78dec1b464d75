// The HTTP/JSON API transport of the command-line client: each operation is
// one request on a keep-alive connection, and its reply is the API's own
// JSON (docs/http-api.md), passed through.

#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "cli/client.h"
#include "cli/connection.h"
#include "cli/json_writer.h"
#include "cli/util.h"
#include "delayq/version.h"

namespace delayq::cli {
namespace {

namespace http = boost::beast::http;
using std::chrono::milliseconds;

// Largest reply accepted: a reserve of 1000 jobs of the largest size the
// server takes (1 GiB) cannot come in one reply anyway; this bounds memory.
constexpr uint64_t kMaxReplyBytes = uint64_t{1} << 32;

std::string JobPath(JobId id) { return "/jobs/" + std::to_string(id); }
std::string TopicPath(const std::string& topic) { return "/topics/" + PercentEncode(topic); }
std::string SchedulePath(const std::string& name) { return "/schedules/" + PercentEncode(name); }

std::string Text(rapidjson::StringBuffer& sb) { return std::string(sb.GetString(), sb.GetSize()); }

// The body of finish, release, bury and touch: the lease, and what else
// is given.
std::string LeaseBody(const std::string& lease, std::optional<TimeMs> delay_ms,
                      std::optional<uint32_t> priority) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("lease");
  Str(w, lease);
  if (delay_ms) {
    w.Key("delay_ms");
    w.Int64(*delay_ms);
  }
  if (priority) {
    w.Key("priority");
    w.Uint(*priority);
  }
  w.EndObject();
  return Text(sb);
}

// The failure an error reply stands for: {"error":{"code","message"}} when
// the server is delayqd, else the status line.
Failure HttpFailure(unsigned status, std::string_view reason, const rapidjson::Document& d) {
  std::string message = "HTTP " + std::to_string(status) + " " + std::string(reason);
  if (!d.HasParseError() && d.IsObject()) {
    auto e = d.FindMember("error");
    if (e != d.MemberEnd() && e->value.IsObject()) {
      auto code = e->value.FindMember("code");
      auto msg = e->value.FindMember("message");
      if (code != e->value.MemberEnd() && code->value.IsString() && msg != e->value.MemberEnd() &&
          msg->value.IsString())
        message = std::string(msg->value.GetString()) + " (" + code->value.GetString() + ")";
    }
  }
  return Failure{status == 404 ? Exit::kNotFound : Exit::kServer, message};
}

class HttpClient final : public Client {
 public:
  HttpClient(const ServerAddress& address, milliseconds io_timeout) : conn_(address, io_timeout) {}

  Reply Put(const PutArgs& a) override {
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    w.StartObject();
    WriteJsonBody(w, a.body);
    if (a.priority) {
      w.Key("priority");
      w.Uint(*a.priority);
    }
    if (a.delay_ms) {
      w.Key("delay_ms");
      w.Int64(*a.delay_ms);
    }
    if (a.run_at) {
      w.Key("run_at");
      w.Int64(*a.run_at);
    }
    if (a.ttr_ms) {
      w.Key("ttr_ms");
      w.Int64(*a.ttr_ms);
    }
    if (!a.key.empty()) {
      w.Key("key");
      Str(w, a.key);
    }
    if (a.max_tries) {
      w.Key("max_tries");
      w.Uint(*a.max_tries);
    }
    if (!a.backoff.empty()) {
      w.Key("backoff");
      Str(w, a.backoff);
    }
    w.EndObject();
    return Call(http::verb::post, TopicPath(a.topic) + "/jobs", Text(sb));
  }

  Reply Reserve(const std::vector<std::string>& topics, TimeMs timeout_ms,
                uint32_t count) override {
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    w.StartObject();
    w.Key("topics");
    w.StartArray();
    for (const std::string& t : topics) Str(w, t);
    w.EndArray();
    w.Key("timeout_ms");
    w.Int64(timeout_ms);
    w.Key("count");
    w.Uint(count);
    w.EndObject();
    return Call(http::verb::post, "/reserve", Text(sb), milliseconds(timeout_ms));
  }

  Reply Finish(JobId id, const std::string& lease) override {
    return Call(http::verb::post, JobPath(id) + "/finish", LeaseBody(lease, {}, {}));
  }
  Reply Delete(JobId id) override { return Call(http::verb::delete_, JobPath(id), ""); }
  Reply DeleteByKey(const std::string& topic, const std::string& key) override {
    return Call(http::verb::delete_, TopicPath(topic) + "/keys/" + PercentEncode(key), "");
  }

  Reply Release(JobId id, const std::string& lease, std::optional<TimeMs> delay_ms,
                std::optional<uint32_t> priority) override {
    return Call(http::verb::post, JobPath(id) + "/release", LeaseBody(lease, delay_ms, priority));
  }
  Reply Bury(JobId id, const std::string& lease, std::optional<uint32_t> priority) override {
    return Call(http::verb::post, JobPath(id) + "/bury", LeaseBody(lease, {}, priority));
  }
  Reply Touch(JobId id, const std::string& lease) override {
    return Call(http::verb::post, JobPath(id) + "/touch", LeaseBody(lease, {}, {}));
  }
  Reply KickJob(JobId id) override { return Call(http::verb::post, JobPath(id) + "/kick", ""); }
  Reply Kick(const std::string& topic, uint64_t bound) override {
    return Call(http::verb::post, TopicPath(topic) + "/kick",
                R"({"bound":)" + std::to_string(bound) + "}");
  }

  Reply Peek(const PeekArgs& a) override {
    switch (a.what) {
      case PeekWhat::kId:
        return Call(http::verb::get, JobPath(a.id), "");
      case PeekWhat::kKey:
        return Call(http::verb::get, TopicPath(a.topic) + "/keys/" + PercentEncode(a.key), "");
      case PeekWhat::kReady:
      case PeekWhat::kDelayed:
      case PeekWhat::kBuried:
        break;
    }
    return Failure{Exit::kUsage,
                   "peek --ready, --delayed and --buried need the beanstalkd protocol: the HTTP "
                   "API has no such lookup (use --server beanstalk://HOST:PORT)"};
  }

  Reply Stats() override { return Call(http::verb::get, "/stats", ""); }
  Reply TopicStats(const std::string& topic) override {
    return Call(http::verb::get, TopicPath(topic), "");
  }
  Reply Topics() override { return Call(http::verb::get, "/topics", ""); }

  Reply ListJobs(const ListArgs& a) override {
    std::string target = TopicPath(a.topic) + "/jobs?state=" + PercentEncode(a.state) +
                         "&limit=" + std::to_string(a.limit);
    if (a.desc) target += "&order=desc";
    if (!a.after.empty()) target += "&after=" + PercentEncode(a.after);
    return Call(http::verb::get, target, "");
  }
  Reply FindKey(const std::string& key) override {
    return Call(http::verb::get, "/jobs?key=" + PercentEncode(key), "");
  }
  Reply SetPush(const std::string& topic, const std::string& target_json) override {
    return Call(http::verb::put, TopicPath(topic) + "/push", target_json);
  }
  Reply GetPush(const std::string& topic) override {
    return Call(http::verb::get, TopicPath(topic) + "/push", "");
  }
  Reply DeletePush(const std::string& topic) override {
    return Call(http::verb::delete_, TopicPath(topic) + "/push", "");
  }
  Reply SetSchedule(const std::string& name, const std::string& schedule_json) override {
    return Call(http::verb::put, SchedulePath(name), schedule_json);
  }
  Reply GetSchedule(const std::string& name) override {
    return Call(http::verb::get, SchedulePath(name), "");
  }
  Reply ListSchedules() override { return Call(http::verb::get, "/schedules", ""); }
  Reply PauseSchedule(const std::string& name, bool pause) override {
    return Call(http::verb::post, SchedulePath(name) + (pause ? "/pause" : "/resume"), "");
  }
  Reply DeleteSchedule(const std::string& name) override {
    return Call(http::verb::delete_, SchedulePath(name), "");
  }

  Reply Clear(const std::string& topic, const std::vector<std::string>& states) override {
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    w.StartObject();
    if (!states.empty()) {
      w.Key("states");
      w.StartArray();
      for (const std::string& s : states) Str(w, s);
      w.EndArray();
    }
    w.EndObject();
    Reply r = Call(http::verb::post, TopicPath(topic) + "/clear", Text(sb));
    // The server's message names no topic here.
    if (!r.ok() && r.failure().exit == Exit::kNotFound)
      return Failure{Exit::kNotFound, "no topic '" + topic + "' (not_found)"};
    return r;
  }

  Reply Pause(const std::string& topic, TimeMs delay_ms) override {
    return Call(http::verb::post, TopicPath(topic) + "/pause",
                R"({"delay_ms":)" + std::to_string(delay_ms) + "}");
  }

 private:
  // One request and its reply. `extra`: time the server may take on top of
  // the I/O timeout (a reserve's long-poll).
  Reply Call(http::verb verb, const std::string& target, std::string body,
             milliseconds extra = milliseconds(0)) {
    if (auto f = conn_.Connect()) return *f;
    http::request<http::string_body> req{verb, target, 11};
    const ServerAddress& a = conn_.address();
    req.set(http::field::host, a.host.find(':') != std::string::npos
                                   ? "[" + a.host + "]:" + std::to_string(a.port)
                                   : a.host + ":" + std::to_string(a.port));
    req.set(http::field::user_agent, "delayq/" + std::string(kVersion));
    req.set(http::field::accept, "application/json");
    if (!a.token.empty()) req.set(http::field::authorization, "Bearer " + a.token);
    if (verb == http::verb::post) req.set(http::field::content_type, "application/json");
    req.keep_alive(true);
    req.body() = std::move(body);
    req.prepare_payload();
    const auto write_ec =
        conn_.Run([&](auto handler) { http::async_write(conn_.stream(), req, std::move(handler)); },
                  conn_.io_timeout());
    if (write_ec == boost::beast::error::timeout)
      return conn_.IoFailure(write_ec, conn_.io_timeout());
    // A server may answer before it has read the whole request (413 for a
    // body over its limit) and close: its reply says more than the failed
    // write, so it is read all the same.
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxReplyBytes);
    const milliseconds allowed = conn_.io_timeout() + extra;
    auto ec = conn_.Run(
        [&](auto handler) {
          http::async_read(conn_.stream(), conn_.http_buffer(), parser, std::move(handler));
        },
        allowed);
    if (ec) {
      if (write_ec) ec = write_ec;
      if (ec == http::error::end_of_stream) ec = boost::asio::error::eof;
      return conn_.IoFailure(ec, allowed);
    }
    http::response<http::string_body> res = parser.release();
    if (!res.keep_alive()) conn_.Close();
    const unsigned status = res.result_int();
    if (JsonDepth(res.body()) > kMaxReplyDepth)
      return Failure{Exit::kIo, "the reply of " + conn_.address().ToString() +
                                    " nests deeper than " + std::to_string(kMaxReplyDepth) +
                                    " levels: not delayq's JSON (HTTP " + std::to_string(status) +
                                    ")"};
    rapidjson::Document d;
    d.Parse<rapidjson::kParseIterativeFlag>(res.body().data(), res.body().size());
    if (status >= 400)
      return HttpFailure(status, std::string_view(res.reason().data(), res.reason().size()), d);
    if (d.HasParseError() || !d.IsObject())
      return Failure{Exit::kIo, "the reply of " + conn_.address().ToString() +
                                    " is not delayq's JSON (HTTP " + std::to_string(status) + ")"};
    return Reply(std::move(d));
  }

  Connection conn_;
};

}  // namespace

std::unique_ptr<Client> MakeHttpClient(const ServerAddress& address, milliseconds io_timeout) {
  return std::make_unique<HttpClient>(address, io_timeout);
}

}  // namespace delayq::cli

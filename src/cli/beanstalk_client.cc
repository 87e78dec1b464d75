// The beanstalkd-protocol transport of the command-line client: beanstalkd
// 1.12's commands, and delayq's extensions (put-ex, peek-key, delete-key,
// reserve-batch, clear-tube; docs/protocol.md) where a request needs them,
// so that plain requests work against any beanstalkd too.
//
// Replies are turned into the HTTP API's JSON documents. A job's metadata
// comes from `stats-job`, which reports times in whole seconds: those go in
// `*_s` fields. Each command is one write with no read before it; a
// refusal may be looked into after it, to say why.
//
// A reservation belongs to the connection that made it: jobs this client
// reserves come back to their topic when it closes (when delayq exits),
// unless they are finished on the same connection first (reserve
// --finish). So finish, release, bury and touch, which act for a
// reservation's holder, are refused here before anything is sent.

#include <algorithm>
#include <map>

#include "cli/client.h"
#include "cli/connection.h"
#include "cli/json_writer.h"
#include "delayq/types.h"

namespace delayq::cli {
namespace {

using std::chrono::milliseconds;
using YamlMap = std::vector<std::pair<std::string, std::string>>;

// A beanstalkd command line, "\r\n" included, is at most this long.
constexpr size_t kMaxLine = 224;

std::string_view Find(const YamlMap& m, std::string_view key) {
  for (const auto& [k, v] : m)
    if (k == key) return v;
  return {};
}

bool IsNumber(std::string_view v, bool allow_fraction) {
  if (v.empty() || v.size() > 19) return false;
  bool dot = false;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '.' && allow_fraction && !dot && i > 0 && i + 1 < v.size()) {
      dot = true;
    } else if (v[i] < '0' || v[i] > '9') {
      return false;
    }
  }
  return true;
}

// A YAML value as JSON: whole numbers and decimals as numbers, true/false
// as booleans, anything else as a string.
void YamlValue(JsonWriter& w, std::string_view v) {
  if (IsNumber(v, false)) {
    w.Uint64(std::stoull(std::string(v)));
  } else if (IsNumber(v, true)) {
    w.RawValue(v.data(), v.size(), rapidjson::kNumberType);
  } else if (v == "true" || v == "false") {
    w.Bool(v == "true");
  } else {
    Str(w, v);
  }
}

// Writes `key` with the YAML field `field` as a number, if the reply has it.
void Num(JsonWriter& w, const YamlMap& m, const char* key, std::string_view field) {
  std::string_view v = Find(m, field);
  if (!IsNumber(v, false)) return;
  w.Key(key);
  w.Uint64(std::stoull(std::string(v)));
}

// Every field of `m` not named in `done`, under its beanstalkd name with
// '-' turned to '_'. `strings` are written as strings whatever they hold.
void Rest(JsonWriter& w, const YamlMap& m, const std::vector<std::string_view>& done,
          const std::vector<std::string_view>& strings) {
  for (const auto& [k, v] : m) {
    if (std::find(done.begin(), done.end(), k) != done.end()) continue;
    std::string name = k;
    std::replace(name.begin(), name.end(), '-', '_');
    Str(w, name);
    if (std::find(strings.begin(), strings.end(), k) != strings.end()) {
      Str(w, v);
    } else {
      YamlValue(w, v);
    }
  }
}

void JobCounts(JsonWriter& w, const YamlMap& m) {
  w.Key("jobs");
  w.StartObject();
  Num(w, m, "urgent", "current-jobs-urgent");
  Num(w, m, "ready", "current-jobs-ready");
  Num(w, m, "reserved", "current-jobs-reserved");
  Num(w, m, "delayed", "current-jobs-delayed");
  Num(w, m, "buried", "current-jobs-buried");
  w.EndObject();
}

const std::vector<std::string_view> kCountFields = {"current-jobs-urgent", "current-jobs-ready",
                                                    "current-jobs-reserved", "current-jobs-delayed",
                                                    "current-jobs-buried"};

rapidjson::Document Parsed(rapidjson::StringBuffer& sb) {
  rapidjson::Document d;
  d.Parse(sb.GetString(), sb.GetSize());
  return d;
}

// A job from its stats-job reply and body: the HTTP API's fields where the
// protocol has them, whole seconds as `*_s`.
rapidjson::Document JobDoc(const YamlMap& s, std::string_view key, std::string_view body) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  Num(w, s, "id", "id");
  w.Key("topic");
  Str(w, Find(s, "tube"));
  if (!key.empty()) {
    w.Key("key");
    Str(w, key);
  }
  w.Key("state");
  Str(w, Find(s, "state"));
  Num(w, s, "priority", "pri");
  Num(w, s, "time_left_s", "time-left");
  Num(w, s, "age_s", "age");
  Num(w, s, "ttr_s", "ttr");
  Num(w, s, "delay_s", "delay");
  for (const char* counter : {"reserves", "timeouts", "releases", "buries", "kicks"})
    Num(w, s, counter, counter);
  WriteJsonBody(w, body);
  w.EndObject();
  return Parsed(sb);
}

std::string Id(JobId id) { return std::to_string(id); }

// {"id":N,"state":"..."}
rapidjson::Document IdState(JobId id, std::string_view state) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("id");
  w.Uint64(id);
  w.Key("state");
  Str(w, state);
  w.EndObject();
  return Parsed(sb);
}

rapidjson::Document Deleted(JobId id) {
  const std::string text = R"({"id":)" + Id(id) + R"(,"deleted":true})";
  rapidjson::Document d;
  d.Parse(text.data(), text.size());
  return d;
}

rapidjson::Document Count(const char* name, uint64_t n) {
  const std::string text = "{\"" + std::string(name) + "\":" + std::to_string(n) + "}";
  rapidjson::Document d;
  d.Parse(text.data(), text.size());
  return d;
}

// "WORD <n>" -> n.
std::optional<uint64_t> Arg(std::string_view line, std::string_view word) {
  if (!line.starts_with(word) || line.size() <= word.size() || line[word.size()] != ' ')
    return std::nullopt;
  return ParseUint(line.substr(word.size() + 1), 0, UINT64_MAX);
}

class BeanstalkClient final : public Client {
 public:
  BeanstalkClient(const ServerAddress& address, milliseconds io_timeout)
      : conn_(address, io_timeout) {}

  Reply Put(const PutArgs& a) override {
    const uint32_t pri = a.priority.value_or(kDefaultPriority);
    const TimeMs delay = a.delay_ms.value_or(0);
    const TimeMs ttr = a.ttr_ms.value_or(60'000);
    // Plain put when it says everything, so that any beanstalkd takes it
    // (its delay and TTR are 32-bit counts of seconds).
    constexpr TimeMs kMaxSecs = TimeMs{UINT32_MAX} * 1000;
    const bool plain = a.key.empty() && !a.run_at && !a.max_tries && a.backoff.empty() &&
                       delay % 1000 == 0 && ttr % 1000 == 0 && ttr >= 1000 && delay <= kMaxSecs &&
                       ttr <= kMaxSecs;
    std::string line;
    if (plain) {
      line = "put " + std::to_string(pri) + " " + std::to_string(delay / 1000) + " " +
             std::to_string(ttr / 1000) + " " + std::to_string(a.body.size());
    } else {
      line = "put-ex " + std::to_string(pri) + " " + std::to_string(delay) + " " +
             std::to_string(ttr) + " " + std::to_string(a.body.size());
      if (!a.key.empty()) line += " key=" + a.key;
      if (a.run_at) line += " at=" + std::to_string(*a.run_at);
      if (a.max_tries) line += " tries=" + std::to_string(*a.max_tries);
      if (!a.backoff.empty()) line += " backoff=" + a.backoff;
    }
    // An over-long line is refused before its body is read, and the body
    // would then be read as commands: never send one.
    if (line.size() + 2 > kMaxLine)
      return Failure{Exit::kUsage,
                     "this put does not fit a beanstalkd command line (224 bytes): use a shorter "
                     "key or back-off, or the HTTP API"};
    if (auto f = Use(a.topic)) return *f;
    std::string request = line + "\r\n";
    request += a.body;
    request += "\r\n";
    if (auto f = Send(request)) return *f;
    std::string reply;
    if (auto f = conn_.ReadLine(&reply)) return *f;
    bool created = true;
    std::optional<uint64_t> id = Arg(reply, "INSERTED");
    if (!id) {
      id = Arg(reply, "EXISTS");
      created = false;
    }
    if (!id) {
      id = Arg(reply, "BURIED");  // beanstalkd out of memory: stored, but buried
      created = true;
    }
    if (!id) {
      // Whatever the body was taken for, this connection is done.
      Failure f = ReplyFailure(reply, plain ? "put" : "put-ex", "");
      conn_.Close();
      return f;
    }
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    w.StartObject();
    w.Key("id");
    w.Uint64(*id);
    w.Key("created");
    w.Bool(created);
    if (auto s = StatsJob(*id); s.ok()) {
      w.Key("state");
      Str(w, Find(*s, "state"));
    }
    w.EndObject();
    return Parsed(sb);
  }

  Reply Reserve(const std::vector<std::string>& topics, TimeMs timeout_ms,
                uint32_t count) override {
    if (timeout_ms % 1000 != 0)
      return Failure{Exit::kUsage,
                     "the beanstalkd protocol counts a reserve's timeout in whole seconds (not " +
                         std::to_string(timeout_ms) + "ms): use --server http://... for less"};
    if (auto f = WatchOnly(topics)) return *f;
    const std::string secs = std::to_string(timeout_ms / 1000);
    const std::string command = count == 1 ? "reserve-with-timeout " + secs
                                           : "reserve-batch " + std::to_string(count) + " " + secs;
    auto reply = Command(command, milliseconds(timeout_ms));
    if (!reply.ok()) return reply.failure();
    std::vector<std::pair<JobId, std::string>> jobs;
    if (*reply == "TIMED_OUT") {
      // Nothing came: an empty list, as the HTTP API answers.
    } else if (auto n = Arg(*reply, "RESERVED_BATCH")) {
      for (uint64_t i = 0; i < *n; ++i) {
        std::string line;
        if (auto f = conn_.ReadLine(&line)) return *f;
        auto job = ReadJob(line, "RESERVED");
        if (!job.ok()) return job.failure();
        jobs.push_back(std::move(*job));
      }
    } else if (reply->starts_with("RESERVED ")) {
      auto job = ReadJob(*reply, "RESERVED");
      if (!job.ok()) return job.failure();
      jobs.push_back(std::move(*job));
    } else {
      return ReplyFailure(*reply, command.substr(0, command.find(' ')), "");
    }
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    w.StartObject();
    w.Key("jobs");
    w.StartArray();
    for (const auto& [id, body] : jobs) {
      auto s = StatsJob(id);
      if (!s.ok()) return s.failure();
      held_[id] = std::string(Find(*s, "pri"));
      JobDoc(*s, "", body).Accept(w);
    }
    w.EndArray();
    w.EndObject();
    return Parsed(sb);
  }

  // Finish, release, bury and touch act for the reservation's holder,
  // which over the beanstalkd protocol is the connection that reserved the
  // job: this one only for the jobs it reserved itself (reserve --finish),
  // whose priority it saw then. Any other job is refused before anything
  // is sent: reading it first to word a refusal, or to find the priority a
  // release must name, would be a read before the write (docs/cli.md).
  Reply Finish(JobId id, const std::string& /*lease*/) override {
    if (!held_.contains(id)) return NotHolder("finish", id);
    auto reply = Command("delete " + Id(id));
    if (!reply.ok()) return reply.failure();
    if (*reply != "DELETED") return ReplyFailure(*reply, "delete", "no job " + Id(id));
    held_.erase(id);
    return Deleted(id);
  }
  Reply Delete(JobId id) override {
    auto reply = Command("delete " + Id(id));
    if (!reply.ok()) return reply.failure();
    if (*reply != "DELETED")
      return ReplyFailure(*reply, "delete",
                          "no job " + Id(id) + ", or it is reserved by another connection");
    return Deleted(id);
  }

  // One command: delete-key answers no id, so the reply names the key.
  Reply DeleteByKey(const std::string& topic, const std::string& key) override {
    if (auto f = Use(topic)) return *f;
    auto reply = Command("delete-key " + key);
    if (!reply.ok()) return reply.failure();
    if (*reply != "DELETED")
      return ReplyFailure(*reply, "delete-key",
                          "no job with key '" + key + "' in topic '" + topic +
                              "', or it is reserved by another connection");
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    w.StartObject();
    w.Key("topic");
    Str(w, topic);
    w.Key("key");
    Str(w, key);
    w.Key("deleted");
    w.Bool(true);
    w.EndObject();
    return Parsed(sb);
  }

  Reply Release(JobId id, const std::string& /*lease*/, std::optional<TimeMs> delay_ms,
                std::optional<uint32_t> priority) override {
    if (delay_ms && *delay_ms % 1000 != 0)
      return Failure{Exit::kUsage,
                     "the beanstalkd protocol counts a release's delay in whole seconds (not " +
                         std::to_string(*delay_ms) + "ms): use --server http://... for less"};
    auto it = held_.find(id);
    if (it == held_.end()) return NotHolder("release", id);
    const std::string pri = priority ? std::to_string(*priority) : it->second;
    auto reply = Command("release " + Id(id) + " " + pri + " " +
                         std::to_string(delay_ms.value_or(0) / 1000));
    if (!reply.ok()) return reply.failure();
    if (*reply != "RELEASED" && *reply != "BURIED")
      return ReplyFailure(*reply, "release", "no job " + Id(id));
    held_.erase(id);
    if (*reply == "BURIED") return IdState(id, "buried");
    return IdState(id, delay_ms.value_or(0) > 0 ? "delayed" : "ready");
  }
  Reply Bury(JobId id, const std::string& /*lease*/, std::optional<uint32_t> priority) override {
    auto it = held_.find(id);
    if (it == held_.end()) return NotHolder("bury", id);
    const std::string pri = priority ? std::to_string(*priority) : it->second;
    auto reply = Command("bury " + Id(id) + " " + pri);
    if (!reply.ok()) return reply.failure();
    if (*reply != "BURIED") return ReplyFailure(*reply, "bury", "no job " + Id(id));
    held_.erase(id);
    return IdState(id, "buried");
  }
  Reply Touch(JobId id, const std::string& /*lease*/) override {
    if (!held_.contains(id)) return NotHolder("touch", id);
    auto reply = Command("touch " + Id(id));
    if (!reply.ok()) return reply.failure();
    if (*reply != "TOUCHED") return ReplyFailure(*reply, "touch", "no job " + Id(id));
    return IdState(id, "reserved");
  }

  // One command; only a refusal is looked into, after it, to say why.
  Reply KickJob(JobId id) override {
    auto reply = Command("kick-job " + Id(id));
    if (!reply.ok()) return reply.failure();
    if (*reply == "KICKED") return IdState(id, "ready");
    if (*reply == "NOT_FOUND") {
      auto s = StatsJob(id);
      if (!s.ok()) return s.failure();
      return Failure{Exit::kServer, "job " + Id(id) + " is " + std::string(Find(*s, "state")) +
                                        ", not buried or delayed"};
    }
    return ReplyFailure(*reply, "kick-job", "no job " + Id(id));
  }

  Reply Kick(const std::string& topic, uint64_t bound) override {
    if (auto f = Use(topic)) return *f;
    auto reply = Command("kick " + std::to_string(bound));
    if (!reply.ok()) return reply.failure();
    auto n = Arg(*reply, "KICKED");
    if (!n) return ReplyFailure(*reply, "kick", "");
    return Count("kicked", *n);
  }

  Reply Peek(const PeekArgs& a) override {
    auto found = PeekJob(a);
    if (!found.ok()) return found.failure();
    auto s = StatsJob(found->first);
    if (!s.ok()) return s.failure();
    return JobDoc(*s, a.what == PeekWhat::kKey ? a.key : "", found->second);
  }

  Reply Stats() override {
    auto y = Yaml("stats", "");
    if (!y.ok()) return y.failure();
    const YamlMap& m = *y;
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    w.StartObject();
    for (const char* name : {"version", "id"}) {
      if (Find(m, name).empty()) continue;
      w.Key(name);
      Str(w, Find(m, name));
    }
    Num(w, m, "uptime_s", "uptime");
    if (std::string_view d = Find(m, "draining"); !d.empty()) {
      w.Key("draining");
      w.Bool(d == "true");
    }
    JobCounts(w, m);
    Num(w, m, "total_jobs", "total-jobs");
    Num(w, m, "job_timeouts", "job-timeouts");
    Num(w, m, "topics", "current-tubes");
    Num(w, m, "waiting", "current-waiting");
    Num(w, m, "beanstalk_connections", "current-connections");
    Num(w, m, "max_job_size", "max-job-size");
    std::vector<std::string_view> done = {"version",
                                          "id",
                                          "uptime",
                                          "draining",
                                          "total-jobs",
                                          "job-timeouts",
                                          "current-tubes",
                                          "current-waiting",
                                          "current-connections",
                                          "max-job-size"};
    done.insert(done.end(), kCountFields.begin(), kCountFields.end());
    Rest(w, m, done, {"hostname", "os", "platform"});
    w.EndObject();
    return Parsed(sb);
  }

  Reply TopicStats(const std::string& topic) override {
    auto y = Yaml("stats-tube " + topic, "no topic '" + topic + "'");
    if (!y.ok()) return y.failure();
    const YamlMap& m = *y;
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    w.StartObject();
    w.Key("name");
    Str(w, Find(m, "name"));
    JobCounts(w, m);
    Num(w, m, "total_jobs", "total-jobs");
    Num(w, m, "watching", "current-watching");
    Num(w, m, "waiting", "current-waiting");
    w.Key("paused");
    w.Bool(Find(m, "pause-time-left") != "0" && !Find(m, "pause-time-left").empty());
    Num(w, m, "pause_s", "pause");
    Num(w, m, "pause_time_left_s", "pause-time-left");
    Num(w, m, "cmd_delete", "cmd-delete");
    Num(w, m, "cmd_pause", "cmd-pause-tube");
    std::vector<std::string_view> done = {
        "name",  "total-jobs",      "current-watching", "current-waiting",
        "pause", "pause-time-left", "cmd-delete",       "cmd-pause-tube"};
    done.insert(done.end(), kCountFields.begin(), kCountFields.end());
    Rest(w, m, done, {"name"});
    w.EndObject();
    return Parsed(sb);
  }

  Reply ListJobs(const ListArgs&) override { return HttpOnly("list"); }
  Reply FindKey(const std::string&) override { return HttpOnly("find"); }
  Reply SetPush(const std::string&, const std::string&) override { return HttpOnly("push"); }
  Reply GetPush(const std::string&) override { return HttpOnly("push"); }
  Reply DeletePush(const std::string&) override { return HttpOnly("push"); }
  Reply SetSchedule(const std::string&, const std::string&) override {
    return HttpOnly("schedule");
  }
  Reply GetSchedule(const std::string&) override { return HttpOnly("schedule"); }
  Reply ListSchedules() override { return HttpOnly("schedule"); }
  Reply PauseSchedule(const std::string&, bool) override { return HttpOnly("schedule"); }
  Reply DeleteSchedule(const std::string&) override { return HttpOnly("schedule"); }

  Reply Topics() override {
    auto reply = Command("list-tubes");
    if (!reply.ok()) return reply.failure();
    auto data = ReadOk(*reply, "list-tubes");
    if (!data.ok()) return data.failure();
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    w.StartObject();
    w.Key("topics");
    w.StartArray();
    for (const std::string& t : ParseYamlList(*data)) Str(w, t);
    w.EndArray();
    w.EndObject();
    return Parsed(sb);
  }

  Reply Clear(const std::string& topic, const std::vector<std::string>& states) override {
    std::string list;
    for (const std::string& s : states) list += (list.empty() ? "" : ",") + s;
    auto reply = Command("clear-tube " + topic + " " + (list.empty() ? "all" : list));
    if (!reply.ok()) return reply.failure();
    auto n = Arg(*reply, "CLEARED");
    if (!n) return ReplyFailure(*reply, "clear-tube", "no topic '" + topic + "'");
    return Count("cleared", *n);
  }

  Reply Pause(const std::string& topic, TimeMs delay_ms) override {
    if (delay_ms % 1000 != 0)
      return Failure{Exit::kUsage, "the beanstalkd protocol counts a pause in whole seconds (not " +
                                       std::to_string(delay_ms) +
                                       "ms): use --server http://... for less"};
    auto reply = Command("pause-tube " + topic + " " + std::to_string(delay_ms / 1000));
    if (!reply.ok()) return reply.failure();
    if (*reply != "PAUSED") return ReplyFailure(*reply, "pause-tube", "no topic '" + topic + "'");
    rapidjson::StringBuffer sb;
    JsonWriter w(sb);
    w.StartObject();
    w.Key("topic");
    Str(w, topic);
    w.Key("pause_ms");
    w.Int64(delay_ms);
    w.EndObject();
    return Parsed(sb);
  }

 private:
  // Sends one command line, returns the reply line. `extra`: time the
  // server may take on top of the I/O timeout (a reserve that waits).
  // Writes `bytes`, having authenticated the connection first when the
  // address carries a token (`auth`, docs/security.md).
  std::optional<Failure> Send(std::string_view bytes) {
    if (!authenticated_ && !conn_.address().token.empty()) {
      if (auto f = conn_.Write("auth " + conn_.address().token + "\r\n")) return f;
      std::string reply;
      if (auto f = conn_.ReadLine(&reply, milliseconds(0))) return f;
      if (reply == "UNKNOWN_COMMAND")
        return Failure{Exit::kServer,
                       "the server does not take a token ('auth'): it needs delayqd, not "
                       "beanstalkd (UNKNOWN_COMMAND)"};
      if (reply != "AUTHENTICATED") return ReplyFailure(reply, "auth", "");
      authenticated_ = true;
    }
    return conn_.Write(bytes);
  }

  Expected<std::string> Command(const std::string& line, milliseconds extra = milliseconds(0)) {
    if (auto f = Send(line + "\r\n")) return *f;
    std::string reply;
    if (auto f = conn_.ReadLine(&reply, extra)) return *f;
    return reply;
  }

  // The failure a reply other than the expected one stands for.
  // `not_found`: what NOT_FOUND means for this command.
  Failure ReplyFailure(std::string_view reply, std::string_view command,
                       const std::string& not_found) {
    static const std::map<std::string_view, std::string_view> kMeaning = {
        {"DRAINING", "the server is draining: it takes no new jobs"},
        {"JOB_TOO_BIG", "the job's body is larger than the server's maximum job size"},
        {"BAD_FORMAT", "the server refused the command as malformed"},
        {"OUT_OF_MEMORY", "the server is out of memory"},
        {"INTERNAL_ERROR", "the server failed (its log says why)"},
        {"EXPECTED_CRLF", "the server expected the job's body to end with CRLF"},
        {"DEADLINE_SOON", "a job this connection holds is about to exceed its TTR"},
        {"NOT_IGNORED", "the server refused to watch no topic at all"},
        {"UNAUTHORIZED",
         "the server wants a token (DELAYQ_TOKEN or --token-file), or refused the one given"},
        {"FORBIDDEN", "the token has no right to do that on this topic"},
        {"RATE_LIMITED", "the token is over its request rate: try again in a moment"},
    };
    const std::string word(reply);
    command = command.substr(0, command.find(' '));
    if (reply == "NOT_FOUND" && !not_found.empty())
      return Failure{Exit::kNotFound, not_found + " (NOT_FOUND)"};
    if (reply == "UNKNOWN_COMMAND")
      return Failure{Exit::kServer, "the server does not know the command '" +
                                        std::string(command) +
                                        "': it needs delayqd, not beanstalkd (UNKNOWN_COMMAND)"};
    // beanstalkd matches some commands by prefix: it takes reserve-batch
    // for a malformed reserve.
    static constexpr std::string_view kExtensions[] = {"put-ex", "reserve-batch", "peek-key",
                                                       "delete-key", "clear-tube"};
    if (reply == "BAD_FORMAT" &&
        std::find(std::begin(kExtensions), std::end(kExtensions), command) != std::end(kExtensions))
      return Failure{Exit::kServer, "the server refused " + std::string(command) +
                                        " as malformed, as a beanstalkd without delayq's "
                                        "extensions does (BAD_FORMAT)"};
    if (auto it = kMeaning.find(reply); it != kMeaning.end())
      return Failure{Exit::kServer, std::string(it->second) + " (" + word + ")"};
    conn_.Close();  // out of step with the server
    return Failure{Exit::kIo, "unexpected reply from " + conn_.address().ToString() + " to " +
                                  std::string(command) + ": '" + word + "'"};
  }

  // A command the beanstalkd protocol has no way to ask (list, find, push,
  // schedule).
  static Failure HttpOnly(std::string_view command) {
    return Failure{Exit::kUsage, std::string(command) +
                                     " needs the HTTP API: the beanstalkd protocol has no such "
                                     "command (use --server http://HOST:PORT)"};
  }

  static Failure NotHolder(std::string_view command, JobId id) {
    return Failure{Exit::kUsage,
                   std::string(command) + " " + Id(id) +
                       ": over the beanstalkd protocol only the connection that reserved a job "
                       "may " +
                       std::string(command) +
                       " it, and each delayq command opens its own (reserve --finish finishes "
                       "what it reserves; over --server http://... a job's lease may)"};
  }

  // The data block of an "OK <bytes>" reply.
  Expected<std::string> ReadOk(std::string_view reply, std::string_view command,
                               const std::string& not_found = "") {
    auto n = Arg(reply, "OK");
    if (!n) return ReplyFailure(reply, command, not_found);
    return ReadData(*n);
  }

  // <n> bytes and the CRLF after them.
  Expected<std::string> ReadData(uint64_t n) {
    std::string data;
    if (auto f = conn_.ReadExactly(static_cast<size_t>(n) + 2, &data)) return *f;
    if (!data.ends_with("\r\n")) {
      conn_.Close();
      return Failure{Exit::kIo, "malformed reply from " + conn_.address().ToString() +
                                    ": a data block not followed by CRLF"};
    }
    data.resize(data.size() - 2);
    return data;
  }

  // "<word> <id> <bytes>" and its data.
  Expected<std::pair<JobId, std::string>> ReadJob(std::string_view line, std::string_view word) {
    const std::string prefix = std::string(word) + " ";
    const size_t sp = line.rfind(' ');
    if (!line.starts_with(prefix) || sp <= prefix.size())
      return Failure{Exit::kIo, "unexpected reply '" + std::string(line) + "'"};
    auto id = ParseUint(line.substr(prefix.size(), sp - prefix.size()), 1, UINT64_MAX);
    auto bytes = ParseUint(line.substr(sp + 1), 0, UINT64_MAX);
    if (!id || !bytes) return Failure{Exit::kIo, "unexpected reply '" + std::string(line) + "'"};
    auto data = ReadData(*bytes);
    if (!data.ok()) return data.failure();
    return std::make_pair(JobId{*id}, std::move(*data));
  }

  Expected<YamlMap> Yaml(const std::string& command, const std::string& not_found) {
    auto reply = Command(command);
    if (!reply.ok()) return reply.failure();
    auto data = ReadOk(*reply, command.substr(0, command.find(' ')), not_found);
    if (!data.ok()) return data.failure();
    return ParseYamlMap(*data);
  }

  Expected<YamlMap> StatsJob(JobId id) { return Yaml("stats-job " + Id(id), "no job " + Id(id)); }

  // The id and body of the job a peek names.
  Expected<std::pair<JobId, std::string>> PeekJob(const PeekArgs& a) {
    std::string command, not_found;
    switch (a.what) {
      case PeekWhat::kId:
        command = "peek " + Id(a.id);
        not_found = "no job " + Id(a.id);
        break;
      case PeekWhat::kKey:
        command = "peek-key " + a.key;
        not_found = "no job with key '" + a.key + "' in topic '" + a.topic + "'";
        break;
      case PeekWhat::kReady:
      case PeekWhat::kDelayed:
      case PeekWhat::kBuried: {
        const char* state = a.what == PeekWhat::kReady     ? "ready"
                            : a.what == PeekWhat::kDelayed ? "delayed"
                                                           : "buried";
        command = std::string("peek-") + state;
        not_found = std::string("no ") + state + " job in topic '" + a.topic + "'";
        break;
      }
    }
    if (a.what != PeekWhat::kId) {
      if (auto f = Use(a.topic)) return *f;
    }
    auto reply = Command(command);
    if (!reply.ok()) return reply.failure();
    if (!reply->starts_with("FOUND ")) return ReplyFailure(*reply, command, not_found);
    return ReadJob(*reply, "FOUND");
  }

  std::optional<Failure> Use(const std::string& topic) {
    if (topic == used_) return std::nullopt;
    auto reply = Command("use " + topic);
    if (!reply.ok()) return reply.failure();
    if (*reply != "USING " + topic) return ReplyFailure(*reply, "use", "");
    used_ = topic;
    return std::nullopt;
  }

  // Watches exactly `topics`.
  std::optional<Failure> WatchOnly(const std::vector<std::string>& topics) {
    for (const std::string& t : topics) {
      if (std::find(watched_.begin(), watched_.end(), t) != watched_.end()) continue;
      auto reply = Command("watch " + t);
      if (!reply.ok()) return reply.failure();
      if (!Arg(*reply, "WATCHING")) return ReplyFailure(*reply, "watch", "");
      watched_.push_back(t);
    }
    for (size_t i = 0; i < watched_.size();) {
      if (std::find(topics.begin(), topics.end(), watched_[i]) != topics.end()) {
        ++i;
        continue;
      }
      auto reply = Command("ignore " + watched_[i]);
      if (!reply.ok()) return reply.failure();
      if (!Arg(*reply, "WATCHING")) return ReplyFailure(*reply, "ignore", "");
      watched_.erase(watched_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    return std::nullopt;
  }

  Connection conn_;
  bool authenticated_ = false;
  // The jobs this connection reserved and holds, with their priority.
  std::map<JobId, std::string> held_;
  // A new connection uses and watches `default`.
  std::string used_ = "default";
  std::vector<std::string> watched_ = {"default"};
};

}  // namespace

std::unique_ptr<Client> MakeBeanstalkClient(const ServerAddress& address, milliseconds io_timeout) {
  return std::make_unique<BeanstalkClient>(address, io_timeout);
}

}  // namespace delayq::cli

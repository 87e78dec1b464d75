// The subcommands of the command-line client (commands.h): the checks of
// their arguments, and what each runs.
#include "cli/commands.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <tuple>

#include "cli/json_writer.h"
#include "delayq/duration.h"
#include "delayq/engine.h"
#include "delayq/token.h"

namespace delayq::cli {

namespace {
constexpr uint32_t kMaxReserveCount = 1000;  // the server's limit for one reserve
}  // namespace

// ---- output and errors ---------------------------------------------------------

void Out(std::string_view s) { std::fwrite(s.data(), 1, s.size(), stdout); }

int Report(const Failure& f) {
  std::fflush(stdout);
  std::fprintf(stderr, "delayq: %s\n", f.message.c_str());
  return static_cast<int>(f.exit);
}

Failure Usage(const Context& c, std::string message) {
  const std::string where = c.sub != nullptr ? "delayq " + c.sub->get_name() : "delayq";
  return Failure{Exit::kUsage, message + "\nRun '" + where + " --help' for help."};
}

// ---- argument checks ---------------------------------------------------------------

Check Duration(const Context& c, const std::string& text, const char* option, TimeMs* out) {
  auto d = ParseDuration(text);
  if (!d.ok())
    return Usage(c, "bad duration '" + text + "' for " + option +
                        " (milliseconds, or a number with ms, s, m, h or d: 250ms, 30s, 5m)");
  *out = *d;
  return std::nullopt;
}

namespace {

Check Topic(const Context& c, const std::string& name) {
  if (IsValidTopicName(name)) return std::nullopt;
  return Usage(
      c, "bad topic name '" + name + "' (1-200 bytes of A-Za-z0-9-+/;.$_() not starting with '-')");
}

Check Key(const Context& c, const std::string& key) {
  if (IsValidKey(key)) return std::nullopt;
  return Usage(c, "bad key '" + key + "' (1-200 bytes of printable ASCII without spaces)");
}

Check Number(const Context& c, const std::string& text, const char* what, uint64_t lo, uint64_t hi,
             uint64_t* out) {
  auto n = ParseUint(text, lo, hi);
  if (!n)
    return Usage(c, "bad " + std::string(what) + " '" + text + "' (" + std::to_string(lo) + ".." +
                        std::to_string(hi) + ")");
  *out = *n;
  return std::nullopt;
}

// The value of the running command's `option`, if given.
Check Uint32(const Context& c, const char* option, const std::string& text, const char* what,
             std::optional<uint32_t>* out) {
  if (c.sub->count(option) == 0) return std::nullopt;
  uint64_t v = 0;
  if (auto f = Number(c, text, what, 0, UINT32_MAX, &v)) return f;
  *out = static_cast<uint32_t>(v);
  return std::nullopt;
}

// A job named on the command line: ID, or ID@LEASE for a job reserved
// over HTTP (what `reserve -o lease` prints).
struct JobRef {
  JobId id = 0;
  std::string lease;
};

// The jobs named. `leased`: finish, release, touch and bury, which over
// HTTP act for the lease that holds the job (docs/cli.md): each id carries
// one as ID@LEASE, or --lease gives it to a single id.
Check Ids(const Context& c, bool leased, std::vector<JobRef>* out) {
  for (const std::string& s : c.args.ids) {
    size_t at = s.find('@');
    auto id = ParseUint(s.substr(0, at), 1, UINT64_MAX);
    if (!id) return Usage(c, "bad job id '" + s + "'");
    JobRef r{*id, at == std::string::npos ? std::string() : s.substr(at + 1)};
    if (at != std::string::npos && (!leased || r.lease.empty()))
      return Usage(c, leased ? "no lease after '@' in '" + s + "'"
                             : "'" + s + "': a lease goes with finish, release, touch and bury");
    out->push_back(std::move(r));
  }
  if (out->empty()) return Usage(c, "name at least one job id");
  if (leased && !c.args.lease.empty()) {
    if (out->size() != 1 || !out->front().lease.empty())
      return Usage(c, "--lease goes with one job id (name several as ID@LEASE)");
    out->front().lease = c.args.lease;
  }
  if (leased && c.address.protocol == ServerAddress::Protocol::kHttp) {
    for (const JobRef& r : *out)
      if (r.lease.empty())
        return Usage(c, "job " + std::to_string(r.id) +
                            ": over HTTP a reserved job is held by the lease its reserve "
                            "printed; name it as " +
                            std::to_string(r.id) + "@LEASE or with --lease");
  }
  return std::nullopt;
}

// True when the running command's option `name` was given, even empty.
bool Given(const Context& c, const char* name) { return c.sub->count(name) > 0; }

// Fails when -o body is asked of a command that shows no job, or -o lease
// of one that reserves none.
Check NoBodyFormat(const Context& c) {
  if (c.format == Format::kLease)
    return Usage(c, "-o lease prints the jobs a reserve took: it applies to reserve only");
  if (c.format != Format::kBody) return std::nullopt;
  return Usage(c, "-o body shows a job's body: it applies to reserve and peek only");
}

// ---- running --------------------------------------------------------------------

// Prints a reply with `text` in the text format.
void Show(const Context& c, const rapidjson::Value& reply,
          const std::function<std::string(const rapidjson::Value&)>& text) {
  Out(c.format == Format::kJson ? JsonLine(reply) : text(reply));
}

// Runs `op` for each id; the exit code is the first failure's. A failure
// that leaves the connection or the arguments unusable stops the loop.
int EachId(Context& c, bool leased, const std::function<Reply(const JobRef&)>& op,
           std::string_view verb) {
  std::vector<JobRef> ids;
  if (auto f = Ids(c, leased, &ids)) return Report(*f);
  if (auto f = NoBodyFormat(c)) return Report(*f);
  int code = 0;
  for (const JobRef& id : ids) {
    Reply r = op(id);
    if (!r.ok()) {
      int e = Report(r.failure());
      if (code == 0) code = e;
      if (r.failure().exit == Exit::kIo || r.failure().exit == Exit::kUsage) break;
      continue;
    }
    Show(c, *r, [verb](const rapidjson::Value& v) { return StateText(v, verb); });
  }
  return code;
}

std::string ReadAll(std::FILE* f) {
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  return out;
}

// The contents of `file` ("-": standard input) into *out.
Check ReadBodyFile(const std::string& file, std::string* out) {
  if (file == "-") {
    *out = ReadAll(stdin);
    if (std::ferror(stdin)) return Failure{Exit::kIo, "cannot read standard input"};
    return std::nullopt;
  }
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (f == nullptr)
    return Failure{Exit::kUsage, "cannot open " + file + ": " + std::strerror(errno)};
  *out = ReadAll(f);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return Failure{Exit::kIo, "cannot read " + file};
  return std::nullopt;
}

// A time given for `option`: epoch milliseconds or RFC 3339.
Check TimeArg(const Context& c, const std::string& text, const char* option, TimeMs* out) {
  auto t = ParseTimeArg(text);
  if (!t)
    return Usage(c, "bad time '" + text + "' for " + option +
                        " (epoch milliseconds, or RFC 3339 like 2026-05-01T09:00:00Z)");
  *out = *t;
  return std::nullopt;
}

// A back-off spec as the server takes it (checked here, so that a typo is
// a usage error).
Check BackoffArg(const Context& c, const std::string& text) {
  auto b = ParseBackoff(text);
  if (!b.ok() || text.find(' ') != std::string::npos)
    return Usage(c, "bad back-off '" + text +
                        "' (a list like 4m,10m,1h; exp:<base>:<cap> like exp:1s:1h; or none)");
  return std::nullopt;
}

// A time to run of at least a millisecond, given for `option`.
Check TtrArg(const Context& c, const std::string& text, const char* option, TimeMs* out) {
  if (auto f = Duration(c, text, option, out)) return f;
  if (*out < 1) return Usage(c, std::string(option) + " must be at least 1ms");
  return std::nullopt;
}

}  // namespace

// ---- the subcommands -------------------------------------------------------------

int RunPut(Context& c) {
  Args& a = c.args;
  if (auto f = NoBodyFormat(c)) return Report(*f);
  PutArgs p;
  p.topic = a.topic;
  if (auto f = Topic(c, a.topic)) return Report(*f);
  if (Given(c, "--delay")) {
    TimeMs d = 0;
    if (auto f = Duration(c, a.delay, "--delay", &d)) return Report(*f);
    p.delay_ms = d;
  }
  if (Given(c, "--at")) {
    TimeMs t = 0;
    if (auto f = TimeArg(c, a.at, "--at", &t)) return Report(*f);
    p.run_at = t;
  }
  if (Given(c, "--ttr")) {
    TimeMs t = 0;
    if (auto f = TtrArg(c, a.ttr, "--ttr", &t)) return Report(*f);
    p.ttr_ms = t;
  }
  if (auto f = Uint32(c, "--priority", a.priority, "priority", &p.priority)) return Report(*f);
  if (auto f = Uint32(c, "--max-tries", a.max_tries, "--max-tries", &p.max_tries))
    return Report(*f);
  if (Given(c, "--key")) {
    if (auto f = Key(c, a.key)) return Report(*f);
    p.key = a.key;
  }
  if (Given(c, "--backoff")) {
    if (auto f = BackoffArg(c, a.backoff)) return Report(*f);
    p.backoff = a.backoff;
  }
  // The body last: nothing is read before the options are known good.
  const bool has_body = Given(c, "BODY");
  if (has_body && Given(c, "--file")) return Report(Usage(c, "give the body or --file, not both"));
  if (has_body) {
    p.body = a.body;
  } else if (a.file == "-" || (!Given(c, "--file") && !isatty(STDIN_FILENO))) {
    if (auto f = ReadBodyFile("-", &p.body)) return Report(*f);
  } else if (Given(c, "--file")) {
    if (auto f = ReadBodyFile(a.file, &p.body)) return Report(*f);
  } else {
    return Report(Usage(c,
                        "no body: give it as an argument, with --file, or on standard input "
                        "(--file - reads a terminal)"));
  }
  Reply r = c.client->Put(p);
  if (!r.ok()) return Report(r.failure());
  Show(c, *r, [&p](const rapidjson::Value& v) { return PutText(v, p.key); });
  return 0;
}

int RunReserve(Context& c) {
  Args& a = c.args;
  std::vector<std::string> topics = a.topics;
  if (topics.empty()) topics.push_back("default");
  for (const std::string& t : topics)
    if (auto f = Topic(c, t)) return Report(*f);
  TimeMs timeout = 0;
  if (Given(c, "--timeout")) {
    if (auto f = Duration(c, a.timeout, "--timeout", &timeout)) return Report(*f);
  }
  uint64_t count = 1;
  if (auto f = Number(c, a.count, "--count", 1, kMaxReserveCount, &count)) return Report(*f);
  if (c.format == Format::kBody && count > 1)
    return Report(Usage(c, "-o body shows one job's body: it does not go with --count above 1"));
  Reply r = c.client->Reserve(topics, timeout, static_cast<uint32_t>(count));
  if (!r.ok()) return Report(r.failure());
  const rapidjson::Document& reply = *r;
  auto member = reply.FindMember("jobs");
  static const rapidjson::Value kNone(rapidjson::kArrayType);
  const rapidjson::Value& jobs =
      member != reply.MemberEnd() && member->value.IsArray() ? member->value : kNone;
  if (jobs.Empty()) {
    std::string names;
    for (const std::string& t : topics) names += (names.empty() ? "" : ", ") + t;
    return Report(Failure{Exit::kTimedOut,
                          "no job was ready in " + names + " within " + HumanDuration(timeout)});
  }
  std::string ids;
  for (rapidjson::SizeType i = 0; i < jobs.Size(); ++i) {
    const rapidjson::Value& job = jobs[i];
    if (c.format == Format::kJson) {
      Out(JsonLine(job));
    } else if (c.format == Format::kLease) {
      Out(JobHandle(job) + "\n");
    } else if (c.format == Format::kBody) {
      Out(JobBody(job));
    } else {
      Out((i > 0 ? "\n" : "") + JobText(job));
    }
    ids += (ids.empty() ? "" : ", ") + std::to_string(UintField(job, "id"));
  }
  std::fflush(stdout);
  if (a.finish) {
    // Printed first: if delayq dies now, the job comes back (at least once).
    for (const auto& job : jobs.GetArray()) {
      Reply f = c.client->Finish(UintField(job, "id"), StringField(job, "lease"));
      if (!f.ok()) return Report(f.failure());
    }
  } else if (c.address.protocol == ServerAddress::Protocol::kBeanstalk) {
    const bool one = jobs.Size() == 1;
    std::fprintf(stderr,
                 "delayq: note: the beanstalkd protocol ends a reservation with its connection, "
                 "so %s %s %s back to %s topic as delayq exits; --finish deletes what it "
                 "reserves\n",
                 one ? "job" : "jobs", ids.c_str(), one ? "goes" : "go", one ? "its" : "their");
  }
  return 0;
}

int RunDelete(Context& c) {
  Args& a = c.args;
  if (Given(c, "--key")) {
    if (auto f = NoBodyFormat(c)) return Report(*f);
    if (!a.ids.empty()) return Report(Usage(c, "give job ids or --key, not both"));
    if (auto f = Topic(c, a.topic)) return Report(*f);
    if (auto f = Key(c, a.key)) return Report(*f);
    Reply r = c.client->DeleteByKey(a.topic, a.key);
    if (!r.ok()) return Report(r.failure());
    Show(c, *r, [](const rapidjson::Value& v) { return StateText(v, "deleted"); });
    return 0;
  }
  if (Given(c, "--topic"))
    return Report(Usage(c, "--topic goes with --key (a job id names its job alone)"));
  return EachId(
      c, false, [&c](const JobRef& j) { return c.client->Delete(j.id); }, "deleted");
}

int RunRelease(Context& c) {
  Args& a = c.args;
  std::optional<TimeMs> delay;
  if (Given(c, "--delay")) {
    TimeMs d = 0;
    if (auto f = Duration(c, a.delay, "--delay", &d)) return Report(*f);
    delay = d;
  }
  std::optional<uint32_t> pri;
  if (auto f = Uint32(c, "--priority", a.priority, "priority", &pri)) return Report(*f);
  return EachId(
      c, true, [&](const JobRef& j) { return c.client->Release(j.id, j.lease, delay, pri); },
      "released");
}

int RunBury(Context& c) {
  std::optional<uint32_t> pri;
  if (auto f = Uint32(c, "--priority", c.args.priority, "priority", &pri)) return Report(*f);
  return EachId(
      c, true, [&](const JobRef& j) { return c.client->Bury(j.id, j.lease, pri); }, "buried");
}

int RunPeek(Context& c) {
  Args& a = c.args;
  PeekArgs p;
  const int ways = Given(c, "ID") + Given(c, "--key") + a.ready + a.delayed + a.buried;
  if (ways != 1)
    return Report(
        Usage(c, "name one job: an id, --key KEY, or one of --ready, --delayed, --buried"));
  if (Given(c, "ID")) {
    if (Given(c, "--topic"))
      return Report(Usage(c, "--topic goes with --key, --ready, --delayed or --buried"));
    auto id = ParseUint(a.peek_id, 1, UINT64_MAX);
    if (!id) return Report(Usage(c, "bad job id '" + a.peek_id + "'"));
    p.what = PeekWhat::kId;
    p.id = *id;
  } else {
    if (auto f = Topic(c, a.topic)) return Report(*f);
    p.topic = a.topic;
    if (Given(c, "--key")) {
      if (auto f = Key(c, a.key)) return Report(*f);
      p.what = PeekWhat::kKey;
      p.key = a.key;
    } else {
      p.what = a.ready ? PeekWhat::kReady : a.delayed ? PeekWhat::kDelayed : PeekWhat::kBuried;
    }
  }
  if (c.format == Format::kLease)
    return Report(Usage(c, "-o lease prints the jobs a reserve took: it applies to reserve only"));
  Reply r = c.client->Peek(p);
  if (!r.ok()) return Report(r.failure());
  if (c.format == Format::kBody) {
    Out(JobBody(*r));
  } else {
    Show(c, *r, JobText);
  }
  return 0;
}

int RunKick(Context& c) {
  Args& a = c.args;
  if (auto f = NoBodyFormat(c)) return Report(*f);
  if (Given(c, "--job")) {
    if (Given(c, "BOUND") || Given(c, "--topic"))
      return Report(Usage(c, "--job kicks one job: give no topic or bound with it"));
    auto id = ParseUint(a.job, 1, UINT64_MAX);
    if (!id) return Report(Usage(c, "bad job id '" + a.job + "'"));
    Reply r = c.client->KickJob(*id);
    if (!r.ok()) return Report(r.failure());
    Show(c, *r, [](const rapidjson::Value& v) { return StateText(v, "kicked"); });
    return 0;
  }
  if (auto f = Topic(c, a.topic)) return Report(*f);
  uint64_t bound = 1;
  if (auto f = Number(c, a.bound, "bound", 1, UINT32_MAX, &bound)) return Report(*f);
  Reply r = c.client->Kick(a.topic, bound);
  if (!r.ok()) return Report(r.failure());
  Show(c, *r, [](const rapidjson::Value& v) {
    return "kicked " + Plural(UintField(v, "kicked"), "job") + "\n";
  });
  return 0;
}

int RunStats(Context& c) {
  if (auto f = NoBodyFormat(c)) return Report(*f);
  const std::string& topic = c.args.stats_topic;
  if (!topic.empty()) {
    if (auto f = Topic(c, topic)) return Report(*f);
  }
  Reply r = topic.empty() ? c.client->Stats() : c.client->TopicStats(topic);
  if (!r.ok()) return Report(r.failure());
  Show(c, *r, FieldsText);
  return 0;
}

int RunTopics(Context& c) {
  if (auto f = NoBodyFormat(c)) return Report(*f);
  Reply r = c.client->Topics();
  if (!r.ok()) return Report(r.failure());
  Show(c, *r, [](const rapidjson::Value& v) {
    std::string out;
    auto topics = v.FindMember("topics");
    if (topics == v.MemberEnd() || !topics->value.IsArray()) return out;
    for (const auto& t : topics->value.GetArray())
      if (t.IsString()) out += std::string(t.GetString(), t.GetStringLength()) + "\n";
    return out;
  });
  return 0;
}

namespace {

// Jobs without their bodies (list, find) as a table, one line a job:
//   ID   STATE    PRIORITY  DUE                       TRIES  BYTES  KEY
// DUE is a delayed job's due time or a reserved job's TTR deadline, TRIES
// its reserves; find puts each job's TOPIC first.
std::string JobRow(bool with_topic, const std::string& topic, const std::string& id,
                   const std::string& state, const std::string& priority, const std::string& due,
                   const std::string& tries, const std::string& bytes, const std::string& key) {
  char line[1200];
  std::snprintf(line, sizeof line, "%-20s %-8s %8s  %-24s %5s %7s  %s\n", id.c_str(), state.c_str(),
                priority.c_str(), due.c_str(), tries.c_str(), bytes.c_str(), key.c_str());
  if (!with_topic) return line;
  return topic + std::string(topic.size() < 24 ? 24 - topic.size() : 1, ' ') + line;
}

std::string JobTableHeader(bool with_topic) {
  return JobRow(with_topic, "TOPIC", "ID", "STATE", "PRIORITY", "DUE", "TRIES", "BYTES", "KEY");
}

std::string JobTableRows(const rapidjson::Value& reply, bool with_topic) {
  std::string out;
  auto jobs = reply.FindMember("jobs");
  if (jobs == reply.MemberEnd() || !jobs->value.IsArray()) return out;
  for (const auto& j : jobs->value.GetArray()) {
    if (!j.IsObject()) continue;
    std::string due = "-";
    for (const char* name : {"due_ms", "deadline_ms"})
      if (auto m = j.FindMember(name); m != j.MemberEnd()) due = FieldValue(name, m->value);
    const std::string key = StringField(j, "key");
    out += JobRow(with_topic, StringField(j, "topic"), std::to_string(UintField(j, "id")),
                  StringField(j, "state"), std::to_string(UintField(j, "priority")), due,
                  std::to_string(UintField(j, "reserves")),
                  std::to_string(UintField(j, "body_bytes")), key.empty() ? "-" : key);
  }
  return out;
}

}  // namespace

int RunList(Context& c) {
  Args& a = c.args;
  if (auto f = NoBodyFormat(c)) return Report(*f);
  if (auto f = Topic(c, a.topic)) return Report(*f);
  ListArgs l;
  l.topic = a.topic;
  if (a.list_state != "ready" && a.list_state != "delayed" && a.list_state != "reserved" &&
      a.list_state != "buried")
    return Report(
        Usage(c, "bad state '" + a.list_state + "' (ready, delayed, reserved or buried)"));
  l.state = a.list_state;
  uint64_t limit = 50;
  if (auto f = Number(c, a.limit, "limit", 1, 1000, &limit)) return Report(*f);
  l.limit = static_cast<uint32_t>(limit);
  l.desc = a.desc;
  l.after = a.after;
  bool first = true;
  for (;;) {
    Reply r = c.client->ListJobs(l);
    if (!r.ok()) return Report(r.failure());
    const std::string next = StringField(*r, "next");
    if (c.format == Format::kJson) {
      Out(JsonLine(*r));
    } else {
      Out((first ? JobTableHeader(false) : std::string()) + JobTableRows(*r, false));
      if (!next.empty() && !a.all) Out("next: " + next + " (--after " + next + ")\n");
    }
    first = false;
    if (!a.all || next.empty()) break;
    l.after = next;
  }
  return 0;
}

int RunFind(Context& c) {
  Args& a = c.args;
  if (auto f = NoBodyFormat(c)) return Report(*f);
  if (auto f = Key(c, a.key)) return Report(*f);
  Reply r = c.client->FindKey(a.key);
  if (!r.ok()) return Report(r.failure());
  Show(c, *r, [](const rapidjson::Value& v) {
    const std::string rows = JobTableRows(v, true);
    return rows.empty() ? std::string("no job has this key\n") : JobTableHeader(true) + rows;
  });
  return 0;
}

int RunClear(Context& c) {
  Args& a = c.args;
  if (auto f = NoBodyFormat(c)) return Report(*f);
  if (auto f = Topic(c, a.topic)) return Report(*f);
  std::vector<std::string> states;
  for (const std::string& s : a.states) {
    if (s != "ready" && s != "delayed" && s != "buried")
      return Report(Usage(
          c, "bad state '" + s + "' (ready, delayed or buried; reserved jobs are never cleared)"));
    if (std::find(states.begin(), states.end(), s) == states.end()) states.push_back(s);
  }
  Reply r = c.client->Clear(a.topic, states);
  if (!r.ok()) return Report(r.failure());
  Show(c, *r, [](const rapidjson::Value& v) {
    return "cleared " + Plural(UintField(v, "cleared"), "job") + "\n";
  });
  return 0;
}

int RunPause(Context& c) {
  Args& a = c.args;
  if (auto f = NoBodyFormat(c)) return Report(*f);
  if (auto f = Topic(c, a.topic)) return Report(*f);
  TimeMs d = 0;
  if (auto f = Duration(c, a.duration, "the pause", &d)) return Report(*f);
  Reply r = c.client->Pause(a.topic, d);
  if (!r.ok()) return Report(r.failure());
  Show(c, *r, [&a, d](const rapidjson::Value&) {
    return d == 0 ? "topic " + a.topic + " unpaused\n"
                  : "topic " + a.topic + " paused for " + HumanDuration(d) + "\n";
  });
  return 0;
}

int RunFinish(Context& c) {
  return EachId(
      c, true, [&c](const JobRef& j) { return c.client->Finish(j.id, j.lease); }, "finished");
}

int RunTouch(Context& c) {
  return EachId(
      c, true, [&c](const JobRef& j) { return c.client->Touch(j.id, j.lease); }, "touched");
}

// The target `push set` asks for, as PUT /topics/{topic}/push takes it.
Check PushTargetJson(const Context& c, std::string* out) {
  const Args& a = c.args;
  if (a.url.empty()) return Usage(c, "push set needs --url");
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("url");
  Str(w, a.url);
  if (!a.secret.empty()) {
    w.Key("secret");
    Str(w, a.secret);
  }
  if (!a.method.empty()) {
    w.Key("method");
    Str(w, a.method);
  }
  if (!a.headers.empty()) {
    w.Key("headers");
    w.StartObject();
    for (const std::string& h : a.headers) {
      const size_t colon = h.find(':');
      if (colon == std::string::npos || colon == 0)
        return Usage(c, "bad --header '" + h + "' (Name: value)");
      std::string_view value = std::string_view(h).substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      w.Key(h.data(), static_cast<rapidjson::SizeType>(colon));
      Str(w, value);
    }
    w.EndObject();
  }
  if (!a.timeout.empty()) {
    TimeMs t = 0;
    if (auto f = Duration(c, a.timeout, "--timeout", &t)) return f;
    w.Key("timeout_ms");
    w.Int64(t);
  }
  // Counts go as they were typed: the server checks their ranges.
  for (const auto& [name, value] :
       {std::pair{"concurrency", &a.concurrency}, std::pair{"max_tries", &a.max_tries}}) {
    if (value->empty()) continue;
    auto n = ParseUint(*value, 0, UINT32_MAX);
    if (!n) return Usage(c, "bad " + std::string(name) + " '" + *value + "'");
    w.Key(name);
    w.Uint64(*n);
  }
  if (!a.rate.empty() || !a.burst.empty()) {
    w.Key("rate");
    w.StartObject();
    for (const auto& [name, value] :
         {std::pair{"per_second", &a.rate}, std::pair{"burst", &a.burst}}) {
      if (value->empty()) continue;
      auto n = ParseUint(*value, 0, UINT32_MAX);
      if (!n) return Usage(c, "bad rate '" + *value + "'");
      w.Key(name);
      w.Uint64(*n);
    }
    w.EndObject();
  }
  if (!a.backoff.empty()) {
    w.Key("backoff");
    Str(w, a.backoff);
  }
  if (a.follow_redirects) {
    w.Key("follow_redirects");
    w.Bool(true);
  }
  w.EndObject();
  *out = sb.GetString();
  return std::nullopt;
}

// A target in the text format: one line, and the secret delayqd made, once.
std::string PushTargetText(const rapidjson::Value& v) {
  std::string text = "topic " + StringField(v, "topic") + " pushes to " + StringField(v, "url") +
                     " (" + StringField(v, "method") + ", timeout " +
                     HumanDuration(static_cast<TimeMs>(UintField(v, "timeout_ms"))) +
                     ", concurrency " + std::to_string(UintField(v, "concurrency"));
  if (v.HasMember("rate") && v["rate"].IsObject() && UintField(v["rate"], "per_second") > 0)
    text += ", " + std::to_string(UintField(v["rate"], "per_second")) + "/s";
  text += ")\n";
  if (v.HasMember("secret")) text += "secret: " + StringField(v, "secret") + "\n";
  return text;
}

int RunPush(Context& c) {
  Args& a = c.args;
  if (auto f = NoBodyFormat(c)) return Report(*f);
  if (auto f = Topic(c, a.topic)) return Report(*f);
  Reply r = Failure{Exit::kUsage, ""};
  if (a.push_action == "set") {
    std::string json;
    if (auto f = PushTargetJson(c, &json)) return Report(*f);
    r = c.client->SetPush(a.topic, json);
  } else if (a.push_action == "get") {
    r = c.client->GetPush(a.topic);
  } else if (a.push_action == "delete") {
    r = c.client->DeletePush(a.topic);
  } else {
    return Report(Usage(c, "bad action '" + a.push_action + "' (set, get or delete)"));
  }
  if (!r.ok()) return Report(r.failure());
  Show(c, *r, [&a](const rapidjson::Value& v) {
    return a.push_action == "delete" ? "topic " + a.topic + " no longer pushes\n"
                                     : PushTargetText(v);
  });
  return 0;
}

// The options of `schedule set` that give one field each (--from-json
// gives them all).
constexpr const char* kScheduleFieldOptions[] = {
    "--cron",  "--tz",        "--topic",   "--body",  "--body-file", "--priority", "--ttr",
    "--delay", "--max-tries", "--backoff", "--start", "--end",       "--missed",   "--paused"};

// The schedule `schedule set` asks for, as PUT /schedules/{name} takes it.
// The server checks the expression, the zone and the ranges: its words
// are the ones shown.
Check ScheduleJson(const Context& c, std::string* out) {
  const Args& a = c.args;
  if (Given(c, "--from-json")) {
    for (const char* option : kScheduleFieldOptions)
      if (Given(c, option))
        return Usage(
            c, "--from-json gives the whole schedule: it goes with no " + std::string(option));
    if (a.from_json != "-") {
      *out = a.from_json;
      return std::nullopt;
    }
    return ReadBodyFile("-", out);
  }
  if (!Given(c, "--cron")) return Usage(c, "schedule set needs --cron (or --from-json)");
  if (!Given(c, "--topic")) return Usage(c, "schedule set needs --topic");
  if (auto f = Topic(c, a.topic)) return f;
  if (Given(c, "--body") && Given(c, "--body-file"))
    return Usage(c, "give --body or --body-file, not both");
  if (Given(c, "--missed") && a.missed != "skip" && a.missed != "one")
    return Usage(c, "bad --missed '" + a.missed + "' (skip or one)");
  std::optional<uint32_t> priority, max_tries;
  if (auto f = Uint32(c, "--priority", a.priority, "priority", &priority)) return f;
  if (auto f = Uint32(c, "--max-tries", a.max_tries, "--max-tries", &max_tries)) return f;
  if (Given(c, "--backoff")) {
    if (auto f = BackoffArg(c, a.backoff)) return f;
  }
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("cron");
  Str(w, a.cron);
  if (Given(c, "--tz")) {
    w.Key("tz");
    Str(w, a.tz);
  }
  w.Key("topic");
  Str(w, a.topic);
  for (const auto& [option, text, key] :
       {std::tuple{"--start", &a.start, "start"}, std::tuple{"--end", &a.end, "end"}}) {
    if (!Given(c, option)) continue;
    TimeMs t = 0;
    if (auto f = TimeArg(c, *text, option, &t)) return f;
    w.Key(key);
    w.Int64(t);
  }
  if (Given(c, "--missed")) {
    w.Key("missed");
    Str(w, a.missed);
  }
  if (a.paused) {
    w.Key("paused");
    w.Bool(true);
  }
  w.Key("job");
  w.StartObject();
  if (Given(c, "--ttr")) {
    TimeMs t = 0;
    if (auto f = TtrArg(c, a.ttr, "--ttr", &t)) return f;
    w.Key("ttr_ms");
    w.Int64(t);
  }
  if (Given(c, "--delay")) {
    TimeMs d = 0;
    if (auto f = Duration(c, a.delay, "--delay", &d)) return f;
    w.Key("delay_ms");
    w.Int64(d);
  }
  if (priority) {
    w.Key("priority");
    w.Uint(*priority);
  }
  if (max_tries) {
    w.Key("max_tries");
    w.Uint(*max_tries);
  }
  if (Given(c, "--backoff")) {
    w.Key("backoff");
    Str(w, a.backoff);
  }
  // The body last: nothing is read before the options are known good. A
  // schedule's job may have an empty body (a tick).
  std::string body;
  if (Given(c, "--body")) {
    body = a.body;
  } else if (Given(c, "--body-file")) {
    if (auto f = ReadBodyFile(a.file, &body)) return f;
  } else if (!isatty(STDIN_FILENO)) {
    if (auto f = ReadBodyFile("-", &body)) return f;
  }
  WriteJsonBody(w, body);
  w.EndObject();
  w.EndObject();
  *out = std::string(sb.GetString(), sb.GetSize());
  return std::nullopt;
}

// A schedule's first line: "nightly: 30 2 * * * in Europe/Berlin, into
// reports (paused)".
std::string ScheduleLine(const rapidjson::Value& v) {
  std::string line = StringField(v, "name") + ": " + StringField(v, "cron");
  if (!StringField(v, "tz").empty()) line += " in " + StringField(v, "tz");
  line += ", into " + StringField(v, "topic");
  const auto paused = v.FindMember("paused");
  if (paused != v.MemberEnd() && paused->value.IsBool() && paused->value.GetBool())
    line += " (paused)";
  return line;
}

// The fire times of a schedule's "next" (as its zone reads them).
std::vector<std::string> NextTimes(const rapidjson::Value& v) {
  std::vector<std::string> out;
  const auto next = v.FindMember("next");
  if (next == v.MemberEnd() || !next->value.IsArray()) return out;
  for (const auto& n : next->value.GetArray())
    if (n.IsObject()) out.push_back(StringField(n, "at"));
  return out;
}

// A schedule in the text format: its line, its job, its bounds and its
// next fire times.
std::string ScheduleText(const rapidjson::Value& v) {
  std::string text = "schedule " + ScheduleLine(v) + "\n";
  if (const auto job = v.FindMember("job"); job != v.MemberEnd() && job->value.IsObject()) {
    const rapidjson::Value& j = job->value;
    text += "job:     priority " + std::to_string(UintField(j, "priority")) + ", ttr " +
            HumanDuration(static_cast<TimeMs>(UintField(j, "ttr_ms"))) + ", delay " +
            HumanDuration(static_cast<TimeMs>(UintField(j, "delay_ms"))) + ", max tries " +
            std::to_string(UintField(j, "max_tries")) + ", back-off " + StringField(j, "backoff") +
            "\n";
    const std::string body = JobBody(j);
    text += "body:    " + Plural(body.size(), "byte") + "\n";
    if (!body.empty() && IsText(body)) text += body + (body.back() == '\n' ? "" : "\n");
  }
  for (const auto& [member, label] :
       {std::pair{"start_ms", "start:   "}, std::pair{"end_ms", "end:     "}}) {
    const auto t = v.FindMember(member);
    if (t != v.MemberEnd() && t->value.IsInt64())
      text += label + FormatRfc3339(t->value.GetInt64()) + "\n";
  }
  text += "missed:  " + StringField(v, "missed") + "\n";
  const std::vector<std::string> next = NextTimes(v);
  if (next.empty()) text += "next:    none\n";
  for (const std::string& at : next) text += "next:    " + at + "\n";
  return text;
}

// The schedules, one line each with its next fire time.
std::string SchedulesText(const rapidjson::Value& v) {
  const auto all = v.FindMember("schedules");
  if (all == v.MemberEnd() || !all->value.IsArray() || all->value.Empty()) return "no schedules\n";
  std::string text;
  for (const auto& s : all->value.GetArray()) {
    if (!s.IsObject()) continue;
    const std::vector<std::string> next = NextTimes(s);
    text += ScheduleLine(s) + "; next " + (next.empty() ? "none" : next.front()) + "\n";
  }
  return text;
}

int RunSchedule(Context& c) {
  Args& a = c.args;
  const std::string& action = a.schedule_action;
  if (auto f = NoBodyFormat(c)) return Report(*f);
  if (action != "set" && action != "get" && action != "list" && action != "pause" &&
      action != "resume" && action != "delete")
    return Report(
        Usage(c, "bad action '" + action + "' (set, get, list, pause, resume or delete)"));
  if (action == "list" && Given(c, "NAME")) return Report(Usage(c, "schedule list takes no NAME"));
  if (action != "list" && !Given(c, "NAME"))
    return Report(Usage(c, "schedule " + action + " needs the schedule's NAME"));
  if (action != "set") {
    for (const char* option : kScheduleFieldOptions)
      if (Given(c, option))
        return Report(Usage(c, std::string(option) + " goes with 'schedule set'"));
    if (Given(c, "--from-json")) return Report(Usage(c, "--from-json goes with 'schedule set'"));
  }
  const std::string& name = a.schedule_name;
  Reply r = Failure{Exit::kUsage, ""};
  if (action == "set") {
    std::string json;
    if (auto f = ScheduleJson(c, &json)) return Report(*f);
    r = c.client->SetSchedule(name, json);
  } else if (action == "get") {
    r = c.client->GetSchedule(name);
  } else if (action == "list") {
    r = c.client->ListSchedules();
  } else if (action == "pause" || action == "resume") {
    r = c.client->PauseSchedule(name, action == "pause");
  } else {
    r = c.client->DeleteSchedule(name);
  }
  if (!r.ok()) return Report(r.failure());
  Show(c, *r, [&](const rapidjson::Value& v) {
    if (action == "list") return SchedulesText(v);
    if (action == "delete") return "schedule " + name + " deleted\n";
    return ScheduleText(v);
  });
  return 0;
}

int RunToken(Context& c) {
  Args& a = c.args;
  if (a.hash) {
    // The digest of a secret made elsewhere, read from standard input.
    std::string secret;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, stdin)) > 0;) secret.append(buf, n);
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
    if (secret.empty()) return Report(Usage(c, "--hash reads the secret from standard input"));
    Out(DigestHex(Sha256(secret)) + "\n");
    return 0;
  }
  Token t;
  t.name = a.token_name;
  if (Status st = CheckTokenName(t.name); !st.ok()) return Report(Usage(c, st.message()));
  t.topics = a.patterns.empty() ? std::vector<std::string>{"*"} : a.patterns;
  for (const std::string& p : t.topics)
    if (Status st = CheckTopicPattern(p); !st.ok()) return Report(Usage(c, st.message()));
  for (const std::string& r : a.rights) {
    const uint8_t bit = RightNamed(r);
    if (bit == 0) return Report(Usage(c, "unknown right '" + r + "' (produce, consume, admin)"));
    t.rights |= bit;
  }
  if (t.rights == 0) return Report(Usage(c, "give the token a --right (produce, consume, admin)"));
  for (auto [text, out, what] :
       {std::tuple{&a.rate, &t.rate, "--rate"}, std::tuple{&a.burst, &t.burst, "--burst"}}) {
    if (text->empty()) continue;
    char* end = nullptr;
    errno = 0;
    *out = std::strtod(text->c_str(), &end);
    if (errno != 0 || end != text->c_str() + text->size() || !(*out > 0) || *out > 1e9)
      return Report(Usage(c, std::string(what) + " must be a number above 0"));
  }
  if (t.burst > 0 && t.rate == 0) return Report(Usage(c, "--burst goes with --rate"));
  auto secret = NewSecret();
  if (!secret.ok()) return Report(Failure{Exit::kIo, secret.status().message()});
  t.sha256 = Sha256(*secret);
  const std::string entry = TokenFileEntry(t);
  if (c.format == Format::kJson) {
    rapidjson::Document d(rapidjson::kObjectType);
    auto& al = d.GetAllocator();
    d.AddMember("name", rapidjson::Value(t.name.c_str(), al), al);
    d.AddMember("secret", rapidjson::Value(secret->c_str(), al), al);
    d.AddMember("sha256", rapidjson::Value(DigestHex(t.sha256).c_str(), al), al);
    d.AddMember("entry", rapidjson::Value(entry.c_str(), al), al);
    Out(JsonLine(d));
    return 0;
  }
  Out("secret: " + *secret + "\n" +
      "# Give the secret to the client (DELAYQ_TOKEN, --token-file, beanstalkd 'auth', HTTP\n"
      "# 'Authorization: Bearer'); it is shown only now. Add this to the token file\n"
      "# (--auth-file) and send delayqd a SIGHUP:\n\n" +
      entry);
  return 0;
}

}  // namespace delayq::cli

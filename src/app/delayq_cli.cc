// delayq: the command-line client of delayqd (docs/cli.md). It puts,
// reserves, finishes and inspects jobs over the HTTP/JSON API or the
// beanstalkd protocol, whichever --server names, and shows results as text
// or JSON. Results go to stdout, errors to stderr, and the exit code tells
// what happened (Exit in cli_client.h).
//
// Every subcommand is one entry of the command table (Commands()): its
// name, summary, examples, options and what it runs.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/cli_client.h"
#include "app/cli_output.h"
#include "app/cli_util.h"
#include "delayq/duration.h"
#include "delayq/engine.h"
#include "delayq/version.h"

namespace delayq::cli {
namespace {

using std::chrono::milliseconds;

constexpr uint32_t kMaxReserveCount = 1000;  // the server's limit for one reserve

// What the command line said. Options of different subcommands may share a
// field: only one subcommand runs.
struct Args {
  // Global.
  std::string server, output, io_timeout;
  bool json = false;
  bool version = false;
  // Subcommands.
  std::string topic = "default";
  std::vector<std::string> topics;  // reserve
  std::vector<std::string> states;  // clear
  std::vector<std::string> ids;     // finish, delete, release, bury, touch
  std::string body, file, delay, at, ttr, priority, key, max_tries, backoff;
  std::string timeout, count = "1", bound = "1", job, stats_topic, duration, help_topic;
  std::string peek_id;
  std::string lease;  // finish, release, bury, touch
  bool finish = false, ready = false, delayed = false, buried = false;
};

// Everything a subcommand needs to run.
struct Context {
  explicit Context(Args& a) : args(a) {}
  Args& args;
  CLI::App* sub = nullptr;  // the subcommand that runs
  Format format = Format::kText;
  ServerAddress address;
  milliseconds io_timeout{10'000};
  std::unique_ptr<Client> client;
};

// ---- output and errors ---------------------------------------------------------

void Out(std::string_view s) { std::fwrite(s.data(), 1, s.size(), stdout); }

// Prints the failure and returns its exit code. Results printed before it
// go first, so that output and errors merged (2>&1) stay in order.
int Report(const Failure& f) {
  std::fflush(stdout);
  std::fprintf(stderr, "delayq: %s\n", f.message.c_str());
  return static_cast<int>(f.exit);
}

// A usage error found in the arguments, with a pointer to the help.
Failure Usage(const Context& c, std::string message) {
  const std::string where = c.sub != nullptr ? "delayq " + c.sub->get_name() : "delayq";
  return Failure{Exit::kUsage, message + "\nRun '" + where + " --help' for help."};
}

// ---- argument checks ---------------------------------------------------------------

// Each returns a usage failure, or nullopt with the value stored.
using Check = std::optional<Failure>;

Check Topic(const Context& c, const std::string& name) {
  if (IsValidTopicName(name)) return std::nullopt;
  return Usage(
      c, "bad topic name '" + name + "' (1-200 bytes of A-Za-z0-9-+/;.$_() not starting with '-')");
}

Check Key(const Context& c, const std::string& key) {
  if (IsValidKey(key)) return std::nullopt;
  return Usage(c, "bad key '" + key + "' (1-200 bytes of printable ASCII without spaces)");
}

Check Duration(const Context& c, const std::string& text, const char* option, TimeMs* out) {
  auto d = ParseDuration(text);
  if (!d.ok())
    return Usage(c, "bad duration '" + text + "' for " + option +
                        " (milliseconds, or a number with ms, s, m, h or d: 250ms, 30s, 5m)");
  *out = *d;
  return std::nullopt;
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
    auto t = ParseTimeArg(a.at);
    if (!t)
      return Report(Usage(c, "bad time '" + a.at +
                                 "' for --at (epoch milliseconds, or RFC 3339 like "
                                 "2026-05-01T09:00:00Z)"));
    p.run_at = *t;
  }
  if (Given(c, "--ttr")) {
    TimeMs t = 0;
    if (auto f = Duration(c, a.ttr, "--ttr", &t)) return Report(*f);
    if (t < 1) return Report(Usage(c, "--ttr must be at least 1ms"));
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
    auto b = ParseBackoff(a.backoff);
    if (!b.ok() || a.backoff.find(' ') != std::string::npos)
      return Report(Usage(c, "bad back-off '" + a.backoff +
                                 "' (a list like 4m,10m,1h; exp:<base>:<cap> like exp:1s:1h; "
                                 "or none)"));
    p.backoff = a.backoff;
  }
  // The body last: nothing is read before the options are known good.
  const bool has_body = Given(c, "BODY");
  if (has_body && Given(c, "--file")) return Report(Usage(c, "give the body or --file, not both"));
  if (has_body) {
    p.body = a.body;
  } else if (a.file == "-" || (!Given(c, "--file") && !isatty(STDIN_FILENO))) {
    p.body = ReadAll(stdin);
    if (std::ferror(stdin)) return Report(Failure{Exit::kIo, "cannot read standard input"});
  } else if (Given(c, "--file")) {
    std::FILE* f = std::fopen(a.file.c_str(), "rb");
    if (f == nullptr)
      return Report(Failure{Exit::kUsage, "cannot open " + a.file + ": " + std::strerror(errno)});
    p.body = ReadAll(f);
    const bool failed = std::ferror(f) != 0;
    std::fclose(f);
    if (failed) return Report(Failure{Exit::kIo, "cannot read " + a.file});
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

// ---- the command table ------------------------------------------------------------

struct Command {
  const char* name;
  const char* summary;
  const char* footer;  // examples, and what the help should add
  std::function<void(CLI::App*, Args&)> define;
  std::function<int(Context&)> run;
};

void TopicOption(CLI::App* s, Args& a, const char* what) {
  s->add_option("-t,--topic", a.topic, what)->option_text("TOPIC");
}

// The jobs of finish, release, touch and bury (Ids).
void LeasedIds(CLI::App* s, Args& a) {
  s->add_option("ID", a.ids, "Job ids, each as ID@LEASE over HTTP (what reserve printed)")
      ->type_name("")
      ->required();
  s->add_option("--lease", a.lease, "The lease of a single ID (over HTTP)")->option_text("LEASE");
}

const std::vector<Command>& Commands() {
  static const std::vector<Command> table = {
      {"put", "Put a job: ready now, after a delay, or at a time",
       "The body is BODY, the contents of --file, or standard input.\n"
       "Examples:\n"
       "  delayq put -t orders -d 30m -k order-42 'close order 42'\n"
       "  delayq put -t emails --at 2026-05-01T09:00:00Z --file reminder.json\n"
       "  delayq put -t payments --max-tries 7 --backoff 4m,10m,10m,1h,2h,6h,15h < notice.json",
       [](CLI::App* s, Args& a) {
         s->add_option("BODY", a.body, "The job's body (default: --file, or standard input)")
             ->type_name("");
         s->add_option("-f,--file", a.file, "Read the body from FILE ('-': standard input)")
             ->option_text("FILE");
         TopicOption(s, a, "Put into TOPIC (default: default)");
         s->add_option("-d,--delay", a.delay,
                       "Ready after DURATION: ms, or with a unit (250ms, 30s, 5m, 1h, 2d)")
             ->option_text("DURATION");
         s->add_option("--at", a.at,
                       "Ready at TIME: RFC 3339 (2026-05-01T09:00:00Z) or epoch milliseconds")
             ->option_text("TIME")
             ->excludes("--delay");
         s->add_option("--ttr", a.ttr, "Time to run once reserved (default 60s)")
             ->option_text("DURATION");
         s->add_option("-p,--priority", a.priority, "0 (most urgent) .. 4294967295 (default 1024)")
             ->option_text("N");
         s->add_option("-k,--key", a.key,
                       "Idempotent put: while a job with KEY lives in the topic, return it")
             ->option_text("KEY");
         s->add_option("--max-tries", a.max_tries,
                       "Bury the job after N reservations that did not finish it (0: never)")
             ->option_text("N");
         s->add_option("--backoff", a.backoff,
                       "Delays before retries: 4m,10m,1h (the last repeats), exp:1s:1h, none")
             ->option_text("SPEC");
       },
       RunPut},
      {"reserve", "Reserve ready jobs, waiting up to --timeout, and print them",
       "Exits 4 when no job was ready in time. Over HTTP a reserved job stays reserved\n"
       "for its TTR, held by the lease printed with it: finish it with\n"
       "'delayq finish ID@LEASE' (-o lease prints just that); over the beanstalkd\n"
       "protocol the reservation ends when delayq exits, unless --finish deletes the job.\n"
       "Examples:\n"
       "  delayq reserve -t emails -t sms --timeout 30s\n"
       "  job=$(delayq reserve -t orders -o lease) && delayq finish \"$job\"\n"
       "  delayq reserve -t orders --count 10 -o json\n"
       "  delayq reserve -t orders --finish -o body > job.bin",
       [](CLI::App* s, Args& a) {
         s->add_option("-t,--topic", a.topics,
                       "Reserve from TOPIC; repeat for several (default: default)")
             ->option_text("TOPIC")
             ->delimiter(',')
             ->allow_extra_args(false);
         s->add_option("-w,--timeout", a.timeout, "Wait up to DURATION for a job (default 0: none)")
             ->option_text("DURATION");
         s->add_option("-n,--count", a.count, "Reserve up to N jobs at once (1..1000, default 1)")
             ->option_text("N");
         s->add_flag("--finish", a.finish, "Finish (delete) each job once it is printed");
       },
       RunReserve},
      {"finish", "Finish reserved jobs: their work is done, delete them",
       "Over HTTP each job is named with the lease its reserve printed.\n"
       "Examples:\n  delayq finish 3@9f86d081884c7d65\n  delayq finish 3 --lease 9f86d081884c7d65",
       [](CLI::App* s, Args& a) { LeasedIds(s, a); },
       [](Context& c) {
         return EachId(
             c, true, [&c](const JobRef& j) { return c.client->Finish(j.id, j.lease); },
             "finished");
       }},
      {"delete", "Delete jobs in any state, by id or by key",
       "Examples:\n  delayq delete 3 4\n  delayq delete -t orders --key order-42",
       [](CLI::App* s, Args& a) {
         s->add_option("ID", a.ids, "Job ids")->type_name("");
         s->add_option("-k,--key", a.key, "Delete the job with KEY in the topic")
             ->option_text("KEY");
         TopicOption(s, a, "The topic of --key (default: default)");
       },
       RunDelete},
      {"release", "Put reserved jobs back: ready, or delayed",
       "Without --delay the job's back-off applies (none: ready at once).\n"
       "Example:\n  delayq release 3@9f86d081884c7d65 --delay 1m",
       [](CLI::App* s, Args& a) {
         LeasedIds(s, a);
         s->add_option("-d,--delay", a.delay, "Ready again after DURATION")
             ->option_text("DURATION");
         s->add_option("-p,--priority", a.priority, "New priority (default: unchanged)")
             ->option_text("N");
       },
       RunRelease},
      {"bury", "Set reserved jobs aside until they are kicked",
       "Example:\n  delayq bury 3@9f86d081884c7d65",
       [](CLI::App* s, Args& a) {
         LeasedIds(s, a);
         s->add_option("-p,--priority", a.priority, "New priority (default: unchanged)")
             ->option_text("N");
       },
       RunBury},
      {"touch", "Restart the TTR of reserved jobs", "Example:\n  delayq touch 3@9f86d081884c7d65",
       [](CLI::App* s, Args& a) { LeasedIds(s, a); },
       [](Context& c) {
         return EachId(
             c, true, [&c](const JobRef& j) { return c.client->Touch(j.id, j.lease); }, "touched");
       }},
      {"peek", "Show a job: by id, by key, or the next ready, delayed or buried one",
       "--ready, --delayed and --buried need the beanstalkd protocol.\n"
       "Examples:\n"
       "  delayq peek 3\n"
       "  delayq peek -t orders --key order-42\n"
       "  delayq -s beanstalk://127.0.0.1:11300 peek -t orders --buried",
       [](CLI::App* s, Args& a) {
         s->add_option("ID", a.peek_id, "Job id")->type_name("");
         s->add_option("-k,--key", a.key, "The job with KEY in the topic")->option_text("KEY");
         TopicOption(s, a, "The topic of --key, --ready, --delayed, --buried (default: default)");
         s->add_flag("--ready", a.ready, "The next job a reserve would get");
         s->add_flag("--delayed", a.delayed, "The delayed job due first");
         s->add_flag("--buried", a.buried, "The oldest buried job");
       },
       RunPeek},
      {"kick", "Make buried (else delayed) jobs of a topic ready, or one job",
       "Examples:\n  delayq kick -t orders 100\n  delayq kick --job 3",
       [](CLI::App* s, Args& a) {
         s->add_option("BOUND", a.bound,
                       "Kick up to BOUND jobs: buried ones, or if none, delayed (default 1)")
             ->type_name("");
         TopicOption(s, a, "Kick in TOPIC (default: default)");
         s->add_option("--job", a.job, "Kick the buried or delayed job ID alone")
             ->option_text("ID");
       },
       RunKick},
      {"stats", "Show the server's counts, or a topic's with --topic",
       "Examples:\n  delayq stats\n  delayq stats -t orders -o json",
       [](CLI::App* s, Args& a) {
         s->add_option("-t,--topic", a.stats_topic, "Show TOPIC's counts")->option_text("TOPIC");
       },
       RunStats},
      {"topics", "List the topics", "Example:\n  delayq topics", [](CLI::App*, Args&) {},
       RunTopics},
      {"clear", "Delete a topic's jobs, all or those in some states",
       "Reserved jobs are never cleared.\n"
       "Examples:\n  delayq clear -t orders\n  delayq clear -t orders --state buried,delayed",
       [](CLI::App* s, Args& a) {
         s->add_option("-t,--topic", a.topic, "Clear TOPIC (required)")
             ->option_text("TOPIC")
             ->required();
         s->add_option("--state", a.states,
                       "Clear only jobs in STATE: ready, delayed, buried (repeat, or a,b)")
             ->option_text("STATE")
             ->delimiter(',')
             ->allow_extra_args(false);
       },
       RunClear},
      {"pause", "Reserve nothing from a topic for a while (0 ends a pause)",
       "Example:\n  delayq pause -t orders 10m",
       [](CLI::App* s, Args& a) {
         TopicOption(s, a, "Pause TOPIC (default: default)");
         s->add_option("DURATION", a.duration, "How long: 30s, 10m, ... (0: end the pause)")
             ->type_name("")
             ->required();
       },
       RunPause},
  };
  return table;
}

const Command* FindCommand(std::string_view name) {
  for (const Command& c : Commands())
    if (name == c.name) return &c;
  return nullptr;
}

// ---- main ------------------------------------------------------------------------

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

constexpr const char* kFooter =
    "Run 'delayq help COMMAND' or 'delayq COMMAND --help' for a command's options.\n"
    "\n"
    "Exit codes: 0 success, 1 the server refused or failed, 2 usage error,\n"
    "3 not found, 4 reserve found no job in time, 5 connection or I/O failure.\n"
    "Environment: DELAYQ_SERVER (default server), DELAYQ_OUTPUT (text, json or body).\n"
    "Documentation: docs/cli.md.";

int Main(int argc, char** argv) {
  Args args;
  CLI::App app("delayq " + std::string(kVersion) +
                   ": the command-line client of the delayq delay-queue server",
               "delayq");
  app.get_formatter()->column_width(32);
  app.require_subcommand(0, 1);
  app.fallthrough();
  app.footer(kFooter);
  app.add_option("-s,--server", args.server,
                 "http://HOST[:PORT] (default http://127.0.0.1:11380) or beanstalk://HOST[:PORT]")
      ->option_text("URL");
  app.add_option("-o,--output", args.output,
                 "text (default), json (one document per result) or body (a job's body bytes)")
      ->option_text("FORMAT");
  app.add_flag("--json", args.json, "Same as -o json");
  app.add_option("--io-timeout", args.io_timeout,
                 "Give up connecting, or waiting for a reply, after DURATION (default 10s)")
      ->option_text("DURATION");
  app.add_flag("-v,--version", args.version, "Print the version and exit");

  for (const Command& cmd : Commands()) {
    CLI::App* sub = app.add_subcommand(cmd.name, cmd.summary);
    sub->footer(std::string(cmd.footer) +
                "\n\nGlobal options: -s URL, -o FORMAT, --json, --io-timeout DURATION (see "
                "'delayq --help').");
    cmd.define(sub, args);
  }
  CLI::App* help = app.add_subcommand("help", "Show the help of a command");
  help->add_option("COMMAND", args.help_topic, "The command")->type_name("");

  std::vector<std::string> rev;
  for (int i = argc - 1; i > 0; --i) rev.emplace_back(argv[i]);
  try {
    app.parse(rev);
  } catch (const CLI::CallForHelp&) {
    Out(app.help());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    // An unknown word where a command belongs reads better as such.
    if (app.get_subcommands().empty() && dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr &&
        !app.remaining().empty())
      message = "unknown command '" + app.remaining().front() + "'";
    const std::string where =
        app.get_subcommands().empty() ? "delayq" : "delayq " + app.get_subcommands()[0]->get_name();
    std::fprintf(stderr, "delayq: %s\nRun '%s --help' for help.\n", message.c_str(), where.c_str());
    return static_cast<int>(Exit::kUsage);
  }
  if (args.version) {
    Out("delayq " + std::string(kVersion) + "\n");
    return 0;
  }
  if (app.get_subcommands().empty()) {
    std::fputs(app.help().c_str(), stderr);
    return static_cast<int>(Exit::kUsage);
  }
  CLI::App* sub = app.get_subcommands()[0];
  if (sub == help) {
    if (args.help_topic.empty()) {
      // app.help() would show the help of the command that ran: "help".
      Out(app.get_formatter()->make_help(&app, "delayq", CLI::AppFormatMode::Normal));
      return 0;
    }
    if (FindCommand(args.help_topic) == nullptr && args.help_topic != "help") {
      std::fprintf(stderr, "delayq: unknown command '%s'\nRun 'delayq --help' for help.\n",
                   args.help_topic.c_str());
      return static_cast<int>(Exit::kUsage);
    }
    Out(app.get_subcommand(args.help_topic)->help("delayq"));
    return 0;
  }

  Context c(args);
  // Output format: --json, -o, DELAYQ_OUTPUT, text.
  std::string output = args.json              ? "json"
                       : !args.output.empty() ? args.output
                                              : Env("DELAYQ_OUTPUT");
  if (output.empty() || output == "text") {
    c.format = Format::kText;
  } else if (output == "json") {
    c.format = Format::kJson;
  } else if (output == "body") {
    c.format = Format::kBody;
  } else if (output == "lease") {
    c.format = Format::kLease;
  } else {
    return Report(Usage(c, "bad output format '" + output + "' (text, json, body or lease)"));
  }
  // The server: --server, DELAYQ_SERVER, the default.
  std::string url = !args.server.empty() ? args.server : Env("DELAYQ_SERVER");
  if (url.empty()) url = kDefaultServer;
  std::string error;
  auto address = ParseServerUrl(url, &error);
  if (!address) return Report(Usage(c, error));
  c.address = *address;
  if (!args.io_timeout.empty()) {
    TimeMs t = 0;
    if (auto f = Duration(c, args.io_timeout, "--io-timeout", &t)) return Report(*f);
    if (t < 1) return Report(Usage(c, "--io-timeout must be at least 1ms"));
    c.io_timeout = milliseconds(t);
  }
  c.client = MakeClient(c.address, c.io_timeout);
  c.sub = sub;
  const Command* cmd = FindCommand(sub->get_name());
  int code = cmd->run(c);
  if (std::fflush(stdout) != 0 && code == 0) {
    std::fprintf(stderr, "delayq: cannot write the output: %s\n", std::strerror(errno));
    return static_cast<int>(Exit::kIo);
  }
  return code;
}

}  // namespace
}  // namespace delayq::cli

int main(int argc, char** argv) { return delayq::cli::Main(argc, argv); }

// delayq: the command-line client of delayqd (docs/cli.md). It puts,
// reserves, finishes and inspects jobs over the HTTP/JSON API or the
// beanstalkd protocol, whichever --server names, and shows results as text
// or JSON. Results go to stdout, errors to stderr, and the exit code tells
// what happened (Exit in client.h).
//
// Every subcommand is one entry of the command table (Commands()): its
// name, summary, examples, options and what it runs (commands.h).
#include <CLI/CLI.hpp>
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

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/util.h"
#include "delayq/version.h"

namespace delayq::cli {
namespace {

using std::chrono::milliseconds;

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
       [](CLI::App* s, Args& a) { LeasedIds(s, a); }, RunFinish},
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
       [](CLI::App* s, Args& a) { LeasedIds(s, a); }, RunTouch},
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
      {"list", "List a topic's jobs in one state, a page at a time (HTTP)",
       "Oldest (lowest id) first; --desc for newest first. A page ends with 'next: C'\n"
       "when more follow: --after C shows the next page, --all shows them all.\n"
       "Examples:\n"
       "  delayq list orders --state buried\n"
       "  delayq list orders --state delayed --limit 100 --desc\n"
       "  delayq list orders --state ready --after 1234 -o json\n"
       "  delayq list orders --state buried --all",
       [](CLI::App* s, Args& a) {
         s->add_option("TOPIC", a.topic, "The topic")->type_name("")->required();
         s->add_option("--state", a.list_state,
                       "Jobs in STATE: ready (default), delayed, reserved or buried")
             ->option_text("STATE");
         s->add_option("-n,--limit", a.limit, "At most N jobs a page, 1..1000 (default 50)")
             ->option_text("N");
         s->add_flag("--desc", a.desc, "Newest (highest id) first");
         s->add_option("--after", a.after, "Start after cursor C (a page's 'next')")
             ->option_text("C");
         s->add_flag("--all", a.all, "Follow 'next' to the last page");
       },
       RunList},
      {"find", "Find the jobs with a key, in every topic (HTTP)",
       "Shows the job with KEY in each topic you may read (one a topic: keys are unique\n"
       "in a topic). 'delayq peek ID' shows a job by id.\n"
       "Example:\n  delayq find --key order-42",
       [](CLI::App* s, Args& a) {
         s->add_option("-k,--key", a.key, "The key")->option_text("KEY")->required();
       },
       RunFind},
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
      {"token", "Make an access token: its secret, and its entry for the token file",
       "Needs no server. Prints the secret once, and the [[token]] table to add to the\n"
       "file of delayqd's --auth-file (docs/security.md); --hash prints the SHA-256 of a\n"
       "secret read from standard input instead.\n"
       "Examples:\n"
       "  delayq token orders-producer --topic 'orders.*' --right produce\n"
       "  delayq token workers --topic 'orders.*' --topic 'payments.*' --right consume --rate 500\n"
       "  delayq token ops --right admin --right produce --right consume\n"
       "  delayq token --hash < secret.txt",
       [](CLI::App* s, Args& a) {
         s->add_option("NAME", a.token_name, "The token's name (1..64 of A-Za-z0-9._-)")
             ->type_name("");
         s->add_option("-t,--topic", a.patterns,
                       "A topic pattern it may act on ('orders.*'); repeat for more (default *)")
             ->option_text("PATTERN")
             ->delimiter(',')
             ->allow_extra_args(false);
         s->add_option("-r,--right", a.rights, "produce, consume or admin; repeat for more")
             ->option_text("RIGHT")
             ->delimiter(',')
             ->allow_extra_args(false);
         s->add_option("--rate", a.rate, "Most requests per second (default: no limit)")
             ->option_text("N");
         s->add_option("--burst", a.burst, "Most requests at once (default: the rate)")
             ->option_text("N");
         s->add_flag("--hash", a.hash, "Print the SHA-256 of the secret on standard input");
       },
       RunToken},
      {"push", "Give a topic an HTTP target its jobs are sent to, show it, or end it (HTTP)",
       "ACTION is set, get or delete. 'set' replaces the whole target; without --secret\n"
       "it keeps the one the target has, or delayqd makes one and it is printed once\n"
       "(docs/push.md).\n"
       "Examples:\n"
       "  delayq push set orders --url https://example.com/hooks/orders --secret whsec_...\n"
       "  delayq push set orders --url https://example.com/hooks --header 'Authorization: Bearer "
       "x'\n"
       "      --timeout 10s --concurrency 8 --rate 100 --burst 200 --backoff 30s,2m,10m "
       "--max-tries 5\n"
       "  delayq push get orders\n"
       "  delayq push delete orders",
       [](CLI::App* s, Args& a) {
         s->add_option("ACTION", a.push_action, "set, get or delete")->type_name("")->required();
         s->add_option("TOPIC", a.topic, "The topic")->type_name("")->required();
         s->add_option("--url", a.url, "set: where to send the jobs (http:// or https://)")
             ->option_text("URL");
         s->add_option("--secret", a.secret, "set: the whsec_ secret the requests are signed with")
             ->option_text("SECRET");
         s->add_option("--method", a.method, "set: POST (default), PUT, PATCH, GET or DELETE")
             ->option_text("METHOD");
         s->add_option("-H,--header", a.headers, "set: 'Name: value' sent too; repeat for more")
             ->option_text("HEADER")
             ->allow_extra_args(false);
         s->add_option("--timeout", a.timeout, "set: the whole request (default 30s)")
             ->option_text("DURATION");
         s->add_option("--concurrency", a.concurrency, "set: requests at once (default 16)")
             ->option_text("N");
         s->add_option("--rate", a.rate, "set: most requests a second (default: no limit)")
             ->option_text("N");
         s->add_option("--burst", a.burst, "set: most requests at once after a quiet spell")
             ->option_text("N");
         s->add_option("--backoff", a.backoff,
                       "set: delays between tries (default 30s,2m,10m,1h,6h)")
             ->option_text("SPEC");
         s->add_option("--max-tries", a.max_tries, "set: tries before a job is buried (default 10)")
             ->option_text("N");
         s->add_flag("--follow-redirects", a.follow_redirects, "set: follow 3xx answers");
       },
       RunPush},
      {"schedule", "Make, show, list, pause, resume or delete recurring schedules (HTTP)",
       "ACTION is set, get, list, pause, resume or delete. 'set' makes the schedule or\n"
       "replaces it whole (a replacement keeps the times '@every' counts from); each\n"
       "firing puts one job into --topic. The job's body is --body, the contents of\n"
       "--body-file, or standard input; --from-json gives the whole schedule as\n"
       "PUT /schedules/{name} takes it ('-': from standard input). 'get' shows the\n"
       "schedule and its next five fire times (docs/schedules.md).\n"
       "Examples:\n"
       "  delayq schedule set nightly-report --cron '30 2 * * *' --tz Europe/Berlin -t reports\n"
       "      --body 'build the report' --ttr 10m --max-tries 3\n"
       "  delayq schedule set heartbeat --cron '@every 30s' -t health --body ping --missed one\n"
       "  delayq schedule set digest --from-json - < digest.json\n"
       "  delayq schedule get nightly-report\n"
       "  delayq schedule list\n"
       "  delayq schedule pause heartbeat\n"
       "  delayq schedule delete heartbeat",
       [](CLI::App* s, Args& a) {
         s->add_option("ACTION", a.schedule_action, "set, get, list, pause, resume or delete")
             ->type_name("")
             ->required();
         s->add_option("NAME", a.schedule_name, "The schedule (1-150 of A-Za-z0-9._-)")
             ->type_name("");
         s->add_option("--cron", a.cron,
                       "set: when it fires: 5 fields, 6 with seconds first, @daily, @every 30s")
             ->option_text("EXPR");
         s->add_option("--tz", a.tz, "set: the IANA zone the fields are read in (default UTC)")
             ->option_text("ZONE");
         s->add_option("-t,--topic", a.topic, "set: the topic each firing puts its job into")
             ->option_text("TOPIC");
         s->add_option("--body", a.body, "set: the job's body")->option_text("TEXT");
         s->add_option("--body-file", a.file, "set: the job's body from FILE ('-': standard input)")
             ->option_text("FILE");
         s->add_option("-p,--priority", a.priority, "set: the job's priority (default 1024)")
             ->option_text("N");
         s->add_option("--ttr", a.ttr, "set: the job's time to run (default 60s)")
             ->option_text("DURATION");
         s->add_option("-d,--delay", a.delay, "set: the job is ready DURATION after the fire time")
             ->option_text("DURATION");
         s->add_option("--max-tries", a.max_tries, "set: the job's tries before it is buried")
             ->option_text("N");
         s->add_option("--backoff", a.backoff, "set: the job's delays between tries (4m,10m,1h)")
             ->option_text("SPEC");
         s->add_option("--start", a.start, "set: no firing before TIME (RFC 3339 or epoch ms)")
             ->option_text("TIME");
         s->add_option("--end", a.end, "set: no firing after TIME")->option_text("TIME");
         s->add_option("--missed", a.missed,
                       "set: firings missed while no delayqd ran: skip (default) or one")
             ->option_text("POLICY");
         s->add_flag("--paused", a.paused, "set: make it paused (no firing until resumed)");
         s->add_option("--from-json", a.from_json,
                       "set: the whole schedule as JSON ('-': standard input)")
             ->option_text("JSON");
       },
       RunSchedule},
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
  app.add_option("--token-file", args.token_file,
                 "Authenticate with the secret on FILE's first line (or DELAYQ_TOKEN)")
      ->option_text("FILE");
  app.add_flag("-v,--version", args.version, "Print the version and exit");

  for (const Command& cmd : Commands()) {
    CLI::App* sub = app.add_subcommand(cmd.name, cmd.summary);
    sub->footer(std::string(cmd.footer) +
                "\n\nGlobal options: -s URL, -o FORMAT, --json, --io-timeout DURATION, "
                "--token-file FILE (see "
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
  // The token: --token-file, DELAYQ_TOKEN_FILE, DELAYQ_TOKEN (never a flag
  // of its own: the process list would show it).
  const std::string token_file =
      !args.token_file.empty() ? args.token_file : Env("DELAYQ_TOKEN_FILE");
  if (!token_file.empty()) {
    std::FILE* f = std::fopen(token_file.c_str(), "rb");
    char line[1024] = {};
    const bool read = f != nullptr && std::fgets(line, sizeof line, f) != nullptr;
    if (f != nullptr) std::fclose(f);
    c.address.token = line;
    while (!c.address.token.empty() &&
           (c.address.token.back() == '\n' || c.address.token.back() == '\r'))
      c.address.token.pop_back();
    if (!read || c.address.token.empty())
      return Report(Usage(c, "cannot read a secret from the first line of " + token_file));
  } else {
    c.address.token = Env("DELAYQ_TOKEN");
  }
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

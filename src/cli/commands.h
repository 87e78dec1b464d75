// The subcommands of delayq, the command-line client (docs/cli.md), apart
// from the table that names them and defines their options (delayq.cc):
// each checks what the command line said, makes its calls through a Client
// and prints the results to stdout, or its failure to stderr, and returns
// the exit code (Exit in client.h).
//
// Thread: the client's one thread.
#ifndef DELAYQ_CLI_COMMANDS_H_
#define DELAYQ_CLI_COMMANDS_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/client.h"
#include "cli/output.h"
#include "cli/util.h"
#include "delayq/types.h"

namespace CLI {
class App;
}  // namespace CLI

namespace delayq::cli {

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
  // list
  std::string list_state = "ready", limit = "50", after;
  bool desc = false, all = false;
  bool finish = false, ready = false, delayed = false, buried = false;
  // token
  std::string token_name, rate, burst;
  std::vector<std::string> patterns, rights;
  bool hash = false;
  // push
  std::string push_action, url, secret, method, concurrency;
  std::vector<std::string> headers;
  bool follow_redirects = false;
  // schedule (the job's fields are put's: body, file, priority, ttr, ...)
  std::string schedule_action, schedule_name, cron, tz, start, end, missed, from_json;
  bool paused = false;
  // Global: the file whose first line is the secret to present.
  std::string token_file;
};

// Everything a subcommand needs to run.
struct Context {
  explicit Context(Args& a) : args(a) {}
  Args& args;
  CLI::App* sub = nullptr;  // the subcommand that runs
  Format format = Format::kText;
  ServerAddress address;
  std::chrono::milliseconds io_timeout{10'000};
  std::unique_ptr<Client> client;
};

// ---- output and errors ---------------------------------------------------------

// Writes `s` to stdout as it is.
void Out(std::string_view s);
// Prints the failure and returns its exit code. Results printed before it
// go first, so that output and errors merged (2>&1) stay in order.
int Report(const Failure& f);
// A usage error found in the arguments, with a pointer to the help.
Failure Usage(const Context& c, std::string message);

// ---- argument checks ---------------------------------------------------------------

// Each returns a usage failure, or nullopt with the value stored.
using Check = std::optional<Failure>;

// `text` as a duration (ParseDuration) given for `option`, into *out.
Check Duration(const Context& c, const std::string& text, const char* option, TimeMs* out);

// ---- the subcommands -------------------------------------------------------------

// Each runs with c.sub, c.format, c.address and c.client set, and returns
// the exit code.
int RunPut(Context& c);
int RunReserve(Context& c);
int RunFinish(Context& c);
int RunDelete(Context& c);
int RunRelease(Context& c);
int RunBury(Context& c);
int RunTouch(Context& c);
int RunPeek(Context& c);
int RunKick(Context& c);
int RunStats(Context& c);
int RunTopics(Context& c);
int RunClear(Context& c);
int RunPause(Context& c);
// A page of a topic's jobs in one state (--all: every page), and the jobs
// with a key in every topic: a table of jobs, or each reply as JSON.
int RunList(Context& c);
int RunFind(Context& c);
// A topic's push target: `push set|get|delete TOPIC` (docs/push.md).
int RunPush(Context& c);
// Schedules: `schedule set|get|list|pause|resume|delete [NAME]`
// (docs/schedules.md).
int RunSchedule(Context& c);
// Makes a token (no server needed): its secret, digest and token-file entry.
int RunToken(Context& c);

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_COMMANDS_H_

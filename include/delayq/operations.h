// The operation table: one declarative row for each operation a client can
// ask of delayq, whatever the protocol. It is the one place that says how
// each front-end spells an operation (a beanstalkd command, an HTTP route),
// whether the operation changes the queue (and so is answered only once
// the change is as durable as --fsync promises), whether it may wait, which
// counter of beanstalkd's `stats` counts it, which right it needs and which
// metric label counts it.
//
// Read by: the beanstalkd front-end (its `cmd-*` counters and `stats`
// lines), the HTTP API (its routes are made from the `http` column), the
// Local backend (whether a reply waits for the store), GET /stats, and the
// tests that check every row is served by its front-ends and documented
// (docs/architecture.md, "Operations", is generated from this table).
// Adding an operation: docs/architecture.md, "Adding an operation".
//
// Invariants (checked at compile time below): the rows are in the order of
// Op, so kOperations[op] is op's row; rows with a `stat` come first, in the
// order beanstalkd 1.12's `stats` prints its cmd-* lines.
//
// Thread: immutable; any thread.
#ifndef DELAYQ_OPERATIONS_H_
#define DELAYQ_OPERATIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace delayq {

enum class Op : uint8_t {
  // beanstalkd's counted commands, in the order of its `stats`
  kPut,
  kPeek,
  kPeekReady,
  kPeekDelayed,
  kPeekBuried,
  kReserve,
  kReserveWithTimeout,
  kDelete,
  kRelease,
  kUse,
  kWatch,
  kIgnore,
  kBury,
  kKick,
  kTouch,
  kStats,
  kStatsJob,
  kStatsTopic,
  kListTopics,
  kListTopicUsed,
  kListTopicsWatched,
  kPauseTopic,
  // the rest
  kReserveJob,
  kKickJob,
  kQuit,
  kFinish,
  kDeleteKey,
  kPeekKey,
  kReserveBatch,
  kClearTopic,
  kHealth,
  kAuth,
  kListJobs,
  kFindJobs,
  kMetrics,
  kUi,
  kWhoami,
  kSetPush,
  kGetPush,
  kDeletePush,
  kPutSchedule,
  kGetSchedule,
  kDeleteSchedule,
};

// The right an operation needs (docs/architecture.md, "Operations";
// docs/security.md): kPublic is open to every caller, even one not
// authenticated; kAuthenticated to any authenticated or trusted caller,
// with no right on a topic; kRead needs any right on the topic it reads;
// kProduce, kConsume and kAdmin that right.
enum class Scope : uint8_t { kPublic, kAuthenticated, kRead, kProduce, kConsume, kAdmin };
// "public", "authenticated", "read", "produce", "consume", "admin"
std::string_view ScopeName(Scope s);

struct Operation {
  Op op;
  // Stable name: logs, docs, GET /stats.
  std::string_view name;
  // The beanstalkd commands that ask for it, separated by spaces; empty if
  // that protocol has none.
  std::string_view beanstalk;
  // The HTTP routes that ask for it, "METHOD /path" with {name} for a path
  // parameter, separated by ", "; empty if the HTTP API has none.
  std::string_view http;
  // It changes the queue: on the Local backend its reply waits until the
  // change is as durable as --fsync promises.
  bool durable;
  // Its reply may wait for a job to come (a reserve).
  bool may_wait;
  // Its counter in beanstalkd's `stats` ("cmd-put"), counting the
  // beanstalkd commands that asked for it; empty: none.
  std::string_view stat;
  Scope scope;
  // The `op` label of the operation metrics: several rows may share one.
  std::string_view metric;
};

// clang-format off
inline constexpr Operation kOperations[] = {
  // op                       name                  beanstalk               http                                                                  durable may_wait stat                          scope             metric
  {Op::kPut,                "put",                "put put-ex",           "POST /topics/{topic}/jobs, POST /push",                              true,  false, "cmd-put",                  Scope::kProduce, "put"},
  {Op::kPeek,               "peek",               "peek",                 "GET /jobs/{id}, POST /get",                                          false, false, "cmd-peek",                 Scope::kRead,    "peek"},
  {Op::kPeekReady,          "peek-ready",         "peek-ready",           "",                                                                   false, false, "cmd-peek-ready",           Scope::kRead,    "peek"},
  {Op::kPeekDelayed,        "peek-delayed",       "peek-delayed",         "",                                                                   false, false, "cmd-peek-delayed",         Scope::kRead,    "peek"},
  {Op::kPeekBuried,         "peek-buried",        "peek-buried",          "",                                                                   false, false, "cmd-peek-buried",          Scope::kRead,    "peek"},
  {Op::kReserve,            "reserve",            "reserve",              "POST /topics/{topic}/reserve, POST /reserve, POST /pop",             false, true,  "cmd-reserve",              Scope::kConsume, "reserve"},
  {Op::kReserveWithTimeout, "reserve-with-timeout", "reserve-with-timeout", "",                                                                 false, true,  "cmd-reserve-with-timeout", Scope::kConsume, "reserve"},
  {Op::kDelete,             "delete",             "delete",               "DELETE /jobs/{id}, POST /delete",                                    true,  false, "cmd-delete",               Scope::kAdmin,   "delete"},
  {Op::kRelease,            "release",            "release",              "POST /jobs/{id}/release",                                            true,  false, "cmd-release",              Scope::kConsume, "release"},
  {Op::kUse,                "use",                "use",                  "",                                                                   false, false, "cmd-use",                  Scope::kRead,    "session"},
  {Op::kWatch,              "watch",              "watch",                "",                                                                   false, false, "cmd-watch",                Scope::kConsume, "session"},
  {Op::kIgnore,             "ignore",             "ignore",               "",                                                                   false, false, "cmd-ignore",               Scope::kAuthenticated, "session"},
  {Op::kBury,               "bury",               "bury",                 "POST /jobs/{id}/bury",                                               true,  false, "cmd-bury",                 Scope::kConsume, "bury"},
  {Op::kKick,               "kick",               "kick",                 "POST /topics/{topic}/kick",                                          true,  false, "cmd-kick",                 Scope::kAdmin,   "kick"},
  {Op::kTouch,              "touch",              "touch",                "POST /jobs/{id}/touch",                                              false, false, "cmd-touch",                Scope::kConsume, "touch"},
  {Op::kStats,              "stats",              "stats",                "GET /stats",                                                         false, false, "cmd-stats",                Scope::kAdmin,   "stats"},
  {Op::kStatsJob,           "stats-job",          "stats-job",            "",                                                                   false, false, "cmd-stats-job",            Scope::kRead,    "stats"},
  {Op::kStatsTopic,         "stats-topic",        "stats-tube",           "GET /topics/{topic}",                                                false, false, "cmd-stats-tube",           Scope::kRead,    "stats"},
  {Op::kListTopics,         "list-topics",        "list-tubes",           "GET /topics",                                                        false, false, "cmd-list-tubes",           Scope::kRead,    "stats"},
  {Op::kListTopicUsed,      "list-topic-used",    "list-tube-used",       "",                                                                   false, false, "cmd-list-tube-used",       Scope::kAuthenticated, "session"},
  {Op::kListTopicsWatched,  "list-topics-watched", "list-tubes-watched",  "",                                                                   false, false, "cmd-list-tubes-watched",   Scope::kAuthenticated, "session"},
  {Op::kPauseTopic,         "pause-topic",        "pause-tube",           "POST /topics/{topic}/pause",                                         false, false, "cmd-pause-tube",           Scope::kAdmin,   "pause"},
  {Op::kReserveJob,         "reserve-job",        "reserve-job",          "",                                                                   false, false, "",                         Scope::kConsume, "reserve"},
  {Op::kKickJob,            "kick-job",           "kick-job",             "POST /jobs/{id}/kick",                                               true,  false, "",                         Scope::kAdmin,   "kick"},
  {Op::kQuit,               "quit",               "quit",                 "",                                                                   false, false, "",                         Scope::kPublic,  "session"},
  {Op::kFinish,             "finish",             "",                     "POST /jobs/{id}/finish, POST /finish",                               true,  false, "",                         Scope::kConsume, "finish"},
  {Op::kDeleteKey,          "delete-key",         "delete-key",           "DELETE /topics/{topic}/keys/{key}",                                  true,  false, "",                         Scope::kAdmin,   "delete"},
  {Op::kPeekKey,            "peek-key",           "peek-key",             "GET /topics/{topic}/keys/{key}",                                     false, false, "",                         Scope::kRead,    "peek"},
  {Op::kReserveBatch,       "reserve-batch",      "reserve-batch",        "",                                                                   false, true,  "",                         Scope::kConsume, "reserve"},
  {Op::kClearTopic,         "clear-topic",        "clear-tube",           "POST /topics/{topic}/clear",                                         true,  false, "",                         Scope::kAdmin,   "clear"},
  {Op::kHealth,             "health",             "",                     "GET /healthz",                                                       false, false, "",                         Scope::kPublic,  "health"},
  {Op::kAuth,               "auth",               "auth",                 "",                                                                   false, false, "",                         Scope::kPublic,  "auth"},
  {Op::kListJobs,           "list-jobs",          "",                     "GET /topics/{topic}/jobs",                                           false, false, "",                         Scope::kRead,    "list"},
  {Op::kFindJobs,           "find-jobs",          "",                     "GET /jobs",                                                          false, false, "",                         Scope::kRead,    "peek"},
  {Op::kMetrics,            "metrics",            "",                     "GET /metrics",                                                       false, false, "",                         Scope::kAdmin,   "metrics"},
  {Op::kUi,                 "ui",                 "",                     "GET /ui, GET /ui/{file}",                                            false, false, "",                         Scope::kPublic,  "ui"},
  {Op::kWhoami,             "whoami",             "",                     "GET /whoami",                                                        false, false, "",                         Scope::kAuthenticated, "auth"},
  {Op::kSetPush,            "set-push",           "",                     "PUT /topics/{topic}/push",                                           true,  false, "",                         Scope::kAdmin,   "push"},
  {Op::kGetPush,            "get-push",           "",                     "GET /topics/{topic}/push",                                           false, false, "",                         Scope::kRead,    "push"},
  {Op::kDeletePush,         "delete-push",        "",                     "DELETE /topics/{topic}/push",                                        true,  false, "",                         Scope::kAdmin,   "push"},
  {Op::kPutSchedule,        "put-schedule",       "",                     "PUT /schedules/{name}, POST /schedules/{name}/pause, POST /schedules/{name}/resume", true, false, "", Scope::kAdmin, "schedule"},
  {Op::kGetSchedule,        "get-schedule",       "",                     "GET /schedules, GET /schedules/{name}",                              false, false, "",                         Scope::kRead,    "schedule"},
  {Op::kDeleteSchedule,     "delete-schedule",    "",                     "DELETE /schedules/{name}",                                           true,  false, "",                         Scope::kAdmin,   "schedule"},
};
// clang-format on

inline constexpr size_t kNumOps = sizeof kOperations / sizeof kOperations[0];

namespace operations_internal {
constexpr bool RowsInOrder() {
  bool stats_done = false;
  for (size_t i = 0; i < kNumOps; ++i) {
    if (static_cast<size_t>(kOperations[i].op) != i) return false;
    if (kOperations[i].stat.empty()) stats_done = true;
    if (stats_done && !kOperations[i].stat.empty()) return false;
    if (kOperations[i].beanstalk.empty() && kOperations[i].http.empty()) return false;
  }
  return true;
}
}  // namespace operations_internal
static_assert(operations_internal::RowsInOrder(),
              "kOperations: rows in Op order, stat rows first, each with a front-end");
static_assert(static_cast<size_t>(Op::kDeleteSchedule) + 1 == kNumOps, "kOperations: a row per Op");

constexpr const Operation& OperationOf(Op op) { return kOperations[static_cast<size_t>(op)]; }

// A row's beanstalkd commands ("put", "put-ex") and HTTP routes
// ("POST /push"), each as its column spells it; empty for none.
std::vector<std::string_view> BeanstalkCommandsOf(const Operation& o);
std::vector<std::string_view> HttpRoutesOf(const Operation& o);

// The table as the Markdown of docs/architecture.md, "Operations".
std::string OperationsMarkdownTable();

}  // namespace delayq

#endif  // DELAYQ_OPERATIONS_H_

// The queue operations every front-end (beanstalkd protocol, HTTP, CLI)
// calls, behind one interface, so that the Local backend (engine + store in
// this process) and the Redis backend (many instances over Redis) plug in
// beneath them unchanged.
//
// Asynchronous: each operation takes a completion that runs on the loop
// thread that owns the backend, either before the call returns or later
// (after the change is durable, after a Redis round trip, when a waiting
// reserve is served). Completions of one session run in the order the
// operations were issued, except that a pending reserve completes when a
// job, its timeout or DEADLINE_SOON arrives.
//
// Job views passed to a completion are valid only during that call.
//
// Every operation names the session it is made for (an operator tool may
// open one of its own): a completion still due when its session closes is
// dropped, never called.
//
// Thread: every method must be called on the backend's loop thread.
#ifndef DELAYQ_BACKEND_BACKEND_H_
#define DELAYQ_BACKEND_BACKEND_H_

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/engine.h"
#include "delayq/histogram.h"
#include "delayq/status.h"
#include "delayq/types.h"

namespace delayq::backend {

template <typename T>
using Callback = std::function<void(Result<T>)>;
// The longest name of a named object (Backend::PutObject).
inline constexpr size_t kMaxObjectNameLength = 200;
// kInvalidArgument for an empty name or one longer than
// kMaxObjectNameLength: what every backend's PutObject and DeleteObject
// check first.
inline Status CheckObjectName(std::string_view name) {
  if (name.empty()) return Status::InvalidArgument("an object needs a name");
  if (name.size() > kMaxObjectNameLength)
    return Status::InvalidArgument("an object's name is longer than " +
                                   std::to_string(kMaxObjectNameLength) + " bytes");
  return Status::Ok();
}
using Done = std::function<void(Status)>;
// A batch of jobs (reserve, reserve-job, peeks); views valid during the call.
using Jobs = std::span<const JobView>;
using JobsDone = std::function<void(Status, Jobs)>;
// A page of jobs (ListJobs), and whether more may follow it.
using PageDone = std::function<void(Status, Jobs, bool more)>;

// Who acts on a job (docs/engine.md, "Leases"): a session (a beanstalkd
// connection holds the jobs it reserved; session 0 is an operator, who may
// act on any job), or the lease that a reserve with `detach` answered
// with the job (JobView::lease), which alone holds it while the
// reservation lasts. Implicit from a session id.
struct Claim {
  Claim(SessionId s = 0, std::string_view l = {}) : session(s), lease(l) {}  // NOLINT: implicit
  SessionId session;
  std::string_view lease;  // empty: none
};

// What a backend is: which front-end figures it can give.
struct BackendInfo {
  std::string name;  // "local", "redis"
  size_t max_job_size = 0;
};

// What GET /metrics shows of a backend beyond the jobs
// (docs/operations.md, "Metrics").
struct StoreMetrics {  // the Local backend's store
  LatencyHistogram sync;
  uint64_t disk_bytes = 0;
  uint64_t cold_jobs = 0;     // on disk only, beyond the horizon
  uint64_t write_errors = 0;  // writes the store or the journal refused
  uint64_t loop_syncs = 0;    // always: syncs the loop made itself (one client alone)
  bool healthy = true;        // the store takes writes
};
struct RedisMetrics {  // the Redis backend's connections
  uint64_t calls = 0;  // commands answered or lost, every connection's
  LatencyHistogram call_duration;
  uint64_t reconnects = 0;  // connections made again after one was lost
  bool connected = false;
};
struct BackendMetrics {
  // Changes go through: the store takes writes (local), Redis answers.
  bool healthy = true;
  std::optional<StoreMetrics> store;  // local, with a store
  std::optional<RedisMetrics> redis;  // Redis
};

// The outcomes of operations, counted where the front-ends call the backend
// (CountingBackend): one counter per (operation, outcome) pair, a plain
// increment on the loop thread.
enum class CountedOp : uint8_t { kPut, kReserve, kFinish, kRelease, kBury, kKick, kDelete, kTouch };
inline constexpr size_t kNumCountedOps = 8;
// The Status codes a backend answers, in a few kinds (OutcomeOf).
enum class Outcome : uint8_t {
  kOk,
  kNotFound,
  kConflict,
  kLeaseLost,
  kInvalid,
  kLimit,
  kTimedOut,
  kUnavailable,
  kError,
};
inline constexpr size_t kNumOutcomes = 9;
// "put", "reserve", ...: the `op` label (the operation table's metric labels).
std::string_view CountedOpName(CountedOp op);
// "ok", "not_found", "conflict", "lease_lost", "invalid", "limit",
// "timed_out", "unavailable", "error".
std::string_view OutcomeName(Outcome o);
// kInvalidArgument, kJobTooBig, kNotIgnored: kInvalid; kResourceExhausted,
// kDraining, kRateLimited: kLimit; kTimedOut, kDeadlineSoon: kTimedOut;
// kInternal, kCorruption and the rest: kError.
Outcome OutcomeOf(Code c);

struct OperationOutcomes {
  std::array<std::array<uint64_t, kNumOutcomes>, kNumCountedOps> n{};
  void Count(CountedOp op, Code c) {
    n[static_cast<size_t>(op)][static_cast<size_t>(OutcomeOf(c))]++;
  }
  uint64_t Of(CountedOp op, Outcome o) const {
    return n[static_cast<size_t>(op)][static_cast<size_t>(o)];
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const BackendInfo& info() const = 0;

  // ---- sessions (state kept by the instance; synchronous) --------------
  virtual SessionId OpenSession() = 0;
  // Cancels a pending reserve (its completion is dropped, not called) and
  // returns the jobs the session reserved.
  virtual void CloseSession(SessionId s) = 0;
  virtual Status Use(SessionId s, std::string_view topic) = 0;
  virtual Result<size_t> Watch(SessionId s, std::string_view topic) = 0;
  virtual Result<size_t> Ignore(SessionId s, std::string_view topic) = 0;
  virtual std::string UsedTopic(SessionId s) const = 0;
  virtual std::vector<std::string> WatchedTopics(SessionId s) const = 0;

  // ---- operations --------------------------------------------------------
  // Uses up a job id without a job (a failed upload, as beanstalkd does).
  virtual void DiscardJobId() = 0;
  virtual void Put(SessionId s, const PutRequest& r, Callback<PutResult> done) = 0;
  // Completes with the reserved jobs, or kTimedOut / kDeadlineSoon.
  virtual void Reserve(const ReserveRequest& r, JobsDone done) = 0;
  // The session's reserve is not answered: not later, even when the
  // backend was still asking for it (on Redis a job it took meanwhile goes
  // back as if never reserved). Not for a reserve already served
  // (ReserveServed): its answer comes.
  virtual void CancelReserve(SessionId s) = 0;
  // The session's reserve has taken its jobs and its answer only waits for
  // their puts to be durable (Local, docs/decisions.md): no cancel stops
  // it any more.
  virtual bool ReserveServed(SessionId) const { return false; }
  virtual void ReserveJob(SessionId s, JobId id, JobsDone done) = 0;
  // Operations on one job, each one atomic call that answers the job and
  // the state it left it in, or refuses without changing anything:
  // kNotFound (no such job), kLeaseLost (the claim's lease does not hold
  // it), kConflict (not in a state the operation applies to, or held by
  // another; the message says which). See Engine for each.
  virtual void Delete(const Claim& c, JobId id, Callback<JobChange> done) = 0;
  virtual void DeleteByKey(const Claim& c, std::string_view topic, std::string_view key,
                           Callback<JobChange> done) = 0;
  virtual void Finish(const Claim& c, JobId id, Callback<JobChange> done) = 0;
  virtual void Release(const Claim& c, JobId id, std::optional<uint32_t> priority,
                       std::optional<TimeMs> delay, Callback<JobChange> done) = 0;
  virtual void Bury(const Claim& c, JobId id, std::optional<uint32_t> priority,
                    Callback<JobChange> done) = 0;
  virtual void Touch(const Claim& c, JobId id, Callback<JobChange> done) = 0;
  // Release (with the job's own priority) and Bury of a failed push try
  // (delivery/push_dispatcher): the same, and in the same atomic call the
  // try's answer is kept with the job, replacing the one it had
  // (JobView::answered; docs/push.md, "Retries"): no second round trip on
  // Redis, and no state in which the job is settled without its answer.
  virtual void ReleaseAnswered(const Claim& c, JobId id, std::optional<TimeMs> delay,
                               const PushAnswer& answer, Callback<JobChange> done) = 0;
  virtual void BuryAnswered(const Claim& c, JobId id, const PushAnswer& answer,
                            Callback<JobChange> done) = 0;
  // By name (docs/engine.md, "Names"), as an operator: the live job whose
  // name it is (PutRequest::named), or else, when `name` is a job id in
  // decimal (no sign, no leading zero), that job if it has no name.
  // FinishByName deletes it if it is reserved (by anyone), else refuses
  // with kConflict and the state found; DeleteByName deletes it in any
  // state. kNotFound when the name names no job. One atomic call.
  virtual void FinishByName(std::string_view name, Callback<JobChange> done) = 0;
  virtual void DeleteByName(std::string_view name, Callback<JobChange> done) = 0;
  virtual void Kick(SessionId s, std::string_view topic, uint64_t bound,
                    Callback<uint64_t> done) = 0;
  virtual void KickJob(SessionId s, JobId id, Callback<JobChange> done) = 0;

  // kName: the job `key` names across topics (below); topic is not used.
  enum class PeekKind : uint8_t { kId, kKey, kReady, kDelayed, kBuried, kName };
  // id for kId; topic (and key for kKey) otherwise.
  virtual void Peek(SessionId s, PeekKind kind, JobId id, std::string_view topic,
                    std::string_view key, JobsDone done) = 0;
  // The topic of job `id` when this backend can tell at once, without a
  // call (local: the job is in memory); else nullopt, and Peek tells.
  // Valid until the next call. For scope checks (server/access.h).
  virtual std::optional<std::string_view> KnownTopicOf(JobId) const { return std::nullopt; }
  virtual void StatsJob(JobId id, Callback<JobStats> done) = 0;
  // A page of a topic's jobs in one state, in id order after a cursor
  // (ListJobsRequest; docs/http-api.md, "Browsing jobs"); an unknown topic
  // has none. Its cost grows with the jobs of that topic in that state,
  // never with the other topics' (docs/engine.md, docs/redis-backend.md:
  // on Redis, calls that each read a bounded part).
  virtual void ListJobs(const ListJobsRequest& r, PageDone done) = 0;
  // The live job with user key `key` in each topic that has one.
  virtual void FindKey(std::string_view key, JobsDone done) = 0;
  // What an engine in this process counts for /metrics (lateness, waits,
  // buries for max_tries): the local backend's; null where the jobs' state
  // lives elsewhere (Redis).
  virtual const EngineMetrics* engine_metrics() const { return nullptr; }
  // The outcomes of operations counted so far: CountingBackend's; null
  // where nothing counts them (a build without DELAYQ_COUNT_METRICS).
  virtual const OperationOutcomes* operation_outcomes() const { return nullptr; }
  // Health and the store's or Redis's figures, now (the store's size is
  // read from the disk).
  virtual BackendMetrics SampleMetrics() const { return {}; }
  virtual void StatsTopic(std::string_view topic, Callback<TopicStats> done) = 0;
  // StatsTopic of every topic ListTopics names, in its order, in one call
  // (local: one pass over the engine; Redis: the topics' scripts
  // pipelined).
  virtual void TopicsStats(Callback<std::vector<TopicStats>> done) = 0;
  virtual void Stats(Callback<EngineStats> done) = 0;
  virtual void ListTopics(Callback<std::vector<std::string>> done) = 0;
  virtual void PauseTopic(std::string_view topic, TimeMs delay_ms, Done done) = 0;
  virtual void ClearTopic(SessionId s, std::string_view topic, uint8_t mask,
                          Callback<uint64_t> done) = 0;

  // ---- named objects (docs/storage.md, "Named objects") -----------------
  // Settings kept with the queue itself (push targets, schedules): durable
  // as jobs are (Local: in the store's batches, acknowledged once as
  // durable as --fsync says), shared by every instance on Redis. A value
  // is JSON text. Names are ≤ kMaxObjectNameLength bytes, not empty
  // (kInvalidArgument). While the store refuses writes, PutObject and
  // DeleteObject fail with kUnavailable.
  virtual void PutObject(ObjectKind kind, std::string_view name, std::string_view value,
                         Done done) = 0;
  // kNotFound: no object of that kind has that name.
  virtual void DeleteObject(ObjectKind kind, std::string_view name, Done done) = 0;
  // Every object of `kind`, by name (bytewise).
  virtual void ListObjects(ObjectKind kind, Callback<std::vector<StoredObject>> done) = 0;
  // A number that changes whenever an object of `kind` is put or deleted
  // (on Redis, by any instance): a poller lists the objects again only
  // when it moved. Never 0 once an object of the kind was ever changed.
  virtual void ObjectsVersion(ObjectKind kind, Callback<uint64_t> done) = 0;

  // A schedule's firing (docs/schedules.md, "Exactly once"): in one atomic
  // step, puts `r` (as the operator, into r.topic; r.key is the firing's
  // key) unless the firing of `schedule` at `fire_ms`, or a later one, was
  // made already, and records that it was made (the schedule's cursor).
  // Answers the put's result, or kConflict ("fired already") without a
  // change. The cursor moves only with a put that answers a job, made or
  // found by its key. Local: the cursor is an object of kind
  // kScheduleCursor, written in the put's batch; Redis: a field of the
  // job's topic's `cursors` hash, moved by the put's own function.
  //
  // The cursor's value is "<fire_ms> <revision> <the fire time it held
  // before>" (a bare "<fire_ms>" was written before firings were made
  // ahead): `revision` names the schedule's version that made the firing
  // (no spaces), so that UnfireSchedule takes back only that version's.
  virtual void FireSchedule(std::string_view schedule, TimeMs fire_ms, std::string_view revision,
                            const PutRequest& r, Callback<PutResult> done) = 0;
  // Takes back a firing made ahead of its time (docs/schedules.md, "When a
  // firing is made") when its schedule changed since: in one atomic step,
  // if the cursor of `schedule` in `topic` says the firing at `fire_ms` was
  // made by `revision`, that time has not come, and the job with `key` in
  // `topic` is still delayed, deletes the job and gives the cursor back
  // the fire time it held before. Answers whether it did; false (and no
  // change) otherwise, which is no error: another instance took it back,
  // or the job is due or was deleted already.
  virtual void UnfireSchedule(std::string_view schedule, std::string_view topic, TimeMs fire_ms,
                              std::string_view revision, std::string_view key,
                              Callback<bool> done) = 0;

  // Epoch milliseconds as the backend sees them (for stats and replies).
  virtual TimeMs Now() const = 0;

  // For the loop's polling (server/event_loop.h, LoopHooks): whether
  // replies wait for another thread of the backend (the store's writer) to
  // make their changes durable, and how many of that thread's completions
  // have run on the loop thread so far.
  virtual bool RepliesWaitForStore() const { return false; }
  // Whether the changes handed to the store and not yet written are past
  // the backend's bound (the store slower than its clients, as when RocksDB
  // stalls under a flood of large puts). A front-end then runs no command
  // of a client past one that found the store behind until a reply of the
  // client's has left, so that what a new change waits behind stays
  // bounded instead of growing with every client's pipelined puts.
  virtual bool StoreBehind() const { return false; }
  // Whether the completions of a session's operations that are not called
  // before the call returns run in the order the operations were issued,
  // a reserve that waits for a job aside: a front-end may then issue a
  // session's next operation before the last is answered (the beanstalkd
  // front-end's pipelined commands, server/beanstalk_handler.h).
  virtual bool CompletesInOrder() const { return false; }
  virtual uint64_t StoreCompletionsRun() const { return 0; }
};

}  // namespace delayq::backend

#endif  // DELAYQ_BACKEND_BACKEND_H_

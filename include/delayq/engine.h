// The delayq engine: a deterministic, single-threaded state machine holding
// every live job, the per-topic ready queues, one hierarchical timing wheel
// for due times and TTR deadlines, and the sessions that reserve jobs.
//
// It knows nothing of sockets, threads, JSON or disks. Time is injected:
// every call takes `now` (in ticks, EngineOptions::ticks_per_ms to a
// millisecond; a clock that goes backwards is held at the latest value seen)
// and first applies everything that became due up to `now`. Durations in
// requests, and every time in JobStats, TopicStats, JobRecord and the
// horizon's marks, are milliseconds (docs/engine.md, "Time"). Each call's durable changes are
// queued as Mutations and its asynchronous outcomes (a waiting reserve served, timed out, or cut
// short) as Events; the caller drains both after each call.
//
// Thread: an Engine is not thread-safe; exactly one thread owns it.
#ifndef DELAYQ_ENGINE_H_
#define DELAYQ_ENGINE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"
#include "delayq/types.h"

namespace delayq {

struct EngineOptions {
  TimeMs start_ms = 0;  // initial clock, in milliseconds
  // The unit of every `now` the engine takes, of now() and of NextWakeup():
  // ticks per millisecond, 1 to 1000 (1: milliseconds; 1000: microseconds,
  // as the Local backend runs it). A due time is `now` plus the delay in
  // ticks, so it is never early by a fraction of a millisecond that a
  // millisecond clock would drop (docs/engine.md, "Time").
  TimeMs ticks_per_ms = 1;
  size_t max_job_size = 65535;   // bytes of body; beanstalkd's default (-z)
  bool record_mutations = true;  // false: TakeMutations always yields nothing
  std::string default_topic = "default";
  // The horizon (docs/storage.md): when true, a job that becomes delayed
  // (put, release, back-off) past its topic's mark leaves memory at the end
  // of the call: it is handed to TakeEvicted, and its topic counts it as a
  // cold delayed job until Adopt takes it back. Needs record_mutations.
  bool evict_beyond_horizon = false;
  // The most topics at once (0: no limit). A use, watch or put that would
  // make one more fails with kResourceExhausted; recovery never does.
  size_t max_topics = 0;
  // Where the leases of reservations start (docs/engine.md, "Leases"): a
  // server gives a random one, so that a lease from before a restart holds
  // nothing after it; tests give a fixed one.
  uint64_t lease_seed = 0;
};

// Who acts on a job (docs/engine.md, "Leases"): a session, which holds the
// jobs it reserved (a beanstalkd connection); session 0, an operator, who
// may act on any job; and the lease of a reservation made with `detach`
// (HTTP), which alone holds that job while the reservation lasts.
struct Holder {
  Holder(SessionId s = 0, uint64_t l = 0) : session(s), lease(l) {}  // NOLINT: implicit by design
  SessionId session;
  uint64_t lease;  // 0: none
};

// Why an operation on one job was refused (Engine's job operations), and
// its words, from the state found: shared by the backends, so that both
// say the same. kHeldByLease / kHeldBySession: reserved by another holder.
enum class Refusal : uint8_t {
  kNoJob,          // kNotFound
  kLeaseLost,      // kLeaseLost
  kNotReserved,    // kConflict
  kNotKickable,    // kConflict (kick of a job neither buried nor delayed)
  kHeldByLease,    // kConflict
  kHeldBySession,  // kConflict
};
Status RefuseJob(JobId id, Refusal why, JobState found);

// A lease as clients see it: 16 lower-case hex digits. Parse returns false
// for anything else.
std::string FormatLease(uint64_t lease);
bool ParseLease(std::string_view text, uint64_t* lease);

struct ReserveRequest {
  SessionId session = 0;
  TimeMs timeout_ms = -1;  // -1: wait forever; 0: do not wait
  uint32_t count = 1;      // reserve up to this many jobs at once (>= 1)
  // true: the jobs are reserved by no session; closing the session does not
  // return them (stateless HTTP clients). They still come back after TTR.
  bool detach = false;
};

// Which jobs ClearTopic removes.
enum ClearMask : uint8_t {
  kClearReady = 1,
  kClearDelayed = 2,
  kClearBuried = 4,
  kClearAll = kClearReady | kClearDelayed | kClearBuried,
};

class Engine {
 public:
  explicit Engine(EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // ---- Sessions: a connection, or one HTTP request ----------------------
  // A new session uses and watches the default topic.
  SessionId OpenSession(TimeMs now);
  // Cancels the session's pending reserve and returns the jobs it reserved
  // to ready (in the order reserved). Unknown ids are ignored.
  void CloseSession(TimeMs now, SessionId session);
  // Returns kInvalidArgument for a bad topic name, kNotFound for no session.
  Status Use(SessionId session, std::string_view topic);
  // Returns the number of topics watched afterwards.
  Result<size_t> Watch(SessionId session, std::string_view topic);
  // Returns kNotIgnored when `topic` is the only one watched.
  Result<size_t> Ignore(SessionId session, std::string_view topic);
  // REQUIRES: the session exists. Views valid until the next mutating call.
  std::string_view UsedTopic(SessionId session) const;
  std::vector<std::string_view> WatchedTopics(SessionId session) const;

  // ---- Producing ---------------------------------------------------------
  // Returns kInvalidArgument (topic name, ttr < 1, delay beyond kMaxDelayMs,
  // key too long, bad back-off), kJobTooBig.
  Result<PutResult> Put(TimeMs now, SessionId session, const PutRequest& request);

  // Uses up the next job id without a job (beanstalkd spends an id on an
  // upload that fails with EXPECTED_CRLF or DRAINING).
  void DiscardJobId();
  // Ids up to `id` were handed out before (recovery): later ids are above it.
  void SkipIdsThrough(JobId id);
  // The id the next put will get.
  JobId next_id() const;

  // ---- Consuming ---------------------------------------------------------
  // Reserves up to `count` ready jobs from the session's watched topics,
  // lowest priority first, then lowest id. If none is ready: kDeadlineSoon
  // when the session holds a job within kDeadlineSafetyMarginMs of its TTR;
  // kTimedOut when timeout_ms == 0; otherwise the session waits and the
  // call returns an empty list: an Event reports the outcome later.
  // A session has at most one pending reserve; a second one replaces it.
  Result<std::vector<JobId>> Reserve(TimeMs now, const ReserveRequest& request);
  // Drops a pending reserve without an event (client gone, request aborted).
  void CancelReserve(SessionId session);
  bool IsWaiting(SessionId session) const;
  // Reserves the given job whatever topic it is in, if it is ready, delayed
  // or buried. Returns kNotFound otherwise.
  Result<JobView> ReserveJob(TimeMs now, SessionId session, JobId id);

  // Operations on one job (docs/engine.md, "Leases"). Each answers the job
  // and the state it left it in, or refuses without changing anything:
  // kNotFound when there is no such job; kLeaseLost when `holder` names a
  // lease that does not hold it (any more); kConflict, saying the state it
  // found, when the job is not in a state the operation applies to, or is
  // reserved by another holder.
  //
  // Delete takes a job in any state; a reserved one only from its holder.
  Result<JobChange> Delete(TimeMs now, const Holder& holder, JobId id);
  Result<JobChange> DeleteByKey(TimeMs now, const Holder& holder, std::string_view topic,
                                std::string_view key);
  // Deletes a reserved job: a worker's "done".
  Result<JobChange> Finish(TimeMs now, const Holder& holder, JobId id);
  // Puts a reserved job back: delayed by `delay_ms`, or when absent by the
  // job's back-off (none: ready now). A job whose tries are used up is
  // buried instead. `priority` absent: the job keeps its own.
  // `answer`, when given, is kept with the job in the same step (a push
  // try's outcome: JobView::answered, JobRecord::answer), replacing the
  // one it had; its text is cut to kMaxAnswerBytes.
  Result<JobChange> Release(TimeMs now, const Holder& holder, JobId id,
                            std::optional<uint32_t> priority, std::optional<TimeMs> delay_ms,
                            const PushAnswer* answer = nullptr);
  Result<JobChange> Bury(TimeMs now, const Holder& holder, JobId id,
                         std::optional<uint32_t> priority, const PushAnswer* answer = nullptr);
  // Restarts the TTR of a reserved job.
  Result<JobChange> Touch(TimeMs now, const Holder& holder, JobId id);
  // Kicks up to `bound` buried jobs of the topic (oldest first), or if it has
  // none, up to `bound` delayed ones (soonest first). Returns how many.
  Result<uint64_t> Kick(TimeMs now, std::string_view topic, uint64_t bound);
  // Kicks one buried or delayed job; kConflict for a job in another state.
  Result<JobChange> KickJob(TimeMs now, JobId id);

  // ---- Looking ---------------------------------------------------------
  // Views are valid until the next mutating call.
  Result<JobView> Peek(TimeMs now, JobId id);
  // A reserved job's view with its lease, for the reply to the reserve
  // that took it (no other view carries a lease). kNotFound otherwise.
  // The views of consecutive PeekReservation calls all stay valid until the
  // next call of another kind.
  Result<JobView> PeekReservation(TimeMs now, JobId id);
  Result<JobView> PeekByKey(TimeMs now, std::string_view topic, std::string_view key);
  Result<JobView> PeekReady(TimeMs now, std::string_view topic);    // next to be reserved
  Result<JobView> PeekDelayed(TimeMs now, std::string_view topic);  // soonest due
  Result<JobView> PeekBuried(TimeMs now, std::string_view topic);   // oldest buried
  Result<JobStats> StatsJob(TimeMs now, JobId id);
  // The topic's jobs in r.state after r.after, in id order (descending
  // with r.desc), at most r.limit of them; *more is set when more follow.
  // An unknown topic has none. Cost: O(n log r.limit) for the n jobs of the
  // topic in that state, whatever the other topics hold.
  std::vector<JobView> ListJobs(TimeMs now, const ListJobsRequest& r, bool* more);
  // The live job with `key` in each topic that has one, in topic creation
  // order: one hash lookup per topic.
  std::vector<JobView> FindKey(TimeMs now, std::string_view key);
  // The topic of job `id` while it is in memory (a job's topic never
  // changes, so time is not advanced: nothing else is touched); nullopt
  // when no job in memory has this id. Valid until the next mutating call.
  std::optional<std::string_view> TopicOf(JobId id) const;
  Result<TopicStats> StatsTopic(TimeMs now, std::string_view topic);
  EngineStats Stats(TimeMs now);
  // Counted as it happens, never reset (no time is advanced).
  const EngineMetrics& metrics() const;
  // Names of the topics that exist (used, watched or holding jobs), in
  // creation order (beanstalkd lists its tubes in that order too).
  std::vector<std::string> ListTopics(TimeMs now);
  // StatsTopic of every topic that exists, in ListTopics's order, in one
  // pass.
  std::vector<TopicStats> TopicsStats(TimeMs now);

  // ---- Topics ------------------------------------------------------------
  // No job of the topic is reserved for `delay_ms` (0 ends a pause).
  Status PauseTopic(TimeMs now, std::string_view topic, TimeMs delay_ms);
  // Deletes the topic's jobs in the states of `mask` (never reserved ones).
  // Returns how many were deleted.
  Result<uint64_t> ClearTopic(TimeMs now, std::string_view topic, uint8_t mask);

  // ---- Time (in ticks) ----------------------------------------------------
  // Applies everything due up to `now`: due jobs become ready, TTRs expire,
  // waiting reserves are served or time out, pauses end.
  void Advance(TimeMs now);
  // The earliest time at which Advance may have something to do; kNever
  // when nothing is scheduled. Calling Advance earlier is harmless.
  TimeMs NextWakeup() const;
  TimeMs now() const;
  // now() in whole milliseconds (rounded down).
  TimeMs now_ms() const;

  // ---- Effects -----------------------------------------------------------
  // Appends what happened since the last call, in order, and forgets it
  // (TakeMutations: nothing while a sink is set, RecordMutationsInto).
  void TakeEvents(std::vector<Event>* out);
  void TakeMutations(std::vector<Mutation>* out);
  // Moves the mutations not taken yet to *sink, and from now on appends
  // each one to *sink as it happens, where TakeMutations would have moved
  // it later (a large struct: the Local backend's batch is the sink, and
  // no mutation is moved on its way there). nullptr: kept for
  // TakeMutations again. *sink must outlive the engine or the next call.
  void RecordMutationsInto(std::vector<Mutation>* sink);

  // ---- Recovery ----------------------------------------------------------
  // Loads a persisted job as it was (ready, delayed or buried), without
  // recording a mutation. Ids handed out later are above every restored id.
  // Returns kInvalidArgument for a reserved state, a duplicate id or key.
  Status Restore(TimeMs now, const JobRecord& record, std::string_view body);

  // ---- Horizon (docs/storage.md, "The horizon") ---------------------------
  // Every delayed job of a topic at or before the topic's mark is in
  // memory; jobs after it may be cold (kept by the caller's store). Marks
  // are in milliseconds and compare with a job's JobRecord::due_ms (its due
  // time rounded up to a whole millisecond). A
  // topic's mark is (through, every id) unless SetTopicMark gave it its own.
  // Marks only move forward; the caller loads the cold jobs they pass.
  void SetHorizon(TimeMs through);
  // `mark` nullopt: back to the common mark.
  void SetTopicMark(std::string_view topic, std::optional<DueMark> mark);
  DueMark TopicMark(std::string_view topic) const;
  // Cold jobs of a topic (0 for an unknown one), and of every topic.
  uint64_t ColdJobs(std::string_view topic) const;
  uint64_t ColdJobs() const;
  std::vector<std::string> TopicsWithColdJobs() const;
  // Delayed jobs of the topic held in memory.
  uint64_t DelayedInMemory(std::string_view topic) const;
  // Counts `count` more cold jobs in `topic` (recovery); creates the topic.
  Status AddColdJob(std::string_view topic, uint64_t count = 1);
  // Takes a cold job back into memory, as Restore does, one cold job fewer.
  Status Adopt(TimeMs now, const JobRecord& record, std::string_view body);
  // Appends the jobs let go of since the last call, in order.
  void TakeEvicted(std::vector<ColdJob>* out);
  bool HasJob(JobId id) const;
  bool HasKey(std::string_view topic, std::string_view key) const;
  // Names (PutRequest::named; docs/engine.md, "Names"): whether a job in
  // memory holds `name`, and the job `name` names among the jobs in memory
  // (its name's; else, for a job id in canonical decimal, that job if it
  // has no name), or 0.
  bool HasName(std::string_view name) const;
  JobId ResolveName(std::string_view name) const;

  // Checks every internal invariant; for tests. Returns a description of the
  // first violation, or an empty string.
  std::string CheckInvariants() const;

  // Approximate bytes held for jobs, queues and indexes (not the allocator's
  // own overhead); for benchmarks and the stats of later layers.
  size_t MemoryUsage() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Topic names: 1..200 bytes of A-Za-z0-9-+/;.$_() not starting with '-'.
bool IsValidTopicName(std::string_view name);

// A back-off a job may carry: a list of 1..64 delays in 0..kMaxDelayMs, or
// exponential with 0 < base <= cap <= kMaxDelayMs. kInvalidArgument otherwise.
Status ValidateBackoff(const Backoff& b);

}  // namespace delayq

#endif  // DELAYQ_ENGINE_H_

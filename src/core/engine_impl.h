// The engine's state: Engine::Impl, declared here and defined in four
// files of src/core, each one part of what the engine does:
//  - engine.cc: the operations (sessions, puts, reserves and what ends or
//    moves a reservation, kicks, topics), the placing of jobs, back-off
//    policies, the mutations recorded, and Engine's forwarding to Impl;
//  - engine_time.cc: time: the timing wheel's firing, each instant's
//    events, serving the sessions that wait to reserve, and the end of
//    every call (Finish);
//  - engine_inspect.cc: looking without changing: peeks, stats, the memory
//    used, and the invariants' check;
//  - engine_horizon.cc: jobs loaded from the store (Restore at start-up,
//    Adopt of cold jobs) and the horizon: marks, cold counts, eviction.
// Place and Unplace are defined here, so that every file inlines them.
// The contract is in include/delayq/engine.h; the semantics and structures
// in docs/engine.md. Private to the engine (src/core).
//
// Invariants (checked by CheckInvariants):
//  - every live job is in the id table and in exactly one place for its state
//    (job.h); per-topic and global counters equal the counts of those places;
//  - a waiting session's wait topics have no ready job unless paused: jobs
//    that become ready are handed to waiters before a public call returns;
//  - a topic other than the default one exists iff refs() > 0 after a call.
//
// Time: now_, due times, TTR deadlines, pause ends and wait deadlines are in
// ticks (EngineOptions::ticks_per_ms); durations (delay, ttr, pause_ms) are
// kept in milliseconds and turned into ticks where they are added to now_
// (Ticks); times leave the engine in milliseconds, due times rounded up
// (CeilMs: never earlier than the job's own), creation times down.
//
// Thread: one thread at a time, as the Engine that owns it.
#ifndef DELAYQ_CORE_ENGINE_IMPL_H_
#define DELAYQ_CORE_ENGINE_IMPL_H_

#include <algorithm>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/id_table.h"
#include "core/job.h"
#include "core/ready_queue.h"
#include "core/session.h"
#include "core/timing_wheel.h"
#include "core/topic.h"
#include "delayq/build_options.h"
#include "delayq/engine.h"

namespace delayq {

using core::IdTable;
using core::Job;
using core::Link;
using core::ReadyBefore;
using core::Session;
using core::TimingWheel;
using core::Topic;

class Engine::Impl {
 public:
  explicit Impl(EngineOptions options);
  ~Impl();

  // ---- sessions --------------------------------------------------------
  SessionId OpenSession(TimeMs now);
  void CloseSession(TimeMs now, SessionId id);
  Status Use(SessionId id, std::string_view name);
  Result<size_t> Watch(SessionId id, std::string_view name);
  Result<size_t> Ignore(SessionId id, std::string_view name);
  std::string_view UsedTopic(SessionId id) const;
  std::vector<std::string_view> WatchedTopics(SessionId id) const;

  // ---- producing -------------------------------------------------------
  Result<PutResult> Put(TimeMs now, SessionId sid, const PutRequest& r);
  void DiscardJobId() { next_id_++; }
  void SkipIdsThrough(JobId id) { next_id_ = std::max(next_id_, id + 1); }
  JobId next_id() const { return next_id_; }

  // ---- consuming -------------------------------------------------------
  Result<std::vector<JobId>> Reserve(TimeMs now, const ReserveRequest& r);
  void CancelReserve(SessionId id);
  bool IsWaiting(SessionId id) const;
  Result<JobView> ReserveJob(TimeMs now, SessionId sid, JobId id);

  // Delete takes a job in any state (a reserved one from its holder);
  // finish only a reserved one.
  Result<JobChange> Delete(TimeMs now, const Holder& h, JobId id, bool any_state = true);
  Result<JobChange> DeleteByKey(TimeMs now, const Holder& h, std::string_view topic,
                                std::string_view key);

  Result<JobChange> Release(TimeMs now, const Holder& h, JobId id, std::optional<uint32_t> priority,
                            std::optional<TimeMs> delay, const PushAnswer* answer);

  Result<JobChange> Bury(TimeMs now, const Holder& h, JobId id, std::optional<uint32_t> priority,
                         const PushAnswer* answer);
  // Keeps `a` as job j's last push try's outcome (answers_).
  void SetAnswer(const Job* j, const PushAnswer& a);
  Result<JobChange> Touch(TimeMs now, const Holder& h, JobId id);
  Result<uint64_t> Kick(TimeMs now, std::string_view topic, uint64_t bound);
  Result<JobChange> KickJob(TimeMs now, JobId id);

  // ---- looking ---------------------------------------------------------
  Result<JobView> Peek(TimeMs now, JobId id);
  Result<JobView> PeekReservation(TimeMs now, JobId id);
  Result<JobView> PeekByKey(TimeMs now, std::string_view topic, std::string_view key);
  Result<JobView> PeekReady(TimeMs now, std::string_view topic);
  Result<JobView> PeekDelayed(TimeMs now, std::string_view topic);
  Result<JobView> PeekBuried(TimeMs now, std::string_view topic);
  Result<JobStats> StatsJob(TimeMs now, JobId id);
  std::vector<JobView> ListJobs(TimeMs now, const ListJobsRequest& r, bool* more);
  std::vector<JobView> FindKey(TimeMs now, std::string_view key);
  Result<TopicStats> StatsTopic(TimeMs now, std::string_view name);
  EngineStats Stats(TimeMs now);
  std::vector<std::string> ListTopics(TimeMs now);
  std::vector<TopicStats> TopicsStats(TimeMs now);
  // A topic's stats at now_ (StatsTopic, TopicsStats).
  TopicStats StatsOf(const Topic& t) const;
  // The topics that exist at `now`, in creation order.
  std::vector<const Topic*> TopicsInOrder(TimeMs now);

  // ---- topics ----------------------------------------------------------
  Status PauseTopic(TimeMs now, std::string_view name, TimeMs delay);
  Result<uint64_t> ClearTopic(TimeMs now, std::string_view name, uint8_t mask);

  // ---- time --------------------------------------------------------------
  void Advance(TimeMs now);
  TimeMs NextWakeup() const;
  TimeMs now() const { return now_; }
  TimeMs now_ms() const { return FloorMs(now_); }

  void TakeEvents(std::vector<Event>* out);
  void TakeMutations(std::vector<Mutation>* out);
  void RecordMutationsInto(std::vector<Mutation>* sink);
  std::vector<Mutation>& Mutations() { return sink_ != nullptr ? *sink_ : mutations_; }

  // ---- recovery ----------------------------------------------------------
  Status Restore(TimeMs now, const JobRecord& r, std::string_view body);

  // ---- horizon -----------------------------------------------------------
  void SetHorizon(TimeMs through) { horizon_ = through; }

  void SetTopicMark(std::string_view name, std::optional<DueMark> mark);
  DueMark TopicMark(std::string_view name) const;
  uint64_t ColdJobs(std::string_view name) const;
  uint64_t ColdJobs() const { return n_cold_; }

  std::vector<std::string> TopicsWithColdJobs() const;
  uint64_t DelayedInMemory(std::string_view name) const;
  Status AddColdJob(std::string_view name, uint64_t count);
  Status Adopt(TimeMs now, const JobRecord& r, std::string_view body);
  void TakeEvicted(std::vector<ColdJob>* out);
  bool HasJob(JobId id) const { return ids_.Find(id) != nullptr; }
  const EngineMetrics& metrics() const { return metrics_; }
  std::optional<std::string_view> TopicOf(JobId id) const {
    const core::Job* j = ids_.Find(id);
    if (j == nullptr) return std::nullopt;
    return std::string_view(j->topic->name);
  }

  bool HasKey(std::string_view name, std::string_view key) const;
  bool HasName(std::string_view name) const { return names_.count(name) > 0; }

  JobId ResolveName(std::string_view name) const;

 private:
  static constexpr JobId kMaxId = std::numeric_limits<JobId>::max();
  static constexpr TimeMs kMaxTicksPerMs = 1000;
  // The latest time in milliseconds a record may carry: its ticks fit with
  // room to spare.
  TimeMs MaxRecordMs() const { return kNever / tpm_ / 4; }

  // Milliseconds (a duration, or a time) in ticks.
  TimeMs Ticks(TimeMs ms) const { return ms * tpm_; }
  // Ticks (>= 0) in whole milliseconds, rounded up and down.
  TimeMs CeilMs(TimeMs ticks) const { return ticks / tpm_ + (ticks % tpm_ != 0); }
  // Ticks in microseconds (for the metrics).
  int64_t TicksToUs(TimeMs ticks) const { return ticks * 1000 / tpm_; }
  TimeMs FloorMs(TimeMs ticks) const { return ticks / tpm_; }
  // A delayed job's place in the (due, id) order of the store and the marks.
  DueMark MarkOfJob(const Job* j) const { return DueMark{CeilMs(j->due), j->id}; }

  DueMark MarkOf(const Topic* t) const { return t->mark ? *t->mark : DueMark{horizon_, kMaxId}; }

  // A job that just became delayed leaves memory at the end of the call if
  // it lies beyond its topic's mark (and is still delayed by then).
  // Returns whether it may leave.
  bool NoteDelayed(const Job* j);
  void EvictBeyondHorizon();

  // Takes j out of the id table and frees it (it is in no place).
  void Free(Job* j);

  // Restore (cold false) and Adopt (cold true).
  Status Load(TimeMs now, const JobRecord& r, std::string_view body, bool cold);

 public:
  std::string CheckInvariants() const;
  size_t MemoryUsage() const;

 private:
  // ---- lookups ---------------------------------------------------------
  Session* FindSession(SessionId id) const;
  // Session 0 is the operator: no session object, may act on any job.
  bool LookupCaller(SessionId id, Session** s) const;
  // The job `h` may act on (docs/engine.md, "Leases"): a reserved one held
  // by h (its lease; else its session, or any for the operator), or, with
  // any_state and no lease, one that is not reserved. Else the refusal.
  Result<Job*> Acting(const Holder& h, JobId id, bool any_state);
  JobChange Change(const Job* j) const;
  // A job's due time (delayed) or TTR deadline (reserved) in milliseconds,
  // rounded up; 0 in the other states.
  TimeMs DueOut(const Job* j) const;
  // The figures JobView, JobStats and JobRecord share, in milliseconds.
  template <typename T>
  void CopyFigures(const Job* j, T* out) const {
    out->created_ms = FloorMs(j->created);
    out->delay_ms = j->delay;
    out->ttr_ms = j->ttr;
    out->reserves = j->reserves;
    out->timeouts = j->timeouts;
    out->releases = j->releases;
    out->buries = j->buries;
    out->kicks = j->kicks;
    out->max_tries = j->max_tries;
  }
  Topic* FindTopic(std::string_view name) const;
  // kResourceExhausted when `name` is a new topic and max_topics exist.
  Status RoomForTopic(std::string_view name) const;
  Topic* GetOrCreateTopic(std::string_view name);
  // Marks `t` to be dropped at the end of the call (FlushDrops) if nothing
  // refers to it; DropIfUnused drops it now (a call that refuses and ends
  // without Finish).
  void MaybeDrop(Topic* t);
  void DropIfUnused(Topic* t);
  JobView View(const Job* j) const;

  // ---- placing jobs ------------------------------------------------------
  // Puts j, which is in no place, into the place of `state`.
  void Place(Job* j, JobState state) {
    Topic* t = j->topic;
    j->state = state;
    switch (state) {
      case JobState::kReady:
        j->due = call_now_;  // a ready job's due: when it became ready (ReserveFor)
        t->ready.Push(j);
        n_ready_++;
        if (j->priority < kUrgentPriority) {
          t->urgent++;
          n_urgent_++;
        }
        MarkServable(t);
        break;
      case JobState::kDelayed:
        wheel_.Insert(j);
        t->delayed_jobs.PushBack(j);
        t->delayed++;
        n_delayed_++;
        break;
      case JobState::kBuried:
        t->buried.PushBack(j);
        t->buried_count++;
        n_buried_++;
        break;
      case JobState::kReserved:
        wheel_.Insert(j);
        t->reserved_jobs.PushBack(j);
        t->reserved++;
        n_reserved_++;
        if (Session* s = j->reserver) {
          j->pos = static_cast<uint32_t>(s->reserved.size());
          s->reserved.push_back(j);
        }
        break;
    }
  }

  // Takes j out of the place of its state (the state field is left as is).
  // `in_wheel` is false for a job the wheel has just fired (and unlinked).
  void Unplace(Job* j, bool in_wheel = true) {
    Topic* t = j->topic;
    switch (j->state) {
      case JobState::kReady:
        t->ready.Remove(j);
        n_ready_--;
        if (j->priority < kUrgentPriority) {
          t->urgent--;
          n_urgent_--;
        }
        break;
      case JobState::kDelayed:
        if (in_wheel) wheel_.Remove(j);
        Link::Unlink(j);
        t->delayed--;
        n_delayed_--;
        break;
      case JobState::kBuried:
        Link::Unlink(j);
        t->buried_count--;
        n_buried_--;
        break;
      case JobState::kReserved: {
        if (in_wheel) wheel_.Remove(j);
        Link::Unlink(j);
        t->reserved--;
        n_reserved_--;
        if (Session* s = j->reserver) {
          Job* last = s->reserved.back();
          s->reserved[j->pos] = last;
          last->pos = j->pos;
          s->reserved.pop_back();
          j->reserver = nullptr;
          UpdateWake(s);
        }
        break;
      }
    }
  }

  void ReserveFor(Session* s, Job* j, bool detach);

  // A reservation ended without the job finishing; j is in no place.
  JobState ComeBack(Job* j, std::optional<TimeMs> explicit_delay);
  void KickOne(Job* j);
  void Destroy(Job* j);

  // The topic's delayed jobs in (due, id) order, at most `limit`.
  std::vector<Job*> DelayedInOrder(const Topic* t, uint64_t limit) const;

  // Lowest (priority, id) ready job among the unpaused topics.
  Job* PickReady(const std::vector<Topic*>& topics) const;

  // ---- waiting -----------------------------------------------------------
  void MarkServable(Topic* t) {
    if (t->waiting > 0) servable_.push_back(t);
  }

  bool DeadlineSoon(const Session* s) const;

  // Re-keys the session in the wake set: its timeout, or the moment a job
  // it holds gets within the safety margin of its TTR.
  void UpdateWake(Session* s);
  void EndWait(Session* s);
  bool WaitIsLive(SessionId id, uint64_t seq) const;
  void CompactWaiters(Topic* t);

  // Hands ready jobs to waiting sessions (docs/engine.md, "Serving waiters").
  void ServeWaiters();

  // ---- time --------------------------------------------------------------
  void AdvanceTo(TimeMs target);

  // Everything that happens at now_ (docs/engine.md, "Instants").
  void ProcessInstant();

  // Ends a public call: serves waiters and drops unreferenced topics.
  template <typename T>
  T Finish(T result) {
    Finish();
    return result;
  }
  void Finish();
  void FlushDrops();

  // ---- back-off policies -----------------------------------------------
  struct Policy {
    Backoff backoff;
    uint64_t refs = 0;
    std::string key;
  };
  uint32_t Intern(const Backoff& b);
  void Unintern(uint32_t idx);

  // ---- mutations -------------------------------------------------------
  JobRecord ToRecord(const Job* j) const;
  void FillRecord(const Job* j, JobRecord* r) const;
  void RecordPut(const Job* j);
  void RecordUpdate(const Job* j, bool deferrable = false);
  void RecordDelete(const Job* j);

  // A new lease: the leases counted from the seed, each mixed (SplitMix64's
  // finalizer, a bijection), so they do not read as a sequence; never 0.
  uint64_t NextLease();

  EngineOptions opt_;
  TimeMs tpm_;  // ticks per millisecond
  uint64_t leases_ = 0;
  std::deque<std::string> lease_texts_;  // PeekReservation's views point into them
  TimeMs now_;
  core::JobPool pool_;  // before every structure holding jobs
  TimingWheel wheel_;
  IdTable ids_;
  JobId next_id_ = 1;
  uint64_t topic_seq_ = 0;
  std::unordered_map<std::string_view, std::unique_ptr<Topic>> topics_;
  // Names (PutRequest::named): one namespace across topics; views into the
  // jobs' keys.
  std::unordered_map<std::string_view, Job*> names_;
  // The last push try's outcome of the jobs that have one (JobView::answered),
  // by id: beside the jobs rather than in them, whose header has no room
  // left (Job, 128 bytes) for what few jobs have. Free drops a job's.
  std::unordered_map<JobId, PushAnswer> answers_;
  Topic* default_topic_ = nullptr;
  std::unordered_map<SessionId, std::unique_ptr<Session>> sessions_;
  SessionId next_session_ = 1;
  mutable SessionId last_session_id_ = 0;  // lookup cache
  mutable Session* last_session_ = nullptr;
  uint64_t wait_seq_ = 0;
  uint64_t waiting_sessions_ = 0;
  std::set<std::pair<TimeMs, SessionId>> wakes_;
  std::set<std::pair<TimeMs, Topic*>> pauses_;

  uint64_t n_ready_ = 0, n_urgent_ = 0, n_reserved_ = 0, n_delayed_ = 0, n_buried_ = 0;
  uint64_t n_cold_ = 0;
  TimeMs horizon_ = kNever;      // the common horizon mark (SetHorizon)
  std::vector<JobId> to_evict_;  // delayed this call, maybe beyond the mark
  std::vector<ColdJob> evicted_;
  uint64_t total_jobs_ = 0, job_timeouts_ = 0;
  // The time of the call being served (AdvanceTo's target): while
  // AdvanceTo steps through past instants, now_ is each instant and
  // call_now_ when they are seen.
  TimeMs call_now_ = 0;
  EngineMetrics metrics_;
  size_t job_bytes_ = 0;

  std::vector<Policy> policies_{Policy{}};  // index 0: no back-off
  std::vector<uint32_t> free_policies_;
  std::unordered_map<std::string, uint32_t> policy_index_;

  std::vector<Event> events_;
  std::vector<Mutation> mutations_;
  std::vector<Mutation>* sink_ = nullptr;  // RecordMutationsInto
  std::vector<Job*> fired_;
  std::vector<Topic*> servable_;
  std::vector<Topic*> drops_;
};

}  // namespace delayq

#endif  // DELAYQ_CORE_ENGINE_IMPL_H_

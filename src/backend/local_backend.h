// The Local backend: the engine in this process, owned by the loop thread
// that runs `io`. A steady timer wakes the engine at its next due time.
// The engine runs in microseconds (Clock::NowUs), so that a due time is the
// put's instant plus its delay to the microsecond, never the millisecond
// before (docs/engine.md, "Time").
//
// With a store, the engine's mutations go to a writer thread in batches
// (store::Writer, group commit), and the completion of an operation that
// reports a change (put, delete, release, bury, kick, clear) runs only once
// every change made before it is as durable as the store's fsync policy
// promises: once the writer wrote it, or, with a journal (Options::journal),
// once this thread appended it there. While the store refuses writes, such operations fail with
// kUnavailable before they change anything; reads, reserves and touches go
// on (docs/storage.md, "Failures").
//
// With a store and a horizon, delayed jobs due further ahead than the
// horizon stay on disk only ("cold"): a loader moves them into the engine
// ahead of their time, and an operation that names a cold job (by id or
// key, kick, peek-delayed, clear) takes it into memory first
// (docs/storage.md, "The horizon").
//
// The class is defined in four files: local_backend.cc (the engine
// adapter: one method per operation, reserves and timers),
// local_durability.cc (recovery, and the pipeline to the journal and the
// writer), local_horizon.cc (the horizon's loader and the lookups of
// cold jobs) and local_objects.cc (named objects and schedule firings).
//
// Thread: every method, and `io`, on one thread.
#ifndef DELAYQ_BACKEND_LOCAL_BACKEND_H_
#define DELAYQ_BACKEND_LOCAL_BACKEND_H_

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/clock.h"
#include "delayq/build_options.h"
#include "delayq/operations.h"
#include "store/journal.h"
#include "store/store.h"
#include "store/writer.h"

namespace delayq::backend {

class LocalBackend final : public Backend {
 public:
  struct Options {
    size_t max_job_size = 65535;
    // The most topics at once (EngineOptions::max_topics; 0: no limit).
    size_t max_topics = 0;
    // EngineOptions::lease_seed; delayqd gives a random one.
    uint64_t lease_seed = 0;
    // Not owned; must outlive the backend. nullptr: in memory only.
    store::Store* store = nullptr;
    // Called on the loop thread when the store starts refusing writes
    // (ok=false, with its error) and when it takes them again.
    std::function<void(bool ok, const Status& error)> on_store_health;
    std::chrono::milliseconds store_retry_interval{200};
    // Not owned; with a store only. Batches are appended here on the loop
    // thread, and a change is acknowledged once appended (or synced, as the
    // journal's policy says): the writer thread takes them into the store
    // later, and no reply waits for it.
    store::Journal* journal = nullptr;
    // With a journal: how long the writer gathers batches before a write.
    std::chrono::milliseconds journal_batch_window{10};
    // With a journal: how far (bytes of changes, roughly) the writer may
    // fall behind before replies wait for it again.
    uint64_t journal_max_unwritten_bytes = uint64_t{8} << 20;
    // With a store: delayed jobs due later than now + horizon_ms are not
    // held in memory. 0: every job is.
    TimeMs horizon_ms = 0;
    // Stored due-index entries the loader reads per topic in one loop turn.
    size_t horizon_batch = 10'000;
  };
  // `clock` must outlive the backend.
  LocalBackend(boost::asio::io_context& io, const Options& options, const Clock& clock);
  ~LocalBackend() override;

  const BackendInfo& info() const override { return info_; }

  SessionId OpenSession() override;
  void CloseSession(SessionId s) override;
  Status Use(SessionId s, std::string_view topic) override;
  Result<size_t> Watch(SessionId s, std::string_view topic) override;
  Result<size_t> Ignore(SessionId s, std::string_view topic) override;
  std::string UsedTopic(SessionId s) const override;
  std::vector<std::string> WatchedTopics(SessionId s) const override;

  void DiscardJobId() override { engine_.DiscardJobId(); }
  void Put(SessionId s, const PutRequest& r, Callback<PutResult> done) override;
  void Reserve(const ReserveRequest& r, JobsDone done) override;
  void CancelReserve(SessionId s) override;
  void ReserveJob(SessionId s, JobId id, JobsDone done) override;
  void Delete(const Claim& c, JobId id, Callback<JobChange> done) override;
  void DeleteByKey(const Claim& c, std::string_view topic, std::string_view key,
                   Callback<JobChange> done) override;
  void Finish(const Claim& c, JobId id, Callback<JobChange> done) override;
  void FinishByName(std::string_view name, Callback<JobChange> done) override;
  void DeleteByName(std::string_view name, Callback<JobChange> done) override;
  void Release(const Claim& c, JobId id, std::optional<uint32_t> priority,
               std::optional<TimeMs> delay, Callback<JobChange> done) override;
  void Bury(const Claim& c, JobId id, std::optional<uint32_t> priority,
            Callback<JobChange> done) override;
  void Touch(const Claim& c, JobId id, Callback<JobChange> done) override;
  void ReleaseAnswered(const Claim& c, JobId id, std::optional<TimeMs> delay,
                       const PushAnswer& answer, Callback<JobChange> done) override;
  void BuryAnswered(const Claim& c, JobId id, const PushAnswer& answer,
                    Callback<JobChange> done) override;
  void Kick(SessionId s, std::string_view topic, uint64_t bound, Callback<uint64_t> done) override;
  void KickJob(SessionId s, JobId id, Callback<JobChange> done) override;
  const EngineMetrics* engine_metrics() const override { return &engine_.metrics(); }
  // Counted here, where each completion is called, rather than by a
  // CountingBackend around this one: its wrapper of every completion cost
  // an allocation and a call per operation (docs/benchmarks.md, "Watching").
  const OperationOutcomes* operation_outcomes() const override {
    return DELAYQ_COUNT_METRICS ? &outcomes_ : nullptr;
  }
  std::optional<std::string_view> KnownTopicOf(JobId id) const override {
    return engine_.TopicOf(id);
  }
  void Peek(SessionId s, PeekKind kind, JobId id, std::string_view topic, std::string_view key,
            JobsDone done) override;
  void StatsJob(JobId id, Callback<JobStats> done) override;
  void ListJobs(const ListJobsRequest& r, PageDone done) override;
  void FindKey(std::string_view key, JobsDone done) override;
  void StatsTopic(std::string_view topic, Callback<TopicStats> done) override;
  void TopicsStats(Callback<std::vector<TopicStats>> done) override;
  // With a store: its figures, health and cold jobs (StoreMetrics).
  BackendMetrics SampleMetrics() const override;
  void Stats(Callback<EngineStats> done) override;
  void ListTopics(Callback<std::vector<std::string>> done) override;
  void PauseTopic(std::string_view topic, TimeMs delay_ms, Done done) override;
  void ClearTopic(SessionId s, std::string_view topic, uint8_t mask,
                  Callback<uint64_t> done) override;

  void PutObject(ObjectKind kind, std::string_view name, std::string_view value,
                 Done done) override;
  void DeleteObject(ObjectKind kind, std::string_view name, Done done) override;
  void ListObjects(ObjectKind kind, Callback<std::vector<StoredObject>> done) override;
  void ObjectsVersion(ObjectKind kind, Callback<uint64_t> done) override;
  void FireSchedule(std::string_view schedule, TimeMs fire_ms, std::string_view revision,
                    const PutRequest& r, Callback<PutResult> done) override;
  void UnfireSchedule(std::string_view schedule, std::string_view topic, TimeMs fire_ms,
                      std::string_view revision, std::string_view key,
                      Callback<bool> done) override;

  TimeMs Now() const override { return clock_.Now(); }
  // The engine's ticks: microseconds.
  static constexpr TimeMs kTicksPerMs = 1000;
  bool RepliesWaitForStore() const override { return !deferred_.empty(); }
  // With a journal: the writer is more than max_unwritten_bytes_ behind it.
  bool StoreBehind() const override;
  bool ReserveServed(SessionId s) const override;
  // Every completion that waits (for the store) waits in deferred_, in the
  // order of the calls, a reserve that waits for a job aside.
  bool CompletesInOrder() const override { return true; }
  uint64_t StoreCompletionsRun() const override { return store_completions_; }

  // Loads every job and named object of the store into the engine and the
  // objects' map (before any operation).
  // `progress` is called every `every` jobs with the count so far.
  Status Recover(const std::function<void(uint64_t loaded)>& progress, uint64_t every);

  // Whether the store takes writes.
  bool store_healthy() const { return !degraded_; }

  // Applies what fell due up to Now() at once, and loads what the horizon
  // reached, without waiting for the timers (tests drive a manual clock).
  void Poll() {
    LoadHorizon();
    OnTimer();
  }

  // For tests and benchmarks. Its times are in ticks (kTicksPerMs).
  Engine& engine() { return engine_; }

 private:
  // Release and Bury, with a push try's answer to keep (null: none).
  void ReleaseWith(const Claim& c, JobId id, std::optional<uint32_t> priority,
                   std::optional<TimeMs> delay, const PushAnswer* answer, Callback<JobChange> done);
  void BuryWith(const Claim& c, JobId id, std::optional<uint32_t> priority,
                const PushAnswer* answer, Callback<JobChange> done);
  // The time every engine call takes.
  TimeUs EngineNow() const { return clock_.NowUs(); }
  // After every engine call: hands served reserves to their completions and
  // re-arms the timer.
  void Settle();
  // Takes note of the mutations the engine appended to the open batch
  // (Gather); posts a flush.
  void Collect();
  void Gather();
  void Flush();
  // Batches up to `seq` are settled with `st`: their replies go. in_store
  // false: durable in the journal (the loop's own sync) but not yet in the
  // store, so what waits for the store itself (ForgetWritten) waits on.
  void OnSettled(uint64_t seq, Status st, bool in_store = true);
  // Whose replies wait in deferred_ (sessions still open): none, one
  // session's, or several sessions'.
  enum class Waiting { kNone, kOne, kMany };
  Waiting WhoWaits() const;
  // Under always: whether one client alone waits (as for the last few
  // batches), so that this thread syncs the journal itself and its replies
  // go without the hand-overs to the writer and back (docs/decisions.md);
  // the writer's sync of the batch then finds it done.
  bool LoneWaiter(Waiting waiting);
  // Under always: batches up to `seq` are in the journal and every record
  // appended is synced (a change that changed nothing, as a put of a live
  // key, need not wait for the writer's write of a batch with nothing to
  // sync, which may wait 10 ms for company).
  bool SyncedInJournal(uint64_t seq) const;
  // Batches up to `seq` are durable: their puts may be shown.
  void PutsDurableThrough(uint64_t seq);
  // Runs `reply` once every change so far is durable (or at once, without
  // a store), with `outcome`, or with the store's error when the write
  // failed. An outcome other than Ok is an answer that rests on changes
  // not yet durable: a push target or schedule "not found" because
  // another client's delete came first.
  void AfterChange(Op op, SessionId s, std::function<void(Status)> reply,
                   Status outcome = Status::Ok());
  // Completes operation `op` (its row of the operation table,
  // delayq/operations.h): an error at once; a success via AfterChange when
  // the row says the operation changes the queue (`durable`), else at once.
  void FinishChange(Op op, SessionId s, Status st, Done done);
  template <typename T>
  void FinishChange(Op op, SessionId s, Result<T> res, Callback<T> done);
  // Whether `op` may run now: Writable() for an operation whose row says it
  // changes the queue (`durable`), Ok for any other.
  Status Admit(Op op) const;
  // kUnavailable while the store refuses writes.
  Status Writable() const;
  void ArmTimer();
  void OnTimer();
  void CompleteWaiter(SessionId s, Status st, std::span<const JobId> ids);
  void ReplyJobs(Op op, SessionId s, JobsDone done, std::span<const JobId> ids);
  // Replies with jobs: at once when every one of them is durable, else
  // (with copies of them) once the batches holding their puts are.
  void ReplyViews(Op op, SessionId s, JobsDone done, std::span<const JobView> views);
  // Counts the outcome of `op` (operation_outcomes), when it is one of the
  // counted kinds (CountedOp).
  void Count(Op op, Code c) {
#if DELAYQ_COUNT_METRICS
    CountOutcome(op, c);
#else
    (void)op, (void)c;
#endif
  }
  void CountOutcome(Op op, Code c);
  // Calls `done` with `st` (and the rest), counted.
  template <typename D, typename... Rest>
  void Answer(Op op, D& done, Status st, Rest&&... rest) {
    Count(op, st.code());
    done(std::move(st), std::forward<Rest>(rest)...);
  }
  // ---- the horizon ----
  bool horizon_on() const { return horizon_ms_ > 0; }
  // Moves the jobs due up to now + horizon into the engine (a bounded
  // amount per topic; re-runs on the next loop turn while one lags), then
  // re-arms its timer.
  void LoadHorizon();
  void ArmHorizonTimer(bool soon);
  struct Loaded {
    size_t jobs = 0;
    bool more = false;  // stopped at the batch size, not at `through`
  };
  // Takes cold jobs of `topic` after its mark and due at most `through`
  // into the engine, reading at most `batch` stored entries; moves the mark.
  Result<Loaded> LoadTopic(const std::string& topic, TimeMs through, size_t batch);
  // Takes the topic's next `n` cold jobs (soonest first) into the engine.
  Status LoadNext(const std::string& topic, uint64_t n);
  // The cold delayed jobs of r.topic that a page of ListJobs may show: up
  // to r.limit + 1 of them after r.after, in the page's order, read from
  // the store (and the writes on their way) without taking them into
  // memory. Walks the topic's cold entries of the due index: O(cold jobs
  // of the topic).
  Status ColdPage(const ListJobsRequest& r, std::vector<ColdJob>* out);
  // If `id` names a cold job, takes it into the engine.
  Status WarmId(JobId id);
  // If a cold job of `topic` has `key`, takes it into the engine.
  Status WarmKey(std::string_view topic, std::string_view key);
  // Takes into memory the cold job `name` names (Engine::ResolveName): the
  // job whose name it is, else the job of that id.
  Status WarmName(std::string_view name);
  void ByName(std::string_view name, bool finish, Callback<JobChange> done);
  Status AdoptStored(JobId id);
  // Batches up to `seq` are durable: forgets what the store now holds.
  void ForgetWritten(uint64_t seq);
  // With a journal: appends batch `seq` after any that failed to append
  // before, then settles it.
  void JournalBatch(uint64_t seq, std::vector<Mutation> batch);
  // Appends the batches kept after failed appends, in order, and hands
  // them to the writer (`waiting`: whose replies wait, WhoWaits). Returns
  // the error of the first that fails. With `synced_here`, syncs the
  // journal on this thread first if the writer is not syncing, and says
  // whether that was done.
  Status AppendUnjournaled(Waiting waiting, bool* synced_here = nullptr);
  // With a journal: before the batches that hand out ids are appended (and
  // answered), leases ids ahead of them in the store (Store::NoteMaxId),
  // kIdLeaseBlock at a time, once half of the last lease is used. An error
  // only when an id handed out is past every lease (a lease that failed
  // with ids still leased is tried again at the next append).
  Status LeaseIds();
  static constexpr JobId kIdLeaseBlock = JobId{1} << 20;
  void ArmJournalRetry();
  // With a journal: whether the writer is more than max_unwritten_bytes_
  // behind; if so, asks it to post OnWriterProgress (true returned).
  bool WaitForWriter();
  void OnWriterProgress();
  // The store refuses writes while the journal or the writer fails.
  void SetHealth(bool journal_ok, bool writer_ok, const Status& error);

  // Appends a named object's change to the open batch, after the engine's
  // changes made so far (with a store).
  void RecordObject(Mutation::Kind kind, ObjectKind object, std::string_view name,
                    std::string_view value);

  // The barrier a reply waits for: the open batch, else the last one. (Of
  // the open batch, what Gather looked at: a reply that shows a job
  // (ReplyViews) does not wait for the changes the engine made since, as
  // a reserve's own counters.)
  uint64_t Barrier() const { return gathered_ == 0 ? next_seq_ - 1 : next_seq_; }

  boost::asio::io_context& io_;
  const Clock& clock_;
  BackendInfo info_;
  Engine engine_;
  boost::asio::steady_timer timer_;
  TimeUs timer_at_ = kNever;  // engine ticks
  std::unordered_map<SessionId, JobsDone> waiting_;
  std::vector<Event> events_;
  std::vector<JobView> views_;
  bool settling_ = false;
  OperationOutcomes outcomes_;
  // Named objects (local_objects.cc), by kind and name; each kind's version
  // (ObjectsVersion) counts its changes since start.
  std::map<std::pair<ObjectKind, std::string>, std::string, std::less<>> objects_;
  std::array<uint64_t, kMaxObjectKind + 1> object_versions_{};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  // ---- durability (with a store) ----
  struct Deferred {
    uint64_t seq;  // settled once batch `seq` is
    SessionId session;
    Op op;                              // counted when it replies
    std::function<void(Status)> reply;  // empty: its session closed
    Status outcome;                     // its answer once the batch is durable
    bool serves_reserve = false;        // a reserve's answer (served_)
  };
  store::Store* store_;
  std::function<void(bool, const Status&)> on_store_health_;
  // Becomes batch `next_seq_`; the engine appends to it (RecordMutationsInto).
  std::vector<Mutation> open_batch_;
  size_t gathered_ = 0;  // of open_batch_, looked at by Gather
  uint64_t next_seq_ = 1;
  uint64_t settled_seq_ = 0;        // batches up to this one are written (or failed)
  uint64_t store_completions_ = 0;  // the writer's posts run on this thread
  bool flush_posted_ = false;
  std::deque<Deferred> deferred_;
  // The last batch handed to the writer (its batches go in order): under
  // always a batch whose append failed is settled but never handed over.
  uint64_t submitted_seq_ = 0;
  // Sessions whose reserve was served and waits in deferred_ (how many).
  std::unordered_map<SessionId, uint32_t> served_;
  // Puts of ids up to this are durable (ids grow with batch order); a job
  // above it is not handed to anyone before its batch is written, so that
  // no client sees a job, or an id, that a crash could take back.
  JobId durable_put_id_ = 0;
  // Ids up to this are leased (LeaseIds): a restart hands out none of them.
  JobId id_lease_ = 0;
  JobId open_max_put_id_ = 0;
  std::deque<std::pair<uint64_t, JobId>> batch_max_put_id_;  // submitted, unsettled
  bool degraded_ = false;
  bool journal_failing_ = false;
  bool writer_failing_ = false;
  Status store_error_;
  store::Journal* journal_;
  // The journal is synced by the writer, before it takes each group of
  // batches (`--fsync always`): a batch's replies then wait for the
  // writer, as without a journal; otherwise they go once it is appended.
  const bool writer_syncs_journal_;
  // LoneWaiter: batches in a row whose waiting replies were all of one
  // session; the loop syncs from the kLoneBatches-th on.
  static constexpr uint32_t kLoneBatches = 4;
  uint32_t lone_batches_ = 0;
  uint64_t syncs_here_ = 0;  // syncs the loop made itself
  std::chrono::milliseconds retry_interval_;
  // Batches not appended to the journal yet (an append failed), in order.
  std::deque<std::pair<uint64_t, std::vector<Mutation>>> unjournaled_;
  boost::asio::steady_timer journal_retry_timer_;
  bool journal_retry_armed_ = false;
  uint64_t journal_errors_ = 0;  // appends the journal refused
  // With a journal: how far the writer got (set on the writer thread).
  // Replies do not wait for it, unless it falls more than
  // max_unwritten_bytes_ behind the journal: then they do, as without a
  // journal, so that memory stays bounded when the store is slower than
  // the clients.
  struct WriterProgress {
    std::atomic<uint64_t> seq{0};    // the last batch written
    std::atomic<uint64_t> bytes{0};  // of batches the writer is done with
    std::atomic<bool> wake{false};   // the loop waits: post OnWriterProgress
    // Under always: batches up to this one were settled by the loop's own
    // sync (JournalBatch), and need no post from the writer.
    std::atomic<uint64_t> settled_here{0};
  };
  uint64_t max_unwritten_bytes_;
  std::shared_ptr<WriterProgress> progress_ = std::make_shared<WriterProgress>();
  uint64_t submitted_bytes_ = 0;  // of batches handed to the writer
  uint64_t journaled_seq_ = 0;    // the last batch appended to the journal

  // ---- the horizon (with a store) ----
  TimeMs horizon_ms_ = 0;
  size_t horizon_batch_;
  boost::asio::steady_timer horizon_timer_;
  bool horizon_posted_ = false;
  // What the store does not hold yet, by the batch that writes it: jobs
  // the engine let go of (their latest image), their keys, and deletes.
  // The engine and these come before the store in every lookup.
  struct Pending {
    uint64_t seq;
    ColdJob job;
  };
  std::unordered_map<JobId, Pending> cold_pending_;
  std::unordered_map<std::string, JobId> cold_pending_keys_;  // store::UserKey
  std::unordered_map<JobId, uint64_t> deleting_;
  std::deque<std::pair<uint64_t, JobId>> pending_order_;  // (seq, id), both maps
  std::unique_ptr<store::Writer> writer_;                 // last: its thread posts to the rest
};

}  // namespace delayq::backend

#endif  // DELAYQ_BACKEND_LOCAL_BACKEND_H_

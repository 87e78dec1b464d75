#include "backend/local_backend.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <utility>

#include "delayq/text.h"

namespace delayq::backend {

LocalBackend::LocalBackend(boost::asio::io_context& io, const Options& options, const Clock& clock)
    : io_(io),
      clock_(clock),
      info_{"local", options.max_job_size},
      engine_(
          EngineOptions{.start_ms = clock.Now(),
                        .ticks_per_ms = kTicksPerMs,
                        .max_job_size = options.max_job_size,
                        .record_mutations = options.store != nullptr,
                        .evict_beyond_horizon = options.store != nullptr && options.horizon_ms > 0,
                        .max_topics = options.max_topics,
                        .lease_seed = options.lease_seed}),
      timer_(io),
      store_(options.store),
      on_store_health_(options.on_store_health),
      journal_(options.store != nullptr ? options.journal : nullptr),
      writer_syncs_journal_(journal_ != nullptr &&
                            journal_->fsync() == store::FsyncPolicy::kAlways),
      retry_interval_(options.store_retry_interval),
      journal_retry_timer_(io),
      max_unwritten_bytes_(options.journal_max_unwritten_bytes),
      horizon_ms_(options.store != nullptr ? std::max<TimeMs>(0, options.horizon_ms) : 0),
      horizon_batch_(std::max<size_t>(1, options.horizon_batch)),
      horizon_timer_(io) {
  if (store_ == nullptr) return;
  engine_.RecordMutationsInto(&open_batch_);
  std::weak_ptr<bool> alive = alive_;
  writer_ = std::make_unique<store::Writer>(
      *store_,
      [this, alive, io = &io_](bool ok, const Status& error) {
        boost::asio::post(*io, [this, alive, ok, error] {
          if (alive.expired()) return;
          ++store_completions_;
          // The write that worked took every batch kept since the failure
          // (all settled ones, failed, come before this in the loop's queue).
          if (ok && (journal_ == nullptr || writer_syncs_journal_)) {
            const uint64_t written = std::min(settled_seq_, submitted_seq_);
            PutsDurableThrough(written);
            ForgetWritten(written);
          }
          SetHealth(!journal_failing_, ok, error);
        });
      },
      options.store_retry_interval, std::chrono::seconds(1),
      journal_ != nullptr && !writer_syncs_journal_ ? options.journal_batch_window
                                                    : std::chrono::milliseconds(0),
      // Under always, batches the loop synced itself wait for company too.
      writer_syncs_journal_ ? options.journal_batch_window : std::chrono::milliseconds(0));
  if (horizon_on()) {
    engine_.SetHorizon(Now() + horizon_ms_);
    ArmHorizonTimer(false);
  }
}

LocalBackend::~LocalBackend() {
  *alive_ = false;
  timer_.cancel();
  horizon_timer_.cancel();
  journal_retry_timer_.cancel();
  if (writer_ != nullptr) {
    // What the journal would not take, and what closing sessions changed
    // last, go to the store before the writer stops (it flushes at close).
    for (auto& [seq, batch] : unjournaled_) writer_->Submit(std::move(batch), nullptr);
    engine_.RecordMutationsInto(nullptr);
    if (!open_batch_.empty()) writer_->Submit(std::move(open_batch_), nullptr);
    writer_.reset();
  }
  // No id past the last one handed out was: the next start goes on from
  // there, not from the end of the lease (LeaseIds).
  const JobId handed = engine_.next_id() - 1;
  if (store_ != nullptr && id_lease_ > handed) (void)store_->NoteMaxId(handed);
}

void LocalBackend::AfterChange(Op op, SessionId s, std::function<void(Status)> reply,
                               Status outcome) {
  Collect();
  uint64_t need = Barrier();
  if (writer_ == nullptr || need <= settled_seq_ || SyncedInJournal(need))
    return Answer(op, reply, std::move(outcome));
  deferred_.push_back(Deferred{need, s, op, std::move(reply), std::move(outcome)});
}

SessionId LocalBackend::OpenSession() { return engine_.OpenSession(EngineNow()); }

void LocalBackend::CloseSession(SessionId s) {
  waiting_.erase(s);
  served_.erase(s);
  for (Deferred& d : deferred_)
    if (d.session == s) d.reply = nullptr;
  engine_.CloseSession(EngineNow(), s);
  Settle();
}

Status LocalBackend::Use(SessionId s, std::string_view topic) { return engine_.Use(s, topic); }
Result<size_t> LocalBackend::Watch(SessionId s, std::string_view topic) {
  return engine_.Watch(s, topic);
}
Result<size_t> LocalBackend::Ignore(SessionId s, std::string_view topic) {
  auto r = engine_.Ignore(s, topic);
  Settle();
  return r;
}
std::string LocalBackend::UsedTopic(SessionId s) const { return std::string(engine_.UsedTopic(s)); }
std::vector<std::string> LocalBackend::WatchedTopics(SessionId s) const {
  std::vector<std::string> out;
  for (std::string_view t : engine_.WatchedTopics(s)) out.emplace_back(t);
  return out;
}

void LocalBackend::Put(SessionId s, const PutRequest& r, Callback<PutResult> done) {
  if (Status w = Admit(Op::kPut); !w.ok()) return Answer(Op::kPut, done, std::move(w));
  // A key may name a cold job: the put then returns it, as for any job.
  if (Status w = WarmKey(r.topic.empty() ? engine_.UsedTopic(s) : r.topic, r.key); !w.ok())
    return Answer(Op::kPut, done, std::move(w));
  if (r.named)  // so may a name, in another topic
    if (Status w = WarmName(r.key); !w.ok()) return Answer(Op::kPut, done, std::move(w));
  FinishChange<PutResult>(Op::kPut, s, engine_.Put(EngineNow(), s, r), std::move(done));
}

void LocalBackend::ReplyJobs(Op op, SessionId s, JobsDone done, std::span<const JobId> ids) {
  views_.clear();
  for (JobId id : ids) {
    auto v = engine_.PeekReservation(engine_.now(), id);
    if (v.ok()) views_.push_back(*v);
  }
  std::vector<JobView> views;
  views.swap(views_);  // the completion may re-enter the backend
  ReplyViews(op, s, std::move(done), views);
  if (views_.empty()) views_.swap(views);  // keep the capacity
}

void LocalBackend::ReplyViews(Op op, SessionId s, JobsDone done, std::span<const JobView> views) {
  bool durable = true;
  for (const JobView& v : views) durable &= v.id <= durable_put_id_;
  if (writer_ == nullptr || durable) return Answer(op, done, Status::Ok(), views);
  uint64_t need = Barrier();
  if (need <= settled_seq_)  // its write failed; it is kept, but not durable yet
    return done(
        Status::Unavailable("the store has not written this job: " + store_error_.message()), {});
  // Copies: the views die with this call.
  struct Owned {
    JobView view;
    std::string topic, key, body, lease;
  };
  auto owned = std::make_shared<std::vector<Owned>>(views.size());
  for (size_t i = 0; i < views.size(); ++i) {
    Owned& o = (*owned)[i];
    o.topic = views[i].topic;
    o.key = views[i].key;
    o.body = views[i].body;
    o.lease = views[i].lease;
    o.view = views[i];
  }
  deferred_.push_back(Deferred{need, s, op,
                               [done = std::move(done), owned](Status st) {
                                 if (!st.ok()) return done(std::move(st), {});
                                 std::vector<JobView> out;
                                 for (Owned& o : *owned) {
                                   o.view.topic = o.topic;
                                   o.view.key = o.key;
                                   o.view.body = o.body;
                                   o.view.lease = o.lease;
                                   out.push_back(o.view);
                                 }
                                 done(Status::Ok(), out);
                               },
                               Status::Ok(), op == Op::kReserve});
  if (op == Op::kReserve) served_[s]++;
}

void LocalBackend::Reserve(const ReserveRequest& r, JobsDone done) {
  waiting_.erase(r.session);
  auto res = engine_.Reserve(EngineNow(), r);
  if (!res.ok()) {
    Answer(Op::kReserve, done, res.status(), Jobs{});
  } else if (!res->empty()) {
    ReplyJobs(Op::kReserve, r.session, std::move(done), *res);
  } else {
    waiting_[r.session] = std::move(done);
  }
  Settle();
}

bool LocalBackend::ReserveServed(SessionId s) const { return served_.contains(s); }

void LocalBackend::CancelReserve(SessionId s) {
  waiting_.erase(s);
  engine_.CancelReserve(s);
}

void LocalBackend::ReserveJob(SessionId s, JobId id, JobsDone done) {
  waiting_.erase(s);
  if (Status w = WarmId(id); !w.ok()) return Answer(Op::kReserveJob, done, std::move(w), Jobs{});
  auto res = engine_.ReserveJob(EngineNow(), s, id);
  if (!res.ok()) {
    Answer(Op::kReserveJob, done, res.status(), Jobs{});
  } else {
    JobView v = *res;
    ReplyViews(Op::kReserveJob, s, std::move(done), std::span<const JobView>(&v, 1));
  }
  Settle();
}

void LocalBackend::CountOutcome(Op op, Code c) {
  CountedOp counted;
  switch (op) {  // CountingBackend's kinds (counting_backend.h)
    case Op::kPut:
      counted = CountedOp::kPut;
      break;
    case Op::kReserve:
    case Op::kReserveJob:
      counted = CountedOp::kReserve;
      break;
    case Op::kFinish:
      counted = CountedOp::kFinish;
      break;
    case Op::kRelease:
      counted = CountedOp::kRelease;
      break;
    case Op::kBury:
      counted = CountedOp::kBury;
      break;
    case Op::kKick:
    case Op::kKickJob:
      counted = CountedOp::kKick;
      break;
    case Op::kDelete:
    case Op::kDeleteKey:
      counted = CountedOp::kDelete;
      break;
    case Op::kTouch:
      counted = CountedOp::kTouch;
      break;
    default:
      return;
  }
  outcomes_.Count(counted, c);
}

Status LocalBackend::Admit(Op op) const {
  return OperationOf(op).durable ? Writable() : Status::Ok();
}

void LocalBackend::FinishChange(Op op, SessionId s, Status st, Done done) {
  if (!st.ok() || !OperationOf(op).durable) {
    Answer(op, done, std::move(st));
  } else {
    AfterChange(op, s, std::move(done));
  }
  Settle();
}

template <typename T>
void LocalBackend::FinishChange(Op op, SessionId s, Result<T> res, Callback<T> done) {
  if (!res.ok() || !OperationOf(op).durable || writer_ == nullptr) {
    // (Without a store a change is as durable as it gets at once: no
    // wrapper for AfterChange to hold.)
    Count(op, res.ok() ? Code::kOk : res.status().code());
    done(std::move(res));
  } else {
    AfterChange(op, s, [done = std::move(done), v = std::move(*res)](Status st) mutable {
      if (st.ok())
        done(std::move(v));
      else
        done(std::move(st));
    });
  }
  Settle();
}
// local_objects.cc's schedule firings finish as puts.
template void LocalBackend::FinishChange<PutResult>(Op, SessionId, Result<PutResult>,
                                                    Callback<PutResult>);

namespace {

// The engine's holder for a claim; kInvalidArgument for a lease this
// backend cannot have given.
Result<Holder> HolderOf(const Claim& c) {
  if (c.lease.empty()) return Holder(c.session);
  uint64_t lease = 0;
  if (!ParseLease(c.lease, &lease))
    return Status::InvalidArgument("not a lease this server gives (16 hex digits)");
  return Holder(c.session, lease);
}

}  // namespace

void LocalBackend::Delete(const Claim& c, JobId id, Callback<JobChange> done) {
  auto h = HolderOf(c);
  if (!h.ok()) return Answer(Op::kDelete, done, h.status());
  if (Status w = Admit(Op::kDelete); !w.ok()) return Answer(Op::kDelete, done, std::move(w));
  if (Status w = WarmId(id); !w.ok()) return Answer(Op::kDelete, done, std::move(w));
  FinishChange(Op::kDelete, c.session, engine_.Delete(EngineNow(), *h, id), std::move(done));
}

void LocalBackend::DeleteByKey(const Claim& c, std::string_view topic, std::string_view key,
                               Callback<JobChange> done) {
  auto h = HolderOf(c);
  if (!h.ok()) return Answer(Op::kDeleteKey, done, h.status());
  if (Status w = Admit(Op::kDeleteKey); !w.ok()) return Answer(Op::kDeleteKey, done, std::move(w));
  if (Status w = WarmKey(topic, key); !w.ok()) return Answer(Op::kDeleteKey, done, std::move(w));
  FinishChange(Op::kDeleteKey, c.session, engine_.DeleteByKey(EngineNow(), *h, topic, key),
               std::move(done));
}

void LocalBackend::Finish(const Claim& c, JobId id, Callback<JobChange> done) {
  auto h = HolderOf(c);
  if (!h.ok()) return Answer(Op::kFinish, done, h.status());
  if (Status w = Admit(Op::kFinish); !w.ok()) return Answer(Op::kFinish, done, std::move(w));
  if (Status w = WarmId(id); !w.ok())
    return Answer(Op::kFinish, done, std::move(w));  // its state, if cold
  FinishChange(Op::kFinish, c.session, engine_.Finish(EngineNow(), *h, id), std::move(done));
}

void LocalBackend::FinishByName(std::string_view name, Callback<JobChange> done) {
  ByName(name, /*finish=*/true, std::move(done));
}

void LocalBackend::DeleteByName(std::string_view name, Callback<JobChange> done) {
  ByName(name, /*finish=*/false, std::move(done));
}

// The job `name` names (Engine::ResolveName, a cold one taken in first),
// finished or deleted as an operator would.
void LocalBackend::ByName(std::string_view name, bool finish, Callback<JobChange> done) {
  const Op op = finish ? Op::kFinish : Op::kDelete;
  if (Status w = Admit(op); !w.ok()) return Answer(op, done, std::move(w));
  if (Status w = WarmName(name); !w.ok()) return Answer(op, done, std::move(w));
  JobId id = engine_.ResolveName(name);
  if (id == 0)
    return Answer(op, done, Status::NotFound("no job has id '" + std::string(name) + "'"));
  const TimeUs now = EngineNow();
  FinishChange(op, SessionId{0},
               finish ? engine_.Finish(now, Holder(0), id) : engine_.Delete(now, Holder(0), id),
               std::move(done));
}

void LocalBackend::Release(const Claim& c, JobId id, std::optional<uint32_t> priority,
                           std::optional<TimeMs> delay, Callback<JobChange> done) {
  ReleaseWith(c, id, priority, delay, nullptr, std::move(done));
}

void LocalBackend::ReleaseAnswered(const Claim& c, JobId id, std::optional<TimeMs> delay,
                                   const PushAnswer& answer, Callback<JobChange> done) {
  ReleaseWith(c, id, std::nullopt, delay, &answer, std::move(done));
}

void LocalBackend::ReleaseWith(const Claim& c, JobId id, std::optional<uint32_t> priority,
                               std::optional<TimeMs> delay, const PushAnswer* answer,
                               Callback<JobChange> done) {
  auto h = HolderOf(c);
  if (!h.ok()) return Answer(Op::kRelease, done, h.status());
  if (Status w = Admit(Op::kRelease); !w.ok()) return Answer(Op::kRelease, done, std::move(w));
  if (Status w = WarmId(id); !w.ok()) return Answer(Op::kRelease, done, std::move(w));
  FinishChange(Op::kRelease, c.session,
               engine_.Release(EngineNow(), *h, id, priority, delay, answer), std::move(done));
}

void LocalBackend::Bury(const Claim& c, JobId id, std::optional<uint32_t> priority,
                        Callback<JobChange> done) {
  BuryWith(c, id, priority, nullptr, std::move(done));
}

void LocalBackend::BuryAnswered(const Claim& c, JobId id, const PushAnswer& answer,
                                Callback<JobChange> done) {
  BuryWith(c, id, std::nullopt, &answer, std::move(done));
}

void LocalBackend::BuryWith(const Claim& c, JobId id, std::optional<uint32_t> priority,
                            const PushAnswer* answer, Callback<JobChange> done) {
  auto h = HolderOf(c);
  if (!h.ok()) return Answer(Op::kBury, done, h.status());
  if (Status w = Admit(Op::kBury); !w.ok()) return Answer(Op::kBury, done, std::move(w));
  if (Status w = WarmId(id); !w.ok()) return Answer(Op::kBury, done, std::move(w));
  FinishChange(Op::kBury, c.session, engine_.Bury(EngineNow(), *h, id, priority, answer),
               std::move(done));
}

void LocalBackend::Touch(const Claim& c, JobId id, Callback<JobChange> done) {
  auto h = HolderOf(c);
  if (!h.ok()) return Answer(Op::kTouch, done, h.status());
  if (Status w = WarmId(id); !w.ok()) return Answer(Op::kTouch, done, std::move(w));
  // Not durable (its row): a TTR is not persisted.
  FinishChange(Op::kTouch, c.session, engine_.Touch(EngineNow(), *h, id), std::move(done));
}

void LocalBackend::Kick(SessionId s, std::string_view topic, uint64_t bound,
                        Callback<uint64_t> done) {
  if (Status w = Admit(Op::kKick); !w.ok()) return Answer(Op::kKick, done, std::move(w));
  // With no buried job, kick takes the soonest delayed ones, cold ones
  // too: the `bound` soonest cold ones join those in memory (which may hold
  // a job taken in beyond the mark, by id), and the engine picks.
  std::string name(topic);
  if (horizon_on() && bound > 0 && engine_.ColdJobs(name) > 0) {
    auto stats = engine_.StatsTopic(EngineNow(), name);
    if (stats.ok() && stats->buried == 0)
      if (Status w = LoadNext(name, bound); !w.ok()) return Answer(Op::kKick, done, std::move(w));
  }
  FinishChange<uint64_t>(Op::kKick, s, engine_.Kick(EngineNow(), topic, bound), std::move(done));
}

void LocalBackend::KickJob(SessionId s, JobId id, Callback<JobChange> done) {
  if (Status w = Admit(Op::kKickJob); !w.ok()) return Answer(Op::kKickJob, done, std::move(w));
  if (Status w = WarmId(id); !w.ok()) return Answer(Op::kKickJob, done, std::move(w));
  FinishChange(Op::kKickJob, s, engine_.KickJob(EngineNow(), id), std::move(done));
}

void LocalBackend::Peek(SessionId s, PeekKind kind, JobId id, std::string_view topic,
                        std::string_view key, JobsDone done) {
  Status warm;
  if (kind == PeekKind::kId) warm = WarmId(id);
  if (kind == PeekKind::kKey) warm = WarmKey(topic, key);
  if (kind == PeekKind::kName) warm = WarmName(key);
  if (kind == PeekKind::kDelayed && horizon_on() && engine_.ColdJobs(topic) > 0)
    warm = LoadNext(std::string(topic), 1);  // the soonest cold job, against those in memory
  if (!warm.ok()) return done(std::move(warm), {});
  TimeUs now = EngineNow();
  Result<JobView> r = Status::NotFound();
  switch (kind) {
    case PeekKind::kId:
      r = engine_.Peek(now, id);
      break;
    case PeekKind::kKey:
      r = engine_.PeekByKey(now, topic, key);
      break;
    case PeekKind::kReady:
      r = engine_.PeekReady(now, topic);
      break;
    case PeekKind::kDelayed:
      r = engine_.PeekDelayed(now, topic);
      break;
    case PeekKind::kBuried:
      r = engine_.PeekBuried(now, topic);
      break;
    case PeekKind::kName:
      if (JobId named = engine_.ResolveName(key); named != 0) r = engine_.Peek(now, named);
      break;
  }
  if (!r.ok()) {
    done(r.status(), {});
  } else {
    JobView v = *r;
    ReplyViews(Op::kPeek, s, std::move(done), std::span<const JobView>(&v, 1));
  }
  Settle();
}

void LocalBackend::ListJobs(const ListJobsRequest& r, PageDone done) {
  // Cold jobs first: reading them changes nothing in the engine, whose
  // views below must last until the reply.
  std::vector<ColdJob> cold;
  if (r.state == JobState::kDelayed && horizon_on() && engine_.ColdJobs(r.topic) > 0)
    if (Status st = ColdPage(r, &cold); !st.ok()) return done(std::move(st), {}, false);
  bool more = false;
  std::vector<JobView> views = engine_.ListJobs(EngineNow(), r, &more);
  if (!cold.empty()) {
    for (const ColdJob& c : cold) {
      const JobRecord& rec = c.record;
      JobView v;
      v.id = rec.id;
      v.topic = rec.topic;
      v.key = rec.key;
      v.body = c.body;
      v.state = JobState::kDelayed;
      v.priority = rec.priority;
      v.due_ms = rec.due_ms;
      v.created_ms = rec.created_ms;
      v.delay_ms = rec.delay_ms;
      v.ttr_ms = rec.ttr_ms;
      v.reserves = rec.reserves;
      v.timeouts = rec.timeouts;
      v.releases = rec.releases;
      v.buries = rec.buries;
      v.kicks = rec.kicks;
      v.max_tries = rec.max_tries;
      v.named = rec.named;
      views.push_back(v);
    }
    std::sort(views.begin(), views.end(), [desc = r.desc](const JobView& a, const JobView& b) {
      return desc ? a.id > b.id : a.id < b.id;
    });
    if (views.size() > r.limit) {
      more = true;
      views.resize(r.limit);
    }
  }
  ReplyViews(
      Op::kListJobs, SessionId{0},
      [done = std::move(done), more](Status st, Jobs jobs) {
        const bool follow = st.ok() && more;
        done(std::move(st), jobs, follow);
      },
      views);
  Settle();
}

void LocalBackend::FindKey(std::string_view key, JobsDone done) {
  if (horizon_on() && engine_.ColdJobs() > 0) {
    for (const std::string& topic : engine_.TopicsWithColdJobs())
      if (Status st = WarmKey(topic, key); !st.ok()) return done(std::move(st), {});
  }
  std::vector<JobView> views = engine_.FindKey(EngineNow(), key);
  ReplyViews(Op::kFindJobs, SessionId{0}, std::move(done), views);
  Settle();
}

void LocalBackend::StatsJob(JobId id, Callback<JobStats> done) {
  if (Status w = WarmId(id); !w.ok()) return done(std::move(w));
  done(engine_.StatsJob(EngineNow(), id));
  Settle();
}

void LocalBackend::StatsTopic(std::string_view topic, Callback<TopicStats> done) {
  done(engine_.StatsTopic(EngineNow(), topic));
  Settle();
}

void LocalBackend::TopicsStats(Callback<std::vector<TopicStats>> done) {
  done(engine_.TopicsStats(EngineNow()));
  Settle();
}

BackendMetrics LocalBackend::SampleMetrics() const {
  BackendMetrics m;
  m.healthy = !degraded_;
  if (store_ == nullptr) return m;
  const store::StoreSample s = store_->Sample();
  StoreMetrics& sm = m.store.emplace();
  sm.sync = s.sync;
  sm.disk_bytes = s.disk_bytes;
  sm.cold_jobs = engine_.ColdJobs();
  sm.write_errors = journal_errors_ + (writer_ != nullptr ? writer_->write_errors() : 0);
  sm.loop_syncs = syncs_here_;
  sm.healthy = !degraded_;
  return m;
}

void LocalBackend::Stats(Callback<EngineStats> done) {
  done(engine_.Stats(EngineNow()));
  Settle();
}

void LocalBackend::ListTopics(Callback<std::vector<std::string>> done) {
  done(engine_.ListTopics(EngineNow()));
  Settle();
}

void LocalBackend::PauseTopic(std::string_view topic, TimeMs delay_ms, Done done) {
  FinishChange(Op::kPauseTopic, SessionId{0}, engine_.PauseTopic(EngineNow(), topic, delay_ms),
               std::move(done));
}

void LocalBackend::ClearTopic(SessionId s, std::string_view topic, uint8_t mask,
                              Callback<uint64_t> done) {
  if (Status w = Admit(Op::kClearTopic); !w.ok()) return done(std::move(w));
  auto cleared = engine_.ClearTopic(EngineNow(), topic, mask);
  // Cold jobs are cleared a batch at a time: into memory, then deleted (a
  // failure part way leaves the rest, and says so).
  std::string name(topic);
  if (cleared.ok() && (mask & kClearDelayed)) {
    uint64_t total = *cleared;
    while (engine_.ColdJobs(name) > 0) {
      Collect();  // the loader knows the deletes so far as such
      auto r = LoadTopic(name, kNever, horizon_batch_);
      if (!r.ok()) {
        cleared = r.status();
        break;
      }
      auto more = engine_.ClearTopic(EngineNow(), topic, kClearDelayed);
      total += more.ok() ? *more : 0;
      cleared = total;
      if (r->jobs == 0 && !r->more) break;
    }
  }
  FinishChange<uint64_t>(Op::kClearTopic, s, std::move(cleared), std::move(done));
}

void LocalBackend::CompleteWaiter(SessionId s, Status st, std::span<const JobId> ids) {
  auto it = waiting_.find(s);
  if (it == waiting_.end()) return;  // cancelled; the engine already let go
  JobsDone done = std::move(it->second);
  waiting_.erase(it);
  if (st.ok()) {
    ReplyJobs(Op::kReserve, s, std::move(done), ids);
  } else {
    Answer(Op::kReserve, done, std::move(st), Jobs{});
  }
}

void LocalBackend::Settle() {
  Collect();
  if (settling_) return;  // a completion re-entered; the outer loop drains
  settling_ = true;
  for (;;) {
    events_.clear();
    engine_.TakeEvents(&events_);
    if (events_.empty()) break;
    std::vector<Event> batch;
    batch.swap(events_);
    std::vector<JobId> ids;
    for (size_t i = 0; i < batch.size();) {
      const Event& ev = batch[i];
      if (ev.kind == Event::Kind::kReserved) {
        ids.clear();
        size_t k = i;
        while (k < batch.size() && batch[k].kind == Event::Kind::kReserved &&
               batch[k].session == ev.session)
          ids.push_back(batch[k++].job);
        CompleteWaiter(ev.session, Status::Ok(), ids);
        i = k;
      } else {
        CompleteWaiter(
            ev.session,
            ev.kind == Event::Kind::kTimedOut ? Status::TimedOut() : Status::DeadlineSoon(), {});
        ++i;
      }
    }
  }
  settling_ = false;
  ArmTimer();
}

void LocalBackend::ArmTimer() {
  TimeMs next = engine_.NextWakeup();
  if (next >= timer_at_) return;  // an earlier (or equal) wake-up is pending
  timer_at_ = next;
  timer_.expires_at(clock_.SteadyAtUs(next));
  std::weak_ptr<bool> alive = alive_;
  timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    OnTimer();
  });
}

void LocalBackend::OnTimer() {
  timer_at_ = kNever;
  engine_.Advance(EngineNow());
  Settle();
}

}  // namespace delayq::backend

#include "backend/local_backend.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cstdio>
#include <limits>
#include <utility>

#include "delayq/text.h"
#include "store/record_codec.h"

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
      retry_interval_(options.store_retry_interval),
      journal_retry_timer_(io),
      max_unwritten_bytes_(options.journal_max_unwritten_bytes),
      horizon_ms_(options.store != nullptr ? std::max<TimeMs>(0, options.horizon_ms) : 0),
      horizon_batch_(std::max<size_t>(1, options.horizon_batch)),
      horizon_timer_(io) {
  if (store_ == nullptr) return;
  std::weak_ptr<bool> alive = alive_;
  writer_ = std::make_unique<store::Writer>(
      *store_,
      [this, alive, io = &io_](bool ok, const Status& error) {
        boost::asio::post(*io, [this, alive, ok, error] {
          if (alive.expired()) return;
          ++store_completions_;
          // The write that worked took every batch kept since the failure
          // (all settled ones, failed, come before this in the loop's queue).
          if (ok && journal_ == nullptr) {
            PutsDurableThrough(settled_seq_);
            ForgetWritten(settled_seq_);
          }
          SetHealth(!journal_failing_, ok, error);
        });
      },
      options.store_retry_interval, std::chrono::seconds(1),
      journal_ != nullptr ? options.journal_batch_window : std::chrono::milliseconds(0));
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
    engine_.TakeMutations(&open_batch_);
    if (!open_batch_.empty()) writer_->Submit(std::move(open_batch_), nullptr);
    writer_.reset();
  }
}

Status LocalBackend::Recover(const std::function<void(uint64_t)>& progress, uint64_t every) {
  if (store_ == nullptr) return Status::Ok();
  uint64_t loaded = 0;
  TimeUs now = EngineNow();
  JobId max_id = 0;
  // Jobs due beyond the horizon stay on disk; the engine only counts them.
  TimeMs through = horizon_on() ? Now() + horizon_ms_ : kNever;
  engine_.SetHorizon(through);
  // Cold jobs are counted per run of one topic (most runs are long).
  std::string cold_topic;
  uint64_t cold_run = 0;
  JobId cold_first = 0;
  auto count_cold = [&]() -> Status {
    if (cold_run == 0) return Status::Ok();
    Status st = engine_.AddColdJob(cold_topic, cold_run);
    cold_run = 0;
    if (st.ok()) return st;
    return Status::Corruption("job " + std::to_string(cold_first) +
                              " cannot be restored: " + st.message());
  };
  Status st = store_->Load(
      [&](const JobRecord& r, std::string_view body) {
        if (r.state == JobState::kDelayed && r.due_ms > through) {
          if (cold_run > 0 && r.topic != cold_topic) {
            if (Status c = count_cold(); !c.ok()) return c;
          }
          if (cold_run++ == 0) {
            cold_topic = r.topic;
            cold_first = r.id;
          }
        } else if (Status restored = engine_.Restore(now, r, body); !restored.ok()) {
          return Status::Corruption("job " + std::to_string(r.id) +
                                    " cannot be restored: " + restored.message());
        }
        if (++loaded % every == 0 && progress) progress(loaded);
        return Status::Ok();
      },
      &max_id);
  if (st.ok()) st = count_cold();
  if (!st.ok()) return st;
  engine_.SkipIdsThrough(max_id);
  durable_put_id_ = engine_.next_id() - 1;
  if (progress) progress(loaded);
  Settle();
  return Status::Ok();
}

// ---- durability ------------------------------------------------------------

Status LocalBackend::Writable() const {
  if (!degraded_) return Status::Ok();
  return Status::Unavailable("the store refuses writes: " + store_error_.message());
}

void LocalBackend::Collect() {
  if (writer_ == nullptr) return;
  size_t before = open_batch_.size();
  engine_.TakeMutations(&open_batch_);
  for (size_t i = before; i < open_batch_.size(); ++i) {
    const Mutation& m = open_batch_[i];
    if (m.kind == Mutation::Kind::kPut && m.record.id > open_max_put_id_)
      open_max_put_id_ = m.record.id;
    if (horizon_on() && m.kind == Mutation::Kind::kDelete) {
      // The open batch becomes batch next_seq_.
      deleting_[m.record.id] = next_seq_;
      pending_order_.emplace_back(next_seq_, m.record.id);
    }
  }
  if (horizon_on()) {
    std::vector<ColdJob> evicted;
    engine_.TakeEvicted(&evicted);
    for (ColdJob& c : evicted) {
      JobId id = c.record.id;
      if (!c.record.key.empty())
        cold_pending_keys_[store::UserKey(c.record.topic, c.record.key)] = id;
      if (c.record.named) cold_pending_keys_[store::NameKey(c.record.key)] = id;
      cold_pending_[id] = Pending{next_seq_, std::move(c)};
      pending_order_.emplace_back(next_seq_, id);
    }
  }
  if (open_batch_.empty() || flush_posted_) return;
  // Everything the loop does before this runs joins the batch.
  flush_posted_ = true;
  std::weak_ptr<bool> alive = alive_;
  boost::asio::post(io_, [this, alive] {
    if (!alive.expired()) Flush();
  });
}

void LocalBackend::Flush() {
  flush_posted_ = false;
  if (open_batch_.empty()) return;
  uint64_t seq = next_seq_++;
  if (open_max_put_id_ != 0) batch_max_put_id_.emplace_back(seq, open_max_put_id_);
  open_max_put_id_ = 0;
  std::vector<Mutation> batch;
  batch.swap(open_batch_);
  if (journal_ != nullptr) return JournalBatch(seq, std::move(batch));
  std::weak_ptr<bool> alive = alive_;
  writer_->Submit(std::move(batch), [this, alive, seq, io = &io_](Status st) {
    boost::asio::post(*io, [this, alive, seq, st = std::move(st)] {
      if (alive.expired()) return;
      ++store_completions_;
      OnSettled(seq, st);
    });
  });
}

void LocalBackend::JournalBatch(uint64_t seq, std::vector<Mutation> batch) {
  ForgetWritten(progress_->seq.load(std::memory_order_acquire));
  unjournaled_.emplace_back(seq, std::move(batch));
  Status st = AppendUnjournaled();
  if (st.ok() && WaitForWriter()) return;  // OnWriterProgress settles it
  OnSettled(seq, st);
}

bool LocalBackend::WaitForWriter() {
  auto behind = [&] { return submitted_bytes_ - progress_->bytes.load() > max_unwritten_bytes_; };
  if (!behind()) return false;
  progress_->wake.store(true);
  if (behind()) return true;
  // Caught up meanwhile; a post the writer made anyway finds nothing to do.
  progress_->wake.store(false, std::memory_order_relaxed);
  return false;
}

void LocalBackend::OnWriterProgress() {
  ForgetWritten(progress_->seq.load(std::memory_order_acquire));
  if (journaled_seq_ <= settled_seq_ || WaitForWriter()) return;
  OnSettled(journaled_seq_, Status::Ok());
}

Status LocalBackend::AppendUnjournaled() {
  Status st = Status::Ok();
  uint64_t through = 0;
  while (!unjournaled_.empty()) {
    auto& [seq, batch] = unjournaled_.front();
    uint64_t lsn = 0;
    st = journal_->Append(batch, &lsn);
    if (!st.ok()) break;
    through = seq;
    uint64_t bytes = 0;
    for (const Mutation& m : batch)
      bytes += sizeof(Mutation) + m.record.topic.size() + m.record.key.size() + m.body.size();
    submitted_bytes_ += bytes;
    writer_->Submit(
        std::move(batch),
        [this, alive = std::weak_ptr<bool>(alive_), io = &io_, p = progress_, seq = seq,
         bytes](Status written) {
          if (written.ok()) p->seq.store(seq, std::memory_order_release);
          p->bytes.fetch_add(bytes);
          if (p->wake.exchange(false))
            boost::asio::post(*io, [this, alive] {
              if (alive.expired()) return;
              ++store_completions_;
              OnWriterProgress();
            });
        },
        lsn);
    unjournaled_.pop_front();
  }
  if (through != 0) {
    journaled_seq_ = through;
    PutsDurableThrough(through);
  }
  if (!st.ok()) {
    if (!journal_failing_) SetHealth(false, !writer_failing_, st);
    ArmJournalRetry();
  } else if (journal_failing_) {
    SetHealth(true, !writer_failing_, st);
  }
  return st;
}

void LocalBackend::ArmJournalRetry() {
  if (journal_retry_armed_) return;
  journal_retry_armed_ = true;
  std::weak_ptr<bool> alive = alive_;
  journal_retry_timer_.expires_after(retry_interval_);
  journal_retry_timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    journal_retry_armed_ = false;
    if (!unjournaled_.empty()) (void)AppendUnjournaled();  // arms the timer again on failure
    Settle();
  });
}

void LocalBackend::SetHealth(bool journal_ok, bool writer_ok, const Status& error) {
  bool was = degraded_;
  journal_failing_ = !journal_ok;
  writer_failing_ = !writer_ok;
  degraded_ = journal_failing_ || writer_failing_;
  if (degraded_ == was) {
    if (degraded_ && !error.ok()) store_error_ = error;
    return;
  }
  store_error_ = error;
  if (on_store_health_) on_store_health_(!degraded_, error);
}

void LocalBackend::OnSettled(uint64_t seq, Status st) {
  settled_seq_ = seq;
  // A write that worked also wrote every batch kept from failed ones.
  if (st.ok() && journal_ == nullptr) {
    PutsDurableThrough(seq);
    ForgetWritten(seq);
  }
  while (!deferred_.empty() && deferred_.front().seq <= seq) {
    Deferred d = std::move(deferred_.front());
    deferred_.pop_front();
    if (d.reply) d.reply(st);
  }
  Settle();
}

void LocalBackend::PutsDurableThrough(uint64_t seq) {
  while (!batch_max_put_id_.empty() && batch_max_put_id_.front().first <= seq) {
    durable_put_id_ = std::max(durable_put_id_, batch_max_put_id_.front().second);
    batch_max_put_id_.pop_front();
  }
}

// ---- the horizon -----------------------------------------------------------

void LocalBackend::ForgetWritten(uint64_t seq) {
  while (!pending_order_.empty() && pending_order_.front().first <= seq) {
    auto [written, id] = pending_order_.front();
    pending_order_.pop_front();
    if (auto d = deleting_.find(id); d != deleting_.end() && d->second == written)
      deleting_.erase(d);
    auto c = cold_pending_.find(id);
    if (c == cold_pending_.end() || c->second.seq != written) continue;
    const JobRecord& r = c->second.job.record;
    if (!r.key.empty()) {
      auto k = cold_pending_keys_.find(store::UserKey(r.topic, r.key));
      if (k != cold_pending_keys_.end() && k->second == id) cold_pending_keys_.erase(k);
      if (r.named) {
        k = cold_pending_keys_.find(store::NameKey(r.key));
        if (k != cold_pending_keys_.end() && k->second == id) cold_pending_keys_.erase(k);
      }
    }
    cold_pending_.erase(c);
  }
}

Status LocalBackend::AdoptStored(JobId id) {
  JobRecord r;
  std::string body;
  Status st = store_->GetJob(id, &r, &body);
  if (!st.ok()) return st;
  if (r.state != JobState::kDelayed)
    return Status::Internal("job " + std::to_string(id) + " is stored " +
                            std::string(JobStateName(r.state)) + " but is not in memory");
  return engine_.Adopt(engine_.now(), r, body);
}

Status LocalBackend::WarmId(JobId id) {
  if (!horizon_on() || engine_.ColdJobs() == 0 || engine_.HasJob(id) || deleting_.count(id) > 0)
    return Status::Ok();
  if (auto c = cold_pending_.find(id); c != cold_pending_.end())
    return engine_.Adopt(engine_.now(), c->second.job.record, c->second.job.body);
  Status st = AdoptStored(id);
  return st.code() == Code::kNotFound ? Status::Ok() : st;
}

Status LocalBackend::WarmKey(std::string_view topic, std::string_view key) {
  if (!horizon_on() || key.empty() || engine_.ColdJobs(topic) == 0 || engine_.HasKey(topic, key))
    return Status::Ok();
  std::string user_key = store::UserKey(topic, key);
  if (auto k = cold_pending_keys_.find(user_key); k != cold_pending_keys_.end())
    return WarmId(k->second);
  JobId id = 0;
  Status st = store_->FindKey(topic, key, &id);
  if (st.code() == Code::kNotFound) return Status::Ok();
  if (!st.ok()) return st;
  return WarmId(id);
}

Status LocalBackend::WarmName(std::string_view name) {
  if (!horizon_on() || name.empty() || engine_.ColdJobs() == 0) return Status::Ok();
  if (!engine_.HasName(name)) {
    JobId id = 0;
    if (auto k = cold_pending_keys_.find(store::NameKey(name)); k != cold_pending_keys_.end()) {
      id = k->second;
    } else if (Status st = store_->FindKey({}, name, &id);
               !st.ok() && st.code() != Code::kNotFound) {
      return st;
    }
    if (id != 0)
      if (Status st = WarmId(id); !st.ok()) return st;
  }
  // A job without a name is named by its id (Engine::ResolveName).
  if (JobId id = ParseDecimalId(name); id != 0 && !engine_.HasName(name)) return WarmId(id);
  return Status::Ok();
}

Result<LocalBackend::Loaded> LocalBackend::LoadTopic(const std::string& topic, TimeMs through,
                                                     size_t batch) {
  constexpr JobId kAllIds = std::numeric_limits<JobId>::max();
  // Jobs the engine let go of are looked up with the rest. The adoptions
  // below run at the engine's present: they let nothing go (no TTR
  // expires) while the mark moves.
  Collect();
  DueMark from = engine_.TopicMark(topic);
  Loaded out;
  if (from >= DueMark{through, kAllIds}) return out;
  std::vector<DueMark> stored;
  Status st = store_->ScanDue(topic, from, through, [&](DueMark m) {
    if (stored.size() == batch) {
      out.more = true;
      return false;
    }
    stored.push_back(m);
    return true;
  });
  if (!st.ok()) return st;
  DueMark to = out.more ? stored.back() : DueMark{through, kAllIds};
  auto taken = [&](JobId id) {
    return engine_.HasJob(id) || deleting_.count(id) > 0 || cold_pending_.count(id) > 0;
  };
  for (DueMark m : stored) {
    if (taken(m.id)) continue;  // in memory, or the store is behind
    if (Status a = AdoptStored(m.id); !a.ok()) return a;
    out.jobs++;
  }
  // Jobs let go of whose writes are still on their way.
  std::vector<const ColdJob*> unwritten;
  for (const auto& [id, p] : cold_pending_) {
    const JobRecord& r = p.job.record;
    DueMark m{r.due_ms, id};
    if (r.topic == topic && m > from && m <= to && !engine_.HasJob(id) && deleting_.count(id) == 0)
      unwritten.push_back(&p.job);
  }
  for (const ColdJob* c : unwritten) {
    if (Status a = engine_.Adopt(engine_.now(), c->record, c->body); !a.ok()) return a;
    out.jobs++;
  }
  engine_.SetTopicMark(topic, out.more ? std::optional<DueMark>(to) : std::nullopt);
  return out;
}

Status LocalBackend::LoadNext(const std::string& topic, uint64_t n) {
  uint64_t loaded = 0;
  while (loaded < n && engine_.ColdJobs(topic) > 0) {
    auto r = LoadTopic(topic, kNever, std::max<size_t>(64, n - loaded));
    if (!r.ok()) return r.status();
    loaded += r->jobs;
    if (!r->more) break;
  }
  return Status::Ok();
}

void LocalBackend::LoadHorizon() {
  if (!horizon_on()) return;
  // Time first: what it lets go of (a TTR expiring into a long back-off)
  // goes against the marks as they are, before any of them moves.
  engine_.Advance(EngineNow());
  Collect();
  TimeMs through = engine_.now_ms() + horizon_ms_;
  bool lagging = false;
  for (const std::string& topic : engine_.TopicsWithColdJobs()) {
    auto r = LoadTopic(topic, through, horizon_batch_);
    if (!r.ok()) {
      // A failing disk: try again at the next turn; the topic keeps its
      // mark (its cold jobs must stay beyond it) while the others move on.
      engine_.SetTopicMark(topic, engine_.TopicMark(topic));
      std::fprintf(stderr, "level=error event=horizon_load_failed topic=%s error=\"%s\"\n",
                   topic.c_str(), r.status().message().c_str());
      lagging = true;
      continue;
    }
    lagging |= r->more;
  }
  engine_.SetHorizon(through);
  Settle();
  ArmHorizonTimer(lagging);
}

void LocalBackend::ArmHorizonTimer(bool soon) {
  std::weak_ptr<bool> alive = alive_;
  if (soon) {
    if (horizon_posted_) return;
    horizon_posted_ = true;
    boost::asio::post(io_, [this, alive] {
      if (alive.expired()) return;
      horizon_posted_ = false;
      LoadHorizon();
    });
    return;
  }
  // A quarter of the horizon (at most a second) between loads: a job enters
  // memory well before it is due.
  horizon_timer_.expires_after(
      std::chrono::milliseconds(std::clamp<TimeMs>(horizon_ms_ / 4, 1, 1000)));
  horizon_timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    LoadHorizon();
  });
}

void LocalBackend::AfterChange(SessionId s, std::function<void(Status)> reply) {
  Collect();
  uint64_t need = Barrier();
  if (writer_ == nullptr || need <= settled_seq_) return reply(Status::Ok());
  deferred_.push_back(Deferred{need, s, std::move(reply)});
}

SessionId LocalBackend::OpenSession() { return engine_.OpenSession(EngineNow()); }

void LocalBackend::CloseSession(SessionId s) {
  waiting_.erase(s);
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
  if (Status w = Admit(Op::kPut); !w.ok()) return done(std::move(w));
  // A key may name a cold job: the put then returns it, as for any job.
  if (Status w = WarmKey(r.topic.empty() ? engine_.UsedTopic(s) : r.topic, r.key); !w.ok())
    return done(std::move(w));
  if (r.named)  // so may a name, in another topic
    if (Status w = WarmName(r.key); !w.ok()) return done(std::move(w));
  FinishChange<PutResult>(Op::kPut, s, engine_.Put(EngineNow(), s, r), std::move(done));
}

void LocalBackend::ReplyJobs(SessionId s, JobsDone done, std::span<const JobId> ids) {
  views_.clear();
  for (JobId id : ids) {
    auto v = engine_.PeekReservation(engine_.now(), id);
    if (v.ok()) views_.push_back(*v);
  }
  std::vector<JobView> views;
  views.swap(views_);  // the completion may re-enter the backend
  ReplyViews(s, std::move(done), views);
  if (views_.empty()) views_.swap(views);  // keep the capacity
}

void LocalBackend::ReplyViews(SessionId s, JobsDone done, std::span<const JobView> views) {
  bool durable = true;
  for (const JobView& v : views) durable &= v.id <= durable_put_id_;
  if (writer_ == nullptr || durable) return done(Status::Ok(), views);
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
  deferred_.push_back(Deferred{need, s, [done = std::move(done), owned](Status st) {
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
                               }});
}

void LocalBackend::Reserve(const ReserveRequest& r, JobsDone done) {
  waiting_.erase(r.session);
  auto res = engine_.Reserve(EngineNow(), r);
  if (!res.ok()) {
    done(res.status(), {});
  } else if (!res->empty()) {
    ReplyJobs(r.session, std::move(done), *res);
  } else {
    waiting_[r.session] = std::move(done);
  }
  Settle();
}

void LocalBackend::CancelReserve(SessionId s) {
  waiting_.erase(s);
  engine_.CancelReserve(s);
}

void LocalBackend::ReserveJob(SessionId s, JobId id, JobsDone done) {
  waiting_.erase(s);
  if (Status w = WarmId(id); !w.ok()) return done(std::move(w), {});
  auto res = engine_.ReserveJob(EngineNow(), s, id);
  if (!res.ok()) {
    done(res.status(), {});
  } else {
    JobView v = *res;
    ReplyViews(s, std::move(done), std::span<const JobView>(&v, 1));
  }
  Settle();
}

Status LocalBackend::Admit(Op op) const {
  return OperationOf(op).durable ? Writable() : Status::Ok();
}

void LocalBackend::FinishChange(Op op, SessionId s, Status st, Done done) {
  if (!st.ok() || !OperationOf(op).durable) {
    done(std::move(st));
  } else {
    AfterChange(s, std::move(done));
  }
  Settle();
}

template <typename T>
void LocalBackend::FinishChange(Op op, SessionId s, Result<T> res, Callback<T> done) {
  if (!res.ok() || !OperationOf(op).durable) {
    done(std::move(res));
  } else {
    AfterChange(s, [done = std::move(done), v = std::move(*res)](Status st) mutable {
      if (st.ok())
        done(std::move(v));
      else
        done(std::move(st));
    });
  }
  Settle();
}

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
  if (!h.ok()) return done(h.status());
  if (Status w = Admit(Op::kDelete); !w.ok()) return done(std::move(w));
  if (Status w = WarmId(id); !w.ok()) return done(std::move(w));
  FinishChange(Op::kDelete, c.session, engine_.Delete(EngineNow(), *h, id), std::move(done));
}

void LocalBackend::DeleteByKey(const Claim& c, std::string_view topic, std::string_view key,
                               Callback<JobChange> done) {
  auto h = HolderOf(c);
  if (!h.ok()) return done(h.status());
  if (Status w = Admit(Op::kDeleteKey); !w.ok()) return done(std::move(w));
  if (Status w = WarmKey(topic, key); !w.ok()) return done(std::move(w));
  FinishChange(Op::kDeleteKey, c.session, engine_.DeleteByKey(EngineNow(), *h, topic, key),
               std::move(done));
}

void LocalBackend::Finish(const Claim& c, JobId id, Callback<JobChange> done) {
  auto h = HolderOf(c);
  if (!h.ok()) return done(h.status());
  if (Status w = Admit(Op::kFinish); !w.ok()) return done(std::move(w));
  if (Status w = WarmId(id); !w.ok()) return done(std::move(w));  // its state, if cold
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
  if (Status w = Admit(op); !w.ok()) return done(std::move(w));
  if (Status w = WarmName(name); !w.ok()) return done(std::move(w));
  JobId id = engine_.ResolveName(name);
  if (id == 0) return done(Status::NotFound("no job has id '" + std::string(name) + "'"));
  const TimeUs now = EngineNow();
  FinishChange(op, SessionId{0},
               finish ? engine_.Finish(now, Holder(0), id) : engine_.Delete(now, Holder(0), id),
               std::move(done));
}

void LocalBackend::Release(const Claim& c, JobId id, std::optional<uint32_t> priority,
                           std::optional<TimeMs> delay, Callback<JobChange> done) {
  auto h = HolderOf(c);
  if (!h.ok()) return done(h.status());
  if (Status w = Admit(Op::kRelease); !w.ok()) return done(std::move(w));
  if (Status w = WarmId(id); !w.ok()) return done(std::move(w));
  FinishChange(Op::kRelease, c.session, engine_.Release(EngineNow(), *h, id, priority, delay),
               std::move(done));
}

void LocalBackend::Bury(const Claim& c, JobId id, std::optional<uint32_t> priority,
                        Callback<JobChange> done) {
  auto h = HolderOf(c);
  if (!h.ok()) return done(h.status());
  if (Status w = Admit(Op::kBury); !w.ok()) return done(std::move(w));
  if (Status w = WarmId(id); !w.ok()) return done(std::move(w));
  FinishChange(Op::kBury, c.session, engine_.Bury(EngineNow(), *h, id, priority), std::move(done));
}

void LocalBackend::Touch(const Claim& c, JobId id, Callback<JobChange> done) {
  auto h = HolderOf(c);
  if (!h.ok()) return done(h.status());
  if (Status w = WarmId(id); !w.ok()) return done(std::move(w));
  // Not durable (its row): a TTR is not persisted.
  FinishChange(Op::kTouch, c.session, engine_.Touch(EngineNow(), *h, id), std::move(done));
}

void LocalBackend::Kick(SessionId s, std::string_view topic, uint64_t bound,
                        Callback<uint64_t> done) {
  if (Status w = Admit(Op::kKick); !w.ok()) return done(std::move(w));
  // With no buried job, kick takes the soonest delayed ones, cold ones
  // too: the `bound` soonest cold ones join those in memory (which may hold
  // a job taken in beyond the mark, by id), and the engine picks.
  std::string name(topic);
  if (horizon_on() && bound > 0 && engine_.ColdJobs(name) > 0) {
    auto stats = engine_.StatsTopic(EngineNow(), name);
    if (stats.ok() && stats->buried == 0)
      if (Status w = LoadNext(name, bound); !w.ok()) return done(std::move(w));
  }
  FinishChange<uint64_t>(Op::kKick, s, engine_.Kick(EngineNow(), topic, bound), std::move(done));
}

void LocalBackend::KickJob(SessionId s, JobId id, Callback<JobChange> done) {
  if (Status w = Admit(Op::kKickJob); !w.ok()) return done(std::move(w));
  if (Status w = WarmId(id); !w.ok()) return done(std::move(w));
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
    ReplyViews(s, std::move(done), std::span<const JobView>(&v, 1));
  }
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
    ReplyJobs(s, std::move(done), ids);
  } else {
    done(std::move(st), {});
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

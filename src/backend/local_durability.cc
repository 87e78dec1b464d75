// The Local backend's durability (local_backend.h): recovery from the store
// at start-up, and the pipeline that carries the engine's mutations to
// disk. Each loop turn's mutations are collected into one batch (Collect),
// which is appended to the journal on this thread (JournalBatch) or handed
// to the writer thread (Flush); replies held by AfterChange run once their
// batch is settled (OnSettled). While the journal or the writer fails, the
// store is degraded (SetHealth) and changes are refused (Writable); batches
// the journal would not take are kept and appended again (ArmJournalRetry).
#include <algorithm>
#include <boost/asio/post.hpp>
#include <optional>
#include <utility>

#include "backend/local_backend.h"
#include "store/record_codec.h"

namespace delayq::backend {

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
  if (st.ok()) {
    st = store_->LoadObjects([&](const StoredObject& o) {
      objects_.insert_or_assign(std::pair{o.kind, o.name}, o.value);
      object_versions_[static_cast<size_t>(o.kind)] = 1;
      return Status::Ok();
    });
  }
  if (!st.ok()) return st;
  engine_.SkipIdsThrough(max_id);
  durable_put_id_ = engine_.next_id() - 1;
  id_lease_ = durable_put_id_;  // what the store holds, or leased before
  if (progress) progress(loaded);
  Settle();
  return Status::Ok();
}

Status LocalBackend::Writable() const {
  if (!degraded_) return Status::Ok();
  return Status::Unavailable("the store refuses writes: " + store_error_.message());
}

void LocalBackend::Collect() {
  if (writer_ == nullptr) return;
  Gather();
  if (open_batch_.empty() || flush_posted_) return;
  // Everything the loop does before this runs joins the batch.
  flush_posted_ = true;
  std::weak_ptr<bool> alive = alive_;
  boost::asio::post(io_, [this, alive] {
    if (!alive.expired()) Flush();
  });
}

void LocalBackend::Gather() {
  // The engine appends its mutations to open_batch_ itself
  // (RecordMutationsInto); those since the last call are looked at here.
  for (size_t i = gathered_; i < open_batch_.size(); ++i) {
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
  gathered_ = open_batch_.size();
}

void LocalBackend::Flush() {
  flush_posted_ = false;
  Gather();  // what an engine call appended since the last Collect
  if (open_batch_.empty()) return;
  uint64_t seq = next_seq_++;
  if (open_max_put_id_ != 0) batch_max_put_id_.emplace_back(seq, open_max_put_id_);
  open_max_put_id_ = 0;
  std::vector<Mutation> batch;
  batch.swap(open_batch_);
  gathered_ = 0;
  // The next batch is likely as long: room for it at once, instead of
  // moving its changes (large structs) at every doubling. (Not for more
  // than a loop turn's usual changes: after a `clear` of a large topic the
  // next batch is no longer.)
  open_batch_.reserve(std::min<size_t>(batch.size(), 1024));
  if (journal_ != nullptr) return JournalBatch(seq, std::move(batch));
  std::weak_ptr<bool> alive = alive_;
  submitted_seq_ = seq;
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
  // Under always the writer's sync settles it, or this thread's own when
  // one client alone waits (made before the writer is handed the batch,
  // so that the writer does not start its own first).
  const Waiting waiting = WhoWaits();
  const bool sync_here = writer_syncs_journal_ && LoneWaiter(waiting);
  bool synced_here = false;
  Status st = AppendUnjournaled(waiting, sync_here ? &synced_here : nullptr);
  if (st.ok() && writer_syncs_journal_) {
    if (!synced_here) return;
    // Durable, not yet in RocksDB: replies go, puts may be shown; what
    // waits for RocksDB itself (ForgetWritten) waits for the writer.
    syncs_here_++;
    return OnSettled(seq, st, /*in_store=*/false);
  }
  if (st.ok() && WaitForWriter()) return;  // OnWriterProgress settles it
  // An append failed: the batches appended before it, whose replies
  // waited only for the writer to catch up (memory's sake), are in the
  // journal, and answered so; the error is for the others, whose outcome
  // is unknown (docs/storage.md, "Failures").
  if (!st.ok() && !writer_syncs_journal_ && journaled_seq_ > settled_seq_)
    OnSettled(journaled_seq_, Status::Ok(), /*in_store=*/false);
  OnSettled(seq, st);
}

bool LocalBackend::SyncedInJournal(uint64_t seq) const {
  return writer_syncs_journal_ && !degraded_ && seq <= journaled_seq_ && unjournaled_.empty() &&
         journal_->synced_lsn() >= journal_->last_lsn();
}

LocalBackend::Waiting LocalBackend::WhoWaits() const {
  std::optional<SessionId> who;
  for (const Deferred& d : deferred_) {
    if (!d.reply) continue;
    if (who && *who != d.session) return Waiting::kMany;
    who = d.session;
  }
  return who ? Waiting::kOne : Waiting::kNone;
}

bool LocalBackend::LoneWaiter(Waiting waiting) {
  // Lone: the replies waiting are of one session, as they were for the
  // last kLoneBatches batches that had replies waiting (one client at a
  // time, not a lull among many, whose next commands would queue up
  // unread behind this thread's sync instead of being read during the
  // writer's).
  if (waiting == Waiting::kNone) return false;
  lone_batches_ = waiting == Waiting::kOne ? lone_batches_ + 1 : 0;
  return lone_batches_ >= kLoneBatches && !degraded_;
}

bool LocalBackend::StoreBehind() const {
  return submitted_bytes_ - progress_->bytes.load() > max_unwritten_bytes_;
}

bool LocalBackend::WaitForWriter() {
  if (!StoreBehind()) return false;
  progress_->wake.store(true);
  if (StoreBehind()) return true;
  // Caught up meanwhile; a post the writer made anyway finds nothing to do.
  progress_->wake.store(false, std::memory_order_relaxed);
  return false;
}

void LocalBackend::OnWriterProgress() {
  const uint64_t written = progress_->seq.load(std::memory_order_acquire);
  ForgetWritten(written);
  if (journaled_seq_ <= settled_seq_) return;
  if (WaitForWriter()) {
    // Still behind: the batches written so far are settled (their replies
    // waited only for memory's sake), each batch once the writer is past
    // it, in order. Waiting instead until the writer is no longer behind
    // at all would keep every reply waiting for as long as new clients'
    // changes keep it behind (a clean put waited past 30 s under a flood
    // of large puts on a starved CPU, docs/decisions.md).
    if (written > settled_seq_) OnSettled(std::min(written, journaled_seq_), Status::Ok());
    return;
  }
  OnSettled(journaled_seq_, Status::Ok());
}

Status LocalBackend::AppendUnjournaled(Waiting waiting, bool* synced_here) {
  Status st = Status::Ok();
  uint64_t through = 0;
  struct Appended {
    uint64_t seq, lsn, bytes;
    std::vector<Mutation> batch;
  };
  std::vector<Appended> appended;
  // A reply tells a put's id once its record is appended: before that, its
  // id is leased, so that a power cut that takes the record back does not
  // take back the id too (docs/storage.md, "Ids").
  st = LeaseIds();
  while (st.ok() && !unjournaled_.empty()) {
    auto& [seq, batch] = unjournaled_.front();
    uint64_t lsn = 0;
    st = journal_->Append(batch, &lsn);
    if (!st.ok()) {
      journal_errors_++;
      break;
    }
    through = seq;
    uint64_t bytes = 0;
    for (const Mutation& m : batch)
      bytes += sizeof(Mutation) + m.record.topic.size() + m.record.key.size() + m.body.size() +
               m.object.name.size() + m.object.value.size();
    appended.push_back(Appended{seq, lsn, bytes, std::move(batch)});
    unjournaled_.pop_front();
  }
  // Not while the writer syncs (its sync comes first, and covers these
  // batches only if it started after their appends). A sync that fails
  // here is made again by the writer, which reports it.
  if (st.ok() && synced_here != nullptr) {
    Status synced;
    *synced_here = journal_->TrySyncHere(&synced) && synced.ok();
  }
  // No reply waits for the writer's write of these batches when the loop
  // synced them, or when they hold nothing to sync (a reserve's counters)
  // and no reply waits at all: the writer may wait for company.
  const bool synced = synced_here != nullptr && *synced_here;
  if (synced) progress_->settled_here.store(through, std::memory_order_relaxed);
  const bool durable = synced || (writer_syncs_journal_ && waiting == Waiting::kNone &&
                                  journal_->synced_lsn() >= journal_->last_lsn());
  for (Appended& a : appended) {
    submitted_bytes_ += a.bytes;
    submitted_seq_ = a.seq;
    writer_->Submit(
        std::move(a.batch),
        [this, alive = std::weak_ptr<bool>(alive_), io = &io_, p = progress_, seq = a.seq,
         bytes = a.bytes, settle = writer_syncs_journal_, forget = horizon_on()](Status written) {
          if (written.ok()) p->seq.store(seq, std::memory_order_release);
          p->bytes.fetch_add(bytes);
          // Settled by the loop's own sync already: nothing to do there
          // unless the write failed or cold jobs wait for it (ForgetWritten).
          if (settle && written.ok() && !forget &&
              seq <= p->settled_here.load(std::memory_order_relaxed))
            return;
          if (settle) {  // synced (or not): its replies go now, as without a journal
            boost::asio::post(*io, [this, alive, seq, written = std::move(written)] {
              if (alive.expired()) return;
              ++store_completions_;
              OnSettled(seq, written);
            });
          } else if (p->wake.exchange(false)) {
            boost::asio::post(*io, [this, alive] {
              if (alive.expired()) return;
              ++store_completions_;
              OnWriterProgress();
            });
          }
        },
        a.lsn, durable);
  }
  // Under always, batches settled with their failed append's error are
  // appended now, not yet synced: what needs them waits again, until the
  // writer's sync settles them (a put of a key they hold changes nothing,
  // and would otherwise be answered at once).
  // (Not when some are still unjournaled: the store is degraded then, and
  // what needs them is answered unavailable, not kept waiting.)
  if (writer_syncs_journal_ && st.ok() && !synced && !appended.empty() &&
      appended.front().seq <= settled_seq_)
    settled_seq_ = appended.front().seq - 1;
  if (through != 0) {
    journaled_seq_ = through;
    // Under always a put is durable once synced (OnSettled).
    if (!writer_syncs_journal_) PutsDurableThrough(through);
  }
  if (!st.ok()) {
    if (!journal_failing_) SetHealth(false, !writer_failing_, st);
    ArmJournalRetry();
  } else if (journal_failing_) {
    SetHealth(true, !writer_failing_, st);
  }
  return st;
}

Status LocalBackend::LeaseIds() {
  const JobId handed = engine_.next_id() - 1;
  if (handed + kIdLeaseBlock / 2 <= id_lease_) return Status::Ok();
  Status st = store_->NoteMaxId(handed + kIdLeaseBlock);
  if (st.ok()) {
    id_lease_ = handed + kIdLeaseBlock;
    return st;
  }
  if (handed <= id_lease_) return Status::Ok();  // tried again at the next append
  journal_errors_++;
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
    if (!unjournaled_.empty())
      (void)AppendUnjournaled(WhoWaits());  // arms the timer again on failure
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

void LocalBackend::OnSettled(uint64_t seq, Status st, bool in_store) {
  // (A batch whose append failed was settled with the error, and settles
  // again when it is appended and written; under always its append takes
  // settled_seq_ back until then, AppendUnjournaled.)
  settled_seq_ = std::max(settled_seq_, seq);
  // A write that worked also wrote every batch kept from failed ones.
  if (st.ok() && (journal_ == nullptr || writer_syncs_journal_)) {
    PutsDurableThrough(seq);
    if (in_store) ForgetWritten(seq);
  }
  while (!deferred_.empty() && deferred_.front().seq <= seq) {
    Deferred d = std::move(deferred_.front());
    deferred_.pop_front();
    if (d.serves_reserve) {
      auto it = served_.find(d.session);
      if (it != served_.end() && --it->second == 0) served_.erase(it);
    }
    if (!d.reply) continue;
    Status answer = st.ok() ? std::move(d.outcome) : st;
    Count(d.op, answer.code());
    d.reply(std::move(answer));
  }
  Settle();
}

void LocalBackend::PutsDurableThrough(uint64_t seq) {
  while (!batch_max_put_id_.empty() && batch_max_put_id_.front().first <= seq) {
    durable_put_id_ = std::max(durable_put_id_, batch_max_put_id_.front().second);
    batch_max_put_id_.pop_front();
  }
}

}  // namespace delayq::backend

#include "backend/local_backend.h"

#include <utility>

namespace delayq::backend {

LocalBackend::LocalBackend(boost::asio::io_context& io, const Options& options,
                           const Clock& clock)
    : io_(io),
      clock_(clock),
      info_{"local", options.max_job_size},
      engine_(EngineOptions{.start_ms = clock.Now(),
                            .max_job_size = options.max_job_size,
                            .record_mutations = false}),
      timer_(io) {}

LocalBackend::~LocalBackend() {
  *alive_ = false;
  timer_.cancel();
}

SessionId LocalBackend::OpenSession() { return engine_.OpenSession(Now()); }

void LocalBackend::CloseSession(SessionId s) {
  waiting_.erase(s);
  engine_.CloseSession(Now(), s);
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
  auto res = engine_.Put(Now(), s, r);
  done(std::move(res));
  Settle();
}

void LocalBackend::ReplyJobs(const JobsDone& done, std::span<const JobId> ids) {
  views_.clear();
  for (JobId id : ids) {
    auto v = engine_.Peek(engine_.now(), id);
    if (v.ok()) views_.push_back(*v);
  }
  std::vector<JobView> views;
  views.swap(views_);  // the completion may re-enter the backend
  done(Status::Ok(), views);
  if (views_.empty()) views_.swap(views);
}

void LocalBackend::Reserve(const ReserveRequest& r, JobsDone done) {
  waiting_.erase(r.session);
  auto res = engine_.Reserve(Now(), r);
  if (!res.ok()) {
    done(res.status(), {});
  } else if (!res->empty()) {
    ReplyJobs(done, *res);
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
  auto res = engine_.ReserveJob(Now(), s, id);
  if (!res.ok()) {
    done(res.status(), {});
  } else {
    JobView v = *res;
    done(Status::Ok(), std::span<const JobView>(&v, 1));
  }
  Settle();
}

void LocalBackend::Delete(SessionId s, JobId id, Done done) {
  done(engine_.Delete(Now(), s, id));
  Settle();
}

void LocalBackend::DeleteByKey(SessionId s, std::string_view topic, std::string_view key,
                               Done done) {
  done(engine_.DeleteByKey(Now(), s, topic, key));
  Settle();
}

void LocalBackend::Release(SessionId s, JobId id, uint32_t priority, std::optional<TimeMs> delay,
                           Callback<JobState> done) {
  done(engine_.Release(Now(), s, id, priority, delay));
  Settle();
}

void LocalBackend::Bury(SessionId s, JobId id, uint32_t priority, Done done) {
  done(engine_.Bury(Now(), s, id, priority));
  Settle();
}

void LocalBackend::Touch(SessionId s, JobId id, Done done) {
  done(engine_.Touch(Now(), s, id));
  Settle();
}

void LocalBackend::Kick(std::string_view topic, uint64_t bound, Callback<uint64_t> done) {
  done(engine_.Kick(Now(), topic, bound));
  Settle();
}

void LocalBackend::KickJob(JobId id, Done done) {
  done(engine_.KickJob(Now(), id));
  Settle();
}

void LocalBackend::Peek(PeekKind kind, JobId id, std::string_view topic, std::string_view key,
                        JobsDone done) {
  TimeMs now = Now();
  Result<JobView> r = Status::NotFound();
  switch (kind) {
    case PeekKind::kId: r = engine_.Peek(now, id); break;
    case PeekKind::kKey: r = engine_.PeekByKey(now, topic, key); break;
    case PeekKind::kReady: r = engine_.PeekReady(now, topic); break;
    case PeekKind::kDelayed: r = engine_.PeekDelayed(now, topic); break;
    case PeekKind::kBuried: r = engine_.PeekBuried(now, topic); break;
  }
  if (!r.ok()) {
    done(r.status(), {});
  } else {
    JobView v = *r;
    done(Status::Ok(), std::span<const JobView>(&v, 1));
  }
  Settle();
}

void LocalBackend::StatsJob(JobId id, Callback<JobStats> done) {
  done(engine_.StatsJob(Now(), id));
  Settle();
}

void LocalBackend::StatsTopic(std::string_view topic, Callback<TopicStats> done) {
  done(engine_.StatsTopic(Now(), topic));
  Settle();
}

void LocalBackend::Stats(Callback<EngineStats> done) {
  done(engine_.Stats(Now()));
  Settle();
}

void LocalBackend::ListTopics(Callback<std::vector<std::string>> done) {
  done(engine_.ListTopics(Now()));
  Settle();
}

void LocalBackend::PauseTopic(std::string_view topic, TimeMs delay_ms, Done done) {
  done(engine_.PauseTopic(Now(), topic, delay_ms));
  Settle();
}

void LocalBackend::ClearTopic(std::string_view topic, uint8_t mask, Callback<uint64_t> done) {
  done(engine_.ClearTopic(Now(), topic, mask));
  Settle();
}

void LocalBackend::CompleteWaiter(SessionId s, Status st, std::span<const JobId> ids) {
  auto it = waiting_.find(s);
  if (it == waiting_.end()) return;  // cancelled; the engine already let go
  JobsDone done = std::move(it->second);
  waiting_.erase(it);
  if (st.ok()) {
    ReplyJobs(done, ids);
  } else {
    done(std::move(st), {});
  }
}

void LocalBackend::Settle() {
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
        CompleteWaiter(ev.session,
                       ev.kind == Event::Kind::kTimedOut ? Status::TimedOut()
                                                         : Status::DeadlineSoon(),
                       {});
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
  timer_.expires_at(clock_.SteadyAt(next));
  std::weak_ptr<bool> alive = alive_;
  timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    OnTimer();
  });
}

void LocalBackend::OnTimer() {
  timer_at_ = kNever;
  engine_.Advance(Now());
  Settle();
}

}  // namespace delayq::backend

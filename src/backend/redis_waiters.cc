// The Redis backend's reserving (redis_backend.h): reserves (Reserve,
// TryReserve, ReserveJob) and the jobs they answer, waiting reserves (one
// dq_reserve serving a topic's waiters, woken by the topic's pub/sub
// message or the sweep), their timers, and the instance's timing: each
// topic ticked at its next due moment, and every topic swept every
// sweep_ms.
#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <memory>

#include "backend/redis_backend.h"
#include "backend/redis_backend_internal.h"
#include "delayq/engine.h"

namespace delayq::backend {

namespace {

// Topics served per reserve script when several sessions wait on one topic.
constexpr size_t kWaitersPerScript = 32;

// A reserved job as a script returned it, owned until handed out.
struct Got {
  JobId id = 0;
  std::string topic, key, body;
  uint32_t priority = 0;
  TimeMs deadline = 0;
  // A reserve with detach: the job's other figures (created, delay, ttr,
  // reserves, timeouts, releases, buries, kicks, max_tries), and its lease.
  bool full = false;
  int64_t figures[9] = {};
  bool own_backoff = false;  // 'B' after the figures
  std::string lease;
  bool named = false;
};

// A reserved job as the functions write it (reserve_one in
// lua/delayq.lua): "<member><deadline>,<priority>,<index>,<key
// length>,<key><body>", the member 13 digits; index: which owner of the
// call it went to; for a lease's job, 'L' and nine more figures before the
// key length (Got::figures), then 'B' when it has a back-off of its own;
// for a named job, 'N' just before the key length. False when s is not one.
bool ParseGot(int64_t topic_no, const std::string& topic, std::string_view s, Got* g,
              size_t* index) {
  constexpr size_t kMemberDigits = 13;
  if (s.size() < kMemberDigits) return false;
  std::string_view member = s.substr(0, kMemberDigits);
  s.remove_prefix(kMemberDigits);
  auto number = [&s](int64_t* x) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *x);
    if (ec != std::errc() || end == s.data() + s.size() || *end != ',' || *x < 0) return false;
    s.remove_prefix(static_cast<size_t>(end - s.data()) + 1);
    return true;
  };
  int64_t v[4];
  for (int i = 0; i < 3; ++i)
    if (!number(&v[i])) return false;
  g->full = !s.empty() && s.front() == 'L';
  if (g->full) {
    s.remove_prefix(1);
    for (int64_t& x : g->figures)
      if (!number(&x)) return false;
    g->own_backoff = !s.empty() && s.front() == 'B';
    if (g->own_backoff) s.remove_prefix(1);
  }
  g->named = !s.empty() && s.front() == 'N';
  if (g->named) s.remove_prefix(1);
  if (!number(&v[3]) || static_cast<uint64_t>(v[3]) > s.size()) return false;
  g->id = JobIdOf(topic_no, member);
  g->topic = topic;
  g->deadline = v[0];
  g->priority = static_cast<uint32_t>(v[1]);
  *index = static_cast<size_t>(v[2]);
  g->key = std::string(s.substr(0, static_cast<size_t>(v[3])));
  g->body = std::string(s.substr(static_cast<size_t>(v[3])));
  return true;
}

// The jobs a reserve answered (dq_reserve, dq_reserve_job), in order, each
// with the index of the owner it went to: one job's string, or {'ok', job
// string, ...}. False when r is neither ({'paused', n} included).
bool ReservedIn(int64_t topic_no, const std::string& topic, const redisReply* r,
                std::vector<std::pair<Got, size_t>>* out) {
  out->clear();
  if (r == nullptr) return false;
  auto one = [&](const redisReply* s) {
    if (s == nullptr || s->type != REDIS_REPLY_STRING) return false;
    out->emplace_back();
    return ParseGot(topic_no, topic, Str(s), &out->back().first, &out->back().second);
  };
  if (r->type == REDIS_REPLY_STRING) return one(r);
  if (Size(r) == 0 || Str(At(r, 0)) != "ok") return false;
  for (size_t i = 1; i < Size(r); ++i)
    if (!one(At(r, i))) return false;
  return true;
}

// Gives the jobs reserved for a lease base (an owner of a reserve made
// with detach; empty for a session's) their leases: the base, '.', and the
// job's place among the base's jobs of the call, from 1 (reserve_one in
// the Lua).
void NameLeases(std::vector<std::pair<Got, size_t>>& answered,
                const std::vector<std::string>& bases) {
  std::vector<size_t> count(bases.size(), 0);
  for (auto& [g, index] : answered) {
    if (index >= bases.size() || bases[index].empty()) continue;
    g.lease = bases[index] + "." + std::to_string(++count[index]);
  }
}

std::vector<JobView> Views(const std::vector<Got>& got) {
  std::vector<JobView> views;
  views.reserve(got.size());
  for (const Got& g : got) {
    JobView& v = views.emplace_back();
    v.id = g.id;
    v.topic = g.topic;
    v.key = g.key;
    v.body = g.body;
    v.state = JobState::kReserved;
    v.priority = g.priority;
    v.due_ms = g.deadline;
    v.lease = g.lease;
    v.named = g.named;
    v.own_backoff = g.own_backoff;
    if (g.full) {
      const int64_t* f = g.figures;
      v.created_ms = f[0];
      v.delay_ms = f[1];
      v.ttr_ms = f[2];
      v.reserves = static_cast<uint32_t>(f[3]);
      v.timeouts = static_cast<uint32_t>(f[4]);
      v.releases = static_cast<uint32_t>(f[5]);
      v.buries = static_cast<uint32_t>(f[6]);
      v.kicks = static_cast<uint32_t>(f[7]);
      v.max_tries = static_cast<uint32_t>(f[8]);
    }
  }
  return views;
}

}  // namespace

// ---- timing ----------------------------------------------------------------

void RedisBackend::NoteWake(Topic& t, TimeMs when) {
  if (t.wake == when) return;
  if (t.wake != kNever) wakes_.erase({t.wake, t.name});
  t.wake = when;
  if (when != kNever) wakes_.emplace(when, t.name);
  ArmWakeTimer();
}

void RedisBackend::ArmWakeTimer() {
  if (wakes_.empty()) return;
  // At least a millisecond ahead: Redis's clock may run a little behind.
  TimeMs at = std::max(wakes_.begin()->first, Now() + 1);
  if (wake_timer_at_ != kNever && wake_timer_at_ <= at) return;
  wake_timer_at_ = at;
  wake_timer_.expires_at(clock_.SteadyAt(at));
  std::weak_ptr<bool> alive = alive_;
  wake_timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    OnWakeTimer();
  });
}

void RedisBackend::OnWakeTimer() {
  wake_timer_at_ = kNever;
  TimeMs now = Now();
  std::vector<std::string> due;
  while (!wakes_.empty() && wakes_.begin()->first <= now) {
    due.push_back(wakes_.begin()->second);
    wakes_.erase(wakes_.begin());
  }
  for (const std::string& name : due) {
    Topic& t = GetTopic(name);
    t.wake = kNever;
    Run(Script::kTick, t, {}, [](Status, const redisReply*) {});
  }
  ArmWakeTimer();
}

void RedisBackend::Sweep() {
  std::weak_ptr<bool> alive = alive_;
  if (router_->connected()) {
    RefreshRegistry([this, alive] {
      if (alive.expired()) return;
      // The topics with a job or a pause, and those a reserve of this
      // instance waits on (whose reserve applies what is due): the sweep
      // costs what the live topics do, however many were ever named.
      for (auto& [name, t] : topics_) {
        Topic& topic = *t;
        TryWaiters(topic);
        if (topic.waiters.empty() && topic.subscribed) {
          subscriber_->Unsubscribe(topic.prefix + "wake");
          topic.subscribed = false;
        }
        if (topic.live && !topic.serving)
          Run(Script::kTick, topic, {}, [](Status, const redisReply*) {});
      }
      DropUnused();
      ScanRegistry();
    });
  }
  sweep_timer_.expires_after(std::chrono::milliseconds(options_.sweep_ms));
  sweep_timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (!ec && !alive.expired()) Sweep();
  });
}

// ---- consuming -------------------------------------------------------------

void RedisBackend::TryReserve(SessionId sid, uint64_t attempt,
                              const std::vector<std::string>& topics, uint32_t count, bool detach,
                              std::function<void(Status, std::vector<JobView>, bool)> done) {
  // Whether the session is gone, or no longer waits for this attempt.
  auto stale = [this, sid, attempt] {
    auto it = sessions_.find(sid);
    return it == sessions_.end() || it->second.attempt != attempt;
  };
  // Reserves from one topic; `then` gets the jobs (owned), and whether the
  // topic is paused with ready jobs.
  auto reserve_from = [this, sid, count, detach, stale](
                          Topic* tp, std::function<void(Status, std::vector<Got>, bool)> then) {
    // A session that closed (or cancelled) while its topic was registered
    // reserves nothing (its reply would be dropped). So the session exists
    // here, and Owner(sid) below, after it closed, is the owner the jobs got.
    if (stale()) return then(Status::Ok(), {}, false);
    // Detached: the jobs are held by leases (NameLeases), not the session.
    std::string owner = detach ? NewLeaseBase() : std::string(Caller(sid));
    // One job: the owner alone (its count defaults to 1).
    ReplyFn got_reply = [this, tp, sid, detach, owner, stale, then = std::move(then)](
                            Status st, const redisReply* r) {
      std::vector<Got> got;
      if (!st.ok()) return then(st, got, false);
      if (Str(At(r, 0)) == "paused") return then(Status::Ok(), got, Int(At(r, 1)) > 0);
      std::vector<std::pair<Got, size_t>> answered;
      if (!ReservedIn(tp->no, tp->name, r, &answered))
        return then(Unexpected("reserve"), got, false);
      if (detach) NameLeases(answered, {owner});
      const bool gone = stale();
      for (auto& answer : answered) {
        Got& g = answer.first;
        if (gone) {
          // The session closed (or the reserve was cancelled) while the
          // call ran: nobody will get the job, so it goes back, as if never
          // reserved.
          Run(Script::kReturn, *tp, NoOf(g.id), {Member(g.id), detach ? g.lease : Owner(sid), "1"},
              [](Status, const redisReply*) {});
          continue;
        }
        if (detach) {
          Forget(g.id);
        } else {
          NoteHeld(sid, tp->name, g.id, g.deadline);
        }
        got.push_back(std::move(g));
      }
      then(Status::Ok(), std::move(got), false);
    };
    if (count == 1) return Run(Script::kReserve, *tp, {owner}, std::move(got_reply));
    Run(Script::kReserve, *tp, {owner, std::to_string(count)}, std::move(got_reply));
  };
  auto finish = [done = std::move(done)](Status st, std::vector<Got> got, bool paused_ready) {
    std::vector<JobView> views = Views(got);  // they point into `got`
    done(st, views, paused_ready);
  };
  if (topics.size() == 1) return reserve_from(&GetTopic(topics.front()), std::move(finish));
  // The next job of each topic first (a topic with none has no state in
  // Redis, and the call leaves it so).
  auto remaining = std::make_shared<size_t>(topics.size());
  auto failed = std::make_shared<Status>();
  auto candidates = std::make_shared<std::vector<std::pair<std::pair<int64_t, JobId>, Topic*>>>();
  auto paused_ready = std::make_shared<bool>(false);
  // The topics stay until every answer is in (DropUnused).
  auto pinned = std::make_shared<std::vector<Topic*>>();
  auto after_tops = [reserve_from, finish, candidates, failed, paused_ready, pinned]() {
    for (Topic* t : *pinned) t->pins--;
    if (!failed->ok()) return finish(*failed, {}, false);
    if (candidates->empty()) return finish(Status::Ok(), {}, *paused_ready);
    std::sort(candidates->begin(), candidates->end());
    reserve_from(candidates->front().second,
                 [finish, paused_ready](Status st, std::vector<Got> got, bool p) {
                   finish(st, std::move(got), p || *paused_ready);
                 });
  };
  for (const std::string& name : topics) {
    Topic* tp = &GetTopic(name);
    tp->pins++;
    pinned->push_back(tp);
    auto one_done = [remaining, after_tops] {
      if (--*remaining == 0) after_tops();
    };
    Run(Script::kTop, *tp, {},
        [this, tp, failed, candidates, paused_ready, one_done](Status st, const redisReply* r) {
          if (!st.ok()) {
            *failed = st;
          } else if (Str(At(r, 0)) == "paused") {
            if (Int(At(r, 1)) > 0) *paused_ready = true;
          } else if (Size(r) == 2) {
            candidates->push_back({{Int(At(r, 0)), IdOf(*tp, Str(At(r, 1)))}, tp});
          }
          one_done();
        });
  }
}

bool RedisBackend::DeadlineSoon(Session& s) {
  TimeMs now = Now();
  for (auto it = s.held.begin(); it != s.held.end();) {
    if (it->second.deadline <= now) {
      holders_.erase(it->first);
      it = s.held.erase(it);  // its TTR ran out: it is not ours any more
    } else {
      if (it->second.deadline - now <= kDeadlineSafetyMarginMs) return true;
      ++it;
    }
  }
  return false;
}

void RedisBackend::Reserve(const ReserveRequest& r, JobsDone done) {
  auto it = sessions_.find(r.session);
  if (it == sessions_.end()) return done(Status::NotFound("no such session"), {});
  Session& s = it->second;
  EndWait(s);
  SessionId sid = r.session;
  const uint64_t attempt = ++s.attempt;
  uint32_t count = std::max<uint32_t>(1, r.count);
  TimeMs timeout = r.timeout_ms;
  bool detach = r.detach;
  done = Guard(sid, std::move(done));
  TryReserve(sid, attempt, s.watched, count, detach,
             [this, sid, attempt, count, timeout, detach, done = std::move(done)](
                 Status st, std::vector<JobView> views, bool paused_ready) mutable {
               // Cancelled meanwhile (its jobs went back): nobody to answer.
               auto it = sessions_.find(sid);
               if (it == sessions_.end() || it->second.attempt != attempt) return;
               if (!st.ok()) return done(st, {});
               if (!views.empty()) return done(Status::Ok(), views);
               Session& s = it->second;
               if (!paused_ready && DeadlineSoon(s)) return done(Status::DeadlineSoon(), {});
               if (timeout == 0) return done(Status::TimedOut(), {});
               s.waiting = true;
               s.wait_gen++;
               s.wait_count = count;
               s.wait_detach = detach;
               s.wait_deadline =
                   timeout < 0 ? kNever : Now() + std::min<TimeMs>(timeout, kMaxDelayMs);
               s.wait_done = std::move(done);
               StartWait(sid);
             });
}

void RedisBackend::StartWait(SessionId sid) {
  Session& s = sessions_.at(sid);
  for (const std::string& name : s.watched) {
    Topic& t = GetTopic(name);
    t.waiters.emplace_back(sid, s.wait_gen);
    if (!t.subscribed) {
      subscriber_->Subscribe(t.prefix + "wake");
      t.subscribed = true;
    }
  }
  ArmWaitTimer(sid);
  // A job that became ready between the attempt and now sent its wake-up
  // to nobody: look once more.
  for (const std::string& name : s.watched) TryWaiters(GetTopic(name));
}

void RedisBackend::EndWait(Session& s) {
  if (!s.waiting) return;
  s.waiting = false;
  s.wait_done = nullptr;
  if (s.wait_timer) s.wait_timer->cancel();
  // Entries left in the topics' waiter lists are skipped by generation.
}

void RedisBackend::CancelReserve(SessionId sid) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return;
  it->second.attempt++;  // a first attempt still running answers nobody
  EndWait(it->second);
}

void RedisBackend::ArmWaitTimer(SessionId sid) {
  Session& s = sessions_.at(sid);
  TimeMs w = s.wait_deadline;
  for (const auto& [id, h] : s.held) w = std::min(w, h.deadline - kDeadlineSafetyMarginMs);
  if (w == kNever) return;
  if (!s.wait_timer) s.wait_timer = std::make_unique<boost::asio::steady_timer>(io_);
  s.wait_timer->expires_at(clock_.SteadyAt(w));
  uint64_t gen = s.wait_gen;
  std::weak_ptr<bool> alive = alive_;
  s.wait_timer->async_wait([this, alive, sid, gen](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    OnWaitTimer(sid, gen);
  });
}

void RedisBackend::OnWaitTimer(SessionId sid, uint64_t gen) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return;
  Session& s = it->second;
  if (!s.waiting || s.wait_gen != gen) return;
  Status st;
  if (DeadlineSoon(s)) {
    st = Status::DeadlineSoon();
  } else if (Now() >= s.wait_deadline) {
    st = Status::TimedOut();
  } else {
    return ArmWaitTimer(sid);
  }
  JobsDone done = std::move(s.wait_done);
  EndWait(s);
  if (done) done(st, {});
}

void RedisBackend::ServeTopic(const std::string& name) {
  auto it = topics_.find(name);
  if (it != topics_.end()) TryWaiters(*it->second);
}

void RedisBackend::TryWaiters(Topic& t) {
  if (t.serving) {
    t.serve_again = true;
    return;
  }
  // The live waiters, oldest first (stale entries are dropped).
  std::vector<std::pair<SessionId, uint64_t>> batch;
  auto live = [this](const std::pair<SessionId, uint64_t>& w) {
    auto it = sessions_.find(w.first);
    return it != sessions_.end() && it->second.waiting && it->second.wait_gen == w.second;
  };
  while (!t.waiters.empty() && !live(t.waiters.front())) t.waiters.pop_front();
  for (const auto& w : t.waiters) {
    if (batch.size() >= kWaitersPerScript) break;
    if (live(w)) batch.push_back(w);
  }
  if (batch.empty()) return;
  std::vector<std::string> args, bases;
  for (const auto& [sid, gen] : batch) {
    const Session& s = sessions_.at(sid);
    bases.push_back(s.wait_detach ? NewLeaseBase() : std::string());
    args.push_back(s.wait_detach ? bases.back() : Owner(sid));
    args.push_back(std::to_string(s.wait_count));
  }
  t.serving = true;
  t.serve_again = false;
  Topic* tp = &t;
  Run(Script::kReserve, t, std::move(args),
      [this, tp, batch, bases = std::move(bases), live](Status st, const redisReply* r) {
        tp->serving = false;
        std::vector<std::pair<Got, size_t>> answered;
        if (!st.ok() || !ReservedIn(tp->no, tp->name, r, &answered)) return;
        NameLeases(answered, bases);
        // Jobs per waiter, in the order served.
        std::vector<std::vector<Got>> per(batch.size());
        for (auto& [g, w] : answered)
          if (w < batch.size()) per[w].push_back(std::move(g));
        bool all_served = true;
        for (size_t w = 0; w < batch.size(); ++w) {
          if (per[w].empty()) {
            all_served = false;
            continue;
          }
          auto [sid, gen] = batch[w];
          if (!live(batch[w])) {
            // The wait ended while the script ran: give the jobs back.
            for (const Got& g : per[w])
              Run(Script::kReturn, *tp, NoOf(g.id),
                  {Member(g.id), bases[w].empty() ? Owner(sid) : g.lease, "1"},
                  [](Status, const redisReply*) {});
            continue;
          }
          Session& s = sessions_.at(sid);
          for (const Got& g : per[w]) {
            if (s.wait_detach) {
              Forget(g.id);
            } else {
              NoteHeld(sid, g.topic, g.id, g.deadline);
            }
          }
          JobsDone done = std::move(s.wait_done);
          EndWait(s);
          std::vector<JobView> views = Views(per[w]);
          if (done) done(Status::Ok(), views);
        }
        if (tp->serve_again || (all_served && !tp->waiters.empty())) TryWaiters(*tp);
      });
}

void RedisBackend::ReserveJob(SessionId sid, JobId id, JobsDone done) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return done(Status::NotFound("no such session"), {});
  it->second.attempt++;  // a reserve's attempt still running answers nobody
  EndWait(it->second);
  done = Guard(sid, std::move(done));
  ForJob(id, [this, sid, id, done](Status st, Topic* t, std::string member) {
    if (!st.ok()) return done(st, {});
    if (t == nullptr) return done(Status::NotFound(), {});
    Run(Script::kReserveJob, *t, NoOf(id), {member, Owner(sid)},
        [this, t, sid, id, done](Status st, const redisReply* r) {
          if (!st.ok()) return done(st, {});
          std::vector<std::pair<Got, size_t>> answered;
          if (!ReservedIn(t->no, t->name, r, &answered) || answered.size() != 1)
            return done(Status::NotFound(), {});
          Got& g = answered.front().first;
          NoteHeld(sid, t->name, id, g.deadline);
          std::vector<Got> got{std::move(g)};
          std::vector<JobView> views = Views(got);
          done(Status::Ok(), views);
        });
  });
}

}  // namespace delayq::backend

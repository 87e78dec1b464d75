// The engine: see include/delayq/engine.h for the contract and docs/engine.md
// for the semantics and structures.
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
#include "delayq/engine.h"

#include <algorithm>
#include <array>
#include <deque>
#include <limits>
#include <set>
#include <unordered_map>

#include "core/id_table.h"
#include "core/job.h"
#include "core/ready_queue.h"
#include "core/session.h"
#include "core/timing_wheel.h"
#include "core/topic.h"
#include "delayq/text.h"

namespace delayq {

using core::IdTable;
using core::Job;
using core::Link;
using core::ReadyBefore;
using core::Session;
using core::TimingWheel;
using core::Topic;

namespace {

bool ValidDelay(TimeMs d) { return d >= 0 && d <= kMaxDelayMs; }

std::string BackoffKey(const Backoff& b) {
  std::string k(1, static_cast<char>(b.kind));
  auto add = [&k](TimeMs v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
  add(b.base_ms);
  add(b.cap_ms);
  for (TimeMs d : b.delays_ms) add(d);
  return k;
}

bool DueBefore(const Job* a, const Job* b) {
  return a->due != b->due ? a->due < b->due : a->id < b->id;
}

}  // namespace

Status ValidateBackoff(const Backoff& b) {
  switch (b.kind) {
    case Backoff::Kind::kNone:
      return Status::Ok();
    case Backoff::Kind::kList:
      if (b.delays_ms.empty()) return Status::InvalidArgument("back-off list is empty");
      if (b.delays_ms.size() > 64)
        return Status::InvalidArgument("back-off list has over 64 delays");
      for (TimeMs d : b.delays_ms)
        if (!ValidDelay(d)) return Status::InvalidArgument("back-off delay out of range");
      return Status::Ok();
    case Backoff::Kind::kExponential:
      if (b.base_ms <= 0 || b.cap_ms < b.base_ms || b.cap_ms > kMaxDelayMs)
        return Status::InvalidArgument("exponential back-off needs 0 < base <= cap");
      return Status::Ok();
  }
  return Status::InvalidArgument("unknown back-off kind");
}

class Engine::Impl {
 public:
  explicit Impl(EngineOptions options)
      : opt_(std::move(options)),
        tpm_(std::clamp<TimeMs>(opt_.ticks_per_ms, 1, kMaxTicksPerMs)),
        now_(std::max<TimeMs>(0, opt_.start_ms) * tpm_),
        wheel_(now_) {
    if (!IsValidTopicName(opt_.default_topic)) opt_.default_topic = "default";
    default_topic_ = GetOrCreateTopic(opt_.default_topic);
  }

  ~Impl() {
    std::vector<Job*> all;
    all.reserve(ids_.size());
    ids_.ForEach([&](Job* j) { all.push_back(j); });
    for (Job* j : all) pool_.Destroy(j);
  }

  // ---- sessions --------------------------------------------------------
  SessionId OpenSession(TimeMs now) {
    AdvanceTo(now);
    auto s = std::make_unique<Session>();
    s->id = next_session_++;
    s->used = default_topic_;
    s->watched.push_back(default_topic_);
    default_topic_->using_count++;
    default_topic_->watching++;
    SessionId id = s->id;
    sessions_.emplace(id, std::move(s));
    return id;
  }

  void CloseSession(TimeMs now, SessionId id) {
    AdvanceTo(now);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    Session* s = it->second.get();
    EndWait(s);
    std::vector<Job*> held = s->reserved;
    std::sort(held.begin(), held.end(), [](Job* a, Job* b) { return a->id < b->id; });
    for (Job* j : held) {
      Unplace(j);
      if (ComeBack(j, std::nullopt) != JobState::kReady) RecordUpdate(j);
    }
    s->used->using_count--;
    MaybeDrop(s->used);
    for (Topic* t : s->watched) {
      t->watching--;
      MaybeDrop(t);
    }
    if (last_session_ == s) last_session_ = nullptr;
    sessions_.erase(it);
    Finish();
  }

  Status Use(SessionId id, std::string_view name) {
    Session* s = FindSession(id);
    if (s == nullptr) return Status::NotFound("no such session");
    if (!IsValidTopicName(name)) return Status::InvalidArgument("bad topic name");
    if (Status st = RoomForTopic(name); !st.ok()) return st;
    Topic* t = GetOrCreateTopic(name);
    if (t != s->used) {
      s->used->using_count--;
      MaybeDrop(s->used);
      s->used = t;
      t->using_count++;
    }
    Finish();
    return Status::Ok();
  }

  Result<size_t> Watch(SessionId id, std::string_view name) {
    Session* s = FindSession(id);
    if (s == nullptr) return Status::NotFound("no such session");
    if (!IsValidTopicName(name)) return Status::InvalidArgument("bad topic name");
    if (Status st = RoomForTopic(name); !st.ok()) return st;
    Topic* t = GetOrCreateTopic(name);
    if (std::find(s->watched.begin(), s->watched.end(), t) == s->watched.end()) {
      s->watched.push_back(t);
      t->watching++;
    }
    Finish();
    return s->watched.size();
  }

  Result<size_t> Ignore(SessionId id, std::string_view name) {
    Session* s = FindSession(id);
    if (s == nullptr) return Status::NotFound("no such session");
    if (!IsValidTopicName(name)) return Status::InvalidArgument("bad topic name");
    Topic* t = FindTopic(name);
    auto it = std::find(s->watched.begin(), s->watched.end(), t);
    if (t == nullptr || it == s->watched.end()) return s->watched.size();
    if (s->watched.size() == 1) return Status::NotIgnored();
    s->watched.erase(it);
    t->watching--;
    MaybeDrop(t);
    Finish();
    return s->watched.size();
  }

  std::string_view UsedTopic(SessionId id) const {
    const Session* s = FindSession(id);
    return s == nullptr ? std::string_view() : std::string_view(s->used->name);
  }

  std::vector<std::string_view> WatchedTopics(SessionId id) const {
    std::vector<std::string_view> out;
    if (const Session* s = FindSession(id))
      for (const Topic* t : s->watched) out.emplace_back(t->name);
    return out;
  }

  // ---- producing -------------------------------------------------------
  Result<PutResult> Put(TimeMs now, SessionId sid, const PutRequest& r) {
    AdvanceTo(now);
    Session* s = nullptr;
    if (sid != 0 && (s = FindSession(sid)) == nullptr) return Status::NotFound("no such session");
    if (r.body.size() > opt_.max_job_size)
      return Status::JobTooBig("job body exceeds the maximum size");
    if (r.ttr_ms < 1 || r.ttr_ms > kMaxDelayMs) return Status::InvalidArgument("ttr out of range");
    if (r.key.size() > kMaxKeyLength) return Status::InvalidArgument("key longer than 200 bytes");
    TimeMs due;
    if (r.run_at) {
      if (*r.run_at < 0 || *r.run_at - now_ms() > kMaxDelayMs)
        return Status::InvalidArgument("run_at out of range");
      due = Ticks(*r.run_at);
    } else {
      if (!ValidDelay(r.delay_ms)) return Status::InvalidArgument("delay out of range");
      due = now_ + Ticks(r.delay_ms);
    }
    if (Status st = ValidateBackoff(r.backoff); !st.ok()) return st;
    Topic* t;
    if (r.topic.empty()) {
      t = s != nullptr ? s->used : default_topic_;
    } else {
      if (!IsValidTopicName(r.topic)) return Status::InvalidArgument("bad topic name");
      if (Status st = RoomForTopic(r.topic); !st.ok()) return st;
      t = GetOrCreateTopic(r.topic);
    }
    if (r.named) {
      if (r.key.empty()) return Status::InvalidArgument("a name is a key: the key is empty");
      // (MaybeDrop: a topic made for this put goes again at the end of a
      // call that refuses.)
      if (auto n = names_.find(r.key); n != names_.end() && n->second->topic != t) {
        MaybeDrop(t);
        return Status::Conflict("id '" + std::string(r.key) + "' belongs to a job in topic '" +
                                n->second->topic->name + "'");
      }
    }
    if (!r.key.empty()) {
      auto it = t->keys.find(r.key);
      if (it != t->keys.end()) {
        const Job* e = it->second;
        if (r.named && !e->named) {
          MaybeDrop(t);
          return Status::Conflict("topic '" + t->name + "' holds a job with key '" +
                                  std::string(r.key) + "' that was not put by /push");
        }
        return PutResult{e->id, false, e->state,
                         e->state == JobState::kDelayed ? CeilMs(e->due) : 0};
      }
    }
    Job* j = pool_.Create(r.key, r.body);
    j->id = next_id_++;
    j->named = r.named;
    if (r.named) names_.emplace(j->key(), j);
    j->topic = t;
    j->created = now_;
    j->priority = r.priority;
    j->ttr = r.ttr_ms;
    j->max_tries = r.max_tries;
    j->backoff = Intern(r.backoff);
    j->delay = r.run_at ? CeilMs(std::max<TimeMs>(0, due - now_)) : r.delay_ms;
    j->due = due;
    j->state = due > now_ ? JobState::kDelayed : JobState::kReady;
    ids_.Insert(j);
    job_bytes_ += sizeof(Job) + j->key_size + j->body_size;
    if (!r.key.empty()) t->keys.emplace(j->key(), j);
    t->total_jobs++;
    total_jobs_++;
    RecordPut(j);
    Place(j, j->state);
    JobId id = j->id;
    bool may_leave = j->state == JobState::kDelayed && NoteDelayed(j);
    Finish();  // may serve j to a waiting session, or evict it
    JobState st = may_leave ? JobState::kDelayed : j->state;
    return PutResult{id, true, st, st == JobState::kDelayed ? CeilMs(due) : 0};
  }

  void DiscardJobId() { next_id_++; }
  void SkipIdsThrough(JobId id) { next_id_ = std::max(next_id_, id + 1); }
  JobId next_id() const { return next_id_; }

  // ---- consuming -------------------------------------------------------
  Result<std::vector<JobId>> Reserve(TimeMs now, const ReserveRequest& r) {
    AdvanceTo(now);
    Session* s = FindSession(r.session);
    if (s == nullptr) return Status::NotFound("no such session");
    EndWait(s);
    uint32_t count = std::max<uint32_t>(1, r.count);
    std::vector<JobId> got;
    for (uint32_t i = 0; i < count; ++i) {
      Job* j = PickReady(s->watched);
      if (j == nullptr) break;
      ReserveFor(s, j, r.detach);
      got.push_back(j->id);
    }
    if (got.empty()) {
      // As beanstalkd: a paused topic's ready jobs count as "something to
      // wait for" here, so they defer DEADLINE_SOON.
      bool any_ready = std::any_of(s->watched.begin(), s->watched.end(),
                                   [](const Topic* t) { return !t->ready.empty(); });
      if (!any_ready && DeadlineSoon(s)) return Finish(Status::DeadlineSoon());
      if (r.timeout_ms == 0) return Finish(Status::TimedOut());
      s->waiting = true;
      s->wait_seq = ++wait_seq_;
      s->wait_count = count;
      s->wait_detach = r.detach;
      s->wait_deadline =
          r.timeout_ms < 0 ? kNever : now_ + Ticks(std::min<TimeMs>(r.timeout_ms, kMaxDelayMs));
      s->wait_topics = s->watched;
      for (Topic* t : s->wait_topics) {
        t->waiting++;
        t->waiters.emplace_back(s->id, s->wait_seq);
      }
      waiting_sessions_++;
      UpdateWake(s);
    }
    Finish();
    return got;
  }

  void CancelReserve(SessionId id) {
    if (Session* s = FindSession(id)) EndWait(s);
    Finish();
  }

  bool IsWaiting(SessionId id) const {
    const Session* s = FindSession(id);
    return s != nullptr && s->waiting;
  }

  Result<JobView> ReserveJob(TimeMs now, SessionId sid, JobId id) {
    AdvanceTo(now);
    Session* s = FindSession(sid);
    if (s == nullptr) return Status::NotFound("no such session");
    EndWait(s);
    Job* j = ids_.Find(id);
    if (j == nullptr || j->state == JobState::kReserved) return Finish(Status::NotFound());
    ReserveFor(s, j, false);
    Finish();
    return View(j);
  }

  // Delete takes a job in any state (a reserved one from its holder);
  // finish only a reserved one.
  Result<JobChange> Delete(TimeMs now, const Holder& h, JobId id, bool any_state = true) {
    AdvanceTo(now);
    auto j = Acting(h, id, any_state);
    if (!j.ok()) return Finish(Result<JobChange>(j.status()));
    JobChange c = Change(*j);
    (*j)->topic->cmd_delete++;
    Destroy(*j);
    Finish();
    return c;
  }

  Result<JobChange> DeleteByKey(TimeMs now, const Holder& h, std::string_view topic,
                                std::string_view key) {
    AdvanceTo(now);
    if (Topic* t = FindTopic(topic); t != nullptr && !key.empty()) {
      auto it = t->keys.find(key);
      if (it != t->keys.end()) return Delete(now, h, it->second->id);
    }
    return Finish(Result<JobChange>(Status::NotFound("no job with key '" + std::string(key) +
                                                     "' in topic '" + std::string(topic) + "'")));
  }

  Result<JobChange> Release(TimeMs now, const Holder& h, JobId id, std::optional<uint32_t> priority,
                            std::optional<TimeMs> delay) {
    AdvanceTo(now);
    if (delay && !ValidDelay(*delay)) return Status::InvalidArgument("delay out of range");
    auto held = Acting(h, id, false);
    if (!held.ok()) return Finish(Result<JobChange>(held.status()));
    Job* j = *held;
    Unplace(j);
    if (priority) j->priority = *priority;
    j->releases++;
    // Without a back-off, "no explicit delay" is a delay of 0 (and shows as
    // such in stats, as beanstalkd's release 0 does).
    if (!delay && j->backoff == 0) delay = 0;
    ComeBack(j, delay);
    RecordUpdate(j);
    JobChange c = Change(j);
    Finish();
    return c;
  }

  Result<JobChange> Bury(TimeMs now, const Holder& h, JobId id, std::optional<uint32_t> priority) {
    AdvanceTo(now);
    auto held = Acting(h, id, false);
    if (!held.ok()) return Finish(Result<JobChange>(held.status()));
    Job* j = *held;
    Unplace(j);
    if (priority) j->priority = *priority;
    j->buries++;
    Place(j, JobState::kBuried);
    RecordUpdate(j);
    JobChange c = Change(j);
    Finish();
    return c;
  }

  Result<JobChange> Touch(TimeMs now, const Holder& h, JobId id) {
    AdvanceTo(now);
    auto held = Acting(h, id, false);
    if (!held.ok()) return Finish(Result<JobChange>(held.status()));
    Job* j = *held;
    wheel_.Remove(j);
    j->due = now_ + Ticks(j->ttr);
    wheel_.Insert(j);
    if (j->reserver != nullptr) UpdateWake(j->reserver);
    JobChange c = Change(j);
    Finish();
    return c;
  }

  Result<uint64_t> Kick(TimeMs now, std::string_view topic, uint64_t bound) {
    AdvanceTo(now);
    Topic* t = FindTopic(topic);
    if (t == nullptr) return Status::NotFound("no such topic");
    std::vector<Job*> kicked;
    if (t->buried_count > 0) {
      for (Link* l = t->buried.next; l != &t->buried && kicked.size() < bound; l = l->next)
        kicked.push_back(Job::From(l));
    } else if (t->delayed > 0 && bound > 0) {
      kicked = DelayedInOrder(t, bound);
    }
    for (Job* j : kicked) KickOne(j);
    Finish();
    return static_cast<uint64_t>(kicked.size());
  }

  Result<JobChange> KickJob(TimeMs now, JobId id) {
    AdvanceTo(now);
    Job* j = ids_.Find(id);
    if (j == nullptr) return Finish(Result<JobChange>(RefuseJob(id, Refusal::kNoJob, {})));
    if (j->state != JobState::kBuried && j->state != JobState::kDelayed)
      return Finish(Result<JobChange>(RefuseJob(id, Refusal::kNotKickable, j->state)));
    KickOne(j);
    JobChange c = Change(j);
    Finish();
    return c;
  }

  // ---- looking ---------------------------------------------------------
  Result<JobView> Peek(TimeMs now, JobId id) {
    AdvanceTo(now);
    Finish();
    Job* j = ids_.Find(id);
    if (j == nullptr) return Status::NotFound();
    return View(j);
  }

  Result<JobView> PeekReservation(TimeMs now, JobId id) {
    // The texts of this streak of PeekReservation calls stay (a deque moved
    // keeps its elements in place); any other call drops them (AdvanceTo).
    std::deque<std::string> texts = std::move(lease_texts_);
    AdvanceTo(now);
    Finish();
    lease_texts_ = std::move(texts);
    Job* j = ids_.Find(id);
    if (j == nullptr || j->state != JobState::kReserved) return Status::NotFound();
    JobView v = View(j);
    if (j->reserver == nullptr) {
      v.lease = lease_texts_.emplace_back(FormatLease(j->lease));
    }
    return v;
  }

  Result<JobView> PeekByKey(TimeMs now, std::string_view topic, std::string_view key) {
    AdvanceTo(now);
    Finish();
    Topic* t = FindTopic(topic);
    if (t == nullptr) return Status::NotFound();
    auto it = t->keys.find(key);
    if (key.empty() || it == t->keys.end()) return Status::NotFound();
    return View(it->second);
  }

  Result<JobView> PeekReady(TimeMs now, std::string_view topic) {
    AdvanceTo(now);
    Finish();
    Topic* t = FindTopic(topic);
    if (t == nullptr || t->ready.empty()) return Status::NotFound();
    return View(t->ready.top());
  }

  Result<JobView> PeekDelayed(TimeMs now, std::string_view topic) {
    AdvanceTo(now);
    Finish();
    Topic* t = FindTopic(topic);
    if (t == nullptr || t->delayed == 0) return Status::NotFound();
    std::vector<Job*> first = DelayedInOrder(t, 1);
    if (first.empty()) return Status::Internal("delayed count out of step with the wheel");
    return View(first.front());
  }

  Result<JobView> PeekBuried(TimeMs now, std::string_view topic) {
    AdvanceTo(now);
    Finish();
    Topic* t = FindTopic(topic);
    if (t == nullptr || t->buried.empty()) return Status::NotFound();
    return View(Job::From(t->buried.next));
  }

  Result<JobStats> StatsJob(TimeMs now, JobId id) {
    AdvanceTo(now);
    Finish();
    Job* j = ids_.Find(id);
    if (j == nullptr) return Status::NotFound();
    JobStats st;
    st.id = j->id;
    st.topic = j->topic->name;
    st.key = std::string(j->key());
    st.state = j->state;
    st.priority = j->priority;
    CopyFigures(j, &st);
    st.age_ms = FloorMs(now_ - j->created);
    st.due_ms = DueOut(j);
    bool timed = j->state == JobState::kDelayed || j->state == JobState::kReserved;
    st.time_left_ms = timed ? CeilMs(std::max<TimeMs>(0, j->due - now_)) : 0;
    st.body_size = j->body_size;
    return st;
  }

  Result<TopicStats> StatsTopic(TimeMs now, std::string_view name) {
    AdvanceTo(now);
    Finish();
    Topic* t = FindTopic(name);
    if (t == nullptr) return Status::NotFound();
    TopicStats st;
    st.name = t->name;
    st.urgent = t->urgent;
    st.ready = t->ready.size();
    st.reserved = t->reserved;
    st.delayed = t->delayed + t->cold;
    st.buried = t->buried_count;
    st.total_jobs = t->total_jobs;
    st.using_count = t->using_count;
    st.watching = t->watching;
    st.waiting = t->waiting;
    st.cmd_delete = t->cmd_delete;
    st.cmd_pause = t->cmd_pause;
    st.pause_ms = t->pause_ms;
    st.pause_time_left_ms = t->paused(now_) ? CeilMs(t->paused_until - now_) : 0;
    return st;
  }

  EngineStats Stats(TimeMs now) {
    AdvanceTo(now);
    Finish();
    EngineStats st;
    st.urgent = n_urgent_;
    st.ready = n_ready_;
    st.reserved = n_reserved_;
    st.delayed = n_delayed_ + n_cold_;
    st.buried = n_buried_;
    st.total_jobs = total_jobs_;
    st.job_timeouts = job_timeouts_;
    st.topics = topics_.size();
    st.sessions = sessions_.size();
    st.waiting = waiting_sessions_;
    st.next_id = next_id_;
    return st;
  }

  std::vector<std::string> ListTopics(TimeMs now) {
    AdvanceTo(now);
    Finish();
    std::vector<const Topic*> ts;
    for (const auto& [name, t] : topics_) ts.push_back(t.get());
    std::sort(ts.begin(), ts.end(), [](const Topic* a, const Topic* b) { return a->seq < b->seq; });
    std::vector<std::string> out;
    for (const Topic* t : ts) out.push_back(t->name);
    return out;
  }

  // ---- topics ----------------------------------------------------------
  Status PauseTopic(TimeMs now, std::string_view name, TimeMs delay) {
    AdvanceTo(now);
    if (!ValidDelay(delay)) return Status::InvalidArgument("pause out of range");
    Topic* t = FindTopic(name);
    if (t == nullptr) return Status::NotFound();
    if (t->paused(now_)) pauses_.erase({t->paused_until, t});
    t->cmd_pause++;
    t->pause_ms = delay;
    t->paused_until = now_ + Ticks(delay);
    if (delay > 0) {
      pauses_.emplace(t->paused_until, t);
    } else {
      MarkServable(t);
    }
    return Finish(Status::Ok());
  }

  Result<uint64_t> ClearTopic(TimeMs now, std::string_view name, uint8_t mask) {
    AdvanceTo(now);
    Topic* t = FindTopic(name);
    if (t == nullptr) return Status::NotFound();
    std::vector<Job*> victims;
    auto wanted = [mask](JobState s) {
      return (s == JobState::kReady && (mask & kClearReady)) ||
             (s == JobState::kDelayed && (mask & kClearDelayed)) ||
             (s == JobState::kBuried && (mask & kClearBuried));
    };
    if (t->jobs() > 0)
      ids_.ForEach([&](Job* j) {
        if (j->topic == t && wanted(j->state)) victims.push_back(j);
      });
    std::sort(victims.begin(), victims.end(), [](Job* a, Job* b) { return a->id < b->id; });
    for (Job* j : victims) Destroy(j);
    Finish();
    return static_cast<uint64_t>(victims.size());
  }

  // ---- time --------------------------------------------------------------
  void Advance(TimeMs now) {
    AdvanceTo(now);
    Finish();
  }

  TimeMs NextWakeup() const {
    TimeMs t = wheel_.NextEvent();
    if (!wakes_.empty()) t = std::min(t, wakes_.begin()->first);
    if (!pauses_.empty()) t = std::min(t, pauses_.begin()->first);
    return t;
  }

  TimeMs now() const { return now_; }
  TimeMs now_ms() const { return FloorMs(now_); }

  void TakeEvents(std::vector<Event>* out) {
    out->insert(out->end(), events_.begin(), events_.end());
    events_.clear();
  }
  void TakeMutations(std::vector<Mutation>* out) {
    out->insert(out->end(), std::make_move_iterator(mutations_.begin()),
                std::make_move_iterator(mutations_.end()));
    mutations_.clear();
  }

  // ---- recovery ----------------------------------------------------------
  Status Restore(TimeMs now, const JobRecord& r, std::string_view body) {
    return Load(now, r, body, /*cold=*/false);
  }

  // ---- horizon -----------------------------------------------------------
  void SetHorizon(TimeMs through) { horizon_ = through; }

  void SetTopicMark(std::string_view name, std::optional<DueMark> mark) {
    if (Topic* t = FindTopic(name)) t->mark = mark;
  }

  DueMark TopicMark(std::string_view name) const {
    const Topic* t = FindTopic(name);
    return t == nullptr ? DueMark{horizon_, kMaxId} : MarkOf(t);
  }

  uint64_t ColdJobs(std::string_view name) const {
    const Topic* t = FindTopic(name);
    return t == nullptr ? 0 : t->cold;
  }
  uint64_t ColdJobs() const { return n_cold_; }

  std::vector<std::string> TopicsWithColdJobs() const {
    std::vector<std::string> out;
    for (const auto& [name, t] : topics_)
      if (t->cold > 0) out.emplace_back(name);
    return out;
  }

  uint64_t DelayedInMemory(std::string_view name) const {
    const Topic* t = FindTopic(name);
    return t == nullptr ? 0 : t->delayed;
  }

  Status AddColdJob(std::string_view name, uint64_t count) {
    if (!IsValidTopicName(name)) return Status::InvalidArgument("bad topic name");
    Topic* t = GetOrCreateTopic(name);
    t->cold += count;
    n_cold_ += count;
    return Finish(Status::Ok());
  }

  Status Adopt(TimeMs now, const JobRecord& r, std::string_view body) {
    return Load(now, r, body, /*cold=*/true);
  }

  void TakeEvicted(std::vector<ColdJob>* out) {
    out->insert(out->end(), std::make_move_iterator(evicted_.begin()),
                std::make_move_iterator(evicted_.end()));
    evicted_.clear();
  }

  bool HasJob(JobId id) const { return ids_.Find(id) != nullptr; }

  bool HasKey(std::string_view name, std::string_view key) const {
    const Topic* t = FindTopic(name);
    return t != nullptr && !key.empty() && t->keys.count(key) > 0;
  }

  bool HasName(std::string_view name) const { return names_.count(name) > 0; }

  JobId ResolveName(std::string_view name) const {
    if (auto n = names_.find(name); n != names_.end()) return n->second->id;
    JobId id = ParseDecimalId(name);
    const Job* j = id == 0 ? nullptr : ids_.Find(id);
    return j != nullptr && !j->named ? id : 0;
  }

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
  TimeMs FloorMs(TimeMs ticks) const { return ticks / tpm_; }
  // A delayed job's place in the (due, id) order of the store and the marks.
  DueMark MarkOfJob(const Job* j) const { return DueMark{CeilMs(j->due), j->id}; }

  DueMark MarkOf(const Topic* t) const { return t->mark ? *t->mark : DueMark{horizon_, kMaxId}; }

  // A job that just became delayed leaves memory at the end of the call if
  // it lies beyond its topic's mark (and is still delayed by then).
  // Returns whether it may leave.
  bool NoteDelayed(const Job* j) {
    if (!opt_.evict_beyond_horizon || MarkOfJob(j) <= MarkOf(j->topic)) return false;
    to_evict_.push_back(j->id);
    return true;
  }

  void EvictBeyondHorizon() {
    for (JobId id : to_evict_) {
      Job* j = ids_.Find(id);
      if (j == nullptr || j->state != JobState::kDelayed || MarkOfJob(j) <= MarkOf(j->topic))
        continue;
      evicted_.push_back(ColdJob{ToRecord(j), std::string(j->body())});
      Unplace(j);
      Topic* t = j->topic;
      if (j->key_size > 0) t->keys.erase(j->key());
      if (j->named) names_.erase(j->key());
      Free(j);
      t->cold++;
      n_cold_++;
    }
    to_evict_.clear();
  }

  // Takes j out of the id table and frees it (it is in no place).
  void Free(Job* j) {
    ids_.Erase(j->id);
    Unintern(j->backoff);
    job_bytes_ -= sizeof(Job) + j->key_size + j->body_size;
    pool_.Destroy(j);
  }

  // Restore (cold false) and Adopt (cold true).
  Status Load(TimeMs now, const JobRecord& r, std::string_view body, bool cold) {
    AdvanceTo(now);
    if (r.id == 0 || ids_.Find(r.id) != nullptr) return Status::InvalidArgument("duplicate job id");
    if (r.state == JobState::kReserved) return Status::InvalidArgument("reserved state stored");
    if (!IsValidTopicName(r.topic)) return Status::InvalidArgument("bad topic name");
    if (r.key.size() > kMaxKeyLength) return Status::InvalidArgument("key too long");
    if (r.ttr_ms < 1 || r.ttr_ms > kMaxDelayMs) return Status::InvalidArgument("ttr out of range");
    if (r.due_ms < 0 || r.due_ms > MaxRecordMs() || r.created_ms < 0 ||
        r.created_ms > MaxRecordMs())
      return Status::InvalidArgument("time out of range");
    if (Status st = ValidateBackoff(r.backoff); !st.ok()) return st;
    Topic* t = GetOrCreateTopic(r.topic);
    if (!r.key.empty() && t->keys.count(r.key) > 0) {
      MaybeDrop(t);
      Finish();
      return Status::InvalidArgument("duplicate key");
    }
    if (r.named && (r.key.empty() || names_.count(r.key) > 0)) {
      MaybeDrop(t);
      Finish();
      return Status::InvalidArgument(r.key.empty() ? "a name without a key" : "duplicate name");
    }
    Job* j = pool_.Create(r.key, body);
    j->id = r.id;
    j->topic = t;
    j->created = Ticks(r.created_ms);
    j->priority = r.priority;
    j->ttr = r.ttr_ms;
    j->delay = r.delay_ms;
    j->reserves = r.reserves;
    j->timeouts = r.timeouts;
    j->releases = r.releases;
    j->buries = r.buries;
    j->kicks = r.kicks;
    j->max_tries = r.max_tries;
    j->backoff = Intern(r.backoff);
    j->due = Ticks(r.due_ms);
    ids_.Insert(j);
    job_bytes_ += sizeof(Job) + j->key_size + j->body_size;
    if (!r.key.empty()) t->keys.emplace(j->key(), j);
    j->named = r.named;
    if (r.named) names_.emplace(j->key(), j);
    next_id_ = std::max(next_id_, r.id + 1);
    JobState st = r.state;
    if (st == JobState::kDelayed && j->due <= now_) st = JobState::kReady;
    Place(j, st);
    if (cold && t->cold > 0) {
      t->cold--;
      n_cold_--;
    }
    return Finish(Status::Ok());
  }

 public:
  std::string CheckInvariants() const;

  size_t MemoryUsage() const {
    size_t n = job_bytes_ + ids_.MemoryUsage() + wheel_.MemoryUsage();
    for (const auto& [name, t] : topics_)
      n += sizeof(Topic) + t->name.size() + t->ready.MemoryUsage() +
           t->keys.size() * (sizeof(void*) * 4);
    return n + names_.size() * (sizeof(void*) * 4);
  }

 private:
  // ---- lookups ---------------------------------------------------------
  Session* FindSession(SessionId id) const {
    if (id == last_session_id_ && last_session_ != nullptr) return last_session_;
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return nullptr;
    last_session_id_ = id;
    last_session_ = it->second.get();
    return last_session_;
  }
  // Session 0 is the operator: no session object, may act on any job.
  bool LookupCaller(SessionId id, Session** s) const {
    *s = nullptr;
    if (id == 0) return true;
    *s = FindSession(id);
    return *s != nullptr;
  }
  // The job `h` may act on (docs/engine.md, "Leases"): a reserved one held
  // by h (its lease; else its session, or any for the operator), or, with
  // any_state and no lease, one that is not reserved. Else the refusal.
  Result<Job*> Acting(const Holder& h, JobId id, bool any_state) {
    Session* s = nullptr;
    if (!LookupCaller(h.session, &s)) return Status::NotFound("no such session");
    Job* j = ids_.Find(id);
    if (j == nullptr) return RefuseJob(id, Refusal::kNoJob, JobState::kReady);
    const bool reserved = j->state == JobState::kReserved;
    if (h.lease != 0) {
      if (reserved && j->reserver == nullptr && j->lease == h.lease) return j;
      return RefuseJob(id, Refusal::kLeaseLost, j->state);
    }
    if (!reserved) {
      if (any_state) return j;
      return RefuseJob(id, Refusal::kNotReserved, j->state);
    }
    if (h.session == 0 || (s != nullptr && j->reserver == s)) return j;
    return RefuseJob(id, j->reserver == nullptr ? Refusal::kHeldByLease : Refusal::kHeldBySession,
                     j->state);
  }
  JobChange Change(const Job* j) const {
    return JobChange{j->id, j->state, DueOut(j), j->priority};
  }
  // A job's due time (delayed) or TTR deadline (reserved) in milliseconds,
  // rounded up; 0 in the other states.
  TimeMs DueOut(const Job* j) const {
    bool timed = j->state == JobState::kDelayed || j->state == JobState::kReserved;
    return timed ? CeilMs(j->due) : 0;
  }
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
  Topic* FindTopic(std::string_view name) const {
    auto it = topics_.find(name);
    return it == topics_.end() ? nullptr : it->second.get();
  }
  // kResourceExhausted when `name` is a new topic and max_topics exist.
  Status RoomForTopic(std::string_view name) const {
    if (opt_.max_topics == 0 || topics_.size() < opt_.max_topics || FindTopic(name) != nullptr)
      return Status::Ok();
    return Status::ResourceExhausted("too many topics: the server holds " +
                                     std::to_string(topics_.size()) + " (--max-topics)");
  }
  Topic* GetOrCreateTopic(std::string_view name) {
    if (Topic* t = FindTopic(name)) return t;
    auto t = std::make_unique<Topic>(std::string(name), topic_seq_++);
    Topic* raw = t.get();
    topics_.emplace(std::string_view(raw->name), std::move(t));
    MaybeDrop(raw);  // dropped at the end of the call unless referenced by then
    return raw;
  }
  void MaybeDrop(Topic* t) {
    if (t != default_topic_ && !t->drop_pending && t->refs() == 0) {
      t->drop_pending = true;
      drops_.push_back(t);
    }
  }

  JobView View(const Job* j) const {
    JobView v;
    v.id = j->id;
    v.topic = j->topic->name;
    v.key = j->key();
    v.body = j->body();
    v.state = j->state;
    v.priority = j->priority;
    v.due_ms = DueOut(j);
    v.named = j->named;
    CopyFigures(j, &v);
    return v;
  }

  // ---- placing jobs ------------------------------------------------------
  // Puts j, which is in no place, into the place of `state`.
  void Place(Job* j, JobState state) {
    Topic* t = j->topic;
    j->state = state;
    switch (state) {
      case JobState::kReady:
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

  void ReserveFor(Session* s, Job* j, bool detach) {
    Unplace(j);
    j->reserver = detach ? nullptr : s;
    j->lease = NextLease();
    j->due = now_ + Ticks(j->ttr);
    j->reserves++;
    Place(j, JobState::kReserved);
    RecordUpdate(j, /*deferrable=*/true);
  }

  // A reservation ended without the job finishing; j is in no place.
  JobState ComeBack(Job* j, std::optional<TimeMs> explicit_delay) {
    if (j->max_tries > 0 && j->reserves >= j->max_tries) {
      j->buries++;
      Place(j, JobState::kBuried);
      return JobState::kBuried;
    }
    TimeMs d = 0;
    if (explicit_delay) {
      d = *explicit_delay;
      j->delay = d;
    } else if (j->backoff != 0) {
      d = policies_[j->backoff].backoff.DelayFor(j->reserves);
      j->delay = d;
    }
    if (d > 0) {
      j->due = now_ + Ticks(d);
      Place(j, JobState::kDelayed);
      NoteDelayed(j);
      return JobState::kDelayed;
    }
    Place(j, JobState::kReady);
    return JobState::kReady;
  }

  void KickOne(Job* j) {
    Unplace(j);
    j->kicks++;
    Place(j, JobState::kReady);
    RecordUpdate(j);
  }

  void Destroy(Job* j) {
    Unplace(j);
    Topic* t = j->topic;
    if (j->key_size > 0) t->keys.erase(j->key());
    if (j->named) names_.erase(j->key());
    RecordDelete(j);
    Free(j);
    t->ready.ShrinkIfSparse();
    MaybeDrop(t);
  }

  // The topic's delayed jobs in (due, id) order, at most `limit`.
  std::vector<Job*> DelayedInOrder(const Topic* t, uint64_t limit) const {
    std::vector<Job*> out, slot;
    wheel_.VisitInTimeOrder(
        [&](Job* j) {
          if (j->topic == t && j->state == JobState::kDelayed) slot.push_back(j);
        },
        [&]() {
          std::sort(slot.begin(), slot.end(), DueBefore);
          out.insert(out.end(), slot.begin(), slot.end());
          slot.clear();
          return out.size() >= limit;
        });
    if (out.size() > limit) out.resize(limit);
    return out;
  }

  // Lowest (priority, id) ready job among the unpaused topics.
  Job* PickReady(const std::vector<Topic*>& topics) const {
    Job* best = nullptr;
    for (const Topic* t : topics) {
      if (t->ready.empty() || t->paused(now_)) continue;
      Job* j = t->ready.top();
      if (best == nullptr || ReadyBefore(j, best)) best = j;
    }
    return best;
  }

  // ---- waiting -----------------------------------------------------------
  void MarkServable(Topic* t) {
    if (t->waiting > 0) servable_.push_back(t);
  }

  bool DeadlineSoon(const Session* s) const {
    for (const Job* j : s->reserved)
      if (j->due - now_ <= Ticks(kDeadlineSafetyMarginMs)) return true;
    return false;
  }

  // Re-keys the session in the wake set: its timeout, or the moment a job
  // it holds gets within the safety margin of its TTR.
  void UpdateWake(Session* s) {
    TimeMs w = kNever;
    if (s->waiting) {
      w = s->wait_deadline;
      for (const Job* j : s->reserved) w = std::min(w, j->due - Ticks(kDeadlineSafetyMarginMs));
    }
    if (w == s->wake_at) return;
    if (s->wake_at != kNever) wakes_.erase({s->wake_at, s->id});
    s->wake_at = w;
    if (w != kNever) wakes_.emplace(w, s->id);
  }

  void EndWait(Session* s) {
    if (!s->waiting) return;
    s->waiting = false;
    waiting_sessions_--;
    for (Topic* t : s->wait_topics) {
      t->waiting--;
      if (t->waiters.size() > 2 * t->waiting + 16) CompactWaiters(t);
      MaybeDrop(t);
    }
    s->wait_topics.clear();
    UpdateWake(s);
  }

  bool WaitIsLive(SessionId id, uint64_t seq) const {
    const Session* s = FindSession(id);
    return s != nullptr && s->waiting && s->wait_seq == seq;
  }

  void CompactWaiters(Topic* t) {
    std::deque<std::pair<SessionId, uint64_t>> live;
    for (const auto& w : t->waiters)
      if (WaitIsLive(w.first, w.second)) live.push_back(w);
    t->waiters.swap(live);
  }

  // Hands ready jobs to waiting sessions (docs/engine.md, "Serving waiters").
  void ServeWaiters() {
    while (!servable_.empty()) {
      Topic* best = nullptr;
      for (Topic* t : servable_) {
        if (t->waiting == 0 || t->ready.empty() || t->paused(now_)) continue;
        if (best == nullptr || ReadyBefore(t->ready.top(), best->ready.top())) best = t;
      }
      if (best == nullptr) break;
      Session* s = nullptr;
      while (s == nullptr && !best->waiters.empty()) {
        auto [id, seq] = best->waiters.front();
        best->waiters.pop_front();
        if (WaitIsLive(id, seq)) s = FindSession(id);
      }
      if (s == nullptr) break;  // unreachable while Topic::waiting is right
      std::vector<Topic*> topics = s->wait_topics;
      uint32_t count = s->wait_count;
      bool detach = s->wait_detach;
      EndWait(s);
      Job* j = best->ready.top();
      for (uint32_t i = 0; i < count && j != nullptr; ++i) {
        ReserveFor(s, j, detach);
        events_.push_back(Event{Event::Kind::kReserved, s->id, j->id});
        j = PickReady(topics);
      }
    }
    servable_.clear();
  }

  // ---- time --------------------------------------------------------------
  void AdvanceTo(TimeMs target) {
    lease_texts_.clear();
    if (target <= now_) {
      // Common case: another call within the same tick.
      if (!wheel_.HasDue() && (wakes_.empty() || wakes_.begin()->first > now_) &&
          (pauses_.empty() || pauses_.begin()->first > now_))
        return;
      target = now_;
    }
    for (;;) {
      TimeMs t = NextWakeup();
      if (t > target) break;
      fired_.clear();
      wheel_.AdvanceTo(t, [this](Job* j) { fired_.push_back(j); });
      now_ = std::max(now_, t);
      ProcessInstant();
    }
    wheel_.AdvanceTo(target, [](Job*) {});
    now_ = target;
    // Waits that ended may have let go of the last reference to a topic;
    // drop it now, so that no call (even one that fails) sees it.
    FlushDrops();
  }

  // Everything that happens at now_ (docs/engine.md, "Instants").
  void ProcessInstant() {
    if (fired_.size() > 1)
      std::sort(fired_.begin(), fired_.end(), [](Job* a, Job* b) { return a->id < b->id; });
    for (Job* j : fired_) {
      Unplace(j, /*in_wheel=*/false);
      if (j->state == JobState::kDelayed) {
        ids_.Prefetch(j->id);
        Place(j, JobState::kReady);
      } else {  // TTR expiry
        j->timeouts++;
        job_timeouts_++;
        ComeBack(j, std::nullopt);
        RecordUpdate(j);
      }
    }
    while (!pauses_.empty() && pauses_.begin()->first <= now_) {
      Topic* t = pauses_.begin()->second;
      pauses_.erase(pauses_.begin());
      t->pause_ms = 0;
      MarkServable(t);
    }
    ServeWaiters();
    while (!wakes_.empty() && wakes_.begin()->first <= now_) {
      Session* s = FindSession(wakes_.begin()->second);
      wakes_.erase(wakes_.begin());
      if (s == nullptr) continue;
      s->wake_at = kNever;
      if (DeadlineSoon(s)) {
        EndWait(s);
        events_.push_back(Event{Event::Kind::kDeadlineSoon, s->id, 0});
      } else if (now_ >= s->wait_deadline) {
        EndWait(s);
        events_.push_back(Event{Event::Kind::kTimedOut, s->id, 0});
      } else {
        UpdateWake(s);
      }
    }
  }

  // Ends a public call: serves waiters and drops unreferenced topics.
  template <typename T>
  T Finish(T result) {
    Finish();
    return result;
  }
  void Finish() {
    ServeWaiters();
    if (!to_evict_.empty()) EvictBeyondHorizon();
    FlushDrops();
  }
  void FlushDrops() {
    for (Topic* t : drops_) {
      t->drop_pending = false;
      if (t->refs() == 0 && t != default_topic_) {
        if (t->paused(now_)) pauses_.erase({t->paused_until, t});
        topics_.erase(std::string_view(t->name));
      }
    }
    drops_.clear();
  }

  // ---- back-off policies -----------------------------------------------
  struct Policy {
    Backoff backoff;
    uint64_t refs = 0;
    std::string key;
  };
  uint32_t Intern(const Backoff& b) {
    if (b.kind == Backoff::Kind::kNone) return 0;
    std::string key = BackoffKey(b);
    auto it = policy_index_.find(key);
    uint32_t idx;
    if (it != policy_index_.end()) {
      idx = it->second;
    } else {
      if (free_policies_.empty()) {
        idx = static_cast<uint32_t>(policies_.size());
        policies_.emplace_back();
      } else {
        idx = free_policies_.back();
        free_policies_.pop_back();
      }
      policies_[idx] = Policy{b, 0, key};
      policy_index_.emplace(std::move(key), idx);
    }
    policies_[idx].refs++;
    return idx;
  }
  void Unintern(uint32_t idx) {
    if (idx == 0 || --policies_[idx].refs > 0) return;
    policy_index_.erase(policies_[idx].key);
    policies_[idx] = Policy{};
    free_policies_.push_back(idx);
  }

  // ---- mutations -------------------------------------------------------
  JobRecord ToRecord(const Job* j) const {
    JobRecord r;
    r.id = j->id;
    r.topic = j->topic->name;
    r.key = std::string(j->key());
    r.state = j->state == JobState::kReserved ? JobState::kReady : j->state;
    r.priority = j->priority;
    r.due_ms = j->state == JobState::kDelayed ? CeilMs(j->due) : 0;
    CopyFigures(j, &r);
    if (j->backoff != 0) r.backoff = policies_[j->backoff].backoff;
    r.named = j->named;
    return r;
  }
  void RecordPut(const Job* j) {
    if (!opt_.record_mutations) return;
    mutations_.push_back(Mutation{Mutation::Kind::kPut, ToRecord(j), std::string(j->body())});
  }
  void RecordUpdate(const Job* j, bool deferrable = false) {
    if (!opt_.record_mutations) return;
    mutations_.push_back(Mutation{Mutation::Kind::kUpdate, ToRecord(j), {}, deferrable});
  }
  void RecordDelete(const Job* j) {
    if (!opt_.record_mutations) return;
    mutations_.push_back(Mutation{Mutation::Kind::kDelete, ToRecord(j), {}});
  }

  // A new lease: the leases counted from the seed, each mixed (SplitMix64's
  // finalizer, a bijection), so they do not read as a sequence; never 0.
  uint64_t NextLease() {
    for (;;) {
      uint64_t z = opt_.lease_seed + (++leases_) * 0x9e3779b97f4a7c15ULL;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      z ^= z >> 31;
      if (z != 0) return z;
    }
  }

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
  size_t job_bytes_ = 0;

  std::vector<Policy> policies_{Policy{}};  // index 0: no back-off
  std::vector<uint32_t> free_policies_;
  std::unordered_map<std::string, uint32_t> policy_index_;

  std::vector<Event> events_;
  std::vector<Mutation> mutations_;
  std::vector<Job*> fired_;
  std::vector<Topic*> servable_;
  std::vector<Topic*> drops_;
};

std::string Engine::Impl::CheckInvariants() const {
  auto fail = [](std::string what) { return what; };
  if (!wheel_.Valid()) return fail("timing wheel placement");
  uint64_t ready = 0, urgent = 0, reserved = 0, delayed = 0, buried = 0, named = 0;
  std::unordered_map<const Topic*, std::array<uint64_t, 5>> per;
  std::string err;
  ids_.ForEach([&](Job* j) {
    auto& c = per[j->topic];
    if (j->named) named++;
    switch (j->state) {
      case JobState::kReady:
        ready++;
        c[0]++;
        if (j->priority < kUrgentPriority) urgent++, c[4]++;
        if (j->pos >= j->topic->ready.size() || j->topic->ready.jobs()[j->pos] != j)
          err = "ready job not at its heap position";
        break;
      case JobState::kReserved:
        reserved++;
        c[1]++;
        if (j->reserver != nullptr &&
            (j->pos >= j->reserver->reserved.size() || j->reserver->reserved[j->pos] != j))
          err = "reserved job not in its session's list";
        break;
      case JobState::kDelayed:
        delayed++;
        c[2]++;
        if (j->due <= now_) err = "delayed job past its due time";
        break;
      case JobState::kBuried:
        buried++;
        c[3]++;
        break;
    }
    if (j->key_size > 0) {
      auto it = j->topic->keys.find(j->key());
      if (it == j->topic->keys.end() || it->second != j) err = "key index out of step";
    }
    if (j->named) {
      auto it = names_.find(j->key());
      if (it == names_.end() || it->second != j) err = "name index out of step";
    }
    if (topics_.count(std::string_view(j->topic->name)) == 0) err = "job in a dropped topic";
  });
  if (!err.empty()) return err;
  if (named != names_.size()) return fail("names of jobs that are gone");
  if (ready != n_ready_ || urgent != n_urgent_ || reserved != n_reserved_ ||
      delayed != n_delayed_ || buried != n_buried_)
    return fail("global counters");
  if (wheel_.size() != delayed + reserved) return fail("wheel size");
  uint64_t cold = 0;
  for (const auto& [name, t] : topics_) cold += t->cold;
  if (cold != n_cold_) return fail("cold job count");
  for (const auto& [name, t] : topics_) {
    auto c = per[t.get()];
    if (!t->ready.Valid()) return fail("ready heap of " + t->name);
    if (t->ready.size() != c[0] || t->reserved != c[1] || t->delayed != c[2] ||
        t->buried_count != c[3] || t->urgent != c[4])
      return fail("counters of topic " + t->name);
    uint64_t nb = 0;
    for (const Link* l = t->buried.next; l != &t->buried; l = l->next) {
      nb++;
      if (Job::From(const_cast<Link*>(l))->state != JobState::kBuried)
        return fail("non-buried job in buried list");
    }
    if (nb != t->buried_count) return fail("buried list length of " + t->name);
    if (t->refs() == 0 && t.get() != default_topic_) return fail("unreferenced topic " + t->name);
    if (t->waiting > 0 && !t->ready.empty() && !t->paused(now_))
      return fail("topic " + t->name + " has a ready job and a waiting session");
    uint64_t using_count = 0, watching = 0, waiting = 0;
    for (const auto& [id, s] : sessions_) {
      using_count += s->used == t.get();
      watching += std::count(s->watched.begin(), s->watched.end(), t.get());
      waiting += std::count(s->wait_topics.begin(), s->wait_topics.end(), t.get());
    }
    if (using_count != t->using_count || watching != t->watching || waiting != t->waiting)
      return fail("session references of topic " + t->name);
  }
  uint64_t waiting_sessions = 0;
  for (const auto& [id, s] : sessions_) {
    if (s->waiting) {
      waiting_sessions++;
      if (s->wait_topics.empty()) return fail("waiting session without topics");
    } else if (!s->wait_topics.empty()) {
      return fail("idle session with wait topics");
    }
    if (s->waiting && s->wake_at == kNever && s->wait_deadline != kNever)
      return fail("waiting session without a wake time");
    for (const Job* j : s->reserved)
      if (j->state != JobState::kReserved || j->reserver != s.get())
        return fail("session holds a job it did not reserve");
  }
  if (waiting_sessions != waiting_sessions_) return fail("waiting session count");
  return {};
}

// ---- Engine: forwarding ------------------------------------------------

Engine::Engine(EngineOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Engine::~Engine() = default;

SessionId Engine::OpenSession(TimeMs now) { return impl_->OpenSession(now); }
void Engine::CloseSession(TimeMs now, SessionId s) { impl_->CloseSession(now, s); }
Status Engine::Use(SessionId s, std::string_view t) { return impl_->Use(s, t); }
Result<size_t> Engine::Watch(SessionId s, std::string_view t) { return impl_->Watch(s, t); }
Result<size_t> Engine::Ignore(SessionId s, std::string_view t) { return impl_->Ignore(s, t); }
std::string_view Engine::UsedTopic(SessionId s) const { return impl_->UsedTopic(s); }
std::vector<std::string_view> Engine::WatchedTopics(SessionId s) const {
  return impl_->WatchedTopics(s);
}
Result<PutResult> Engine::Put(TimeMs now, SessionId s, const PutRequest& r) {
  return impl_->Put(now, s, r);
}
void Engine::DiscardJobId() { impl_->DiscardJobId(); }
void Engine::SkipIdsThrough(JobId id) { impl_->SkipIdsThrough(id); }
JobId Engine::next_id() const { return impl_->next_id(); }
Result<std::vector<JobId>> Engine::Reserve(TimeMs now, const ReserveRequest& r) {
  return impl_->Reserve(now, r);
}
void Engine::CancelReserve(SessionId s) { impl_->CancelReserve(s); }
bool Engine::IsWaiting(SessionId s) const { return impl_->IsWaiting(s); }
Result<JobView> Engine::ReserveJob(TimeMs now, SessionId s, JobId id) {
  return impl_->ReserveJob(now, s, id);
}
Result<JobChange> Engine::Delete(TimeMs now, const Holder& h, JobId id) {
  return impl_->Delete(now, h, id);
}
Result<JobChange> Engine::DeleteByKey(TimeMs now, const Holder& h, std::string_view t,
                                      std::string_view k) {
  return impl_->DeleteByKey(now, h, t, k);
}
Result<JobChange> Engine::Finish(TimeMs now, const Holder& h, JobId id) {
  return impl_->Delete(now, h, id, /*any_state=*/false);
}
Result<JobChange> Engine::Release(TimeMs now, const Holder& h, JobId id,
                                  std::optional<uint32_t> pri, std::optional<TimeMs> delay) {
  return impl_->Release(now, h, id, pri, delay);
}
Result<JobChange> Engine::Bury(TimeMs now, const Holder& h, JobId id, std::optional<uint32_t> pri) {
  return impl_->Bury(now, h, id, pri);
}
Result<JobChange> Engine::Touch(TimeMs now, const Holder& h, JobId id) {
  return impl_->Touch(now, h, id);
}
Result<uint64_t> Engine::Kick(TimeMs now, std::string_view t, uint64_t bound) {
  return impl_->Kick(now, t, bound);
}
Result<JobChange> Engine::KickJob(TimeMs now, JobId id) { return impl_->KickJob(now, id); }
Result<JobView> Engine::Peek(TimeMs now, JobId id) { return impl_->Peek(now, id); }
Result<JobView> Engine::PeekReservation(TimeMs now, JobId id) {
  return impl_->PeekReservation(now, id);
}
Result<JobView> Engine::PeekByKey(TimeMs now, std::string_view t, std::string_view k) {
  return impl_->PeekByKey(now, t, k);
}
Result<JobView> Engine::PeekReady(TimeMs now, std::string_view t) {
  return impl_->PeekReady(now, t);
}
Result<JobView> Engine::PeekDelayed(TimeMs now, std::string_view t) {
  return impl_->PeekDelayed(now, t);
}
Result<JobView> Engine::PeekBuried(TimeMs now, std::string_view t) {
  return impl_->PeekBuried(now, t);
}
Result<JobStats> Engine::StatsJob(TimeMs now, JobId id) { return impl_->StatsJob(now, id); }
Result<TopicStats> Engine::StatsTopic(TimeMs now, std::string_view t) {
  return impl_->StatsTopic(now, t);
}
EngineStats Engine::Stats(TimeMs now) { return impl_->Stats(now); }
std::vector<std::string> Engine::ListTopics(TimeMs now) { return impl_->ListTopics(now); }
Status Engine::PauseTopic(TimeMs now, std::string_view t, TimeMs d) {
  return impl_->PauseTopic(now, t, d);
}
Result<uint64_t> Engine::ClearTopic(TimeMs now, std::string_view t, uint8_t mask) {
  return impl_->ClearTopic(now, t, mask);
}
void Engine::Advance(TimeMs now) { impl_->Advance(now); }
TimeMs Engine::NextWakeup() const { return impl_->NextWakeup(); }
TimeMs Engine::now() const { return impl_->now(); }
TimeMs Engine::now_ms() const { return impl_->now_ms(); }
void Engine::TakeEvents(std::vector<Event>* out) { impl_->TakeEvents(out); }
void Engine::TakeMutations(std::vector<Mutation>* out) { impl_->TakeMutations(out); }
Status Engine::Restore(TimeMs now, const JobRecord& r, std::string_view body) {
  return impl_->Restore(now, r, body);
}
void Engine::SetHorizon(TimeMs through) { impl_->SetHorizon(through); }
void Engine::SetTopicMark(std::string_view t, std::optional<DueMark> mark) {
  impl_->SetTopicMark(t, mark);
}
DueMark Engine::TopicMark(std::string_view t) const { return impl_->TopicMark(t); }
uint64_t Engine::ColdJobs(std::string_view t) const { return impl_->ColdJobs(t); }
uint64_t Engine::ColdJobs() const { return impl_->ColdJobs(); }
std::vector<std::string> Engine::TopicsWithColdJobs() const { return impl_->TopicsWithColdJobs(); }
uint64_t Engine::DelayedInMemory(std::string_view t) const { return impl_->DelayedInMemory(t); }
Status Engine::AddColdJob(std::string_view t, uint64_t count) {
  return impl_->AddColdJob(t, count);
}
Status Engine::Adopt(TimeMs now, const JobRecord& r, std::string_view body) {
  return impl_->Adopt(now, r, body);
}
void Engine::TakeEvicted(std::vector<ColdJob>* out) { impl_->TakeEvicted(out); }
bool Engine::HasJob(JobId id) const { return impl_->HasJob(id); }
bool Engine::HasKey(std::string_view t, std::string_view k) const { return impl_->HasKey(t, k); }
bool Engine::HasName(std::string_view name) const { return impl_->HasName(name); }
JobId Engine::ResolveName(std::string_view name) const { return impl_->ResolveName(name); }
std::string Engine::CheckInvariants() const { return impl_->CheckInvariants(); }
size_t Engine::MemoryUsage() const { return impl_->MemoryUsage(); }

}  // namespace delayq

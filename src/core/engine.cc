// The engine: see include/delayq/engine.h for the contract and docs/engine.md
// for the semantics and structures; its state, invariants and units of time
// are in engine_impl.h. This file holds the operations (sessions, puts,
// reserves and what ends or moves a reservation, kicks, topics), the placing
// of jobs, back-off policies, the mutations recorded, and Engine's
// forwarding to Impl.
#include <algorithm>
#include <array>
#include <deque>
#include <limits>
#include <set>
#include <unordered_map>

#include "core/engine_impl.h"
#include "delayq/text.h"

namespace delayq {

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

Engine::Impl::Impl(EngineOptions options)
    : opt_(std::move(options)),
      tpm_(std::clamp<TimeMs>(opt_.ticks_per_ms, 1, kMaxTicksPerMs)),
      now_(std::max<TimeMs>(0, opt_.start_ms) * tpm_),
      wheel_(now_) {
  if (!IsValidTopicName(opt_.default_topic)) opt_.default_topic = "default";
  default_topic_ = GetOrCreateTopic(opt_.default_topic);
}

Engine::Impl::~Impl() {
  std::vector<Job*> all;
  all.reserve(ids_.size());
  ids_.ForEach([&](Job* j) { all.push_back(j); });
  for (Job* j : all) pool_.Destroy(j);
}

SessionId Engine::Impl::OpenSession(TimeMs now) {
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

void Engine::Impl::CloseSession(TimeMs now, SessionId id) {
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

Status Engine::Impl::Use(SessionId id, std::string_view name) {
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

Result<size_t> Engine::Impl::Watch(SessionId id, std::string_view name) {
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

Result<size_t> Engine::Impl::Ignore(SessionId id, std::string_view name) {
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

std::string_view Engine::Impl::UsedTopic(SessionId id) const {
  const Session* s = FindSession(id);
  return s == nullptr ? std::string_view() : std::string_view(s->used->name);
}

std::vector<std::string_view> Engine::Impl::WatchedTopics(SessionId id) const {
  std::vector<std::string_view> out;
  if (const Session* s = FindSession(id))
    for (const Topic* t : s->watched) out.emplace_back(t->name);
  return out;
}

Result<PutResult> Engine::Impl::Put(TimeMs now, SessionId sid, const PutRequest& r) {
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
    // (DropIfUnused: a topic made for this put goes again when it is
    // refused.)
    if (auto n = names_.find(r.key); n != names_.end() && n->second->topic != t) {
      DropIfUnused(t);
      return Status::Conflict("id '" + std::string(r.key) + "' belongs to a job in topic '" +
                              n->second->topic->name + "'");
    }
  }
  if (!r.key.empty()) {
    auto it = t->keys.find(r.key);
    if (it != t->keys.end()) {
      const Job* e = it->second;
      if (r.named && !e->named) {
        DropIfUnused(t);
        return Status::Conflict("topic '" + t->name + "' holds a job with key '" +
                                std::string(r.key) + "' that was not put by /push");
      }
      return PutResult{e->id, false, e->state, e->state == JobState::kDelayed ? CeilMs(e->due) : 0};
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

Result<std::vector<JobId>> Engine::Impl::Reserve(TimeMs now, const ReserveRequest& r) {
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

void Engine::Impl::CancelReserve(SessionId id) {
  if (Session* s = FindSession(id)) EndWait(s);
  Finish();
}

bool Engine::Impl::IsWaiting(SessionId id) const {
  const Session* s = FindSession(id);
  return s != nullptr && s->waiting;
}

Result<JobView> Engine::Impl::ReserveJob(TimeMs now, SessionId sid, JobId id) {
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

Result<JobChange> Engine::Impl::Delete(TimeMs now, const Holder& h, JobId id, bool any_state) {
  AdvanceTo(now);
  auto j = Acting(h, id, any_state);
  if (!j.ok()) return Finish(Result<JobChange>(j.status()));
  JobChange c = Change(*j);
  (*j)->topic->cmd_delete++;
  Destroy(*j);
  Finish();
  return c;
}

Result<JobChange> Engine::Impl::DeleteByKey(TimeMs now, const Holder& h, std::string_view topic,
                                            std::string_view key) {
  AdvanceTo(now);
  if (Topic* t = FindTopic(topic); t != nullptr && !key.empty()) {
    auto it = t->keys.find(key);
    if (it != t->keys.end()) return Delete(now, h, it->second->id);
  }
  return Finish(Result<JobChange>(Status::NotFound("no job with key '" + std::string(key) +
                                                   "' in topic '" + std::string(topic) + "'")));
}

Result<JobChange> Engine::Impl::Release(TimeMs now, const Holder& h, JobId id,
                                        std::optional<uint32_t> priority,
                                        std::optional<TimeMs> delay, const PushAnswer* answer) {
  AdvanceTo(now);
  if (delay && !ValidDelay(*delay)) return Status::InvalidArgument("delay out of range");
  auto held = Acting(h, id, false);
  if (!held.ok()) return Finish(Result<JobChange>(held.status()));
  Job* j = *held;
  Unplace(j);
  if (answer != nullptr) SetAnswer(j, *answer);
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

Result<JobChange> Engine::Impl::Bury(TimeMs now, const Holder& h, JobId id,
                                     std::optional<uint32_t> priority, const PushAnswer* answer) {
  AdvanceTo(now);
  auto held = Acting(h, id, false);
  if (!held.ok()) return Finish(Result<JobChange>(held.status()));
  Job* j = *held;
  Unplace(j);
  if (answer != nullptr) SetAnswer(j, *answer);
  if (priority) j->priority = *priority;
  j->buries++;
  Place(j, JobState::kBuried);
  RecordUpdate(j);
  JobChange c = Change(j);
  Finish();
  return c;
}

void Engine::Impl::SetAnswer(const Job* j, const PushAnswer& a) {
  PushAnswer& kept = answers_[j->id];
  kept.status = a.status;
  kept.text.assign(a.text, 0, std::min(a.text.size(), kMaxAnswerBytes));
}

Result<JobChange> Engine::Impl::Touch(TimeMs now, const Holder& h, JobId id) {
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

Result<uint64_t> Engine::Impl::Kick(TimeMs now, std::string_view topic, uint64_t bound) {
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

Result<JobChange> Engine::Impl::KickJob(TimeMs now, JobId id) {
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

Status Engine::Impl::PauseTopic(TimeMs now, std::string_view name, TimeMs delay) {
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

Result<uint64_t> Engine::Impl::ClearTopic(TimeMs now, std::string_view name, uint8_t mask) {
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

void Engine::Impl::TakeEvents(std::vector<Event>* out) {
  out->insert(out->end(), events_.begin(), events_.end());
  events_.clear();
}

void Engine::Impl::TakeMutations(std::vector<Mutation>* out) {
  out->insert(out->end(), std::make_move_iterator(mutations_.begin()),
              std::make_move_iterator(mutations_.end()));
  mutations_.clear();
}

void Engine::Impl::RecordMutationsInto(std::vector<Mutation>* sink) {
  if (sink != nullptr) TakeMutations(sink);
  sink_ = sink;
}

void Engine::Impl::Free(Job* j) {
  ids_.Erase(j->id);
  if (!answers_.empty()) answers_.erase(j->id);
  Unintern(j->backoff);
  job_bytes_ -= sizeof(Job) + j->key_size + j->body_size;
  pool_.Destroy(j);
}

Session* Engine::Impl::FindSession(SessionId id) const {
  if (id == last_session_id_ && last_session_ != nullptr) return last_session_;
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  last_session_id_ = id;
  last_session_ = it->second.get();
  return last_session_;
}

bool Engine::Impl::LookupCaller(SessionId id, Session** s) const {
  *s = nullptr;
  if (id == 0) return true;
  *s = FindSession(id);
  return *s != nullptr;
}

Result<Job*> Engine::Impl::Acting(const Holder& h, JobId id, bool any_state) {
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

JobChange Engine::Impl::Change(const Job* j) const {
  return JobChange{j->id, j->state, DueOut(j), j->priority};
}

TimeMs Engine::Impl::DueOut(const Job* j) const {
  bool timed = j->state == JobState::kDelayed || j->state == JobState::kReserved;
  return timed ? CeilMs(j->due) : 0;
}

Topic* Engine::Impl::FindTopic(std::string_view name) const {
  auto it = topics_.find(name);
  return it == topics_.end() ? nullptr : it->second.get();
}

Status Engine::Impl::RoomForTopic(std::string_view name) const {
  if (opt_.max_topics == 0 || topics_.size() < opt_.max_topics || FindTopic(name) != nullptr)
    return Status::Ok();
  return Status::ResourceExhausted("too many topics: the server holds " +
                                   std::to_string(topics_.size()) + " (--max-topics)");
}

Topic* Engine::Impl::GetOrCreateTopic(std::string_view name) {
  if (Topic* t = FindTopic(name)) return t;
  auto t = std::make_unique<Topic>(std::string(name), topic_seq_++);
  Topic* raw = t.get();
  topics_.emplace(std::string_view(raw->name), std::move(t));
  MaybeDrop(raw);  // dropped at the end of the call unless referenced by then
  return raw;
}

void Engine::Impl::MaybeDrop(Topic* t) {
  if (t != default_topic_ && !t->drop_pending && t->refs() == 0) {
    t->drop_pending = true;
    drops_.push_back(t);
  }
}

void Engine::Impl::DropIfUnused(Topic* t) {
  MaybeDrop(t);
  FlushDrops();
}

void Engine::Impl::ReserveFor(Session* s, Job* j, bool detach) {
  // (reserve-job may take a delayed or buried job: only ready ones waited.)
#if DELAYQ_COUNT_METRICS
  if (j->state == JobState::kReady) metrics_.ready_wait.Observe(TicksToUs(call_now_ - j->due));
#endif
  Unplace(j);
  j->reserver = detach ? nullptr : s;
  j->lease = NextLease();
  j->due = now_ + Ticks(j->ttr);
  j->reserves++;
  Place(j, JobState::kReserved);
  RecordUpdate(j, /*deferrable=*/true);
}

JobState Engine::Impl::ComeBack(Job* j, std::optional<TimeMs> explicit_delay) {
  if (j->max_tries > 0 && j->reserves >= j->max_tries) {
    j->buries++;
    metrics_.buried_max_tries++;
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

void Engine::Impl::KickOne(Job* j) {
  Unplace(j);
  j->kicks++;
  Place(j, JobState::kReady);
  RecordUpdate(j);
}

void Engine::Impl::Destroy(Job* j) {
  Unplace(j);
  Topic* t = j->topic;
  if (j->key_size > 0) t->keys.erase(j->key());
  if (j->named) names_.erase(j->key());
  RecordDelete(j);
  Free(j);
  t->ready.ShrinkIfSparse();
  MaybeDrop(t);
}

std::vector<Job*> Engine::Impl::DelayedInOrder(const Topic* t, uint64_t limit) const {
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

Job* Engine::Impl::PickReady(const std::vector<Topic*>& topics) const {
  Job* best = nullptr;
  for (const Topic* t : topics) {
    if (t->ready.empty() || t->paused(now_)) continue;
    Job* j = t->ready.top();
    if (best == nullptr || ReadyBefore(j, best)) best = j;
  }
  return best;
}

uint32_t Engine::Impl::Intern(const Backoff& b) {
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

void Engine::Impl::Unintern(uint32_t idx) {
  if (idx == 0 || --policies_[idx].refs > 0) return;
  policy_index_.erase(policies_[idx].key);
  policies_[idx] = Policy{};
  free_policies_.push_back(idx);
}

JobRecord Engine::Impl::ToRecord(const Job* j) const {
  JobRecord r;
  FillRecord(j, &r);
  return r;
}

// Into a fresh record: what a job does not have is left as it is.
void Engine::Impl::FillRecord(const Job* j, JobRecord* r) const {
  r->id = j->id;
  r->topic = j->topic->name;
  r->key = j->key();
  r->state = j->state == JobState::kReserved ? JobState::kReady : j->state;
  r->priority = j->priority;
  r->due_ms = j->state == JobState::kDelayed ? CeilMs(j->due) : 0;
  CopyFigures(j, r);
  if (j->backoff != 0) r->backoff = policies_[j->backoff].backoff;
  r->named = j->named;
  if (!answers_.empty())
    if (auto it = answers_.find(j->id); it != answers_.end()) r->answer = it->second;
}

// Each built where it stays (the sink), not moved there: a Mutation holds
// several strings, and moving one cost about as much as building it.
void Engine::Impl::RecordPut(const Job* j) {
  if (!opt_.record_mutations) return;
  Mutation& m = Mutations().emplace_back();
  m.kind = Mutation::Kind::kPut;
  FillRecord(j, &m.record);
  m.body = j->body();
}

void Engine::Impl::RecordUpdate(const Job* j, bool deferrable) {
  if (!opt_.record_mutations) return;
  Mutation& m = Mutations().emplace_back();
  m.kind = Mutation::Kind::kUpdate;
  FillRecord(j, &m.record);
  m.deferrable = deferrable;
}

void Engine::Impl::RecordDelete(const Job* j) {
  if (!opt_.record_mutations) return;
  Mutation& m = Mutations().emplace_back();
  m.kind = Mutation::Kind::kDelete;
  FillRecord(j, &m.record);
}

uint64_t Engine::Impl::NextLease() {
  for (;;) {
    uint64_t z = opt_.lease_seed + (++leases_) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    if (z != 0) return z;
  }
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
                                  std::optional<uint32_t> pri, std::optional<TimeMs> delay,
                                  const PushAnswer* answer) {
  return impl_->Release(now, h, id, pri, delay, answer);
}
Result<JobChange> Engine::Bury(TimeMs now, const Holder& h, JobId id, std::optional<uint32_t> pri,
                               const PushAnswer* answer) {
  return impl_->Bury(now, h, id, pri, answer);
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
std::vector<JobView> Engine::ListJobs(TimeMs now, const ListJobsRequest& r, bool* more) {
  return impl_->ListJobs(now, r, more);
}
std::vector<JobView> Engine::FindKey(TimeMs now, std::string_view key) {
  return impl_->FindKey(now, key);
}

std::optional<std::string_view> Engine::TopicOf(JobId id) const { return impl_->TopicOf(id); }

const EngineMetrics& Engine::metrics() const { return impl_->metrics(); }

Result<TopicStats> Engine::StatsTopic(TimeMs now, std::string_view t) {
  return impl_->StatsTopic(now, t);
}
EngineStats Engine::Stats(TimeMs now) { return impl_->Stats(now); }
std::vector<std::string> Engine::ListTopics(TimeMs now) { return impl_->ListTopics(now); }
std::vector<TopicStats> Engine::TopicsStats(TimeMs now) { return impl_->TopicsStats(now); }
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
void Engine::RecordMutationsInto(std::vector<Mutation>* sink) { impl_->RecordMutationsInto(sink); }
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

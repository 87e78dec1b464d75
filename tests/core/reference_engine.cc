// The reference engine: see reference_engine.h. Every rule below cites the
// paragraph of docs/engine.md it implements.
#include "core/reference_engine.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <utility>

namespace delayq::testing {
namespace {

bool ReadyLess(const RefJob& a, const RefJob& b) {
  return a.priority != b.priority ? a.priority < b.priority : a.id < b.id;
}

bool DelayedLess(const RefJob& a, const RefJob& b) {
  return a.due_ms != b.due_ms ? a.due_ms < b.due_ms : a.id < b.id;
}

}  // namespace

bool RefIsValidTopicName(std::string_view name) {
  if (name.empty() || name.size() > kMaxTopicNameLength) return false;
  if (name[0] == '-') return false;
  for (char c : name) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              std::string_view("-+/;.$_()").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

// "back-off (a list of delays >= 0, or exponential with 0 < base <= cap)".
bool RefIsValidBackoff(const Backoff& b) {
  switch (b.kind) {
    case Backoff::Kind::kNone:
      return true;
    case Backoff::Kind::kList:
      // Not in the document: the engine refuses lists of over 64 delays.
      if (b.delays_ms.empty() || b.delays_ms.size() > 64) return false;
      for (TimeMs d : b.delays_ms)
        if (d < 0 || d > kMaxDelayMs) return false;
      return true;
    case Backoff::Kind::kExponential:
      return b.base_ms > 0 && b.base_ms <= b.cap_ms && b.cap_ms <= kMaxDelayMs;
  }
  return false;
}

// "For a list d1 ... dk, the n-th return waits d(min(n, k)); for
// exponential, min(base * 2^(n-1), cap)."
TimeMs RefBackoffDelay(const Backoff& b, uint32_t n) {
  if (n < 1) n = 1;
  switch (b.kind) {
    case Backoff::Kind::kNone:
      return 0;
    case Backoff::Kind::kList:
      return b.delays_ms[std::min<size_t>(n, b.delays_ms.size()) - 1];
    case Backoff::Kind::kExponential: {
      TimeMs d = b.base_ms;
      for (uint32_t i = 1; i < n; ++i) {
        if (d >= b.cap_ms) return b.cap_ms;
        d *= 2;  // base <= cap <= 2^47: no overflow
      }
      return std::min(d, b.cap_ms);
    }
  }
  return 0;
}

// "Every reservation gets a lease: a 64-bit number, never 0, the n-th
// reservation of the engine's life taking SplitMix64's finalizer of
// lease_seed + n * 0x9e3779b97f4a7c15". The finalizer as SplitMix64
// (Steele, Lea, Flood 2014; Vigna's splitmix64.c) writes it.
uint64_t RefLeaseValue(uint64_t seed, uint64_t n) {
  uint64_t z = seed + n * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t RefNthLease(uint64_t seed, uint64_t n) {
  uint64_t taken = 0;  // values used up, 0s included
  uint64_t lease = 0;
  for (uint64_t i = 0; i < n; ++i) {
    do {
      lease = RefLeaseValue(seed, ++taken);
    } while (lease == 0);
  }
  return lease;
}

std::string RefLeaseText(uint64_t lease) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(lease));
  return buf;
}

ReferenceEngine::ReferenceEngine(EngineOptions options, ReferenceQuirks quirks)
    : options_(std::move(options)), quirks_(quirks), now_(options_.start_ms) {
  RefTopic t;
  t.name = options_.default_topic;
  topics_.push_back(std::move(t));
}

// ---------------------------------------------------------------------------
// Lookups
// ---------------------------------------------------------------------------

RefJob* ReferenceEngine::FindJob(JobId id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

RefSession* ReferenceEngine::FindSession(SessionId id) {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : &it->second;
}

RefTopic* ReferenceEngine::FindTopic(std::string_view name) {
  for (RefTopic& t : topics_)
    if (t.name == name) return &t;
  return nullptr;
}

const RefTopic* ReferenceEngine::FindTopic(std::string_view name) const {
  for (const RefTopic& t : topics_)
    if (t.name == name) return &t;
  return nullptr;
}

RefTopic& ReferenceEngine::GetOrCreateTopic(std::string_view name) {
  if (RefTopic* t = FindTopic(name)) return *t;
  RefTopic t;
  t.name = std::string(name);
  topics_.push_back(std::move(t));
  return topics_.back();
}

RefJob* ReferenceEngine::FindByKey(std::string_view topic, std::string_view key) {
  if (key.empty()) return nullptr;
  for (auto& [id, j] : jobs_)
    if (j.topic == topic && j.key == key) return &j;
  return nullptr;
}

// "Topics exist while something refers to them: the default topic always;
// any other while a session uses or watches it or it holds a job. A paused
// topic that loses its last reference is gone, pause and all."
//
// Called whenever a reference may have gone: at the end of every call and of
// every Advance.
void ReferenceEngine::CollectTopics() {
  std::vector<bool> referenced(topics_.size(), false);
  size_t left = topics_.size();
  auto mark = [&](std::string_view name) {
    for (size_t i = 0; i < topics_.size(); ++i) {
      if (!referenced[i] && topics_[i].name == name) {
        referenced[i] = true;
        --left;
      }
    }
  };
  mark(options_.default_topic);
  for (const auto& [sid, s] : sessions_) {
    mark(s.used);
    for (const std::string& t : s.watched) mark(t);
    // Not in the document: a pending reserve also keeps the topics it waits
    // on (see RefSession::wait_topics).
    if (s.waiting)
      for (const std::string& t : s.wait_topics) mark(t);
  }
  for (auto it = jobs_.begin(); it != jobs_.end() && left > 0; ++it) mark(it->second.topic);
  std::vector<RefTopic> kept;
  for (size_t i = 0; i < topics_.size(); ++i)
    if (referenced[i]) kept.push_back(std::move(topics_[i]));
  topics_ = std::move(kept);
}

bool ReferenceEngine::TopicPaused(std::string_view name) const {
  const RefTopic* t = FindTopic(name);
  return t != nullptr && t->paused;
}

bool ReferenceEngine::Watches(const RefSession& s, std::string_view topic) const {
  return std::find(s.watched.begin(), s.watched.end(), topic) != s.watched.end();
}

bool ReferenceEngine::WaitsOn(const RefSession& s, std::string_view topic) const {
  return s.waiting &&
         std::find(s.wait_topics.begin(), s.wait_topics.end(), topic) != s.wait_topics.end();
}

// "Reserve considers the heads of all watched topics that are not paused and
// takes the lowest (priority, id)."
RefJob* ReferenceEngine::NextFrom(const std::vector<std::string>& topics) {
  RefJob* best = nullptr;
  for (auto& [id, j] : jobs_) {
    if (j.state != JobState::kReady) continue;
    if (std::find(topics.begin(), topics.end(), j.topic) == topics.end()) continue;
    if (TopicPaused(j.topic)) continue;
    if (best == nullptr || ReadyLess(j, *best)) best = &j;
  }
  return best;
}

bool ReferenceEngine::DeadlineSoon(const RefSession& s, TimeMs t) const {
  for (const auto& [id, j] : jobs_) {
    if (j.state == JobState::kReserved && !j.detached && j.reserver == s.id &&
        j.due_ms - t <= kDeadlineSafetyMarginMs)
      return true;
  }
  return false;
}

// "A waiting session wakes at now + timeout with TIMED_OUT, or when a job it
// holds gets within 1000 ms of its deadline with DEADLINE_SOON."
TimeMs ReferenceEngine::WakeTime(const RefSession& s) const {
  TimeMs wake = s.wait_until;
  for (const auto& [id, j] : jobs_) {
    if (j.state == JobState::kReserved && !j.detached && j.reserver == s.id)
      wake = std::min(wake, j.due_ms - kDeadlineSafetyMarginMs);
  }
  return wake;
}

// ---------------------------------------------------------------------------
// State changes
// ---------------------------------------------------------------------------

// "Each becomes reserved by the session (by none when detach),
// reserves += 1, its TTR deadline is now + ttr."
void ReferenceEngine::ReserveFor(RefJob& j, SessionId session, bool detach) {
  j.state = JobState::kReserved;
  j.detached = detach;
  j.reserver = detach ? 0 : session;
  j.reserves += 1;
  j.due_ms = now_ + j.ttr_ms;
  j.reserve_seq = ++seq_;
  // "Every reservation gets a lease", detached or not.
  j.lease = NextLease();
  j.lease_text = RefLeaseText(j.lease);
  issued_leases_.emplace_back(j.id, j.lease);
  RecordUpdate(j);
}

// "never 0": a value of 0 is skipped, the next n taken.
uint64_t ReferenceEngine::NextLease() {
  for (;;) {
    uint64_t lease = RefLeaseValue(options_.lease_seed, ++reservations_);
    if (lease != 0) return lease;
  }
}

void ReferenceEngine::MakeReady(RefJob& j) {
  j.state = JobState::kReady;
  j.due_ms = 0;
  j.reserver = 0;
  j.detached = false;
}

void ReferenceEngine::MakeDelayed(RefJob& j, TimeMs due) {
  j.reserver = 0;
  j.detached = false;
  if (due > now_) {
    j.state = JobState::kDelayed;
    j.due_ms = due;
  } else {
    MakeReady(j);
  }
}

void ReferenceEngine::MakeBuried(RefJob& j) {
  j.state = JobState::kBuried;
  j.due_ms = 0;
  j.reserver = 0;
  j.detached = false;
  j.buries += 1;
  j.bury_seq = ++seq_;
}

// "the job is buried (buries += 1) if max_tries > 0 and reserves >=
// max_tries; otherwise it is delayed by backoff.DelayFor(reserves) when the
// job has a back-off, otherwise ready."
void ReferenceEngine::ComeBack(RefJob& j) {
  if (j.max_tries > 0 && j.reserves >= j.max_tries) {
    MakeBuried(j);
  } else if (j.backoff.kind != Backoff::Kind::kNone) {
    TimeMs d = RefBackoffDelay(j.backoff, j.reserves);
    j.delay_ms = d;
    MakeDelayed(j, now_ + d);
  } else {
    MakeReady(j);
  }
}

void ReferenceEngine::RemoveJob(JobId id) { jobs_.erase(id); }

// "while some unpaused topic has both a waiting session and a ready job, the
// lowest (priority, id) job among those topics goes to the topic's
// longest-waiting session, which then takes up to count - 1 more jobs by the
// reserve order. Served sessions stop waiting everywhere."
void ReferenceEngine::ServeWaiters() {
  for (;;) {
    RefJob* best = nullptr;
    RefSession* who = nullptr;
    for (auto& [id, j] : jobs_) {
      if (j.state != JobState::kReady || TopicPaused(j.topic)) continue;
      if (best != nullptr && !ReadyLess(j, *best)) continue;
      RefSession* longest = nullptr;
      for (auto& [sid, s] : sessions_) {
        if (!WaitsOn(s, j.topic)) continue;
        if (longest == nullptr || s.wait_seq < longest->wait_seq) longest = &s;
      }
      if (longest == nullptr) continue;
      best = &j;
      who = longest;
    }
    if (best == nullptr) {
      CollectTopics();
      return;
    }
    std::vector<std::string> topics = who->wait_topics;
    EndWait(*who);
    ReserveFor(*best, who->id, who->detach);
    events_.push_back({Event::Kind::kReserved, who->id, best->id});
    for (uint32_t n = 1; n < who->count; ++n) {
      RefJob* more = NextFrom(topics);
      if (more == nullptr) break;
      ReserveFor(*more, who->id, who->detach);
      events_.push_back({Event::Kind::kReserved, who->id, more->id});
    }
  }
}

// "At each instant: jobs whose TTR expires and delayed jobs that fall due are
// applied, then waiters are served, then pauses that end are applied and
// waiters served again, then waiting sessions whose wake time has come get
// DEADLINE_SOON or TIMED_OUT."
void ReferenceEngine::ProcessInstant(TimeMs t) {
  // A wake time that came while a call ran (a touch put a held job within
  // the margin) is seen by the next call, at the instant it is made: never
  // go back.
  t = std::max(t, now_);
  now_ = t;
  // 1. TTR expiries (by id) and due times.
  for (auto& [id, j] : jobs_) {
    if (j.state == JobState::kReserved && j.due_ms <= t) {
      // "TTR expiry also counts timeouts += 1 (and the server-wide
      // job-timeouts)."
      j.timeouts += 1;
      job_timeouts_ += 1;
      ComeBack(j);
      RecordUpdate(j);
    }
  }
  for (auto& [id, j] : jobs_) {
    if (j.state == JobState::kDelayed && j.due_ms <= t) MakeReady(j);  // writes nothing
  }
  // 2.
  if (!quirks_.pauses_end_before_first_serve) ServeWaiters();
  // 3. Not in the document: a pause that ends reports `pause` 0 again
  // (beanstalkd does the same).
  for (RefTopic& topic : topics_) {
    if (topic.paused && topic.pause_until <= t) {
      topic.paused = false;
      topic.pause_until = 0;
      topic.pause_ms = 0;
    }
  }
  ServeWaiters();
  // 4. "DEADLINE_SOON (checked first at the same instant)". Sessions by
  // wake time, then id (not in the document).
  std::vector<std::pair<TimeMs, SessionId>> woken;
  for (auto& [sid, s] : sessions_) {
    if (s.waiting && WakeTime(s) <= t) woken.emplace_back(WakeTime(s), sid);
  }
  std::sort(woken.begin(), woken.end());
  for (const auto& [wake, sid] : woken) {
    RefSession& s = sessions_.at(sid);
    EndWait(s);
    if (DeadlineSoon(s, t)) {
      events_.push_back({Event::Kind::kDeadlineSoon, s.id, 0});
    } else {
      events_.push_back({Event::Kind::kTimedOut, s.id, 0});
    }
  }
}

TimeMs ReferenceEngine::NextWakeup() const {
  TimeMs next = kNever;
  for (const auto& [id, j] : jobs_) {
    if (j.state == JobState::kDelayed || j.state == JobState::kReserved)
      next = std::min(next, j.due_ms);
  }
  for (const RefTopic& t : topics_)
    if (t.paused) next = std::min(next, t.pause_until);
  for (const auto& [sid, s] : sessions_) {
    // May lie in the past: see ProcessInstant.
    if (s.waiting) next = std::min(next, WakeTime(s));
  }
  return next;
}

void ReferenceEngine::Advance(TimeMs now) {
  // "a clock that goes backwards is held at the latest value seen"
  now = std::max(now, now_);
  for (;;) {
    TimeMs t = NextWakeup();
    if (t > now) break;
    ProcessInstant(t);
  }
  now_ = now;
  CollectTopics();
}

// ---------------------------------------------------------------------------
// Effects
// ---------------------------------------------------------------------------

JobRecord ReferenceEngine::MakeRecord(const RefJob& j) const {
  JobRecord r;
  r.id = j.id;
  r.topic = j.topic;
  r.key = j.key;
  // "Records never say reserved (a reserved job is persisted as ready)".
  r.state = j.state == JobState::kReserved ? JobState::kReady : j.state;
  r.priority = j.priority;
  r.due_ms = j.state == JobState::kDelayed ? j.due_ms : 0;
  r.created_ms = j.created_ms;
  r.delay_ms = j.delay_ms;
  r.ttr_ms = j.ttr_ms;
  r.reserves = j.reserves;
  r.timeouts = j.timeouts;
  r.releases = j.releases;
  r.buries = j.buries;
  r.kicks = j.kicks;
  r.max_tries = j.max_tries;
  r.backoff = j.backoff;
  return r;
}

void ReferenceEngine::RecordPut(RefJob& j) {
  Mutation m;
  m.kind = Mutation::Kind::kPut;
  m.record = MakeRecord(j);
  m.body = j.body;
  j.persisted_due = m.record.due_ms;
  if (options_.record_mutations) mutations_.push_back(std::move(m));
}

void ReferenceEngine::RecordUpdate(RefJob& j) {
  Mutation m;
  m.kind = Mutation::Kind::kUpdate;
  m.record = MakeRecord(j);
  j.persisted_due = m.record.due_ms;
  if (options_.record_mutations) mutations_.push_back(std::move(m));
}

// "kDelete only the identity (id, topic, key) and the due time the record
// was indexed under."
void ReferenceEngine::RecordDelete(const RefJob& j) {
  Mutation m;
  m.kind = Mutation::Kind::kDelete;
  m.record.id = j.id;
  m.record.topic = j.topic;
  m.record.key = j.key;
  m.record.due_ms = j.persisted_due;
  if (quirks_.delete_records_current_due) m.record.due_ms = MakeRecord(j).due_ms;
  if (options_.record_mutations) mutations_.push_back(std::move(m));
}

void ReferenceEngine::TakeEvents(std::vector<Event>* out) {
  out->insert(out->end(), events_.begin(), events_.end());
  events_.clear();
}

void ReferenceEngine::TakeMutations(std::vector<Mutation>* out) {
  for (Mutation& m : mutations_) out->push_back(std::move(m));
  mutations_.clear();
}

void ReferenceEngine::TakeLeases(std::vector<std::pair<JobId, uint64_t>>* out) {
  out->insert(out->end(), issued_leases_.begin(), issued_leases_.end());
  issued_leases_.clear();
}

JobView ReferenceEngine::View(const RefJob& j) const {
  JobView v;
  v.id = j.id;
  v.topic = j.topic;
  v.key = j.key;
  v.body = j.body;
  v.state = j.state;
  v.priority = j.priority;
  // "the figures are StatsJob's" (types.h): due "delayed: due time;
  // reserved: TTR deadline; else 0". No lease: "peeks and stats never do".
  bool timed = j.state == JobState::kDelayed || j.state == JobState::kReserved;
  v.due_ms = timed ? j.due_ms : 0;
  v.created_ms = j.created_ms;
  v.delay_ms = j.delay_ms;
  v.ttr_ms = j.ttr_ms;
  v.reserves = j.reserves;
  v.timeouts = j.timeouts;
  v.releases = j.releases;
  v.buries = j.buries;
  v.kicks = j.kicks;
  v.max_tries = j.max_tries;
  return v;
}

// ---------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------

// "A new session uses and watches the default topic."
SessionId ReferenceEngine::OpenSession(TimeMs now) {
  Advance(now);
  RefSession s;
  s.id = next_session_++;
  s.used = options_.default_topic;
  s.watched.push_back(options_.default_topic);
  SessionId id = s.id;
  sessions_.emplace(id, std::move(s));
  return id;
}

// "Closing a session cancels its wait and makes its reserved jobs come back
// (above), in the order it reserved them." Mutations: "a session closing
// when that buries or delays the job".
void ReferenceEngine::CloseSession(TimeMs now, SessionId session) {
  Advance(now);
  RefSession* s = FindSession(session);
  if (s == nullptr) return;
  std::vector<RefJob*> held;
  for (auto& [id, j] : jobs_) {
    if (j.state == JobState::kReserved && !j.detached && j.reserver == session) held.push_back(&j);
  }
  std::sort(held.begin(), held.end(), [this](const RefJob* a, const RefJob* b) {
    return quirks_.close_returns_in_id_order ? a->id < b->id : a->reserve_seq < b->reserve_seq;
  });
  for (RefJob* j : held) {
    ComeBack(*j);
    if (j->state != JobState::kReady) RecordUpdate(*j);
  }
  sessions_.erase(session);
  CollectTopics();
  ServeWaiters();
}

Status ReferenceEngine::Use(SessionId session, std::string_view topic) {
  RefSession* s = FindSession(session);
  if (s == nullptr) return Status::NotFound("no session");
  if (!RefIsValidTopicName(topic)) return Status::InvalidArgument("bad topic name");
  GetOrCreateTopic(topic);
  s->used = std::string(topic);
  CollectTopics();
  return Status::Ok();
}

Result<size_t> ReferenceEngine::Watch(SessionId session, std::string_view topic) {
  RefSession* s = FindSession(session);
  if (s == nullptr) return Status::NotFound("no session");
  if (!RefIsValidTopicName(topic)) return Status::InvalidArgument("bad topic name");
  GetOrCreateTopic(topic);
  if (!Watches(*s, topic)) s->watched.emplace_back(topic);
  return s->watched.size();
}

Result<size_t> ReferenceEngine::Ignore(SessionId session, std::string_view topic) {
  RefSession* s = FindSession(session);
  if (s == nullptr) return Status::NotFound("no session");
  if (!RefIsValidTopicName(topic)) return Status::InvalidArgument("bad topic name");
  auto it = std::find(s->watched.begin(), s->watched.end(), topic);
  // As beanstalkd: ignoring a topic not watched just reports the count.
  if (it != s->watched.end()) {
    if (s->watched.size() == 1) return Status::NotIgnored();
    s->watched.erase(it);
  }
  size_t n = s->watched.size();
  CollectTopics();
  return n;
}

std::string_view ReferenceEngine::UsedTopic(SessionId session) const {
  return sessions_.at(session).used;
}

std::vector<std::string_view> ReferenceEngine::WatchedTopics(SessionId session) const {
  std::vector<std::string_view> out;
  for (const std::string& t : sessions_.at(session).watched) out.emplace_back(t);
  return out;
}

bool ReferenceEngine::IsWaiting(SessionId session) const {
  auto it = sessions_.find(session);
  return it != sessions_.end() && it->second.waiting;
}

// ---------------------------------------------------------------------------
// Producing
// ---------------------------------------------------------------------------

Result<PutResult> ReferenceEngine::Put(TimeMs now, SessionId session, const PutRequest& req) {
  Advance(now);
  // Not in the document: a session other than 0 (the operator, who puts
  // into the default topic unless one is named) must exist.
  RefSession* s = FindSession(session);
  if (session != 0 && s == nullptr) return Status::NotFound("no session");
  std::string topic(req.topic);
  if (topic.empty()) topic = s != nullptr ? s->used : options_.default_topic;
  // "Validates the topic name (the session's used topic when empty), TTR
  // (>= 1 ms), delay (0 ... kMaxDelayMs), key (<= 200 bytes), body size
  // (max_job_size) and back-off". Not in the document: which error wins
  // when several are wrong (the engine checks the size first), TTR at most
  // kMaxDelayMs, run_at not negative.
  if (req.body.size() > options_.max_job_size) return Status::JobTooBig();
  if (req.ttr_ms < 1 || req.ttr_ms > kMaxDelayMs) return Status::InvalidArgument("ttr");
  if (req.key.size() > kMaxKeyLength) return Status::InvalidArgument("key");
  if (req.run_at.has_value()) {
    if (*req.run_at < 0 || *req.run_at - now_ > kMaxDelayMs)
      return Status::InvalidArgument("run_at");
  } else if (req.delay_ms < 0 || req.delay_ms > kMaxDelayMs) {
    return Status::InvalidArgument("delay");
  }
  if (!RefIsValidBackoff(req.backoff)) return Status::InvalidArgument("backoff");
  if (!RefIsValidTopicName(topic)) return Status::InvalidArgument("bad topic name");
  // "With a key that names a live job in the same topic, nothing changes and
  // that job is returned (created = false)."
  // Put "returns the job's state after the call ... and, when delayed, its
  // due time"; also for the job a key names (types.h: "delayed: its due
  // time; else 0").
  if (RefJob* existing = FindByKey(topic, req.key)) {
    TimeMs due = existing->state == JobState::kDelayed ? existing->due_ms : 0;
    return PutResult{existing->id, false, existing->state, due};
  }
  RefTopic& t = GetOrCreateTopic(topic);
  t.total_jobs += 1;
  total_jobs_ += 1;
  RefJob j;
  j.id = next_id_++;
  j.topic = topic;
  j.key = std::string(req.key);
  j.body = std::string(req.body);
  j.priority = req.priority;
  j.created_ms = now_;
  j.ttr_ms = req.ttr_ms;
  j.max_tries = req.max_tries;
  j.backoff = req.backoff;
  // "due = run_at when given, else now + delay_ms; the job is delayed when
  // due > now, otherwise ready."
  TimeMs due = req.run_at.has_value() ? *req.run_at : now_ + req.delay_ms;
  j.delay_ms = req.run_at.has_value() ? std::max<TimeMs>(0, *req.run_at - now_) : req.delay_ms;
  MakeDelayed(j, due);
  JobId id = j.id;
  RefJob& stored = jobs_.emplace(id, std::move(j)).first->second;
  RecordPut(stored);
  ServeWaiters();
  // "returns the job's state after the call (reserved, if a waiting session
  // took it at once) and, when delayed, its due time." (Release and
  // kick-job report the state before waiters are served.)
  TimeMs due_after = stored.state == JobState::kDelayed ? stored.due_ms : 0;
  return PutResult{id, true, stored.state, due_after};
}

// ---------------------------------------------------------------------------
// Consuming
// ---------------------------------------------------------------------------

Result<std::vector<JobId>> ReferenceEngine::Reserve(TimeMs now, const ReserveRequest& req) {
  Advance(now);
  RefSession* s = FindSession(req.session);
  if (s == nullptr) return Status::NotFound("no session");
  // Not in the document: a count of 0 counts as 1.
  uint32_t count = std::max<uint32_t>(1, req.count);
  // "A session has at most one pending reserve; a second one replaces it."
  EndWait(*s);
  std::vector<JobId> got;
  while (got.size() < count) {
    RefJob* j = NextFrom(s->watched);
    if (j == nullptr) break;
    ReserveFor(*j, s->id, req.detach);
    got.push_back(j->id);
  }
  CollectTopics();  // the replaced wait may have held the last reference
  if (!got.empty()) return got;
  // "When no job is ready: DEADLINE_SOON if the session holds a job whose
  // deadline is at most 1000 ms away; TIMED_OUT if the timeout is 0;
  // otherwise the session waits." Not in the document: "no job is ready"
  // counts the ready jobs of paused topics too, as beanstalkd does.
  bool any_ready = false;
  for (const auto& [id, j] : jobs_) {
    if (j.state == JobState::kReady && Watches(*s, j.topic)) any_ready = true;
  }
  if (!any_ready && DeadlineSoon(*s, now_)) return Status::DeadlineSoon();
  if (req.timeout_ms == 0) return Status::TimedOut();
  s->waiting = true;
  s->wait_topics = s->watched;
  s->wait_seq = ++seq_;
  s->wait_until = req.timeout_ms < 0 ? kNever : now_ + std::min(req.timeout_ms, kMaxDelayMs);
  s->count = count;
  s->detach = req.detach;
  return got;
}

void ReferenceEngine::CancelReserve(SessionId session) {
  if (RefSession* s = FindSession(session)) EndWait(*s);
  CollectTopics();
}

Result<JobView> ReferenceEngine::ReserveJob(TimeMs now, SessionId session, JobId id) {
  Advance(now);
  RefSession* s = FindSession(session);
  if (s == nullptr) return Status::NotFound("no session");
  // Not in the document: reserve-job ends the session's pending reserve
  // (without an event), found or not.
  EndWait(*s);
  RefJob* j = FindJob(id);
  if (j == nullptr || j->state == JobState::kReserved) {
    CollectTopics();
    return Status::NotFound("no job");
  }
  ReserveFor(*j, session, false);
  CollectTopics();
  return View(*j);
}

// "Finish, release, bury and touch act on a job for a holder: a session
// and, optionally, a lease. In order:" 1 to 4 below. Not in the document:
// which of "no job" and "no session" wins (the session is looked at first;
// both are NOT_FOUND, and "a closed or unknown session (other than 0) can
// act on nothing"). The words are the engine's shared table (RefuseJob).
Result<RefJob*> ReferenceEngine::Holding(const Holder& h, JobId id, bool any_state) {
  if (h.session != 0 && FindSession(h.session) == nullptr)
    return Status::NotFound("no such session");
  // "1. no job with that id: NOT_FOUND".
  RefJob* j = FindJob(id);
  if (j == nullptr) return RefuseJob(id, Refusal::kNoJob, JobState::kReady);
  bool reserved = j->state == JobState::kReserved;
  // "2. a lease is given: the job must be reserved with detach under that
  // very lease, else LEASE_LOST, whatever its state". Session 0 too.
  if (h.lease != 0) {
    if (reserved && j->detached && j->lease == h.lease) return j;
    return RefuseJob(id, Refusal::kLeaseLost, j->state);
  }
  // "3. no lease, and the job is not reserved: CONFLICT" -- but "Delete
  // takes a ready, delayed or buried job from anyone (with no lease)".
  if (!reserved) {
    if (any_state) return j;
    return RefuseJob(id, Refusal::kNotReserved, j->state);
  }
  // "4. no lease: session 0 (an operator) may act on any reserved job;
  // another session only on the jobs it reserved itself, else CONFLICT
  // ("job 12 is reserved by another connection", or "... under a lease")".
  if (h.session == 0) return j;
  if (!j->detached && j->reserver == h.session) return j;
  return RefuseJob(id, j->detached ? Refusal::kHeldByLease : Refusal::kHeldBySession, j->state);
}

// "Each operation answers the job's id, the state it left the job in, its
// due time (delayed) or TTR deadline (reserved), and its priority".
JobChange ReferenceEngine::Change(const RefJob& j) {
  bool timed = j.state == JobState::kDelayed || j.state == JobState::kReserved;
  return JobChange{j.id, j.state, timed ? j.due_ms : 0, j.priority};
}

// "Delete takes a ready, delayed or buried job from anyone (with no lease),
// and a reserved job under the rules above; it counts the topic's
// cmd-delete, and answers the state it found."
Result<JobChange> ReferenceEngine::Delete(TimeMs now, const Holder& holder, JobId id) {
  return Remove(now, holder, id, /*any_state=*/true);
}

Result<JobChange> ReferenceEngine::Remove(TimeMs now, const Holder& holder, JobId id,
                                          bool any_state) {
  Advance(now);
  auto held = Holding(holder, id, any_state);
  if (!held.ok()) return held.status();
  RefJob& j = **held;
  JobChange found = Change(j);
  GetOrCreateTopic(j.topic).cmd_delete += 1;
  RecordDelete(j);
  RemoveJob(id);
  CollectTopics();
  return found;
}

// "Delete by key looks the key up in the given topic (NOT_FOUND naming the
// key when it is not there)." The words are the engine's.
Result<JobChange> ReferenceEngine::DeleteByKey(TimeMs now, const Holder& holder,
                                               std::string_view topic, std::string_view key) {
  Advance(now);
  RefJob* j = FindByKey(topic, key);
  if (j == nullptr)
    return Status::NotFound("no job with key '" + std::string(key) + "' in topic '" +
                            std::string(topic) + "'");
  JobId id = j->id;
  return Delete(now, holder, id);
}

// "Finish deletes a reserved job." Not in the document: it counts the
// topic's cmd-delete, as delete does.
Result<JobChange> ReferenceEngine::Finish(TimeMs now, const Holder& holder, JobId id) {
  return Remove(now, holder, id, /*any_state=*/false);
}

// "A release with an explicit delay applies the max_tries rule, then that
// delay (0: ready). Release sets the priority and counts releases += 1."
// "Release and bury keep the job's priority when none is given."
Result<JobChange> ReferenceEngine::Release(TimeMs now, const Holder& holder, JobId id,
                                           std::optional<uint32_t> priority,
                                           std::optional<TimeMs> delay_ms) {
  Advance(now);
  // Not in the document: a bad delay is refused before the job is looked up.
  if (delay_ms.has_value() && (*delay_ms < 0 || *delay_ms > kMaxDelayMs))
    return Status::InvalidArgument("delay out of range");
  auto held = Holding(holder, id, /*any_state=*/false);
  if (!held.ok()) return held.status();
  RefJob& j = **held;
  if (priority.has_value()) j.priority = *priority;
  j.releases += 1;
  // "A release without an explicit delay on a job with no back-off is a
  // release with delay 0."
  if (!delay_ms.has_value() && j.backoff.kind == Backoff::Kind::kNone) delay_ms = 0;
  if (!delay_ms.has_value()) {
    ComeBack(j);
  } else if (j.max_tries > 0 && j.reserves >= j.max_tries) {
    MakeBuried(j);
  } else {
    j.delay_ms = *delay_ms;
    MakeDelayed(j, now_ + *delay_ms);
  }
  RecordUpdate(j);
  // Not in the document: "the state it left the job in" is the state
  // before waiters are served (ready, even if a waiting session then takes
  // it in the same call).
  JobChange c = Change(j);
  ServeWaiters();
  return c;
}

// "Bury sets the priority, buries += 1, and appends the job to the topic's
// buried list."
Result<JobChange> ReferenceEngine::Bury(TimeMs now, const Holder& holder, JobId id,
                                        std::optional<uint32_t> priority) {
  Advance(now);
  auto held = Holding(holder, id, /*any_state=*/false);
  if (!held.ok()) return held.status();
  RefJob& j = **held;
  if (priority.has_value()) j.priority = *priority;
  MakeBuried(j);
  RecordUpdate(j);
  return Change(j);
}

// "Touch restarts the TTR." Writes nothing.
Result<JobChange> ReferenceEngine::Touch(TimeMs now, const Holder& holder, JobId id) {
  Advance(now);
  auto held = Holding(holder, id, /*any_state=*/false);
  if (!held.ok()) return held.status();
  RefJob& j = **held;
  j.due_ms = now_ + j.ttr_ms;
  return Change(j);
}

// "Kick (topic, bound): if the topic has buried jobs, up to bound of them,
// oldest buried first; otherwise up to bound delayed jobs, soonest (due, id)
// first. Each becomes ready with kicks += 1."
Result<uint64_t> ReferenceEngine::Kick(TimeMs now, std::string_view topic, uint64_t bound) {
  Advance(now);
  if (FindTopic(topic) == nullptr) return Status::NotFound("no topic");
  std::vector<RefJob*> buried, delayed;
  for (auto& [id, j] : jobs_) {
    if (j.topic != topic) continue;
    if (j.state == JobState::kBuried) buried.push_back(&j);
    if (j.state == JobState::kDelayed) delayed.push_back(&j);
  }
  std::vector<RefJob*>& from = buried.empty() ? delayed : buried;
  if (buried.empty()) {
    std::sort(from.begin(), from.end(),
              [](const RefJob* a, const RefJob* b) { return DelayedLess(*a, *b); });
  } else {
    std::sort(from.begin(), from.end(),
              [](const RefJob* a, const RefJob* b) { return a->bury_seq < b->bury_seq; });
  }
  uint64_t n = 0;
  for (RefJob* j : from) {
    if (n >= bound) break;
    MakeReady(*j);
    j->kicks += 1;
    RecordUpdate(*j);
    ++n;
  }
  ServeWaiters();
  return n;
}

// "Kick-job does the same for one buried or delayed job (CONFLICT for a job
// in another state)." Not in the document: the state answered is the one
// before waiters are served (ready), as for release.
Result<JobChange> ReferenceEngine::KickJob(TimeMs now, JobId id) {
  Advance(now);
  RefJob* j = FindJob(id);
  if (j == nullptr) return RefuseJob(id, Refusal::kNoJob, JobState::kReady);
  if (j->state != JobState::kBuried && j->state != JobState::kDelayed)
    return RefuseJob(id, Refusal::kNotKickable, j->state);
  MakeReady(*j);
  j->kicks += 1;
  RecordUpdate(*j);
  JobChange c = Change(*j);
  ServeWaiters();
  return c;
}

// ---------------------------------------------------------------------------
// Looking
// ---------------------------------------------------------------------------

Result<JobView> ReferenceEngine::Peek(TimeMs now, JobId id) {
  Advance(now);
  RefJob* j = FindJob(id);
  if (j == nullptr) return Status::NotFound("no job");
  return View(*j);
}

// "Only the view answered to the reserve that took a job carries its lease
// (PeekReservation)". Not in the document (engine.h, types.h): NOT_FOUND
// for a job that is not reserved, and the view of a reservation made by a
// session carries no lease (that reservation is held by the session; its
// lease holds nothing).
Result<JobView> ReferenceEngine::PeekReservation(TimeMs now, JobId id) {
  Advance(now);
  RefJob* j = FindJob(id);
  if (j == nullptr || j->state != JobState::kReserved) return Status::NotFound();
  JobView v = View(*j);
  if (j->detached) v.lease = j->lease_text;
  return v;
}

Result<JobView> ReferenceEngine::PeekByKey(TimeMs now, std::string_view topic,
                                           std::string_view key) {
  Advance(now);
  RefJob* j = FindByKey(topic, key);
  if (j == nullptr) return Status::NotFound("no key");
  return View(*j);
}

// "Ready: the next the topic would serve (pause ignored)."
Result<JobView> ReferenceEngine::PeekReady(TimeMs now, std::string_view topic) {
  Advance(now);
  const RefJob* best = nullptr;
  for (const auto& [id, j] : jobs_) {
    if (j.topic == topic && j.state == JobState::kReady && (best == nullptr || ReadyLess(j, *best)))
      best = &j;
  }
  if (best == nullptr) return Status::NotFound("none");
  return View(*best);
}

// "Delayed: lowest (due, id)."
Result<JobView> ReferenceEngine::PeekDelayed(TimeMs now, std::string_view topic) {
  Advance(now);
  const RefJob* best = nullptr;
  for (const auto& [id, j] : jobs_) {
    if (j.topic == topic && j.state == JobState::kDelayed &&
        (best == nullptr || DelayedLess(j, *best)))
      best = &j;
  }
  if (best == nullptr) return Status::NotFound("none");
  return View(*best);
}

// "Buried: the oldest buried."
Result<JobView> ReferenceEngine::PeekBuried(TimeMs now, std::string_view topic) {
  Advance(now);
  const RefJob* best = nullptr;
  for (const auto& [id, j] : jobs_) {
    if (j.topic == topic && j.state == JobState::kBuried &&
        (best == nullptr || j.bury_seq < best->bury_seq))
      best = &j;
  }
  if (best == nullptr) return Status::NotFound("none");
  return View(*best);
}

Result<JobStats> ReferenceEngine::StatsJob(TimeMs now, JobId id) {
  Advance(now);
  RefJob* j = FindJob(id);
  if (j == nullptr) return Status::NotFound("no job");
  JobStats st;
  st.id = j->id;
  st.topic = j->topic;
  st.key = j->key;
  st.state = j->state;
  st.priority = j->priority;
  st.created_ms = j->created_ms;
  st.age_ms = now_ - j->created_ms;
  st.delay_ms = j->delay_ms;
  st.ttr_ms = j->ttr_ms;
  // "delayed: until due; reserved: until TTR expiry; else 0"
  bool timed = j->state == JobState::kDelayed || j->state == JobState::kReserved;
  st.time_left_ms = timed ? j->due_ms - now_ : 0;
  st.due_ms = timed ? j->due_ms : 0;
  st.reserves = j->reserves;
  st.timeouts = j->timeouts;
  st.releases = j->releases;
  st.buries = j->buries;
  st.kicks = j->kicks;
  st.max_tries = j->max_tries;
  st.body_size = static_cast<uint32_t>(j->body.size());
  return st;
}

Result<TopicStats> ReferenceEngine::StatsTopic(TimeMs now, std::string_view topic) {
  Advance(now);
  const RefTopic* t = FindTopic(topic);
  if (t == nullptr) return Status::NotFound("no topic");
  TopicStats st;
  st.name = t->name;
  for (const auto& [id, j] : jobs_) {
    if (j.topic != topic) continue;
    switch (j.state) {
      case JobState::kReady:
        st.ready += 1;
        if (j.priority < kUrgentPriority) st.urgent += 1;
        break;
      case JobState::kDelayed:
        st.delayed += 1;
        break;
      case JobState::kReserved:
        st.reserved += 1;
        break;
      case JobState::kBuried:
        st.buried += 1;
        break;
    }
  }
  st.total_jobs = t->total_jobs;
  for (const auto& [sid, s] : sessions_) {
    if (s.used == topic) st.using_count += 1;
    if (Watches(s, topic)) st.watching += 1;
    if (WaitsOn(s, topic)) st.waiting += 1;
  }
  st.cmd_delete = t->cmd_delete;
  st.cmd_pause = t->cmd_pause;
  st.pause_ms = t->pause_ms;
  st.pause_time_left_ms = t->paused ? t->pause_until - now_ : 0;
  return st;
}

EngineStats ReferenceEngine::Stats(TimeMs now) {
  Advance(now);
  EngineStats st;
  for (const auto& [id, j] : jobs_) {
    switch (j.state) {
      case JobState::kReady:
        st.ready += 1;
        if (j.priority < kUrgentPriority) st.urgent += 1;
        break;
      case JobState::kDelayed:
        st.delayed += 1;
        break;
      case JobState::kReserved:
        st.reserved += 1;
        break;
      case JobState::kBuried:
        st.buried += 1;
        break;
    }
  }
  st.total_jobs = total_jobs_;
  st.job_timeouts = job_timeouts_;
  st.topics = topics_.size();
  st.sessions = sessions_.size();
  for (const auto& [sid, s] : sessions_)
    if (s.waiting) st.waiting += 1;
  st.next_id = next_id_;
  return st;
}

// "Listed in creation order."
std::vector<std::string> ReferenceEngine::ListTopics(TimeMs now) {
  Advance(now);
  std::vector<std::string> out;
  for (const RefTopic& t : topics_) out.push_back(t.name);
  return out;
}

// ---------------------------------------------------------------------------
// Topics
// ---------------------------------------------------------------------------

// "Pause (topic, delay): the topic serves no reserve until now + delay; 0
// ends a pause. pause reports the delay asked, pause-time-left what
// remains."
Status ReferenceEngine::PauseTopic(TimeMs now, std::string_view topic, TimeMs delay_ms) {
  Advance(now);
  // Not in the document: the delay is checked first; a bad name is a topic
  // that does not exist.
  if (delay_ms < 0 || delay_ms > kMaxDelayMs) return Status::InvalidArgument("delay");
  RefTopic* t = FindTopic(topic);
  if (t == nullptr) return Status::NotFound("no topic");
  t->cmd_pause += 1;
  t->pause_ms = delay_ms;
  if (delay_ms == 0) {
    t->pause_ms = 0;
    t->paused = false;
    t->pause_until = 0;
    ServeWaiters();
  } else {
    t->paused = true;
    t->pause_until = now_ + delay_ms;
  }
  return Status::Ok();
}

// "Clear (topic, states): deletes the topic's jobs in those states (never
// reserved ones)."
Result<uint64_t> ReferenceEngine::ClearTopic(TimeMs now, std::string_view topic, uint8_t mask) {
  Advance(now);
  if (FindTopic(topic) == nullptr) return Status::NotFound("no topic");
  std::vector<JobId> doomed;
  for (const auto& [id, j] : jobs_) {
    if (j.topic != topic) continue;
    bool hit = (j.state == JobState::kReady && (mask & kClearReady)) ||
               (j.state == JobState::kDelayed && (mask & kClearDelayed)) ||
               (j.state == JobState::kBuried && (mask & kClearBuried));
    if (hit) doomed.push_back(id);
  }
  for (JobId id : doomed) {
    RecordDelete(jobs_.at(id));
    RemoveJob(id);
  }
  CollectTopics();
  return static_cast<uint64_t>(doomed.size());
}

}  // namespace delayq::testing

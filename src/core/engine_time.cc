// The engine's time (engine_impl.h): the timing wheel's firing, the events
// of each instant (docs/engine.md, "Instants"), the sessions that wait to
// reserve and how ready jobs are handed to them ("Serving waiters"), and
// the end of every public call.
#include <algorithm>
#include <deque>

#include "core/engine_impl.h"

namespace delayq {

void Engine::Impl::Advance(TimeMs now) {
  AdvanceTo(now);
  Finish();
}

TimeMs Engine::Impl::NextWakeup() const {
  TimeMs t = wheel_.NextEvent();
  if (!wakes_.empty()) t = std::min(t, wakes_.begin()->first);
  if (!pauses_.empty()) t = std::min(t, pauses_.begin()->first);
  return t;
}

bool Engine::Impl::DeadlineSoon(const Session* s) const {
  for (const Job* j : s->reserved)
    if (j->due - now_ <= Ticks(kDeadlineSafetyMarginMs)) return true;
  return false;
}

void Engine::Impl::UpdateWake(Session* s) {
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

void Engine::Impl::EndWait(Session* s) {
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

bool Engine::Impl::WaitIsLive(SessionId id, uint64_t seq) const {
  const Session* s = FindSession(id);
  return s != nullptr && s->waiting && s->wait_seq == seq;
}

void Engine::Impl::CompactWaiters(Topic* t) {
  std::deque<std::pair<SessionId, uint64_t>> live;
  for (const auto& w : t->waiters)
    if (WaitIsLive(w.first, w.second)) live.push_back(w);
  t->waiters.swap(live);
}

void Engine::Impl::ServeWaiters() {
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

void Engine::Impl::AdvanceTo(TimeMs target) {
  lease_texts_.clear();
  call_now_ = std::max(target, now_);
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

void Engine::Impl::ProcessInstant() {
  if (fired_.size() > 1)
    std::sort(fired_.begin(), fired_.end(), [](Job* a, Job* b) { return a->id < b->id; });
  for (Job* j : fired_) {
    Unplace(j, /*in_wheel=*/false);
    if (j->state == JobState::kDelayed) {
      ids_.Prefetch(j->id);
#if DELAYQ_COUNT_METRICS
      metrics_.lateness.Observe(TicksToUs(call_now_ - j->due));
#endif
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

void Engine::Impl::Finish() {
  ServeWaiters();
  if (!to_evict_.empty()) EvictBeyondHorizon();
  FlushDrops();
}

void Engine::Impl::FlushDrops() {
  for (Topic* t : drops_) {
    t->drop_pending = false;
    if (t->refs() == 0 && t != default_topic_) {
      if (t->paused(now_)) pauses_.erase({t->paused_until, t});
      topics_.erase(std::string_view(t->name));
    }
  }
  drops_.clear();
}

}  // namespace delayq

#include "delivery/scheduler.h"

#include <algorithm>
#include <chrono>

namespace delayq::delivery {

Scheduler::Scheduler(boost::asio::io_context& io, backend::Backend& backend,
                     const backend::Clock& clock, Options options)
    : io_(io),
      backend_(backend),
      clock_(clock),
      options_(std::move(options)),
      timer_(io),
      poll_timer_(io) {}

Scheduler::~Scheduler() = default;

void Scheduler::Start() {
  List();
  Poll();
}

void Scheduler::Reload() {
  if (!stopped_) List();
}

void Scheduler::Stop() {
  stopped_ = true;
  timer_.cancel();
  poll_timer_.cancel();
  timer_at_ = kNever;
}

std::optional<TimeMs> Scheduler::NextOf(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end() || it->second.next == kNever) return std::nullopt;
  return it->second.next;
}

void Scheduler::Poll() {
  if (stopped_) return;
  std::weak_ptr<bool> alive = alive_;
  poll_timer_.expires_after(std::chrono::milliseconds(options_.poll_ms));
  poll_timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    // The version first: the list only when it moved (or was never read).
    backend_.ObjectsVersion(ObjectKind::kSchedule, [this, alive](Result<uint64_t> v) {
      if (alive.expired()) return;
      if (!v.ok() || !loaded_ || *v != version_) List();
      Poll();
    });
  });
}

void Scheduler::List() {
  if (listing_) return;
  listing_ = true;
  std::weak_ptr<bool> alive = alive_;
  // The version before the list: a change made in between is listed again
  // at the next poll.
  backend_.ObjectsVersion(ObjectKind::kSchedule, [this, alive](Result<uint64_t> v) {
    if (alive.expired()) return;
    uint64_t version = v.ok() ? *v : 0;
    backend_.ListObjects(ObjectKind::kSchedule,
                         [this, alive, version](Result<std::vector<StoredObject>> r) {
                           if (alive.expired()) return;
                           listing_ = false;
                           if (!r.ok()) {
                             if (options_.on_error) options_.on_error("", r.status());
                             return;
                           }
                           version_ = version;
                           Apply(std::move(r).value());
                         });
  });
}

void Scheduler::Apply(std::vector<StoredObject> objects) {
  const TimeMs now = clock_.Now();
  std::map<std::string, Entry> next;
  for (StoredObject& o : objects) {
    auto old = entries_.find(o.name);
    if (old != entries_.end() && old->second.value == o.value) {
      next.emplace(o.name, std::move(old->second));  // unchanged: keeps its plan
      entries_.erase(old);
      continue;
    }
    auto s = ScheduleFromJson(o.value);
    Result<FireTimes> times = s.ok() ? FireTimes::Of(*s) : Result<FireTimes>(s.status());
    if (!times.ok()) {
      if (options_.on_error) options_.on_error(o.name, times.status());
      continue;
    }
    Entry e;
    s->name = o.name;
    e.schedule = std::make_shared<const Schedule>(std::move(s).value());
    e.revision = ScheduleRevision(o.value);
    e.value = std::move(o.value);
    e.times = std::make_shared<const FireTimes>(std::move(times).value());
    TimeMs after = now - 1;  // a fire time of this very millisecond is due
    if (!loaded_ && e.schedule->missed == MissedPolicy::kOne) {
      // Seen first at start: the last firing missed while no instance ran
      // is made once, late; the cursor refuses it if it was made.
      TimeMs since = std::max(now - options_.missed_lookback_ms, e.schedule->anchor_ms - 1);
      if (auto last = e.times->LastAtOrBefore(now - 1, since)) after = *last - 1;
    }
    auto [it, fresh] = next.emplace(o.name, std::move(e));
    (void)fresh;
    Plan(it->second, after, kNever);
  }
  // What is left of the old entries changed, was paused or is gone: the
  // firing each made ahead is taken back, before the new version makes
  // its own (the same backend, in this order).
  for (auto& [name, old] : entries_) Unfire(name, old);
  entries_ = std::move(next);
  loaded_ = true;
  stats_.schedules = entries_.size();
  ArmTimer();
}

void Scheduler::Plan(Entry& e, TimeMs after, TimeMs previous) {
  e.gen = next_gen_++;
  e.next = kNever;
  if (e.schedule->paused) return;
  std::optional<TimeMs> t = e.times->Next(after);
  if (!t) return;
  e.next = *t;
  // Made `lead_ms` ahead, or half the interval since the previous firing
  // when that is less: the previous firing's time has come before the
  // next is made, so one firing at a time is ahead of its time.
  TimeMs lead = options_.lead_ms;
  if (lead > 0) {
    if (previous == kNever) {
      auto last = e.times->LastAtOrBefore(*t - 1, *t - 2 * lead);
      previous = last ? *last : *t - 2 * lead;
    }
    lead = std::min(lead, (*t - previous) / 2);
  }
  heap_.push(Due{*t - std::max<TimeMs>(lead, 0), *t, e.gen, e.schedule->name});
}

void Scheduler::ArmTimer() {
  if (stopped_) return;
  // Stale heap entries (a changed, paused or deleted schedule) go first.
  while (!heap_.empty()) {
    const Due& d = heap_.top();
    auto it = entries_.find(d.name);
    if (it != entries_.end() && it->second.gen == d.gen) break;
    heap_.pop();
  }
  TimeMs at = heap_.empty() ? kNever : heap_.top().at;
  if (at == timer_at_) return;
  timer_at_ = at;
  if (at == kNever) {
    timer_.cancel();
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  timer_.expires_at(clock_.SteadyAt(at));
  timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    timer_at_ = kNever;
    OnTimer();
  });
}

void Scheduler::OnTimer() {
  const TimeMs now = clock_.Now();
  // Every firing to be made by now, soonest first (the timer may wake a
  // moment early by the epoch clock: none is made before its make time).
  while (!heap_.empty() && heap_.top().at <= now) {
    Due d = heap_.top();
    heap_.pop();
    auto it = entries_.find(d.name);
    if (it == entries_.end() || it->second.gen != d.gen) continue;
    Entry& e = it->second;
    Fire(d.name, d.fire, e.gen);
    e.ahead = d.fire;
    Plan(e, d.fire, d.fire);
  }
  ArmTimer();
}

void Scheduler::Unfire(const std::string& name, const Entry& old) {
  if (old.ahead == kNever || old.ahead <= clock_.Now()) return;
  std::weak_ptr<bool> alive = alive_;
  backend_.UnfireSchedule(name, old.schedule->topic, old.ahead, old.revision,
                          FiringKey(name, old.ahead), [this, alive, name](Result<bool> r) {
                            if (alive.expired()) return;
                            if (!r.ok()) {
                              if (options_.on_error) options_.on_error(name, r.status());
                              return;
                            }
                            if (*r) stats_.unfired++;
                          });
}

void Scheduler::Fire(const std::string& name, TimeMs at, uint64_t gen) {
  auto it = entries_.find(name);
  if (it == entries_.end()) return;
  // The request's views point into the schedule and the key, both kept
  // alive by the completion until the backend has taken the put.
  std::shared_ptr<const Schedule> schedule = it->second.schedule;
  auto key = std::make_shared<const std::string>(FiringKey(name, at));
  PutRequest r = FiringRequest(*schedule, at, *key);
  std::weak_ptr<bool> alive = alive_;
  backend_.FireSchedule(
      name, at, it->second.revision, r,
      [this, alive, schedule, key, name, at, gen](Result<PutResult> res) {
        if (alive.expired()) return;
        if (res.ok()) {
          stats_.made++;
          const int64_t late_us = std::max<int64_t>(0, clock_.NowUs() - at * 1000);
          stats_.lateness.Observe(late_us);
          if (options_.on_made) options_.on_made(at, late_us);
          return;
        }
        if (res.status().code() == Code::kConflict) {
          stats_.elsewhere++;
          return;
        }
        stats_.failed++;
        if (options_.on_error) options_.on_error(name, res.status());
        // Tried again a second later, unless the schedule changed since;
        // the cursor keeps it from being made twice.
        auto retry = std::make_shared<boost::asio::steady_timer>(io_, std::chrono::seconds(1));
        retry->async_wait([this, alive, retry, name, at, gen](const boost::system::error_code& ec) {
          if (ec || alive.expired() || stopped_) return;
          auto e = entries_.find(name);
          if (e != entries_.end() && !e->second.schedule->paused) Fire(name, at, gen);
        });
      });
}

}  // namespace delayq::delivery

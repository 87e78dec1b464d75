// Virtual time: jobs due from 0 ms to a year ahead become ready exactly at
// their due millisecond, never before, however time is advanced (step by
// step, straight to NextWakeup(), or in random jumps); and thirty days of
// virtual time with a few hundred thousand jobs run through quickly.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "delayq/engine.h"

namespace delayq {
namespace {

// The holder of a job reserved with detach: its lease (docs/engine.md,
// "Leases").
Holder Held(Engine& e, TimeMs now, SessionId s, JobId id) {
  uint64_t lease = 0;
  if (auto v = e.PeekReservation(now, id); v.ok()) ParseLease(v->lease, &lease);
  return Holder(s, lease);
}

constexpr TimeMs kDay = 86'400'000;
constexpr TimeMs kYear = 365 * kDay;
// Not aligned to any slot of the wheel, so that boundaries of the wheel's
// levels fall at odd delays.
constexpr TimeMs kStart = 1'700'000'000'123;

struct Scheduled {
  JobId id = 0;
  TimeMs due = 0;
};

// Delays from 0 to a year: the boundaries of the wheel's levels (relative to
// now and absolute), a log-scale spread, and duplicates.
std::vector<TimeMs> Delays(uint64_t seed, int spread) {
  std::vector<TimeMs> d = {0, 1, 2, 63, 64, 65, 127, 128, 4095, 4096, 4097};
  for (int bits : {12, 18, 24, 30, 36}) {
    TimeMs p = TimeMs{1} << bits;
    for (TimeMs x : {p - 1, p, p + 1}) d.push_back(x);
  }
  for (TimeMs x : {TimeMs{999}, TimeMs{1000}, kDay - 1, kDay, kDay + 1, kYear - 1, kYear})
    d.push_back(x);
  // The next absolute multiple of 64^k after the start, and its neighbours.
  for (int bits = 6; bits <= 36; bits += 6) {
    TimeMs p = TimeMs{1} << bits;
    TimeMs next = (kStart / p + 1) * p;
    for (TimeMs due : {next - 1, next, next + 1}) {
      if (due - kStart >= 0 && due - kStart <= kYear) d.push_back(due - kStart);
    }
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> log_scale(0, std::log(static_cast<double>(kYear)));
  for (int i = 0; i < spread; ++i)
    d.push_back(std::min<TimeMs>(kYear, static_cast<TimeMs>(std::exp(log_scale(rng)))));
  size_t n = d.size();
  for (int i = 0; i < spread / 10; ++i) d.push_back(d[rng() % n]);  // same due time
  return d;
}

// Puts one job per delay at kStart, in topic "default" of `session`.
std::vector<Scheduled> PutAll(Engine& e, SessionId session, const std::vector<TimeMs>& delays) {
  std::vector<Scheduled> jobs;
  uint32_t pri = 0;
  for (TimeMs d : delays) {
    PutRequest r;
    r.delay_ms = d;
    r.priority = pri++ % 7;  // ties are broken by id
    r.ttr_ms = 60'000;
    auto res = e.Put(kStart, session, r);
    EXPECT_TRUE(res.ok());
    if (!res.ok()) continue;
    EXPECT_EQ(res->state, d == 0 ? JobState::kReady : JobState::kDelayed) << "delay " << d;
    jobs.push_back({res->id, kStart + d});
  }
  return jobs;
}

std::map<TimeMs, std::vector<JobId>> ByDue(const std::vector<Scheduled>& jobs) {
  std::map<TimeMs, std::vector<JobId>> m;
  for (const Scheduled& j : jobs) m[j.due].push_back(j.id);
  return m;
}

size_t CountDueBy(const std::vector<Scheduled>& jobs, TimeMs t) {
  return static_cast<size_t>(
      std::count_if(jobs.begin(), jobs.end(), [t](const Scheduled& j) { return j.due <= t; }));
}

EngineOptions Options() {
  EngineOptions o;
  o.start_ms = kStart;
  o.record_mutations = false;
  return o;
}

// Steps to due - 1 and to due for every distinct due time: delayed at
// due - 1, ready at due; the counts of ready and delayed jobs agree.
TEST(VirtualTime, EachJobBecomesReadyExactlyAtItsDueMillisecond) {
  Engine e(Options());
  SessionId s = e.OpenSession(kStart);
  std::vector<Scheduled> jobs = PutAll(e, s, Delays(1, 3000));
  auto by_due = ByDue(jobs);
  for (const auto& [due, ids] : by_due) {
    if (due - 1 > e.now()) {
      e.Advance(due - 1);
      for (JobId id : ids) {
        auto v = e.Peek(e.now(), id);
        ASSERT_TRUE(v.ok());
        ASSERT_EQ(v->state, JobState::kDelayed)
            << "job " << id << " due at +" << due - kStart << " ms is not delayed at due - 1";
        auto st = e.StatsJob(e.now(), id);
        ASSERT_TRUE(st.ok());
        ASSERT_EQ(st->time_left_ms, 1);
        ASSERT_EQ(st->due_ms, due);
      }
      EngineStats st = e.Stats(e.now());
      ASSERT_EQ(st.ready, CountDueBy(jobs, due - 1)) << "at +" << due - 1 - kStart << " ms";
      ASSERT_EQ(st.delayed, jobs.size() - CountDueBy(jobs, due - 1));
    }
    e.Advance(due);
    for (JobId id : ids) {
      auto v = e.Peek(e.now(), id);
      ASSERT_TRUE(v.ok());
      ASSERT_EQ(v->state, JobState::kReady)
          << "job " << id << " due at +" << due - kStart << " ms is not ready at its due time";
    }
    EngineStats st = e.Stats(e.now());
    ASSERT_EQ(st.ready, CountDueBy(jobs, due)) << "at +" << due - kStart << " ms";
  }
  EXPECT_EQ(e.Stats(e.now()).delayed, 0u);
  EXPECT_EQ(e.NextWakeup(), kNever);
  EXPECT_EQ(e.CheckInvariants(), "");
}

// A worker waits for everything; time moves only by jumping to
// NextWakeup(). Every jump is forward and never past the next due time; the
// worker is handed, at each due time, exactly the jobs due then.
TEST(VirtualTime, JumpingToNextWakeupLandsOnEveryDueTime) {
  Engine e(Options());
  SessionId producer = e.OpenSession(kStart);
  SessionId worker = e.OpenSession(kStart);
  std::vector<Scheduled> jobs = PutAll(e, producer, Delays(2, 3000));
  std::map<JobId, TimeMs> due_of;
  for (const Scheduled& j : jobs) due_of[j.id] = j.due;
  auto by_due = ByDue(jobs);

  ReserveRequest wait;
  wait.session = worker;
  wait.timeout_ms = -1;
  wait.count = 1u << 20;
  size_t served = 0;
  // Jobs due at the start are ready at once.
  auto first = e.Reserve(e.now(), wait);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), by_due.count(kStart) ? by_due[kStart].size() : 0u);
  for (JobId id : *first) ASSERT_TRUE(e.Delete(e.now(), worker, id).ok());
  served += first->size();
  if (!first->empty()) ASSERT_TRUE(e.Reserve(e.now(), wait).ok());
  ASSERT_TRUE(e.IsWaiting(worker));

  auto next_due = by_due.upper_bound(kStart);
  size_t steps = 0;
  for (;;) {
    TimeMs t = e.NextWakeup();
    if (t == kNever) break;
    ASSERT_GT(t, e.now()) << "NextWakeup() does not move forward";
    ASSERT_NE(next_due, by_due.end()) << "a wake-up at +" << t - kStart << " ms with nothing due";
    ASSERT_LE(t, next_due->first) << "NextWakeup() jumps past a due time (+"
                                  << next_due->first - kStart << " ms)";
    e.Advance(t);
    ++steps;
    std::vector<Event> events;
    e.TakeEvents(&events);
    if (t < next_due->first) {
      ASSERT_TRUE(events.empty()) << "something served at +" << t - kStart << " ms, before "
                                  << next_due->first - kStart;
      continue;
    }
    // t is the next due time: the worker gets exactly its jobs, in
    // (priority, id) order.
    std::vector<JobId> got;
    for (const Event& ev : events) {
      ASSERT_EQ(ev.kind, Event::Kind::kReserved);
      ASSERT_EQ(ev.session, worker);
      ASSERT_EQ(due_of[ev.job], t) << "job " << ev.job << " served at +" << t - kStart
                                   << " ms, due at +" << due_of[ev.job] - kStart;
      got.push_back(ev.job);
    }
    std::vector<JobId> want = next_due->second;
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    ASSERT_EQ(got, want) << "at +" << t - kStart << " ms";
    for (JobId id : got) ASSERT_TRUE(e.Delete(t, worker, id).ok());
    served += got.size();
    auto again = e.Reserve(t, wait);
    ASSERT_TRUE(again.ok());
    ASSERT_TRUE(again->empty());
    ++next_due;
  }
  EXPECT_EQ(next_due, by_due.end());
  EXPECT_EQ(served, jobs.size());
  // Each due time costs at most one wake-up per level of the wheel.
  EXPECT_LE(steps, 12 * by_due.size())
      << steps << " wake-ups for " << by_due.size() << " due times";
  EXPECT_EQ(e.CheckInvariants(), "");
}

// Random jumps, from 1 ms to a month: a waiting worker is served, within one
// Advance, the jobs of the first due time in the jump; a reserve right after
// takes the rest that fell due; nothing due later is ever handed out.
TEST(VirtualTime, RandomJumpsNeverReleaseEarly) {
  for (uint64_t seed : {3, 4, 5}) {
    Engine e(Options());
    SessionId producer = e.OpenSession(kStart);
    SessionId worker = e.OpenSession(kStart);
    std::vector<Scheduled> jobs = PutAll(e, producer, Delays(seed, 2000));
    std::map<JobId, TimeMs> due_of;
    for (const Scheduled& j : jobs) due_of[j.id] = j.due;
    std::multimap<TimeMs, JobId> pending;
    for (const Scheduled& j : jobs) pending.emplace(j.due, j.id);

    ReserveRequest wait;
    wait.session = worker;
    wait.timeout_ms = -1;
    wait.count = 1u << 20;
    std::mt19937_64 rng(seed);
    const TimeMs jumps[] = {1, 10, 1000, 60'000, 3'600'000, kDay, 30 * kDay};
    size_t served = 0;
    // Takes every ready job now; all must be due by now, and they must be
    // exactly the pending ones due by now.
    auto take_ready = [&](TimeMs now) {
      auto r = e.Reserve(now, wait);
      ASSERT_TRUE(r.ok());
      std::multiset<JobId> got(r->begin(), r->end()), want;
      while (!pending.empty() && pending.begin()->first <= now) {
        want.insert(pending.begin()->second);
        pending.erase(pending.begin());
      }
      ASSERT_EQ(got, want) << "reserve at +" << now - kStart << " ms (seed " << seed << ")";
      for (JobId id : *r) ASSERT_TRUE(e.Delete(now, worker, id).ok());
      served += r->size();
      if (!r->empty()) {
        auto again = e.Reserve(now, wait);
        ASSERT_TRUE(again.ok() && again->empty());
      }
    };
    take_ready(e.now());
    while (!pending.empty()) {
      TimeMs prev = e.now();
      TimeMs t = prev + 1 + static_cast<TimeMs>(rng() % jumps[rng() % std::size(jumps)]);
      e.Advance(t);
      std::vector<Event> events;
      e.TakeEvents(&events);
      if (!events.empty()) {
        // The first due time in (prev, t].
        TimeMs first = pending.begin()->first;
        ASSERT_GT(first, prev);
        ASSERT_LE(first, t) << "served though nothing fell due (seed " << seed << ")";
        std::multiset<JobId> got, want;
        for (const Event& ev : events) {
          ASSERT_EQ(ev.kind, Event::Kind::kReserved);
          got.insert(ev.job);
          ASSERT_EQ(due_of[ev.job], first) << "job " << ev.job << " (seed " << seed << ")";
        }
        while (!pending.empty() && pending.begin()->first == first) {
          want.insert(pending.begin()->second);
          pending.erase(pending.begin());
        }
        ASSERT_EQ(got, want) << "at +" << first - kStart << " ms (seed " << seed << ")";
        for (JobId id : got) ASSERT_TRUE(e.Delete(t, worker, id).ok());
        served += got.size();
        take_ready(t);
      } else {
        ASSERT_TRUE(pending.empty() || pending.begin()->first > t)
            << "a job due at +" << pending.begin()->first - kStart
            << " ms was not handed to the waiting worker by +" << t - kStart << " (seed " << seed
            << ")";
      }
      EngineStats st = e.Stats(t);
      ASSERT_EQ(st.delayed, pending.size());
      ASSERT_EQ(st.ready, 0u);
    }
    EXPECT_EQ(served, jobs.size());
    EXPECT_EQ(e.CheckInvariants(), "");
  }
}

// Thirty days of virtual time, 300,000 jobs spread over them, four workers
// that delete most jobs, release some (back-off) and let some time out.
// No timing assertion: it has to complete, and the books have to balance.
TEST(VirtualTime, ThirtyDaysWithManyJobs) {
  constexpr int kJobs = 300'000;
  constexpr TimeMs kSpan = 30 * kDay;
  auto wall_start = std::chrono::steady_clock::now();
  Engine e(Options());
  SessionId producer = e.OpenSession(kStart);
  std::mt19937_64 rng(30);
  for (int i = 0; i < kJobs; ++i) {
    PutRequest r;
    r.delay_ms = static_cast<TimeMs>(rng() % kSpan);
    r.priority = static_cast<uint32_t>(rng() % 2048);
    r.ttr_ms = 30'000 + static_cast<TimeMs>(rng() % 270'000);
    if (i % 10 == 0) {
      r.max_tries = 3;
      r.backoff = Backoff::Exponential(1000, 3'600'000);
    } else if (i % 10 == 1) {
      r.backoff = Backoff::List({240'000, 600'000, 3'600'000});
    }
    ASSERT_TRUE(e.Put(kStart, producer, r).ok());
  }

  std::vector<SessionId> workers;
  ReserveRequest wait;
  wait.timeout_ms = -1;
  wait.count = 32;
  wait.detach = true;  // a job left alone just times out
  for (int i = 0; i < 4; ++i) {
    workers.push_back(e.OpenSession(kStart));
    wait.session = workers.back();
    ASSERT_TRUE(e.Reserve(kStart, wait).ok());
  }
  uint64_t deleted = 0, released = 0, abandoned = 0, steps = 0;
  // What a worker does with job `id` on its n-th try: 90% finish, 5%
  // release, 5% abandon (TTR expiry); the jobs with max_tries (ids 1, 11,
  // 21, ...) fail 70% of their tries, so that some end up buried.
  auto decide = [](JobId id, uint32_t n) -> uint64_t {
    uint64_t h = (id * 2654435761u + n * 40503u) % 100;
    return id % 10 == 1 ? (h < 30 ? 0 : 90 + h % 10) : h;
  };
  std::vector<Event> events;
  std::map<JobId, uint32_t> tries;
  TimeMs end = kStart + kSpan + 7 * kDay;
  while (e.now() < end) {
    TimeMs t = std::min(e.NextWakeup(), end);
    if (t == kNever) break;
    e.Advance(t);
    ++steps;
    events.clear();
    e.TakeEvents(&events);
    std::set<SessionId> to_rewait;
    for (const Event& ev : events) {
      ASSERT_EQ(ev.kind, Event::Kind::kReserved);
      uint32_t n = ++tries[ev.job];
      uint64_t d = decide(ev.job, n);
      if (d < 90) {
        ASSERT_TRUE(e.Finish(t, Held(e, t, ev.session, ev.job), ev.job).ok());
        tries.erase(ev.job);
        ++deleted;
      } else if (d < 95) {
        ASSERT_TRUE(e.Release(t, Held(e, t, ev.session, ev.job), ev.job, 1024, std::nullopt).ok());
        ++released;
      } else {
        ++abandoned;
      }
      to_rewait.insert(ev.session);
    }
    for (SessionId w : to_rewait) {
      // The worker asks again; whatever is ready now comes back at once.
      wait.session = w;
      for (;;) {
        auto r = e.Reserve(t, wait);
        ASSERT_TRUE(r.ok());
        if (r->empty()) break;
        for (JobId id : *r) {
          uint32_t n = ++tries[id];
          uint64_t d = decide(id, n);
          if (d < 90) {
            ASSERT_TRUE(e.Finish(t, Held(e, t, w, id), id).ok());
            tries.erase(id);
            ++deleted;
          } else if (d < 95) {
            ASSERT_TRUE(e.Release(t, Held(e, t, w, id), id, 1024, std::nullopt).ok());
            ++released;
          } else {
            ++abandoned;
          }
        }
      }
    }
    if (steps % 100'000 == 0) ASSERT_EQ(e.CheckInvariants(), "");
  }
  EngineStats st = e.Stats(e.now());
  auto wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  std::cout << "thirty days: " << kJobs << " jobs, " << steps << " wake-ups, " << deleted
            << " deleted, " << released << " released, " << abandoned << " abandoned, " << st.buried
            << " buried, " << st.job_timeouts << " timeouts; " << wall << " s" << std::endl;
  EXPECT_EQ(st.total_jobs, static_cast<uint64_t>(kJobs));
  EXPECT_EQ(st.ready + st.delayed + st.reserved, 0u) << "not everything was done by the end";
  EXPECT_EQ(deleted + st.buried, static_cast<uint64_t>(kJobs));
  EXPECT_GT(st.buried, 0u);
  EXPECT_EQ(st.job_timeouts, abandoned);
  EXPECT_EQ(e.CheckInvariants(), "");
}

}  // namespace
}  // namespace delayq

#include "core/timing_wheel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "test_seed.h"

namespace delayq::core {
namespace {

struct Jobs {
  JobPool pool;
  std::vector<Job*> all;
  Job* Make(TimeMs due, JobId id) {
    Job* j = pool.Create({}, {});
    j->id = id;
    j->due = due;
    all.push_back(j);
    return j;
  }
  ~Jobs() {
    for (Job* j : all) pool.Destroy(j);
  }
};

TEST(TimingWheel, FiresAtDueMillisecondAcrossLevels) {
  Jobs jobs;
  TimingWheel w(1000);
  std::vector<TimeMs> dues = {1001,
                              1063,
                              1064,
                              1065,
                              1000 + 4095,
                              1000 + 4096,
                              1000 + (1 << 18),
                              1000 + (1 << 24) + 7,
                              1000 + 31'536'000'000};
  for (size_t i = 0; i < dues.size(); ++i) w.Insert(jobs.Make(dues[i], i + 1));
  ASSERT_TRUE(w.Valid());
  std::vector<std::pair<TimeMs, TimeMs>> fired;  // (due, now at fire)
  while (w.size() > 0) {
    TimeMs next = w.NextEventBound();
    ASSERT_NE(next, kNever);
    w.AdvanceTo(next, [&](Job* j) { fired.emplace_back(j->due, next); });
    ASSERT_TRUE(w.Valid());
  }
  ASSERT_EQ(fired.size(), dues.size());
  for (size_t i = 0; i < fired.size(); ++i) {
    EXPECT_EQ(fired[i].first, dues[i]);
    EXPECT_EQ(fired[i].second, dues[i]) << "fired late or early";
  }
}

TEST(TimingWheel, BoundNeverPassesAnEvent) {
  Jobs jobs;
  TimingWheel w(0);
  w.Insert(jobs.Make(5000, 1));
  TimeMs b = w.NextEventBound();
  EXPECT_LE(b, 5000);
  EXPECT_GT(b, 0);
  w.AdvanceTo(4999, [](Job*) { FAIL() << "fired early"; });
  EXPECT_EQ(w.now(), 4999);
  EXPECT_EQ(w.NextEventBound(), 5000);
  int n = 0;
  w.AdvanceTo(5000, [&](Job*) { ++n; });
  EXPECT_EQ(n, 1);
  EXPECT_EQ(w.NextEventBound(), kNever);
}

TEST(TimingWheel, RemoveClearsSlotAndKeepsOthers) {
  Jobs jobs;
  TimingWheel w(0);
  Job* a = jobs.Make(100, 1);
  Job* b = jobs.Make(100, 2);
  Job* c = jobs.Make(200000, 3);
  w.Insert(a);
  w.Insert(b);
  w.Insert(c);
  w.Remove(a);
  EXPECT_TRUE(w.Valid());
  w.Remove(b);
  EXPECT_TRUE(w.Valid());
  EXPECT_GT(w.NextEventBound(), 100);
  std::vector<JobId> fired;
  w.AdvanceTo(1'000'000, [&](Job* j) { fired.push_back(j->id); });
  EXPECT_EQ(fired, std::vector<JobId>{3});
}

TEST(TimingWheel, DueAtOrBeforeNowFiresOnNextAdvance) {
  Jobs jobs;
  TimingWheel w(500);
  w.Insert(jobs.Make(500, 1));
  w.Insert(jobs.Make(10, 2));
  EXPECT_TRUE(w.HasDue());
  EXPECT_EQ(w.NextEventBound(), 500);
  int n = 0;
  w.AdvanceTo(500, [&](Job*) { ++n; });
  EXPECT_EQ(n, 2);
}

TEST(TimingWheel, VisitInTimeOrderVisitsEarlierSlotsFirst) {
  Jobs jobs;
  TimingWheel w(0);
  std::vector<TimeMs> dues = {70000, 5, 4000, 300, 9'000'000, 6};
  for (size_t i = 0; i < dues.size(); ++i) w.Insert(jobs.Make(dues[i], i + 1));
  std::vector<TimeMs> seen, slot;
  w.VisitInTimeOrder([&](Job* j) { slot.push_back(j->due); },
                     [&] {
                       std::sort(slot.begin(), slot.end());
                       seen.insert(seen.end(), slot.begin(), slot.end());
                       slot.clear();
                       return false;
                     });
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(seen.size(), dues.size());
}

// Random inserts, removes and advances against a std::multimap of due times.
TEST(TimingWheel, RandomAgainstOrderedMap) {
  std::mt19937_64 rng(delayq::testing::TestSeed(42));
  Jobs jobs;
  TimingWheel w(123456);
  std::map<JobId, Job*> live;
  JobId next = 1;
  TimeMs now = 123456;
  for (int step = 0; step < 200000; ++step) {
    int op = static_cast<int>(rng() % 10);
    if (op < 5) {
      int scale = static_cast<int>(rng() % 40);
      TimeMs delay = static_cast<TimeMs>(rng() % (uint64_t{1} << scale)) + 1;
      Job* j = jobs.Make(now + delay, next++);
      w.Insert(j);
      live[j->id] = j;
    } else if (op < 7 && !live.empty()) {
      auto it = live.lower_bound(rng() % next);
      if (it == live.end()) it = live.begin();
      w.Remove(it->second);
      live.erase(it);
    } else {
      TimeMs to = now + static_cast<TimeMs>(rng() % (op == 9 ? 1'000'000 : 100));
      TimeMs expect_min = kNever;
      for (auto& [id, j] : live) expect_min = std::min(expect_min, j->due);
      ASSERT_LE(w.NextEventBound(), expect_min);
      w.AdvanceTo(to, [&](Job* j) {
        ASSERT_LE(j->due, to);
        ASSERT_EQ(live.erase(j->id), 1u);
      });
      now = to;
      for (auto& [id, j] : live) ASSERT_GT(j->due, now) << "job " << id << " not fired";
    }
    if (step % 5000 == 0) {
      ASSERT_TRUE(w.Valid());
    }
    ASSERT_EQ(w.size(), live.size());
  }
}

// NextEvent is the earliest due time (now() for one due already), kept
// from call to call through inserts, removes and advances; some of the
// jobs share their slots with many others (more than it walks: then the
// slot's start, never later than the earliest due time).
TEST(TimingWheel, NextEventIsTheEarliestDueTime) {
  std::mt19937_64 rng(delayq::testing::TestSeed(7));
  Jobs jobs;
  TimingWheel w(1'000'000);
  std::map<JobId, Job*> live;
  std::multiset<TimeMs> dues;
  JobId next = 1;
  TimeMs now = 1'000'000;
  uint64_t exact = 0, checked = 0;
  for (int step = 0; step < 100000; ++step) {
    int op = static_cast<int>(rng() % 10);
    if (op < 5) {
      // Often a burst of jobs due in one slot far ahead.
      int n = rng() % 50 == 0 ? 300 : 1;
      int scale = static_cast<int>(rng() % 30);
      TimeMs base = now + static_cast<TimeMs>(rng() % (uint64_t{1} << scale)) + 1;
      for (int i = 0; i < n; ++i) {
        Job* j = jobs.Make(base + static_cast<TimeMs>(rng() % 64), next++);
        w.Insert(j);
        live[j->id] = j;
        dues.insert(j->due);
      }
    } else if (op < 7 && !live.empty()) {
      auto it = live.lower_bound(rng() % next);
      if (it == live.end()) it = live.begin();
      w.Remove(it->second);
      dues.erase(dues.find(it->second->due));
      live.erase(it);
    } else {
      TimeMs to = now + static_cast<TimeMs>(rng() % (op == 9 ? 100'000 : 100));
      w.AdvanceTo(to, [&](Job* j) {
        ASSERT_EQ(live.erase(j->id), 1u);
        dues.erase(dues.find(j->due));
      });
      now = to;
    }
    TimeMs got = w.NextEvent();
    if (dues.empty()) {
      ASSERT_EQ(got, kNever) << "step " << step;
    } else {
      TimeMs first = std::max(*dues.begin(), now);
      ASSERT_LE(got, first) << "step " << step;
      ASSERT_LE(w.NextEventBound(), got) << "step " << step;
      exact += got == first;
      checked++;
    }
  }
  EXPECT_GT(exact, checked * 9 / 10) << "mostly exact";
}

// NextEvent is exact where its first slot is small: due times inside one
// slot of level 1 (64 ticks) and of level 2.
TEST(TimingWheel, NextEventIsExactInsideASlot) {
  Jobs jobs;
  TimingWheel w(0);
  w.Insert(jobs.Make(1000, 1));  // level 1 (1000 = 15 * 64 + 40)
  EXPECT_EQ(w.NextEventBound(), 960);
  EXPECT_EQ(w.NextEvent(), 1000);
  w.Insert(jobs.Make(990, 2));
  EXPECT_EQ(w.NextEvent(), 990);
  Job* far = jobs.Make(200'000, 3);  // level 2
  w.Insert(far);
  EXPECT_EQ(w.NextEvent(), 990);
  w.AdvanceTo(995, [](Job*) {});
  EXPECT_EQ(w.NextEvent(), 1000);
  w.AdvanceTo(1000, [](Job*) {});
  EXPECT_EQ(w.NextEvent(), 200'000);
  w.Remove(far);
  EXPECT_EQ(w.NextEvent(), kNever);
}

}  // namespace
}  // namespace delayq::core

// The scheduler on a Local backend under a manual clock: firings made
// ahead, their jobs ready at their times and never a millisecond before,
// each with its key; pause, delete, and a change taking back the firing
// made ahead (and a stale instance not taking back the new one's); missed
// firings at start skipped or made once; a firing made already (the
// cursor) is not made again; the stored form reads back as written.
#include "delivery/scheduler.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <optional>
#include <string>

#include "backend/local_backend.h"
#include "delivery/schedule.h"
#include "manual_clock.h"

namespace delayq::delivery {
namespace {

// 2023-11-14T22:13:20Z, a whole ten seconds.
constexpr TimeMs kBase = 1'700'000'000'000;

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() { clock_.now = kBase + 1; }

  void Store(Schedule s) {
    std::optional<delayq::Status> st;
    backend_.PutObject(ObjectKind::kSchedule, s.name, ScheduleToJson(s),
                       [&](delayq::Status x) { st = x; });
    ASSERT_TRUE(st.has_value() && st->ok());
  }
  static Schedule Every10s(std::string name, MissedPolicy missed = MissedPolicy::kSkip) {
    Schedule s;
    s.name = std::move(name);
    s.cron = "*/10 * * * * *";
    s.topic = "ticks";
    s.job.body = "tick";
    s.missed = missed;
    return s;
  }
  // The same schedule changed: its job's body is `body`.
  static Schedule Every10s(std::string name, std::string body) {
    Schedule s = Every10s(std::move(name));
    s.job.body = std::move(body);
    return s;
  }
  // The live job with `key` in topic "ticks": its creation time, or nullopt.
  std::optional<TimeMs> JobCreated(const std::string& key) {
    std::optional<TimeMs> out;
    backend_.Peek(0, backend::Backend::PeekKind::kKey, 0, "ticks", key,
                  [&](delayq::Status st, backend::Jobs jobs) {
                    if (st.ok() && !jobs.empty()) out = jobs[0].created_ms;
                  });
    return out;
  }
  // Its body, or "" when there is none.
  std::string JobBody(const std::string& key) {
    std::string out;
    backend_.Peek(0, backend::Backend::PeekKind::kKey, 0, "ticks", key,
                  [&](delayq::Status st, backend::Jobs jobs) {
                    if (st.ok() && !jobs.empty()) out = std::string(jobs[0].body);
                  });
    return out;
  }
  uint64_t Ready() {
    uint64_t n = 0;
    backend_.StatsTopic("ticks", [&](Result<TopicStats> r) {
      if (r.ok()) n = r->ready;
    });
    return n;
  }
  uint64_t Jobs() {
    uint64_t n = 0;
    backend_.StatsTopic("ticks", [&](Result<TopicStats> r) {
      if (r.ok()) n = r->ready + r->delayed;
    });
    return n;
  }
  // Moves the manual clock to `t` and makes what fell due. (The loop is
  // never run: the Local backend answers at once, and the scheduler's
  // timer, armed by the steady clock, would spin against a manual one.)
  void At(Scheduler& s, TimeMs t) {
    clock_.now = t;
    backend_.Poll();
    s.RunDue();
  }

  boost::asio::io_context io_;
  testing::ManualClock clock_;
  backend::LocalBackend backend_{io_, backend::LocalBackend::Options{}, clock_};
};

// Made a second ahead (lead_ms), the job ready at the fire time, not a
// millisecond before.
TEST_F(SchedulerTest, MakesFiringsAheadReadyAtTheirTimesNeverBefore) {
  Store(Every10s("a"));
  Scheduler s(io_, backend_, clock_, {});
  s.Start();
  ASSERT_EQ(s.NextOf("a"), kBase + 10'000);
  At(s, kBase + 8'999);
  EXPECT_EQ(Jobs(), 0u) << "made more than lead_ms ahead";
  At(s, kBase + 9'000);
  const std::string first = "a@" + std::to_string(kBase + 10'000);
  EXPECT_EQ(JobCreated(first), kBase + 9'000);
  EXPECT_EQ(s.NextOf("a"), kBase + 20'000);
  At(s, kBase + 9'999);
  EXPECT_EQ(Ready(), 0u) << "ready a millisecond early";
  At(s, kBase + 10'000);
  EXPECT_EQ(Ready(), 1u);
  // Late by 25 s: the two firings due are made, in order, once each, and
  // the next is not yet made.
  At(s, kBase + 35'000);
  EXPECT_TRUE(JobCreated("a@" + std::to_string(kBase + 20'000)));
  EXPECT_TRUE(JobCreated("a@" + std::to_string(kBase + 30'000)));
  EXPECT_EQ(Jobs(), 3u);
  EXPECT_EQ(Ready(), 3u);
  EXPECT_EQ(s.stats().made, 3u);
  EXPECT_EQ(s.NextOf("a"), kBase + 40'000);
}

// lead_ms 0: made at the fire time, ready as it is put.
TEST_F(SchedulerTest, WithoutALeadFiresAtItsTimes) {
  Store(Every10s("z"));
  Scheduler::Options no_lead;
  no_lead.lead_ms = 0;
  Scheduler s(io_, backend_, clock_, no_lead);
  s.Start();
  At(s, kBase + 9'999);
  EXPECT_EQ(Jobs(), 0u) << "fired a millisecond early";
  At(s, kBase + 10'000);
  EXPECT_EQ(JobCreated("z@" + std::to_string(kBase + 10'000)), kBase + 10'000);
  EXPECT_EQ(Ready(), 1u);
}

// A firing made ahead by a version since changed, paused or deleted is
// taken back while its time has not come; the new version makes its own.
TEST_F(SchedulerTest, AChangeTakesBackTheFiringMadeAhead) {
  Store(Every10s("c"));
  Scheduler s(io_, backend_, clock_, {});
  s.Start();
  At(s, kBase + 9'500);
  const std::string t1 = "c@" + std::to_string(kBase + 10'000);
  ASSERT_EQ(JobBody(t1), "tick");
  Schedule tock = Every10s("c", "tock");
  Store(tock);
  s.Reload();
  EXPECT_EQ(s.stats().unfired, 1u);
  EXPECT_EQ(Jobs(), 0u);
  At(s, kBase + 9'600);  // the new version makes the same firing, its way
  EXPECT_EQ(JobBody(t1), "tock");
  EXPECT_EQ(s.stats().made, 2u);
  At(s, kBase + 10'000);
  EXPECT_EQ(Ready(), 1u);
  // Paused once the next is made ahead: taken back, and nothing fires.
  At(s, kBase + 19'500);
  EXPECT_EQ(Jobs(), 2u);
  Schedule paused = tock;
  paused.paused = true;
  Store(paused);
  s.Reload();
  EXPECT_EQ(s.stats().unfired, 2u);
  At(s, kBase + 20'000);
  EXPECT_EQ(Jobs(), 1u);
  // Resumed, made ahead, deleted: taken back.
  clock_.now = kBase + 20'001;
  Store(tock);
  s.Reload();
  At(s, kBase + 29'000);
  EXPECT_TRUE(JobCreated("c@" + std::to_string(kBase + 30'000)));
  std::optional<delayq::Status> gone;
  backend_.DeleteObject(ObjectKind::kSchedule, "c", [&](delayq::Status st) { gone = st; });
  s.Reload();
  EXPECT_EQ(s.stats().unfired, 3u);
  At(s, kBase + 30'000);
  EXPECT_EQ(Jobs(), 1u);
  EXPECT_EQ(Ready(), 1u);
}

// A change once the fire time has come takes nothing back: the firing
// was made.
TEST_F(SchedulerTest, AFiringWhoseTimeCameStays) {
  Store(Every10s("d"));
  Scheduler s(io_, backend_, clock_, {});
  s.Start();
  At(s, kBase + 10'000);
  Schedule tock = Every10s("d", "tock");
  clock_.now = kBase + 10'001;
  Store(tock);
  s.Reload();
  EXPECT_EQ(s.stats().unfired, 0u);
  EXPECT_EQ(JobBody("d@" + std::to_string(kBase + 10'000)), "tick");
}

// Two instances: the one told of a change first takes back the firing
// made ahead and makes it again; the other, told later, finds the cursor
// naming the new version and takes nothing back; and a firing the stale
// one made by the old version is taken back and made again by it once it
// is told.
TEST_F(SchedulerTest, AStaleInstanceDoesNotTakeBackTheNewVersionsFiring) {
  Store(Every10s("x"));
  Scheduler a(io_, backend_, clock_, {}), b(io_, backend_, clock_, {});
  a.Start();
  b.Start();
  At(a, kBase + 9'000);
  b.RunDue();
  EXPECT_EQ(a.stats().made, 1u);
  EXPECT_EQ(b.stats().elsewhere, 1u);
  Schedule tock = Every10s("x", "tock");
  Store(tock);
  b.Reload();
  EXPECT_EQ(b.stats().unfired, 1u);
  At(b, kBase + 9'100);
  const std::string key = "x@" + std::to_string(kBase + 10'000);
  EXPECT_EQ(JobBody(key), "tock");
  a.Reload();
  EXPECT_EQ(a.stats().unfired, 0u);
  a.RunDue();
  EXPECT_EQ(JobBody(key), "tock");
  EXPECT_EQ(Jobs(), 1u);
  At(a, kBase + 10'000);
  EXPECT_EQ(Ready(), 1u);
  // The other way round: the stale instance makes the next firing ahead
  // by the old version, the other finds it made; told later, the stale
  // one takes it back and makes it again by the new version: not lost.
  Schedule tack = Every10s("x", "tack");
  Store(tack);
  b.Reload();
  At(a, kBase + 19'000);
  b.RunDue();
  const std::string next = "x@" + std::to_string(kBase + 20'000);
  EXPECT_EQ(JobBody(next), "tock");
  a.Reload();
  EXPECT_EQ(a.stats().unfired, 1u);
  a.RunDue();
  EXPECT_EQ(JobBody(next), "tack");
  At(a, kBase + 20'000);
  EXPECT_EQ(Ready(), 2u);
  EXPECT_EQ(Jobs(), 2u);
}

TEST_F(SchedulerTest, PausedAndDeletedSchedulesDoNotFire) {
  Store(Every10s("p"));
  Scheduler s(io_, backend_, clock_, {});
  s.Start();
  Schedule paused = Every10s("p");
  paused.paused = true;
  Store(paused);
  s.Reload();
  EXPECT_FALSE(s.NextOf("p"));
  At(s, kBase + 10'000);
  EXPECT_EQ(Jobs(), 0u);
  clock_.now = kBase + 10'001;
  Store(Every10s("p"));  // resumed
  s.Reload();
  EXPECT_EQ(s.NextOf("p"), kBase + 20'000) << "no firing made up for the pause";
  std::optional<delayq::Status> gone;
  backend_.DeleteObject(ObjectKind::kSchedule, "p", [&](delayq::Status st) { gone = st; });
  s.Reload();
  EXPECT_FALSE(s.NextOf("p"));
  At(s, kBase + 20'000);
  EXPECT_EQ(Jobs(), 0u);
}

// Seen first at start, 35 s after its anchor: `skip` waits for the next
// fire time, `one` makes the last missed one (30 s) at once, late; a
// firing the cursor says was made is not made again.
TEST_F(SchedulerTest, MissedFiringsAtStart) {
  Schedule skip = Every10s("skip"), one = Every10s("one", MissedPolicy::kOne);
  skip.anchor_ms = one.anchor_ms = kBase;
  Store(skip);
  Store(one);
  clock_.now = kBase + 35'000;
  Scheduler s(io_, backend_, clock_, {});
  s.Start();
  EXPECT_EQ(s.NextOf("skip"), kBase + 40'000);
  EXPECT_EQ(s.NextOf("one"), kBase + 30'000);
  At(s, kBase + 35'000);
  EXPECT_EQ(JobCreated("one@" + std::to_string(kBase + 30'000)), kBase + 35'000);
  EXPECT_EQ(Jobs(), 1u);
  // Another start (as after a restart): the cursor refuses that firing.
  Scheduler again(io_, backend_, clock_, {});
  again.Start();
  At(again, kBase + 36'000);
  EXPECT_EQ(again.stats().made, 0u);
  EXPECT_EQ(again.stats().elsewhere, 1u);
  EXPECT_EQ(Jobs(), 1u);
}

TEST_F(SchedulerTest, StartAndEndBoundTheFireTimes) {
  Schedule s = Every10s("bounded");
  s.start_ms = kBase + 15'000;
  s.end_ms = kBase + 40'000;
  auto times = FireTimes::Of(s);
  ASSERT_TRUE(times.ok());
  std::vector<TimeMs> want{kBase + 20'000, kBase + 30'000, kBase + 40'000};
  EXPECT_EQ(times->NextN(kBase, 5), want);
  EXPECT_EQ(times->LastAtOrBefore(kBase + 35'000, kBase), kBase + 30'000);
  s.job.body = std::string("\x00\xff", 2);  // not text: stored as base64
  s.job.backoff = Backoff::List({60'000, 600'000});
  auto back = ScheduleFromJson(ScheduleToJson(s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
  EXPECT_EQ(FiringKey("bounded", kBase), "bounded@1700000000000");
  EXPECT_FALSE(CheckScheduleName(std::string(kMaxScheduleNameLength + 1, 'n')).ok());
  EXPECT_FALSE(CheckScheduleName("a/b").ok());
  EXPECT_TRUE(CheckScheduleName("nightly-report.v2_b").ok());
}

}  // namespace
}  // namespace delayq::delivery

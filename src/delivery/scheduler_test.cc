// The scheduler on a Local backend under a manual clock: firings at their
// times and never a millisecond before, each with its key; pause, delete;
// missed firings at start skipped or made once; a firing made already
// (the cursor) is not made again; the stored form reads back as written.
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
  // The live job with `key` in topic "ticks": its creation time, or nullopt.
  std::optional<TimeMs> JobCreated(const std::string& key) {
    std::optional<TimeMs> out;
    backend_.Peek(0, backend::Backend::PeekKind::kKey, 0, "ticks", key,
                  [&](delayq::Status st, backend::Jobs jobs) {
                    if (st.ok() && !jobs.empty()) out = jobs[0].created_ms;
                  });
    return out;
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

TEST_F(SchedulerTest, FiresAtItsTimesNeverBefore) {
  Store(Every10s("a"));
  Scheduler s(io_, backend_, clock_, {});
  s.Start();
  ASSERT_EQ(s.NextOf("a"), kBase + 10'000);
  At(s, kBase + 9'999);
  EXPECT_EQ(Jobs(), 0u) << "fired a millisecond early";
  At(s, kBase + 10'000);
  EXPECT_EQ(JobCreated("a@" + std::to_string(kBase + 10'000)), kBase + 10'000);
  EXPECT_EQ(s.NextOf("a"), kBase + 20'000);
  // Late by 25 s: the two firings due are made, in order, once each.
  At(s, kBase + 35'000);
  EXPECT_TRUE(JobCreated("a@" + std::to_string(kBase + 20'000)));
  EXPECT_TRUE(JobCreated("a@" + std::to_string(kBase + 30'000)));
  EXPECT_EQ(Jobs(), 3u);
  EXPECT_EQ(s.stats().made, 3u);
  EXPECT_EQ(s.NextOf("a"), kBase + 40'000);
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

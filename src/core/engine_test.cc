// Scenario tests of the engine's semantics (docs/engine.md). The randomized
// comparison against a reference lives in tests/core/model_test.cc.
#include "delayq/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "delayq/build_options.h"

namespace delayq {
namespace {

class EngineTest : public ::testing::Test {
 protected:
  EngineTest() : e_(EngineOptions{.start_ms = 1'000'000}) { s_ = e_.OpenSession(now_); }
  void TearDown() override { EXPECT_EQ(e_.CheckInvariants(), ""); }

  JobId Put(std::string body, uint32_t pri = 1024, TimeMs delay = 0, TimeMs ttr = 10'000,
            std::string_view topic = {}) {
    PutRequest r;
    r.body = body;
    r.priority = pri;
    r.delay_ms = delay;
    r.ttr_ms = ttr;
    r.topic = topic;
    auto res = e_.Put(now_, s_, r);
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    return res.ok() ? res->id : 0;
  }
  std::vector<JobId> Reserve(SessionId s, TimeMs timeout = 0, uint32_t count = 1) {
    auto res = e_.Reserve(now_, ReserveRequest{s, timeout, count, false});
    return res.ok() ? res.value() : std::vector<JobId>{};
  }
  Code ReserveCode(SessionId s, TimeMs timeout = 0) {
    return e_.Reserve(now_, ReserveRequest{s, timeout, 1, false}).code();
  }
  JobState StateOf(JobId id) { return e_.StatsJob(now_, id)->state; }
  std::vector<Event> Events() {
    std::vector<Event> ev;
    e_.TakeEvents(&ev);
    return ev;
  }
  std::vector<Mutation> Mutations() {
    std::vector<Mutation> m;
    e_.TakeMutations(&m);
    return m;
  }
  void Tick(TimeMs ms) {
    now_ += ms;
    e_.Advance(now_);
  }

  TimeMs now_ = 1'000'000;
  Engine e_;
  SessionId s_;
};

TEST_F(EngineTest, PutReserveDeleteLifecycle) {
  JobId id = Put("hello");
  EXPECT_EQ(id, 1u);
  EXPECT_EQ(StateOf(id), JobState::kReady);
  auto got = Reserve(s_);
  ASSERT_EQ(got, std::vector<JobId>{id});
  EXPECT_EQ(StateOf(id), JobState::kReserved);
  EXPECT_EQ(e_.Peek(now_, id)->body, "hello");
  EXPECT_TRUE(e_.Delete(now_, s_, id).ok());
  EXPECT_EQ(e_.Peek(now_, id).code(), Code::kNotFound);
  EXPECT_EQ(e_.Delete(now_, s_, id).code(), Code::kNotFound);
}

TEST_F(EngineTest, ReadyOrderIsPriorityThenId) {
  JobId a = Put("a", 5), b = Put("b", 1), c = Put("c", 5), d = Put("d", 1);
  EXPECT_EQ(Reserve(s_, 0, 4), (std::vector<JobId>{b, d, a, c}));
}

TEST_F(EngineTest, DelayedJobBecomesReadyAtItsMillisecond) {
  JobId id = Put("x", 1024, 1500);
  EXPECT_EQ(StateOf(id), JobState::kDelayed);
  EXPECT_EQ(e_.StatsJob(now_, id)->time_left_ms, 1500);
  Tick(1499);
  EXPECT_EQ(StateOf(id), JobState::kDelayed);
  EXPECT_EQ(e_.NextWakeup(), now_ + 1);
  Tick(1);
  EXPECT_EQ(StateOf(id), JobState::kReady);
}

TEST_F(EngineTest, TtrExpiryReturnsJobAndCounts) {
  JobId id = Put("x", 7, 0, 2000);
  ASSERT_EQ(Reserve(s_).size(), 1u);
  Tick(1999);
  EXPECT_EQ(StateOf(id), JobState::kReserved);
  Tick(1);
  auto st = e_.StatsJob(now_, id);
  EXPECT_EQ(st->state, JobState::kReady);
  EXPECT_EQ(st->timeouts, 1u);
  EXPECT_EQ(st->reserves, 1u);
  EXPECT_EQ(e_.Stats(now_).job_timeouts, 1u);
}

TEST_F(EngineTest, TouchRestartsTtr) {
  JobId id = Put("x", 1, 0, 3000);
  Reserve(s_);
  Tick(2500);
  EXPECT_TRUE(e_.Touch(now_, s_, id).ok());
  Tick(2999);
  EXPECT_EQ(StateOf(id), JobState::kReserved);
  Tick(1);
  EXPECT_EQ(StateOf(id), JobState::kReady);
}

TEST_F(EngineTest, OnlyTheReserverMayReleaseButAnyoneDeletesUnreserved) {
  SessionId other = e_.OpenSession(now_);
  JobId id = Put("x");
  Reserve(s_);
  EXPECT_EQ(e_.Release(now_, other, id, 1, 0).code(), Code::kConflict);
  EXPECT_EQ(e_.Delete(now_, other, id).code(), Code::kConflict);
  EXPECT_EQ(e_.Touch(now_, other, id).code(), Code::kConflict);
  EXPECT_EQ(e_.Release(now_, s_, id, 1, 0)->state, JobState::kReady);
  EXPECT_TRUE(e_.Delete(now_, other, id).ok());
}

TEST_F(EngineTest, ReleaseWithDelayAndBuryKick) {
  JobId id = Put("x");
  Reserve(s_);
  EXPECT_EQ(e_.Release(now_, s_, id, 9, 5000)->state, JobState::kDelayed);
  auto st = e_.StatsJob(now_, id);
  EXPECT_EQ(st->priority, 9u);
  EXPECT_EQ(st->releases, 1u);
  EXPECT_EQ(st->delay_ms, 5000);
  EXPECT_EQ(e_.KickJob(now_, id).code(), Code::kOk);
  EXPECT_EQ(StateOf(id), JobState::kReady);
  Reserve(s_);
  EXPECT_TRUE(e_.Bury(now_, s_, id, 3).ok());
  EXPECT_EQ(StateOf(id), JobState::kBuried);
  EXPECT_EQ(e_.PeekBuried(now_, "default")->id, id);
  EXPECT_EQ(e_.Kick(now_, "default", 10).value(), 1u);
  st = e_.StatsJob(now_, id);
  EXPECT_EQ(st->state, JobState::kReady);
  EXPECT_EQ(st->kicks, 2u);
  EXPECT_EQ(st->buries, 1u);
}

TEST_F(EngineTest, KickPrefersBuriedThenDelayedSoonestFirst) {
  JobId d1 = Put("d1", 1, 9000), d2 = Put("d2", 1, 3000), d3 = Put("d3", 1, 3000);
  JobId b = Put("b");
  Reserve(s_);
  ASSERT_TRUE(e_.Bury(now_, s_, b, 1).ok());
  EXPECT_EQ(e_.Kick(now_, "default", 5).value(), 1u);  // only the buried one
  EXPECT_EQ(e_.PeekDelayed(now_, "default")->id, d2);
  EXPECT_EQ(e_.Kick(now_, "default", 2).value(), 2u);
  EXPECT_EQ(StateOf(d2), JobState::kReady);
  EXPECT_EQ(StateOf(d3), JobState::kReady);
  EXPECT_EQ(StateOf(d1), JobState::kDelayed);
  EXPECT_EQ(e_.KickJob(now_, b).code(), Code::kConflict);  // ready now
  EXPECT_EQ(e_.KickJob(now_, 999).code(), Code::kNotFound);
}

TEST_F(EngineTest, WaitersAreServedOldestFirst) {
  SessionId a = e_.OpenSession(now_), b = e_.OpenSession(now_);
  EXPECT_TRUE(Reserve(a, -1).empty());
  EXPECT_TRUE(Reserve(b, -1).empty());
  EXPECT_TRUE(e_.IsWaiting(a));
  JobId j1 = Put("1");
  EXPECT_EQ(Events(), (std::vector<Event>{{Event::Kind::kReserved, a, j1}}));
  JobId j2 = Put("2");
  EXPECT_EQ(Events(), (std::vector<Event>{{Event::Kind::kReserved, b, j2}}));
  EXPECT_EQ(e_.Stats(now_).waiting, 0u);
}

TEST_F(EngineTest, DelayedJobGoesStraightToWaiter) {
  SessionId a = e_.OpenSession(now_);
  Reserve(a, -1);
  JobId id = Put("x", 1, 250);
  EXPECT_TRUE(Events().empty());
  Tick(250);
  EXPECT_EQ(Events(), (std::vector<Event>{{Event::Kind::kReserved, a, id}}));
}

TEST_F(EngineTest, ReserveTimesOut) {
  EXPECT_EQ(ReserveCode(s_, 0), Code::kTimedOut);
  EXPECT_TRUE(Reserve(s_, 700).empty());
  Tick(699);
  EXPECT_TRUE(Events().empty());
  Tick(1);
  EXPECT_EQ(Events(), (std::vector<Event>{{Event::Kind::kTimedOut, s_, 0}}));
  EXPECT_FALSE(e_.IsWaiting(s_));
}

TEST_F(EngineTest, DeadlineSoonAtReserveAndWhileWaiting) {
  Put("x", 1, 0, 3000);
  ASSERT_EQ(Reserve(s_).size(), 1u);
  // 3000 ms left: wait, and be told 1000 ms before the deadline.
  EXPECT_TRUE(Reserve(s_, -1).empty());
  Tick(1999);
  EXPECT_TRUE(Events().empty());
  Tick(1);
  EXPECT_EQ(Events(), (std::vector<Event>{{Event::Kind::kDeadlineSoon, s_, 0}}));
  EXPECT_EQ(ReserveCode(s_, -1), Code::kDeadlineSoon);
}

TEST_F(EngineTest, ClosingASessionReturnsItsJobs) {
  SessionId w = e_.OpenSession(now_);
  JobId id = Put("x");
  ASSERT_EQ(Reserve(w).size(), 1u);
  e_.CloseSession(now_, w);
  EXPECT_EQ(StateOf(id), JobState::kReady);
}

TEST_F(EngineTest, KeysAreIdempotentAndDeletable) {
  PutRequest r;
  r.topic = "orders";
  r.key = "order-42";
  r.body = "close";
  r.delay_ms = 1800'000;
  auto first = e_.Put(now_, s_, r);
  auto again = e_.Put(now_, s_, r);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->created);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(first->id, again->id);
  EXPECT_EQ(e_.PeekByKey(now_, "orders", "order-42")->id, first->id);
  EXPECT_EQ(e_.PeekByKey(now_, "default", "order-42").code(), Code::kNotFound);
  EXPECT_TRUE(e_.DeleteByKey(now_, s_, "orders", "order-42").ok());
  auto third = e_.Put(now_, s_, r);
  EXPECT_TRUE(third->created);
  EXPECT_NE(third->id, first->id);
}

// The metrics: a delayed job that the clock passes by 7 ms is 7 ms late;
// a ready job reserved 30 ms after it became ready waited 30 ms; a job
// buried for its max_tries counts once.
TEST_F(EngineTest, MetricsCountLatenessWaitsAndBuriesForMaxTries) {
#if !DELAYQ_COUNT_METRICS
  GTEST_SKIP() << "built with DELAYQ_COUNT_METRICS=OFF: lateness and waits are not counted";
#endif
  const EngineMetrics& m = e_.metrics();
  JobId late = Put("late", 1024, /*delay=*/100);
  now_ += 107;  // nothing looked at the engine until 7 ms past the due time
  e_.Advance(now_);
  EXPECT_EQ(m.lateness.count, 1u);
  EXPECT_EQ(m.lateness.sum_us, 7'000);
  EXPECT_EQ(m.lateness.counts[6], 1u);  // (5 ms, 10 ms]
  Tick(30);
  ASSERT_EQ(Reserve(s_), std::vector<JobId>{late});
  EXPECT_EQ(m.ready_wait.count, 1u);
  EXPECT_EQ(m.ready_wait.sum_us, 30'000);
  // Put ready and reserved at once: waited 0.
  JobId now = Put("now");
  ASSERT_EQ(Reserve(s_), std::vector<JobId>{now});
  EXPECT_EQ(m.ready_wait.count, 2u);
  EXPECT_EQ(m.ready_wait.counts[0], 1u);
  // A job with one try: its TTR runs out, it is buried.
  PutRequest r;
  r.body = "once";
  r.ttr_ms = 1000;
  r.max_tries = 1;
  JobId once = e_.Put(now_, s_, r)->id;
  ASSERT_EQ(Reserve(s_), std::vector<JobId>{once});
  Tick(1000);
  EXPECT_EQ(StateOf(once), JobState::kBuried);
  EXPECT_EQ(m.buried_max_tries, 1u);
  EXPECT_EQ(m.lateness.count, 1u) << "a TTR expiry is not a due job";
}

TEST_F(EngineTest, MaxTriesBuriesAndBackoffDelays) {
  PutRequest r;
  r.body = "pay";
  r.ttr_ms = 1000;
  r.max_tries = 3;
  r.backoff = Backoff::List({4 * 60'000, 10 * 60'000});
  JobId id = e_.Put(now_, s_, r)->id;
  Reserve(s_);
  Tick(1000);  // try 1 times out -> 4 min
  EXPECT_EQ(StateOf(id), JobState::kDelayed);
  EXPECT_EQ(e_.StatsJob(now_, id)->time_left_ms, 4 * 60'000);
  Tick(4 * 60'000);
  Reserve(s_);
  EXPECT_EQ(e_.Release(now_, s_, id, 1024, std::nullopt)->state, JobState::kDelayed);
  EXPECT_EQ(e_.StatsJob(now_, id)->time_left_ms, 10 * 60'000);
  Tick(10 * 60'000);
  Reserve(s_);
  Tick(1000);  // third try fails: buried
  auto st = e_.StatsJob(now_, id);
  EXPECT_EQ(st->state, JobState::kBuried);
  EXPECT_EQ(st->reserves, 3u);
  EXPECT_EQ(st->timeouts, 2u);
}

TEST_F(EngineTest, ExponentialBackoffIsCapped) {
  Backoff b = Backoff::Exponential(1000, 5000);
  EXPECT_EQ(b.DelayFor(1), 1000);
  EXPECT_EQ(b.DelayFor(2), 2000);
  EXPECT_EQ(b.DelayFor(3), 4000);
  EXPECT_EQ(b.DelayFor(4), 5000);
  EXPECT_EQ(b.DelayFor(400), 5000);
}

TEST_F(EngineTest, PausedTopicServesNothingUntilThePauseEnds) {
  JobId id = Put("x");
  ASSERT_TRUE(e_.PauseTopic(now_, "default", 2000).ok());
  EXPECT_EQ(ReserveCode(s_, 0), Code::kTimedOut);
  EXPECT_EQ(e_.PeekReady(now_, "default")->id, id);
  Reserve(s_, -1);
  EXPECT_EQ(e_.StatsTopic(now_, "default")->pause_time_left_ms, 2000);
  Tick(2000);
  EXPECT_EQ(Events(), (std::vector<Event>{{Event::Kind::kReserved, s_, id}}));
}

TEST_F(EngineTest, TopicsLiveWhileReferenced) {
  EXPECT_EQ(e_.ListTopics(now_), std::vector<std::string>{"default"});
  ASSERT_TRUE(e_.Watch(s_, "a").ok());
  ASSERT_TRUE(e_.Use(s_, "b").ok());
  EXPECT_EQ(e_.ListTopics(now_), (std::vector<std::string>{"default", "a", "b"}));
  JobId id = Put("x");  // into b
  ASSERT_TRUE(e_.Use(s_, "default").ok());
  EXPECT_EQ(e_.ListTopics(now_), (std::vector<std::string>{"default", "a", "b"}));
  ASSERT_TRUE(e_.Delete(now_, s_, id).ok());
  EXPECT_EQ(e_.ListTopics(now_), (std::vector<std::string>{"default", "a"}));
  EXPECT_EQ(e_.Ignore(s_, "a").value(), 1u);
  EXPECT_EQ(e_.Ignore(s_, "default").code(), Code::kNotIgnored);
  EXPECT_EQ(e_.ListTopics(now_), std::vector<std::string>{"default"});
}

TEST_F(EngineTest, ClearRemovesChosenStates) {
  Put("r");
  Put("d", 1, 5000);
  JobId b = Put("b");
  JobId held = Put("held");
  Reserve(s_, 0, 1);  // reserves "r" (id 1)
  (void)held;
  ASSERT_EQ(e_.ReserveJob(now_, s_, b)->id, b);
  ASSERT_TRUE(e_.Bury(now_, s_, b, 1).ok());
  EXPECT_EQ(e_.ClearTopic(now_, "default", kClearDelayed | kClearBuried).value(), 2u);
  auto st = e_.StatsTopic(now_, "default");
  EXPECT_EQ(st->ready, 1u);
  EXPECT_EQ(st->reserved, 1u);
  EXPECT_EQ(st->buried + st->delayed, 0u);
  EXPECT_EQ(e_.ClearTopic(now_, "default", kClearAll).value(), 1u);
}

TEST_F(EngineTest, RejectsBadArgumentsWithoutSideEffects) {
  PutRequest r;
  r.body = "x";
  r.topic = "-bad";
  EXPECT_EQ(e_.Put(now_, s_, r).code(), Code::kInvalidArgument);
  r.topic = "ok";
  r.ttr_ms = 0;
  EXPECT_EQ(e_.Put(now_, s_, r).code(), Code::kInvalidArgument);
  r.ttr_ms = 1000;
  r.delay_ms = -5;
  EXPECT_EQ(e_.Put(now_, s_, r).code(), Code::kInvalidArgument);
  r.delay_ms = kMaxDelayMs + 1;
  EXPECT_EQ(e_.Put(now_, s_, r).code(), Code::kInvalidArgument);
  r.delay_ms = 0;
  r.backoff = Backoff::Exponential(10, 5);
  EXPECT_EQ(e_.Put(now_, s_, r).code(), Code::kInvalidArgument);
  r.backoff = {};
  std::string big(65536, 'x');
  r.body = big;
  EXPECT_EQ(e_.Put(now_, s_, r).code(), Code::kJobTooBig);
  EXPECT_EQ(e_.Stats(now_).total_jobs, 0u);
  EXPECT_EQ(e_.ListTopics(now_), std::vector<std::string>{"default"});
  EXPECT_FALSE(IsValidTopicName(std::string(201, 'a')));
  EXPECT_TRUE(IsValidTopicName(std::string(200, 'a')));
  EXPECT_FALSE(IsValidTopicName("a b"));
  EXPECT_TRUE(IsValidTopicName("a-+/;.$_()9"));
}

TEST_F(EngineTest, RunAtIsAbsolute) {
  PutRequest r;
  r.body = "x";
  r.run_at = now_ + 12'345;
  JobId id = e_.Put(now_, s_, r)->id;
  EXPECT_EQ(e_.StatsJob(now_, id)->due_ms, now_ + 12'345);
  r.run_at = now_ - 10;  // in the past: ready at once
  EXPECT_EQ(e_.Put(now_, s_, r)->state, JobState::kReady);
}

TEST_F(EngineTest, MutationsDescribeDurableChanges) {
  JobId id = Put("body", 1, 500);
  auto m = Mutations();
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].kind, Mutation::Kind::kPut);
  EXPECT_EQ(m[0].body, "body");
  EXPECT_EQ(m[0].record.state, JobState::kDelayed);
  EXPECT_EQ(m[0].record.due_ms, now_ + 500);
  Tick(500);
  EXPECT_TRUE(Mutations().empty());  // a due time passing writes nothing
  Reserve(s_);
  m = Mutations();
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].kind, Mutation::Kind::kUpdate);
  EXPECT_EQ(m[0].record.state, JobState::kReady);  // reservations are not persisted
  EXPECT_EQ(m[0].record.reserves, 1u);
  ASSERT_TRUE(e_.Touch(now_, s_, id).ok());
  EXPECT_TRUE(Mutations().empty());
  ASSERT_TRUE(e_.Delete(now_, s_, id).ok());
  m = Mutations();
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].kind, Mutation::Kind::kDelete);
  EXPECT_EQ(m[0].record.id, id);
}

// With a sink, each mutation is appended to it as it happens, after what
// the sink held (the Local backend's open batch: a named object's change
// may be there), with what TakeMutations had not taken yet first; without
// one again, TakeMutations has them.
TEST_F(EngineTest, MutationsGoToTheSinkAsTheyHappen) {
  const JobId first = Put("kept");
  std::vector<Mutation> sink(1);
  sink[0].kind = Mutation::Kind::kPutObject;
  e_.RecordMutationsInto(&sink);
  struct Unset {  // the engine outlives `sink` (a failed assertion returns)
    Engine& e;
    ~Unset() { e.RecordMutationsInto(nullptr); }
  } unset{e_};
  ASSERT_EQ(sink.size(), 2u);
  EXPECT_EQ(sink[1].record.id, first);
  EXPECT_EQ(sink[1].body, "kept");
  const JobId second = Put("body", 7, 500);
  ASSERT_EQ(sink.size(), 3u);
  EXPECT_EQ(sink[2].kind, Mutation::Kind::kPut);
  EXPECT_EQ(sink[2].record.id, second);
  EXPECT_EQ(sink[2].record.priority, 7u);
  EXPECT_EQ(sink[2].record.due_ms, now_ + 500);
  EXPECT_EQ(sink[2].body, "body");
  EXPECT_TRUE(Mutations().empty());
  ASSERT_TRUE(e_.Delete(now_, s_, first).ok());
  ASSERT_EQ(sink.size(), 4u);
  EXPECT_EQ(sink[3].kind, Mutation::Kind::kDelete);
  EXPECT_EQ(sink[3].record.id, first);
  EXPECT_TRUE(sink[3].body.empty());
  e_.RecordMutationsInto(nullptr);
  ASSERT_TRUE(e_.Delete(now_, s_, second).ok());
  EXPECT_EQ(sink.size(), 4u);
  auto m = Mutations();
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].kind, Mutation::Kind::kDelete);
  EXPECT_EQ(m[0].record.id, second);
}

TEST_F(EngineTest, RestoreBringsJobsBackAndMovesIdsPast) {
  JobRecord r;
  r.id = 77;
  r.topic = "t";
  r.key = "k";
  r.state = JobState::kDelayed;
  r.priority = 5;
  r.due_ms = now_ + 1000;
  r.created_ms = now_ - 50;
  r.ttr_ms = 1000;
  r.reserves = 2;
  ASSERT_TRUE(e_.Restore(now_, r, "payload").ok());
  EXPECT_EQ(e_.Restore(now_, r, "payload").code(), Code::kInvalidArgument);
  auto st = e_.StatsJob(now_, 77);
  EXPECT_EQ(st->state, JobState::kDelayed);
  EXPECT_EQ(st->reserves, 2u);
  EXPECT_EQ(st->age_ms, 50);
  EXPECT_EQ(e_.PeekByKey(now_, "t", "k")->body, "payload");
  EXPECT_EQ(Put("next"), 78u);
  EXPECT_TRUE(Mutations().size() == 1);  // only the put
}

// A push try's answer, given with a release or a bury, is kept with the
// job (its view, its record), cut to kMaxAnswerBytes, replaced by the next
// one, restored from a record and dropped with the job.
TEST_F(EngineTest, ReleaseAndBuryKeepAPushTrysAnswer) {
  const JobId id = Put("x");
  ASSERT_EQ(Reserve(s_), std::vector<JobId>{id});
  EXPECT_FALSE(e_.Peek(now_, id)->answered);
  Mutations();
  const PushAnswer first{500, std::string(kMaxAnswerBytes + 10, 'a')};
  ASSERT_TRUE(e_.Release(now_, s_, id, std::nullopt, 0, &first).ok());
  auto v = e_.Peek(now_, id);
  ASSERT_TRUE(v->answered);
  EXPECT_EQ(v->answer_status, 500u);
  EXPECT_EQ(v->answer_text, std::string(kMaxAnswerBytes, 'a'));
  auto m = Mutations();
  ASSERT_EQ(m.size(), 1u);
  ASSERT_TRUE(m[0].record.answer.has_value());
  EXPECT_EQ(m[0].record.answer->text.size(), kMaxAnswerBytes);
  ASSERT_EQ(Reserve(s_), std::vector<JobId>{id});
  const PushAnswer second{0, "timeout: 300 ms"};
  ASSERT_TRUE(e_.Bury(now_, s_, id, std::nullopt, &second).ok());
  v = e_.Peek(now_, id);
  EXPECT_EQ(v->state, JobState::kBuried);
  EXPECT_EQ(v->answer_status, 0u);
  EXPECT_EQ(v->answer_text, "timeout: 300 ms");
  m = Mutations();  // the reserve's counters, then the bury
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(m.back().record.answer, second);
  // A kick keeps it; a release without one (a worker's) keeps it too.
  ASSERT_TRUE(e_.KickJob(now_, id).ok());
  EXPECT_TRUE(e_.Peek(now_, id)->answered);
  // Restored from its record, in another engine, it has it again.
  Engine restored(EngineOptions{.start_ms = 1'000'000});
  ASSERT_TRUE(restored.Restore(now_, m.back().record, "x").ok());
  EXPECT_EQ(restored.Peek(now_, id)->answer_text, "timeout: 300 ms");
  // Deleted, it takes its answer along: a job put again later has none.
  ASSERT_TRUE(e_.Delete(now_, s_, id).ok());
  const JobId next = Put("y");
  EXPECT_FALSE(e_.Peek(now_, next)->answered);
}

TEST_F(EngineTest, BatchReserveAndDetachedReservations) {
  for (int i = 0; i < 5; ++i) Put("x");
  SessionId http = e_.OpenSession(now_);
  auto got = e_.Reserve(now_, ReserveRequest{http, 0, 3, true});
  ASSERT_EQ(got->size(), 3u);
  e_.CloseSession(now_, http);
  EXPECT_EQ(StateOf(got->front()), JobState::kReserved);  // detached: kept
  // Held by its lease alone (docs/engine.md, "Leases"), each job's its own.
  auto v0 = e_.PeekReservation(now_, (*got)[0]);
  ASSERT_TRUE(v0.ok());
  uint64_t l0 = 0, l1 = 0;
  ASSERT_TRUE(ParseLease(v0->lease, &l0));
  ASSERT_TRUE(ParseLease(e_.PeekReservation(now_, (*got)[1])->lease, &l1));
  EXPECT_NE(l0, l1);
  EXPECT_TRUE(e_.Peek(now_, (*got)[0])->lease.empty()) << "a peek shows no lease";
  EXPECT_EQ(e_.Delete(now_, s_, (*got)[0]).code(), Code::kConflict);
  EXPECT_EQ(e_.Finish(now_, Holder(s_, l1), (*got)[0]).code(), Code::kLeaseLost);
  auto done = e_.Finish(now_, Holder(s_, l0), (*got)[0]);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state, JobState::kReserved);
  EXPECT_EQ(e_.Finish(now_, Holder(s_, l0), (*got)[0]).code(), Code::kNotFound);
  // An operator (session 0) needs no lease.
  EXPECT_TRUE(e_.Delete(now_, 0, (*got)[1]).ok());
}

// Names (PutRequest::named): one namespace across topics; a job without
// one is named by its id in decimal, unless a name is that text.
TEST_F(EngineTest, NamesAreUniqueAcrossTopics) {
  auto put = [&](std::string_view topic, std::string_view key, bool named) {
    PutRequest r;
    r.topic = topic;
    r.key = key;
    r.named = named;
    r.body = "b";
    return e_.Put(now_, s_, r);
  };
  auto a = put("a", "n1", true);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->created);
  auto again = put("a", "n1", true);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->id, a->id);
  auto other = put("b", "n1", true);
  EXPECT_EQ(other.code(), Code::kConflict);
  EXPECT_EQ(other.status().message(), "id 'n1' belongs to a job in topic 'a'");
  // The topic made for the refused put is gone by the end of the call.
  EXPECT_EQ(e_.CheckInvariants(), "");
  // A job's topic, told without a call that advances time.
  EXPECT_EQ(e_.TopicOf(a->id), std::optional<std::string_view>("a"));
  EXPECT_EQ(e_.TopicOf(a->id + 1000), std::nullopt);
  // A key of topic b with no name: b's own, not a name.
  auto plain = put("b", "n1", false);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(put("b", "n1", true).code(), Code::kConflict);
  EXPECT_EQ(e_.ResolveName("n1"), a->id);
  EXPECT_TRUE(e_.Peek(now_, a->id)->named);
  EXPECT_FALSE(e_.Peek(now_, plain->id)->named);
  // By number: a job without a name, in canonical decimal only.
  const std::string num = std::to_string(plain->id);
  EXPECT_EQ(e_.ResolveName(num), plain->id);
  EXPECT_EQ(e_.ResolveName("0" + num), 0u);
  EXPECT_EQ(e_.ResolveName("+" + num), 0u);
  EXPECT_EQ(e_.ResolveName(std::to_string(a->id)), 0u) << "a named job is named by its name";
  EXPECT_EQ(e_.ResolveName("18446744073709551616"), 0u);
  // A name that is a number wins over the job of that number.
  auto by_number = put("c", num, true);
  ASSERT_TRUE(by_number.ok());
  EXPECT_EQ(e_.ResolveName(num), by_number->id);
  // The name goes with its job, and may then be taken in another topic.
  ASSERT_TRUE(e_.Delete(now_, Holder(0), a->id).ok());
  EXPECT_EQ(e_.ResolveName("n1"), 0u);
  EXPECT_FALSE(e_.HasName("n1"));
  auto moved = put("c", "n1", true);
  ASSERT_TRUE(moved.ok());
  EXPECT_TRUE(moved->created);
  EXPECT_EQ(put("c", "", true).code(), Code::kInvalidArgument);
  // A stored named job is restored with its name.
  Engine restored(EngineOptions{.start_ms = 1'000'000});
  JobRecord r;
  r.id = 500;
  r.topic = "c";
  r.key = "n1";
  r.named = true;
  r.ttr_ms = 1000;
  ASSERT_TRUE(restored.Restore(now_, r, "b").ok());
  EXPECT_EQ(restored.ResolveName("n1"), 500u);
  EXPECT_TRUE(restored.Peek(now_, 500)->named);
  r.id = 501;
  r.topic = "d";
  EXPECT_FALSE(restored.Restore(now_, r, "b").ok()) << "a name held twice";
  EXPECT_EQ(restored.CheckInvariants(), "");
}

TEST_F(EngineTest, AStaleLeaseChangesNothing) {
  JobId id = Put("x", kDefaultPriority, 0, /*ttr=*/100);
  SessionId w1 = e_.OpenSession(now_), w2 = e_.OpenSession(now_);
  ASSERT_EQ(e_.Reserve(now_, ReserveRequest{w1, 0, 1, true})->size(), 1u);
  uint64_t first = 0, second = 0;
  ASSERT_TRUE(ParseLease(e_.PeekReservation(now_, id)->lease, &first));
  now_ += 100;  // the TTR runs out: the job comes back, and goes to w2
  ASSERT_EQ(e_.Reserve(now_, ReserveRequest{w2, 0, 1, true})->size(), 1u);
  ASSERT_TRUE(ParseLease(e_.PeekReservation(now_, id)->lease, &second));
  EXPECT_NE(first, second);
  Mutations();
  for (int op = 0; op < 4; ++op) {
    Result<JobChange> r = op == 0   ? e_.Finish(now_, Holder(w1, first), id)
                          : op == 1 ? e_.Release(now_, Holder(w1, first), id, 1, 0)
                          : op == 2 ? e_.Bury(now_, Holder(w1, first), id, 1)
                                    : e_.Touch(now_, Holder(w1, first), id);
    EXPECT_EQ(r.code(), Code::kLeaseLost) << op;
    EXPECT_EQ(r.status().message(),
              "job " + std::to_string(id) +
                  " is reserved under another lease: the lease no longer holds it");
  }
  EXPECT_TRUE(Mutations().empty()) << "a refusal writes nothing";
  auto st = e_.StatsJob(now_, id);
  EXPECT_EQ(st->state, JobState::kReserved);
  EXPECT_EQ(st->due_ms, now_ + 100) << "the stale touch did not restart the TTR";
  auto rel = e_.Release(now_, Holder(w2, second), id, std::nullopt, 5000);
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(rel->state, JobState::kDelayed);
  EXPECT_EQ(rel->due_ms, now_ + 5000);
  EXPECT_EQ(rel->priority, kDefaultPriority) << "no priority given: kept";
  EXPECT_EQ(e_.Touch(now_, Holder(w2, second), id).code(), Code::kLeaseLost);
}

// ---- the horizon (docs/storage.md, "The horizon") ----------------------------

class HorizonTest : public ::testing::Test {
 protected:
  HorizonTest() : e_(EngineOptions{.start_ms = kStart, .evict_beyond_horizon = true}) {
    s_ = e_.OpenSession(now_);
    e_.SetHorizon(now_ + 60'000);
  }
  void TearDown() override { EXPECT_EQ(e_.CheckInvariants(), ""); }

  Result<PutResult> Put(TimeMs delay, std::string_view key = {}, std::string_view topic = {}) {
    PutRequest r;
    r.body = "body";
    r.delay_ms = delay;
    r.key = key;
    r.topic = topic;
    return e_.Put(now_, s_, r);
  }
  std::vector<ColdJob> Evicted() {
    std::vector<ColdJob> out;
    e_.TakeEvicted(&out);
    return out;
  }

  static constexpr TimeMs kStart = 1'000'000;
  TimeMs now_ = kStart;
  Engine e_;
  SessionId s_;
};

TEST_F(HorizonTest, APutBeyondTheMarkLeavesMemoryButCountsAsDelayed) {
  auto near = Put(60'000);  // due exactly at the mark: kept
  auto far = Put(60'001, "k");
  ASSERT_TRUE(near.ok() && far.ok());
  EXPECT_EQ(far->state, JobState::kDelayed);
  EXPECT_TRUE(e_.HasJob(near->id));
  EXPECT_FALSE(e_.HasJob(far->id));
  EXPECT_FALSE(e_.HasKey("default", "k"));
  std::vector<ColdJob> out = Evicted();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].record.id, far->id);
  EXPECT_EQ(out[0].record.state, JobState::kDelayed);
  EXPECT_EQ(out[0].record.due_ms, kStart + 60'001);
  EXPECT_EQ(out[0].record.key, "k");
  EXPECT_EQ(out[0].body, "body");
  // The put is still recorded for the store.
  std::vector<Mutation> m;
  e_.TakeMutations(&m);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1].kind, Mutation::Kind::kPut);
  EXPECT_EQ(m[1].record.id, far->id);
  EXPECT_EQ(e_.ColdJobs("default"), 1u);
  EXPECT_EQ(e_.ColdJobs(), 1u);
  EXPECT_EQ(e_.DelayedInMemory("default"), 1u);
  EXPECT_EQ(e_.StatsTopic(now_, "default")->delayed, 2u);
  EXPECT_EQ(e_.Stats(now_).delayed, 2u);
  EXPECT_EQ(e_.Stats(now_).total_jobs, 2u);
}

TEST_F(HorizonTest, AdoptTakesAColdJobBackAndItBecomesReadyOnTime) {
  auto far = Put(120'000, "k");
  ASSERT_TRUE(far.ok());
  std::vector<ColdJob> out = Evicted();
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(e_.Adopt(now_, out[0].record, out[0].body).ok());
  EXPECT_EQ(e_.ColdJobs("default"), 0u);
  EXPECT_TRUE(e_.HasKey("default", "k"));
  // A job taken back beyond the mark stays (it was asked for).
  EXPECT_TRUE(Evicted().empty());
  now_ += 120'000;
  e_.Advance(now_);
  EXPECT_EQ(e_.StatsJob(now_, far->id)->state, JobState::kReady);
  // The same id cannot be adopted twice.
  EXPECT_EQ(e_.Adopt(now_, out[0].record, out[0].body).code(), Code::kInvalidArgument);
}

TEST_F(HorizonTest, AReleaseOrBackOffBeyondTheMarkEvictsTheJob) {
  auto id = Put(0);
  ASSERT_TRUE(id.ok());
  auto r = e_.Reserve(now_, ReserveRequest{s_, 0, 1, false});
  ASSERT_TRUE(r.ok() && r->size() == 1);
  auto st = e_.Release(now_, s_, id->id, 5, 3'600'000);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->state, JobState::kDelayed);
  EXPECT_FALSE(e_.HasJob(id->id));
  std::vector<ColdJob> out = Evicted();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].record.priority, 5u);
  EXPECT_EQ(out[0].record.releases, 1u);
  EXPECT_EQ(out[0].record.reserves, 1u);

  // A TTR expiry with an exponential back-off past the mark too.
  PutRequest p;
  p.body = "x";
  p.ttr_ms = 1'000;
  p.backoff = Backoff::Exponential(600'000, 600'000);
  auto b = e_.Put(now_, s_, p);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(e_.Reserve(now_, ReserveRequest{s_, 0, 1, false}).ok());
  now_ += 1'000;
  e_.Advance(now_);
  EXPECT_FALSE(e_.HasJob(b->id));
  out = Evicted();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].record.timeouts, 1u);
  EXPECT_EQ(out[0].record.due_ms, now_ + 600'000);
}

TEST_F(HorizonTest, MarksDecideAndATopicWithColdJobsLives) {
  e_.SetTopicMark("t", DueMark{kStart + 10, 5});  // no topic yet: no effect
  EXPECT_EQ(e_.TopicMark("t"), (DueMark{kStart + 60'000, std::numeric_limits<JobId>::max()}));
  ASSERT_TRUE(Put(120'000, {}, "t").ok());  // id 1, cold
  EXPECT_EQ(e_.ColdJobs("t"), 1u);
  EXPECT_EQ(e_.TopicsWithColdJobs(), std::vector<std::string>{"t"});
  // Nobody uses or watches "t", yet it is listed while it holds a cold job.
  auto topics = e_.ListTopics(now_);
  EXPECT_NE(std::find(topics.begin(), topics.end(), "t"), topics.end());
  // A topic's own mark, (due, id): the same due time with a lower id is kept.
  e_.SetTopicMark("t", DueMark{kStart + 30'000, 3});
  auto a = Put(30'000, {}, "t");  // id 2 <= 3: kept
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(e_.HasJob(a->id));
  e_.SetTopicMark("t", DueMark{kStart + 30'000, 2});
  auto b = Put(30'000, {}, "t");  // id 3 > 2: cold
  EXPECT_FALSE(e_.HasJob(b->id));
  EXPECT_EQ(e_.ColdJobs("t"), 2u);
  // Recovery counts cold jobs of a topic it creates.
  ASSERT_TRUE(e_.AddColdJob("u").ok());
  EXPECT_EQ(e_.StatsTopic(now_, "u")->delayed, 1u);
  EXPECT_EQ(e_.AddColdJob("-bad").code(), Code::kInvalidArgument);
}

TEST_F(HorizonTest, WithoutTheOptionNothingLeaves) {
  Engine e(EngineOptions{.start_ms = kStart});
  e.SetHorizon(kStart);
  SessionId s = e.OpenSession(kStart);
  PutRequest r;
  r.body = "x";
  r.delay_ms = 86'400'000;
  auto p = e.Put(kStart, s, r);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(e.HasJob(p->id));
  std::vector<ColdJob> out;
  e.TakeEvicted(&out);
  EXPECT_TRUE(out.empty());
}

}  // namespace
// ListJobs: a topic's jobs in one state, by id, in pages after a cursor;
// the other topic's jobs and the other states never show.
TEST_F(EngineTest, ListJobsPagesEachStateInIdOrder) {
  ASSERT_TRUE(e_.Watch(s_, "a").ok());
  ASSERT_TRUE(e_.Ignore(s_, "default").ok());
  std::map<JobState, std::vector<JobId>> want;
  for (int i = 0; i < 40; ++i) {
    // Priorities against the id order, so the ready heap's order is not it.
    JobId id = Put("job", static_cast<uint32_t>(100 - i), i % 4 == 1 ? 60'000 : 0, 10'000, "a");
    Put("other", 1, i % 2 == 0 ? 60'000 : 0, 10'000, "b");
    if (i % 4 == 1) want[JobState::kDelayed].push_back(id);
  }
  // Reserve 10 (lowest priority value first: the highest ids), bury 5 of them.
  std::vector<JobId> got = Reserve(s_, 0, 10);
  ASSERT_EQ(got.size(), 10u);
  for (size_t i = 0; i < got.size(); ++i) {
    if (i % 2 == 0) {
      ASSERT_TRUE(e_.Bury(now_, s_, got[i], std::nullopt).ok());
      want[JobState::kBuried].push_back(got[i]);
    } else {
      want[JobState::kReserved].push_back(got[i]);
    }
  }
  for (JobId id = 1; id < 100; ++id) {
    auto v = e_.Peek(now_, id);
    if (v.ok() && v->topic == "a" && v->state == JobState::kReady)
      want[JobState::kReady].push_back(id);
  }
  for (auto& [state, ids] : want) std::sort(ids.begin(), ids.end());
  EXPECT_EQ(want[JobState::kReady].size(), 20u);
  for (JobState state :
       {JobState::kReady, JobState::kDelayed, JobState::kReserved, JobState::kBuried}) {
    for (bool desc : {false, true}) {
      std::vector<JobId> expect = want[state];
      if (desc) std::reverse(expect.begin(), expect.end());
      std::vector<JobId> seen;
      ListJobsRequest r{.topic = "a", .state = state, .limit = 3, .desc = desc};
      for (int page = 0; page < 100; ++page) {
        bool more = true;
        std::vector<JobView> views = e_.ListJobs(now_, r, &more);
        for (const JobView& v : views) {
          EXPECT_EQ(v.topic, "a");
          EXPECT_EQ(v.state, state);
          EXPECT_EQ(v.body, "job");
          seen.push_back(v.id);
        }
        ASSERT_LE(views.size(), 3u);
        if (!more) break;
        ASSERT_EQ(views.size(), 3u) << "a full page before the last";
        r.after = views.back().id;
      }
      EXPECT_EQ(seen, expect) << JobStateName(state) << (desc ? " desc" : " asc");
    }
  }
  // No topic, no jobs; a limit larger than the jobs: all, and no more.
  bool more = true;
  EXPECT_TRUE(e_.ListJobs(now_, {.topic = "nope", .state = JobState::kReady}, &more).empty());
  EXPECT_FALSE(more);
  EXPECT_EQ(
      e_.ListJobs(now_, {.topic = "a", .state = JobState::kDelayed, .limit = 1000}, &more).size(),
      10u);
  EXPECT_FALSE(more);
  // Delayed jobs that come due, and reserved ones whose TTR ran out, move
  // to the ready list.
  Tick(60'000);
  EXPECT_TRUE(e_.ListJobs(now_, {.topic = "a", .state = JobState::kDelayed}, &more).empty());
  EXPECT_TRUE(e_.ListJobs(now_, {.topic = "a", .state = JobState::kReserved}, &more).empty());
  EXPECT_EQ(
      e_.ListJobs(now_, {.topic = "a", .state = JobState::kReady, .limit = 1000}, &more).size(),
      35u);
}

TEST_F(EngineTest, FindKeyLooksInEveryTopic) {
  PutRequest r;
  r.body = "x";
  r.key = "order-7";
  for (std::string_view topic : {"a", "b", "c"}) {
    r.topic = topic;
    r.delay_ms = topic == "b" ? 5000 : 0;
    ASSERT_TRUE(e_.Put(now_, s_, r).ok());
  }
  r.key = "order-8";
  ASSERT_TRUE(e_.Put(now_, s_, r).ok());
  std::vector<JobView> found = e_.FindKey(now_, "order-7");
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].topic, "a");
  EXPECT_EQ(found[1].topic, "b");
  EXPECT_EQ(found[1].state, JobState::kDelayed);
  EXPECT_EQ(found[2].topic, "c");
  EXPECT_TRUE(e_.FindKey(now_, "order-9").empty());
  EXPECT_TRUE(e_.FindKey(now_, "").empty());
  ASSERT_TRUE(e_.Delete(now_, 0, found[0].id).ok());
  EXPECT_EQ(e_.FindKey(now_, "order-7").size(), 2u);
}

// --max-topics: a use, watch or put that would make one topic more than
// the limit is refused; topics that exist go on; a dropped topic makes room.
TEST(EngineLimits, MaxTopics) {
  Engine e(EngineOptions{.start_ms = 1'000'000, .max_topics = 3});  // default + 2
  const TimeMs now = 1'000'000;
  SessionId s = e.OpenSession(now);
  ASSERT_TRUE(e.Watch(s, "a").ok());
  ASSERT_TRUE(e.Use(s, "b").ok());
  EXPECT_EQ(e.Watch(s, "c").code(), Code::kResourceExhausted);
  EXPECT_EQ(e.Use(s, "c").code(), Code::kResourceExhausted);
  PutRequest r;
  r.body = "x";
  r.ttr_ms = 1000;
  r.topic = "c";
  EXPECT_EQ(e.Put(now, s, r).code(), Code::kResourceExhausted);
  r.topic = "a";
  EXPECT_TRUE(e.Put(now, s, r).ok());
  EXPECT_TRUE(e.Watch(s, "a").ok());  // an existing topic: no new one
  // b is dropped once nothing refers to it: room for c.
  ASSERT_TRUE(e.Use(s, "default").ok());
  EXPECT_TRUE(e.Watch(s, "c").ok());
  EXPECT_EQ(e.CheckInvariants(), "");
}

// ---- Microsecond ticks (docs/engine.md, "Time") -----------------------------
// An engine on ticks_per_ms 1000 (as the Local backend runs it): every `now`
// is in microseconds, durations stay milliseconds, and a due time is the
// instant of the call plus the delay, to the microsecond.
class MicrosecondTicks : public ::testing::Test {
 protected:
  static constexpr TimeMs kUs = 1000;  // ticks in a millisecond
  MicrosecondTicks() : e_(EngineOptions{.start_ms = 1000, .ticks_per_ms = kUs}) {
    s_ = e_.OpenSession(now_);
  }
  void TearDown() override { EXPECT_EQ(e_.CheckInvariants(), ""); }
  // Moves the clock to `t` (microseconds) and applies what is due.
  void At(TimeMs t) {
    now_ = t;
    e_.Advance(now_);
  }
  JobId Put(TimeMs delay_ms, TimeMs ttr_ms = 10'000) {
    PutRequest r;
    r.body = "x";
    r.delay_ms = delay_ms;
    r.ttr_ms = ttr_ms;
    auto res = e_.Put(now_, s_, r);
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    return res.ok() ? res->id : 0;
  }
  JobState StateOf(JobId id) { return e_.StatsJob(now_, id)->state; }
  Code ReserveCode() { return e_.Reserve(now_, ReserveRequest{s_, 0, 1, false}).code(); }

  TimeMs now_ = 1000 * kUs;
  Engine e_;
  SessionId s_ = 0;
};

// Put at 1000.3 ms with a delay of 1000 ms: due at 2000.3 ms, not at
// 2000 ms (what a millisecond clock, 1000 + 1000, made of it).
TEST_F(MicrosecondTicks, DelayCountsFromTheInstantOfThePut) {
  At(1'000'300);
  JobId id = Put(1000);
  auto st = e_.StatsJob(now_, id);
  EXPECT_EQ(st->delay_ms, 1000);
  EXPECT_EQ(st->time_left_ms, 1000);
  EXPECT_EQ(st->created_ms, 1000) << "created: rounded down";
  EXPECT_EQ(st->due_ms, 2001) << "due: rounded up";
  At(2'000'000);
  EXPECT_EQ(StateOf(id), JobState::kDelayed);
  At(2'000'299);
  EXPECT_EQ(StateOf(id), JobState::kDelayed);
  EXPECT_EQ(e_.StatsJob(now_, id)->time_left_ms, 1) << "1 us left reads as 1 ms";
  At(2'000'300);
  EXPECT_EQ(StateOf(id), JobState::kReady);
  EXPECT_EQ(e_.now_ms(), 2000);
}

// Jumping from wake-up to wake-up (as the Local backend's timer does) lands
// on the due microsecond.
TEST_F(MicrosecondTicks, NextWakeupLandsOnTheDueMicrosecond) {
  At(1'000'300);
  JobId id = Put(1000);
  while (StateOf(id) == JobState::kDelayed) {
    TimeMs w = e_.NextWakeup();
    ASSERT_GT(w, now_);
    ASSERT_LE(w, 2'000'300);
    At(w);
  }
  EXPECT_EQ(now_, 2'000'300);
}

// The store sees milliseconds: due rounded up (a job read back after a
// restart is not early either), created rounded down.
TEST_F(MicrosecondTicks, RecordsRoundTheDueTimeUp) {
  Engine e(EngineOptions{.start_ms = 1000, .ticks_per_ms = kUs, .record_mutations = true});
  SessionId s = e.OpenSession(1'000'300);
  PutRequest r;
  r.body = "x";
  r.delay_ms = 1000;
  ASSERT_TRUE(e.Put(1'000'300, s, r).ok());
  r.delay_ms = 0;
  r.run_at = 3000;
  ASSERT_TRUE(e.Put(1'000'300, s, r).ok());
  std::vector<Mutation> m;
  e.TakeMutations(&m);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].record.due_ms, 2001);
  EXPECT_EQ(m[0].record.created_ms, 1000);
  EXPECT_EQ(m[0].record.delay_ms, 1000);
  EXPECT_EQ(m[1].record.due_ms, 3000) << "run_at is a whole millisecond already";
  EXPECT_EQ(m[1].record.delay_ms, 2000) << "1999.7 ms, rounded up";

  // Read back: ready at its millisecond, not before.
  Engine back(EngineOptions{.start_ms = 1000, .ticks_per_ms = kUs});
  ASSERT_TRUE(back.Restore(2'000'999, m[0].record, "x").ok());
  EXPECT_EQ(back.StatsJob(2'000'999, 1)->state, JobState::kDelayed);
  EXPECT_EQ(back.StatsJob(2'001'000, 1)->state, JobState::kReady);
  EXPECT_EQ(back.CheckInvariants(), "");
}

// A TTR runs from the instant of the reserve; the DEADLINE_SOON margin is
// 1000 ms of ticks.
TEST_F(MicrosecondTicks, TtrCountsFromTheInstantOfTheReserve) {
  JobId id = Put(0, 2000);
  At(1'000'700);
  ASSERT_EQ(e_.Reserve(now_, ReserveRequest{s_, 0, 1, false})->size(), 1u);
  EXPECT_EQ(e_.StatsJob(now_, id)->due_ms, 3001);
  // A waiting reserve of the holder gets DEADLINE_SOON 1000 ms before the end.
  ASSERT_TRUE(e_.Reserve(now_, ReserveRequest{s_, -1, 1, false}).ok());
  EXPECT_EQ(e_.NextWakeup(), 2'000'700);
  At(2'000'699);
  std::vector<Event> ev;
  e_.TakeEvents(&ev);
  EXPECT_TRUE(ev.empty());
  At(2'000'700);
  e_.TakeEvents(&ev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Event::Kind::kDeadlineSoon);
  At(3'000'699);
  EXPECT_EQ(StateOf(id), JobState::kReserved);
  At(3'000'700);
  EXPECT_EQ(StateOf(id), JobState::kReady);
}

// A release with a delay, a back-off and a pause count from their own
// instants too.
TEST_F(MicrosecondTicks, ReleaseBackoffAndPauseCountFromTheirInstants) {
  PutRequest r;
  r.body = "b";
  r.ttr_ms = 100;
  r.backoff = Backoff::List({250});
  auto put = e_.Put(now_, s_, r);
  ASSERT_TRUE(put.ok());
  JobId id = put->id;
  At(1'000'100);
  ASSERT_EQ(e_.Reserve(now_, ReserveRequest{s_, 0, 1, false})->size(), 1u);
  At(1'000'900);
  ASSERT_EQ(e_.Release(now_, s_, id, 1024, 50)->state, JobState::kDelayed);
  At(1'050'899);
  EXPECT_EQ(StateOf(id), JobState::kDelayed);
  At(1'050'900);
  EXPECT_EQ(StateOf(id), JobState::kReady);
  // TTR of 100 ms from 1050.95 ms, then the back-off of 250 ms.
  At(1'050'950);
  ASSERT_EQ(e_.Reserve(now_, ReserveRequest{s_, 0, 1, false})->size(), 1u);
  At(1'150'949);
  EXPECT_EQ(StateOf(id), JobState::kReserved);
  At(1'150'950);
  EXPECT_EQ(StateOf(id), JobState::kDelayed);
  At(1'400'949);
  EXPECT_EQ(StateOf(id), JobState::kDelayed);
  At(1'400'950);
  EXPECT_EQ(StateOf(id), JobState::kReady);
  // A pause of 500 ms from 1400.95 ms.
  ASSERT_TRUE(e_.PauseTopic(now_, "default", 500).ok());
  EXPECT_EQ(e_.StatsTopic(now_, "default")->pause_time_left_ms, 500);
  At(1'900'949);
  EXPECT_EQ(ReserveCode(), Code::kTimedOut);
  EXPECT_EQ(e_.StatsTopic(now_, "default")->pause_time_left_ms, 1) << "1 us left";
  At(1'900'950);
  EXPECT_EQ(ReserveCode(), Code::kOk);
}

// The horizon's marks are milliseconds: a job is beyond a mark when its due
// time rounded up is (so a job due at 5000.3 ms is beyond 5000).
TEST_F(MicrosecondTicks, HorizonComparesTheDueTimeRoundedUp) {
  Engine e(EngineOptions{.start_ms = 1000,
                         .ticks_per_ms = kUs,
                         .record_mutations = true,
                         .evict_beyond_horizon = true});
  e.SetHorizon(5000);
  SessionId s = e.OpenSession(1'000'300);
  PutRequest r;
  r.body = "x";
  r.delay_ms = 4000;  // due 5000.3 ms
  auto far = e.Put(1'000'300, s, r);
  ASSERT_TRUE(far.ok());
  EXPECT_FALSE(e.HasJob(far->id));
  std::vector<ColdJob> out;
  e.TakeEvicted(&out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].record.due_ms, 5001);
  e.SetHorizon(5001);
  r.delay_ms = 4000;  // due 5000.3 ms again: within the mark now
  auto near = e.Put(1'000'300, s, r);
  ASSERT_TRUE(near.ok());
  EXPECT_TRUE(e.HasJob(near->id));
  EXPECT_EQ(e.CheckInvariants(), "");
}

}  // namespace delayq

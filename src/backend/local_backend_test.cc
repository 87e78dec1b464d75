// The Local backend over a store: replies of changes wait for the writer
// thread, a failing store refuses changes but keeps reads going and catches
// up by itself, and recovery brings every job back in its state.
#include "backend/local_backend.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "store/mem_store.h"

namespace delayq::backend {
namespace {

using namespace std::chrono_literals;

class ManualClock : public Clock {
 public:
  TimeMs Now() const override { return now; }
  TimeMs now = 1'700'000'000'000;
};

// A store whose writes wait until the test opens the gate: proves that a
// reply is not sent before its change is written.
class GateStore final : public store::Store {
 public:
  explicit GateStore(store::Store& inner) : inner_(inner) {}
  Status Apply(const std::vector<Mutation>& batch) override {
    std::unique_lock<std::mutex> lock(mu_);
    entered_++;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    return inner_.Apply(batch);
  }
  Status Load(const std::function<Status(const JobRecord&, std::string_view)>& job,
              JobId* max_id) override {
    return inner_.Load(job, max_id);
  }
  Status NoteMaxId(JobId id) override { return inner_.NoteMaxId(id); }
  // Opens the gate when it goes (a failed test must not hang the writer).
  struct OpenAtExit {
    GateStore& gate;
    ~OpenAtExit() { gate.Open(); }
  };
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // The loop must have run first: it hands the batch to the writer.
  bool WaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 5s, [&] { return entered_ >= n; });
  }

 private:
  store::Store& inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int entered_ = 0;
};

class LocalBackendStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<LocalBackend> Make(store::Store* s) {
    LocalBackend::Options o;
    o.store = s;
    o.store_retry_interval = 20ms;
    o.on_store_health = [this](bool ok, const Status& error) {
      health_.push_back(ok);
      last_error_ = error;
    };
    return std::make_unique<LocalBackend>(io_, o, clock_);
  }
  // Runs the loop until `done` holds (the writer thread posts completions).
  bool RunUntil(const std::function<bool()>& done, std::chrono::milliseconds limit = 5s) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      io_.restart();
      io_.run_for(5ms);
    }
    return true;
  }
  // Puts and waits for the reply.
  Result<PutResult> PutAndWait(LocalBackend& b, SessionId s, const PutRequest& r) {
    std::optional<Result<PutResult>> got;
    b.Put(s, r, [&](Result<PutResult> res) { got = std::move(res); });
    EXPECT_TRUE(RunUntil([&] { return got.has_value(); })) << "no reply to a put";
    return got ? *got : Result<PutResult>(Status::Internal("no reply"));
  }
  Status DeleteAndWait(LocalBackend& b, SessionId s, JobId id) {
    std::optional<Status> got;
    b.Delete(s, id, [&](Status st) { got = st; });
    EXPECT_TRUE(RunUntil([&] { return got.has_value(); })) << "no reply to a delete";
    return got.value_or(Status::Internal("no reply"));
  }

  boost::asio::io_context io_;
  ManualClock clock_;
  std::vector<bool> health_;
  Status last_error_;
};

PutRequest Req(std::string_view body, TimeMs delay = 0, std::string_view key = {}) {
  PutRequest r;
  r.body = body;
  r.delay_ms = delay;
  r.key = key;
  return r;
}

TEST_F(LocalBackendStoreTest, AChangeIsRepliedOnlyOnceTheStoreHoldsIt) {
  store::MemStore mem;
  GateStore gate(mem);
  auto b = Make(&gate);
  SessionId s = b->OpenSession();
  GateStore::OpenAtExit open_at_exit{gate};
  std::optional<Result<PutResult>> got;
  b->Put(s, Req("hello"), [&](Result<PutResult> res) { got = std::move(res); });
  io_.restart();
  io_.poll();
  ASSERT_TRUE(gate.WaitEntered(1)) << "the batch never reached the store";
  io_.restart();
  io_.run_for(30ms);
  EXPECT_FALSE(got.has_value()) << "replied before the store held the job";
  EXPECT_EQ(mem.size(), 0u);
  // Reads do not wait: the job is visible at once.
  bool peeked = false;
  b->Peek(s, Backend::PeekKind::kId, 1, {}, {}, [&](Status st, Jobs jobs) {
    peeked = st.ok() && jobs.size() == 1 && jobs[0].body == "hello";
  });
  EXPECT_FALSE(peeked) << "a job was shown before its put was written";
  gate.Open();
  ASSERT_TRUE(RunUntil([&] { return got.has_value(); }));
  ASSERT_TRUE(got->ok());
  std::string body;
  EXPECT_TRUE(mem.Get((*got)->id, nullptr, &body));
  EXPECT_EQ(body, "hello");
  EXPECT_TRUE(peeked) << "the peek is answered once the job is written";
}

TEST_F(LocalBackendStoreTest, ChangesOfOneLoopTurnShareOneWrite) {
  store::MemStore mem;
  auto b = Make(&mem);
  int replies = 0;
  for (int i = 0; i < 100; ++i) {
    SessionId s = b->OpenSession();
    b->Put(s, Req("x"), [&](Result<PutResult> res) { replies += res.ok(); });
  }
  EXPECT_EQ(replies, 0);
  ASSERT_TRUE(RunUntil([&] { return replies == 100; }));
  EXPECT_EQ(mem.size(), 100u);
  EXPECT_EQ(mem.applies(), 1u) << "100 puts of one loop turn should be one write";
}

TEST_F(LocalBackendStoreTest, AReplyWaitsForEarlierChangesEvenWhenItChangesNothing) {
  // A second put with a live key changes nothing, but reports the job the
  // first put made: it must not be acknowledged before that job is durable.
  store::MemStore mem;
  GateStore gate(mem);
  auto b = Make(&gate);
  SessionId a = b->OpenSession(), c = b->OpenSession();
  GateStore::OpenAtExit open_at_exit{gate};
  std::optional<Result<PutResult>> first, second;
  b->Put(a, Req("one", 0, "order-1"), [&](Result<PutResult> r) { first = std::move(r); });
  b->Put(c, Req("two", 0, "order-1"), [&](Result<PutResult> r) { second = std::move(r); });
  io_.restart();
  io_.poll();
  ASSERT_TRUE(gate.WaitEntered(1));
  io_.restart();
  io_.run_for(20ms);
  EXPECT_FALSE(second.has_value()) << "a key hit was acknowledged before the job was written";
  gate.Open();
  ASSERT_TRUE(RunUntil([&] { return first.has_value() && second.has_value(); }));
  ASSERT_TRUE(second->ok());
  EXPECT_FALSE((*second)->created);
  EXPECT_EQ((*second)->id, (*first)->id);
}

TEST_F(LocalBackendStoreTest, AClosedSessionGetsNoLateReply) {
  store::MemStore mem;
  GateStore gate(mem);
  auto b = Make(&gate);
  SessionId s = b->OpenSession();
  GateStore::OpenAtExit open_at_exit{gate};
  int calls = 0;
  b->Put(s, Req("x"), [&](Result<PutResult>) { calls++; });
  io_.restart();
  io_.poll();
  ASSERT_TRUE(gate.WaitEntered(1));
  b->CloseSession(s);
  gate.Open();
  ASSERT_TRUE(RunUntil([&] { return mem.size() == 1; }));
  io_.restart();
  io_.run_for(20ms);
  EXPECT_EQ(calls, 0);
}

TEST_F(LocalBackendStoreTest, AFullDiskRefusesChangesKeepsReadsAndRecoversByItself) {
  store::MemStore mem;
  store::FaultyStore faulty(mem);
  auto b = Make(&faulty);
  SessionId s = b->OpenSession();
  auto kept = PutAndWait(*b, s, Req("before"));
  ASSERT_TRUE(kept.ok());

  faulty.set_full(true);
  JobId failed_id = b->engine().next_id();
  auto failed = PutAndWait(*b, s, Req("during"));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), Code::kUnavailable);
  ASSERT_TRUE(RunUntil([&] { return !b->store_healthy(); }));
  ASSERT_EQ(health_, std::vector<bool>{false});
  EXPECT_NE(last_error_.message().find("no space"), std::string::npos) << last_error_.message();

  // Changes are refused before they touch anything...
  auto refused = PutAndWait(*b, s, Req("refused"));
  EXPECT_EQ(refused.status().code(), Code::kUnavailable);
  EXPECT_NE(refused.status().message().find("refuses writes"), std::string::npos);
  EXPECT_EQ(DeleteAndWait(*b, s, kept->id).code(), Code::kUnavailable);
  // ...while reads and reserves go on.
  bool found = false;
  b->Peek(s, Backend::PeekKind::kId, kept->id, {}, {},
          [&](Status st, Jobs jobs) { found = st.ok() && jobs[0].body == "before"; });
  EXPECT_TRUE(found);
  std::vector<JobId> reserved;
  b->Reserve(ReserveRequest{s, 0, 1, false}, [&](Status st, Jobs jobs) {
    if (st.ok())
      for (const JobView& j : jobs) reserved.push_back(j.id);
  });
  EXPECT_EQ(reserved, std::vector<JobId>{kept->id});

  // Space comes back: the kept batch is written, changes are taken again.
  faulty.set_full(false);
  ASSERT_TRUE(RunUntil([&] { return b->store_healthy(); }));
  EXPECT_EQ(health_, (std::vector<bool>{false, true}));
  EXPECT_EQ(mem.size(), 2u) << "the batch that failed is written once the store takes writes";
  // Its job is shown again at once, with no other write in between.
  bool during_shown = false;
  b->Peek(s, Backend::PeekKind::kId, failed_id, {}, {},
          [&](Status st, Jobs jobs) { during_shown = st.ok() && jobs[0].body == "during"; });
  EXPECT_TRUE(during_shown);
  auto after = PutAndWait(*b, s, Req("after"));
  ASSERT_TRUE(after.ok());
  // The job of the failed write was kept, so it is served now.
  std::optional<std::vector<std::string>> bodies;
  b->Reserve(ReserveRequest{s, 0, 10, false}, [&](Status st, Jobs jobs) {
    bodies.emplace();
    if (st.ok())
      for (const JobView& j : jobs) bodies->emplace_back(j.body);
  });
  ASSERT_TRUE(RunUntil([&] { return bodies.has_value(); }));
  EXPECT_EQ(*bodies, (std::vector<std::string>{"during", "after"}));
  EXPECT_TRUE(DeleteAndWait(*b, s, kept->id).ok());
  ASSERT_TRUE(RunUntil([&] { return mem.size() == 2; }));
  EXPECT_FALSE(mem.Get(kept->id, nullptr, nullptr));
}

TEST_F(LocalBackendStoreTest, OneFailedWriteIsRetriedWithWhatCameAfterIt) {
  store::MemStore mem;
  store::FaultyStore faulty(mem);
  auto b = Make(&faulty);
  SessionId s = b->OpenSession();
  faulty.FailNext(1);
  auto failed = PutAndWait(*b, s, Req("a"));
  EXPECT_EQ(failed.status().code(), Code::kUnavailable);
  ASSERT_TRUE(RunUntil([&] { return health_.size() == 2; }));
  EXPECT_EQ(health_, (std::vector<bool>{false, true}));
  auto ok = PutAndWait(*b, s, Req("b"));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(mem.size(), 2u);
  EXPECT_EQ(faulty.failures(), 1u);
}

TEST_F(LocalBackendStoreTest, RecoveryBringsBackEveryStateCounterAndKey) {
  store::MemStore mem;
  JobId ready, delayed, buried, reserved, keyed, deleted;
  {
    auto b = Make(&mem);
    SessionId s = b->OpenSession();
    PutRequest pr = Req("ready");
    pr.priority = 7;
    pr.ttr_ms = 5000;
    ready = PutAndWait(*b, s, pr)->id;
    delayed = PutAndWait(*b, s, Req("delayed", 60'000))->id;
    PutRequest kr = Req("keyed", 0, "order-42");
    kr.max_tries = 3;
    kr.backoff = Backoff::List({1000, 2000});
    keyed = PutAndWait(*b, s, kr)->id;
    buried = PutAndWait(*b, s, Req("buried"))->id;
    reserved = PutAndWait(*b, s, Req("reserved"))->id;
    deleted = PutAndWait(*b, s, Req("deleted"))->id;
    ASSERT_TRUE(DeleteAndWait(*b, s, deleted).ok());
    // Reserve everything ready, then bury one and release one with a delay.
    std::vector<JobId> got;
    b->Reserve(ReserveRequest{s, 0, 10, false}, [&](Status, Jobs jobs) {
      for (const JobView& j : jobs) got.push_back(j.id);
    });
    ASSERT_EQ(got.size(), 4u);
    std::optional<Status> st;
    b->Bury(s, buried, 9, [&](Status x) { st = x; });
    ASSERT_TRUE(RunUntil([&] { return st.has_value(); }));
    std::optional<Result<JobState>> rel;
    b->Release(s, ready, 3, 0, [&](Result<JobState> x) { rel = std::move(x); });
    ASSERT_TRUE(RunUntil([&] { return rel.has_value(); }));
    // `keyed` and `reserved` stay reserved when the backend goes away.
  }
  auto b = Make(&mem);
  ASSERT_TRUE(b->Recover(nullptr, 1).ok());
  Engine& e = b->engine();
  TimeMs now = clock_.Now();
  auto st = [&](JobId id) { return e.StatsJob(now, id); };
  ASSERT_TRUE(st(ready).ok());
  EXPECT_EQ(st(ready)->state, JobState::kReady);
  EXPECT_EQ(st(ready)->priority, 3u);
  EXPECT_EQ(st(ready)->ttr_ms, 5000);
  EXPECT_EQ(st(ready)->reserves, 1u);
  EXPECT_EQ(st(ready)->releases, 1u);
  EXPECT_EQ(st(delayed)->state, JobState::kDelayed);
  EXPECT_EQ(st(delayed)->time_left_ms, 60'000);
  EXPECT_EQ(st(buried)->state, JobState::kBuried);
  EXPECT_EQ(st(buried)->priority, 9u);
  EXPECT_EQ(st(buried)->buries, 1u);
  EXPECT_EQ(st(reserved)->state, JobState::kReady) << "a reserved job comes back ready";
  EXPECT_EQ(st(reserved)->reserves, 1u);
  EXPECT_EQ(st(keyed)->state, JobState::kReady);
  EXPECT_EQ(st(keyed)->key, "order-42");
  EXPECT_EQ(st(deleted).status().code(), Code::kNotFound);
  auto by_key = e.PeekByKey(now, "default", "order-42");
  ASSERT_TRUE(by_key.ok());
  EXPECT_EQ(by_key->id, keyed);
  EXPECT_EQ(by_key->body, "keyed");
  EXPECT_EQ(e.CheckInvariants(), "");
  // Ids are never reused, not even the deleted highest one.
  SessionId s = b->OpenSession();
  auto next = PutAndWait(*b, s, Req("next"));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->id, deleted + 1);
}

}  // namespace
}  // namespace delayq::backend

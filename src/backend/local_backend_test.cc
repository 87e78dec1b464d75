// The Local backend over a store: replies of changes wait for the writer
// thread, a failing store refuses changes but keeps reads going and catches
// up by itself, and recovery brings every job back in its state.
#include "backend/local_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <random>
#include <tuple>

#include "backend_status.h"
#include "delayq/operations.h"
#include "manual_clock.h"
#include "store/journal.h"
#include "store/mem_store.h"
#include "test_seed.h"

namespace delayq::backend {
namespace {

using testing::Ch;

using namespace std::chrono_literals;

using testing::ManualClock;

// A store whose writes wait until the test opens the gate: proves that a
// reply is not sent before its change is written.
class GateStore final : public store::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  Status Apply(const std::vector<Mutation>& batch) override {
    std::unique_lock<std::mutex> lock(mu_);
    entered_++;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_ || passes_ > 0; });
    if (!open_) passes_--;
    return inner_.Apply(batch);
  }
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
  // Lets one write through the closed gate.
  void Pass() {
    std::lock_guard<std::mutex> lock(mu_);
    passes_++;
    cv_.notify_all();
  }
  // Writes wait again from the next one on.
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
  }
  // The loop must have run first: it hands the batch to the writer.
  bool WaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 5s, [&] { return entered_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int passes_ = 0;
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
    b.Delete(s, id, [&](Result<JobChange> st_r) {
      Status st = st_r.status();
      got = st;
    });
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
  EXPECT_FALSE(b->RepliesWaitForStore());
  std::optional<Result<PutResult>> got;
  b->Put(s, Req("hello"), [&](Result<PutResult> res) { got = std::move(res); });
  io_.restart();
  io_.poll();
  ASSERT_TRUE(gate.WaitEntered(1)) << "the batch never reached the store";
  io_.restart();
  io_.run_for(30ms);
  EXPECT_FALSE(got.has_value()) << "replied before the store held the job";
  EXPECT_EQ(mem.size(), 0u);
  EXPECT_TRUE(b->RepliesWaitForStore());  // the loop's second poll policy decides
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
  EXPECT_TRUE(mem.GetJob((*got)->id, nullptr, &body).ok());
  EXPECT_EQ(body, "hello");
  EXPECT_TRUE(peeked) << "the peek is answered once the job is written";
  EXPECT_FALSE(b->RepliesWaitForStore());
}

// Named objects: a change is acknowledged once the store holds it, with the
// jobs of the same turn in the same batch, and comes back after a restart.
TEST_F(LocalBackendStoreTest, NamedObjectsAreDurableAndComeBack) {
  store::MemStore mem;
  GateStore gate(mem);
  GateStore::OpenAtExit open_at_exit{gate};
  uint64_t version_before = 0;
  {
    auto b = Make(&gate);
    SessionId s = b->OpenSession();
    b->ObjectsVersion(ObjectKind::kSchedule, [&](Result<uint64_t> v) { version_before = *v; });
    std::optional<Status> put;
    std::optional<Result<PutResult>> job;
    b->Put(s, Req("with it"), [&](Result<PutResult> r) { job = std::move(r); });
    b->PutObject(ObjectKind::kSchedule, "nightly", R"({"cron":"0 3 * * *"})",
                 [&](Status st) { put = st; });
    io_.restart();
    io_.poll();
    ASSERT_TRUE(gate.WaitEntered(1));
    io_.restart();
    io_.run_for(30ms);
    EXPECT_FALSE(put.has_value()) << "acknowledged before the store held it";
    gate.Open();
    ASSERT_TRUE(RunUntil([&] { return put.has_value() && job.has_value(); }));
    EXPECT_TRUE(put->ok()) << put->ToString();
    EXPECT_EQ(mem.applies(), 1u) << "the job and the object went in one batch";
    std::optional<Status> other, gone, missing, bad;
    b->PutObject(ObjectKind::kPush, "nightly", "{}", [&](Status st) { other = st; });
    b->PutObject(ObjectKind::kSchedule, "drop", "{}", [](Status) {});
    b->DeleteObject(ObjectKind::kSchedule, "drop", [&](Status st) { gone = st; });
    b->DeleteObject(ObjectKind::kSchedule, "never", [&](Status st) { missing = st; });
    b->PutObject(ObjectKind::kSchedule, std::string(kMaxObjectNameLength + 1, 'n'), "{}",
                 [&](Status st) { bad = st; });
    ASSERT_TRUE(RunUntil([&] { return other && gone && missing && bad; }));
    EXPECT_TRUE(other->ok());
    EXPECT_TRUE(gone->ok());
    EXPECT_EQ(missing->code(), Code::kNotFound);
    EXPECT_EQ(bad->code(), Code::kInvalidArgument);
    uint64_t version_after = 0;
    b->ObjectsVersion(ObjectKind::kSchedule, [&](Result<uint64_t> v) { version_after = *v; });
    EXPECT_NE(version_after, version_before) << "a poller would miss the change";
  }
  auto b = Make(&mem);
  ASSERT_TRUE(b->Recover(nullptr, 1).ok());
  std::vector<StoredObject> schedules, pushes;
  b->ListObjects(ObjectKind::kSchedule, [&](auto r) { schedules = *r; });
  b->ListObjects(ObjectKind::kPush, [&](auto r) { pushes = *r; });
  std::vector<StoredObject> want{{ObjectKind::kSchedule, "nightly", R"({"cron":"0 3 * * *"})"}};
  EXPECT_EQ(schedules, want);
  ASSERT_EQ(pushes.size(), 1u);
  EXPECT_EQ(pushes[0].name, "nightly");
  uint64_t version = 0;
  b->ObjectsVersion(ObjectKind::kSchedule, [&](Result<uint64_t> v) { version = *v; });
  EXPECT_NE(version, 0u);
}

// A schedule's firing puts its job once: again, or after a restart, the
// same fire time is refused; the job and the cursor are written together.
TEST_F(LocalBackendStoreTest, AFiringPutsItsJobOnceAcrossARestart) {
  store::MemStore mem;
  auto fire = [&](LocalBackend& b, TimeMs at) {
    PutRequest r = Req("tick");
    r.topic = "reports";
    std::string key = "nightly@" + std::to_string(at);
    r.key = key;
    std::optional<Result<PutResult>> got;
    b.FireSchedule("nightly", at, "r1", r, [&](Result<PutResult> res) { got = std::move(res); });
    EXPECT_TRUE(RunUntil([&] { return got.has_value(); }));
    return got.value_or(Status::Internal("no reply"));
  };
  {
    auto b = Make(&mem);
    uint64_t applies = mem.applies();
    auto first = fire(*b, 1000);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    EXPECT_TRUE(first->created);
    EXPECT_EQ(mem.applies(), applies + 1) << "the job and the cursor in one batch";
    EXPECT_EQ(fire(*b, 1000).status().code(), Code::kConflict);
    EXPECT_EQ(fire(*b, 999).status().code(), Code::kConflict) << "never back in time";
  }
  auto b = Make(&mem);
  ASSERT_TRUE(b->Recover(nullptr, 1).ok());
  EXPECT_EQ(fire(*b, 1000).status().code(), Code::kConflict) << "fired twice across a restart";
  auto next = fire(*b, 2000);
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->created);
  EXPECT_EQ(mem.size(), 2u);
}

// A firing made ahead is taken back only by the revision that made it,
// only before its time, in one batch with the cursor's step back, which a
// restart keeps: the firing can then be made again.
TEST_F(LocalBackendStoreTest, AFiringMadeAheadIsTakenBackByItsRevision) {
  store::MemStore mem;
  const TimeMs at = clock_.Now() + 600'000;
  const std::string key = "nightly@" + std::to_string(at);
  auto fire = [&](LocalBackend& b, std::string_view rev) {
    PutRequest r = Req("tick");
    r.topic = "reports";
    r.key = key;
    r.run_at = at;
    std::optional<Result<PutResult>> got;
    b.FireSchedule("nightly", at, rev, r, [&](Result<PutResult> res) { got = std::move(res); });
    EXPECT_TRUE(RunUntil([&] { return got.has_value(); }));
    return got.value_or(Status::Internal("no reply"));
  };
  auto unfire = [&](LocalBackend& b, TimeMs when, std::string_view rev) {
    std::optional<Result<bool>> got;
    b.UnfireSchedule("nightly", "reports", when, rev, key,
                     [&](Result<bool> res) { got = std::move(res); });
    EXPECT_TRUE(RunUntil([&] { return got.has_value(); }));
    // 1: taken back, 0: not, -1: an error or no reply.
    return got && got->ok() ? int{**got} : -1;
  };
  {
    auto b = Make(&mem);
    ASSERT_TRUE(fire(*b, "r1").ok());
    EXPECT_EQ(unfire(*b, at, "r0"), 0) << "another revision's";
    EXPECT_EQ(unfire(*b, at + 1, "r1"), 0) << "another firing";
    uint64_t applies = mem.applies();
    EXPECT_EQ(unfire(*b, at, "r1"), 1);
    EXPECT_EQ(mem.applies(), applies + 1) << "the delete and the cursor in one batch";
    EXPECT_EQ(unfire(*b, at, "r1"), 0) << "taken back twice";
  }
  auto b = Make(&mem);
  ASSERT_TRUE(b->Recover(nullptr, 1).ok());
  EXPECT_EQ(mem.size(), 0u) << "the job is gone, and no cursor is left";
  auto again = fire(*b, "r2");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->created);
}

// While the store refuses writes, objects are refused too (nothing changes).
TEST_F(LocalBackendStoreTest, NamedObjectsAreRefusedWhileTheStoreFails) {
  store::MemStore mem;
  store::FaultyStore faulty(mem);
  auto b = Make(&faulty);
  faulty.set_full(true);
  std::optional<Status> first, second;
  b->PutObject(ObjectKind::kPush, "a", "{}", [&](Status st) { first = st; });
  ASSERT_TRUE(RunUntil([&] { return first.has_value(); }));
  EXPECT_FALSE(first->ok());
  b->PutObject(ObjectKind::kPush, "b", "{}", [&](Status st) { second = st; });
  ASSERT_TRUE(RunUntil([&] { return second.has_value(); }));
  EXPECT_EQ(second->code(), Code::kUnavailable);
  std::vector<StoredObject> listed;
  b->ListObjects(ObjectKind::kPush, [&](auto r) { listed = *r; });
  EXPECT_EQ(listed.size(), 1u) << "the first, whose outcome is unknown, is kept and retried";
  faulty.set_full(false);
  ASSERT_TRUE(RunUntil([&] { return b->store_healthy(); }));
  std::vector<StoredObject> stored;
  ASSERT_TRUE(RunUntil([&] {
    stored.clear();
    (void)mem.LoadObjects([&](const StoredObject& o) {
      stored.push_back(o);
      return Status::Ok();
    });
    return stored.size() == 1;
  }));
  EXPECT_EQ(stored[0].name, "a");
}

// With a journal, a change is acknowledged once the journal holds it; the
// writer takes it into the store later, unless it falls too far behind.
class LocalBackendJournalTest : public LocalBackendStoreTest {
 protected:
  void SetUp() override { OpenJournal(store::FsyncPolicy::kEverySec); }
  void OpenJournal(store::FsyncPolicy fsync,
                   ssize_t (*write_at)(int, const void*, size_t, off_t) = ::pwrite) {
    char tmpl[] = "/tmp/delayq-backend-journal-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store::Journal::Options jo;
    jo.dir = dir_;
    jo.fsync = fsync;
    jo.preallocate = fsync == store::FsyncPolicy::kAlways;  // as delayqd does
    jo.pwrite = write_at;
    auto j = store::Journal::Create(jo, 1);
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    journal_ = std::move(j).value();
  }
  void TearDown() override {
    journal_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<LocalBackend> MakeJournaled(store::Store* s, uint64_t max_unwritten,
                                              std::chrono::milliseconds window = 0ms) {
    LocalBackend::Options o;
    o.store = s;
    o.journal = journal_.get();
    o.journal_batch_window = window;
    o.journal_max_unwritten_bytes = max_unwritten;
    return std::make_unique<LocalBackend>(io_, o, clock_);
  }
  uint64_t Replayed() {
    uint64_t last = 0, changes = 0;
    EXPECT_TRUE(store::Journal::Replay(
                    dir_, 0,
                    [&](uint64_t, std::vector<Mutation>& batch) {
                      changes += batch.size();
                      return Status::Ok();
                    },
                    &last)
                    .ok());
    return changes;
  }
  // Puts a small job (answered: the journal holds it) and waits until the
  // writer is stuck at the closed gate with it; then puts 2,000 bytes of
  // `fill`, more than the bound of 1,000 behind the writer (MakeJournaled),
  // so that its reply, kept in *got, waits for the writer.
  void FallBehind(LocalBackend& b, SessionId s, GateStore& gate, char fill,
                  std::optional<Result<PutResult>>* got) {
    ASSERT_TRUE(PutAndWait(b, s, Req("small")).ok());
    ASSERT_TRUE(gate.WaitEntered(1));
    b.Put(s, Req(std::string(2000, fill)), [got](Result<PutResult> r) { *got = std::move(r); });
    EXPECT_FALSE(RunUntil([&] { return got->has_value(); }, 100ms)) << "replied past the bound";
    EXPECT_EQ(Replayed(), 2u);  // journaled all the same
  }
  std::string dir_;
  std::unique_ptr<store::Journal> journal_;
};

TEST_F(LocalBackendJournalTest, AChangeIsRepliedOnceTheJournalHoldsItNotTheStore) {
  store::MemStore mem;
  GateStore gate(mem);
  auto b = MakeJournaled(&gate, uint64_t{32} << 20);
  GateStore::OpenAtExit open_at_exit{gate};
  SessionId s = b->OpenSession();
  // The gate is closed: the store takes nothing, yet the puts are answered.
  for (int i = 1; i <= 3; ++i) {
    Result<PutResult> r = PutAndWait(*b, s, Req("job " + std::to_string(i)));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->id, static_cast<JobId>(i));
  }
  EXPECT_EQ(mem.size(), 0u);
  EXPECT_EQ(Replayed(), 3u);
  gate.Open();
  EXPECT_TRUE(RunUntil([&] { return mem.size() == 3; })) << mem.size();
}

TEST_F(LocalBackendJournalTest, RepliesWaitForTheWriterOnceItFallsTooFarBehind) {
  store::MemStore mem;
  GateStore gate(mem);
  auto b = MakeJournaled(&gate, 1000);
  GateStore::OpenAtExit open_at_exit{gate};
  SessionId s = b->OpenSession();
  std::optional<Result<PutResult>> got;
  ASSERT_NO_FATAL_FAILURE(FallBehind(*b, s, gate, 'b', &got));
  gate.Open();
  ASSERT_TRUE(RunUntil([&] { return got.has_value(); })) << "no reply once the writer caught up";
  ASSERT_TRUE(got->ok()) << got->status().ToString();
  EXPECT_EQ((*got)->id, 2u);
  EXPECT_TRUE(RunUntil([&] { return mem.size() == 2; }));
}

TEST_F(LocalBackendJournalTest, WhileTheWriterStaysBehindEachReplyWaitsOnlyForItsOwnBatch) {
  store::MemStore mem;
  GateStore gate(mem);
  auto b = MakeJournaled(&gate, 1000);
  GateStore::OpenAtExit open_at_exit{gate};
  SessionId s1 = b->OpenSession(), s2 = b->OpenSession();
  // The writer is stuck at the gate with the first batch; a's batch, put
  // behind it, waits in its queue.
  std::optional<Result<PutResult>> a, c;
  ASSERT_NO_FATAL_FAILURE(FallBehind(*b, s1, gate, 'a', &a));
  // The first write goes; the writer takes a's batch and is stuck again.
  gate.Pass();
  ASSERT_TRUE(gate.WaitEntered(2));
  // Another client's put keeps the writer behind after a's batch is written.
  b->Put(s2, Req(std::string(2000, 'c')), [&](Result<PutResult> r) { c = std::move(r); });
  EXPECT_FALSE(RunUntil([&] { return c.has_value(); }, 50ms)) << "replied past the bound";
  EXPECT_FALSE(a.has_value());
  // a's batch is written: a is answered, though the writer is still more
  // than 1,000 bytes behind (c's batch waits at the gate).
  gate.Pass();
  ASSERT_TRUE(gate.WaitEntered(3));
  ASSERT_TRUE(RunUntil([&] { return a.has_value(); })) << "waited for the writer to catch up";
  ASSERT_TRUE(a->ok()) << a->status().ToString();
  EXPECT_EQ((*a)->id, 2u);
  EXPECT_FALSE(RunUntil([&] { return c.has_value(); }, 50ms)) << "replied before written";
  gate.Open();
  ASSERT_TRUE(RunUntil([&] { return c.has_value(); }));
  ASSERT_TRUE(c->ok()) << c->status().ToString();
  EXPECT_EQ((*c)->id, 3u);
  EXPECT_TRUE(RunUntil([&] { return mem.size() == 3; }));
}

// Under always: a store that syncs the journal before each write, as
// RocksStore does, and counts the writes that had to sync; its writes wait
// at a gate while it is closed.
class SyncingGateStore final : public store::ForwardingStore {
 public:
  SyncingGateStore(store::Store& inner, store::Journal& journal)
      : ForwardingStore(inner), journal_(journal) {}
  Status ApplyThrough(std::vector<Mutation>& batch, uint64_t journal_lsn) override {
    if (journal_lsn > journal_.synced_lsn()) {
      syncing_writes_++;
      if (Status st = journal_.SyncThrough(journal_lsn); !st.ok()) return st;
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
    return inner_.Apply(batch);
  }
  void Set(bool open) {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = open;
    cv_.notify_all();
  }
  int syncing_writes() const { return syncing_writes_.load(); }

 private:
  store::Journal& journal_;
  std::atomic<int> syncing_writes_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
};

class LocalBackendAlwaysTest : public LocalBackendJournalTest {
 protected:
  void SetUp() override { OpenJournal(store::FsyncPolicy::kAlways); }
  uint64_t LoopSyncs(const LocalBackend& b) { return b.SampleMetrics().store->loop_syncs; }
};

TEST_F(LocalBackendAlwaysTest, ALoneClientsChangesAreSyncedByTheLoopBeforeTheyAreReplied) {
  store::MemStore mem;
  SyncingGateStore st(mem, *journal_);
  auto b = MakeJournaled(&st, uint64_t{32} << 20);
  SessionId s = b->OpenSession();
  // The first few batches go through the writer's sync: one client alone
  // is told from a lull among many only after a few.
  for (int i = 1; i <= 4; ++i) {
    ASSERT_TRUE(PutAndWait(*b, s, Req("warm " + std::to_string(i))).ok());
    EXPECT_EQ(journal_->synced_lsn(), journal_->last_lsn()) << "put " << i << " replied unsynced";
  }
  const uint64_t loop_syncs = LoopSyncs(*b);
  const int writer_syncs = st.syncing_writes();
  EXPECT_GE(writer_syncs, 3);
  // The store takes nothing now, yet the puts and deletes are answered,
  // each once the loop synced the journal record that holds it.
  st.Set(false);
  for (int i = 1; i <= 5; ++i) {
    Result<PutResult> r = PutAndWait(*b, s, Req("job " + std::to_string(i)));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(journal_->synced_lsn(), journal_->last_lsn()) << "put " << i << " replied unsynced";
    ASSERT_TRUE(DeleteAndWait(*b, s, r->id).ok());
    EXPECT_EQ(journal_->synced_lsn(), journal_->last_lsn())
        << "delete " << i << " replied unsynced";
  }
  EXPECT_EQ(LoopSyncs(*b), loop_syncs + 10);
  st.Set(true);
  EXPECT_TRUE(RunUntil([&] { return mem.size() == 4; })) << mem.size();
  EXPECT_LE(st.syncing_writes(), writer_syncs + 1) << "the writer synced again what the loop had";
}

TEST_F(LocalBackendAlwaysTest, ClientsWaitingTogetherLeaveTheSyncToTheWriter) {
  store::MemStore mem;
  SyncingGateStore st(mem, *journal_);
  auto b = MakeJournaled(&st, uint64_t{32} << 20);
  SessionId a = b->OpenSession(), c = b->OpenSession();
  for (int i = 0; i < 10; ++i) {
    int replies = 0;
    for (SessionId s : {a, c})
      b->Put(s, Req("x"), [&](Result<PutResult> r) {
        EXPECT_TRUE(r.ok());
        EXPECT_EQ(journal_->synced_lsn(), journal_->last_lsn()) << "replied unsynced";
        replies++;
      });
    ASSERT_TRUE(RunUntil([&] { return replies == 2; }));
  }
  EXPECT_EQ(LoopSyncs(*b), 0u);
  EXPECT_GE(st.syncing_writes(), 10);
}

TEST_F(LocalBackendAlwaysTest, AChangeOfNothingDoesNotWaitForAWriteWithNothingToSync) {
  // A reserve's counters have nothing to sync: while nothing else waits,
  // the writer holds them back for its window (here 3 s). A put of a live
  // key, which changes nothing, must not wait for that write.
  store::MemStore mem;
  SyncingGateStore st(mem, *journal_);
  auto b = MakeJournaled(&st, uint64_t{32} << 20, 3s);
  SessionId s = b->OpenSession();
  Result<PutResult> first = PutAndWait(*b, s, Req("one", 0, "order-1"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  bool reserved = false;
  b->Reserve(ReserveRequest{s, 0, 1, false}, [&](Status r, Jobs jobs) {
    EXPECT_TRUE(r.ok()) << r.ToString();
    EXPECT_EQ(jobs.size(), 1u);
    reserved = true;
  });
  ASSERT_TRUE(RunUntil([&] { return reserved; }));
  // The reserve's batch goes to the writer (the loop's posted flush).
  io_.restart();
  io_.run_for(50ms);
  std::optional<Result<PutResult>> again;
  b->Put(s, Req("two", 0, "order-1"), [&](Result<PutResult> r) { again = std::move(r); });
  EXPECT_TRUE(RunUntil([&] { return again.has_value(); }, 1s)) << "waited for the writer's window";
  if (again) {
    ASSERT_TRUE(again->ok()) << again->status().ToString();
    EXPECT_FALSE((*again)->created);
    EXPECT_EQ((*again)->id, first->id);
  }
  ASSERT_TRUE(RunUntil([&] { return mem.size() == 1; }));
}

// The journal's next `failing_appends` record writes fail as on a full disk.
std::atomic<int> failing_appends{0};
ssize_t FailingPwrite(int fd, const void* data, size_t n, off_t at) {
  if (failing_appends.load() > 0) {
    failing_appends--;
    errno = ENOSPC;
    return -1;
  }
  return ::pwrite(fd, data, n, at);
}

// Under everysec, a put whose reply waited only for the writer to catch up
// (its record appended) is answered as done when a later append fails:
// only the commands of the batches not appended get the error.
TEST_F(LocalBackendJournalTest, AFailedAppendAnswersOnlyWhatItDidNotAppendWithTheError) {
  journal_.reset();
  std::filesystem::remove_all(dir_);
  OpenJournal(store::FsyncPolicy::kEverySec, FailingPwrite);
  store::MemStore mem;
  GateStore gate(mem);
  auto b = MakeJournaled(&gate, 1000);
  GateStore::OpenAtExit open_at_exit{gate};
  SessionId s = b->OpenSession();
  // The writer is stuck and over its bound: a's reply waits for it.
  std::optional<Result<PutResult>> a, c;
  ASSERT_NO_FATAL_FAILURE(FallBehind(*b, s, gate, 'a', &a));
  // c's append fails.
  failing_appends = 1;
  b->Put(s, Req("c"), [&](Result<PutResult> r) { c = std::move(r); });
  ASSERT_TRUE(RunUntil([&] { return a.has_value() && c.has_value(); }, 2s));
  ASSERT_TRUE(a->ok()) << "a's record is in the journal: " << a->status().ToString();
  EXPECT_EQ((*a)->id, 2u);
  ASSERT_FALSE(c->ok());
  EXPECT_EQ(c->status().code(), Code::kUnavailable) << c->status().ToString();
  gate.Open();
  // c's batch is kept and appended again: all three reach the store.
  EXPECT_TRUE(RunUntil([&] { return mem.size() == 3; }, 5s)) << mem.size();
}

// Under always, a store whose writes sync the journal only once its gate
// is open (RocksStore syncs it before each write).
class GateThenSyncStore final : public store::ForwardingStore {
 public:
  GateThenSyncStore(store::Store& inner, store::Journal& journal)
      : ForwardingStore(inner), journal_(journal) {}
  Status ApplyThrough(std::vector<Mutation>& batch, uint64_t journal_lsn) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return open_; });
    }
    if (Status st = journal_.SyncThrough(journal_lsn); !st.ok()) return st;
    return inner_.Apply(batch);
  }
  void Set(bool open) {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = open;
    cv_.notify_all();
  }

 private:
  store::Journal& journal_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
};

// A put whose journal append failed is answered with the error, kept, and
// appended again once the disk takes it. Until that record is synced, a
// put of the same key (which finds the job and changes nothing) is not
// answered: it would acknowledge a job a crash could still lose.
TEST_F(LocalBackendAlwaysTest, AChangeOfNothingWaitsForTheSyncOfARetriedAppend) {
  journal_.reset();
  std::filesystem::remove_all(dir_);
  OpenJournal(store::FsyncPolicy::kAlways, FailingPwrite);
  store::MemStore mem;
  GateThenSyncStore st(mem, *journal_);
  auto b = MakeJournaled(&st, uint64_t{32} << 20);
  // Open before the backend goes, whatever fails: its writer waits there.
  struct OpenAtExit {
    GateThenSyncStore& st;
    ~OpenAtExit() { st.Set(true); }
  } open_at_exit{st};
  SessionId s = b->OpenSession();
  st.Set(false);
  failing_appends = 1;
  Result<PutResult> first = PutAndWait(*b, s, Req("one", 0, "order-1"));
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), Code::kUnavailable) << first.status().ToString();
  // Appended again by the retry (the gate keeps the writer from syncing it).
  ASSERT_TRUE(RunUntil([&] { return journal_->last_lsn() > 0 && b->store_healthy(); }, 5s));
  EXPECT_LT(journal_->synced_lsn(), journal_->last_lsn());
  std::optional<Result<PutResult>> again;
  uint64_t synced_at_reply = 0;
  b->Put(s, Req("two", 0, "order-1"), [&](Result<PutResult> r) {
    synced_at_reply = journal_->synced_lsn();
    again = std::move(r);
  });
  EXPECT_FALSE(RunUntil([&] { return again.has_value(); }, 300ms))
      << "acknowledged a job whose record is not synced";
  st.Set(true);
  ASSERT_TRUE(RunUntil([&] { return again.has_value(); }));
  ASSERT_TRUE(again->ok()) << again->status().ToString();
  EXPECT_FALSE((*again)->created);
  EXPECT_GE(synced_at_reply, journal_->last_lsn());
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

// A push target or schedule delete that finds nothing may find nothing
// because another client's delete, not durable yet, came first: its "not
// found" waits for that one, or a crash could bring back what it said is
// gone.
TEST_F(LocalBackendStoreTest, ANotFoundObjectWaitsForTheDeleteThatMadeIt) {
  store::MemStore mem;
  GateStore gate(mem);
  auto b = Make(&gate);
  GateStore::OpenAtExit open_at_exit{gate};
  std::optional<Status> put;
  b->PutObject(ObjectKind::kPush, "orders", "{}", [&](Status st) { put = st; });
  gate.Open();
  ASSERT_TRUE(RunUntil([&] { return put.has_value(); }));
  ASSERT_TRUE(put->ok());
  gate.Close();
  std::optional<Status> first, second;
  b->DeleteObject(ObjectKind::kPush, "orders", [&](Status st) { first = st; });
  b->DeleteObject(ObjectKind::kPush, "orders", [&](Status st) { second = st; });
  io_.restart();
  io_.poll();
  ASSERT_TRUE(gate.WaitEntered(2));
  io_.restart();
  io_.run_for(20ms);
  EXPECT_FALSE(second.has_value()) << "a not-found acknowledged before the delete that made it";
  gate.Open();
  ASSERT_TRUE(RunUntil([&] { return first && second; }));
  EXPECT_TRUE(first->ok());
  EXPECT_EQ(second->code(), Code::kNotFound);
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

// Whether an operation's reply waits for the store is its row of the
// operation table (delayq/operations.h, `durable`): each operation below
// runs on a job made durable first, with the store's writes held and
// another session's put among them; a durable one must not be answered
// until they are let through, any other at once. Every durable row must
// have a case here.
TEST_F(LocalBackendStoreTest, EachOperationWaitsForTheStoreAsItsRowSays) {
  store::MemStore mem;
  GateStore gate(mem);
  auto b = Make(&gate);
  GateStore::OpenAtExit open_at_exit{gate};
  gate.Open();
  // How the job the operation acts on is made ready first.
  // kObject: a push target named by the topic is stored.
  enum class Prep { kNone, kReady, kKeyed, kReserved, kBuried, kObject };
  using Act = std::function<void(LocalBackend&, SessionId, JobId, std::string_view topic,
                                 std::function<void()> replied)>;
  struct Case {
    Op op;
    Prep prep;
    Act act;
  };
  auto change = [](std::function<void()> f) {
    return [f = std::move(f)](Result<JobChange>) { f(); };
  };
  const std::vector<Case> cases = {
      {Op::kPut, Prep::kNone,
       [](LocalBackend& b, SessionId s, JobId, std::string_view, auto f) {
         b.Put(s, Req("new"), [f](Result<PutResult>) { f(); });
       }},
      {Op::kDelete, Prep::kReady,
       [&](LocalBackend& b, SessionId s, JobId id, std::string_view, auto f) {
         b.Delete(s, id, change(f));
       }},
      {Op::kDeleteKey, Prep::kKeyed,
       [&](LocalBackend& b, SessionId s, JobId, std::string_view t, auto f) {
         b.DeleteByKey(s, t, "k", change(f));
       }},
      {Op::kFinish, Prep::kReserved,
       [&](LocalBackend& b, SessionId s, JobId id, std::string_view, auto f) {
         b.Finish(s, id, change(f));
       }},
      {Op::kRelease, Prep::kReserved,
       [&](LocalBackend& b, SessionId s, JobId id, std::string_view, auto f) {
         b.Release(s, id, std::nullopt, std::nullopt, change(f));
       }},
      {Op::kBury, Prep::kReserved,
       [&](LocalBackend& b, SessionId s, JobId id, std::string_view, auto f) {
         b.Bury(s, id, std::nullopt, change(f));
       }},
      {Op::kTouch, Prep::kReserved,
       [&](LocalBackend& b, SessionId s, JobId id, std::string_view, auto f) {
         b.Touch(s, id, change(f));
       }},
      {Op::kKick, Prep::kBuried,
       [](LocalBackend& b, SessionId s, JobId, std::string_view t, auto f) {
         b.Kick(s, t, 1, [f](Result<uint64_t>) { f(); });
       }},
      {Op::kKickJob, Prep::kBuried,
       [&](LocalBackend& b, SessionId s, JobId id, std::string_view, auto f) {
         b.KickJob(s, id, change(f));
       }},
      {Op::kClearTopic, Prep::kReady,
       [](LocalBackend& b, SessionId s, JobId, std::string_view t, auto f) {
         b.ClearTopic(s, t, kClearAll, [f](Result<uint64_t>) { f(); });
       }},
      {Op::kPauseTopic, Prep::kReady,
       [](LocalBackend& b, SessionId, JobId, std::string_view t, auto f) {
         b.PauseTopic(t, 1000, [f](Status) { f(); });
       }},
      {Op::kPutSchedule, Prep::kNone,
       [](LocalBackend& b, SessionId, JobId, std::string_view, auto f) {
         b.PutObject(ObjectKind::kSchedule, "s", "{}", [f](Status) { f(); });
       }},
      {Op::kDeleteSchedule, Prep::kNone,
       [](LocalBackend& b, SessionId, JobId, std::string_view, auto f) {
         b.PutObject(ObjectKind::kSchedule, "gone", "{}", [](Status) {});
         b.DeleteObject(ObjectKind::kSchedule, "gone", [f](Status) { f(); });
       }},
      {Op::kReserve, Prep::kReady,
       [](LocalBackend& b, SessionId s, JobId, std::string_view, auto f) {
         b.Reserve(ReserveRequest{s, 0, 1, false}, [f](Status, Jobs) { f(); });
       }},
      {Op::kPeek, Prep::kReady,
       [](LocalBackend& b, SessionId s, JobId id, std::string_view, auto f) {
         b.Peek(s, Backend::PeekKind::kId, id, {}, {}, [f](Status, Jobs) { f(); });
       }},
      {Op::kSetPush, Prep::kNone,
       [](LocalBackend& b, SessionId, JobId, std::string_view t, auto f) {
         b.PutObject(ObjectKind::kPush, t, "{}", [f](Status) { f(); });
       }},
      {Op::kDeletePush, Prep::kObject,
       [](LocalBackend& b, SessionId, JobId, std::string_view t, auto f) {
         b.DeleteObject(ObjectKind::kPush, t, [f](Status) { f(); });
       }},
      {Op::kStatsTopic, Prep::kReady,
       [](LocalBackend& b, SessionId, JobId, std::string_view t, auto f) {
         b.StatsTopic(t, [f](Result<TopicStats>) { f(); });
       }},
  };
  for (const Operation& row : kOperations) {
    if (!row.durable) continue;
    EXPECT_TRUE(
        std::any_of(cases.begin(), cases.end(), [&](const Case& c) { return c.op == row.op; }))
        << "no case for the durable operation " << row.name;
  }
  for (const Case& c : cases) {
    const Operation& row = OperationOf(c.op);
    SCOPED_TRACE(std::string(row.name));
    const std::string topic = "t-" + std::string(row.name);
    SessionId s = b->OpenSession();
    ASSERT_TRUE(b->Use(s, topic).ok());
    ASSERT_TRUE(b->Watch(s, topic).ok());
    ASSERT_TRUE(b->Ignore(s, "default").ok());  // where the pending puts below go
    JobId id = 0;
    if (c.prep == Prep::kObject) {
      std::optional<Status> got;
      b->PutObject(ObjectKind::kPush, topic, "{}", [&](Status st) { got = st; });
      ASSERT_TRUE(RunUntil([&] { return got.has_value(); }));
      ASSERT_TRUE(got->ok());
    } else if (c.prep != Prep::kNone) {
      auto put = PutAndWait(*b, s, Req("job", 0, c.prep == Prep::kKeyed ? "k" : ""));
      ASSERT_TRUE(put.ok());
      id = put->id;
    }
    if (c.prep == Prep::kReserved || c.prep == Prep::kBuried) {
      std::optional<Status> got;
      JobId reserved = 0;
      b->Reserve(ReserveRequest{s, 0, 1, false}, [&](Status st, Jobs jobs) {
        got = st;
        if (!jobs.empty()) reserved = jobs[0].id;
      });
      ASSERT_TRUE(RunUntil([&] { return got.has_value(); }));
      ASSERT_TRUE(got->ok());
      ASSERT_EQ(reserved, id);
    }
    if (c.prep == Prep::kBuried) {
      std::optional<Status> got;
      b->Bury(s, id, std::nullopt, [&](Result<JobChange> r) { got = r.status(); });
      ASSERT_TRUE(RunUntil([&] { return got.has_value(); }));
      ASSERT_TRUE(got->ok());
    }
    gate.Close();
    // A change of another session, not yet written: only a durable
    // operation waits for it (after it, as for its own change).
    SessionId other = b->OpenSession();
    bool pending_put = false;
    b->Put(other, Req("pending"), [&](Result<PutResult>) { pending_put = true; });
    bool replied = false;
    c.act(*b, s, id, topic, [&] { replied = true; });
    io_.restart();
    io_.run_for(30ms);
    EXPECT_FALSE(pending_put);
    EXPECT_EQ(replied, !row.durable)
        << (row.durable ? "answered before its change was written"
                        : "an operation that changes nothing durable waited for the store");
    gate.Open();
    ASSERT_TRUE(RunUntil([&] { return replied && pending_put; }));
    b->CloseSession(other);
    b->CloseSession(s);
  }
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
  // Each answer counted as the caller got it: the put whose write failed
  // (answered after the store's answer) and the one refused at once.
  if (const OperationOutcomes* counts = b->operation_outcomes(); counts != nullptr) {
    EXPECT_EQ(counts->Of(CountedOp::kPut, Outcome::kOk), 2u);
    EXPECT_EQ(counts->Of(CountedOp::kPut, Outcome::kUnavailable), 2u);
    EXPECT_EQ(counts->Of(CountedOp::kDelete, Outcome::kUnavailable), 1u);
    EXPECT_EQ(counts->Of(CountedOp::kReserve, Outcome::kOk), 1u);
  }
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
  EXPECT_EQ(mem.GetJob(kept->id, nullptr, nullptr).code(), Code::kNotFound);
}

// A reserve that would hand out the job of a failed write is answered at
// once that the store has not written it: its reply waits for the batches
// before its own changes (the reserve's counters), which failed, and not
// for the batch its counters open.
TEST_F(LocalBackendStoreTest, AReserveOfAJobOfAFailedWriteIsRefusedAtOnce) {
  store::MemStore mem;
  store::FaultyStore faulty(mem);
  auto b = Make(&faulty);
  SessionId s = b->OpenSession();
  faulty.set_full(true);
  auto failed = PutAndWait(*b, s, Req("during"));
  ASSERT_EQ(failed.status().code(), Code::kUnavailable);
  std::optional<Status> got;
  b->Reserve(ReserveRequest{s, 0, 1, false}, [&](Status st, Jobs) { got = st; });
  ASSERT_TRUE(got.has_value()) << "the reply waited";
  EXPECT_EQ(got->code(), Code::kUnavailable);
  EXPECT_NE(got->message().find("has not written"), std::string::npos) << got->message();
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
    b->Bury(s, buried, 9, [&](Result<JobChange> x_r) {
      Status x = x_r.status();
      st = x;
    });
    ASSERT_TRUE(RunUntil([&] { return st.has_value(); }));
    std::optional<Result<JobChange>> rel;
    b->Release(s, ready, 3, 0, [&](Result<JobChange> x) { rel = std::move(x); });
    ASSERT_TRUE(RunUntil([&] { return rel.has_value(); }));
    // `keyed` and `reserved` stay reserved when the backend goes away.
  }
  auto b = Make(&mem);
  ASSERT_TRUE(b->Recover(nullptr, 1).ok());
  Engine& e = b->engine();
  TimeMs now = e.now();
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

// ---- the horizon (docs/storage.md, "The horizon") ------------------------

class HorizonTest : public LocalBackendStoreTest {
 protected:
  static constexpr TimeMs kHorizon = 60'000;
  std::unique_ptr<LocalBackend> MakeWithHorizon(store::Store* s, TimeMs horizon = kHorizon,
                                                size_t batch = 10'000) {
    LocalBackend::Options o;
    o.store = s;
    o.horizon_ms = horizon;
    o.horizon_batch = batch;
    return std::make_unique<LocalBackend>(io_, o, clock_);
  }
  // Calls `op` with a reply function and waits for the reply.
  std::string Await(const std::function<void(std::function<void(std::string)>)>& op) {
    std::optional<std::string> out;
    op([&](std::string r) { out = std::move(r); });
    EXPECT_TRUE(RunUntil([&] { return out.has_value(); })) << "no reply";
    return out.value_or("no reply");
  }
  static std::string Show(const Status& st) { return std::string(CodeName(st.code())); }
  static std::string Show(const JobView& v) {
    return std::to_string(v.id) + "/" + std::string(v.topic) + "/" + std::string(v.key) + "/" +
           std::string(v.body) + "/" + std::string(JobStateName(v.state)) + "/" +
           std::to_string(v.priority);
  }
  static std::string Show(Status st, Jobs jobs) {
    if (!st.ok()) return Show(st);
    std::string out = "jobs";
    for (const JobView& v : jobs) out += " " + Show(v);
    return out;
  }
  static std::string Show(const JobStats& j) {
    return std::to_string(j.id) + " " + j.topic + " " + j.key + " " +
           std::string(JobStateName(j.state)) + " pri=" + std::to_string(j.priority) +
           " created=" + std::to_string(j.created_ms) + " delay=" + std::to_string(j.delay_ms) +
           " ttr=" + std::to_string(j.ttr_ms) + " due=" + std::to_string(j.due_ms) +
           " left=" + std::to_string(j.time_left_ms) + " counts=" + std::to_string(j.reserves) +
           "," + std::to_string(j.timeouts) + "," + std::to_string(j.releases) + "," +
           std::to_string(j.buries) + "," + std::to_string(j.kicks) +
           " size=" + std::to_string(j.body_size);
  }
  std::string Put(LocalBackend& b, SessionId s, const PutRequest& r) {
    return Await([&](auto reply) {
      b.Put(s, r, [reply](Result<PutResult> res) {
        reply(res.ok() ? std::to_string(res->id) + (res->created ? " new " : " old ") +
                             std::string(JobStateName(res->state))
                       : Show(res.status()));
      });
    });
  }
  std::string Peek(LocalBackend& b, Backend::PeekKind kind, JobId id, std::string_view topic,
                   std::string_view key = {}) {
    return Await([&](auto reply) {
      b.Peek(0, kind, id, topic, key, [reply](Status st, Jobs jobs) { reply(Show(st, jobs)); });
    });
  }
  std::string StatsJob(LocalBackend& b, JobId id) {
    return Await([&](auto reply) {
      b.StatsJob(id, [reply](Result<JobStats> r) { reply(r.ok() ? Show(*r) : Show(r.status())); });
    });
  }
  std::string Change(LocalBackend& b, const std::function<void(LocalBackend&, Done)>& op) {
    return Await([&](auto reply) { op(b, [reply](Status st) { reply(Show(st)); }); });
  }
  std::string Count(LocalBackend& b,
                    const std::function<void(LocalBackend&, Callback<uint64_t>)>& op) {
    return Await([&](auto reply) {
      op(b, [reply](Result<uint64_t> r) { reply(r.ok() ? std::to_string(*r) : Show(r.status())); });
    });
  }
  std::string Reserve(LocalBackend& b, SessionId s) {
    return Await([&](auto reply) {
      b.Reserve(ReserveRequest{s, 0, 1, false},
                [reply](Status st, Jobs jobs) { reply(Show(st, jobs)); });
    });
  }
  void Advance(TimeMs ms, std::initializer_list<LocalBackend*> backends) {
    clock_.now += ms;
    for (LocalBackend* b : backends) b->Poll();
  }
  TimeMs Now() const { return clock_.now; }
};

TEST_F(HorizonTest, FarJobsStayOnDiskAndComeIntoMemoryBeforeTheyAreDue) {
  store::MemStore mem;
  auto b = MakeWithHorizon(&mem);
  SessionId s = b->OpenSession();
  Engine& e = b->engine();
  EXPECT_EQ(Put(*b, s, Req("near", 10'000)), "1 new delayed");
  EXPECT_EQ(Put(*b, s, Req("in an hour", 3'600'000)), "2 new delayed");
  EXPECT_EQ(Put(*b, s, Req("in two hours", 7'200'000)), "3 new delayed");
  EXPECT_TRUE(e.HasJob(1));
  EXPECT_FALSE(e.HasJob(2));
  EXPECT_FALSE(e.HasJob(3));
  EXPECT_EQ(e.ColdJobs(), 2u);
  EXPECT_EQ(mem.size(), 3u) << "every job is on disk";
  EXPECT_EQ(e.Stats(e.now()).delayed, 3u);
  // Moving in steps of a quarter horizon, as the timer does.
  for (TimeMs t = 0; t < 3'600'000 - kHorizon; t += kHorizon / 4) Advance(kHorizon / 4, {b.get()});
  EXPECT_TRUE(e.HasJob(2)) << "the loader brings a job in a horizon ahead";
  EXPECT_FALSE(e.HasJob(3));
  EXPECT_EQ(Reserve(*b, s), "jobs 1/default//near/reserved/1024");
  EXPECT_EQ(Change(*b, [&](LocalBackend& x, Done d) { x.Delete(s, 1, Ch(d)); }), "ok");
  EXPECT_EQ(Reserve(*b, s), "timed_out");
  while (Now() < 1'700'000'000'000 + 3'600'000) Advance(1'000, {b.get()});
  EXPECT_EQ(Reserve(*b, s), "jobs 2/default//in an hour/reserved/1024");
  EXPECT_EQ(e.CheckInvariants(), "");
}

TEST_F(HorizonTest, ColdJobsAreFoundByIdAndKey) {
  store::MemStore mem;
  auto b = MakeWithHorizon(&mem);
  SessionId s = b->OpenSession();
  Engine& e = b->engine();
  EXPECT_EQ(Put(*b, s, Req("a", 86'400'000, "order-1")), "1 new delayed");
  EXPECT_EQ(Put(*b, s, Req("b", 86'400'000, "order-2")), "2 new delayed");
  EXPECT_EQ(Put(*b, s, Req("c", 86'400'000)), "3 new delayed");
  EXPECT_EQ(Put(*b, s, Req("d", 86'400'000)), "4 new delayed");
  EXPECT_EQ(e.ColdJobs(), 4u);
  // A put with the key of a cold job returns that job.
  EXPECT_EQ(Put(*b, s, Req("again", 0, "order-1")), "1 old delayed");
  EXPECT_EQ(Peek(*b, Backend::PeekKind::kKey, 0, "default", "order-2"),
            "jobs 2/default/order-2/b/delayed/1024");
  EXPECT_EQ(StatsJob(*b, 3).substr(0, 24), "3 default  delayed pri=1");
  EXPECT_EQ(Change(*b, [&](LocalBackend& x, Done d) { x.KickJob(s, 4, Ch(d)); }), "ok");
  EXPECT_EQ(Reserve(*b, s), "jobs 4/default//d/reserved/1024");
  EXPECT_EQ(
      Change(*b, [&](LocalBackend& x, Done d) { x.DeleteByKey(s, "default", "order-1", Ch(d)); }),
      "ok");
  EXPECT_EQ(Peek(*b, Backend::PeekKind::kKey, 0, "default", "order-1"), "not_found");
  EXPECT_EQ(Peek(*b, Backend::PeekKind::kId, 1, "default"), "not_found");
  EXPECT_EQ(Change(*b, [&](LocalBackend& x, Done d) { x.Delete(s, 1, Ch(d)); }), "not_found");
  EXPECT_EQ(Change(*b, [&](LocalBackend& x, Done d) { x.Delete(s, 99, Ch(d)); }), "not_found");
  EXPECT_EQ(mem.GetJob(1, nullptr, nullptr).code(), Code::kNotFound);
  EXPECT_EQ(e.Stats(e.now()).delayed, 2u);
  EXPECT_EQ(e.CheckInvariants(), "");
}

TEST_F(HorizonTest, AJobNotYetWrittenIsFoundAndLoaded) {
  store::MemStore mem;
  GateStore gate(mem);
  auto b = MakeWithHorizon(&gate);
  GateStore::OpenAtExit open_at_exit{gate};
  SessionId s = b->OpenSession();
  Engine& e = b->engine();
  int replies = 0;
  b->Put(s, Req("k", 2 * kHorizon, "key-1"), [&](Result<PutResult> r) { replies += r.ok(); });
  b->Put(s, Req("l", 2 * kHorizon), [&](Result<PutResult> r) { replies += r.ok(); });
  io_.restart();
  io_.poll();
  ASSERT_TRUE(gate.WaitEntered(1));
  EXPECT_EQ(e.ColdJobs(), 2u);
  EXPECT_EQ(mem.size(), 0u) << "the gate holds the write";
  // By key, before the store has it: the same job, not a second one.
  std::optional<Result<PutResult>> again;
  b->Put(s, Req("k2", 0, "key-1"), [&](Result<PutResult> r) { again = std::move(r); });
  EXPECT_TRUE(e.HasJob(1));
  // The loader takes the other from what is on its way to the store.
  clock_.now += kHorizon + 1;
  b->Poll();
  EXPECT_TRUE(e.HasJob(2));
  EXPECT_EQ(e.ColdJobs(), 0u);
  gate.Open();
  ASSERT_TRUE(RunUntil([&] { return replies == 2 && again.has_value(); }));
  ASSERT_TRUE(again->ok());
  EXPECT_EQ((*again)->id, 1u);
  EXPECT_FALSE((*again)->created);
  EXPECT_EQ(e.CheckInvariants(), "");
}

TEST_F(HorizonTest, KickPeekDelayedAndClearReachColdJobsInDueOrder) {
  store::MemStore mem;
  auto b = MakeWithHorizon(&mem, kHorizon, /*batch=*/4);
  SessionId s = b->OpenSession();
  Engine& e = b->engine();
  // Due in 3 h, 1 h, 2 h, ... (25 jobs), all cold.
  for (int i = 0; i < 25; ++i)
    Put(*b, s, Req("j" + std::to_string(i + 1), 3'600'000 * (1 + (i * 7) % 25)));
  EXPECT_EQ(e.ColdJobs(), 25u);
  // Job 1 is due in 1 h, job 2 in 8 h, job 19 in 2 h (i = 18: 126 % 25 = 1).
  EXPECT_EQ(Peek(*b, Backend::PeekKind::kDelayed, 0, "default"), "jobs 1/default//j1/delayed/1024");
  // A job taken in by id beyond the others does not jump the queue.
  EXPECT_EQ(StatsJob(*b, 2).substr(0, 2), "2 ");
  EXPECT_EQ(Count(*b, [&](LocalBackend& x, Callback<uint64_t> d) { x.Kick(s, "default", 2, d); }),
            "2");
  EXPECT_EQ(Reserve(*b, s), "jobs 1/default//j1/reserved/1024");
  EXPECT_EQ(Reserve(*b, s), "jobs 19/default//j19/reserved/1024");
  EXPECT_EQ(Count(*b, [&](LocalBackend& x,
                          Callback<uint64_t> d) { x.ClearTopic(s, "default", kClearAll, d); }),
            "23");
  EXPECT_EQ(e.ColdJobs(), 0u);
  EXPECT_EQ(e.Stats(e.now()).delayed, 0u);
  EXPECT_EQ(mem.size(), 2u) << "only the two reserved jobs are left";
  EXPECT_EQ(e.CheckInvariants(), "");
}

TEST_F(HorizonTest, ReleaseAndBackOffBeyondTheHorizonLeaveMemory) {
  store::MemStore mem;
  auto b = MakeWithHorizon(&mem);
  SessionId s = b->OpenSession();
  Engine& e = b->engine();
  PutRequest r = Req("pay");
  r.ttr_ms = 1'000;
  r.backoff = Backoff::List({600'000});
  Put(*b, s, r);
  Put(*b, s, Req("two"));
  EXPECT_EQ(Reserve(*b, s), "jobs 1/default//pay/reserved/1024");
  EXPECT_EQ(Reserve(*b, s), "jobs 2/default//two/reserved/1024");
  std::string released = Await([&](auto reply) {
    b->Release(s, 2, 5, 3'600'000, [reply](Result<JobChange> st) {
      reply(st.ok() ? std::string(JobStateName(st->state)) : Show(st.status()));
    });
  });
  EXPECT_EQ(released, "delayed");
  EXPECT_FALSE(e.HasJob(2));
  Advance(1'000, {b.get()});  // job 1's TTR runs out: back-off 10 minutes
  EXPECT_FALSE(e.HasJob(1));
  EXPECT_EQ(e.ColdJobs(), 2u);
  ASSERT_TRUE(RunUntil([&] {
    JobRecord rec;
    return mem.GetJob(1, &rec, nullptr).ok() && rec.timeouts == 1;
  })) << "the TTR expiry is written";
  while (Now() < 1'700'000'000'000 + 601'000) Advance(kHorizon / 4, {b.get()});
  EXPECT_EQ(Reserve(*b, s), "jobs 1/default//pay/reserved/1024");
  EXPECT_EQ(StatsJob(*b, 2).substr(0, 26), "2 default  delayed pri=5 c");
  EXPECT_EQ(e.CheckInvariants(), "");
}

TEST_F(HorizonTest, RecoveryLeavesFarJobsOnDisk) {
  store::MemStore mem;
  {
    auto b = MakeWithHorizon(&mem);
    SessionId s = b->OpenSession();
    for (int i = 0; i < 100; ++i) Put(*b, s, Req("far", 86'400'000 + i, "k" + std::to_string(i)));
    for (int i = 0; i < 5; ++i) Put(*b, s, Req("near", 1'000));
  }
  auto b = MakeWithHorizon(&mem);
  ASSERT_TRUE(b->Recover(nullptr, 1).ok());
  Engine& e = b->engine();
  EXPECT_EQ(e.ColdJobs(), 100u);
  EXPECT_EQ(e.Stats(e.now()).delayed, 105u);
  EXPECT_FALSE(e.HasJob(1));
  EXPECT_TRUE(e.HasJob(101));
  SessionId s = b->OpenSession();
  EXPECT_EQ(Put(*b, s, Req("dup", 0, "k7")), "8 old delayed");
  EXPECT_EQ(Put(*b, s, Req("next")), "106 new ready") << "ids go on above the stored ones";
  EXPECT_EQ(e.CheckInvariants(), "");
}

// Recovery counts far jobs per run of one topic: runs broken by another
// topic or by a job it loads must all be counted, each in its own topic.
TEST_F(HorizonTest, RecoveryCountsFarJobsOfInterleavedTopics) {
  store::MemStore mem;
  {
    auto b = MakeWithHorizon(&mem);
    SessionId s = b->OpenSession();
    for (int i = 0; i < 100; ++i) {
      PutRequest r = Req("far", 86'400'000 + i);
      r.topic = i % 3 == 0 ? "b" : "a";
      Put(*b, s, r);
      if (i % 7 == 0) Put(*b, s, Req("near", 1'000));
    }
  }
  auto b = MakeWithHorizon(&mem);
  ASSERT_TRUE(b->Recover(nullptr, 1).ok());
  Engine& e = b->engine();
  EXPECT_EQ(e.ColdJobs("a"), 66u);
  EXPECT_EQ(e.ColdJobs("b"), 34u);
  EXPECT_EQ(e.ColdJobs(), 100u);
  EXPECT_EQ(e.Stats(e.now()).delayed, 115u);
  EXPECT_EQ(e.CheckInvariants(), "");
}

// The same random operations on a backend with a short horizon (and a tiny
// loader batch) and on one that holds every job in memory: every reply and
// every count must be the same.
TEST_F(HorizonTest, RandomOperationsMatchABackendWithoutHorizon) {
  store::MemStore mem_a, mem_b;
  auto a = MakeWithHorizon(&mem_a, /*horizon=*/2'000, /*batch=*/3);
  auto b = MakeWithHorizon(&mem_b, /*horizon=*/0);
  std::mt19937_64 rng(delayq::testing::TestSeed(20261121, "DELAYQ_HORIZON_SEED"));
  auto pick = [&](uint64_t n) { return static_cast<uint64_t>(rng() % n); };
  std::vector<SessionId> sessions;
  for (int i = 0; i < 3; ++i) {
    SessionId sa = a->OpenSession(), sb = b->OpenSession();
    ASSERT_EQ(sa, sb);
    sessions.push_back(sa);
    for (const char* t : {"t0", "t1"}) {
      ASSERT_TRUE(a->Watch(sa, t).ok());
      ASSERT_TRUE(b->Watch(sb, t).ok());
    }
  }
  const char* topics[] = {"t0", "t1"};
  int ops = 1500, cold_seen = 0;
  if (const char* env = std::getenv("DELAYQ_HORIZON_OPS")) ops = std::atoi(env);
  for (int i = 0; i < ops; ++i) {
    SessionId s = sessions[pick(3)];
    std::string topic = topics[pick(2)];
    JobId id = 1 + pick(a->engine().next_id());
    std::string key = pick(3) == 0 ? "k" + std::to_string(pick(8)) : "";
    std::string body = "b" + std::to_string(i);  // outlives `run` (a put holds a view)
    uint64_t op = pick(100);
    std::function<std::string(LocalBackend&)> run;
    if (op < 30) {
      PutRequest r;
      r.topic = topic;
      r.key = key;
      r.priority = static_cast<uint32_t>(pick(4));
      TimeMs delays[] = {0, 500, 1'999, 2'001, 5'000, 20'000};
      r.delay_ms = delays[pick(6)];
      r.ttr_ms = 1'000 + static_cast<TimeMs>(pick(4'000));
      if (pick(4) == 0) r.backoff = Backoff::Exponential(1'500, 8'000);
      r.named = !key.empty() && pick(2) == 0;
      r.body = body;
      run = [&, r](LocalBackend& x) { return Put(x, s, r); };
    } else if (op < 45) {
      run = [&](LocalBackend& x) { return Reserve(x, s); };
    } else if (op < 52) {
      run = [&](LocalBackend& x) {
        return Change(x, [&](LocalBackend& y, Done d) { y.Delete(s, id, Ch(d)); });
      };
    } else if (op < 57) {
      run = [&](LocalBackend& x) {
        return Change(x, [&](LocalBackend& y, Done d) {
          y.DeleteByKey(s, topic, "k" + std::to_string(pick(8)), Ch(d));
        });
      };
    } else if (op < 65) {
      TimeMs delay = pick(2) ? 0 : 1'000 * static_cast<TimeMs>(pick(10));
      run = [&, delay](LocalBackend& x) {
        return Await([&](auto reply) {
          x.Release(s, id, 3, delay, [reply](Result<JobChange> st) {
            reply(st.ok() ? std::string(JobStateName(st->state)) : Show(st.status()));
          });
        });
      };
    } else if (op < 68) {
      run = [&](LocalBackend& x) {
        return Change(x, [&](LocalBackend& y, Done d) { y.Bury(s, id, 2, Ch(d)); });
      };
    } else if (op < 72) {
      uint64_t bound = 1 + pick(4);
      run = [&, bound](LocalBackend& x) {
        return Count(x, [&](LocalBackend& y, Callback<uint64_t> d) { y.Kick(s, topic, bound, d); });
      };
    } else if (op < 75) {
      run = [&](LocalBackend& x) {
        return Change(x, [&](LocalBackend& y, Done d) { y.KickJob(s, id, Ch(d)); });
      };
    } else if (op < 79) {
      run = [&](LocalBackend& x) { return Peek(x, Backend::PeekKind::kId, id, topic); };
    } else if (op < 81) {
      run = [&](LocalBackend& x) {
        return Peek(x, Backend::PeekKind::kKey, 0, topic, "k" + std::to_string(pick(8)));
      };
    } else if (op < 84) {
      run = [&](LocalBackend& x) { return Peek(x, Backend::PeekKind::kDelayed, 0, topic); };
    } else if (op < 87) {
      run = [&](LocalBackend& x) { return StatsJob(x, id); };
    } else if (op < 88) {
      run = [&](LocalBackend& x) {
        return Count(x, [&](LocalBackend& y, Callback<uint64_t> d) {
          y.ClearTopic(s, topic, pick(2) ? kClearDelayed : kClearAll, d);
        });
      };
    } else if (op < 90) {
      run = [&](LocalBackend& x) {
        return Await([&](auto reply) {
          x.ReserveJob(s, id, [reply](Status st, Jobs jobs) { reply(Show(st, jobs)); });
        });
      };
    } else if (op < 94) {
      // By name: a name of the puts above, or a job's number in decimal.
      std::string name = pick(2) ? "k" + std::to_string(pick(8)) : std::to_string(id);
      uint64_t how = pick(3);
      run = [&, name, how](LocalBackend& x) {
        if (how == 2) return Peek(x, Backend::PeekKind::kName, 0, {}, name);
        return Change(x, [&](LocalBackend& y, Done d) {
          if (how == 0) return y.FinishByName(name, Ch(d));
          y.DeleteByName(name, Ch(d));
        });
      };
    } else {
      TimeMs step = static_cast<TimeMs>(pick(1'200));
      run = [&, step](LocalBackend& x) {
        if (&x == a.get()) clock_.now += step;  // once for both
        x.Poll();
        return std::string("advanced");
      };
    }
    // The random picks inside `run` must be the same for both backends.
    auto saved = rng;
    std::string got_a = run(*a);
    auto after_a = rng;
    rng = saved;
    std::string got_b = run(*b);
    ASSERT_EQ(rng, after_a);
    ASSERT_EQ(got_a, got_b) << "operation " << i << " (kind " << op << ")";
    cold_seen += a->engine().ColdJobs() > 0;
    EngineStats sa = a->engine().Stats(Now()), sb = b->engine().Stats(Now());
    ASSERT_EQ(std::tie(sa.ready, sa.reserved, sa.delayed, sa.buried, sa.total_jobs),
              std::tie(sb.ready, sb.reserved, sb.delayed, sb.buried, sb.total_jobs))
        << "operation " << i;
    ASSERT_EQ(a->engine().CheckInvariants(), "") << "operation " << i;
  }
  EXPECT_GT(cold_seen, ops / 4) << "the horizon must have held jobs on disk for a good part";
}

}  // namespace
}  // namespace delayq::backend

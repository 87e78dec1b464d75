// The writer thread over a store that records what it is given: group
// commit order, and deferrable changes held back, dropped when a later change
// of the same job comes first, written after their moment or at the end.
#include "store/writer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "store/mem_store.h"

namespace delayq::store {
namespace {

using std::chrono::milliseconds;

// Records every change the store is asked to apply, in order.
class RecordingStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  Status Apply(const std::vector<Mutation>& batch) override {
    Status st = inner_.Apply(batch);
    std::lock_guard<std::mutex> lock(mu_);
    if (st.ok())
      for (const Mutation& m : batch) applied_.push_back(m);
    return st;
  }
  std::vector<Mutation> applied() const {
    std::lock_guard<std::mutex> lock(mu_);
    return applied_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Mutation> applied_;
};

Mutation Put(JobId id) {
  Mutation m;
  m.kind = Mutation::Kind::kPut;
  m.record.id = id;
  m.record.topic = "t";
  m.body = "body";
  return m;
}

Mutation Reserved(JobId id, uint32_t reserves) {
  Mutation m{Mutation::Kind::kUpdate, Put(id).record, {}, /*deferrable=*/true};
  m.record.reserves = reserves;
  return m;
}

Mutation Delete(JobId id) { return Mutation{Mutation::Kind::kDelete, Put(id).record, {}}; }

// Submits a batch and waits until the writer reports it.
Status SubmitAndWait(Writer& w, std::vector<Mutation> batch) {
  std::promise<Status> done;
  auto f = done.get_future();
  w.Submit(std::move(batch), [&done](Status st) { done.set_value(st); });
  return f.get();
}

std::string Kinds(const std::vector<Mutation>& ms) {
  std::string out;
  for (const Mutation& m : ms) {
    out += m.kind == Mutation::Kind::kPut ? "P" : m.kind == Mutation::Kind::kUpdate ? "U" : "D";
    out += std::to_string(m.record.id) + " ";
  }
  return out;
}

TEST(WriterTest, AReserveFollowedByTheJobsNextChangeIsNeverWritten) {
  MemStore mem;
  RecordingStore rec(mem);
  {
    Writer w(rec, nullptr, milliseconds(200), milliseconds(3'600'000));
    ASSERT_TRUE(SubmitAndWait(w, {Put(1), Put(2)}).ok());
    // Reported applied at once, though held back.
    ASSERT_TRUE(SubmitAndWait(w, {Reserved(1, 1)}).ok());
    ASSERT_TRUE(SubmitAndWait(w, {Reserved(2, 1), Delete(1)}).ok());
    EXPECT_EQ(Kinds(rec.applied()), "P1 P2 D1 ");
    // A second reserve of the same job replaces the first.
    ASSERT_TRUE(SubmitAndWait(w, {Reserved(2, 2)}).ok());
  }  // stopping writes what is still held
  EXPECT_EQ(Kinds(rec.applied()), "P1 P2 D1 U2 ");
  JobRecord r;
  std::string body;
  ASSERT_TRUE(mem.GetJob(2, &r, &body).ok());
  EXPECT_EQ(r.reserves, 2u);
  EXPECT_EQ(body, "body");
}

// The writer's thread is named, so that `top -H` tells it from the loop.
TEST(WriterTest, ItsThreadIsNamed) {
  MemStore mem;
  Writer w(mem, nullptr, milliseconds(200), milliseconds(50));
  ASSERT_TRUE(SubmitAndWait(w, {Put(1)}).ok());  // the thread is running
  bool found = false;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    found |= name == "delayq-writer";
  }
  EXPECT_TRUE(found);
}

TEST(WriterTest, AHeldChangeIsWrittenAfterItsMoment) {
  MemStore mem;
  RecordingStore rec(mem);
  Writer w(rec, nullptr, milliseconds(200), milliseconds(50));
  ASSERT_TRUE(SubmitAndWait(w, {Put(1), Reserved(1, 1)}).ok());
  EXPECT_EQ(Kinds(rec.applied()), "P1 ");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (rec.applied().size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(Kinds(rec.applied()), "P1 U1 ");
}

TEST(WriterTest, HeldChangesWaitForAFailingStoreAndFollowWhatCameFirst) {
  MemStore mem;
  FaultyStore faulty(mem);
  RecordingStore rec(faulty);
  std::vector<bool> health;
  std::mutex mu;
  Writer w(
      rec,
      [&](bool ok, const Status&) {
        std::lock_guard<std::mutex> lock(mu);
        health.push_back(ok);
      },
      milliseconds(10), milliseconds(20));
  ASSERT_TRUE(SubmitAndWait(w, {Put(1)}).ok());
  faulty.set_full(true);
  EXPECT_EQ(SubmitAndWait(w, {Put(2), Reserved(1, 1)}).code(), Code::kUnavailable);
  std::this_thread::sleep_for(milliseconds(60));  // past the moment, still failing
  EXPECT_EQ(Kinds(rec.applied()), "P1 ");
  faulty.set_full(false);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (rec.applied().size() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(Kinds(rec.applied()), "P1 P2 U1 ");
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(health, (std::vector<bool>{false, true}));
}

}  // namespace
}  // namespace delayq::store

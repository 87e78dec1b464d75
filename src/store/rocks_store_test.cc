// The RocksDB store on a real directory: what is applied comes back after a
// reopen, indexes follow the jobs, damage is reported, never read as data.
#include "store/rocks_store.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "store/mem_store.h"
#include "store/record_codec.h"
#include "temp_dir.h"
#include "test_seed.h"

namespace delayq::store {
namespace {

namespace fs = std::filesystem;

class RocksStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.empty()) << "mkdtemp failed"; }

  std::unique_ptr<RocksStore> Open(FsyncPolicy fsync = FsyncPolicy::kAlways,
                                   size_t recent_jobs = 65'536) {
    auto r = RocksStore::Open({dir_, fsync, recent_jobs});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  static Mutation Put(JobId id, std::string key, JobState state, TimeMs due, std::string body) {
    Mutation m;
    m.kind = Mutation::Kind::kPut;
    m.record.id = id;
    m.record.topic = "orders";
    m.record.key = std::move(key);
    m.record.state = state;
    m.record.due_ms = state == JobState::kDelayed ? due : 0;
    m.record.ttr_ms = 60'000;
    m.body = std::move(body);
    return m;
  }
  static Mutation Update(JobRecord r) {
    return Mutation{Mutation::Kind::kUpdate, std::move(r), {}};
  }
  static Mutation Delete(JobRecord r) {
    return Mutation{Mutation::Kind::kDelete, std::move(r), {}};
  }

  std::map<JobId, std::pair<JobRecord, std::string>> LoadAll(Store& s, JobId* max_id) {
    std::map<JobId, std::pair<JobRecord, std::string>> out;
    Status st = s.Load(
        [&](const JobRecord& r, std::string_view body) {
          out[r.id] = {r, std::string(body)};
          return Status::Ok();
        },
        max_id);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }

  delayq::testing::TempDir tmp_;
  const std::string dir_ = tmp_.path();
};

TEST_F(RocksStoreTest, AppliedChangesSurviveAReopen) {
  {
    auto s = Open();
    ASSERT_TRUE(s);
    Mutation a = Put(1, "k1", JobState::kDelayed, 5000, "first");
    Mutation b = Put(2, "", JobState::kReady, 0, std::string(70000, 'x'));
    ASSERT_TRUE(s->Apply({a, b}).ok());
    JobRecord r = a.record;
    r.state = JobState::kBuried;
    r.due_ms = 0;
    r.buries = 1;
    ASSERT_TRUE(s->Apply({Update(r)}).ok());  // keeps the body
    ASSERT_TRUE(s->Apply({Put(3, "", JobState::kReady, 0, "gone"), Delete(b.record)}).ok());
    ASSERT_TRUE(s->Apply({Delete(Put(3, "", JobState::kReady, 0, "").record)}).ok());
  }
  auto s = Open();
  ASSERT_TRUE(s);
  JobId max_id = 0;
  auto jobs = LoadAll(*s, &max_id);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[1].first.state, JobState::kBuried);
  EXPECT_EQ(jobs[1].first.buries, 1u);
  EXPECT_EQ(jobs[1].second, "first");
  EXPECT_EQ(max_id, 3u);  // ids are never reused, even of deleted jobs
}

Mutation ObjectChange(Mutation::Kind kind, ObjectKind object, std::string name,
                      std::string value = {}) {
  Mutation m;
  m.kind = kind;
  m.object = StoredObject{object, std::move(name), std::move(value)};
  return m;
}

std::vector<StoredObject> LoadObjectsOf(Store& s) {
  std::vector<StoredObject> out;
  Status st = s.LoadObjects([&](const StoredObject& o) {
    out.push_back(o);
    return Status::Ok();
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

// Named objects go in the same batches as jobs, by kind and name, and the
// jobs' load never sees them.
TEST_F(RocksStoreTest, NamedObjectsSurviveAReopen) {
  using K = Mutation::Kind;
  {
    auto s = Open();
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->Apply({Put(1, "", JobState::kReady, 0, "job"),
                          ObjectChange(K::kPutObject, ObjectKind::kSchedule, "b", "{\"v\":1}"),
                          ObjectChange(K::kPutObject, ObjectKind::kPush, "z", "{}"),
                          ObjectChange(K::kPutObject, ObjectKind::kSchedule, "a", "{}")})
                    .ok());
    ASSERT_TRUE(s->Apply({ObjectChange(K::kPutObject, ObjectKind::kSchedule, "b", "{\"v\":2}"),
                          ObjectChange(K::kPutObject, ObjectKind::kSchedule, "gone", "{}"),
                          ObjectChange(K::kDeleteObject, ObjectKind::kSchedule, "gone")})
                    .ok());
  }
  auto s = Open();
  ASSERT_TRUE(s);
  JobId max_id = 0;
  EXPECT_EQ(LoadAll(*s, &max_id).size(), 1u);
  std::vector<StoredObject> want{{ObjectKind::kPush, "z", "{}"},
                                 {ObjectKind::kSchedule, "a", "{}"},
                                 {ObjectKind::kSchedule, "b", "{\"v\":2}"}};
  EXPECT_EQ(LoadObjectsOf(*s), want);
}

// What only the journal holds (a kill -9 before the writer took it) is
// replayed at the next open, objects with jobs.
TEST_F(RocksStoreTest, NamedObjectsInTheJournalAreReplayed) {
  {
    auto s = Open(FsyncPolicy::kEverySec);
    ASSERT_TRUE(s && s->journal() != nullptr);
    uint64_t lsn = 0;
    ASSERT_TRUE(s->journal()
                    ->Append({Put(1, "", JobState::kReady, 0, "job"),
                              ObjectChange(Mutation::Kind::kPutObject, ObjectKind::kPush, "hook",
                                           "{\"url\":\"https://example.com/\"}")},
                             &lsn)
                    .ok());
    ASSERT_TRUE(s->journal()->Sync().ok());
  }
  auto s = Open(FsyncPolicy::kEverySec);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->replayed_records(), 1u);
  std::vector<StoredObject> want{{ObjectKind::kPush, "hook", "{\"url\":\"https://example.com/\"}"}};
  EXPECT_EQ(LoadObjectsOf(*s), want);
}

TEST_F(RocksStoreTest, PutThenUpdateThenDeleteInOneBatch) {
  auto s = Open(FsyncPolicy::kEverySec);
  ASSERT_TRUE(s);
  Mutation p = Put(7, "key", JobState::kDelayed, 100, "body");
  JobRecord r = p.record;
  r.state = JobState::kReady;
  r.due_ms = 0;
  r.reserves = 1;
  ASSERT_TRUE(s->Apply({p, Update(r)}).ok());
  JobId max_id;
  auto jobs = LoadAll(*s, &max_id);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[7].first.reserves, 1u);
  EXPECT_EQ(jobs[7].second, "body");
  ASSERT_TRUE(s->Apply({Update(r), Delete(r)}).ok());
  EXPECT_TRUE(LoadAll(*s, &max_id).empty());
  EXPECT_EQ(s->Apply({Update(r)}).code(), Code::kInternal);  // not held any more
}

TEST_F(RocksStoreTest, AJobPutAndDeletedInOneBatchLeavesNothingButItsId) {
  auto s = Open(FsyncPolicy::kEverySec);
  ASSERT_TRUE(s);
  Mutation p = Put(5, "k", JobState::kDelayed, 100, "body");
  ASSERT_TRUE(s->Apply({p, Delete(p.record)}).ok());
  JobId id = 0;
  EXPECT_EQ(s->FindKey("orders", "k", &id).code(), Code::kNotFound);
  int due = 0;
  ASSERT_TRUE(s->ScanDue("orders", {}, 1000, [&](DueMark) { return ++due, true; }).ok());
  EXPECT_EQ(due, 0);
  JobId max_id = 0;
  EXPECT_TRUE(LoadAll(*s, &max_id).empty());
  EXPECT_EQ(max_id, 5u);
}

// A name (JobRecord::named) is found across topics, under the topic "",
// passes from a deleted job to a new one in one batch, and survives a
// reopen; a job without a name leaves none.
TEST_F(RocksStoreTest, NamesAreFoundAcrossTopics) {
  {
    auto s = Open(FsyncPolicy::kEverySec);
    ASSERT_TRUE(s);
    Mutation a = Put(1, "n", JobState::kReady, 0, "a");
    a.record.named = true;
    Mutation plain = Put(2, "p", JobState::kReady, 0, "p");
    ASSERT_TRUE(s->Apply({a, plain}).ok());
    Mutation b = Put(3, "n", JobState::kDelayed, 5, "b");
    b.record.topic = "mail";
    b.record.named = true;
    ASSERT_TRUE(s->Apply({Delete(a.record), b}).ok());
  }
  auto s = Open(FsyncPolicy::kEverySec);
  ASSERT_TRUE(s);
  JobId id = 0;
  ASSERT_TRUE(s->FindKey("", "n", &id).ok());
  EXPECT_EQ(id, 3u);
  EXPECT_EQ(s->FindKey("", "p", &id).code(), Code::kNotFound);
  JobRecord r;
  std::string body;
  ASSERT_TRUE(s->GetJob(3, &r, &body).ok());
  EXPECT_TRUE(r.named);
}

TEST_F(RocksStoreTest, AKeyPassesFromADeletedJobToANewOneInOneBatch) {
  auto s = Open(FsyncPolicy::kEverySec);
  ASSERT_TRUE(s);
  Mutation a = Put(1, "k", JobState::kReady, 0, "a");
  ASSERT_TRUE(s->Apply({a}).ok());
  ASSERT_TRUE(s->Apply({Delete(a.record), Put(2, "k", JobState::kReady, 0, "b")}).ok());
  JobId id = 0;
  ASSERT_TRUE(s->FindKey("orders", "k", &id).ok());
  EXPECT_EQ(id, 2u);
}

// Random batches of puts, updates and deletes, applied to RocksStore (which
// computes each batch's net effect from what it remembers of recent jobs,
// here only a few, or reads them) and to MemStore (which simply applies each
// change): after every batch, every job, key and due entry must agree, also
// across reopens.
TEST_F(RocksStoreTest, RandomBatchesAgreeWithTheMemoryStore) {
  std::mt19937_64 rng(delayq::testing::TestSeed(20261122));
  auto pick = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
  const std::vector<std::string> topics = {"orders", "mail"};
  const std::vector<std::string> keys = {"", "", "a", "b", "c", "d"};
  MemStore mem;
  std::map<JobId, Mutation> live;  // as generated: the image a change replaces
  std::set<std::pair<std::string, std::string>> used_keys;
  std::set<std::string> used_names;
  JobId next = 1;
  for (int round = 0; round < 40; ++round) {
    auto s = Open(FsyncPolicy::kNo, pick(3) == 0 ? 0 : 1 + pick(6));
    ASSERT_TRUE(s);
    for (int b = 0; b < 25; ++b) {
      std::vector<Mutation> batch;
      for (uint64_t n = 1 + pick(12); n > 0; --n) {
        uint64_t what = live.empty() ? 0 : pick(3);
        if (what == 0) {  // put
          std::string topic = topics[pick(topics.size())];
          std::string key = keys[pick(keys.size())];
          if (!key.empty() && used_keys.count({topic, key})) key.clear();
          JobState st = pick(2) ? JobState::kDelayed : JobState::kReady;
          JobId id = next++;
          Mutation m = Put(id, key, st, 1 + pick(50), "body" + std::to_string(id));
          m.record.topic = topic;
          if (!key.empty() && used_names.count(key) == 0 && pick(2) == 0) {
            m.record.named = true;
            used_names.insert(key);
          }
          if (!key.empty()) used_keys.insert({topic, key});
          live[m.record.id] = m;
          batch.push_back(m);
          continue;
        }
        auto it = std::next(live.begin(), static_cast<long>(pick(live.size())));
        JobRecord r = it->second.record;
        if (what == 1) {  // update
          static const JobState kStates[] = {JobState::kReady, JobState::kDelayed,
                                             JobState::kBuried};
          r.state = kStates[pick(3)];
          r.due_ms = r.state == JobState::kDelayed ? 1 + pick(50) : 0;
          r.reserves += static_cast<uint32_t>(pick(2));
          it->second.record = r;
          batch.push_back(Update(r));
        } else {  // delete
          if (!r.key.empty()) used_keys.erase({r.topic, r.key});
          if (r.named) used_names.erase(r.key);
          live.erase(it);
          batch.push_back(Delete(r));
        }
      }
      // Half the batches as the writer hands them over (ApplyThrough, which
      // may move their bodies into the store's memory of recent jobs), half
      // through Apply (which copies them).
      std::vector<Mutation> given_up = batch;
      ASSERT_TRUE((pick(2) == 0 ? s->ApplyThrough(given_up, 0) : s->Apply(batch)).ok());
      ASSERT_TRUE(mem.Apply(batch).ok());
      for (JobId id = 1; id < next; ++id) {
        JobRecord want, got;
        std::string want_body, got_body;
        Status ws = mem.GetJob(id, &want, &want_body);
        Status gs = s->GetJob(id, &got, &got_body);
        ASSERT_EQ(gs.code(), ws.code()) << "job " << id << " round " << round;
        if (ws.ok()) {
          EXPECT_EQ(got, want) << "job " << id;
          EXPECT_EQ(got_body, want_body) << "job " << id;
        }
      }
      for (const std::string& key : keys) {  // names: the topic ""
        if (key.empty()) continue;
        JobId want = 0, got = 0;
        Status ws = mem.FindKey("", key, &want);
        ASSERT_EQ(s->FindKey("", key, &got).code(), ws.code()) << "name " << key;
        EXPECT_EQ(got, want) << "name " << key;
      }
      for (const std::string& topic : topics) {
        for (const std::string& key : keys) {
          if (key.empty()) continue;
          JobId want = 0, got = 0;
          Status ws = mem.FindKey(topic, key, &want);
          ASSERT_EQ(s->FindKey(topic, key, &got).code(), ws.code()) << topic << "/" << key;
          EXPECT_EQ(got, want) << topic << "/" << key;
        }
        std::vector<DueMark> want, got;
        ASSERT_TRUE(
            mem.ScanDue(topic, {}, 1000, [&](DueMark m) { return want.push_back(m), true; }).ok());
        ASSERT_TRUE(
            s->ScanDue(topic, {}, 1000, [&](DueMark m) { return got.push_back(m), true; }).ok());
        ASSERT_EQ(got, want) << topic;
      }
      if (HasFatalFailure()) return;
    }
  }
}

// A file system whose files refuse appends while `full` is set, as a full
// disk does (ENOSPC: RocksDB can be resumed after it).
class FullDisk : public rocksdb::FileSystemWrapper {
 public:
  FullDisk() : rocksdb::FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "FullDisk"; }
  rocksdb::IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* file,
                                    rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus st = target()->NewWritableFile(name, options, file, dbg);
    if (st.ok()) *file = std::make_unique<File>(std::move(*file), this);
    return st;
  }
  std::atomic<bool> full{false};
  std::atomic<int> refused{0};

 private:
  class File : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSWritableFile> f, FullDisk* disk)
        : rocksdb::FSWritableFileOwnerWrapper(std::move(f)), disk_(disk) {}
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
      if (!disk_->full) return target()->Append(data, options, dbg);
      disk_->refused++;
      return rocksdb::IOStatus::NoSpace("the test's disk is full");
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             const rocksdb::DataVerificationInfo&,
                             rocksdb::IODebugContext* dbg) override {
      return Append(data, options, dbg);
    }

   private:
    FullDisk* disk_;
  };
};

// A write RocksDB refuses leaves the batch the writer handed over as it
// was: the retry, once RocksDB takes writes again, writes the same bodies,
// and the store's memory of recent jobs then holds them (a later update,
// which keeps the body, takes it from there). Here the disk fills up under
// a checkpoint's flush; RocksDB then refuses every write until the error
// is cleared. From a full disk RocksDB recovers by itself (its
// SstFileManager looks at the free space at once, then every 5 s, and
// flushes again once there is room); until then the store's Resume is
// refused, and the retries go on, as the writer's every 200 ms.
TEST_F(RocksStoreTest, AFailedWriteLeavesTheBatchWhole) {
  auto disk = std::make_shared<FullDisk>();
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(disk);
  RocksStoreOptions options{dir_, FsyncPolicy::kNo};
  options.journal_segment_bytes = 4096;  // a checkpoint after each batch below
  options.env = env.get();
  auto opened = RocksStore::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<RocksStore> s = std::move(opened).value();
  // Room again before the store closes, whatever an assertion cut short.
  struct Room {
    FullDisk* disk;
    ~Room() { disk->full = false; }
  } room{disk.get()};
  std::mt19937_64 rng(delayq::testing::TestSeed(20261130));
  auto body = [&] {
    std::string b(20'000, ' ');
    for (char& c : b) c = static_cast<char>('a' + rng() % 26);
    return b;
  };
  auto apply = [&](std::vector<Mutation>& batch) {  // as the loop and the writer do
    uint64_t lsn = 0;
    Status st = s->journal()->Append(batch, &lsn);
    return st.ok() ? s->ApplyThrough(batch, lsn) : st;
  };
  std::vector<Mutation> first = {Put(1, "", JobState::kReady, 0, "first")};
  ASSERT_TRUE(apply(first).ok());
  std::vector<Mutation> big;
  for (JobId id = 2; id <= 4; ++id) big.push_back(Put(id, "", JobState::kReady, 0, body()));
  std::vector<Mutation> next;
  for (JobId id = 5; id <= 7; ++id) next.push_back(Put(id, "", JobState::kReady, 0, body()));
  JobRecord one = first[0].record;
  one.reserves = 1;
  next.push_back(Update(one));
  const std::vector<Mutation> big_bodies = big, want = next;  // ApplyThrough takes them
  uint64_t big_lsn = 0, next_lsn = 0;
  ASSERT_TRUE(s->journal()->Append(big, &big_lsn).ok());  // seals a segment
  ASSERT_TRUE(s->journal()->Append(next, &next_lsn).ok());
  disk->full = true;
  // Taken into the memtables (no log under a journal); the checkpoint's
  // flush after it finds the disk full, and RocksDB stops taking writes.
  ASSERT_TRUE(s->ApplyThrough(big, big_lsn).ok());
  Status failed = s->ApplyThrough(next, next_lsn);
  ASSERT_FALSE(failed.ok());
  EXPECT_GT(disk->refused.load(), 0);
  ASSERT_EQ(next.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(next[i].body == want[i].body) << i;
  EXPECT_FALSE(s->ApplyThrough(next, next_lsn).ok());  // still full: still refused
  disk->full = false;
  // Within 5 s RocksDB's own recovery looks again, and clears the error.
  Status retried;
  for (int i = 0; i < 150; ++i) {
    retried = s->ApplyThrough(next, next_lsn);
    if (retried.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_TRUE(retried.ok()) << retried.ToString();
  std::vector<const Mutation*> puts;  // of both batches, as handed over
  for (const std::vector<Mutation>* b :
       std::initializer_list<const std::vector<Mutation>*>{&big_bodies, &want})
    for (const Mutation& m : *b)
      if (m.kind == Mutation::Kind::kPut) puts.push_back(&m);
  std::vector<Mutation> later;
  for (const Mutation* m : puts) {
    JobRecord u = m->record;
    u.priority = 7;
    later.push_back(Update(u));
  }
  ASSERT_TRUE(apply(later).ok());
  s.reset();
  s = Open(FsyncPolicy::kNo);
  ASSERT_TRUE(s);
  JobId max_id = 0;
  auto all = LoadAll(*s, &max_id);
  ASSERT_EQ(all.size(), 7u);
  EXPECT_EQ(all[1].first.reserves, 1u);
  EXPECT_EQ(all[1].second, "first");
  ASSERT_EQ(puts.size(), 6u);
  for (const Mutation* m : puts) {
    EXPECT_EQ(all[m->record.id].first.priority, 7u) << m->record.id;
    EXPECT_TRUE(all[m->record.id].second == m->body) << m->record.id;  // (20 KB each)
  }
}

TEST_F(RocksStoreTest, NoteMaxIdPersists) {
  {
    auto s = Open();
    ASSERT_TRUE(s->NoteMaxId(41).ok());
  }
  auto s = Open();
  JobId max_id = 0;
  LoadAll(*s, &max_id);
  EXPECT_EQ(max_id, 41u);
}

TEST_F(RocksStoreTest, DamagedFilesAreAnErrorNotSilentLoss) {
  {
    auto s = Open();
    std::vector<Mutation> batch;
    for (JobId id = 1; id <= 2000; ++id)
      batch.push_back(Put(id, "", JobState::kReady, 0, std::string(200, 'a' + id % 26)));
    ASSERT_TRUE(s->Apply(batch).ok());
  }
  // Overwrite the middle of every data file (WAL and tables) with garbage.
  int damaged = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    std::string name = e.path().filename();
    bool data = name.size() > 4 &&
                (name.substr(name.size() - 4) == ".log" || name.substr(name.size() - 4) == ".sst");
    if (!data || fs::file_size(e.path()) < 4096) continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(e.path()) / 2));
    std::string junk(512, '\xA5');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  auto r = RocksStore::Open({dir_, FsyncPolicy::kAlways});
  if (!r.ok()) {
    EXPECT_EQ(r.code(), Code::kCorruption) << r.status().ToString();
    return;
  }
  size_t loaded = 0;
  JobId max_id = 0;
  Status st = r.value()->Load(
      [&](const JobRecord&, std::string_view) {
        ++loaded;
        return Status::Ok();
      },
      &max_id);
  // Either the damage is reported, or nothing was lost.
  if (st.ok()) {
    EXPECT_EQ(loaded, 2000u) << "silently lost " << 2000 - loaded << " jobs";
  } else {
    EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
  }
}

TEST_F(RocksStoreTest, AStoreOfAnUnknownFormatIsRefused) {
  { auto s = Open(); }
  {
    // A format byte from the future, written behind the store's back.
    rocksdb::DB* db = nullptr;
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::Options o;
    std::vector<rocksdb::ColumnFamilyDescriptor> families = {
        {rocksdb::kDefaultColumnFamilyName, {}}, {"jobs", {}}, {"due", {}}, {"keys", {}}};
    ASSERT_TRUE(rocksdb::DB::Open(o, dir_, families, &handles, &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "format",
                        std::string(1, static_cast<char>(kRecordVersion + 1)))
                    .ok());
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
    delete db;
  }
  auto r = RocksStore::Open({dir_, FsyncPolicy::kNo});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("format"), std::string::npos) << r.status().ToString();
}

TEST_F(RocksStoreTest, AnUnusableDirectoryIsAClearError) {
  auto r = RocksStore::Open({"/proc/no-such-dir/x", FsyncPolicy::kNo});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/proc/no-such-dir/x"), std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace delayq::store

// Endless churn on a real RocksStore, as a queue does it: every job is put
// once, updated a few times and deleted, on ever-growing ids. The directory
// (tables, log, MANIFEST) must stay proportional to the live jobs, not grow
// with the jobs ever written (docs/storage.md, "Compaction and memory").
//
// DELAYQ_CHURN_OPS sets how many jobs pass through (default 1,000,000; a
// quarter under the sanitizers), DELAYQ_CHURN_LIVE how many live at a time
// (default 20,000).
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "sanitized.h"
#include "store/record_codec.h"
#include "store/rocks_store.h"
#include "temp_dir.h"

namespace delayq::store {
namespace {

namespace fs = std::filesystem;

constexpr TimeMs kEpoch = 1'700'000'000'000;  // created_ms of job 0
constexpr size_t kBodyBytes = 64;
constexpr size_t kBatch = 200;  // jobs put per Apply

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 10);
}

// What the directory takes: bytes in use per kind of file. A file counts
// with its allocated blocks when they exceed its size (RocksDB preallocates
// the log and the MANIFEST).
struct DiskUse {
  uint64_t sst = 0, log = 0, journal = 0, manifest = 0, other = 0;
  uint64_t total() const { return sst + log + journal + manifest + other; }
  std::string ToString() const {
    char buf[192];
    std::snprintf(buf, sizeof buf,
                  "%.1f MB (tables %.1f, log %.1f, journal %.1f, MANIFEST %.1f, other %.1f)",
                  total() / 1e6, sst / 1e6, log / 1e6, journal / 1e6, manifest / 1e6, other / 1e6);
    return buf;
  }
};

DiskUse Measure(const std::string& dir) {
  DiskUse use;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    struct stat st;
    if (stat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // deleted meanwhile
    uint64_t bytes = std::max<uint64_t>(st.st_size, uint64_t(st.st_blocks) * 512);
    std::string name = e.path().filename();
    if (name.ends_with(".sst"))
      use.sst += bytes;
    else if (name.ends_with(".log"))
      use.log += bytes;
    else if (name.ends_with(".jnl"))
      use.journal += bytes;
    else if (name.starts_with("MANIFEST"))
      use.manifest += bytes;
    else
      use.other += bytes;
  }
  return use;
}

uint64_t RssBytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// The life of job `id`, a function of `now` (the highest id put so far), so
// that the test keeps no table of its own: put at now == id, ready or
// delayed (the due index), one in five with a user key; at age live/2 every
// second job is reserved (an update: ready, due entry gone); at age
// 3*live/4 every fourth is released with a delay (delayed again); deleted at
// age live.
class Churn {
 public:
  explicit Churn(uint64_t live) : live_(live) {}

  uint64_t live() const { return live_; }
  uint64_t first_update_age() const { return live_ / 2; }
  uint64_t second_update_age() const { return live_ * 3 / 4; }

  JobRecord Record(JobId id, int stage) const {
    JobRecord r;
    r.id = id;
    r.topic = "orders";
    if (id % 5 == 0) r.key = "order-" + std::to_string(id);
    r.priority = static_cast<uint32_t>(id % 1000);
    r.created_ms = kEpoch + static_cast<TimeMs>(id);
    r.ttr_ms = 60'000;
    if (stage == 0 && id % 3 == 0) {
      r.state = JobState::kDelayed;
      r.delay_ms = 30 * 60'000;
      r.due_ms = r.created_ms + r.delay_ms;
    }
    if (stage >= 1) r.reserves = 1;
    if (stage == 2) {
      r.state = JobState::kDelayed;
      r.releases = 1;
      r.delay_ms = 5'000;
      r.due_ms = r.created_ms + 120'000;
    }
    return r;
  }
  // The stage job `id` is in once `now` is put.
  int Stage(JobId id, JobId now) const {
    uint64_t age = now - id;
    if (id % 4 == 0 && age >= second_update_age()) return 2;
    if (id % 2 == 0 && age >= first_update_age()) return 1;
    return 0;
  }
  static std::string Body(JobId id) {
    // Incompressible: compression must not hide growth.
    std::string b(kBodyBytes, '\0');
    uint64_t x = id * 0x9E3779B97F4A7C15ull;
    for (char& c : b) {
      x ^= x >> 31;
      x *= 0xBF58476D1CE4E5B9ull;
      c = static_cast<char>(x >> 56);
    }
    return b;
  }

  // The mutations that follow putting job `now`.
  void Step(JobId now, std::vector<Mutation>* batch) const {
    batch->push_back({Mutation::Kind::kPut, Record(now, 0), Body(now)});
    if (JobId id = now - first_update_age(); now > first_update_age() && id % 2 == 0)
      batch->push_back({Mutation::Kind::kUpdate, Record(id, 1), {}});
    if (JobId id = now - second_update_age(); now > second_update_age() && id % 4 == 0)
      batch->push_back({Mutation::Kind::kUpdate, Record(id, 2), {}});
    if (now > live_) {
      JobId id = now - live_;
      batch->push_back({Mutation::Kind::kDelete, Record(id, Stage(id, now)), {}});
    }
  }

  // What the live jobs take in the three families: key and value of each
  // entry, before compression and RocksDB's own overhead.
  uint64_t LiveBytes(JobId now) const {
    uint64_t bytes = 0;
    std::string value;
    for (JobId id = now > live_ ? now - live_ + 1 : 1; id <= now; ++id) {
      JobRecord r = Record(id, Stage(id, now));
      value.clear();
      EncodeJobValue(r, Body(id), &value);
      bytes += JobKey(id).size() + value.size();
      if (r.state == JobState::kDelayed) bytes += DueKey(r.topic, r.due_ms, id).size();
      if (!r.key.empty()) bytes += UserKey(r.topic, r.key).size() + 8;
    }
    return bytes;
  }

 private:
  uint64_t live_;
};

// Under `no` (and `everysec`) every batch goes to the journal first and
// RocksDB writes without its log; under `always` through its log, synced.
class CompactionTest : public ::testing::TestWithParam<FsyncPolicy> {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.empty()) << "mkdtemp failed"; }

  delayq::testing::TempDir tmp_;
  const std::string dir_ = tmp_.path();
};

// The bounds. Tables: what the live jobs hold, a few times over (space
// amplification of the levels, level-0 tables not compacted yet: each holds
// the jobs put since the last flush that still live, and tombstones), plus a
// little. The rest does not depend on the jobs: the log, which RocksStore
// lets grow to 64 MB before it flushes, plus what comes meanwhile and the
// preallocated tail of its last file (up to 1.1 memtables, 35 MB), or the
// journal (a 32 MB segment sealed, the next one growing until the flush
// that lets the sealed one go), and a MANIFEST (preallocated: 4 MB).
constexpr uint64_t kLiveFactor = 4;
constexpr uint64_t kTableAllowance = uint64_t{16} << 20;
constexpr uint64_t kLogAllowance = uint64_t{128} << 20;

TEST_P(CompactionTest, DiskUseFollowsTheLiveJobsUnderEndlessChurn) {
  const FsyncPolicy policy = GetParam();
#ifdef DELAYQ_SANITIZED
  const uint64_t default_ops = 250'000;
#else
  // `always` syncs every batch: 250,000 jobs (1,250 syncs) still take its
  // log past the 64 MB at which it is flushed.
  const uint64_t default_ops = policy == FsyncPolicy::kAlways ? 250'000 : 1'000'000;
#endif
  const uint64_t total = EnvOr("DELAYQ_CHURN_OPS", default_ops);
  const Churn churn(EnvOr("DELAYQ_CHURN_LIVE", 20'000));
  ASSERT_GE(total, churn.live() * 5) << "too few jobs to churn through the live set";

  auto opened = RocksStore::Open({dir_, policy});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<RocksStore> store = std::move(opened).value();

  auto check = [&](JobId now, const char* when) {
    uint64_t live_bytes = churn.LiveBytes(now);
    DiskUse use = Measure(dir_);
    std::printf("churn: %s jobs_put=%llu live_bytes=%.1f MB disk=%s rss=%.1f MB\n", when,
                static_cast<unsigned long long>(now), live_bytes / 1e6, use.ToString().c_str(),
                RssBytes() / 1e6);
    std::fflush(stdout);
    const uint64_t table_bound = kLiveFactor * live_bytes + kTableAllowance;
    EXPECT_LE(use.sst, table_bound)
        << "tables outgrow " << kLiveFactor << " times the live jobs plus "
        << (kTableAllowance >> 20) << " MB (" << when << ", after " << now
        << " jobs): " << use.ToString();
    EXPECT_LE(use.total() - use.sst, kLogAllowance)
        << "the log and the rest outgrow " << (kLogAllowance >> 20) << " MB (" << when << ", after "
        << now << " jobs): " << use.ToString();
    return use.sst <= table_bound && use.total() - use.sst <= kLogAllowance;
  };

  const uint64_t checkpoint = total / 20;
  std::vector<Mutation> batch;
  JobId now = 0;
  while (now < total) {
    batch.clear();
    for (size_t i = 0; i < kBatch && now < total; ++i) churn.Step(++now, &batch);
    uint64_t lsn = 0;
    Status st = store->journal() != nullptr ? store->journal()->Append(batch, &lsn) : Status::Ok();
    if (st.ok()) st = store->ApplyThrough(batch, lsn);
    ASSERT_TRUE(st.ok()) << "after " << now << " jobs: " << st.ToString();
    if (now % checkpoint < kBatch && now >= checkpoint && !check(now, "running")) break;
  }
  check(now, "end");
  store.reset();  // flushes the memtables; the log goes
  check(now, "closed");

  // The store still holds exactly the live jobs, and its indexes match.
  opened = RocksStore::Open({dir_, policy});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  store = std::move(opened).value();
  JobId expect = now - churn.live() + 1;
  uint64_t delayed = 0, keyed = 0;
  JobId max_id = 0;
  Status st = store->Load(
      [&](const JobRecord& r, std::string_view body) {
        if (r.id != expect)
          return Status::Internal("loaded job " + std::to_string(r.id) + ", expected " +
                                  std::to_string(expect));
        JobRecord want = churn.Record(r.id, churn.Stage(r.id, now));
        if (!(r == want) || body != Churn::Body(r.id))
          return Status::Internal("job " + std::to_string(r.id) + " differs");
        delayed += r.state == JobState::kDelayed;
        keyed += !r.key.empty();
        ++expect;
        return Status::Ok();
      },
      &max_id);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(expect, now + 1) << "jobs missing at the end";
  EXPECT_EQ(max_id, now);
  store.reset();

  // Every index entry belongs to a live job, and every live job has its.
  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, {}}, {"jobs", {}}, {"due", {}}, {"keys", {}}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::OpenForReadOnly({}, dir_, families, &handles, &raw);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<rocksdb::DB> db(raw);
  auto count = [&](rocksdb::ColumnFamilyHandle* h) {
    uint64_t n = 0;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator({}, h));
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
    EXPECT_TRUE(it->status().ok()) << it->status().ToString();
    return n;
  };
  EXPECT_EQ(count(handles[2]), delayed);
  EXPECT_EQ(count(handles[3]), keyed);
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
}

INSTANTIATE_TEST_SUITE_P(Churn, CompactionTest,
                         ::testing::Values(FsyncPolicy::kNo, FsyncPolicy::kAlways),
                         [](const ::testing::TestParamInfo<FsyncPolicy>& info) {
                           return std::string(info.param == FsyncPolicy::kNo ? "journal" : "log");
                         });

}  // namespace
}  // namespace delayq::store

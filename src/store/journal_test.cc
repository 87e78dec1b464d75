// The journal on a real directory: records come back in order with every
// field, a torn last append ends the journal, damage anywhere else and
// missing records are errors, sealed segments go once released; and the
// RocksDB store applies at open what a crash left only in its journal.
#include "store/journal.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "store/rocks_store.h"
#include "temp_dir.h"

namespace delayq::store {
namespace {

namespace fs = std::filesystem;

// A version 3 segment's header: magic, version, the size it is sealed at,
// a checksum.
constexpr size_t kSegmentHeader = 20;

class JournalTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.empty()) << "mkdtemp failed"; }

  std::unique_ptr<Journal> Create(uint64_t next_lsn = 1, uint64_t segment_bytes = 1 << 20,
                                  bool preallocate = false) {
    Journal::Options o;
    o.dir = dir_ + "/journal";
    o.fsync = preallocate ? FsyncPolicy::kAlways : FsyncPolicy::kEverySec;
    o.segment_bytes = segment_bytes;
    o.preallocate = preallocate;
    auto j = Journal::Create(o, next_lsn);
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? std::move(j).value() : nullptr;
  }

  static Mutation Put(JobId id, std::string body, std::string key = "") {
    Mutation m;
    m.kind = Mutation::Kind::kPut;
    m.record.id = id;
    m.record.topic = "orders";
    m.record.key = std::move(key);
    m.record.state = JobState::kDelayed;
    m.record.due_ms = 1'700'000'000'000 + static_cast<TimeMs>(id);
    m.record.ttr_ms = 60'000;
    m.record.priority = 7;
    m.body = std::move(body);
    return m;
  }
  static Mutation Change(Mutation::Kind kind, JobId id) {
    Mutation m = Put(id, "");
    m.kind = kind;
    m.record.state = JobState::kReady;
    m.record.due_ms = 0;
    m.record.reserves = 3;
    return m;
  }

  // Every record after `after`: (lsn, batch).
  Status ReplayAll(uint64_t after, std::vector<std::pair<uint64_t, std::vector<Mutation>>>* out,
                   uint64_t* last = nullptr) {
    uint64_t ignored = 0;
    return Journal::Replay(
        dir_ + "/journal", after,
        [&](uint64_t lsn, std::vector<Mutation>& batch) {
          out->emplace_back(lsn, batch);
          return Status::Ok();
        },
        last != nullptr ? last : &ignored);
  }

  // A closed journal of `n` records, one put each: jobs 1..n with `body`.
  void WriteJournal(JobId n, const std::string& body, uint64_t segment_bytes = 1 << 20) {
    auto j = Create(1, segment_bytes);
    ASSERT_NE(j, nullptr);
    uint64_t lsn = 0;
    for (JobId id = 1; id <= n; ++id) ASSERT_TRUE(j->Append({Put(id, body)}, &lsn).ok()) << id;
  }
  static void WriteFile(const fs::path& path, std::string_view data) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(data.data(), static_cast<std::streamsize>(data.size()));
  }
  static std::string ReadFile(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  std::vector<fs::path> Segments() {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_ + "/journal")) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
  }

  delayq::testing::TempDir tmp_;
  const std::string dir_ = tmp_.path();
};

TEST(JournalCrcTest, TheFastCrcIsTheReferenceCrc) {
  EXPECT_EQ(JournalCrc32c("123456789"), 0xE3069283u);  // CRC-32C's check value
  EXPECT_EQ(JournalCrc32c(""), 0u);
  std::string data;
  for (int i = 0; i < 300; ++i) {
    EXPECT_EQ(JournalCrc32c(data), JournalCrc32cPortable(data)) << "length " << i;
    // Every alignment and tail length.
    EXPECT_EQ(JournalCrc32c(std::string_view(data).substr(i % 7)),
              JournalCrc32cPortable(std::string_view(data).substr(i % 7)));
    data.push_back(static_cast<char>(i * 37 + 11));
  }
}

TEST_F(JournalTest, RecordsComeBackInOrderWithEveryField) {
  {
    auto j = Create(5);
    uint64_t lsn = 0;
    ASSERT_TRUE(
        j->Append({Put(1, "first body", "k-1"), Put(2, std::string(5000, 'z'))}, &lsn).ok());
    EXPECT_EQ(lsn, 5u);
    Mutation reserve = Change(Mutation::Kind::kUpdate, 1);
    reserve.deferrable = true;  // left out: no reply waits for it
    ASSERT_TRUE(j->Append({reserve}, &lsn).ok());
    EXPECT_EQ(lsn, 0u);
    ASSERT_TRUE(
        j->Append({reserve, Change(Mutation::Kind::kDelete, 1), Change(Mutation::Kind::kUpdate, 2)},
                  &lsn)
            .ok());
    EXPECT_EQ(lsn, 6u);
  }
  std::vector<std::pair<uint64_t, std::vector<Mutation>>> got;
  uint64_t last = 0;
  // The journal starts after the checkpoint it was created at.
  ASSERT_EQ(ReplayAll(0, &got, &last).code(), Code::kCorruption);
  got.clear();
  ASSERT_TRUE(ReplayAll(4, &got, &last).ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(last, 6u);
  EXPECT_EQ(got[0].first, 5u);
  ASSERT_EQ(got[0].second.size(), 2u);
  const Mutation& p = got[0].second[0];
  EXPECT_EQ(p.kind, Mutation::Kind::kPut);
  EXPECT_EQ(p.record, Put(1, "", "k-1").record);
  EXPECT_EQ(p.body, "first body");
  EXPECT_EQ(got[0].second[1].body, std::string(5000, 'z'));
  ASSERT_EQ(got[1].second.size(), 2u);
  EXPECT_EQ(got[1].second[0].kind, Mutation::Kind::kDelete);
  EXPECT_EQ(got[1].second[0].record.id, 1u);
  EXPECT_EQ(got[1].second[1].kind, Mutation::Kind::kUpdate);
  EXPECT_EQ(got[1].second[1].record, Change(Mutation::Kind::kUpdate, 2).record);

  // Only what follows a checkpoint.
  got.clear();
  ASSERT_TRUE(ReplayAll(5, &got, &last).ok());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first, 6u);
  got.clear();
  ASSERT_TRUE(ReplayAll(6, &got, &last).ok());
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(last, 6u);
}

TEST_F(JournalTest, ATornLastAppendEndsTheJournalAtEveryCut) {
  WriteJournal(3, "body");
  fs::path seg = Segments().at(0);
  std::string whole = ReadFile(seg);
  std::vector<std::pair<uint64_t, std::vector<Mutation>>> all;
  ASSERT_TRUE(ReplayAll(0, &all).ok());
  ASSERT_EQ(all.size(), 3u);
  // Where the third record starts: the file less its length.
  size_t third = whole.size() - (whole.size() - kSegmentHeader) / 3;
  for (size_t cut = third; cut < whole.size(); ++cut) {
    WriteFile(seg, std::string_view(whole).substr(0, cut));
    std::vector<std::pair<uint64_t, std::vector<Mutation>>> got;
    Status st = ReplayAll(0, &got);
    ASSERT_TRUE(st.ok()) << "cut at " << cut << ": " << st.ToString();
    EXPECT_EQ(got.size(), 2u) << "cut at " << cut;
  }
  // A tail of zeros (a file extended, its data never written) as well.
  std::string zeros = whole + std::string(300, '\0');
  WriteFile(seg, zeros);
  std::vector<std::pair<uint64_t, std::vector<Mutation>>> got;
  ASSERT_TRUE(ReplayAll(0, &got).ok());
  EXPECT_EQ(got.size(), 3u);
}

// Preallocated (`--fsync always`): zeros ahead of the records, which end
// each segment's records, the last one's too; a record torn there (some of
// it written, zeros after) ends the journal at every cut; damage before
// it is still damage; a missing segment still shows.
TEST_F(JournalTest, PreallocatedSegmentsReadBackAndATornRecordEndsThem) {
  {
    auto j = Create(1, 1 << 20, /*preallocate=*/true);
    ASSERT_NE(j, nullptr);
    uint64_t lsn = 0;
    for (JobId id = 1; id <= 3; ++id) ASSERT_TRUE(j->Append({Put(id, "body")}, &lsn).ok());
    EXPECT_GE(j->bytes(), Journal::kPreallocateBytes);
    ASSERT_TRUE(j->Sync().ok());
  }
  fs::path seg = Segments().at(0);
  std::string whole = ReadFile(seg);
  ASSERT_GE(whole.size(), Journal::kPreallocateBytes);
  std::vector<std::pair<uint64_t, std::vector<Mutation>>> all;
  ASSERT_TRUE(ReplayAll(0, &all).ok());
  ASSERT_EQ(all.size(), 3u);
  // Every record is as long as the first: its header's length (4 bytes,
  // little endian, after the segment's 20) and the header's 12.
  size_t record = 12;
  for (int i = 0; i < 4; ++i)
    record += static_cast<size_t>(static_cast<uint8_t>(whole[kSegmentHeader + i])) << (8 * i);
  const size_t end = kSegmentHeader + 3 * record, third = end - record;
  ASSERT_TRUE(std::all_of(whole.begin() + static_cast<ptrdiff_t>(end), whole.end(),
                          [](char c) { return c == '\0'; }));
  for (size_t cut = third; cut < end; ++cut) {
    std::string torn = whole;
    std::fill(torn.begin() + static_cast<ptrdiff_t>(cut), torn.end(), '\0');
    WriteFile(seg, torn);
    std::vector<std::pair<uint64_t, std::vector<Mutation>>> got;
    Status st = ReplayAll(0, &got);
    ASSERT_TRUE(st.ok()) << "cut at " << cut << ": " << st.ToString();
    EXPECT_EQ(got.size(), 2u) << "cut at " << cut;
  }
  // A flip in the second record, zeros after the third: damage.
  std::string bad = whole;
  bad[third - 3] = static_cast<char>(bad[third - 3] ^ 0x40);
  WriteFile(seg, bad);
  std::vector<std::pair<uint64_t, std::vector<Mutation>>> got;
  EXPECT_EQ(ReplayAll(0, &got).code(), Code::kCorruption);
  WriteFile(seg, whole);

  // Sealed segments, each with its zeros: every record, in order; one
  // gone: missing (never synced: the segment before reached the size it
  // was sealed at, so this is no power cut's lost end).
  fs::remove_all(dir_ + "/journal");
  {
    auto j = Create(1, 256, /*preallocate=*/true);
    ASSERT_NE(j, nullptr);
    uint64_t lsn = 0;
    for (JobId id = 1; id <= 20; ++id)
      ASSERT_TRUE(j->Append({Put(id, std::string(100, 'b'))}, &lsn).ok());
  }
  std::vector<fs::path> segs = Segments();
  ASSERT_GE(segs.size(), 3u);
  EXPECT_GE(fs::file_size(segs[0]), Journal::kPreallocateBytes);
  got.clear();
  uint64_t last = 0;
  ASSERT_TRUE(ReplayAll(0, &got, &last).ok());
  EXPECT_EQ(got.size(), 20u);
  EXPECT_EQ(last, 20u);
  fs::remove(segs[1]);
  got.clear();
  Status st = ReplayAll(0, &got);
  EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
  EXPECT_NE(st.message().find("missing"), std::string::npos) << st.ToString();
}

TEST_F(JournalTest, ASyncCoversWhatWasAppendedAndIsNotMadeTwice) {
  auto j = Create(1, 1 << 20, /*preallocate=*/true);
  ASSERT_NE(j, nullptr);
  uint64_t lsn = 0;
  ASSERT_TRUE(j->Append({Put(1, "a")}, &lsn).ok());
  ASSERT_TRUE(j->Append({Put(2, "b")}, &lsn).ok());
  EXPECT_EQ(j->synced_lsn(), 0u);
  // The append thread's own sync (no other thread syncs: it is made).
  Status st;
  ASSERT_TRUE(j->TrySyncHere(&st));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(j->synced_lsn(), lsn);
  EXPECT_EQ(j->syncs().Snapshot().count, 1u);
  // The writer's sync of a record synced already is not made again.
  ASSERT_TRUE(j->SyncThrough(1).ok());
  ASSERT_TRUE(j->SyncThrough(lsn).ok());
  EXPECT_EQ(j->syncs().Snapshot().count, 1u);
  // A later record is.
  ASSERT_TRUE(j->Append({Put(3, "c")}, &lsn).ok());
  ASSERT_TRUE(j->SyncThrough(lsn).ok());
  EXPECT_EQ(j->synced_lsn(), lsn);
  EXPECT_EQ(j->syncs().Snapshot().count, 2u);
  // Two threads syncing while appends go on: the number only grows, and
  // ends at the last record.
  std::atomic<bool> stop{false};
  std::thread other([&] {
    while (!stop) ASSERT_TRUE(j->Sync().ok());
  });
  uint64_t seen = j->synced_lsn();
  for (JobId id = 4; id < 200; ++id) {
    ASSERT_TRUE(j->Append({Put(id, "d")}, &lsn).ok());
    if (j->TrySyncHere(&st)) {
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(j->synced_lsn(), lsn);
    }
    EXPECT_GE(j->synced_lsn(), seen);
    seen = j->synced_lsn();
  }
  stop = true;
  other.join();
  ASSERT_TRUE(j->SyncThrough(lsn).ok());
  EXPECT_EQ(j->synced_lsn(), lsn);
}

TEST_F(JournalTest, DamageBeforeTheEndIsCorruption) {
  WriteJournal(3, "body of the job");
  fs::path seg = Segments().at(0);
  std::string whole = ReadFile(seg);
  // Every byte of the first two records and of the header.
  size_t third = whole.size() - (whole.size() - kSegmentHeader) / 3;
  for (size_t at = 0; at < third; ++at) {
    std::string bad = whole;
    bad[at] = static_cast<char>(bad[at] ^ 0x40);
    WriteFile(seg, bad);
    std::vector<std::pair<uint64_t, std::vector<Mutation>>> got;
    Status st = ReplayAll(0, &got);
    EXPECT_FALSE(st.ok()) << "a flip at byte " << at << " went unnoticed";
    if (at >= 8) EXPECT_EQ(st.code(), Code::kCorruption) << at << ": " << st.ToString();
  }
}

// Where each record of a segment's bytes starts and ends.
std::vector<std::pair<size_t, size_t>> RecordExtents(const std::string& seg) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t at = kSegmentHeader;
  while (at + 12 <= seg.size()) {
    size_t len = 0;
    for (int i = 0; i < 4; ++i)
      len |= static_cast<size_t>(static_cast<uint8_t>(seg[at + i])) << (8 * i);
    if (len == 0) break;  // zeros: the end
    out.emplace_back(at, at + 12 + len);
    at += 12 + len;
  }
  return out;
}

// A power cut loses pages of what was appended and not yet synced, and not
// only the last ones: writeback goes in any order, so a page in the middle
// can read as zeros with records after it. Since no record written later
// says a sync covered the first one lost, nothing acknowledged under
// `always` lies past it: the journal ends there. A page lost among records
// a sync covered is damage.
TEST_F(JournalTest, AHoleInWhatWasNotSyncedEndsTheJournalWhereItStarts) {
  {
    auto j = Create();
    uint64_t lsn = 0;
    for (JobId id = 1; id <= 30; ++id)
      ASSERT_TRUE(j->Append({Put(id, std::string(200, 'h'))}, &lsn).ok());
    ASSERT_TRUE(j->Sync().ok());  // records 31 on say 30 was synced
    for (JobId id = 31; id <= 80; ++id)
      ASSERT_TRUE(j->Append({Put(id, std::string(200, 'h'))}, &lsn).ok());
  }
  fs::path seg = Segments().at(0);
  const std::string whole = ReadFile(seg);
  const auto records = RecordExtents(whole);
  ASSERT_EQ(records.size(), 80u);
  ASSERT_GT(whole.size(), 5u * 4096);
  // Record n (1-based) is records[n - 1].
  auto first_touching = [&](size_t from) {
    size_t n = 0;
    while (records[n].second <= from) n++;
    return n + 1;
  };
  auto holed_at = [&](size_t page) {
    std::string holed = whole;
    std::fill(holed.begin() + static_cast<ptrdiff_t>(page * 4096),
              holed.begin() + static_cast<ptrdiff_t>((page + 1) * 4096), '\0');
    WriteFile(seg, holed);
  };
  // A page after record 30's end: the records from the first it touches on
  // were never synced.
  size_t page = records[29].second / 4096 + 1;
  const size_t lost = first_touching(page * 4096);
  ASSERT_GE(lost, 31u);
  ASSERT_LT(records[lost - 1].first, (page + 1) * 4096);
  holed_at(page);
  std::vector<std::pair<uint64_t, std::vector<Mutation>>> got;
  uint64_t last = 0;
  JournalCut cut;
  auto replay = [&] {
    got.clear();
    return Journal::Replay(
        dir_ + "/journal", 0,
        [&](uint64_t lsn, std::vector<Mutation>& batch) {
          got.emplace_back(lsn, batch);
          return Status::Ok();
        },
        &last, &cut);
  };
  Status st = replay();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(last, lost - 1);
  ASSERT_EQ(got.size(), lost - 1);
  EXPECT_EQ(got.back().second.at(0).record.id, lost - 1);
  EXPECT_EQ(cut.lsn, lost);
  EXPECT_EQ(cut.offset, records[lost - 1].first);
  EXPECT_EQ(cut.path, seg.string());
  EXPECT_EQ(cut.last_synced, 30u);
  // The records that start past the hole read, and are left out.
  size_t after = 0;
  for (const auto& r : records) after += r.first >= (page + 1) * 4096 ? 1 : 0;
  EXPECT_EQ(cut.records_after, after);
  EXPECT_GT(after, 10u);

  // The page where the sync ended, as the sync wrote it: records 1 to 30,
  // zeros after them to the page's end (its later version, with records
  // 31 on, never reached the disk; the pages after it did).
  {
    std::string partial = whole;
    const size_t from = records[30].first;
    const size_t to = (from / 4096 + 1) * 4096;
    ASSERT_LT(to + 4096, partial.size());
    std::fill(partial.begin() + static_cast<ptrdiff_t>(from),
              partial.begin() + static_cast<ptrdiff_t>(to), '\0');
    WriteFile(seg, partial);
    st = replay();
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(got.size(), 30u);
    EXPECT_EQ(cut.lsn, 31u);
    EXPECT_EQ(cut.offset, from);
  }

  // A page among records 1 to 30, which the sync covered: damage.
  holed_at(1);
  ASSERT_LT(first_touching(4096), 30u);
  st = replay();
  EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
  EXPECT_NE(st.message().find("say record 30 was synced"), std::string::npos) << st.ToString();
  EXPECT_EQ(cut.lsn, 0u);

  // A byte changed past the sync, with no page of zeros: not what a power
  // cut does, damage too.
  std::string flipped = whole;
  flipped[records[lost].first + 20] ^= 0x10;
  WriteFile(seg, flipped);
  st = replay();
  EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
}

// A sealed segment whose last pages never reached the disk: it ends short,
// in the middle of a record or in zeros, and the next segment's records
// start later than due.
TEST_F(JournalTest, ASealedSegmentCutShortByAPowerCutEndsTheJournal) {
  WriteJournal(40, std::string(200, 's'), 2048);
  std::vector<fs::path> segs = Segments();
  ASSERT_GE(segs.size(), 4u);
  const std::string second = ReadFile(segs[1]);
  const auto records = RecordExtents(second);
  ASSERT_GE(records.size(), 3u);
  const uint64_t first_of_second = std::stoull(segs[1].filename().string().substr(0, 20));
  auto replay = [&](JournalCut* cut, uint64_t* last) {
    return Journal::Replay(
        dir_ + "/journal", 0, [&](uint64_t, std::vector<Mutation>&) { return Status::Ok(); }, last,
        cut);
  };
  for (int shape = 0; shape < 3; ++shape) {
    SCOPED_TRACE(shape == 0   ? "its file ends inside a record"
                 : shape == 1 ? "its end in zeros"
                              : "its file ends where a record does");
    // The segment loses its last two records: cut inside the first of
    // them, zeroed from there on, or cut where it starts.
    const size_t from = records[records.size() - 2].first;
    std::string shorter = second.substr(0, shape == 0 ? from + 5 : from);
    if (shape == 1) shorter.append(second.size() + 4096 - shorter.size(), '\0');
    WriteFile(segs[1], shorter);
    JournalCut cut;
    uint64_t last = 0;
    Status st = replay(&cut, &last);
    ASSERT_TRUE(st.ok()) << st.ToString();
    const uint64_t lost = first_of_second + records.size() - 2;
    EXPECT_EQ(last, lost - 1);
    EXPECT_EQ(cut.lsn, lost);
    EXPECT_GT(cut.records_after, 10u);  // the later segments'
  }
  // The last segment's header cut short too (a crash as it was made):
  // the records the sealed one lost are still a cut, and said so.
  for (size_t i = 2; i < segs.size(); ++i) fs::remove(segs[i]);
  WriteFile(segs[1], std::string_view(second).substr(0, 10));
  const std::string first_seg = ReadFile(segs[0]);
  const auto first_records = RecordExtents(first_seg);
  WriteFile(segs[0], std::string_view(first_seg).substr(0, first_records.back().first));
  {
    JournalCut cut;
    uint64_t last = 0;
    Status st = replay(&cut, &last);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(last, first_records.size() - 1);
    EXPECT_EQ(cut.lsn, first_records.size());
  }

  // A whole segment gone is not what a power cut leaves (its name reached
  // the directory before the next one's): AMissingSegmentIsCorruption.

  // The same shape with a later record saying all of it was synced:
  // damage.
  fs::remove_all(dir_ + "/journal");
  {
    auto j = Create(1, 2048);
    uint64_t lsn = 0;
    for (JobId id = 1; id <= 40; ++id) {
      ASSERT_TRUE(j->Append({Put(id, std::string(200, 's'))}, &lsn).ok());
      ASSERT_TRUE(j->Sync().ok());
    }
  }
  segs = Segments();
  const std::string synced_second = ReadFile(segs[1]);
  const auto synced_records = RecordExtents(synced_second);
  WriteFile(segs[1], synced_second.substr(0, synced_records.back().first + 5));
  JournalCut cut;
  uint64_t last = 0;
  Status st = replay(&cut, &last);
  EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
  EXPECT_EQ(cut.lsn, 0u);
}

// Segments of version 2 (before records said what was synced) still read;
// a hole in one is damage, as it was then.
TEST_F(JournalTest, AnOlderSegmentReadsAndItsHoleIsDamage) {
  WriteJournal(40, std::string(200, 'o'));
  fs::path seg = Segments().at(0);
  const std::string v3 = ReadFile(seg);
  // The same records without the synced number, in a version 2 segment
  // (its header the magic and the version alone).
  std::string v2 = v3.substr(0, 7) + std::string(1, '\x02');
  for (const auto& [from, to] : RecordExtents(v3)) {
    std::string payload = v3.substr(from + 12, 8) + v3.substr(from + 12 + 16, to - from - 12 - 16);
    std::string header(12, '\0');
    auto set32 = [&](size_t at, uint32_t v) {
      for (int i = 0; i < 4; ++i) header[at + i] = static_cast<char>(v >> (8 * i));
    };
    set32(0, static_cast<uint32_t>(payload.size()));
    set32(4, JournalCrc32c(std::string_view(header.data(), 4)));
    set32(8, JournalCrc32c(payload));
    v2 += header + payload;
  }
  WriteFile(seg, v2);
  std::vector<std::pair<uint64_t, std::vector<Mutation>>> got;
  uint64_t last = 0;
  ASSERT_TRUE(ReplayAll(0, &got, &last).ok());
  ASSERT_EQ(got.size(), 40u);
  EXPECT_EQ(got[39].second.at(0).record, Put(40, "").record);
  EXPECT_EQ(got[39].second.at(0).body, std::string(200, 'o'));
  std::string holed = v2;
  std::fill(holed.begin() + 4096, holed.begin() + 8192, '\0');
  WriteFile(seg, holed);
  got.clear();
  EXPECT_EQ(ReplayAll(0, &got).code(), Code::kCorruption);
}

TEST_F(JournalTest, SegmentsAreSealedAndGoOnceReleased) {
  auto j = Create(1, 256);
  uint64_t lsn = 0;
  for (JobId id = 1; id <= 40; ++id)
    ASSERT_TRUE(j->Append({Put(id, std::string(100, 'b'))}, &lsn).ok());
  EXPECT_TRUE(j->HasSealed());
  size_t before = Segments().size();
  ASSERT_GT(before, 10u);
  uint64_t bytes = j->bytes();
  j->ReleaseThrough(20);
  EXPECT_LT(Segments().size(), before);
  EXPECT_LT(j->bytes(), bytes);
  // What is left starts at or before record 21 and runs to 40.
  std::vector<std::pair<uint64_t, std::vector<Mutation>>> got;
  uint64_t last = 0;
  ASSERT_TRUE(ReplayAll(20, &got, &last).ok());
  ASSERT_EQ(got.size(), 20u);
  EXPECT_EQ(got.front().first, 21u);
  EXPECT_EQ(last, 40u);
  // Records released are gone: replaying from further back is an error.
  got.clear();
  Status st = ReplayAll(0, &got);
  EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
  j->ReleaseThrough(40);
  EXPECT_FALSE(j->HasSealed());
  EXPECT_EQ(Segments().size(), 1u);  // the open one stays
}

TEST_F(JournalTest, AMissingSegmentIsCorruption) {
  WriteJournal(20, std::string(100, 'b'), 256);
  std::vector<fs::path> segs = Segments();
  ASSERT_GE(segs.size(), 3u);
  fs::remove(segs[1]);
  std::vector<std::pair<uint64_t, std::vector<Mutation>>> got;
  Status st = ReplayAll(0, &got);
  EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
  EXPECT_NE(st.message().find("missing"), std::string::npos) << st.ToString();
}

TEST_F(JournalTest, AnAppendThatFailsLeavesNothingBehind) {
  auto j = Create();
  uint64_t lsn = 0;
  ASSERT_TRUE(j->Append({Put(1, "one")}, &lsn).ok());
  // A batch too big for the process's file size limit fails half-written.
  struct rlimit old {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  struct rlimit small = old;
  small.rlim_cur = 4096;
  signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  Status st = j->Append({Put(2, std::string(10000, 'x'))}, &lsn);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(lsn, 1u);  // untouched
  ASSERT_TRUE(j->Append({Put(3, "three")}, &lsn).ok());
  EXPECT_EQ(lsn, 2u);
  j.reset();
  std::vector<std::pair<uint64_t, std::vector<Mutation>>> got;
  ASSERT_TRUE(ReplayAll(0, &got).ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].second.at(0).record.id, 3u);
}

// Fails with EIO the first time, then "succeeds", as Linux does after a
// writeback error it has reported once.
std::atomic<int> g_datasyncs{0};
int FailFirstDatasync(int fd) {
  if (g_datasyncs.fetch_add(1) == 0) {
    errno = EIO;
    return -1;
  }
  return ::fdatasync(fd);
}

TEST_F(JournalTest, ASyncThatFailedIsNeverTriedAgainNorTheJournalWrittenAfterIt) {
  g_datasyncs = 0;
  Journal::Options o;
  o.dir = dir_ + "/journal";
  o.fsync = FsyncPolicy::kAlways;
  o.datasync = FailFirstDatasync;
  auto made = Journal::Create(o, 1);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::unique_ptr<Journal> j = std::move(made).value();
  uint64_t lsn = 0;
  ASSERT_TRUE(j->Append({Put(1, "one")}, &lsn).ok());
  Status first = j->Sync();
  EXPECT_FALSE(first.ok());
  EXPECT_NE(first.message().find("Input/output error"), std::string::npos) << first.ToString();
  EXPECT_NE(first.message().find("not tried again"), std::string::npos) << first.ToString();
  // The second sync would "succeed": it must not be made, nor count.
  EXPECT_FALSE(j->Sync().ok());
  EXPECT_FALSE(j->SyncThrough(1).ok());
  Status here;
  EXPECT_TRUE(j->TrySyncHere(&here));
  EXPECT_FALSE(here.ok());
  EXPECT_EQ(j->synced_lsn(), 0u);
  EXPECT_EQ(g_datasyncs.load(), 1);
  Status after = j->Append({Put(2, "two")}, &lsn);
  EXPECT_FALSE(after.ok());
  EXPECT_EQ(after.message(), first.message());
  EXPECT_EQ(lsn, 1u);  // untouched
}

// Out of descriptors, a sync from another thread (which syncs a copy of
// the open segment's) syncs nothing and says so; with one free again, it
// is made, and counts.
TEST_F(JournalTest, ASyncWithNoDescriptorFailsAndIsMadeLater) {
  auto j = Create();
  uint64_t lsn = 0;
  ASSERT_TRUE(j->Append({Put(1, "one")}, &lsn).ok());
  struct rlimit old {};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  std::vector<int> taken;
  struct rlimit tight = old;
  tight.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) taken.push_back(fd);
  Status st = j->Sync();
  for (int fd : taken) ::close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no descriptor"), std::string::npos) << st.ToString();
  EXPECT_EQ(j->synced_lsn(), 0u);
  ASSERT_TRUE(j->Sync().ok());
  EXPECT_EQ(j->synced_lsn(), 1u);
}

// ---- the RocksDB store over its journal ------------------------------------

class RocksJournalTest : public JournalTest {
 protected:
  std::unique_ptr<RocksStore> OpenStore(uint64_t segment_bytes = 0) {
    RocksStoreOptions o;
    o.dir = dir_;
    o.fsync = FsyncPolicy::kEverySec;
    o.journal_segment_bytes = segment_bytes;
    auto r = RocksStore::Open(o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }
  static std::map<JobId, std::string> Bodies(Store& s) {
    std::map<JobId, std::string> out;
    JobId max_id = 0;
    EXPECT_TRUE(s.Load(
                     [&](const JobRecord& r, std::string_view body) {
                       out[r.id] = std::string(body);
                       return Status::Ok();
                     },
                     &max_id)
                    .ok());
    return out;
  }
};

TEST_F(RocksJournalTest, OpenAppliesWhatOnlyTheJournalHeld) {
  // In a child that dies without a flush or a destructor, as a killed
  // delayqd would.
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto store = OpenStore();
    if (store == nullptr || store->journal() == nullptr) _exit(2);
    uint64_t lsn = 0;
    // Written to both: the store has it in a memtable only (no log).
    std::vector<Mutation> b1 = {Put(1, "one"), Put(2, "two")};
    if (!store->journal()->Append(b1, &lsn).ok() || !store->ApplyThrough(b1, lsn).ok()) _exit(3);
    // Journaled only: the writer had not taken it yet.
    if (!store->journal()->Append({Change(Mutation::Kind::kDelete, 1), Put(3, "three")}, &lsn).ok())
      _exit(4);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  auto store = OpenStore();
  EXPECT_EQ(store->replayed_records(), 2u);
  std::map<JobId, std::string> want = {{2, "two"}, {3, "three"}};
  EXPECT_EQ(Bodies(*store), want);
  // The journal was applied and removed: a new one starts after it.
  uint64_t lsn = 0;
  ASSERT_TRUE(store->journal()->Append({Put(4, "four")}, &lsn).ok());
  EXPECT_EQ(lsn, 3u);
}

TEST_F(RocksJournalTest, AStartThatFailsOnADamagedJournalLeavesItForTheNext) {
  WriteJournal(50, "body");
  fs::path seg = Segments().at(0);
  std::string bad = ReadFile(seg);
  bad[bad.size() / 2] = static_cast<char>(bad[bad.size() / 2] ^ 1);
  WriteFile(seg, bad);
  for (int attempt = 0; attempt < 2; ++attempt) {
    RocksStoreOptions o;
    o.dir = dir_;
    o.fsync = FsyncPolicy::kEverySec;
    auto r = RocksStore::Open(o);
    ASSERT_FALSE(r.ok()) << "attempt " << attempt;
    EXPECT_EQ(r.status().code(), Code::kCorruption) << r.status().ToString();
    ASSERT_TRUE(fs::exists(seg)) << "attempt " << attempt << " removed the journal";
  }
}

// A store whose journal a power cut left with a hole opens with what came
// before it, says where it ended, and starts a journal of its own that the
// next start replays as usual.
TEST_F(RocksJournalTest, AStoreOpensUpToAHoleAPowerCutLeftAndGoesOn) {
  WriteJournal(60, std::string(200, 'p'));
  fs::path seg = Segments().at(0);
  std::string holed = ReadFile(seg);
  const auto records = RecordExtents(holed);
  size_t kept = 0;
  while (records[kept].second <= 2 * 4096) kept++;
  std::fill(holed.begin() + 2 * 4096, holed.begin() + 3 * 4096, '\0');
  WriteFile(seg, holed);
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->journal_cut().lsn, kept + 1);
  EXPECT_EQ(store->replayed_records(), kept);
  std::map<JobId, std::string> bodies = Bodies(*store);
  ASSERT_EQ(bodies.size(), kept);
  EXPECT_EQ(bodies.rbegin()->first, kept);
  EXPECT_FALSE(fs::exists(seg));
  uint64_t lsn = 0;
  std::vector<Mutation> b = {Put(1000, "after")};
  ASSERT_TRUE(store->journal()->Append(b, &lsn).ok());
  EXPECT_EQ(lsn, kept + 1);
  store.reset();
  store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->journal_cut().lsn, 0u);
  bodies = Bodies(*store);
  EXPECT_EQ(bodies.size(), kept + 1);
  EXPECT_EQ(bodies[1000], "after");
}

TEST_F(RocksJournalTest, ACheckpointLetsTheSealedSegmentsGo) {
  auto store = OpenStore(4096);
  uint64_t lsn = 0;
  for (JobId id = 1; id <= 2000; ++id) {
    std::vector<Mutation> b = {Put(id, std::string(200, 'j'))};
    if (id > 1) b.push_back(Change(Mutation::Kind::kDelete, id - 1));
    ASSERT_TRUE(store->journal()->Append(b, &lsn).ok());
    ASSERT_TRUE(store->ApplyThrough(b, lsn).ok());
  }
  // About 500 KB went through the journal; what stays is a segment or two.
  EXPECT_LE(store->journal()->bytes(), 3u * 4096) << store->journal()->bytes();
  store.reset();
  store = OpenStore();
  EXPECT_EQ(store->replayed_records(), 0u);
  std::map<JobId, std::string> want = {{2000, std::string(200, 'j')}};
  EXPECT_EQ(Bodies(*store), want);
}

}  // namespace
}  // namespace delayq::store

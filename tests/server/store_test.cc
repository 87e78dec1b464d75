// The durable store, black-box against the real delayqd: a graceful restart
// keeps every job in its state, a damaged data directory stops the start
// with a clear error, and a full disk is answered with INTERNAL_ERROR while
// reads go on, until space returns.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "server/server_process.h"

namespace delayq::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string Put(RawClient& c, std::string_view body, int pri = 0, int delay = 0) {
  return c.Call("put " + std::to_string(pri) + " " + std::to_string(delay) + " 60 " +
                std::to_string(body.size()) + "\r\n" + std::string(body) + "\r\n");
}

class StoreTest : public ::testing::Test {
 protected:
  void Start(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"-b", dir_.path()};
    args.insert(args.end(), extra.begin(), extra.end());
    std::string error;
    ASSERT_TRUE(server_.Start(DelayqdPath(), args, &error)) << error;
  }
  void ExpectTheStartFailsOnCorruption(const std::string& damaged) {
    std::string error;
    EXPECT_FALSE(server_.Start(DelayqdPath(), {"-b", dir_.path()}, &error, 5000ms))
        << "delayqd started with " << damaged << " damaged: " << server_.Log();
    EXPECT_NE(error.find("code=corruption"), std::string::npos) << error;
    EXPECT_NE(error.find("event=store_open_failed"), std::string::npos) << error;
  }
  RawClient Connect() {
    RawClient c(server_.port());
    EXPECT_TRUE(c.ok()) << c.error();
    return c;
  }
  TempDir dir_;
  ServerProcess server_;
};

TEST_F(StoreTest, ARestartKeepsEveryStateBodyAndCounter) {
  Start();
  {
    RawClient c = Connect();
    ASSERT_EQ(c.Call("use jobs\r\n"), "USING jobs\r\n");
    ASSERT_EQ(c.Call("watch jobs\r\n"), "WATCHING 2\r\n");
    ASSERT_EQ(Put(c, "ready one", 5), "INSERTED 1\r\n");
    ASSERT_EQ(Put(c, "delayed", 1, 3600), "INSERTED 2\r\n");
    ASSERT_EQ(Put(c, "to bury", 2), "INSERTED 3\r\n");
    ASSERT_EQ(Put(c, "gone", 3), "INSERTED 4\r\n");
    ASSERT_EQ(c.Call("put-ex 0 0 60000 6 key=order-7\r\nkeyed!\r\n"), "INSERTED 5\r\n");
    ASSERT_EQ(c.Call("delete 4\r\n"), "DELETED\r\n");
    ASSERT_EQ(c.Call("reserve-with-timeout 0\r\n"), "RESERVED 5 6\r\nkeyed!\r\n");
    ASSERT_EQ(c.Call("release 5 9 0\r\n"), "RELEASED\r\n");
    ASSERT_EQ(c.Call("reserve-with-timeout 0\r\n"), "RESERVED 3 7\r\nto bury\r\n");
    ASSERT_EQ(c.Call("bury 3 8\r\n"), "BURIED\r\n");
    ASSERT_EQ(c.Call("reserve-with-timeout 0\r\n"), "RESERVED 1 9\r\nready one\r\n");
    // Job 1 stays reserved when the server stops: it comes back ready.
  }
  ASSERT_EQ(WEXITSTATUS(server_.Stop()), 0);
  Start();
  RawClient c = Connect();
  EXPECT_EQ(c.Call("peek 1\r\n"), "FOUND 1 9\r\nready one\r\n");
  std::string j1 = c.Call("stats-job 1\r\n");
  EXPECT_EQ(YamlValue(j1, "state"), "ready");
  EXPECT_EQ(YamlValue(j1, "tube"), "jobs");
  EXPECT_EQ(YamlValue(j1, "pri"), "5");
  EXPECT_EQ(YamlValue(j1, "reserves"), "1");
  std::string j2 = c.Call("stats-job 2\r\n");
  EXPECT_EQ(YamlValue(j2, "state"), "delayed");
  EXPECT_EQ(YamlValue(j2, "delay"), "3600");
  std::string j3 = c.Call("stats-job 3\r\n");
  EXPECT_EQ(YamlValue(j3, "state"), "buried");
  EXPECT_EQ(YamlValue(j3, "pri"), "8");
  EXPECT_EQ(YamlValue(j3, "buries"), "1");
  EXPECT_EQ(c.Call("peek 4\r\n"), "NOT_FOUND\r\n");
  std::string j5 = c.Call("stats-job 5\r\n");
  EXPECT_EQ(YamlValue(j5, "releases"), "1");
  EXPECT_EQ(YamlValue(j5, "pri"), "9");
  ASSERT_EQ(c.Call("use jobs\r\n"), "USING jobs\r\n");
  EXPECT_EQ(c.Call("peek-key order-7\r\n"), "FOUND 5 6\r\nkeyed!\r\n");
  // A put with the same key finds the recovered job.
  EXPECT_EQ(c.Call("put-ex 0 0 60000 3 key=order-7\r\nnew\r\n"), "EXISTS 5\r\n");
  std::string tube = c.Call("stats-tube jobs\r\n");
  EXPECT_EQ(YamlValue(tube, "current-jobs-ready"), "2");
  EXPECT_EQ(YamlValue(tube, "current-jobs-delayed"), "1");
  EXPECT_EQ(YamlValue(tube, "current-jobs-buried"), "1");
  // Ids go on above every id ever handed out.
  EXPECT_EQ(Put(c, "after"), "INSERTED 6\r\n");
  EXPECT_NE(server_.Log().find("event=recovery_done jobs=4"), std::string::npos) << server_.Log();
}

// Overwrites `n` bytes in the middle of the largest file whose name ends
// in `suffix`. Returns its name, or "" when there is none.
std::string Damage(const std::string& dir, std::string_view suffix, size_t n) {
  fs::path victim;
  uintmax_t size = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name.size() >= suffix.size() && name.ends_with(suffix) && e.file_size() > size) {
      victim = e.path();
      size = e.file_size();
    }
  }
  if (victim.empty() || size < 2 * n) return {};
  std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(size / 2));
  std::string junk(n, '\xA5');
  f.write(junk.data(), static_cast<std::streamsize>(n));
  return victim.filename().string();
}

void FillJobs(RawClient& c, int n) {
  std::string batch;
  for (int i = 0; i < n; ++i) {
    std::string body = "job-" + std::to_string(i) + "-" + std::string(200, 'x');
    batch += "put 0 0 60 " + std::to_string(body.size()) + "\r\n" + body + "\r\n";
  }
  ASSERT_TRUE(c.Send(batch));
  std::string replies = c.ReadReplies(static_cast<size_t>(n));
  ASSERT_EQ(replies.find("INSERTED"), 0u);
  ASSERT_EQ(replies.find("INTERNAL_ERROR"), std::string::npos);
}

TEST_F(StoreTest, ASigkillLeavesJobsInTheJournalAndTheStartReplaysThem) {
  Start();  // everysec: the journal holds the changes, RocksDB writes no log
  {
    RawClient c = Connect();
    FillJobs(c, 2000);
    ASSERT_EQ(c.Call("delete 7\r\n"), "DELETED\r\n");
  }
  server_.Signal(SIGKILL);
  while (server_.Alive()) std::this_thread::sleep_for(5ms);
  Start();
  RawClient c = Connect();
  EXPECT_EQ(YamlValue(c.Call("stats\r\n"), "current-jobs-ready"), "1999");
  EXPECT_EQ(c.Call("peek 7\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("peek 2000\r\n").rfind("FOUND 2000 ", 0), 0u);
  EXPECT_NE(server_.Log().find("event=journal_replayed"), std::string::npos) << server_.Log();
  // Replayed, flushed, and removed: a graceful stop and start replay nothing.
  ASSERT_EQ(WEXITSTATUS(server_.Stop()), 0);
  Start();
  std::string log = server_.Log();  // of all three starts
  EXPECT_EQ(log.find("event=journal_replayed", log.find("event=journal_replayed") + 1),
            std::string::npos)
      << log;
  RawClient d = Connect();
  EXPECT_EQ(YamlValue(d.Call("stats\r\n"), "current-jobs-ready"), "1999");
}

TEST_F(StoreTest, ADamagedJournalStopsTheStartWithAClearError) {
  Start();
  {
    RawClient c = Connect();
    // Many records, so the damage in the middle has records after it (a
    // damaged last record is what a torn append looks like).
    for (int i = 0; i < 20; ++i) FillJobs(c, 100);
  }
  server_.Signal(SIGKILL);  // the jobs stay in the journal only
  while (server_.Alive()) std::this_thread::sleep_for(5ms);
  std::string damaged = Damage(dir_.path() + "/journal", ".jnl", 64);
  ASSERT_FALSE(damaged.empty()) << "no journal in " << dir_.path();
  ExpectTheStartFailsOnCorruption(damaged);
}

// Under always the journal's segments are written full of zeros ahead of
// the records (docs/storage.md, "The journal"): damage among the records
// is still damage. (More records than the megabyte of zeros ahead, so
// that the middle of the file is among them.)
TEST_F(StoreTest, ADamagedJournalUnderAlwaysStopsTheStartWithAClearError) {
  Start({"--fsync", "always"});
  {
    RawClient c = Connect();
    for (int i = 0; i < 60; ++i) FillJobs(c, 100);
  }
  server_.Signal(SIGKILL);  // the jobs stay in the journal only
  while (server_.Alive()) std::this_thread::sleep_for(5ms);
  std::string damaged = Damage(dir_.path() + "/journal", ".jnl", 64);
  ASSERT_FALSE(damaged.empty()) << "no journal in " << dir_.path();
  ExpectTheStartFailsOnCorruption(damaged);
}

TEST_F(StoreTest, ADamagedTableStopsTheStartWithAClearError) {
  // Enough data that RocksDB writes sorted tables, then a graceful stop.
  Start();
  {
    RawClient c = Connect();
    for (int i = 0; i < 30; ++i) FillJobs(c, 1000);
  }
  ASSERT_EQ(WEXITSTATUS(server_.Stop()), 0);
  std::string damaged = Damage(dir_.path(), ".sst", 256);
  if (damaged.empty()) GTEST_SKIP() << "RocksDB wrote no table file for 30,000 jobs";
  std::string error;
  EXPECT_FALSE(server_.Start(DelayqdPath(), {"-b", dir_.path()}, &error, 5000ms))
      << "delayqd started on a damaged table " << damaged;
  EXPECT_NE(error.find("code=corruption"), std::string::npos) << error;
}

// The first start makes the data directory (and its parents) and has
// nothing to warn about.
TEST_F(StoreTest, TheFirstStartMakesTheDirectoryWithoutWarnings) {
  const std::string dir = dir_.path() + "/new/store";
  std::string error;
  ASSERT_TRUE(server_.Start(DelayqdPath(), {"-b", dir}, &error)) << error;
  RawClient c = Connect();
  EXPECT_EQ(Put(c, "x"), "INSERTED 1\r\n");
  EXPECT_TRUE(fs::is_directory(dir));
  std::string log = server_.Log();
  EXPECT_EQ(log.find("level=warn"), std::string::npos) << log;
  EXPECT_EQ(log.find("level=error"), std::string::npos) << log;
}

// SIGTERM: delayqd stops accepting at once, sends every reply of a command it
// ran (puts waiting for their fsync, a backlog held for a client that reads
// late), closes each connection at a reply boundary and exits 0, even when
// SIGTERM comes again while the store closes. Each job acknowledged is there
// after the restart, and no job is there whose put was not acknowledged.
TEST_F(StoreTest, SigtermFinishesInFlightRepliesAndKeepsExactlyTheAcknowledgedJobs) {
  Start({"--fsync", "always"});
  const std::string big(65535, 'b');
  {
    RawClient setup = Connect();
    ASSERT_EQ(Put(setup, big), "INSERTED 1\r\n");
  }
  // The late reader: a thousand peeks of a 64 KB job, 64 MB of replies,
  // more than the kernel's buffers and the server's 256 KB of queued replies
  // hold, so the server is still writing to it when it stops.
  RawClient late = Connect();
  ASSERT_TRUE(late.Send(Repeated("peek 1\r\n", 1000)));
  // The producer: puts in one write, each reply waiting for its fsync.
  const int kPuts = 200;
  RawClient producer = Connect();
  ASSERT_TRUE(producer.Send(Repeated("put 0 0 60 1\r\np\r\n", kPuts)));
  ASSERT_EQ(producer.ReadReply(), "INSERTED 2\r\n");
  server_.Signal(SIGTERM);

  // The listener closes while the server still finishes its replies.
  bool refused = false;
  for (auto until = std::chrono::steady_clock::now() + 3s;
       std::chrono::steady_clock::now() < until && server_.Alive();) {
    RawClient probe(server_.port(), 0ms);
    if (!probe.ok()) {
      refused = server_.Alive();
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(refused) << "a connection was accepted after SIGTERM, or delayqd had exited";

  // The producer's replies: whole lines, consecutive ids, then the close.
  std::string replies;
  ASSERT_TRUE(producer.WaitClosed(10s, &replies)) << "delayqd kept the producer open";
  uint64_t acknowledged = 2;  // the one read above
  size_t pos = 0;
  while (pos < replies.size()) {
    std::string want = "INSERTED " + std::to_string(acknowledged + 1) + "\r\n";
    ASSERT_EQ(replies.substr(pos, want.size()), want) << "reply " << acknowledged << " of the puts";
    pos += want.size();
    ++acknowledged;
  }
  // The late reader gets whole replies only, and then the close.
  std::string peeks;
  ASSERT_TRUE(late.WaitClosed(10s, &peeks)) << "delayqd kept the late reader open";
  const std::string found = "FOUND 1 65535\r\n" + big + "\r\n";
  ASSERT_GT(peeks.size(), 0u);
  EXPECT_EQ(peeks.size() % found.size(), 0u) << "a reply was cut at the close";
  size_t peeks_answered = peeks.size() / found.size();
  for (size_t i = 0; i < peeks_answered; ++i)
    ASSERT_EQ(peeks.compare(i * found.size(), found.size(), found), 0) << "peek reply " << i;

  // SIGTERM again once the loop has stopped, while the store closes.
  for (auto until = std::chrono::steady_clock::now() + 5s;
       server_.Log().find("event=stopped") == std::string::npos &&
       std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(1ms);
  server_.Signal(SIGTERM);
  int st = server_.Stop();
  ASSERT_TRUE(WIFEXITED(st)) << "wait status " << st;
  EXPECT_EQ(WEXITSTATUS(st), 0) << server_.Log();
  EXPECT_NE(server_.Log().find("event=stopping"), std::string::npos) << server_.Log();

  Start();
  RawClient c = Connect();
  std::string stats = c.Call("stats\r\n");
  EXPECT_EQ(YamlValue(stats, "current-jobs-ready"), std::to_string(acknowledged))
      << "acknowledged " << acknowledged << " puts (job 1 included), peeks answered "
      << peeks_answered;
  EXPECT_EQ(c.Call("peek " + std::to_string(acknowledged) + "\r\n"),
            "FOUND " + std::to_string(acknowledged) + " 1\r\np\r\n");
  EXPECT_EQ(c.Call("peek " + std::to_string(acknowledged + 1) + "\r\n"), "NOT_FOUND\r\n");
}

TEST_F(StoreTest, AForeignDirectoryIsRefused) {
  std::ofstream(dir_.path() + "/CURRENT") << "not a rocksdb manifest name\n";
  std::string error;
  EXPECT_FALSE(server_.Start(DelayqdPath(), {"-b", dir_.path()}, &error, 5000ms));
  EXPECT_NE(error.find("event=store_open_failed"), std::string::npos) << error;
}

// A tmpfs with a size is a disk that really fills up. Needs CAP_SYS_ADMIN (root
// in CI); skipped elsewhere.
class DiskFullTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    mount_ = dir_.path() + "/disk";
    fs::create_directory(mount_);
    if (mount("tmpfs", mount_.c_str(), "tmpfs", 0, "size=96m") != 0)
      GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno) << ")";
    mounted_ = true;
  }
  void TearDown() override {
    server_.Stop();
    if (mounted_) umount2(mount_.c_str(), MNT_DETACH);
  }
  TempDir dir_;
  std::string mount_;
  bool mounted_ = false;
  ServerProcess server_;
};

// Under `always` RocksDB's log meets the full disk; under `everysec` the
// journal does.
TEST_P(DiskFullTest, ChangesFailClearlyReadsGoOnAndWritesResumeWhenSpaceReturns) {
  // A filler file takes most of the space, so the store hits the wall soon;
  // deleting it is "space returns".
  std::string filler = mount_ + "/filler";
  {
    std::ofstream f(filler, std::ios::binary);
    std::string mb(1 << 20, 'f');
    // RocksDB clears a write error only with a memtable's worth (64 MB)
    // free again, so the disk is 96 MB and the filler leaves about 6.
    for (int i = 0; i < 90; ++i) f.write(mb.data(), static_cast<std::streamsize>(mb.size()));
  }
  std::string error;
  ASSERT_TRUE(server_.Start(DelayqdPath(), {"-b", mount_ + "/data", "--fsync", GetParam()}, &error))
      << error;
  RawClient c(server_.port());
  ASSERT_TRUE(c.ok());
  std::string body(4000, 'b');
  int inserted = 0;
  std::string reply;
  for (int i = 0; i < 5000; ++i) {
    reply = Put(c, body);
    if (reply.rfind("INSERTED", 0) != 0) break;
    inserted++;
  }
  ASSERT_EQ(reply, "INTERNAL_ERROR\r\n") << "after " << inserted << " puts";
  ASSERT_GT(inserted, 0);
  // Further changes are refused; reads still work.
  EXPECT_EQ(Put(c, "small"), "INTERNAL_ERROR\r\n");
  EXPECT_EQ(c.Call("peek 1\r\n"), "FOUND 1 4000\r\n" + body + "\r\n");
  EXPECT_EQ(YamlValue(c.Call("stats\r\n"), "current-connections"), "1");
  EXPECT_NE(server_.Log().find("event=store_failing"), std::string::npos) << server_.Log();

  fs::remove(filler);
  // The store retries by itself; puts are taken again soon.
  auto deadline = std::chrono::steady_clock::now() + 20s;
  do {
    std::this_thread::sleep_for(100ms);
    reply = Put(c, "after");
  } while (reply == "INTERNAL_ERROR\r\n" && std::chrono::steady_clock::now() < deadline);
  ASSERT_EQ(reply.rfind("INSERTED", 0), 0u) << reply << server_.Log();
  EXPECT_NE(server_.Log().find("event=store_recovered"), std::string::npos);

  // Nothing acknowledged was lost: restart and count.
  ASSERT_EQ(WEXITSTATUS(server_.Stop()), 0);
  ASSERT_TRUE(server_.Start(DelayqdPath(), {"-b", mount_ + "/data"}, &error)) << error;
  RawClient d(server_.port());
  int ready = std::stoi(YamlValue(d.Call("stats\r\n"), "current-jobs-ready"));
  EXPECT_GE(ready, inserted + 1);
  for (int id = 1; id <= inserted; ++id)
    ASSERT_EQ(d.Call("peek " + std::to_string(id) + "\r\n"),
              "FOUND " + std::to_string(id) + " 4000\r\n" + body + "\r\n");
}

INSTANTIATE_TEST_SUITE_P(DiskFull, DiskFullTest, ::testing::Values("always", "everysec"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace delayq::testing

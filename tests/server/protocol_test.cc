// Black-box tests of delayqd's beanstalkd protocol: a real build/delayqd on a
// free loopback port, spoken to over raw sockets, with byte-exact expected
// replies (beanstalkd 1.12's; docs/protocol.md says where delayq differs).
//
// Suites:
//  - Protocol.*   every command of beanstalkd 1.12 and its errors, framing,
//                 pipelining, input split into single bytes, connections.
//  - Extension.*  delayq's own commands (put-ex, delete-key, peek-key,
//                 reserve-batch, clear-tube).
//  - Oracle.*     scripted sessions of deterministic commands replayed
//                 against Debian's beanstalkd (/usr/bin/beanstalkd) and
//                 delayqd; the two transcripts must be equal byte for byte
//                 (time-, pid- and version-dependent YAML values masked).
//  - Stress.*     hundreds of concurrent connections: every job delivered
//                 exactly once.
//  - Fuzz.*       garbage on many connections while a clean one keeps
//                 working.
//
// The expectations are beanstalkd's, so the Protocol suite can be pointed at
// beanstalkd itself to check the tests: DELAYQ_TEST_AGAINST=beanstalkd runs
// it (and Stress/Fuzz) against /usr/bin/beanstalkd, skipping delayq-only
// tests.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <latch>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "server/redis_process.h"
#include "server/server_process.h"

namespace delayq::testing {
namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;
using namespace std::string_view_literals;
using Clock = std::chrono::steady_clock;

// ---- helpers -----------------------------------------------------------------

bool AgainstBeanstalkd() {
  const char* e = std::getenv("DELAYQ_TEST_AGAINST");
  return e != nullptr && std::string_view(e) == "beanstalkd";
}

// DELAYQ_TEST_AGAINST=redis: delayqd on the Redis backend, with a
// redis-server of its own for each test.
std::string TargetBinary() { return AgainstBeanstalkd() ? kBeanstalkdPath : DelayqdPath(); }

std::string Ok(std::string_view yaml) {
  return "OK " + std::to_string(yaml.size()) + "\r\n" + std::string(yaml) + "\r\n";
}

std::string Job(std::string_view word, uint64_t id, std::string_view body) {
  return std::string(word) + " " + std::to_string(id) + " " + std::to_string(body.size()) + "\r\n" +
         std::string(body) + "\r\n";
}
std::string Reserved(uint64_t id, std::string_view body) { return Job("RESERVED", id, body); }
std::string Found(uint64_t id, std::string_view body) { return Job("FOUND", id, body); }
std::string Inserted(uint64_t id) { return "INSERTED " + std::to_string(id) + "\r\n"; }

// "- a\n- b\n" list YAML of tube names.
std::string ListYaml(const std::vector<std::string>& names) {
  std::string y = "---\n";
  for (const auto& n : names) y += "- " + n + "\n";
  return y;
}

std::vector<std::string> YamlKeys(std::string_view reply) {
  std::vector<std::string> keys;
  size_t p = reply.find("---\n");
  if (p == std::string_view::npos) return keys;
  p += 4;
  while (p < reply.size()) {
    size_t e = reply.find('\n', p);
    if (e == std::string_view::npos) break;
    std::string_view line = reply.substr(p, e - p);
    size_t c = line.find(": ");
    if (c != std::string_view::npos) keys.emplace_back(line.substr(0, c));
    p = e + 1;
  }
  return keys;
}

struct JobStatsExpect {
  uint64_t id = 1;
  std::string tube = "default";
  std::string state = "ready";
  uint32_t pri = 0;
  int64_t age = 0;
  int64_t delay = 0;
  int64_t ttr = 60;
  int64_t time_left = 0;
  uint32_t reserves = 0, timeouts = 0, releases = 0, buries = 0, kicks = 0;
};

std::string JobStatsReply(const JobStatsExpect& e) {
  std::string y = "---\n";
  y += "id: " + std::to_string(e.id) + "\n";
  y += "tube: " + e.tube + "\n";
  y += "state: " + e.state + "\n";
  y += "pri: " + std::to_string(e.pri) + "\n";
  y += "age: " + std::to_string(e.age) + "\n";
  y += "delay: " + std::to_string(e.delay) + "\n";
  y += "ttr: " + std::to_string(e.ttr) + "\n";
  y += "time-left: " + std::to_string(e.time_left) + "\n";
  y += "file: 0\n";
  y += "reserves: " + std::to_string(e.reserves) + "\n";
  y += "timeouts: " + std::to_string(e.timeouts) + "\n";
  y += "releases: " + std::to_string(e.releases) + "\n";
  y += "buries: " + std::to_string(e.buries) + "\n";
  y += "kicks: " + std::to_string(e.kicks) + "\n";
  return Ok(y);
}

struct TubeStatsExpect {
  std::string name = "default";
  uint64_t urgent = 0, ready = 0, reserved = 0, delayed = 0, buried = 0, total = 0;
  uint64_t using_ = 0, watching = 0, waiting = 0, cmd_delete = 0, cmd_pause = 0;
  int64_t pause = 0, pause_left = 0;
};

std::string TubeStatsReply(const TubeStatsExpect& e) {
  std::string y = "---\n";
  y += "name: " + e.name + "\n";
  y += "current-jobs-urgent: " + std::to_string(e.urgent) + "\n";
  y += "current-jobs-ready: " + std::to_string(e.ready) + "\n";
  y += "current-jobs-reserved: " + std::to_string(e.reserved) + "\n";
  y += "current-jobs-delayed: " + std::to_string(e.delayed) + "\n";
  y += "current-jobs-buried: " + std::to_string(e.buried) + "\n";
  y += "total-jobs: " + std::to_string(e.total) + "\n";
  y += "current-using: " + std::to_string(e.using_) + "\n";
  y += "current-watching: " + std::to_string(e.watching) + "\n";
  y += "current-waiting: " + std::to_string(e.waiting) + "\n";
  y += "cmd-delete: " + std::to_string(e.cmd_delete) + "\n";
  y += "cmd-pause-tube: " + std::to_string(e.cmd_pause) + "\n";
  y += "pause: " + std::to_string(e.pause) + "\n";
  y += "pause-time-left: " + std::to_string(e.pause_left) + "\n";
  return Ok(y);
}

// Keys whose values depend on time, the process or the build.
const std::vector<std::string> kVolatileJobKeys = {"age", "time-left"};
const std::vector<std::string> kVolatileStatsKeys = {"pid",          "version", "rusage-utime",
                                                     "rusage-stime", "uptime",  "id"};

// beanstalkd 1.12's `stats` keys, in its order (prot.c STATS_FMT).
const std::vector<std::string> kStatsKeys = {"current-jobs-urgent",
                                             "current-jobs-ready",
                                             "current-jobs-reserved",
                                             "current-jobs-delayed",
                                             "current-jobs-buried",
                                             "cmd-put",
                                             "cmd-peek",
                                             "cmd-peek-ready",
                                             "cmd-peek-delayed",
                                             "cmd-peek-buried",
                                             "cmd-reserve",
                                             "cmd-reserve-with-timeout",
                                             "cmd-delete",
                                             "cmd-release",
                                             "cmd-use",
                                             "cmd-watch",
                                             "cmd-ignore",
                                             "cmd-bury",
                                             "cmd-kick",
                                             "cmd-touch",
                                             "cmd-stats",
                                             "cmd-stats-job",
                                             "cmd-stats-tube",
                                             "cmd-list-tubes",
                                             "cmd-list-tube-used",
                                             "cmd-list-tubes-watched",
                                             "cmd-pause-tube",
                                             "job-timeouts",
                                             "total-jobs",
                                             "max-job-size",
                                             "current-tubes",
                                             "current-connections",
                                             "current-producers",
                                             "current-workers",
                                             "current-waiting",
                                             "total-connections",
                                             "pid",
                                             "version",
                                             "rusage-utime",
                                             "rusage-stime",
                                             "uptime",
                                             "binlog-oldest-index",
                                             "binlog-current-index",
                                             "binlog-records-migrated",
                                             "binlog-records-written",
                                             "binlog-max-size",
                                             "draining",
                                             "id",
                                             "hostname",
                                             "os",
                                             "platform"};

// Starts the server under test (delayqd, or beanstalkd with
// DELAYQ_TEST_AGAINST=beanstalkd) for each test.
class ServerTest : public ::testing::Test {
 protected:
  virtual std::vector<std::string> ServerArgs() const { return {}; }

  void SetUp() override { StartServer(ServerArgs()); }

  void TearDown() override {
    if (HasFailure()) {
      std::string log = server_.Log();
      if (log.size() > 4000) log = "..." + log.substr(log.size() - 4000);
      std::cerr << "---- server stderr (last 4000 bytes) ----\n" << log << "----\n";
    }
    if (server_.pid() > 0 && !server_.Alive()) {
      ADD_FAILURE() << "the server died during the test; wait status " << server_.exit_status();
    }
  }

  void StartServer(const std::vector<std::string>& args) {
    server_.Stop();
    std::string error;
    std::vector<std::string> full = args;
    if (AgainstRedis()) {
      if (!redis_.running()) ASSERT_TRUE(redis_.Start(&error)) << error;
      full.push_back("--backend");
      full.push_back(redis_.url());
    }
    if (OverTls() && !AgainstBeanstalkd()) {
      std::vector<std::string> tls = TlsServerArgs(&error);
      ASSERT_FALSE(tls.empty()) << error;
      full.insert(full.end(), tls.begin(), tls.end());
    }
    ASSERT_TRUE(server_.Start(TargetBinary(), full, &error)) << error;
  }

  RawClient Connect() {
    RawClient c(server_.port());
    EXPECT_TRUE(c.ok()) << c.error();
    return c;
  }

  // `stats` value of `key`, read on a fresh connection.
  std::string StatsValue(std::string_view key) {
    RawClient c = Connect();
    return YamlValue(c.Call("stats\r\n"), key);
  }

  // Polls `stats` until `key` has `value` (or `timeout` passes); returns
  // the last value seen.
  std::string WaitForStat(std::string_view key, std::string_view value,
                          std::chrono::milliseconds timeout = 5000ms) {
    auto deadline = Clock::now() + timeout;
    RawClient c = Connect();
    std::string v;
    while (true) {
      v = YamlValue(c.Call("stats\r\n"), key);
      if (v == value || Clock::now() >= deadline) return v;
      std::this_thread::sleep_for(20ms);
    }
  }

  RedisProcess redis_;  // started only against Redis; declared first, stopped last
  ServerProcess server_;
};

#define SKIP_UNLESS_DELAYQD()                                          \
  do {                                                                 \
    if (AgainstBeanstalkd()) GTEST_SKIP() << "delayqd-only behaviour"; \
  } while (0)

using Protocol = ServerTest;

// delayqd's log once its start line is in it (or after 5 s without).
std::string StartedLog(ServerProcess& server) {
  std::string log;
  for (auto deadline = Clock::now() + 5s; Clock::now() < deadline;
       std::this_thread::sleep_for(10ms)) {
    log = server.Log();
    if (log.find("event=started") != std::string::npos) break;
  }
  return log;
}

// delayqd's start line says how its connections make their socket calls:
// in batches through io_uring, unless switched off (the protocol_plain_calls
// run sets DELAYQ_IO_URING=0 for this whole suite) or refused by the
// kernel, which it then logs.
TEST_F(Protocol, StartLineSaysHowSocketCallsAreMade) {
  if (AgainstBeanstalkd()) GTEST_SKIP() << "delayqd's own log";
  const std::string log = StartedLog(server_);
  ASSERT_NE(log.find("event=started"), std::string::npos) << log;
  const char* env = std::getenv("DELAYQ_IO_URING");
  if (env != nullptr && std::string_view(env) == "0") {
    EXPECT_NE(log.find(" io_uring=off "), std::string::npos) << log;
    EXPECT_EQ(log.find("event=io_uring_unavailable"), std::string::npos) << log;
  } else {
    EXPECT_TRUE(log.find(" io_uring=on ") != std::string::npos ||
                log.find("event=io_uring_unavailable") != std::string::npos)
        << log;
  }
}

// It names the allocator too: jemalloc where the build links it, the
// sanitizer's in a sanitizer build, else glibc's (CMakeLists.txt,
// DELAYQ_JEMALLOC). A link that left jemalloc out, or loaded it without it
// taking malloc over, would say glibc.
TEST_F(Protocol, StartLineNamesTheAllocator) {
  if (AgainstBeanstalkd()) GTEST_SKIP() << "delayqd's own log";
  const std::string log = StartedLog(server_);
  ASSERT_NE(log.find("event=started"), std::string::npos) << log;
  EXPECT_NE(log.find(std::string(" allocator=") + DELAYQD_ALLOCATOR), std::string::npos) << log;
}

// ---- put / reserve / delete ----------------------------------------------------

TEST_F(Protocol, PutReserveDeleteRoundTrip) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call("put 0 0 60 5\r\nhello\r\n"), "INSERTED 1\r\n");
  EXPECT_EQ(c.Call("reserve\r\n"), "RESERVED 1 5\r\nhello\r\n");
  EXPECT_EQ(c.Call("delete 1\r\n"), "DELETED\r\n");
  EXPECT_EQ(c.Call("delete 1\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("peek 1\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("put 0 0 60 2\r\nhi\r\n"), "INSERTED 2\r\n");  // ids are never reused
}

// Over TLS, a client that ends its session with a close_notify (and waits
// for the server's, as Python's unwrap() does) gets one once its replies
// are sent, not a bare end of the stream.
TEST_F(Protocol, AClientsCloseNotifyIsAnswered) {
  if (!OverTls() || AgainstBeanstalkd()) GTEST_SKIP() << "over TLS only (DELAYQ_TEST_TLS=1)";
  RawClient c = Connect();
  EXPECT_EQ(c.Call("put 0 0 60 2\r\nhi\r\n"), "INSERTED 1\r\n");
  EXPECT_TRUE(c.CloseNotifyAnswered(5000ms));
}

TEST_F(Protocol, BodiesAreOpaqueBytes) {
  RawClient c = Connect();
  std::string body = "a\r\nb\0c\r\n\xff"s;
  EXPECT_EQ(c.Call(PutCmd(body)), Inserted(1));
  EXPECT_EQ(c.Call("put 0 0 60 0\r\n\r\n"), Inserted(2));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(1, body));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(2, ""));
  std::string big(65535, 'z');
  big[100] = '\r';
  big[101] = '\n';
  EXPECT_EQ(c.Call(PutCmd(big)), Inserted(3));
  EXPECT_EQ(c.Call("peek 3\r\n"), Found(3, big));
}

TEST_F(Protocol, PutLineErrors) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call("put 0 0 60\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("put\r\n"), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(c.Call("put -1 0 60 1\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("put +1 0 60 1\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("put 4294967296 0 60 1\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("put 0 4294967296 60 1\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("put 0 0 4294967296 1\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("put 0 0 60 4294967296\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("put 0\t0 60 1\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("put 0 0 60 x\r\n"), "BAD_FORMAT\r\n");
  // Trailing garbage: BAD_FORMAT, and the body is then read as a command.
  EXPECT_EQ(c.Call("put 0 0 60 1 \r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("x\r\n"), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(c.Call("put 0 0 60 1x\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("PUT 0 0 60 1\r\n"), "UNKNOWN_COMMAND\r\n");
  // Extra spaces between the fields and leading zeros are fine; so are the
  // largest values.
  EXPECT_EQ(c.Call("put  000  0   60 1\r\nx\r\n"), Inserted(1));
  EXPECT_EQ(c.Call("put 4294967295 4294967295 4294967295 1\r\ny\r\n"), Inserted(2));
  EXPECT_EQ(c.Call("stats-job 2\r\n").substr(0, 4), "OK 1");
}

TEST_F(Protocol, ExpectedCrlfConsumesTheIdAndResynchronises) {
  RawClient c = Connect();
  // <bytes>+2 = 5 bytes are read as the body; they do not end in CRLF.
  // The CRLF that follows is then an empty command line.
  EXPECT_EQ(c.Call("put 0 0 60 3\r\nabcde\r\n"), "EXPECTED_CRLF\r\n");
  EXPECT_EQ(c.ReadReply(), "UNKNOWN_COMMAND\r\n");
  // beanstalkd assigns the id when the put line is accepted: id 1 is gone.
  EXPECT_EQ(c.Call("put 0 0 60 1\r\nx\r\n"), Inserted(2));
  EXPECT_EQ(c.Call("put 0 0 60 2\r\nab\n\r"), "EXPECTED_CRLF\r\n");
  EXPECT_EQ(c.Call("put 0 0 60 1\r\ny\r\n"), Inserted(4));
  RawClient s = Connect();
  std::string stats = s.Call("stats\r\n");
  EXPECT_EQ(YamlValue(stats, "total-jobs"), "2");
  EXPECT_EQ(YamlValue(stats, "cmd-put"), "4");
  EXPECT_EQ(YamlValue(stats, "current-jobs-ready"), "2");
}

TEST_F(Protocol, JobTooBigAtTheDefaultLimit) {
  RawClient c = Connect();
  std::string body(65536, 'b');
  EXPECT_EQ(c.Call(PutCmd(body)), "JOB_TOO_BIG\r\n");
  body.pop_back();
  EXPECT_EQ(c.Call(PutCmd(body)), Inserted(1));  // JOB_TOO_BIG consumed no id
  EXPECT_EQ(YamlValue(c.Call("stats\r\n"), "max-job-size"), "65535");
}

class SmallJobs : public ServerTest {
 protected:
  std::vector<std::string> ServerArgs() const override { return {"-z", "10"}; }
};

TEST_F(SmallJobs, JobTooBigIsSentOnlyAfterTheBodyIsConsumed) {
  RawClient c = Connect();
  ASSERT_TRUE(c.Send("put 0 0 60 11\r\n"));
  EXPECT_EQ(c.ReadFor(300ms), "");
  ASSERT_TRUE(c.Send("0123456"));
  EXPECT_EQ(c.ReadFor(200ms), "");
  ASSERT_TRUE(c.Send("89ab\r"));  // 12 of the 13 bytes
  EXPECT_EQ(c.ReadFor(200ms), "");
  EXPECT_EQ(c.Call("\n"), "JOB_TOO_BIG\r\n");
  // The discarded bytes are not parsed as commands; the next put works and
  // gets id 1. A body of exactly the limit is accepted.
  EXPECT_EQ(c.Call("put 0 0 60 10\r\n0123456789\r\n"), Inserted(1));
  // The size is checked before trailing garbage on the line.
  EXPECT_EQ(c.Call("put 0 0 60 11 junk\r\n" + std::string(11, 'a') + "\r\n"), "JOB_TOO_BIG\r\n");

  EXPECT_EQ(c.Call("put 0 0 60 1\r\nx\r\n"), Inserted(2));
  std::string stats = c.Call("stats\r\n");
  EXPECT_EQ(YamlValue(stats, "max-job-size"), "10");
  EXPECT_EQ(YamlValue(stats, "total-jobs"), "2");
  // beanstalkd counts cmd-put before the size check.
  EXPECT_EQ(YamlValue(stats, "cmd-put"), "4");
}

TEST_F(SmallJobs, JobTooBigBodyMayArriveInOneWriteWithTheNextCommand) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call("put 0 0 60 4000\r\n" + std::string(4000, '\n') + "\r\nlist-tube-used\r\n"),
            "JOB_TOO_BIG\r\n");
  EXPECT_EQ(c.ReadReply(), "USING default\r\n");
}

// ---- reserve ------------------------------------------------------------------

TEST_F(Protocol, ReserveTakesLowestPriorityThenLowestId) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call(PutCmd("a", 5)), Inserted(1));
  EXPECT_EQ(c.Call(PutCmd("b", 1)), Inserted(2));
  EXPECT_EQ(c.Call(PutCmd("c", 5)), Inserted(3));
  EXPECT_EQ(c.Call(PutCmd("d", 4294967295u)), Inserted(4));
  EXPECT_EQ(c.Call(PutCmd("e", 0)), Inserted(5));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(5, "e"));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(2, "b"));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(1, "a"));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(3, "c"));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(4, "d"));
}

TEST_F(Protocol, ReserveComparesPriorityAcrossWatchedTubes) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call("use b\r\n"), "USING b\r\n");
  EXPECT_EQ(c.Call(PutCmd("b1", 10)), Inserted(1));
  EXPECT_EQ(c.Call("use a\r\n"), "USING a\r\n");
  EXPECT_EQ(c.Call(PutCmd("a2", 10)), Inserted(2));
  EXPECT_EQ(c.Call(PutCmd("a3", 3)), Inserted(3));
  EXPECT_EQ(c.Call("use c\r\n"), "USING c\r\n");
  EXPECT_EQ(c.Call(PutCmd("c4", 1)), Inserted(4));  // not watched
  EXPECT_EQ(c.Call("watch a\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(c.Call("watch b\r\n"), "WATCHING 3\r\n");
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(3, "a3"));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(1, "b1"));  // equal priority: lower id
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(2, "a2"));
  EXPECT_EQ(c.Call("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n");
}

TEST_F(Protocol, ReserveWithTimeout) {
  RawClient c = Connect();
  auto t0 = Clock::now();
  EXPECT_EQ(c.Call("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n");
  EXPECT_LT(MillisSince(t0), 500);
  t0 = Clock::now();
  EXPECT_EQ(c.Call("reserve-with-timeout 1\r\n"), "TIMED_OUT\r\n");
  EXPECT_GE(MillisSince(t0), 900);
  EXPECT_LT(MillisSince(t0), 3000);
  EXPECT_EQ(c.Call(PutCmd("x")), Inserted(1));
  EXPECT_EQ(c.Call("reserve-with-timeout 0\r\n"), Reserved(1, "x"));
  // Holding a job with a long TTR is no reason for DEADLINE_SOON.
  EXPECT_EQ(c.Call("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n");
}

TEST_F(Protocol, ReserveWithTimeoutParsesLikeStrtol) {
  // 1.12 parses the timeout with strtol and checks only errno: no digits is
  // 0, a sign is allowed, trailing garbage is ignored, a negative value
  // waits forever; only an overflow of long is BAD_FORMAT.
  RawClient c = Connect();
  EXPECT_EQ(c.Call("reserve-with-timeout abc\r\n"), "TIMED_OUT\r\n");
  EXPECT_EQ(c.Call("reserve-with-timeout +0\r\n"), "TIMED_OUT\r\n");
  EXPECT_EQ(c.Call("reserve-with-timeout 0junk\r\n"), "TIMED_OUT\r\n");
  EXPECT_EQ(c.Call("reserve-with-timeout 99999999999999999999\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("reserve-with-timeout\r\n"), "BAD_FORMAT\r\n");  // matched as "reserve"
  ASSERT_TRUE(c.Send("reserve-with-timeout -1\r\n"));
  EXPECT_EQ(c.ReadFor(1300ms), "");  // -1 waits forever
  RawClient p = Connect();
  EXPECT_EQ(p.Call(PutCmd("late")), Inserted(1));
  EXPECT_EQ(c.ReadReply(), Reserved(1, "late"));
  std::string stats = p.Call("stats\r\n");
  EXPECT_EQ(YamlValue(stats, "cmd-reserve-with-timeout"), "4");
  EXPECT_EQ(YamlValue(stats, "cmd-reserve"), "0");
}

TEST_F(Protocol, ReserveBlocksUntilAnotherConnectionPuts) {
  RawClient worker = Connect();
  RawClient producer = Connect();
  ASSERT_TRUE(worker.Send("reserve\r\n"));
  EXPECT_EQ(worker.ReadFor(300ms), "");
  EXPECT_EQ(YamlValue(producer.Call("stats\r\n"), "current-waiting"), "1");
  EXPECT_EQ(YamlValue(producer.Call("stats-tube default\r\n"), "current-waiting"), "1");
  EXPECT_EQ(producer.Call(PutCmd("job", 7)), Inserted(1));
  EXPECT_EQ(worker.ReadReply(), Reserved(1, "job"));
  EXPECT_EQ(YamlValue(producer.Call("stats\r\n"), "current-waiting"), "0");
}

TEST_F(Protocol, PipelinedCommandsWaitBehindABlockedReserve) {
  RawClient worker = Connect();
  ASSERT_TRUE(worker.Send("reserve\r\nlist-tube-used\r\nuse other\r\n"));
  EXPECT_EQ(worker.ReadFor(400ms), "");
  RawClient producer = Connect();
  EXPECT_EQ(producer.Call(PutCmd("j")), Inserted(1));
  EXPECT_EQ(worker.ReadReplies(3), Reserved(1, "j") + "USING default\r\nUSING other\r\n");
}

TEST_F(Protocol, WaitersAreServedOneJobEach) {
  std::vector<RawClient> workers;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(Connect());
    ASSERT_TRUE(workers.back().Send("reserve-with-timeout 10\r\n"));
  }
  std::this_thread::sleep_for(200ms);
  RawClient p = Connect();
  EXPECT_EQ(p.Call(PutCmd("a") + PutCmd("b")), Inserted(1));
  EXPECT_EQ(p.ReadReply(), Inserted(2));
  std::multiset<std::string> got;
  for (auto& w : workers) got.insert(w.ReadReply(1000ms));
  // The third one waits on: nothing for it within 1 s of its 10 s.
  EXPECT_EQ(got, (std::multiset<std::string>{Reserved(1, "a"), Reserved(2, "b"),
                                             std::string(kTimeoutMark)}));
}

TEST_F(Protocol, ReserveJob) {
  RawClient c = Connect();
  RawClient other = Connect();
  EXPECT_EQ(c.Call("use elsewhere\r\n"), "USING elsewhere\r\n");
  EXPECT_EQ(c.Call(PutCmd("ready")), Inserted(1));
  EXPECT_EQ(c.Call(PutCmd("delayed", 0, 100)), Inserted(2));
  EXPECT_EQ(c.Call(PutCmd("buried")), Inserted(3));
  EXPECT_EQ(c.Call("reserve-job 3\r\n"), Reserved(3, "buried"));  // not a watched tube
  EXPECT_EQ(c.Call("bury 3 0\r\n"), "BURIED\r\n");
  EXPECT_EQ(other.Call("reserve-job 1\r\n"), Reserved(1, "ready"));
  EXPECT_EQ(other.Call("reserve-job 2\r\n"), Reserved(2, "delayed"));
  EXPECT_EQ(other.Call("reserve-job 3\r\n"), Reserved(3, "buried"));
  EXPECT_EQ(other.Call("reserve-job 3\r\n"), "NOT_FOUND\r\n");  // reserved, even by itself
  EXPECT_EQ(c.Call("reserve-job 1\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("reserve-job 99\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("reserve-job x\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("reserve-job 1 \r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("reserve-job\r\n"), "BAD_FORMAT\r\n");  // matched as "reserve"
  std::string st = c.Call("stats-job 2\r\n");
  EXPECT_EQ(YamlValue(st, "state"), "reserved");
  EXPECT_EQ(YamlValue(st, "reserves"), "1");
  std::string stats = c.Call("stats\r\n");
  EXPECT_EQ(YamlValue(stats, "current-jobs-reserved"), "3");
  EXPECT_EQ(YamlValue(stats, "current-jobs-buried"), "0");
  EXPECT_EQ(YamlValue(stats, "current-jobs-delayed"), "0");
  EXPECT_EQ(YamlValue(stats, "current-workers"), "2");  // a successful reserve-job counts
}

// ---- release / bury / touch / delete ---------------------------------------------

TEST_F(Protocol, Release) {
  RawClient c = Connect();
  RawClient other = Connect();
  EXPECT_EQ(c.Call(PutCmd("a", 10)), Inserted(1));
  EXPECT_EQ(c.Call(PutCmd("b", 20)), Inserted(2));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(1, "a"));
  EXPECT_EQ(other.Call("release 1 0 0\r\n"), "NOT_FOUND\r\n");  // not its job
  EXPECT_EQ(c.Call("release 2 0 0\r\n"), "NOT_FOUND\r\n");      // not reserved
  EXPECT_EQ(c.Call("release 9 0 0\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("release 1 30 0\r\n"), "RELEASED\r\n");  // new priority 30 > 20
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(2, "b"));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(1, "a"));
  EXPECT_EQ(c.Call("release 1 5 100\r\n"), "RELEASED\r\n");
  EXPECT_EQ(
      MaskYamlValues(c.Call("stats-job 1\r\n"), kVolatileJobKeys),
      MaskYamlValues(
          JobStatsReply(
              {.id = 1, .state = "delayed", .pri = 5, .delay = 100, .reserves = 2, .releases = 2}),
          kVolatileJobKeys));
  EXPECT_EQ(c.Call("peek-delayed\r\n"), Found(1, "a"));
  EXPECT_EQ(c.Call("release\r\n"), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(c.Call("release 2\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("release 2 0\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("release 2 0 0 \r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("release 2 4294967296 0\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("release 2 0 -1\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("release 2 1 0\r\n"), "RELEASED\r\n");
  std::string stats = c.Call("stats\r\n");
  EXPECT_EQ(YamlValue(stats, "cmd-release"), "6");  // NOT_FOUND ones count, BAD_FORMAT not
  EXPECT_EQ(YamlValue(stats, "current-jobs-delayed"), "1");
  EXPECT_EQ(YamlValue(stats, "current-jobs-urgent"), "1");
}

TEST_F(Protocol, BuryPeekBuriedAndKick) {
  RawClient c = Connect();
  for (int i = 1; i <= 3; ++i) EXPECT_EQ(c.Call(PutCmd("j" + std::to_string(i), 100)), Inserted(i));
  EXPECT_EQ(c.Call(PutCmd("d", 0, 100)), Inserted(4));
  EXPECT_EQ(c.Call("peek-buried\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("bury 1 0\r\n"), "NOT_FOUND\r\n");  // not reserved
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(1, "j1"));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(2, "j2"));
  RawClient other = Connect();
  EXPECT_EQ(other.Call("bury 2 0\r\n"), "NOT_FOUND\r\n");
  // Buried jobs form a FIFO list: priority does not order them.
  EXPECT_EQ(c.Call("bury 2 9\r\n"), "BURIED\r\n");
  EXPECT_EQ(c.Call("bury 1 1\r\n"), "BURIED\r\n");
  EXPECT_EQ(c.Call("peek-buried\r\n"), Found(2, "j2"));
  EXPECT_EQ(c.Call("stats-job 2\r\n"),
            JobStatsReply({.id = 2, .state = "buried", .pri = 9, .reserves = 1, .buries = 1}));
  EXPECT_EQ(c.Call("bury 2 0\r\n"), "NOT_FOUND\r\n");  // buried, not reserved
  EXPECT_EQ(c.Call("bury\r\n"), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(c.Call("bury 1\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("bury 1 0 0\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(YamlValue(c.Call("stats-tube default\r\n"), "current-jobs-buried"), "2");
  // kick takes buried jobs first, oldest first, and leaves delayed ones
  // alone while any job is buried.
  EXPECT_EQ(c.Call("kick 1\r\n"), "KICKED 1\r\n");
  EXPECT_EQ(c.Call("peek-buried\r\n"), Found(1, "j1"));
  EXPECT_EQ(c.Call("kick 10\r\n"), "KICKED 1\r\n");
  EXPECT_EQ(c.Call("peek-buried\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("peek-delayed\r\n"), Found(4, "d"));
  EXPECT_EQ(c.Call("kick 10\r\n"), "KICKED 1\r\n");  // now the delayed one
  EXPECT_EQ(c.Call("kick 10\r\n"), "KICKED 0\r\n");
  // Ready: 1 (pri 1), 4 (pri 0), 2 (pri 9), 3 (pri 100).
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(4, "d"));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(1, "j1"));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(2, "j2"));
  EXPECT_EQ(YamlValue(c.Call("stats-job 2\r\n"), "kicks"), "1");
  EXPECT_EQ(YamlValue(c.Call("stats-job 4\r\n"), "delay"), "100");  // kick keeps the delay
}

TEST_F(Protocol, KickParsesLikeStrtoul) {
  RawClient c = Connect();
  for (int i = 1; i <= 3; ++i) {
    EXPECT_EQ(c.Call(PutCmd("d" + std::to_string(i), 0, 1000)), Inserted(i));
  }
  EXPECT_EQ(c.Call("kick 0\r\n"), "KICKED 0\r\n");
  EXPECT_EQ(c.Call("kick 1x\r\n"), "KICKED 1\r\n");  // trailing garbage ignored
  EXPECT_EQ(c.Call("kick -1\r\n"), "KICKED 2\r\n");  // wraps to a huge bound
  EXPECT_EQ(c.Call("kick abc\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("kick \r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("kick\r\n"), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(c.Call("kick 99999999999999999999999\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(YamlValue(c.Call("stats\r\n"), "cmd-kick"), "3");
}

TEST_F(Protocol, KickOnlyTouchesTheUsedTube) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call("use a\r\n"), "USING a\r\n");
  EXPECT_EQ(c.Call(PutCmd("in-a", 0, 1000)), Inserted(1));
  EXPECT_EQ(c.Call("use b\r\n"), "USING b\r\n");
  EXPECT_EQ(c.Call("kick 10\r\n"), "KICKED 0\r\n");
  EXPECT_EQ(c.Call("peek-delayed\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("use a\r\n"), "USING a\r\n");
  EXPECT_EQ(c.Call("kick 10\r\n"), "KICKED 1\r\n");
}

TEST_F(Protocol, KickJob) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call("use t\r\n"), "USING t\r\n");
  EXPECT_EQ(c.Call(PutCmd("delayed", 0, 1000)), Inserted(1));
  EXPECT_EQ(c.Call(PutCmd("buried")), Inserted(2));
  EXPECT_EQ(c.Call(PutCmd("ready")), Inserted(3));
  EXPECT_EQ(c.Call("watch t\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(2, "buried"));
  EXPECT_EQ(c.Call("kick-job 2\r\n"), "NOT_FOUND\r\n");  // reserved
  EXPECT_EQ(c.Call("bury 2 0\r\n"), "BURIED\r\n");
  RawClient other = Connect();  // uses and watches default only
  EXPECT_EQ(other.Call("kick-job 1\r\n"), "KICKED\r\n");
  EXPECT_EQ(other.Call("kick-job 2\r\n"), "KICKED\r\n");
  EXPECT_EQ(other.Call("kick-job 2\r\n"), "NOT_FOUND\r\n");  // ready now
  EXPECT_EQ(other.Call("kick-job 3\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(other.Call("kick-job 99\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(other.Call("kick-job x\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(other.Call("kick-job\r\n"), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(other.Call("kick-job 1 \r\n"), "BAD_FORMAT\r\n");
  std::string st = other.Call("stats-job 1\r\n");
  EXPECT_EQ(YamlValue(st, "state"), "ready");
  EXPECT_EQ(YamlValue(st, "kicks"), "1");
  EXPECT_EQ(YamlValue(other.Call("stats\r\n"), "cmd-kick"), "0");  // kick-job is not printed
}

TEST_F(Protocol, Touch) {
  RawClient c = Connect();
  RawClient other = Connect();
  EXPECT_EQ(c.Call(PutCmd("a")), Inserted(1));
  EXPECT_EQ(c.Call("touch 1\r\n"), "NOT_FOUND\r\n");  // ready
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(1, "a"));
  EXPECT_EQ(c.Call("touch 1\r\n"), "TOUCHED\r\n");
  EXPECT_EQ(other.Call("touch 1\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("touch 2\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("touch\r\n"), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(c.Call("touch x\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("touch 1 \r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(YamlValue(c.Call("stats\r\n"), "cmd-touch"), "4");  // NOT_FOUND ones count
}

TEST_F(Protocol, TouchRestartsTheTtr) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call(PutCmd("a", 0, 0, 2)), Inserted(1));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(1, "a"));
  std::this_thread::sleep_for(1300ms);
  EXPECT_EQ(c.Call("touch 1\r\n"), "TOUCHED\r\n");
  std::this_thread::sleep_for(1200ms);  // 2.5 s after the reserve, 1.2 s after the touch
  std::string st = c.Call("stats-job 1\r\n");
  EXPECT_EQ(YamlValue(st, "state"), "reserved");
  EXPECT_EQ(YamlValue(st, "timeouts"), "0");
  EXPECT_EQ(c.Call("delete 1\r\n"), "DELETED\r\n");
}

TEST_F(Protocol, DeadlineSoonAtOnceWithATtrOfOneSecond) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call(PutCmd("a", 0, 0, 1)), Inserted(1));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(1, "a"));
  auto t0 = Clock::now();
  EXPECT_EQ(c.Call("reserve\r\n"), "DEADLINE_SOON\r\n");
  EXPECT_EQ(c.Call("reserve-with-timeout 5\r\n"), "DEADLINE_SOON\r\n");
  EXPECT_LT(MillisSince(t0), 500);
  // A ready job wins over DEADLINE_SOON.
  EXPECT_EQ(c.Call(PutCmd("b")), Inserted(2));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(2, "b"));
}

TEST_F(Protocol, DeadlineSoonWakesAWaitingReserve) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call(PutCmd("a", 0, 0, 3)), Inserted(1));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(1, "a"));
  auto t0 = Clock::now();
  EXPECT_EQ(c.Call("reserve-with-timeout 10\r\n"), "DEADLINE_SOON\r\n");
  // One second before the 3 s deadline.
  EXPECT_GE(MillisSince(t0), 1700);
  EXPECT_LT(MillisSince(t0), 2900);
  EXPECT_EQ(YamlValue(c.Call("stats-job 1\r\n"), "state"), "reserved");  // not released
  EXPECT_EQ(c.Call("delete 1\r\n"), "DELETED\r\n");
}

// Note for DELAYQ_TEST_AGAINST=beanstalkd: Debian's beanstalkd 1.12 itself
// fails this now and then (the expired job does not reach the waiting
// connection within 5 s; seen in about 1 run of 3 here; cf. beanstalkd
// issues #262 and #380).
TEST_F(Protocol, TtrExpiryReturnsTheJobToReady) {
  RawClient a = Connect();
  RawClient b = Connect();
  EXPECT_EQ(a.Call(PutCmd("job", 3, 0, 1)), Inserted(1));
  EXPECT_EQ(a.Call("reserve\r\n"), Reserved(1, "job"));
  auto t0 = Clock::now();
  EXPECT_EQ(b.Call("reserve-with-timeout 5\r\n"), Reserved(1, "job"));
  EXPECT_GE(MillisSince(t0), 800);
  EXPECT_LT(MillisSince(t0), 3000);
  EXPECT_EQ(a.Call("delete 1\r\n"), "NOT_FOUND\r\n");  // no longer a's
  std::string st = b.Call("stats-job 1\r\n");
  EXPECT_EQ(YamlValue(st, "reserves"), "2");
  EXPECT_EQ(YamlValue(st, "timeouts"), "1");
  EXPECT_EQ(YamlValue(st, "releases"), "0");
  EXPECT_EQ(YamlValue(st, "pri"), "3");
  EXPECT_EQ(YamlValue(b.Call("stats\r\n"), "job-timeouts"), "1");
}

TEST_F(Protocol, DelayedJobBecomesReady) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call(PutCmd("later", 0, 1)), Inserted(1));
  EXPECT_EQ(c.Call("peek-ready\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("peek-delayed\r\n"), Found(1, "later"));
  EXPECT_EQ(YamlValue(c.Call("stats-job 1\r\n"), "state"), "delayed");
  auto t0 = Clock::now();
  EXPECT_EQ(c.Call("reserve-with-timeout 5\r\n"), Reserved(1, "later"));
  EXPECT_GE(MillisSince(t0), 700);
  EXPECT_LT(MillisSince(t0), 3000);
}

TEST_F(Protocol, Delete) {
  RawClient c = Connect();
  RawClient other = Connect();
  EXPECT_EQ(c.Call("use t\r\n"), "USING t\r\n");
  EXPECT_EQ(c.Call(PutCmd("ready")), Inserted(1));
  EXPECT_EQ(c.Call(PutCmd("delayed", 0, 100)), Inserted(2));
  EXPECT_EQ(c.Call(PutCmd("reserved")), Inserted(3));
  EXPECT_EQ(c.Call("reserve-job 3\r\n"), Reserved(3, "reserved"));
  EXPECT_EQ(c.Call(PutCmd("buried")), Inserted(4));
  EXPECT_EQ(c.Call("reserve-job 4\r\n"), Reserved(4, "buried"));
  EXPECT_EQ(c.Call("bury 4 0\r\n"), "BURIED\r\n");
  // Anyone may delete a ready, delayed or buried job, in any tube.
  EXPECT_EQ(other.Call("delete 1\r\n"), "DELETED\r\n");
  EXPECT_EQ(other.Call("delete 2\r\n"), "DELETED\r\n");
  EXPECT_EQ(other.Call("delete 4\r\n"), "DELETED\r\n");
  EXPECT_EQ(other.Call("delete 3\r\n"), "NOT_FOUND\r\n");  // reserved by c
  EXPECT_EQ(c.Call("delete 3\r\n"), "DELETED\r\n");
  EXPECT_EQ(c.Call("delete\r\n"), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(c.Call("delete x\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("delete -1\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("delete 1 \r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("delete 18446744073709551615\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("delete 18446744073709551616\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(YamlValue(c.Call("stats-tube t\r\n"), "cmd-delete"), "4");
  std::string stats = c.Call("stats\r\n");
  EXPECT_EQ(YamlValue(stats, "cmd-delete"), "6");  // NOT_FOUND ones count too
  for (const char* k : {"current-jobs-ready", "current-jobs-reserved", "current-jobs-delayed",
                        "current-jobs-buried"}) {
    EXPECT_EQ(YamlValue(stats, k), "0") << k;
  }
}

// ---- tubes ----------------------------------------------------------------------

TEST_F(Protocol, UseAndListTubeUsed) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call("list-tube-used\r\n"), "USING default\r\n");
  EXPECT_EQ(c.Call("use jobs\r\n"), "USING jobs\r\n");
  EXPECT_EQ(c.Call("list-tube-used\r\n"), "USING jobs\r\n");
  EXPECT_EQ(c.Call(PutCmd("x")), Inserted(1));
  EXPECT_EQ(YamlValue(c.Call("stats-job 1\r\n"), "tube"), "jobs");
  EXPECT_EQ(c.Call("use\r\n"), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(c.Call("use \r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("list-tube-used \r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(YamlValue(c.Call("stats\r\n"), "cmd-use"), "1");
}

TEST_F(Protocol, WatchIgnoreAndListTubesWatched) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call("list-tubes-watched\r\n"), Ok(ListYaml({"default"})));
  EXPECT_EQ(c.Call("watch foo\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(c.Call("watch foo\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(c.Call("watch bar\r\n"), "WATCHING 3\r\n");
  EXPECT_EQ(c.Call("list-tubes-watched\r\n"), Ok(ListYaml({"default", "foo", "bar"})));
  EXPECT_EQ(c.Call("ignore nosuch\r\n"), "WATCHING 3\r\n");  // not an error
  EXPECT_EQ(c.Call("ignore default\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(c.Call("ignore foo\r\n"), "WATCHING 1\r\n");
  EXPECT_EQ(c.Call("ignore bar\r\n"), "NOT_IGNORED\r\n");
  EXPECT_EQ(c.Call("list-tubes-watched\r\n"), Ok(ListYaml({"bar"})));
  EXPECT_EQ(c.Call("list-tubes-watched x\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("watch\r\n"), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(c.Call("ignore\r\n"), "UNKNOWN_COMMAND\r\n");
  std::string stats = c.Call("stats\r\n");
  EXPECT_EQ(YamlValue(stats, "cmd-watch"), "3");
  EXPECT_EQ(YamlValue(stats, "cmd-ignore"), "4");
  EXPECT_EQ(YamlValue(stats, "cmd-list-tubes-watched"), "3");
}

TEST_F(Protocol, TubesLiveWhileReferenced) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call("list-tubes\r\n"), Ok(ListYaml({"default"})));
  {
    RawClient t = Connect();
    EXPECT_EQ(t.Call("use holds-job\r\n"), "USING holds-job\r\n");
    EXPECT_EQ(t.Call(PutCmd("x", 0, 1000)), Inserted(1));
    EXPECT_EQ(t.Call("use used\r\n"), "USING used\r\n");
    EXPECT_EQ(t.Call("watch watched\r\n"), "WATCHING 2\r\n");
    EXPECT_EQ(c.Call("list-tubes\r\n"), Ok(ListYaml({"default", "holds-job", "used", "watched"})));
    TubeStatsExpect e{.name = "used", .using_ = 1};
    EXPECT_EQ(c.Call("stats-tube used\r\n"), TubeStatsReply(e));
    EXPECT_EQ(t.Call("quit\r\n"), std::string(kEofMark));
  }
  // Only the tube that holds a job (and default) outlive the connection.
  std::string got;
  for (int i = 0; i < 100; ++i) {
    got = c.Call("list-tubes\r\n");
    if (got == Ok(ListYaml({"default", "holds-job"}))) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(got, Ok(ListYaml({"default", "holds-job"})));
  EXPECT_EQ(c.Call("stats-tube used\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("delete 1\r\n"), "DELETED\r\n");
  EXPECT_EQ(c.Call("list-tubes\r\n"), Ok(ListYaml({"default"})));
  EXPECT_EQ(c.Call("list-tubes x\r\n"), "BAD_FORMAT\r\n");
}

TEST_F(Protocol, TubeNameRules) {
  RawClient c = Connect();
  const std::string n200(200, 'n');
  const std::string all = "AZaz09-+/;.$_()";
  for (const std::string& name : {n200, all, "a"s, "0"s, "(x)"s, "a-"s}) {
    EXPECT_EQ(c.Call("use " + name + "\r\n"), "USING " + name + "\r\n") << name;
    EXPECT_EQ(c.Call("watch " + name + "\r\n").substr(0, 9), "WATCHING ") << name;
    EXPECT_EQ(c.Call("stats-tube " + name + "\r\n").substr(0, 3), "OK ") << name;
    EXPECT_EQ(c.Call("pause-tube " + name + " 0\r\n"), "PAUSED\r\n") << name;
    EXPECT_EQ(c.Call("ignore " + name + "\r\n").substr(0, 9), "WATCHING ") << name;
  }
  const std::vector<std::string> bad = {std::string(201, 'n'),
                                        "-x",
                                        "a b",
                                        "a*b",
                                        "a#b",
                                        "a!",
                                        "a\tb",
                                        "\xc3\xa9t\xc3\xa9",
                                        "a:b",
                                        "a,b",
                                        "a=b",
                                        "a@b",
                                        "a\\b",
                                        "a'b",
                                        "a%b",
                                        "a&b",
                                        "a~b",
                                        "[a]",
                                        "{a}"};
  for (const std::string& name : bad) {
    for (const char* cmd : {"use ", "watch ", "ignore ", "stats-tube "}) {
      EXPECT_EQ(c.Call(cmd + name + "\r\n"), "BAD_FORMAT\r\n") << cmd << name;
    }
  }
  // One space exactly; none before or after the name.
  for (const char* cmd : {"use", "watch", "ignore", "stats-tube"}) {
    EXPECT_EQ(c.Call(cmd + " "s + " foo\r\n"), "BAD_FORMAT\r\n") << cmd;
    EXPECT_EQ(c.Call(cmd + " foo \r\n"s), "BAD_FORMAT\r\n") << cmd;
    EXPECT_EQ(c.Call(cmd + " foo bar\r\n"s), "BAD_FORMAT\r\n") << cmd;
  }
  EXPECT_EQ(c.Call("pause-tube -x 0\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("pause-tube " + std::string(201, 'n') + " 0\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("list-tube-used\r\n"), "USING a-\r\n");
}

TEST_F(Protocol, PauseTube) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call("pause-tube nosuch 1\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("pause-tube default\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("pause-tube default 1 \r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("pause-tube default x\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("pause-tube default 4294967296\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("pause-tube\r\n"), "BAD_FORMAT\r\n");
  // No space is needed after the command, and several are allowed.
  EXPECT_EQ(c.Call("pause-tubedefault 0\r\n"), "PAUSED\r\n");
  EXPECT_EQ(c.Call("pause-tube   default   0\r\n"), "PAUSED\r\n");
  EXPECT_EQ(c.Call(PutCmd("p")), Inserted(1));
  EXPECT_EQ(c.Call("pause-tube default 1\r\n"), "PAUSED\r\n");
  std::string st = c.Call("stats-tube default\r\n");
  EXPECT_EQ(YamlValue(st, "pause"), "1");
  EXPECT_EQ(YamlValue(st, "cmd-pause-tube"), "3");
  // Paused: peek still sees the job, reserve waits for the pause to end.
  EXPECT_EQ(c.Call("peek-ready\r\n"), Found(1, "p"));
  auto t0 = Clock::now();
  EXPECT_EQ(c.Call("reserve-with-timeout 5\r\n"), Reserved(1, "p"));
  EXPECT_GE(MillisSince(t0), 600);
  EXPECT_LT(MillisSince(t0), 3000);
  st = c.Call("stats-tube default\r\n");
  EXPECT_EQ(YamlValue(st, "pause"), "0");
  EXPECT_EQ(YamlValue(st, "pause-time-left"), "0");
  EXPECT_EQ(YamlValue(c.Call("stats\r\n"), "cmd-pause-tube"), "4");
}

TEST_F(Protocol, PauseTubeWithZeroEndsAPause) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call(PutCmd("p")), Inserted(1));
  EXPECT_EQ(c.Call("pause-tube default 100\r\n"), "PAUSED\r\n");
  EXPECT_EQ(c.Call("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n");
  EXPECT_EQ(c.Call("pause-tube default 0\r\n"), "PAUSED\r\n");
  EXPECT_EQ(c.Call("reserve-with-timeout 1\r\n"), Reserved(1, "p"));
}

// ---- peek -------------------------------------------------------------------------

TEST_F(Protocol, Peek) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call("peek-ready\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("peek-delayed\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("peek-buried\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call(PutCmd("r9", 9)), Inserted(1));
  EXPECT_EQ(c.Call(PutCmd("r2", 2)), Inserted(2));
  EXPECT_EQ(c.Call(PutCmd("d50", 0, 50)), Inserted(3));
  EXPECT_EQ(c.Call(PutCmd("d20", 0, 20)), Inserted(4));
  EXPECT_EQ(c.Call(PutCmd("d20b", 0, 20)), Inserted(5));
  EXPECT_EQ(c.Call("peek-ready\r\n"), Found(2, "r2"));
  EXPECT_EQ(c.Call("peek-delayed\r\n"), Found(4, "d20"));
  EXPECT_EQ(c.Call("peek 3\r\n"), Found(3, "d50"));
  EXPECT_EQ(c.Call("peek 6\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("peek\r\n"), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(c.Call("peek x\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("peek 1 \r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("peek-ready \r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("peek-readyx\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("peek-delayed x\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("peek-buried 1\r\n"), "BAD_FORMAT\r\n");
  // A reserved job can be peeked by id, by anyone.
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(2, "r2"));
  RawClient other = Connect();
  EXPECT_EQ(other.Call("peek 2\r\n"), Found(2, "r2"));
  EXPECT_EQ(other.Call("peek-ready\r\n"), Found(1, "r9"));
  // peek-* look at the used tube only.
  EXPECT_EQ(other.Call("use empty\r\n"), "USING empty\r\n");
  EXPECT_EQ(other.Call("peek-ready\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(other.Call("peek-delayed\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(other.Call("peek 1\r\n"), Found(1, "r9"));
  std::string stats = other.Call("stats\r\n");
  EXPECT_EQ(YamlValue(stats, "cmd-peek"), "4");
  EXPECT_EQ(YamlValue(stats, "cmd-peek-ready"), "4");
  EXPECT_EQ(YamlValue(stats, "cmd-peek-delayed"), "3");
  EXPECT_EQ(YamlValue(stats, "cmd-peek-buried"), "1");
}

// ---- stats ------------------------------------------------------------------------

TEST_F(Protocol, StatsJob) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call("use st\r\n"), "USING st\r\n");
  EXPECT_EQ(c.Call(PutCmd("x", 1023, 0, 0)), Inserted(1));  // ttr 0 becomes 1
  EXPECT_EQ(c.Call("stats-job 1\r\n"),
            JobStatsReply({.id = 1, .tube = "st", .pri = 1023, .ttr = 1}));
  EXPECT_EQ(c.Call("stats-job 2\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("stats-job\r\n"), "BAD_FORMAT\r\n");  // matched as "stats"
  EXPECT_EQ(c.Call("stats-job x\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("stats-job 1 \r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(YamlValue(c.Call("stats\r\n"), "cmd-stats-job"), "2");
}

TEST_F(Protocol, StatsJobTimeLeftTruncatesLikeBeanstalkd) {
  // beanstalkd keeps nanoseconds and truncates: right after a reserve with
  // ttr N (or a put with delay N) some time has passed, so time-left is N-1.
  RawClient c = Connect();
  EXPECT_EQ(c.Call(PutCmd("r", 0, 0, 10)), Inserted(1));
  EXPECT_EQ(c.Call(PutCmd("d", 0, 10, 10)), Inserted(2));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(1, "r"));
  EXPECT_EQ(YamlValue(c.Call("stats-job 1\r\n"), "time-left"), "9");
  EXPECT_EQ(YamlValue(c.Call("stats-job 2\r\n"), "time-left"), "9");
  EXPECT_EQ(c.Call("pause-tube default 10\r\n"), "PAUSED\r\n");
  EXPECT_EQ(YamlValue(c.Call("stats-tube default\r\n"), "pause-time-left"), "9");
}

TEST_F(Protocol, StatsTube) {
  RawClient c = Connect();
  RawClient w = Connect();
  EXPECT_EQ(w.Call("list-tube-used\r\n"), "USING default\r\n");  // w is surely accepted
  EXPECT_EQ(c.Call("stats-tube default\r\n"), TubeStatsReply({.using_ = 2, .watching = 2}));
  EXPECT_EQ(c.Call("use foo\r\n"), "USING foo\r\n");
  EXPECT_EQ(c.Call(PutCmd("u", 1023)), Inserted(1));
  EXPECT_EQ(c.Call(PutCmd("n", 1024)), Inserted(2));
  EXPECT_EQ(c.Call(PutCmd("d", 0, 100)), Inserted(3));
  EXPECT_EQ(c.Call(PutCmd("b", 0)), Inserted(4));
  EXPECT_EQ(c.Call(PutCmd("r", 5)), Inserted(5));
  EXPECT_EQ(w.Call("watch foo\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(w.Call("reserve\r\n"), Reserved(4, "b"));
  EXPECT_EQ(w.Call("bury 4 0\r\n"), "BURIED\r\n");
  EXPECT_EQ(w.Call("reserve\r\n"), Reserved(5, "r"));
  EXPECT_EQ(c.Call("delete 2\r\n"), "DELETED\r\n");
  EXPECT_EQ(c.Call("stats-tube foo\r\n"), TubeStatsReply({.name = "foo",
                                                          .urgent = 1,
                                                          .ready = 1,
                                                          .reserved = 1,
                                                          .delayed = 1,
                                                          .buried = 1,
                                                          .total = 5,
                                                          .using_ = 1,
                                                          .watching = 1,
                                                          .cmd_delete = 1}));
  EXPECT_EQ(c.Call("stats-tube nosuch\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("stats-tube -x\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("stats-tube\r\n"), "BAD_FORMAT\r\n");  // matched as "stats"
  EXPECT_EQ(YamlValue(c.Call("stats\r\n"), "cmd-stats-tube"), "3");
}

TEST_F(Protocol, StatsKeysAreBeanstalkdsInItsOrder) {
  RawClient c = Connect();
  std::string stats = c.Call("stats\r\n");
  ASSERT_TRUE(stats.starts_with("OK ")) << stats;
  EXPECT_EQ(YamlKeys(stats), kStatsKeys);
  // Format: "OK <n>\r\n---\n" lines "key: value\n", then "\r\n".
  size_t eol = stats.find("\r\n");
  EXPECT_EQ(std::to_string(stats.size() - eol - 4), stats.substr(3, eol - 3));
  EXPECT_TRUE(stats.substr(eol + 2).starts_with("---\n"));
  EXPECT_TRUE(stats.ends_with("\n\r\n"));
  EXPECT_TRUE(YamlValue(stats, "version").starts_with("\"")) << YamlValue(stats, "version");
  EXPECT_EQ(YamlValue(stats, "pid"), std::to_string(server_.pid()));
  std::string id = YamlValue(stats, "id");
  EXPECT_EQ(id.size(), 16u) << id;
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  EXPECT_EQ(YamlValue(stats, "draining"), "false");
  EXPECT_EQ(YamlValue(stats, "max-job-size"), "65535");
  EXPECT_EQ(YamlValue(stats, "binlog-max-size"), "10485760");
  EXPECT_EQ(YamlValue(stats, "current-tubes"), "1");
  EXPECT_EQ(YamlValue(stats, "cmd-stats"), "1");  // counts itself
  EXPECT_EQ(c.Call("stats \r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("statsx\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(YamlValue(c.Call("stats\r\n"), "cmd-stats"), "2");
}

TEST_F(Protocol, StatsConnectionCounters) {
  RawClient a = Connect();
  const int total0 = std::atoi(YamlValue(a.Call("stats\r\n"), "total-connections").c_str());
  RawClient b = Connect();
  EXPECT_EQ(a.Call(PutCmd("x", 5)), Inserted(1));
  EXPECT_EQ(b.Call("reserve-with-timeout 0\r\n"), Reserved(1, "x"));
  EXPECT_EQ(b.Call("release 1 5 0\r\n"), "RELEASED\r\n");
  {
    RawClient gone = Connect();
    EXPECT_EQ(gone.Call("reserve-with-timeout 0\r\n"), Reserved(1, "x"));
    EXPECT_EQ(gone.Call(PutCmd("y", 2000)), Inserted(2));
  }
  std::string stats;
  for (int i = 0; i < 100; ++i) {
    stats = a.Call("stats\r\n");
    if (YamlValue(stats, "current-connections") == "2") break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(YamlValue(stats, "current-connections"), "2");
  EXPECT_EQ(YamlValue(stats, "total-connections"), std::to_string(total0 + 2));
  EXPECT_EQ(YamlValue(stats, "current-producers"), "1");
  EXPECT_EQ(YamlValue(stats, "current-workers"), "1");
  EXPECT_EQ(YamlValue(stats, "current-jobs-urgent"), "1");  // job 1 back, pri 5 < 1024
  EXPECT_EQ(YamlValue(stats, "current-jobs-ready"), "2");
  EXPECT_EQ(YamlValue(stats, "total-jobs"), "2");
}

// ---- connections --------------------------------------------------------------------

TEST_F(Protocol, JobPutOnOneConnectionIsReservedOnAnother) {
  RawClient producer = Connect();
  RawClient worker = Connect();
  EXPECT_EQ(producer.Call("use q\r\n"), "USING q\r\n");
  EXPECT_EQ(producer.Call(PutCmd("hello")), Inserted(1));
  EXPECT_EQ(worker.Call("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n");  // watches default
  EXPECT_EQ(worker.Call("watch q\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(worker.Call("reserve-with-timeout 0\r\n"), Reserved(1, "hello"));
  EXPECT_EQ(producer.Call("delete 1\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(worker.Call("delete 1\r\n"), "DELETED\r\n");
}

TEST_F(Protocol, ReservedJobsOfAClosedConnectionReturnToReady) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call(PutCmd("a", 7)), Inserted(1));
  EXPECT_EQ(c.Call(PutCmd("b", 8)), Inserted(2));
  {
    RawClient w = Connect();
    EXPECT_EQ(w.Call("reserve\r\n"), Reserved(1, "a"));
    EXPECT_EQ(w.Call("reserve\r\n"), Reserved(2, "b"));
    EXPECT_EQ(c.Call("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n");
  }  // closed without a word
  EXPECT_EQ(c.Call("reserve-with-timeout 5\r\n"), Reserved(1, "a"));
  EXPECT_EQ(c.Call("reserve-with-timeout 5\r\n"), Reserved(2, "b"));
  std::string st = c.Call("stats-job 1\r\n");
  EXPECT_EQ(YamlValue(st, "reserves"), "2");
  EXPECT_EQ(YamlValue(st, "timeouts"), "0");
  EXPECT_EQ(YamlValue(st, "releases"), "0");
  EXPECT_EQ(YamlValue(st, "pri"), "7");
  // The same after quit, and for a worker that was waiting in reserve.
  {
    RawClient w = Connect();
    EXPECT_EQ(w.Call("release 1 7 0\r\n"), "NOT_FOUND\r\n");
  }
  EXPECT_EQ(c.Call("release 1 7 0\r\n"), "RELEASED\r\n");
  {
    RawClient w = Connect();
    EXPECT_EQ(w.Call("reserve\r\n"), Reserved(1, "a"));
    EXPECT_TRUE(w.Send("quit\r\n"));
    EXPECT_TRUE(w.WaitClosed(5000ms));
  }
  EXPECT_EQ(c.Call("reserve-with-timeout 5\r\n"), Reserved(1, "a"));
}

TEST_F(Protocol, AWaitingConnectionThatClosesIsForgotten) {
  // beanstalkd watches a waiting connection for hang-up: a worker that goes
  // away while blocked in reserve stops waiting at once and never takes a job.
  {
    RawClient w = Connect();
    ASSERT_TRUE(w.Send("reserve\r\n"));
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(WaitForStat("current-waiting", "0"), "0");
  RawClient c = Connect();
  EXPECT_EQ(c.Call(PutCmd("j")), Inserted(1));
  EXPECT_EQ(c.Call("reserve-with-timeout 2\r\n"), Reserved(1, "j"));
  EXPECT_EQ(YamlValue(c.Call("stats-job 1\r\n"), "reserves"), "1");
}

TEST_F(Protocol, HalfCloseWhileWaitingRepliesTimedOut) {
  RawClient w = Connect();
  ASSERT_TRUE(w.Send("reserve\r\n"));
  std::this_thread::sleep_for(200ms);
  w.ShutdownWrite();
  EXPECT_EQ(w.ReadReply(3000ms), "TIMED_OUT\r\n");
}

TEST_F(Protocol, RepliesPrecedeTheCloseOfAHalfClosedConnection) {
  RawClient c = Connect();
  ASSERT_TRUE(c.Send("use hc\r\nput 0 0 60 2\r\nhi\r\nlist-tube-used\r\n"));
  c.ShutdownWrite();
  std::string data;
  EXPECT_TRUE(c.WaitClosed(3000ms, &data));
  EXPECT_EQ(data, "USING hc\r\n" + Inserted(1) + "USING hc\r\n");
  RawClient d = Connect();
  EXPECT_EQ(d.Call("peek 1\r\n"), Found(1, "hi"));
}

TEST_F(Protocol, QuitInAPipelineAnswersWhatCameBefore) {
  RawClient c = Connect();
  ASSERT_TRUE(c.Send("list-tube-used\r\nput 0 0 60 1\r\nq\r\nquit\r\nlist-tube-used\r\n"));
  std::string data;
  EXPECT_TRUE(c.WaitClosed(3000ms, &data));
  EXPECT_EQ(data, "USING default\r\n" + Inserted(1));
}

TEST_F(Protocol, Quit) {
  RawClient c = Connect();
  ASSERT_TRUE(c.Send("quit\r\nlist-tube-used\r\n"));
  std::string data;
  EXPECT_TRUE(c.WaitClosed(3000ms, &data));
  EXPECT_EQ(data, "");
  RawClient d = Connect();
  ASSERT_TRUE(d.Send("quitxyz\r\n"));  // a prefix match
  EXPECT_TRUE(d.WaitClosed(3000ms, &data));
  EXPECT_EQ(data, "");
  RawClient e = Connect();
  EXPECT_EQ(e.Call("QUIT\r\n"), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(e.Call("quit \r\n"), std::string(kEofMark));
}

// ---- framing -------------------------------------------------------------------------

TEST_F(Protocol, UnknownCommands) {
  RawClient c = Connect();
  for (std::string line :
       {"", "foo", "PUT 0 0 1 1", "Stats", " stats", "list", "peek-", "reserv", "kick-jobs 1",
        "del 1", "\x01", "put-ex", "delete-key", "GET / HTTP/1.1"}) {
    EXPECT_EQ(c.Call(line + "\r\n"), "UNKNOWN_COMMAND\r\n") << line;
  }
  // Commands without arguments take no trailing bytes at all.
  for (std::string line : {"reserve ", "reservex", "peek-buried ", "list-tubes ", "list-tube-usedx",
                           "stats-tube", "reserve-batch"}) {
    EXPECT_EQ(c.Call(line + "\r\n"), "BAD_FORMAT\r\n") << line;
  }
  std::string stats = c.Call("stats\r\n");
  EXPECT_EQ(YamlValue(stats, "cmd-reserve"), "0");
  EXPECT_EQ(YamlValue(stats, "cmd-stats"), "1");
}

TEST_F(Protocol, EmbeddedNulIsBadFormat) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call("a\0b\r\n"s), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("use fo\0o\r\n"s), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("put 0 0 60 1\0\r\n"s), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("list-tube-used\r\n"), "USING default\r\n");
}

TEST_F(Protocol, LineLimitIs224BytesWithCrlf) {
  RawClient c = Connect();
  const std::string tube(200, 't');
  EXPECT_EQ(c.Call("use " + tube + "\r\n"), "USING " + tube + "\r\n");
  // The longest line beanstalkd was sized for: exactly 224 bytes.
  std::string longest = "pause-tube " + tube + " 4294967295\r\n";
  ASSERT_EQ(longest.size(), 224u);
  EXPECT_EQ(c.Call(longest), "PAUSED\r\n");
  // Two bytes more (extra spaces, otherwise fine) is too long.
  EXPECT_EQ(c.Call("pause-tube   " + tube + " 4294967295\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("list-tube-used\r\n"), "USING " + tube + "\r\n");
  // One byte more: the '\r' is the 224th byte, so the line is too long and
  // its end is not seen (it straddles two blocks): the discard runs through
  // the next line's CRLF.
  ASSERT_TRUE(c.Send("pause-tube  " + tube + " 4294967295\r\n"));
  EXPECT_EQ(c.ReadFor(300ms), "");
  EXPECT_EQ(c.Call("list-tube-used\r\nlist-tube-used\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.ReadReply(), "USING " + tube + "\r\n");
  EXPECT_EQ(c.Call(std::string(222, 'x') + "\r\n"), "UNKNOWN_COMMAND\r\n");  // 224
  EXPECT_EQ(c.Call(std::string(224, 'x') + "\r\n"), "BAD_FORMAT\r\n");       // 226
  // A long line is discarded up to its CRLF and answered once.
  EXPECT_EQ(c.Call(std::string(100000, 'x') + "\r\nlist-tube-used\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.ReadReply(), "USING " + tube + "\r\n");
  // The same, arriving in pieces.
  ASSERT_TRUE(c.Send(std::string(1000, 'y')));
  EXPECT_EQ(c.ReadFor(200ms), "");
  ASSERT_TRUE(c.Send(std::string(1000, 'y') + "\r"));
  EXPECT_EQ(c.ReadFor(200ms), "");
  EXPECT_EQ(c.Call("\nlist-tube-used\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.ReadReply(), "USING " + tube + "\r\n");
}

TEST_F(Protocol, LineFramingQuirks) {
  RawClient c = Connect();
  // A bare '\r' hides a later "\r\n" in the same line: nothing is answered
  // until 224 bytes are buffered; then the discard runs to the next "\r\n".
  ASSERT_TRUE(c.Send("xx\rab\r\nlist-tube-used\r\n"));  // 23 bytes
  EXPECT_EQ(c.ReadFor(300ms), "");
  EXPECT_EQ(c.Call(std::string(201, 'z') + "\r\nlist-tube-used\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.ReadReply(), "USING default\r\n");
  // A '\n' alone does not end a line.
  ASSERT_TRUE(c.Send("list-tube-used\n"));
  EXPECT_EQ(c.ReadFor(200ms), "");
  EXPECT_EQ(c.Call("\r\n"), "BAD_FORMAT\r\n");  // "list-tube-used\n" has a trailing byte
  // The '\r' as the 224th byte and '\n' as the 225th: the line is over-long
  // and the discard eats the next command too.
  EXPECT_EQ(c.Call(std::string(223, 'x') + "\r\nlist-tube-used\r\nlist-tube-used\r\n"),
            "BAD_FORMAT\r\n");
  EXPECT_EQ(c.ReadReply(), "USING default\r\n");
  EXPECT_EQ(c.ReadFor(200ms), "");
}

// One session exercising most commands, as a single byte string, and the
// replies beanstalkd gives to it.
const std::string kSessionIn =
    "use pipe\r\n"
    "put 5 0 60 3\r\nabc\r\n"
    "put 1 0 60 4\r\nx\r\ny\r\n"
    "watch pipe\r\n"
    "ignore default\r\n"
    "reserve\r\n"
    "release 2 9 0\r\n"
    "peek-ready\r\n"
    "reserve-with-timeout 0\r\n"
    "delete 2\r\n"
    "bogus\r\n"
    "put 0 0 60 1 x\r\n"
    "list-tube-used\r\n"
    "peek 1\r\n"
    "bury 1 3\r\n"
    "list-tubes-watched\r\n"
    "kick 1\r\n"
    "reserve-with-timeout 0\r\n"
    "touch 1\r\n"
    "reserve-with-timeout 0\r\n"
    "delete 1\r\n"
    "stats-tube pipe\r\n";
const std::string kSessionOut =
    "USING pipe\r\n"
    "INSERTED 1\r\n"
    "INSERTED 2\r\n"
    "WATCHING 2\r\n"
    "WATCHING 1\r\n"
    "RESERVED 2 4\r\nx\r\ny\r\n"
    "RELEASED\r\n"
    "FOUND 1 3\r\nabc\r\n"
    "RESERVED 1 3\r\nabc\r\n"
    "DELETED\r\n"
    "UNKNOWN_COMMAND\r\n"
    "BAD_FORMAT\r\n"  // "put ... 1 x": trailing garbage
    "USING pipe\r\n"
    "FOUND 1 3\r\nabc\r\n"
    "BURIED\r\n"
    "OK 11\r\n---\n- pipe\n\r\n"
    "KICKED 1\r\n"
    "RESERVED 1 3\r\nabc\r\n"
    "TOUCHED\r\n"
    "TIMED_OUT\r\n"
    "DELETED\r\n" +
    TubeStatsReply({.name = "pipe", .total = 2, .using_ = 1, .watching = 1, .cmd_delete = 2});
constexpr size_t kSessionReplies = 22;

TEST_F(Protocol, PipelinedRequestsInOneWrite) {
  RawClient c = Connect();
  ASSERT_TRUE(c.Send(kSessionIn));
  EXPECT_EQ(c.ReadReplies(kSessionReplies), kSessionOut);
  EXPECT_EQ(c.ReadFor(200ms), "");
}

TEST_F(Protocol, InputSplitIntoSingleBytes) {
  RawClient c = Connect();
  ASSERT_TRUE(c.SendByteByByte(kSessionIn, 200us));
  EXPECT_EQ(c.ReadReplies(kSessionReplies), kSessionOut);
  EXPECT_EQ(c.ReadFor(200ms), "");
}

TEST_F(Protocol, InputSplitInTwoAtEveryPosition) {
  RawClient c = Connect();
  for (uint64_t id = 1; id <= 60; ++id) {
    std::string in = "put 0 0 60 7\r\nab\r\ncde\r\nreserve-with-timeout 0\r\ndelete " +
                     std::to_string(id) + "\r\n";
    size_t cut = static_cast<size_t>(id) % in.size();
    ASSERT_TRUE(c.Send(in.substr(0, cut)));
    std::this_thread::sleep_for(2ms);
    ASSERT_TRUE(c.Send(in.substr(cut)));
    EXPECT_EQ(c.ReadReplies(3), Inserted(id) + Reserved(id, "ab\r\ncde") + "DELETED\r\n")
        << "cut at " << cut;
  }
}

TEST_F(Protocol, ManyRepliesToAClientThatReadsLate) {
  // 1000 pipelined peeks of a 30 KB job: 30 MB of replies the client reads
  // while still sending; the server must neither drop nor reorder.
  RawClient c = Connect();
  std::string body(30000, 'q');
  EXPECT_EQ(c.Call(PutCmd(body)), Inserted(1));
  std::string req = Repeated("peek 1\r\n", 1000);
  std::thread sender([&] { c.Send(req); });
  std::string expect = Found(1, body);
  int good = 0;
  for (int i = 0; i < 1000; ++i) {
    if (c.ReadReply() != expect) break;
    ++good;
  }
  sender.join();
  EXPECT_EQ(good, 1000);
}

TEST_F(Protocol, PipelinedRequestsOfAClientThatDoesNotReadAreNotRunAhead) {
  // A 60 KB job, then peeks sent for as long as the connection takes them,
  // nothing read: each 8-byte request asks for a 60 KB reply. A server
  // that ran every request it received would buffer hundreds of thousands
  // of replies (1.6 GB of them once); one that stops running commands while
  // its replies wait runs no more than the socket buffers hold.
  RawClient c = Connect();
  std::string body(60000, 'b');
  ASSERT_EQ(c.Call(PutCmd(body)), Inserted(1));
  const std::string req = Repeated("peek 1\r\n", 8192);
  std::string error;
  uint64_t sent = SendWithoutReading(c.fd(), req, 2s, &error) / 8;
  ASSERT_EQ(error, "");
  ASSERT_GT(sent, 50'000u) << "the test needs a long pipeline";
  std::string run = StatsValue("cmd-peek");
  ASSERT_FALSE(run.empty()) << "no answer to stats: the server is busy with the pipeline";
  EXPECT_LT(std::stoull(run), 5'000u) << sent << " peeks sent";
  // The connection still works: its replies come, whole and in order.
  std::string expect = Found(1, body);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(c.ReadReply(), expect) << i;
}

// Replies (60 KB each) pile up faster than the client reads them while it
// keeps sending more requests: the server sees the socket writable and
// readable at once, again and again, with replies waiting. Every request
// gets its reply, once and in order, and none is run twice.
TEST_F(Protocol, ASlowReaderThatKeepsSendingGetsEveryReplyOnceInOrder) {
  RawClient c = Connect();
  std::string body(60000, 'b');
  ASSERT_EQ(c.Call(PutCmd(body)), Inserted(1));
  constexpr int kPeeks = 800;  // 48 MB of replies
  std::thread writer([fd = c.fd()] {
    const std::string chunk = Repeated("peek 1\r\n", 10);
    auto send_all = [fd](std::string_view s) {
      while (!s.empty()) {
        ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
        if (n <= 0) return;
        s.remove_prefix(static_cast<size_t>(n));
      }
    };
    for (int i = 0; i < kPeeks / 10; ++i) {
      send_all(chunk);
      std::this_thread::sleep_for(1ms);
    }
    send_all("put 0 0 60 1\r\nz\r\n");
  });
  const std::string found = Found(1, body);
  int got = 0;
  std::string reply;
  for (; got < kPeeks; ++got) {
    reply = c.ReadReply();
    if (reply != found) break;
    if (got % 8 == 0) std::this_thread::sleep_for(2ms);  // a slow reader
  }
  writer.join();
  ASSERT_EQ(got, kPeeks) << "reply " << got << " is not the job: " << reply.substr(0, 64);
  EXPECT_EQ(c.ReadReply(), Inserted(2));
  EXPECT_EQ(c.ReadFor(200ms), "") << "replies beyond the requests";
  EXPECT_EQ(StatsValue("cmd-peek"), std::to_string(kPeeks));
  EXPECT_EQ(StatsValue("total-jobs"), "2");
}

// ---- drain mode and signals -------------------------------------------------------------

TEST_F(Protocol, DrainingAfterSigusr1) {
  RawClient c = Connect();
  EXPECT_EQ(c.Call(PutCmd("before")), Inserted(1));
  server_.Signal(SIGUSR1);
  EXPECT_EQ(WaitForStat("draining", "true"), "true");
  // The reply comes after the body, like any put's.
  ASSERT_TRUE(c.Send("put 0 0 60 5\r\n"));
  EXPECT_EQ(c.ReadFor(300ms), "");
  EXPECT_EQ(c.Call("after\r\n"), "DRAINING\r\n");
  // The rest works as before.
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(1, "before"));
  EXPECT_EQ(c.Call("release 1 0 0\r\n"), "RELEASED\r\n");
  EXPECT_EQ(c.Call("list-tube-used\r\n"), "USING default\r\n");
  std::string stats = c.Call("stats\r\n");
  EXPECT_EQ(YamlValue(stats, "draining"), "true");
  EXPECT_EQ(YamlValue(stats, "total-jobs"), "1");
  EXPECT_EQ(YamlValue(stats, "cmd-put"), "2");
  // Malformed puts still get their usual errors.
  EXPECT_EQ(c.Call("put 0 0 60 1\r\nxyz"), "EXPECTED_CRLF\r\n");
  server_.Signal(SIGUSR1);  // stays draining
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(c.Call(PutCmd("z")), "DRAINING\r\n");
  EXPECT_EQ(YamlValue(c.Call("stats\r\n"), "current-jobs-ready"), "1");
}

TEST_F(Protocol, SigtermExitsZero) {
  SKIP_UNLESS_DELAYQD();
  RawClient c = Connect();
  EXPECT_EQ(c.Call(PutCmd("x")), Inserted(1));
  ASSERT_TRUE(c.Send("reserve-with-timeout 0\r\nreserve\r\n"));  // one waits
  EXPECT_EQ(c.ReadReply(), Reserved(1, "x"));
  int st = server_.Stop(10000ms);
  ASSERT_TRUE(WIFEXITED(st)) << "wait status " << st;
  EXPECT_EQ(WEXITSTATUS(st), 0) << server_.Log();
}

// SIGTERM while a client keeps sending more than the server reads: the
// replies of the commands the server ran reach the client whole, then the
// end of the stream. (Closing a socket with unread input in it makes the
// kernel reset the connection and drop the replies it still held: the
// server shuts its side and drops the client's input until the client
// closes.)
TEST_F(Protocol, SigtermDeliversEveryReplyToAClientThatKeepsSending) {
  SKIP_UNLESS_DELAYQD();
  RawClient c = Connect();
  const std::string body(65535, 'b');
  ASSERT_EQ(c.Call(PutCmd(body)), Inserted(1));
  std::thread writer([fd = c.fd()] {
    std::string error;
    SendWithoutReading(fd, Repeated("peek 1\r\n", 8192), 2s, &error);
  });
  std::this_thread::sleep_for(300ms);  // input waits in the server's socket
  server_.Signal(SIGTERM);
  // The replies are checked as they come, not kept: over a hundred MB of
  // them, kept in one string, made this client stall for seconds in a
  // reallocation under the sanitizers, long enough for the server to give
  // up on a client that reads nothing (its linger) and cut the stream.
  const std::string found = Found(1, body);
  std::string pending;
  uint64_t whole = 0, bytes = 0;
  int r;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while ((r = c.ReadInto(&pending, deadline)) > 0) {
    size_t at = 0;
    for (; pending.size() - at >= found.size(); at += found.size(), ++whole)
      ASSERT_EQ(pending.compare(at, found.size(), found), 0) << "reply at byte " << bytes + at;
    bytes += at;
    pending.erase(0, at);
  }
  const bool closed = r < 0;
  writer.join();
  c.Close();
  ASSERT_TRUE(closed) << "the connection stayed open";
  ASSERT_GT(whole, 0u);
  EXPECT_EQ(pending.size(), 0u) << "a reply was cut: " << bytes + pending.size() << " bytes, "
                                << whole << " whole replies";
  int st = server_.Stop(10000ms);
  ASSERT_TRUE(WIFEXITED(st)) << "wait status " << st;
  EXPECT_EQ(WEXITSTATUS(st), 0) << server_.Log();
}

// `quit` with more input behind it, from a client that then neither reads
// nor closes: the replies before the quit arrive whole, then the end of the
// stream; the session ends at the quit (its reserved job is ready again at
// once) and the server closes the socket on its own.
TEST_F(Protocol, QuitWithInputBehindItEndsTheSessionAndTheConnection) {
  SKIP_UNLESS_DELAYQD();
  RawClient other = Connect();
  ASSERT_EQ(other.Call(PutCmd("job")), Inserted(1));
  RawClient c = Connect();
  const std::string ids = Repeated("list-tube-used\r\n", 2000);
  ASSERT_TRUE(c.Send("reserve\r\n" + ids + "quit\r\n" + ids));
  std::this_thread::sleep_for(200ms);  // the quit ran; nothing read yet
  EXPECT_EQ(YamlValue(other.Call("stats-job 1\r\n"), "state"), "ready");
  EXPECT_EQ(YamlValue(other.Call("stats\r\n"), "current-connections"), "1");
  std::string replies;
  ASSERT_TRUE(c.WaitClosed(10s, &replies)) << "the connection stayed open";
  EXPECT_EQ(replies, Reserved(1, "job") + Repeated("USING default\r\n", 2000));
  EXPECT_EQ(other.Call("reserve-with-timeout 0\r\n"), Reserved(1, "job"));
}

// The loop polls while one client's requests keep coming, and stops
// polling once they come seldom: a trickle of requests costs no polling.
// The window is long (5 ms) so that the client's turn-arounds land in it on
// a slow machine; a loop that polled after every request of the trickle
// would spend 5 ms on each, 500 ms in all.
class Polling : public ServerTest {
  std::vector<std::string> ServerArgs() const override { return {"--busy-poll-us", "5000"}; }
};

TEST_F(Polling, PollsUnderRequestsNotUnderATrickle) {
  SKIP_UNLESS_DELAYQD();
  RawClient c = Connect();
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ(c.Call(PutCmd("x")), Inserted(static_cast<uint64_t>(i + 1)));
    ASSERT_EQ(c.Call("reserve\r\n"), Reserved(static_cast<uint64_t>(i + 1), "x"));
    ASSERT_EQ(c.Call("delete " + std::to_string(i + 1) + "\r\n"), "DELETED\r\n");
  }
  // The server's own CPU time (user + system), from its `stats`.
  auto cpu = [&] {
    const std::string stats = c.Call("stats\r\n");
    return std::stod(YamlValue(stats, "rusage-utime")) +
           std::stod(YamlValue(stats, "rusage-stime"));
  };
  const double before = cpu();
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(20ms);
    ASSERT_EQ(c.Call("peek 1\r\n"), "NOT_FOUND\r\n");
  }
  const double trickle = cpu() - before;
  EXPECT_LT(trickle, 0.150) << "CPU seconds used by 100 requests 20 ms apart";
  int st = server_.Stop(10000ms);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "wait status " << st;
  // event=stopped polls=N poll_hits=M ...
  const std::string log = server_.Log();
  const auto at = log.find("poll_hits=");
  ASSERT_NE(at, std::string::npos) << log;
  // Not a count: on a machine whose cores are all taken, the client waits
  // for a CPU and most polls miss (a few hundred of 6,000 hit with two
  // spinning processes beside the test on 2 cores).
  EXPECT_GT(std::stoull(log.substr(at + 10)), 0u) << log;
}

// ---- delayq extensions ------------------------------------------------------------------

using Extension = ServerTest;

#define SKIP_EXTENSION() \
  if (AgainstBeanstalkd()) GTEST_SKIP() << "delayq extension"

TEST_F(Extension, PutExWithKeyIsIdempotent) {
  SKIP_EXTENSION();
  RawClient c = Connect();
  EXPECT_EQ(c.Call("put-ex 5 0 60000 3 key=order-1\r\nabc\r\n"), Inserted(1));
  EXPECT_EQ(c.Call("put-ex 9 0 60000 3 key=order-1\r\nxyz\r\n"), "EXISTS 1\r\n");
  EXPECT_EQ(c.Call("put-ex 5 0 60000 1 key=order-2\r\nq\r\n"), Inserted(2));
  EXPECT_EQ(c.Call("peek-key order-1\r\n"), Found(1, "abc"));
  EXPECT_EQ(c.Call("stats-job 1\r\n"), JobStatsReply({.id = 1, .pri = 5}));
  // Keys are per tube.
  EXPECT_EQ(c.Call("use other\r\n"), "USING other\r\n");
  EXPECT_EQ(c.Call("peek-key order-1\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("delete-key order-1\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("put-ex 5 0 60000 1 key=order-1\r\nz\r\n"), Inserted(3));
  EXPECT_EQ(c.Call("use default\r\n"), "USING default\r\n");
  EXPECT_EQ(c.Call("delete-key order-1\r\n"), "DELETED\r\n");
  EXPECT_EQ(c.Call("delete-key order-1\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(c.Call("peek-key order-1\r\n"), "NOT_FOUND\r\n");
  // A deleted key may be used again, for a new job.
  EXPECT_EQ(c.Call("put-ex 5 0 60000 1 key=order-1\r\nn\r\n"), Inserted(4));
  EXPECT_EQ(c.Call("peek 3\r\n"), Found(3, "z"));
  // A plain put counts as cmd-put too.
  EXPECT_EQ(YamlValue(c.Call("stats\r\n"), "cmd-put"), "5");
}

TEST_F(Extension, PutExTimesAreMilliseconds) {
  SKIP_EXTENSION();
  RawClient c = Connect();
  auto t0 = Clock::now();
  EXPECT_EQ(c.Call("put-ex 0 300 400 1\r\nm\r\n"), Inserted(1));
  EXPECT_EQ(c.Call("peek-delayed\r\n"), Found(1, "m"));
  EXPECT_EQ(c.Call("reserve-with-timeout 3\r\n"), Reserved(1, "m"));
  EXPECT_GE(MillisSince(t0), 250);
  EXPECT_LT(MillisSince(t0), 1500);
  // TTR 400 ms: back to ready well before a second.
  RawClient other = Connect();
  t0 = Clock::now();
  EXPECT_EQ(other.Call("reserve-with-timeout 3\r\n"), Reserved(1, "m"));
  EXPECT_GE(MillisSince(t0), 250);
  EXPECT_LT(MillisSince(t0), 1500);
  EXPECT_EQ(YamlValue(other.Call("stats-job 1\r\n"), "timeouts"), "1");
}

TEST_F(Extension, PutExAtAnAbsoluteTime) {
  SKIP_EXTENSION();
  RawClient c = Connect();
  int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  EXPECT_EQ(c.Call("put-ex 0 0 60000 1 at=" + std::to_string(now_ms + 100000) + "\r\nf\r\n"),
            Inserted(1));
  EXPECT_EQ(c.Call("put-ex 0 0 60000 1 at=" + std::to_string(now_ms - 5000) + "\r\np\r\n"),
            Inserted(2));
  std::string st = c.Call("stats-job 1\r\n");
  EXPECT_EQ(YamlValue(st, "state"), "delayed");
  int64_t left = std::atoll(YamlValue(st, "time-left").c_str());
  EXPECT_GE(left, 98);
  EXPECT_LE(left, 100);
  EXPECT_EQ(YamlValue(c.Call("stats-job 2\r\n"), "state"), "ready");
  EXPECT_EQ(c.Call("peek-delayed\r\n"), Found(1, "f"));
  EXPECT_EQ(c.Call("peek-ready\r\n"), Found(2, "p"));
}

TEST_F(Extension, PutExTriesBuryAfterTheLastTry) {
  SKIP_EXTENSION();
  RawClient c = Connect();
  EXPECT_EQ(c.Call("put-ex 0 0 60000 1 tries=2\r\nt\r\n"), Inserted(1));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(1, "t"));
  EXPECT_EQ(c.Call("release 1 0 0\r\n"), "RELEASED\r\n");
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(1, "t"));
  EXPECT_EQ(c.Call("release 1 0 0\r\n"), "BURIED\r\n");  // tries used up
  EXPECT_EQ(c.Call("peek-buried\r\n"), Found(1, "t"));
  std::string st = c.Call("stats-job 1\r\n");
  EXPECT_EQ(YamlValue(st, "state"), "buried");
  EXPECT_EQ(YamlValue(st, "reserves"), "2");
  EXPECT_EQ(YamlValue(st, "buries"), "1");
}

TEST_F(Extension, PutExBackoffDelaysAReleasedJob) {
  SKIP_EXTENSION();
  RawClient c = Connect();
  EXPECT_EQ(c.Call("put-ex 0 0 60000 1 backoff=300ms,10m\r\nb\r\n"), Inserted(1));
  EXPECT_EQ(c.Call("reserve\r\n"), Reserved(1, "b"));
  EXPECT_EQ(c.Call("release 1 0 0\r\n"), "RELEASED\r\n");
  EXPECT_EQ(YamlValue(c.Call("stats-job 1\r\n"), "state"), "delayed");
  auto t0 = Clock::now();
  EXPECT_EQ(c.Call("reserve-with-timeout 3\r\n"), Reserved(1, "b"));
  EXPECT_GE(MillisSince(t0), 150);
  EXPECT_EQ(c.Call("release 1 0 0\r\n"), "RELEASED\r\n");
  std::string st = c.Call("stats-job 1\r\n");
  EXPECT_EQ(YamlValue(st, "state"), "delayed");
  int64_t left = std::atoll(YamlValue(st, "time-left").c_str());
  EXPECT_GE(left, 598);  // second back-off: 10 minutes
  EXPECT_LE(left, 600);
  // An explicit release delay wins over the back-off.
  EXPECT_EQ(c.Call("reserve-job 1\r\n"), Reserved(1, "b"));
  EXPECT_EQ(c.Call("release 1 0 1000\r\n"), "RELEASED\r\n");
  EXPECT_EQ(YamlValue(c.Call("stats-job 1\r\n"), "delay"), "1000");
}

TEST_F(Extension, PutExErrors) {
  SKIP_EXTENSION();
  RawClient c = Connect();
  // Malformed lines: BAD_FORMAT, the body is then read as a command (as
  // put does).
  for (std::string opts :
       std::vector<std::string>{" key=", " foo=1", " key=a key=b", " tries=x", " at=-1", " key=a ",
                                " key", " =1", " key=" + std::string(201, 'k'), "x"}) {
    EXPECT_EQ(c.Call("put-ex 0 0 1 1" + opts + "\r\n"), "BAD_FORMAT\r\n") << opts;
  }
  EXPECT_EQ(c.Call("put-ex 0 0 1000\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("put-ex\r\n"), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(c.Call("put-ex 0 0 1000 1 key=" + std::string(200, 'k') + "\r\nk\r\n"), Inserted(1));
  EXPECT_EQ(c.Call("put-ex 0 0 1000 1\r\nxyz"), "EXPECTED_CRLF\r\n");
  EXPECT_EQ(c.Call("delete-key\r\n"), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(c.Call("delete-key \r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.Call("peek-key a b\r\n"), "BAD_FORMAT\r\n");
}

TEST_F(Extension, PutExTooBigAndDraining) {
  SKIP_EXTENSION();
  RawClient c = Connect();
  EXPECT_EQ(c.Call("put-ex 0 0 1000 65536 key=k\r\n" + std::string(65536, 'x') + "\r\n"),
            "JOB_TOO_BIG\r\n");
  EXPECT_EQ(c.Call("peek-key k\r\n"), "NOT_FOUND\r\n");
  server_.Signal(SIGUSR1);
  EXPECT_EQ(WaitForStat("draining", "true"), "true");
  EXPECT_EQ(c.Call("put-ex 0 0 1000 1 key=k\r\nx\r\n"), "DRAINING\r\n");
  EXPECT_EQ(c.Call("peek-key k\r\n"), "NOT_FOUND\r\n");
}

TEST_F(Extension, ReserveBatch) {
  SKIP_EXTENSION();
  RawClient c = Connect();
  EXPECT_EQ(c.Call(PutCmd("a", 3)), Inserted(1));
  EXPECT_EQ(c.Call(PutCmd("b", 1)), Inserted(2));
  EXPECT_EQ(c.Call(PutCmd("c", 2)), Inserted(3));
  EXPECT_EQ(c.Call("reserve-batch 2 0\r\n"), "RESERVED_BATCH 2\r\n");
  EXPECT_EQ(c.ReadReplies(2), Reserved(2, "b") + Reserved(3, "c"));
  EXPECT_EQ(c.Call("reserve-batch 10 0\r\n"), "RESERVED_BATCH 1\r\n");
  EXPECT_EQ(c.ReadReply(), Reserved(1, "a"));
  EXPECT_EQ(c.Call("reserve-batch 10 0\r\n"), "TIMED_OUT\r\n");
  for (uint64_t id = 1; id <= 3; ++id) {
    EXPECT_EQ(c.Call("delete " + std::to_string(id) + "\r\n"), "DELETED\r\n");
  }
  // A waiting batch is served when jobs arrive.
  ASSERT_TRUE(c.Send("reserve-batch 5 5\r\n"));
  EXPECT_EQ(c.ReadFor(200ms), "");
  RawClient p = Connect();
  EXPECT_EQ(p.Call(PutCmd("d")), Inserted(4));
  std::string r = c.ReadReply();
  EXPECT_TRUE(r == "RESERVED_BATCH 1\r\n") << r;
  EXPECT_EQ(c.ReadReply(), Reserved(4, "d"));
  for (std::string bad : {"reserve-batch 0 0", "reserve-batch 1001 0", "reserve-batch 1",
                          "reserve-batch 1 0 ", "reserve-batch x 0", "reserve-batch 1 -1"}) {
    EXPECT_EQ(c.Call(bad + "\r\n"), "BAD_FORMAT\r\n") << bad;
  }
  EXPECT_EQ(c.Call("reserve-batch 1000 0\r\n"), "TIMED_OUT\r\n");
}

TEST_F(Extension, ClearTube) {
  SKIP_EXTENSION();
  RawClient c = Connect();
  EXPECT_EQ(c.Call("use t\r\n"), "USING t\r\n");
  EXPECT_EQ(c.Call("watch t\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(c.Call(PutCmd("r1")), Inserted(1));
  EXPECT_EQ(c.Call(PutCmd("r2")), Inserted(2));
  EXPECT_EQ(c.Call(PutCmd("d", 0, 100)), Inserted(3));
  EXPECT_EQ(c.Call(PutCmd("b")), Inserted(4));
  EXPECT_EQ(c.Call(PutCmd("res")), Inserted(5));
  EXPECT_EQ(c.Call("reserve-job 4\r\n"), Reserved(4, "b"));
  EXPECT_EQ(c.Call("bury 4 0\r\n"), "BURIED\r\n");
  EXPECT_EQ(c.Call("reserve-job 5\r\n"), Reserved(5, "res"));
  EXPECT_EQ(c.Call("clear-tube t buried,delayed\r\n"), "CLEARED 2\r\n");
  EXPECT_EQ(c.Call("clear-tube t delayed\r\n"), "CLEARED 0\r\n");
  EXPECT_EQ(c.Call("clear-tube t all\r\n"), "CLEARED 2\r\n");  // never the reserved one
  EXPECT_EQ(c.Call("peek 5\r\n"), Found(5, "res"));
  EXPECT_EQ(c.Call("clear-tube nosuch all\r\n"), "NOT_FOUND\r\n");
  for (std::string bad : {"clear-tube t", "clear-tube t foo", "clear-tube t ready,ready",
                          "clear-tube -t all", "clear-tube t all ", "clear-tube t ready,"}) {
    EXPECT_EQ(c.Call(bad + "\r\n"), "BAD_FORMAT\r\n") << bad;
  }
  EXPECT_EQ(YamlValue(c.Call("stats-tube t\r\n"), "current-jobs-reserved"), "1");
}

// ---- the oracle: the same bytes to beanstalkd and to delayqd -----------------------------

// One step of a scripted session: what connection `conn` sends, and how many
// replies it then reads; kServerCloses: the server must close the
// connection; kClientCloses: the client closes it; kClientShutsDownWrite:
// the client shuts down its sending side and reads a reply. A nonzero `signal` sends
// that signal to the server instead. `sleep_ms`: a pause after the step (to
// let a command that has no reply yet take effect).
constexpr int kServerCloses = -1;
constexpr int kClientCloses = -2;
constexpr int kClientShutsDownWrite = -3;  // then reads one reply
struct Step {
  int conn;
  std::string send;
  int replies = 1;
  int signal = 0;
  int sleep_ms = 0;
};

// Runs `steps` against a fresh server and returns one transcript entry per
// step (replies with volatile YAML values masked).
std::vector<std::string> RunScript(const std::string& binary, const std::vector<std::string>& args,
                                   const std::vector<Step>& steps, std::string* error) {
  ServerProcess server;
  std::vector<std::string> out;
  if (!server.Start(binary, args, error)) return out;
  std::map<int, RawClient> conns;
  std::vector<std::string> mask = kVolatileStatsKeys;
  mask.insert(mask.end(), kVolatileJobKeys.begin(), kVolatileJobKeys.end());
  mask.push_back("pause-time-left");
  for (const Step& s : steps) {
    if (s.signal != 0) {
      server.Signal(s.signal);
      std::this_thread::sleep_for(200ms);
      out.push_back("<signal>");
      continue;
    }
    auto it = conns.find(s.conn);
    if (it == conns.end()) it = conns.emplace(s.conn, RawClient(server.port(), 3000ms)).first;
    RawClient& c = it->second;
    c.Send(s.send);
    std::string got;
    if (s.replies == kClientCloses) {
      conns.erase(it);
      got = "<client closed>";
    } else if (s.replies == kClientShutsDownWrite) {
      c.ShutdownWrite();
      got = c.ReadReply();
    } else if (s.replies == kServerCloses) {
      bool closed = c.WaitClosed(3000ms, &got);
      got += closed ? "<closed>" : "<still open>";
      conns.erase(it);
      // Let the server finish with the connection before the next step.
      std::this_thread::sleep_for(50ms);
    } else {
      for (int i = 0; i < s.replies; ++i) got += MaskYamlValues(c.ReadReply(), mask);
    }
    if (s.sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(s.sleep_ms));
    out.push_back(got);
  }
  return out;
}

std::string Printable(std::string_view s) {
  std::string o;
  for (char ch : s) {
    unsigned char u = static_cast<unsigned char>(ch);
    if (ch == '\r') {
      o += "\\r";
    } else if (ch == '\n') {
      o += "\\n";
    } else if (u < 0x20 || u >= 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", u);
      o += b;
    } else {
      o += ch;
    }
  }
  if (o.size() > 600) o = o.substr(0, 600) + "...";
  return o;
}

// The lines of two replies that differ ("line: beanstalkd -> delayqd"), or
// both replies whole when their shapes differ.
std::string DiffReplies(const std::string& want, const std::string& got) {
  auto lines = [](const std::string& s) {
    std::vector<std::string> v;
    size_t p = 0;
    while (p <= s.size()) {
      size_t e = s.find('\n', p);
      if (e == std::string::npos) e = s.size();
      v.push_back(s.substr(p, e - p));
      p = e + 1;
    }
    return v;
  };
  std::vector<std::string> a = lines(want), b = lines(got);
  if (a.size() != b.size() || a.size() < 4) {
    return "\n  beanstalkd: \"" + Printable(want) + "\"\n  delayqd:    \"" + Printable(got) + "\"";
  }
  std::string out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i])
      out +=
          "\n  \"" + Printable(a[i]) + "\" (beanstalkd) vs \"" + Printable(b[i]) + "\" (delayqd)";
  }
  return out;
}

void CompareWithBeanstalkd(const std::vector<Step>& steps,
                           const std::vector<std::string>& args = {}) {
  if (!BeanstalkdAvailable()) GTEST_SKIP() << kBeanstalkdPath << " is not installed";
  std::string error;
  std::vector<std::string> want = RunScript(kBeanstalkdPath, args, steps, &error);
  ASSERT_EQ(want.size(), steps.size()) << "beanstalkd: " << error;
  for (size_t i = 0; i < want.size(); ++i) {
    // The script itself must be right: beanstalkd answers every step.
    EXPECT_EQ(want[i].find(kTimeoutMark), std::string::npos)
        << "script step " << i << ": \"" << Printable(steps[i].send) << "\" -> \""
        << Printable(want[i]) << "\"";
  }
  std::vector<std::string> got = RunScript(DelayqdPath(), args, steps, &error);
  ASSERT_EQ(got.size(), steps.size()) << "delayqd: " << error;
  int reported = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (want[i] == got[i]) continue;
    if (++reported > 25) {
      ADD_FAILURE() << "more differences not shown";
      break;
    }
    ADD_FAILURE() << "step " << i << " (conn " << steps[i].conn << ") sent \""
                  << Printable(steps[i].send) << "\"" << DiffReplies(want[i], got[i]);
  }
}

TEST(Oracle, JobLifecycle) {
  CompareWithBeanstalkd({
      {0, "put 5 0 60 3\r\nabc\r\n"},
      {0, "put 1 0 60 0\r\n\r\n"},
      {0, "put 1 0 0 4\r\nx\r\ny\r\n"},  // ttr 0 -> 1
      {0, "put 0 10 60 1\r\nd\r\n"},
      {0, "stats-job 1\r\n"},
      {0, "stats-job 4\r\n"},
      {0, "peek-ready\r\n"},
      {0, "peek-delayed\r\n"},
      {0, "peek-buried\r\n"},
      {1, "reserve\r\n"},
      {1, "stats-job 2\r\n"},
      {0, "delete 2\r\n"},
      {1, "release 2 7 0\r\n"},
      {1, "reserve-with-timeout 0\r\n"},
      {1, "reserve-with-timeout 0\r\n"},
      {1, "reserve-with-timeout 0\r\n"},
      {1, "reserve-with-timeout 0\r\n"},  // holds job 3 (ttr 1): DEADLINE_SOON
      {1, "bury 2 100\r\n"},
      {1, "touch 3\r\n"},
      {0, "touch 3\r\n"},
      {0, "peek-buried\r\n"},
      {0, "kick 5\r\n"},
      {0, "kick 5\r\n"},
      {0, "kick-job 3\r\n"},
      {1, "release 3 0 5\r\n"},
      {0, "kick-job 3\r\n"},
      {0, "kick-job 3\r\n"},
      {0, "reserve-job 4\r\n"},
      {0, "reserve-job 4\r\n"},
      {1, "reserve-job 4\r\n"},
      {0, "release 4 2 0\r\n"},
      {2, "reserve-job 1\r\n"},
      {2, "reserve-job 2\r\n"},
      {2, "quit\r\n", -1},
      {1, "delete 1\r\n"},
      {0, "stats-job 1\r\n"},
      {0, "stats-job 2\r\n"},
      {0, "stats-job 3\r\n"},
      {0, "stats-job 4\r\n"},
      {0, "stats-tube default\r\n"},
      {0, "stats\r\n"},
      {1, "stats\r\n"},
  });
}

TEST(Oracle, Tubes) {
  std::string n200(200, 'n');
  CompareWithBeanstalkd({
      {0, "list-tubes\r\n"},
      {0, "use a\r\n"},
      {0, "use " + n200 + "\r\n"},
      {0, "use " + n200 + "x\r\n"},
      {0, "use AZaz09-+/;.$_()\r\n"},
      {0, "use -a\r\n"},
      {0, "use a b\r\n"},
      {0, "use  a\r\n"},
      {0, "use a \r\n"},
      {0, "use a*\r\n"},
      {0, "list-tubes\r\n"},
      {1, "watch a\r\n"},
      {1, "watch a\r\n"},
      {1, "watch b\r\n"},
      {1, "list-tubes-watched\r\n"},
      {1, "list-tubes\r\n"},
      {1, "ignore zzz\r\n"},
      {1, "ignore default\r\n"},
      {1, "ignore a\r\n"},
      {1, "ignore b\r\n"},
      {1, "list-tubes-watched\r\n"},
      {1, "list-tubes\r\n"},
      {0, "put 0 0 60 1\r\nq\r\n"},
      {0, "stats-tube AZaz09-+/;.$_()\r\n"},
      {0, "stats-tube b\r\n"},
      {0, "stats-tube a\r\n"},
      {0, "stats-tube nope\r\n"},
      {0, "stats-tube -a\r\n"},
      {0, "pause-tube nope 1\r\n"},
      {0, "pause-tube -a 1\r\n"},
      {0, "pause-tube b 0\r\n"},
      {0, "pause-tubeb 0\r\n"},
      {0, "pause-tube b\r\n"},
      {0, "pause-tube b 1 \r\n"},
      {0, "pause-tube " + n200 + "x 1\r\n"},
      {0, "pause-tube " + n200 + " 4294967295\r\n"},
      {0, "stats-tube b\r\n"},
      {0, "list-tube-used\r\n"},
      {0, "quit\r\n", -1},
      {1, "list-tubes\r\n"},
      {1, "stats\r\n"},
  });
}

TEST(Oracle, ParsingAndFraming) {
  CompareWithBeanstalkd({
      {0, "\r\n"},
      {0, "foo\r\n"},
      {0, "put\r\n"},
      {0, "put 0 0 1\r\n"},
      {0, "put -1 0 1 1\r\n"},
      {0, "put 0 0 1 1 \r\nx\r\n", 2},
      {0, "put 0 0 1 1\r\nx\r\n"},
      {0, "put 0 0 1 65536\r\n" + std::string(65536, 'x') + "\r\n"},
      {0, "put 0 0 1 65536 x\r\n" + std::string(65536, 'x') + "\r\n"},
      {0, "put 0 0 1 1\r\ny\r\n"},
      {0, "reserve \r\n"},
      {0, "reserve-with-timeout\r\n"},
      {0, "reserve-with-timeout x\r\n"},
      {0, "reserve-with-timeout 99999999999999999999\r\n"},
      {0, "reserve-with-timeout 0x\r\n"},
      {0, "release 1 0 0\r\n"},
      {0, "release 1\r\n"},
      {0, "bury 1\r\n"},
      {0, "bury 2 4294967295\r\n"},
      {0, "kick\r\n"},
      {0, "kick x\r\n"},
      {0, "kick 1x\r\n"},
      {0, "kick -1\r\n"},
      {0, "kick-job x\r\n"},
      {0, "delete x\r\n"},
      {0, "delete 1 \r\n"},
      {0, "peek\r\n"},
      {0, "peek-ready x\r\n"},
      {0, "stats x\r\n"},
      {0, "stats-tube\r\n"},
      {0, "stats-job\r\n"},
      {0, "a\0b\r\n"s},
      {0, std::string(222, 'x') + "\r\n"},
      {0, std::string(224, 'x') + "\r\n"},
      {0, std::string(5000, 'x') + "\r\nlist-tube-used\r\n", 2},
      {0, std::string(223, 'x') + "\r\nlist-tube-used\r\nlist-tube-used\r\n", 2},
      {0, "xx\rab\r\n" + std::string(230, 'y') + "\r\nlist-tube-used\r\n", 2},
      {0, "QUIT\r\n"},
      {0, "stats\r\n"},
      {0, "quitabc\r\n", -1},
      // Last, as it changes the ids that follow.
      {1, "put 0 0 1 3\r\nabcde\r\n", 2},
      {1, "put 0 0 1 1\r\nz\r\n"},
      {1, "stats\r\n"},
  });
}

TEST(Oracle, CountersAfterErrors) {
  // Which failed commands still count in stats (cmd-*, producers, workers).
  CompareWithBeanstalkd(
      {
          {0, "put 0 0 60 11\r\n0123456789a\r\n"},  // JOB_TOO_BIG
          {0, "stats\r\n"},
          {1, "put 0 0 60 1 \r\n"},  // trailing garbage
          {1, "stats\r\n"},
          {2, "put 0 0 60 2\r\nabcd"},  // EXPECTED_CRLF
          {2, "stats\r\n"},
          {3, "pause-tube -foo 1\r\n"},
          {3, "pause-tube nosuch 1\r\n"},
          {3, "reserve-with-timeout 0\r\n"},
          {3, "reserve-job 99\r\n"},
          {3, "delete 99\r\n"},
          {3, "touch 99\r\n"},
          {3, "bury 99 0\r\n"},
          {3, "release 99 0 0\r\n"},
          {3, "kick 0\r\n"},
          {3, "use -x\r\n"},
          {3, "watch -x\r\n"},
          {3, "stats-job 99\r\n"},
          {3, "stats-tube nosuch\r\n"},
          {3, "peek 99\r\n"},
          {3, "stats\r\n"},
          {4, "reserve-job 1\r\n"},  // fails: not a worker
          {4, "stats\r\n"},
      },
      {"-z", "10"});
}

TEST(Oracle, WaitingConnections) {
  CompareWithBeanstalkd({
      {0, "reserve\r\n", 0, 0, 100},
      {1, "watch other\r\n"},
      {1, "reserve-with-timeout 100\r\n", 0, 0, 100},
      {2, "stats-tube default\r\n"},
      {2, "stats-tube other\r\n"},
      {2, "stats\r\n"},
      {2, "use other\r\n"},
      {2, "put 0 0 60 1\r\na\r\n"},
      {1, "", 1},
      {2, "use default\r\n"},
      {2, "put 0 0 60 1\r\nb\r\n"},
      {0, "", 1},
      {2, "stats\r\n"},
      // A waiting worker that hangs up stops waiting, and takes no job.
      // (300 ms: on a busy machine beanstalkd once took longer than 100 ms
      // to notice the hang-up, and still counted the connection.)
      {3, "reserve\r\n", 0, 0, 100},
      {3, "", kClientCloses, 0, 300},
      {2, "stats\r\n"},
      {2, "put 0 0 60 1\r\nc\r\n"},
      {2, "reserve-with-timeout 0\r\n"},
      {2, "stats-job 3\r\n"},
      // One that shuts down its sending side gets TIMED_OUT.
      {4, "reserve\r\n", 0, 0, 100},
      {4, "", kClientShutsDownWrite, 0, 300},
      {2, "stats\r\n"},
  });
}

TEST(Oracle, DrainMode) {
  CompareWithBeanstalkd({
      {0, "put 0 0 60 1\r\na\r\n"},
      {0, "", 0, SIGUSR1},
      {0, "put 0 0 60 1\r\nb\r\n"},
      {0, "put 0 0 60 1\r\nbcd"},
      {0, "reserve\r\n"},
      {0, "release 1 0 5\r\n"},
      {0, "kick 1\r\n"},
      {1, "stats\r\n"},
      {1, "stats-tube default\r\n"},
  });
}

// ---- stress: hundreds of connections, every job exactly once ----------------------------

TEST(Stress, ThreeHundredConnectionsDeliverEveryJobExactlyOnce) {
  constexpr int kConns = 300;
  constexpr int kJobsPerConn = 20;
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(TargetBinary(), {}, &error)) << error;

  std::mutex mu;
  std::map<std::string, uint64_t> inserted;      // body -> id
  std::map<std::string, int> delivered;          // body -> times reserved
  std::map<uint64_t, std::string> delivered_id;  // id -> body reserved
  std::vector<std::string> errors;
  std::latch connected(kConns);
  std::atomic<int> puts_done{0};

  auto worker = [&](int n) {
    std::vector<std::pair<std::string, uint64_t>> my_inserted;
    std::vector<std::pair<uint64_t, std::string>> my_delivered;
    std::vector<std::string> my_errors;
    auto fail = [&](std::string what) {
      if (my_errors.size() < 5) my_errors.push_back("conn " + std::to_string(n) + ": " + what);
    };
    RawClient c(server.port(), 20000ms);
    connected.count_down();
    if (!c.ok()) {
      fail("connect: " + c.error());
    } else {
      connected.wait();  // all 300 connections are open at once
      std::string setup = c.Call("use stress\r\n") + c.Call("watch stress\r\n");
      if (setup != "USING stress\r\nWATCHING 2\r\n") fail("setup: " + setup);
      auto take = [&](std::string_view timeout) -> bool {
        std::string r = c.Call("reserve-with-timeout " + std::string(timeout) + "\r\n");
        if (r == "TIMED_OUT\r\n") return false;
        // RESERVED <id> <n>\r\n<body>\r\n
        if (!r.starts_with("RESERVED ")) {
          fail("reserve: " + r);
          return false;
        }
        size_t sp = r.find(' ', 9);
        size_t eol = r.find("\r\n");
        uint64_t id = std::stoull(r.substr(9, sp - 9));
        std::string body = r.substr(eol + 2, r.size() - eol - 4);
        my_delivered.emplace_back(id, body);
        std::string d = c.Call("delete " + std::to_string(id) + "\r\n");
        if (d != "DELETED\r\n") fail("delete " + std::to_string(id) + ": " + d);
        return true;
      };
      for (int j = 0; j < kJobsPerConn; ++j) {
        std::string body = "c" + std::to_string(n) + "-j" + std::to_string(j);
        std::string r = c.Call(PutCmd(body, static_cast<uint32_t>(j % 3), 0, 120));
        if (!r.starts_with("INSERTED ")) {
          fail("put: " + r);
          continue;
        }
        my_inserted.emplace_back(body, std::stoull(r.substr(9)));
        take("0");
      }
      puts_done.fetch_add(1);
      // Drain: a TIMED_OUT after every put is done means no job is left
      // ready (TTRs are long and nobody releases).
      while (true) {
        bool all_put = puts_done.load() == kConns;
        if (!take("1") && all_put) break;
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [b, id] : my_inserted) inserted[b] = id;
    for (auto& [id, b] : my_delivered) {
      delivered[b]++;
      if (!delivered_id.emplace(id, b).second)
        errors.push_back("id reserved twice: " + std::to_string(id));
    }
    errors.insert(errors.end(), my_errors.begin(), my_errors.end());
  };

  auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < kConns; ++i) threads.emplace_back(worker, i);
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < errors.size() && i < 20; ++i) ADD_FAILURE() << errors[i];

  EXPECT_EQ(inserted.size(), static_cast<size_t>(kConns * kJobsPerConn));
  size_t lost = 0, duplicated = 0, wrong_id = 0;
  for (auto& [body, id] : inserted) {
    auto it = delivered.find(body);
    if (it == delivered.end()) {
      ++lost;
    } else if (it->second > 1) {
      ++duplicated;
    }
    auto d = delivered_id.find(id);
    if (d == delivered_id.end() || d->second != body) ++wrong_id;
  }
  EXPECT_EQ(lost, 0u);
  EXPECT_EQ(duplicated, 0u);
  EXPECT_EQ(wrong_id, 0u);
  EXPECT_EQ(delivered.size(), inserted.size());  // nothing delivered that was not put

  RawClient c(server.port());
  std::string stats = c.Call("stats\r\n");
  EXPECT_EQ(YamlValue(stats, "total-jobs"), std::to_string(kConns * kJobsPerConn));
  EXPECT_EQ(YamlValue(stats, "current-jobs-ready"), "0");
  EXPECT_EQ(YamlValue(stats, "current-jobs-reserved"), "0");
  EXPECT_EQ(YamlValue(stats, "cmd-delete"), std::to_string(kConns * kJobsPerConn));
  // Every connection counted (plus the start-up probe and this one).
  EXPECT_EQ(YamlValue(stats, "total-connections"), std::to_string(kConns + 2));
  EXPECT_TRUE(server.Alive());
  std::cerr << "stress: " << kConns * kJobsPerConn << " jobs over " << kConns << " connections in "
            << MillisSince(t0) << " ms\n";
}

// ---- fuzz-ish: garbage on many connections, the server stays up ----------------------------

// Random bytes shaped to hit the framing's corners: binary junk, command
// words with junk arguments (no digits, so no command names a job), bare
// '\r' and '\n', over-long lines, put headers announcing too-big bodies,
// maximum-size bodies, abrupt closes.
class Garbage {
 public:
  explicit Garbage(uint64_t seed) : rng_(seed) {}

  std::string Next() {
    switch (Pick(10)) {
      case 0: {  // binary junk
        std::string s(1 + Pick(4096), '\0');
        for (char& ch : s) ch = static_cast<char>(Pick(256));
        return s;
      }
      case 1:
      case 2: {  // a command word with junk arguments
        static const char* kWords[] = {"put ",           "peek ",
                                       "peek-ready",     "peek-delayed",
                                       "peek-buried",    "reserve-with-timeout ",
                                       "reserve-job ",   "delete ",
                                       "release ",       "bury ",
                                       "kick ",          "kick-job ",
                                       "touch ",         "stats-job ",
                                       "stats-tube ",    "stats",
                                       "use ",           "watch ",
                                       "ignore ",        "list-tubes-watched",
                                       "list-tube-used", "list-tubes",
                                       "pause-tube ",    "put-ex ",
                                       "delete-key ",    "peek-key ",
                                       "reserve-batch ", "clear-tube ",
                                       "quit",           ""};
        std::string s = kWords[Pick(std::size(kWords))];
        int words = static_cast<int>(Pick(4));
        for (int w = 0; w < words; ++w) {
          if (w > 0 || !s.ends_with(' ')) s += ' ';
          s += Word();
        }
        static const std::string_view kEnds[] = {"\r\n", "\r\n",   "\r\n",     "\r",      "\n",
                                                 "",     "\r\r\n", "\0\r\n"sv, "\r\n\r\n"};
        s += kEnds[Pick(std::size(kEnds))];
        return s;
      }
      case 3: {  // an over-long line, maybe with an end
        std::string s(225 + Pick(100000), 'l');
        for (size_t i = 0; i < s.size(); i += 1 + Pick(50)) s[i] = "\r\n x"[Pick(4)];
        if (Pick(2) == 0) s += "\r\n";
        return s;
      }
      case 4:  // a too-big put, with a body or only part of one
        return "put 0 0 1 " + std::to_string(65536 + Pick(200000)) + "\r\n" +
               std::string(Pick(70000), 'B');
      case 5: {  // the largest accepted body, into a tube of its own
        std::string body(65535, 'M');
        for (size_t i = 0; i < body.size(); i += 1 + Pick(1000))
          body[i] = static_cast<char>(Pick(256));
        return "use garbage-tube\r\nput 0 1000 1 65535\r\n" + body + "\r\n";
      }
      case 6:
        return std::string(1 + Pick(300), "\r\n"[Pick(2)]);
      case 7:
        return "put 0 0 1 " + std::to_string(Pick(100)) + "\r\n" + std::string(Pick(150), 'p');
      case 8:
        return std::string(1 + Pick(64), ' ');
      default:
        return kClose;
    }
  }

  static constexpr const char* kClose = "<close>";

 private:
  uint64_t Pick(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }
  std::string Word() {
    static const std::string kChars =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-+/;.$_()=,!*# \t\x7f\xff";
    std::string w(Pick(12), 'a');
    for (char& ch : w) ch = kChars[Pick(kChars.size())];
    if (Pick(20) == 0) w = std::string(150 + Pick(100), 'w');
    return w;
  }
  std::mt19937_64 rng_;
};

TEST(Fuzz, GarbageOnManyConnectionsLeavesTheServerAndItsJobsIntact) {
  constexpr int kGarbageConns = 40;
  constexpr auto kDuration = 3000ms;
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(TargetBinary(), {}, &error)) << error;

  // Jobs that no garbage can name: a tube nobody else uses, ids unknown to
  // the garbage (which never holds a digit after a command word).
  RawClient keeper(server.port());
  ASSERT_EQ(keeper.Call("use keep\r\n"), "USING keep\r\n");
  for (int i = 0; i < 10; ++i) ASSERT_EQ(keeper.Call(PutCmd("ready", 5)).substr(0, 9), "INSERTED ");
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(keeper.Call(PutCmd("delayed", 5, 100000)).substr(0, 9), "INSERTED ");
  }
  const std::string keep_stats = keeper.Call("stats-tube keep\r\n");
  ASSERT_EQ(YamlValue(keep_stats, "current-jobs-ready"), "10");

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bytes_sent{0}, connections{0};
  auto garbage = [&](int n) {
    // The garbage threads run at the lowest CPU priority. What is tested is
    // the server's fairness between its connections; at equal priority, 40
    // busy sending threads take the CPU from the server's one loop thread
    // and the clean client on a starved machine (under a quota of a tenth
    // of a core here, the clean calls timed out), and from the tests run
    // beside this one.
    setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
    Garbage g(0x5eed0000u + static_cast<uint64_t>(n));
    while (!stop.load()) {
      RawClient c(server.port(), 2000ms);
      if (!c.ok()) continue;
      connections.fetch_add(1);
      timeval tv{0, 200000};
      setsockopt(c.fd(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      for (int k = 0; k < 200 && !stop.load(); ++k) {
        std::string chunk = g.Next();
        if (chunk == Garbage::kClose) break;
        if (!c.Send(chunk)) break;
        bytes_sent.fetch_add(chunk.size());
        char sink[65536];
        while (recv(c.fd(), sink, sizeof sink, MSG_DONTWAIT) > 0) {
        }
      }
    }
  };
  std::vector<std::thread> threads;
  // Stops and joins them however the test ends (a failed assertion too).
  struct Joiner {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop.store(true);
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
  } joiner{stop, threads};
  for (int i = 0; i < kGarbageConns; ++i) threads.emplace_back(garbage, i);

  // Meanwhile a clean connection keeps getting exact answers. The loop
  // answers list-tube-used from memory: its time is the wait for the loop,
  // which garbage on other connections must not stall. The put and the
  // delete also wait for the store, behind the garbage's own jobs (64 KiB
  // bodies among them): the store's time, bounded only by the client's
  // timeout (rounds took up to 1.4 s here on an idle machine, 7 s under a
  // quota of 0.3 cores).
  RawClient clean(server.port(), 30000ms);
  ASSERT_EQ(clean.Call("use clean\r\n"), "USING clean\r\n");
  ASSERT_EQ(clean.Call("watch clean\r\n"), "WATCHING 2\r\n");
  ASSERT_EQ(clean.Call("ignore default\r\n"), "WATCHING 1\r\n");
  // At least kDuration of garbage, and at least 11 clean rounds in it (on a
  // loaded machine, or under the sanitizers, 3 s gave as few as 6): up to
  // 60 s.
  auto t0 = Clock::now();
  int rounds = 0;
  int64_t slowest_loop = 0, slowest_round = 0;
  while (Clock::now() - t0 < kDuration || (rounds <= 10 && Clock::now() - t0 < 60s)) {
    auto r0 = Clock::now();
    std::string body = "round-" + std::to_string(rounds);
    std::string put = clean.Call(PutCmd(body));
    ASSERT_TRUE(put.starts_with("INSERTED ")) << put;
    std::string id = put.substr(9, put.size() - 11);
    ASSERT_EQ(clean.Call("reserve-with-timeout 0\r\n"),
              "RESERVED " + id + " " + std::to_string(body.size()) + "\r\n" + body + "\r\n");
    ASSERT_EQ(clean.Call("delete " + id + "\r\n"), "DELETED\r\n");
    auto l0 = Clock::now();
    ASSERT_EQ(clean.Call("list-tube-used\r\n"), "USING clean\r\n");
    slowest_loop = std::max(slowest_loop, MillisSince(l0));
    slowest_round = std::max(slowest_round, MillisSince(r0));
    ++rounds;
  }
  stop.store(true);
  for (auto& t : threads) t.join();

  ASSERT_TRUE(server.Alive()) << "the server died; status " << server.exit_status() << "\n"
                              << server.Log();
  EXPECT_GT(rounds, 10);
  EXPECT_LT(slowest_loop, 2000) << "an answer from memory took " << slowest_loop << " ms";
  // The kept jobs are all there, untouched.
  std::string after = keeper.Call("stats-tube keep\r\n");
  for (const char* k : {"current-jobs-ready", "current-jobs-delayed", "current-jobs-reserved",
                        "current-jobs-buried", "total-jobs", "cmd-delete"}) {
    EXPECT_EQ(YamlValue(after, k), YamlValue(keep_stats, k)) << k;
  }
  EXPECT_EQ(keeper.Call("peek-ready\r\n").substr(0, 6), "FOUND ");
  // Every garbage connection is gone; a new one works.
  std::string conns;
  for (int i = 0; i < 250; ++i) {
    conns = YamlValue(keeper.Call("stats\r\n"), "current-connections");
    if (conns == "2") break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(conns, "2");
  RawClient fresh(server.port());
  EXPECT_EQ(fresh.Call("list-tube-used\r\n"), "USING default\r\n");
  std::cerr << "fuzz: " << bytes_sent.load() << " bytes over " << connections.load()
            << " garbage connections; " << rounds << " clean rounds, slowest " << slowest_round
            << " ms, slowest answer from memory " << slowest_loop << " ms\n";
}

}  // namespace
}  // namespace delayq::testing

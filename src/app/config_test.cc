#include "app/config.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace delayq::app {
namespace {

ParseOutcome Parse(std::vector<std::string> args, std::vector<std::string> env, Config* c) {
  args.insert(args.begin(), "delayqd");
  return ParseConfig(args, env, c);
}

// ctest runs each test as a process of its own, several at once: one file
// per process, or they overwrite each other's.
std::string WriteToml(const std::string& text) {
  struct RemovedAtExit {
    std::string path =
        ::testing::TempDir() + "delayqd_config_test." + std::to_string(::getpid()) + ".toml";
    ~RemovedAtExit() { std::remove(path.c_str()); }
  };
  static const RemovedAtExit file;
  const std::string& path = file.path;
  std::ofstream(path) << text;
  return path;
}

TEST(Config, Defaults) {
  Config c;
  ParseOutcome o = Parse({}, {}, &c);
  EXPECT_TRUE(o.run);
  EXPECT_EQ(c.listen, "0.0.0.0");
  EXPECT_EQ(c.port, 11300);
  EXPECT_EQ(c.max_job_size, 65535u);
  EXPECT_EQ(c.log_level, "info");
  EXPECT_EQ(c.busy_poll_us, 200u);
  EXPECT_TRUE(c.io_uring);
}

// io_uring can be switched off from each source; the later source wins.
TEST(Config, IoUringSwitch) {
  Config a;
  ASSERT_TRUE(Parse({"--no-io-uring"}, {}, &a).run);
  EXPECT_FALSE(a.io_uring);
  Config b;
  ASSERT_TRUE(Parse({}, {"DELAYQ_IO_URING=off"}, &b).run);
  EXPECT_FALSE(b.io_uring);
  Config c;
  ASSERT_TRUE(Parse({"-c", WriteToml("io_uring = false\n")}, {"DELAYQ_IO_URING=on"}, &c).run);
  EXPECT_TRUE(c.io_uring);
  Config d;
  ASSERT_TRUE(Parse({"-c", WriteToml("io_uring = false\n")}, {}, &d).run);
  EXPECT_FALSE(d.io_uring);
  Config e;
  ParseOutcome o = Parse({}, {"DELAYQ_IO_URING=maybe"}, &e);
  EXPECT_FALSE(o.run);
  EXPECT_NE(o.text.find("DELAYQ_IO_URING"), std::string::npos) << o.text;
  Config f;
  o = Parse({"-c", WriteToml("io_uring = \"yes\"\n")}, {}, &f);
  EXPECT_FALSE(o.run);
  EXPECT_NE(o.text.find("'io_uring' must be true or false"), std::string::npos) << o.text;
}

TEST(Config, BeanstalkdShortFlags) {
  Config c;
  ASSERT_TRUE(
      Parse({"-l", "127.0.0.1", "-p", "11301", "-z", "1024", "-b", "/tmp/x", "-V"}, {}, &c).run);
  EXPECT_EQ(c.listen, "127.0.0.1");
  EXPECT_EQ(c.port, 11301);
  EXPECT_EQ(c.max_job_size, 1024u);
  EXPECT_EQ(c.data_dir, "/tmp/x");
  EXPECT_EQ(c.log_level, "debug");
}

TEST(Config, FlagsOverrideEnvironmentOverridesFile) {
  std::string path = WriteToml("port = 1000\nlisten = \"10.0.0.1\"\nmax_job_size = 77\n");
  Config c;
  ASSERT_TRUE(
      Parse({"-c", path, "--port", "3000"}, {"DELAYQ_PORT=2000", "DELAYQ_LISTEN=::1"}, &c).run);
  EXPECT_EQ(c.port, 3000);         // flag
  EXPECT_EQ(c.listen, "::1");      // environment over file
  EXPECT_EQ(c.max_job_size, 77u);  // file over default
  Config d;
  ASSERT_TRUE(Parse({}, {"DELAYQ_CONFIG=" + path}, &d).run);
  EXPECT_EQ(d.port, 1000);
}

// toml++ 3.3 reaches undefined behaviour on some non-ASCII characters where
// white space may go: such a file is refused with its line; non-ASCII in
// strings and comments is fine.
TEST(Config, NonAsciiOnlyInStringsAndComments) {
  Config c;
  ASSERT_TRUE(
      Parse({"-c", WriteToml("# caf\xc3\xa9\ndata_dir = \"/tmp/donn\xc3\xa9\x65s\"\n")}, {}, &c)
          .run);
  EXPECT_EQ(c.data_dir, "/tmp/donn\xc3\xa9\x65s");
  for (std::string text : {"\xc3\xa9port = 1\n", "port = 1\n\xcb\x95\n", "port =\xc2\xa1 1\n"}) {
    ParseOutcome o = Parse({"-c", WriteToml(text)}, {}, &c);
    EXPECT_FALSE(o.run) << text;
    EXPECT_NE(o.text.find("a non-ASCII character outside a string or a comment"), std::string::npos)
        << o.text;
  }
}

TEST(Config, ErrorsExitTwoWithAMessage) {
  Config c;
  ParseOutcome o = Parse({"--port", "70000"}, {}, &c);
  EXPECT_FALSE(o.run);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.text.find("port"), std::string::npos) << o.text;
  o = Parse({"--no-such-flag"}, {}, &c);
  EXPECT_EQ(o.exit_code, 2);
  o = Parse({}, {"DELAYQ_PORT=abc"}, &c);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.text.find("DELAYQ_PORT"), std::string::npos);
  o = Parse({"-c", WriteToml("prot = 1\n")}, {}, &c);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.text.find("unknown setting 'prot'"), std::string::npos) << o.text;
  o = Parse({"-c", WriteToml("port = \"x\"\n")}, {}, &c);
  EXPECT_NE(o.text.find("'port' must be"), std::string::npos) << o.text;
  o = Parse({"-c", WriteToml("port = = 1\n")}, {}, &c);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.text.find("line 1"), std::string::npos) << o.text;
  o = Parse({"-c", "/nonexistent/delayqd.toml"}, {}, &c);
  EXPECT_EQ(o.exit_code, 2);
  o = Parse({"--log-level", "loud"}, {}, &c);
  EXPECT_EQ(o.exit_code, 2);
}

// [schedule."name"] tables become each schedule's JSON body, its job a
// nested object and a TOML date-time an RFC 3339 string (delayqd checks
// the bodies); a 'schedule' that holds no tables is refused.
TEST(Config, ScheduleTables) {
  Config c;
  ASSERT_TRUE(Parse({"-c", WriteToml("[schedule.\"nightly-report\"]\n"
                                     "cron = \"30 2 * * *\"\n"
                                     "tz = \"Europe/Berlin\"\n"
                                     "topic = \"reports\"\n"
                                     "start = 2030-03-29T00:00:00Z\n"
                                     "[schedule.\"nightly-report\".job]\n"
                                     "body = \"build the report\"\n"
                                     "ttr_ms = 600000\n"
                                     "[schedule.heartbeat]\n"
                                     "cron = \"@every 30s\"\n"
                                     "topic = \"health\"\n"
                                     "job = { body = \"ping\" }\n")},
                    {}, &c)
                  .run);
  ASSERT_EQ(c.schedules.size(), 2u);
  std::map<std::string, rapidjson::Document> by_name;
  for (const auto& [name, json] : c.schedules) by_name[name].Parse(json.c_str());
  ASSERT_TRUE(by_name.contains("nightly-report") && by_name.contains("heartbeat"));
  const rapidjson::Document& n = by_name["nightly-report"];
  ASSERT_TRUE(n.IsObject());
  EXPECT_STREQ(n["cron"].GetString(), "30 2 * * *");
  EXPECT_STREQ(n["start"].GetString(), "2030-03-29T00:00:00Z");
  EXPECT_STREQ(n["job"]["body"].GetString(), "build the report");
  EXPECT_EQ(n["job"]["ttr_ms"].GetInt64(), 600000);
  EXPECT_STREQ(by_name["heartbeat"]["job"]["body"].GetString(), "ping");

  Config bad;
  ParseOutcome o = Parse({"-c", WriteToml("schedule = 5\n")}, {}, &bad);
  EXPECT_FALSE(o.run);
  EXPECT_NE(o.text.find("'schedule' must hold tables, [schedule.\"name\"]"), std::string::npos)
      << o.text;
}

TEST(Config, HorizonFromEverySource) {
  Config c;
  ASSERT_TRUE(Parse({}, {}, &c).run);
  EXPECT_EQ(c.horizon_ms, 300'000) << "default: five minutes";
  ASSERT_TRUE(Parse({"--horizon", "90s"}, {}, &c).run);
  EXPECT_EQ(c.horizon_ms, 90'000);
  ASSERT_TRUE(Parse({"--horizon", "off"}, {}, &c).run);
  EXPECT_EQ(c.horizon_ms, 0);
  Config d;
  ASSERT_TRUE(Parse({}, {"DELAYQ_HORIZON=1h"}, &d).run);
  EXPECT_EQ(d.horizon_ms, 3'600'000);
  Config e;
  ASSERT_TRUE(Parse({"-c", WriteToml("horizon = \"10m\"\n")}, {}, &e).run);
  EXPECT_EQ(e.horizon_ms, 600'000);
  ParseOutcome o = Parse({"--horizon", "500ms"}, {}, &c);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.text.find("at least 1s"), std::string::npos) << o.text;
  o = Parse({}, {"DELAYQ_HORIZON=soon"}, &c);
  EXPECT_NE(o.text.find("DELAYQ_HORIZON"), std::string::npos) << o.text;
  o = Parse({"-c", WriteToml("horizon = 5\n")}, {}, &c);
  EXPECT_NE(o.text.find("'horizon' must be"), std::string::npos) << o.text;
}

TEST(Config, HelpAndVersionExitZero) {
  Config c;
  ParseOutcome o = Parse({"-h"}, {}, &c);
  EXPECT_FALSE(o.run);
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_NE(o.text.find("--max-job-size"), std::string::npos);
  o = Parse({"-v"}, {}, &c);
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.text.rfind("delayqd ", 0), 0u);
}

}  // namespace
}  // namespace delayq::app

namespace delayq::app {
namespace {

TEST(Config, Backend) {
  Config c;
  EXPECT_TRUE(c.backend.empty());
  ASSERT_TRUE(Parse({"--backend", "redis://10.0.0.1:6380/2"}, {}, &c).run);
  EXPECT_EQ(c.backend, "redis://10.0.0.1:6380/2");
  Config d;
  ASSERT_TRUE(Parse({}, {"DELAYQ_BACKEND=redis-cluster://a:7000,b:7001"}, &d).run);
  EXPECT_EQ(d.backend, "redis-cluster://a:7000,b:7001");
  Config e;  // "local" names the default
  ASSERT_TRUE(Parse({"--backend", "local"}, {"DELAYQ_BACKEND=redis://x"}, &e).run);
  EXPECT_TRUE(e.backend.empty());
  Config f;
  ParseOutcome bad = Parse({"--backend", "memcached://x"}, {}, &f);
  EXPECT_FALSE(bad.run);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.text.find("redis://"), std::string::npos) << bad.text;
  Config g;
  std::string path = WriteToml("backend = \"redis://127.0.0.1:6390\"\n");
  ASSERT_TRUE(Parse({"-c", path}, {}, &g).run);
  EXPECT_EQ(g.backend, "redis://127.0.0.1:6390");
}

TEST(Config, Http) {
  Config c;
  ASSERT_TRUE(Parse({}, {}, &c).run);
  EXPECT_TRUE(c.http);
  EXPECT_EQ(c.http_port, 11380);
  Config d;
  ASSERT_TRUE(Parse({"--http-port", "8080", "--http-listen", "127.0.0.1", "--http-idle-timeout",
                     "off", "--http-max-body", "2048"},
                    {}, &d)
                  .run);
  EXPECT_EQ(d.http_port, 8080);
  EXPECT_EQ(d.http_listen, "127.0.0.1");
  EXPECT_EQ(d.http_idle_timeout_ms, 0);
  EXPECT_EQ(d.http_max_body, 2048u);
  EXPECT_EQ(d.http_header_timeout_ms, 10'000);
  EXPECT_EQ(d.http_body_timeout_ms, 60'000);
  Config t;
  ASSERT_TRUE(Parse({"--http-header-timeout", "2s", "--http-body-timeout", "off"},
                    {"DELAYQ_HTTP_HEADER_TIMEOUT=5s", "DELAYQ_HTTP_BODY_TIMEOUT=7s"}, &t)
                  .run);
  EXPECT_EQ(t.http_header_timeout_ms, 2'000);
  EXPECT_EQ(t.http_body_timeout_ms, 0);
  Config te;
  ASSERT_TRUE(Parse({}, {"DELAYQ_HTTP_BODY_TIMEOUT=7s"}, &te).run);
  EXPECT_EQ(te.http_body_timeout_ms, 7'000);
  Config tb;
  EXPECT_FALSE(Parse({}, {"DELAYQ_HTTP_HEADER_TIMEOUT=soon"}, &tb).run);
}

TEST(Config, MaxWaiting) {
  Config c;
  ASSERT_TRUE(Parse({}, {}, &c).run);
  EXPECT_EQ(c.max_waiting, 10'000u);
  Config d;
  ASSERT_TRUE(Parse({"--max-waiting", "7"}, {"DELAYQ_MAX_WAITING=5"}, &d).run);
  EXPECT_EQ(d.max_waiting, 7u);
  Config e;
  ASSERT_TRUE(Parse({}, {"DELAYQ_MAX_WAITING=0"}, &e).run);
  EXPECT_EQ(e.max_waiting, 0u);
  Config f;
  EXPECT_FALSE(Parse({"--max-waiting", "-2"}, {}, &f).run);
}

TEST(Config, MaxTopics) {
  Config c;
  ASSERT_TRUE(Parse({}, {}, &c).run);
  EXPECT_EQ(c.max_topics, 100'000u);
  Config d;
  ASSERT_TRUE(Parse({"--max-topics", "0"}, {"DELAYQ_MAX_TOPICS=5"}, &d).run);
  EXPECT_EQ(d.max_topics, 0u);
  Config e;
  ASSERT_TRUE(Parse({}, {"DELAYQ_MAX_TOPICS=5"}, &e).run);
  EXPECT_EQ(e.max_topics, 5u);
  Config f;
  EXPECT_FALSE(Parse({"--max-topics", "-1"}, {}, &f).run);
  Config g;
  EXPECT_FALSE(Parse({}, {"DELAYQ_MAX_TOPICS=many"}, &g).run);
}

TEST(Config, MaxMemory) {
  Config c;
  ASSERT_TRUE(Parse({}, {}, &c).run);
  EXPECT_EQ(c.max_memory, 0u);
  for (auto [text, bytes] :
       std::vector<std::pair<std::string, uint64_t>>{{"0", 0},
                                                     {"1048576", 1u << 20},
                                                     {"512mb", 512ull << 20},
                                                     {"2GB", 2ull << 30},
                                                     {"4096k", 4096ull << 10}}) {
    Config d;
    ASSERT_TRUE(Parse({"--max-memory", text}, {}, &d).run) << text;
    EXPECT_EQ(d.max_memory, bytes) << text;
  }
  Config e;
  ASSERT_TRUE(Parse({}, {"DELAYQ_MAX_MEMORY=3mb"}, &e).run);
  EXPECT_EQ(e.max_memory, 3ull << 20);
  for (const char* bad :
       {"lots", "12tb", "1000", "-5mb", "mb", "99999999999999999gb", "999999999999999gb"}) {
    Config f;
    EXPECT_FALSE(Parse({"--max-memory", bad}, {}, &f).run) << bad;
  }
}

}  // namespace
}  // namespace delayq::app

namespace delayq::app {
namespace {

// The limits of docs/limits.md, from every source; the later source wins.
TEST(Config, Limits) {
  Config c;
  ASSERT_TRUE(Parse({}, {}, &c).run);
  EXPECT_EQ(c.max_connections, 10'000u);
  EXPECT_EQ(c.max_reply_memory, 64u << 20);
  Config d;
  ASSERT_TRUE(Parse({"--max-connections", "0", "--max-reply-memory", "0"}, {}, &d).run);
  EXPECT_EQ(d.max_connections, 0u);
  EXPECT_EQ(d.max_reply_memory, 0u);
  Config e;
  ASSERT_TRUE(Parse({"-c", WriteToml("max_connections = 50\nmax_reply_memory = 2097152\n")},
                    {"DELAYQ_MAX_CONNECTIONS=60"}, &e)
                  .run);
  EXPECT_EQ(e.max_connections, 60u);
  EXPECT_EQ(e.max_reply_memory, 2u << 20);
  Config f;
  ASSERT_TRUE(Parse({"--max-connections", "70"},
                    {"DELAYQ_MAX_CONNECTIONS=60", "DELAYQ_MAX_REPLY_MEMORY=0"}, &f)
                  .run);
  EXPECT_EQ(f.max_connections, 70u);
  EXPECT_EQ(f.max_reply_memory, 0u);
  Config g;
  ParseOutcome o = Parse({"--max-reply-memory", "1000"}, {}, &g);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.text.find("max reply memory"), std::string::npos) << o.text;
  o = Parse({"--max-connections", "-1"}, {}, &g);
  EXPECT_EQ(o.exit_code, 2);
  o = Parse({}, {"DELAYQ_MAX_CONNECTIONS=many"}, &g);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.text.find("DELAYQ_MAX_CONNECTIONS"), std::string::npos) << o.text;
  o = Parse({}, {"DELAYQ_MAX_REPLY_MEMORY=-5"}, &g);
  EXPECT_EQ(o.exit_code, 2);
  o = Parse({"-c", WriteToml("max_connections = \"lots\"\n")}, {}, &g);
  EXPECT_NE(o.text.find("'max_connections' must be"), std::string::npos) << o.text;
  o = Parse({"-c", WriteToml("max_reply_memory = 5\n")}, {}, &g);
  EXPECT_NE(o.text.find("'max_reply_memory' must be"), std::string::npos) << o.text;
  o = Parse({"-h"}, {}, &g);
  EXPECT_NE(o.text.find("--max-connections"), std::string::npos);
  EXPECT_NE(o.text.find("--max-reply-memory"), std::string::npos);
}

}  // namespace
}  // namespace delayq::app

// GET /metrics against a real delayqd (docs/operations.md): after puts,
// reserves, deletes and a bury over both protocols, the samples show those
// counts, the jobs by state, the connections and the process; the body is
// the Prometheus text format as `promtool check metrics` reads it, with its
// content type. Then the route's access: the admin right on every topic,
// or a trusted network.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "delayq/build_options.h"
#include "delayq/token.h"
#include "server/http_client.h"
#include "server/redis_process.h"
#include "server/server_process.h"
#include "temp_dir.h"

namespace delayq::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kPromtool = "/usr/bin/promtool";

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(server_.Start(DelayqdPath(), {"--in-memory"}, &error)) << error;
    http_port_ = HttpPortOf(server_);
    ASSERT_NE(http_port_, 0) << server_.Log();
  }

  HttpResponse Call(std::string_view method, std::string_view target, std::string_view body = {}) {
    HttpClient c(http_port_);
    return c.Call(method, target, body);
  }

  ServerProcess server_;
  uint16_t http_port_ = 0;
};

// What `promtool check metrics` says of `text`: "" when it reads it
// without a complaint.
std::string PromtoolProblems(const std::string& text) {
  TempDir dir;
  const std::string file = dir.path() + "/metrics.txt";
  std::ofstream(file, std::ios::binary) << text;
  int status = -1;
  const std::string report =
      RunShell(std::string(kPromtool) + " check metrics < " + file + " 2>&1", &status);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && report.empty()) return "";
  return "promtool check metrics: status " + std::to_string(status) + "\n" + report;
}

TEST_F(MetricsTest, CountsJobsRequestsAndConnectionsAndPassesPromtool) {
  // Connections before (ServerProcess tried the port with one).
  const std::string before = Call("GET", "/metrics").body;
  const std::optional<double> bean_accepted =
      MetricValue(before, R"(delayq_connections_accepted_total{protocol="beanstalkd"})");
  ASSERT_TRUE(bean_accepted.has_value()) << before;
  // beanstalkd: 3 puts, 2 reserves, a delete and a bury: 1 ready, 1 buried.
  RawClient bean(server_.port());
  ASSERT_TRUE(bean.ok()) << bean.error();
  ASSERT_EQ(bean.Call("use t\r\n"), "USING t\r\n");
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(bean.Call("put 0 0 60 1\r\nx\r\n").rfind("INSERTED ", 0), 0u);
  ASSERT_EQ(bean.Call("watch t\r\n"), "WATCHING 2\r\n");
  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    std::string r = bean.Call("reserve\r\n");
    ASSERT_EQ(r.rfind("RESERVED ", 0), 0u) << r;
    ids.push_back(r.substr(9, r.find(' ', 9) - 9));
  }
  ASSERT_EQ(bean.Call("delete " + ids[0] + "\r\n"), "DELETED\r\n");
  ASSERT_EQ(bean.Call("bury " + ids[1] + " 0\r\n"), "BURIED\r\n");
  // HTTP: 2 ready puts and a delayed one, a reserve: 2 ready in all, 1
  // reserved, 1 delayed.
  for (const char* body :
       {R"({"body":"y"})", R"({"body":"y"})", R"({"body":"z","delay_ms":600000})"})
    ASSERT_EQ(Call("POST", "/topics/t/jobs", body).status, 201);
  HttpResponse reserved = Call("POST", "/topics/t/reserve", "{}");
  ASSERT_EQ(reserved.status, 200) << reserved.body;

  HttpResponse r = Call("GET", "/metrics");
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  // The exposition exactly, ending in one newline.
  EXPECT_EQ(r.Header("content-length"), std::to_string(r.body.size()));
  ASSERT_GE(r.body.size(), 2u);
  EXPECT_EQ(r.body.back(), '\n');
  EXPECT_NE(r.body[r.body.size() - 2], '\n');
  const std::string& m = r.body;

  EXPECT_EQ(MetricValue(m, R"(delayq_jobs{state="ready"})"), 2);
  EXPECT_EQ(MetricValue(m, R"(delayq_jobs{state="reserved"})"), 1);
  EXPECT_EQ(MetricValue(m, R"(delayq_jobs{state="delayed"})"), 1);
  EXPECT_EQ(MetricValue(m, R"(delayq_jobs{state="buried"})"), 1);
  EXPECT_GE(MetricValue(m, "delayq_topics").value_or(0), 1);

  EXPECT_EQ(MetricValue(m, R"(delayq_requests_total{protocol="beanstalkd",op="put"})"), 3);
  EXPECT_EQ(MetricValue(m, R"(delayq_requests_total{protocol="http",op="put"})"), 3);
  EXPECT_EQ(MetricValue(m, R"(delayq_requests_total{protocol="beanstalkd",op="reserve"})"), 2);
  EXPECT_EQ(MetricValue(m, R"(delayq_requests_total{protocol="http",op="reserve"})"), 1);
  EXPECT_EQ(MetricValue(m, R"(delayq_requests_total{protocol="beanstalkd",op="delete"})"), 1);
  EXPECT_EQ(MetricValue(m, R"(delayq_requests_total{protocol="beanstalkd",op="bury"})"), 1);
  EXPECT_EQ(MetricValue(m, R"(delayq_requests_total{protocol="beanstalkd",op="session"})"), 2);
  EXPECT_EQ(MetricValue(m, R"(delayq_requests_total{protocol="http",op="metrics"})"), 2);
  // An operation a protocol serves but nobody asked for shows as 0; one it
  // does not serve, not at all.
  EXPECT_EQ(MetricValue(m, R"(delayq_requests_total{protocol="http",op="finish"})"), 0);
  EXPECT_EQ(MetricValue(m, R"(delayq_requests_total{protocol="beanstalkd",op="finish"})"),
            std::nullopt);
  EXPECT_EQ(MetricValue(m, R"(delayq_requests_total{protocol="http",op="session"})"), std::nullopt);

  EXPECT_EQ(MetricValue(m, R"(delayq_connections{protocol="beanstalkd"})"), 1);
  EXPECT_GE(MetricValue(m, R"(delayq_connections{protocol="http"})").value_or(0), 1);
  EXPECT_EQ(MetricValue(m, R"(delayq_connections_accepted_total{protocol="beanstalkd"})"),
            *bean_accepted + 1);
  // The puts, the reserve and the two /metrics, each on a connection of
  // its own (HttpPortOf may have made more).
  EXPECT_GE(MetricValue(m, R"(delayq_connections_accepted_total{protocol="http"})").value_or(0), 6);
  EXPECT_EQ(MetricValue(m, "delayq_waiting_reserves"), 0);

  // The version delayqd --version prints.
  int version_status = -1;
  const std::string version_text = RunShell(DelayqdPath() + " --version 2>&1", &version_status);
  ASSERT_EQ(version_status, 0) << version_text;
  std::istringstream words(version_text);
  std::string version;
  while (words >> version) {
  }  // its last word
  EXPECT_EQ(MetricValue(m, R"(delayq_build_info{version=")" + version + R"("})"), 1) << m;

  // The process.
  EXPECT_GT(MetricValue(m, "process_resident_memory_bytes").value_or(0), 1 << 20);
  EXPECT_GE(MetricValue(m, "process_virtual_memory_bytes").value_or(0),
            MetricValue(m, "process_resident_memory_bytes").value_or(1));
  EXPECT_GE(MetricValue(m, "process_cpu_seconds_total").value_or(-1), 0);
  EXPECT_GE(MetricValue(m, "process_open_fds").value_or(0), 3);
  EXPECT_GE(MetricValue(m, "process_max_fds").value_or(0),
            MetricValue(m, "process_open_fds").value_or(1));
  const double now = static_cast<double>(std::time(nullptr));
  const double started = MetricValue(m, "process_start_time_seconds").value_or(0);
  EXPECT_LE(started, now + 1);
  EXPECT_GE(started, now - 300);

  // promtool reads it without a complaint.
  if (access(kPromtool, X_OK) != 0) GTEST_SKIP() << "no " << kPromtool << " (Debian: prometheus)";
  EXPECT_EQ(PromtoolProblems(m), "") << m;
}

// A reserve that waits shows in delayq_waiting_reserves until it is answered.
TEST_F(MetricsTest, WaitingReservesAreCounted) {
  RawClient worker(server_.port());
  ASSERT_TRUE(worker.ok()) << worker.error();
  ASSERT_TRUE(worker.Send("reserve-with-timeout 30\r\n"));
  std::optional<double> waiting;
  for (auto deadline = std::chrono::steady_clock::now() + 5s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(20ms)) {
    waiting = MetricValue(Call("GET", "/metrics").body, "delayq_waiting_reserves");
    if (waiting == 1) break;
  }
  EXPECT_EQ(waiting, 1);
  RawClient producer(server_.port());
  ASSERT_EQ(producer.Call("put 0 0 60 1\r\nx\r\n").rfind("INSERTED ", 0), 0u);
  EXPECT_EQ(worker.ReadReply().rfind("RESERVED ", 0), 0u);
  EXPECT_EQ(MetricValue(Call("GET", "/metrics").body, "delayq_waiting_reserves"), 0);
}

// The engine's histograms (the local backend): a job due in 100 ms and
// reserved 300 ms after its put was late by what the timer took, then
// waited the rest; a job with one try whose TTR runs out is buried for it.
TEST_F(MetricsTest, LatenessWaitsTimeoutsAndBuriesForMaxTries) {
  ASSERT_EQ(Call("POST", "/topics/m/jobs", R"({"body":"d","delay_ms":100})").status, 201);
  std::this_thread::sleep_for(300ms);
  HttpResponse got = Call("POST", "/topics/m/reserve", "{}");
  ASSERT_EQ(got.status, 200) << got.body;
  ASSERT_NE(got.body.find("\"id\""), std::string::npos) << got.body;
  std::string m = Call("GET", "/metrics").body;
#if DELAYQ_COUNT_METRICS
  EXPECT_EQ(MetricValue(m, "delayq_job_lateness_seconds_count"), 1) << m;
  EXPECT_EQ(MetricValue(m, "delayq_job_ready_wait_seconds_count"), 1) << m;
  EXPECT_EQ(MetricValue(m, R"(delayq_job_ready_wait_seconds_bucket{le="+Inf"})"), 1) << m;
  // Late and then waiting: together the 200 ms between due and reserve.
  const double late = MetricValue(m, "delayq_job_lateness_seconds_sum").value_or(-1);
  const double waited = MetricValue(m, "delayq_job_ready_wait_seconds_sum").value_or(-1);
  EXPECT_GE(late, 0);
  EXPECT_GE(waited, 0);
  EXPECT_GE(late + waited, 0.15) << m;
#else
  EXPECT_EQ(MetricValue(m, "delayq_job_lateness_seconds_count"), std::nullopt) << m;
  EXPECT_EQ(MetricValue(m, "delayq_job_ready_wait_seconds_count"), std::nullopt) << m;
#endif
  EXPECT_EQ(MetricValue(m, "delayq_ttr_timeouts_total"), 0);
  EXPECT_EQ(MetricValue(m, "delayq_jobs_buried_max_tries_total"), 0);

  ASSERT_EQ(Call("POST", "/topics/once/jobs", R"({"body":"o","ttr_ms":1000,"max_tries":1})").status,
            201);
  ASSERT_EQ(Call("POST", "/topics/once/reserve", "{}").status, 200);
  std::optional<double> buried;
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(50ms)) {
    m = Call("GET", "/metrics").body;
    buried = MetricValue(m, "delayq_jobs_buried_max_tries_total");
    if (buried == 1) break;
  }
  EXPECT_EQ(buried, 1) << m;
  EXPECT_EQ(MetricValue(m, "delayq_ttr_timeouts_total"), 1) << m;
  EXPECT_EQ(MetricValue(m, R"(delayq_jobs{state="buried"})"), 1) << m;
  // Still what promtool reads without a complaint (histograms included).
  if (access(kPromtool, X_OK) != 0) return;
  EXPECT_EQ(PromtoolProblems(m), "") << m;
}

// HEAD /metrics: the headers of GET, no body.
TEST_F(MetricsTest, HeadHasTheContentTypeAndNoBody) {
  HttpClient c(http_port_);
  ASSERT_TRUE(c.Send(HttpRequestText("HEAD", "/metrics")));
  HttpResponse r = c.Read(10s, /*head=*/true);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_TRUE(r.body.empty());
}

// On the Redis backend the job counts are a call to Redis: the reply comes
// when it answers.
TEST(MetricsRedis, JobCountsComeFromRedis) {
  if (!RedisServerAvailable()) GTEST_SKIP() << "no redis-server";
  RedisProcess redis;
  std::string error;
  std::vector<std::string> args;
  ASSERT_TRUE(redis.StartForDelayqd(&error, &args)) << error;
  ServerProcess server;
  ASSERT_TRUE(server.Start(DelayqdPath(), args, &error)) << error;
  const uint16_t port = HttpPortOf(server);
  ASSERT_NE(port, 0) << server.Log();
  RawClient bean(server.port());
  ASSERT_EQ(bean.Call("put 0 0 60 1\r\nx\r\n").rfind("INSERTED ", 0), 0u);
  ASSERT_EQ(bean.Call("put 0 600 60 1\r\nx\r\n").rfind("INSERTED ", 0), 0u);
  HttpClient c(port);
  HttpResponse r = c.Call("GET", "/metrics");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(MetricValue(r.body, R"(delayq_jobs{state="ready"})"), 1) << r.body;
  EXPECT_EQ(MetricValue(r.body, R"(delayq_jobs{state="delayed"})"), 1) << r.body;
  EXPECT_EQ(MetricValue(r.body, R"(delayq_requests_total{protocol="beanstalkd",op="put"})"), 2);
}

// ---- jobs by topic, operations, the store, Redis ------------------------------------

// Puts over beanstalkd: `ready` ready jobs, `delayed` delayed ones and
// `buried` buried ones in `topic`.
void PutJobs(RawClient& bean, const std::string& topic, int ready, int delayed, int buried) {
  ASSERT_EQ(bean.Call("use " + topic + "\r\n"), "USING " + topic + "\r\n");
  for (int i = 0; i < ready + buried; ++i)
    ASSERT_EQ(bean.Call("put 0 0 60 1\r\nx\r\n").rfind("INSERTED ", 0), 0u);
  for (int i = 0; i < delayed; ++i)
    ASSERT_EQ(bean.Call("put 0 600 60 1\r\nx\r\n").rfind("INSERTED ", 0), 0u);
  if (buried == 0) return;
  ASSERT_EQ(bean.Call("watch " + topic + "\r\n").rfind("WATCHING ", 0), 0u);
  for (int i = 0; i < buried; ++i) {
    std::string r = bean.Call("reserve-with-timeout 0\r\n");
    ASSERT_EQ(r.rfind("RESERVED ", 0), 0u) << r;
    ASSERT_EQ(bean.Call("bury " + r.substr(9, r.find(' ', 9) - 9) + " 0\r\n"), "BURIED\r\n");
  }
  ASSERT_EQ(bean.Call("ignore " + topic + "\r\n").rfind("WATCHING ", 0), 0u);
}

std::string TopicJobsSeries(const std::string& topic, const std::string& state) {
  return "delayq_topic_jobs{topic=\"" + topic + "\",state=\"" + state + "\"}";
}
std::optional<double> TopicJobs(const std::string& m, const std::string& topic,
                                const std::string& state) {
  return MetricValue(m, TopicJobsSeries(topic, state));
}
[[maybe_unused]] std::string OperationsSeries(const std::string& op, const std::string& outcome) {
  return "delayq_operations_total{op=\"" + op + "\",outcome=\"" + outcome + "\"}";
}

// Each series of `want` has its value in the exposition `m` (nullopt: is
// absent).
void ExpectSamples(const std::string& m,
                   const std::vector<std::pair<std::string, std::optional<double>>>& want) {
  for (const auto& [series, value] : want) EXPECT_EQ(MetricValue(m, series), value) << series;
  if (::testing::Test::HasFailure()) ADD_FAILURE() << m;
}

TEST_F(MetricsTest, JobsByTopicAndState) {
  RawClient bean(server_.port());
  ASSERT_TRUE(bean.ok()) << bean.error();
  PutJobs(bean, "t1", 1, 0, 0);
  PutJobs(bean, "t2", 1, 1, 0);
  PutJobs(bean, "t3", 1, 1, 1);
  HttpResponse reserved = Call("POST", "/topics/t3/reserve", "{}");
  ASSERT_EQ(reserved.status, 200) << reserved.body;
  const std::string m = Call("GET", "/metrics").body;
  ExpectSamples(m, {{TopicJobsSeries("t1", "ready"), 1},
                    {TopicJobsSeries("t1", "delayed"), 0},
                    {TopicJobsSeries("t2", "ready"), 1},
                    {TopicJobsSeries("t2", "delayed"), 1},
                    {TopicJobsSeries("t3", "ready"), 0},
                    {TopicJobsSeries("t3", "reserved"), 1},
                    {TopicJobsSeries("t3", "delayed"), 1},
                    {TopicJobsSeries("t3", "buried"), 1},
                    {TopicJobsSeries("default", "ready"), 0}});
  // Fewer topics than --metrics-max-topics (100): none summed.
  EXPECT_EQ(TopicJobs(m, "*other*", "ready"), std::nullopt);
  if (access(kPromtool, X_OK) != 0) GTEST_SKIP() << "no " << kPromtool;
  EXPECT_EQ(PromtoolProblems(m), "") << m;
}

// --metrics-max-topics 2: the two topics with the most jobs by name, the
// rest summed under topic="*other*".
TEST(MetricsTopics, TheRestAreSummedPastMaxTopics) {
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(DelayqdPath(), {"--in-memory", "--metrics-max-topics", "2"}, &error))
      << error;
  const uint16_t port = HttpPortOf(server);
  ASSERT_NE(port, 0) << server.Log();
  RawClient bean(server.port());
  PutJobs(bean, "one", 1, 0, 0);
  PutJobs(bean, "two", 1, 1, 0);
  PutJobs(bean, "three", 2, 0, 1);
  PutJobs(bean, "four", 0, 0, 1);
  HttpClient c(port);
  const std::string m = c.Call("GET", "/metrics").body;
  ExpectSamples(m, {{TopicJobsSeries("three", "ready"), 2},
                    {TopicJobsSeries("three", "buried"), 1},
                    {TopicJobsSeries("two", "ready"), 1},
                    {TopicJobsSeries("two", "delayed"), 1},
                    {TopicJobsSeries("one", "ready"), std::nullopt},
                    {TopicJobsSeries("four", "buried"), std::nullopt},
                    {TopicJobsSeries("default", "ready"), std::nullopt},
                    // one, four and default
                    {TopicJobsSeries("*other*", "ready"), 1},
                    {TopicJobsSeries("*other*", "buried"), 1},
                    {TopicJobsSeries("*other*", "delayed"), 0},
                    {TopicJobsSeries("*other*", "reserved"), 0}});
  if (access(kPromtool, X_OK) != 0) GTEST_SKIP() << "no " << kPromtool;
  EXPECT_EQ(PromtoolProblems(m), "") << m;
}

// Operations that worked and failed, over both protocols, by outcome.
TEST_F(MetricsTest, OperationsByOutcome) {
  RawClient bean(server_.port());
  ASSERT_TRUE(bean.ok()) << bean.error();
  ASSERT_EQ(bean.Call("use o\r\n"), "USING o\r\n");
  ASSERT_EQ(bean.Call("watch o\r\n"), "WATCHING 2\r\n");
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(bean.Call("put 0 0 60 1\r\nx\r\n").rfind("INSERTED ", 0), 0u);
  std::string r = bean.Call("reserve\r\n");
  ASSERT_EQ(r.rfind("RESERVED ", 0), 0u) << r;
  const std::string id = r.substr(9, r.find(' ', 9) - 9);
  ASSERT_EQ(bean.Call("touch " + id + "\r\n"), "TOUCHED\r\n");
  ASSERT_EQ(bean.Call("release " + id + " 0 0\r\n"), "RELEASED\r\n");
  ASSERT_EQ(bean.Call("delete 999999\r\n"), "NOT_FOUND\r\n");
  ASSERT_EQ(bean.Call("release 999999 0 0\r\n"), "NOT_FOUND\r\n");
  ASSERT_EQ(bean.Call("kick 5\r\n"), "KICKED 0\r\n");
  EXPECT_EQ(Call("DELETE", "/jobs/999998").status, 404);
  // A finish over HTTP with a lease that does not hold the job (its own,
  // one character changed).
  HttpResponse got = Call("POST", "/topics/o/reserve", "{}");
  ASSERT_EQ(got.status, 200) << got.body;
  rapidjson::Document d;
  d.Parse(got.body.c_str());
  ASSERT_TRUE(d.IsObject() && d["jobs"].IsArray() && d["jobs"].Size() == 1) << got.body;
  const rapidjson::Value& job = d["jobs"][0];
  const std::string job_id =
      job["id"].IsString() ? job["id"].GetString() : std::to_string(job["id"].GetUint64());
  std::string lease = job["lease"].GetString();
  ASSERT_FALSE(lease.empty());
  lease.back() = lease.back() == 'a' ? 'b' : 'a';
  HttpResponse stale = Call("POST", "/jobs/" + job_id + "/finish", R"({"lease":")" + lease + "\"}");
  EXPECT_EQ(stale.status, 409) << stale.body;
  // The other job: reserved, deleted; then none is left to reserve.
  r = bean.Call("reserve-with-timeout 0\r\n");
  ASSERT_EQ(r.rfind("RESERVED ", 0), 0u) << r;
  ASSERT_EQ(bean.Call("delete " + r.substr(9, r.find(' ', 9) - 9) + "\r\n"), "DELETED\r\n");
  ASSERT_EQ(bean.Call("reserve-with-timeout 0\r\n"), "TIMED_OUT\r\n");

  const std::string m = Call("GET", "/metrics").body;
#if DELAYQ_COUNT_METRICS
  ExpectSamples(m, {{OperationsSeries("put", "ok"), 2},
                    {OperationsSeries("reserve", "ok"), 3},
                    {OperationsSeries("reserve", "timed_out"), 1},
                    {OperationsSeries("touch", "ok"), 1},
                    {OperationsSeries("release", "ok"), 1},
                    {OperationsSeries("release", "not_found"), 1},
                    {OperationsSeries("delete", "ok"), 1},
                    {OperationsSeries("delete", "not_found"), 2},
                    {OperationsSeries("kick", "ok"), 1},
                    {OperationsSeries("finish", "lease_lost"), 1},
                    {OperationsSeries("finish", "ok"), 0},
                    {OperationsSeries("bury", "ok"), 0},  // every pair from the start
                    {OperationsSeries("timeout", "ok"), 0}});
#else
  // Built without counting: the family is not there.
  EXPECT_EQ(m.find("delayq_operations_total"), std::string::npos) << m;
  EXPECT_EQ(m.find("delayq_job_lateness_seconds"), std::string::npos) << m;
#endif
  if (access(kPromtool, X_OK) != 0) GTEST_SKIP() << "no " << kPromtool;
  EXPECT_EQ(PromtoolProblems(m), "") << m;
}

// The store's metrics, with a store on disk under --fsync always: healthy,
// files on disk, a sync for every write; a job due beyond the horizon is
// on disk only.
TEST(MetricsStore, SyncsDiskBytesColdJobsAndHealth) {
  TempDir dir;
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(
      DelayqdPath(), {"--data-dir", dir.path() + "/data", "--fsync", "always", "--horizon", "1s"},
      &error))
      << error;
  const uint16_t port = HttpPortOf(server);
  ASSERT_NE(port, 0) << server.Log();
  auto scrape = [&] {
    HttpClient c(port);
    return c.Call("GET", "/metrics").body;
  };
  const std::string before = scrape();
  EXPECT_EQ(MetricValue(before, "delayq_store_healthy"), 1) << before;
  EXPECT_EQ(MetricValue(before, "delayq_backend_healthy"), 1);
  EXPECT_EQ(MetricValue(before, "delayq_store_write_errors_total"), 0);
  EXPECT_GT(MetricValue(before, "delayq_store_disk_bytes").value_or(0), 0);
  const double syncs = MetricValue(before, "delayq_store_sync_duration_seconds_count").value_or(-1);
  ASSERT_GE(syncs, 0) << before;
  EXPECT_EQ(MetricValue(before, "delayq_store_cold_jobs"), 0);
  EXPECT_EQ(MetricValue(before, "delayq_redis_connected"), std::nullopt);

  RawClient bean(server.port());
  for (int i = 0; i < 3; ++i)  // each acknowledged once synced: a write each
    ASSERT_EQ(bean.Call("put 0 0 60 1\r\nx\r\n").rfind("INSERTED ", 0), 0u);
  ASSERT_EQ(bean.Call("put 0 3600 60 1\r\nx\r\n").rfind("INSERTED ", 0), 0u);
  std::string m;
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(50ms)) {
    m = scrape();
    if (MetricValue(m, "delayq_store_cold_jobs") == 1) break;
  }
  EXPECT_EQ(MetricValue(m, "delayq_store_cold_jobs"), 1) << m;
  EXPECT_GE(MetricValue(m, "delayq_store_sync_duration_seconds_count").value_or(0), syncs + 4) << m;
  EXPECT_GT(MetricValue(m, "delayq_store_sync_duration_seconds_sum").value_or(0), 0);
  EXPECT_EQ(MetricValue(m, "delayq_store_healthy"), 1);
  if (access(kPromtool, X_OK) != 0) GTEST_SKIP() << "no " << kPromtool;
  EXPECT_EQ(PromtoolProblems(m), "") << m;
}

// Redis: the calls grow and are timed, the connection is up; killed, it is
// down (and the scrape still answers); started again, one more reconnect.
TEST(MetricsRedis, CallsConnectionAndReconnects) {
  if (!RedisServerAvailable()) GTEST_SKIP() << "no redis-server";
  if (AgainstRedisTls()) GTEST_SKIP() << "restarts a plain redis-server";
  RedisProcess redis;
  std::string error;
  ASSERT_TRUE(redis.Start(&error)) << error;
  ServerProcess server;
  ASSERT_TRUE(server.Start(DelayqdPath(), {"--backend", redis.url()}, &error)) << error;
  const uint16_t port = HttpPortOf(server);
  ASSERT_NE(port, 0) << server.Log();
  auto scrape = [&] {
    HttpClient c(port);
    HttpResponse r = c.Call("GET", "/metrics");
    EXPECT_EQ(r.status, 200) << r.body;
    return r.body;
  };
  const std::string first = scrape();
  EXPECT_EQ(MetricValue(first, "delayq_redis_connected"), 1) << first;
  EXPECT_EQ(MetricValue(first, "delayq_backend_healthy"), 1);
  EXPECT_EQ(MetricValue(first, "delayq_redis_reconnects_total"), 0);
  EXPECT_EQ(MetricValue(first, "delayq_store_healthy"), std::nullopt);
  const double calls = MetricValue(first, "delayq_redis_calls_total").value_or(0);
  EXPECT_GT(calls, 0);
  RawClient bean(server.port());
  PutJobs(bean, "r1", 2, 1, 0);
  PutJobs(bean, "r2", 1, 0, 0);
  const std::string m = scrape();
  EXPECT_GE(MetricValue(m, "delayq_redis_calls_total").value_or(0), calls + 3) << m;
  EXPECT_GE(MetricValue(m, "delayq_redis_call_duration_seconds_count").value_or(0), calls + 3);
  EXPECT_EQ(TopicJobs(m, "r1", "ready"), 2) << m;
  EXPECT_EQ(TopicJobs(m, "r1", "delayed"), 1);
  EXPECT_EQ(TopicJobs(m, "r2", "ready"), 1);
#if DELAYQ_COUNT_METRICS
  EXPECT_EQ(MetricValue(m, OperationsSeries("put", "ok")), 4);
#endif
  if (access(kPromtool, X_OK) == 0) EXPECT_EQ(PromtoolProblems(m), "") << m;

  redis.Kill();
  std::string down;
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(50ms)) {
    down = scrape();
    if (MetricValue(down, "delayq_redis_connected") == 0) break;
  }
  EXPECT_EQ(MetricValue(down, "delayq_redis_connected"), 0) << down;
  EXPECT_EQ(MetricValue(down, "delayq_backend_healthy"), 0);
  EXPECT_EQ(MetricValue(down, R"(delayq_jobs{state="ready"})"), std::nullopt);  // Redis can't say
  ASSERT_TRUE(redis.Start(&error)) << error;
  std::string up;
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(50ms)) {
    up = scrape();
    if (MetricValue(up, "delayq_redis_connected") == 1) break;
  }
  EXPECT_EQ(MetricValue(up, "delayq_redis_connected"), 1) << up;
  EXPECT_GE(MetricValue(up, "delayq_redis_reconnects_total").value_or(0), 1) << up;
  if (access(kPromtool, X_OK) == 0) EXPECT_EQ(PromtoolProblems(down), "") << down;
}

// GET /topics?stats=true: every topic with its figures, as GET
// /topics/{topic} gives them; without it, the names.
TEST_F(MetricsTest, TopicsWithStats) {
  RawClient bean(server_.port());
  PutJobs(bean, "s1", 2, 1, 1);
  PutJobs(bean, "s2", 1, 0, 0);
  ASSERT_EQ(Call("POST", "/topics/s2/pause", R"({"delay_ms":60000})").status, 200);
  HttpResponse r = Call("GET", "/topics?stats=true");
  ASSERT_EQ(r.status, 200) << r.body;
  rapidjson::Document d;
  d.Parse(r.body.c_str());
  ASSERT_TRUE(d.IsObject() && d.HasMember("topics") && d["topics"].IsArray()) << r.body;
  std::vector<std::string> names;
  for (const auto& t : d["topics"].GetArray()) {
    names.emplace_back(t["name"].GetString());
    // The same object GET /topics/{topic} answers (but for the time a
    // pause has left, which went on meanwhile).
    HttpResponse one = Call("GET", "/topics/" + names.back());
    rapidjson::Document o;
    o.Parse(one.body.c_str());
    ASSERT_TRUE(o.IsObject()) << one.body;
    EXPECT_EQ(t.MemberCount(), o.MemberCount()) << r.body << "\n" << one.body;
    const rapidjson::Value& shown = o;  // const: clang finds the mutable iterators' != ambiguous
    for (const auto& member : shown.GetObject()) {
      const std::string field = member.name.GetString();
      ASSERT_TRUE(t.HasMember(field.c_str())) << field;
      if (field != "pause_time_left_ms")
        EXPECT_TRUE(t[field.c_str()] == member.value) << field << "\n"
                                                      << r.body << "\n"
                                                      << one.body;
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"default", "s1", "s2"})) << r.body;
  const auto& s1 = d["topics"][1];
  EXPECT_EQ(s1["jobs"]["ready"].GetUint64(), 2u);
  EXPECT_EQ(s1["jobs"]["delayed"].GetUint64(), 1u);
  EXPECT_EQ(s1["jobs"]["buried"].GetUint64(), 1u);
  EXPECT_EQ(s1["total_jobs"].GetUint64(), 4u);
  EXPECT_FALSE(s1["paused"].GetBool());
  EXPECT_TRUE(d["topics"][2]["paused"].GetBool());
  EXPECT_GT(d["topics"][2]["pause_time_left_ms"].GetInt64(), 0);
  EXPECT_EQ(Call("GET", "/topics").body, "{\"topics\":[\"default\",\"s1\",\"s2\"]}\n");
  EXPECT_EQ(Call("GET", "/topics?stats=false").body, Call("GET", "/topics").body);
  HttpResponse bad = Call("GET", "/topics?stats=maybe");
  EXPECT_EQ(bad.status, 400) << bad.body;
}

// ---- access -------------------------------------------------------------------------

constexpr const char* kMetricsAdmin = "dq_metrics-admin-secret";    // *: admin
constexpr const char* kMetricsWorker = "dq_metrics-worker-secret";  // *: produce, consume
constexpr const char* kMetricsScoped = "dq_metrics-scoped-secret";  // orders.*: admin

std::string MetricsToken(const char* name, const char* secret, const char* topics,
                         const char* rights) {
  return std::string("[[token]]\nname = \"") + name + "\"\nsha256 = \"" +
         DigestHex(Sha256(secret)) + "\"\ntopics = " + topics + "\nrights = " + rights + "\n\n";
}

TEST(MetricsAccess, NeedsTheAdminRightOnEveryTopicOutsideTheTrustedNetworks) {
  TempDir dir;
  const std::string file = dir.path() + "/tokens.toml";
  std::ofstream(file) << MetricsToken("admin", kMetricsAdmin, R"(["*"])", R"(["admin"])")
                      << MetricsToken("worker", kMetricsWorker, R"(["*"])",
                                      R"(["produce", "consume"])")
                      << MetricsToken("scoped", kMetricsScoped, R"(["orders.*"])", R"(["admin"])");
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(
      DelayqdPath(), {"--in-memory", "--auth-file", file, "--trusted-networks", "none"}, &error))
      << error;
  const uint16_t port = HttpPortOf(server);
  ASSERT_NE(port, 0) << server.Log();
  auto get = [&](std::string_view secret) {
    HttpClient c(port);
    return c.Call(
        "GET", "/metrics", {},
        secret.empty() ? std::string() : "Authorization: Bearer " + std::string(secret) + "\r\n");
  };
  HttpResponse none = get("");
  EXPECT_EQ(none.status, 401) << none.body;
  EXPECT_EQ(none.Header("www-authenticate"), R"(Bearer realm="delayq")");
  EXPECT_EQ(get(kMetricsWorker).status, 403);
  EXPECT_EQ(get(kMetricsScoped).status, 403);  // server-wide: admin on every topic
  HttpResponse admin = get(kMetricsAdmin);
  EXPECT_EQ(admin.status, 200) << admin.body;
  EXPECT_EQ(admin.Header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_TRUE(MetricValue(admin.body, "delayq_waiting_reserves").has_value()) << admin.body;
}

// GET /topics?stats=true shows a token only the topics it has a right on.
TEST(MetricsAccess, TopicsWithStatsShowsOnlyTheCallersTopics) {
  TempDir dir;
  const std::string file = dir.path() + "/tokens.toml";
  std::ofstream(file) << MetricsToken("admin", kMetricsAdmin, R"(["*"])", R"(["admin", "produce"])")
                      << MetricsToken("scoped", kMetricsScoped, R"(["orders.*"])",
                                      R"(["consume"])");
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(
      DelayqdPath(), {"--in-memory", "--auth-file", file, "--trusted-networks", "none"}, &error))
      << error;
  const uint16_t port = HttpPortOf(server);
  ASSERT_NE(port, 0) << server.Log();
  auto call = [&](std::string_view method, std::string_view target, std::string_view secret,
                  std::string_view body = {}) {
    HttpClient c(port);
    return c.Call(method, target, body, "Authorization: Bearer " + std::string(secret) + "\r\n");
  };
  for (const char* t : {"orders.eu", "payments", "orders.us"})
    ASSERT_EQ(call("POST", std::string("/topics/") + t + "/jobs", kMetricsAdmin, R"({"body":"x"})")
                  .status,
              201);
  auto names = [](const std::string& body) {
    rapidjson::Document d;
    d.Parse(body.c_str());
    std::vector<std::string> out;
    if (!d.IsObject() || !d.HasMember("topics")) return out;
    for (const auto& t : d["topics"].GetArray()) out.emplace_back(t["name"].GetString());
    return out;
  };
  HttpResponse scoped = call("GET", "/topics?stats=true", kMetricsScoped);
  ASSERT_EQ(scoped.status, 200) << scoped.body;
  EXPECT_EQ(names(scoped.body), (std::vector<std::string>{"orders.eu", "orders.us"}));
  HttpResponse admin = call("GET", "/topics?stats=true", kMetricsAdmin);
  ASSERT_EQ(admin.status, 200) << admin.body;
  EXPECT_EQ(names(admin.body),
            (std::vector<std::string>{"default", "orders.eu", "payments", "orders.us"}));
  HttpClient none(port);
  EXPECT_EQ(none.Call("GET", "/topics?stats=true").status, 401);
}

}  // namespace
}  // namespace delayq::testing

// What an operator's tools read of delayqd (docs/operations.md): a real
// Prometheus scrapes a real delayqd and a query through its HTTP API
// returns the count of jobs put; the Grafana dashboard of
// docs/grafana/delayq-dashboard.json asks only for metrics, and labels of
// them, that delayqd exports (a local delayqd with a store, and one on
// Redis).
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server/http_client.h"
#include "server/redis_process.h"
#include "server/server_process.h"
#include "temp_dir.h"

namespace delayq::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kPrometheus = "/usr/bin/prometheus";

// The series of an exposition: each sample's name, with the names of the
// labels it carries.
std::map<std::string, std::set<std::string>> ExportedSeries(const std::string& text) {
  std::map<std::string, std::set<std::string>> out;
  std::istringstream in(text);
  const std::regex label(R"(([a-zA-Z_][a-zA-Z0-9_]*)=")");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t end = line.find_first_of("{ ");
    std::set<std::string>& labels = out[line.substr(0, end)];
    if (end != std::string::npos && line[end] == '{') {
      const std::string inside = line.substr(end + 1, line.rfind('}') - end - 1);
      for (std::sregex_iterator it(inside.begin(), inside.end(), label), stop; it != stop; ++it)
        labels.insert((*it)[1]);
    }
  }
  return out;
}

std::string Scrape(uint16_t http_port) {
  HttpClient c(http_port);
  HttpResponse r = c.Call("GET", "/metrics");
  EXPECT_EQ(r.status, 200) << r.body;
  return r.body;
}

// Puts, reserves, deletes, a job due in 20 ms and a bury, so that every
// counter and histogram has seen something.
void Exercise(const ServerProcess& server) {
  RawClient bean(server.port());
  ASSERT_EQ(bean.Call("put 0 0 60 1\r\nx\r\n").rfind("INSERTED ", 0), 0u);
  std::string r = bean.Call("reserve-with-timeout 0\r\n");
  ASSERT_EQ(r.rfind("RESERVED ", 0), 0u) << r;
  ASSERT_EQ(bean.Call("bury " + r.substr(9, r.find(' ', 9) - 9) + " 0\r\n"), "BURIED\r\n");
  HttpClient c(HttpPortOf(server));
  ASSERT_EQ(c.Call("POST", "/topics/t/jobs", R"({"body":"y","delay_ms":20})").status, 201);
  std::this_thread::sleep_for(60ms);
  HttpResponse got = c.Call("POST", "/topics/t/reserve", R"({"timeout_ms":1000})");
  ASSERT_EQ(got.status, 200) << got.body;
  ASSERT_EQ(c.Call("DELETE", "/jobs/999999").status, 404);
}

// Every PromQL selector of the dashboard: metric name -> the label names
// its matchers use, from every panel target's "expr".
std::map<std::string, std::set<std::string>> DashboardSelectors(const rapidjson::Value& panels,
                                                                std::vector<std::string>* exprs) {
  std::map<std::string, std::set<std::string>> out;
  const std::regex selector(R"(\b((?:delayq|process)_[a-zA-Z0-9_]*)(\{([^}]*)\})?)");
  const std::regex matcher(R"(([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=))");
  for (const rapidjson::Value& p : panels.GetArray()) {
    if (!p.HasMember("targets")) continue;
    for (const rapidjson::Value& t : p["targets"].GetArray()) {
      const std::string expr = t["expr"].GetString();
      exprs->push_back(expr);
      for (std::sregex_iterator it(expr.begin(), expr.end(), selector), stop; it != stop; ++it) {
        std::set<std::string>& labels = out[(*it)[1]];
        const std::string inside = (*it)[3];
        for (std::sregex_iterator m(inside.begin(), inside.end(), matcher); m != stop; ++m)
          labels.insert((*m)[1]);
      }
    }
  }
  return out;
}

TEST(GrafanaDashboard, AsksOnlyForMetricsAndLabelsThatDelayqdExports) {
  std::ifstream in(std::string(DELAYQ_SOURCE_DIR) + "/docs/grafana/delayq-dashboard.json");
  ASSERT_TRUE(in) << "docs/grafana/delayq-dashboard.json";
  std::stringstream ss;
  ss << in.rdbuf();
  rapidjson::Document doc;
  ASSERT_FALSE(doc.Parse(ss.str().c_str()).HasParseError()) << "not JSON";
  ASSERT_TRUE(doc.HasMember("panels") && doc["panels"].IsArray());

  // What delayqd exports: a local one with a store, and one on Redis.
  std::map<std::string, std::set<std::string>> exported;
  auto add = [&](const std::string& text) {
    for (auto& [name, labels] : ExportedSeries(text))
      exported[name].insert(labels.begin(), labels.end());
  };
  std::string error;
  {
    ServerProcess local;
    ASSERT_TRUE(local.Start(DelayqdPath(), {"--fsync", "always"}, &error)) << error;
    Exercise(local);
    add(Scrape(HttpPortOf(local)));
  }
  if (RedisServerAvailable()) {
    RedisProcess redis;
    std::vector<std::string> args;
    ASSERT_TRUE(redis.StartForDelayqd(&error, &args)) << error;
    ServerProcess server;
    ASSERT_TRUE(server.Start(DelayqdPath(), args, &error)) << error;
    Exercise(server);
    add(Scrape(HttpPortOf(server)));
  } else {
    ADD_FAILURE() << "no redis-server: the Redis metrics cannot be checked";
  }

  std::vector<std::string> exprs;
  const auto wanted = DashboardSelectors(doc["panels"], &exprs);
  ASSERT_GE(exprs.size(), 10u);
  ASSERT_GE(wanted.size(), 10u);
  for (const auto& [name, labels] : wanted) {
    auto got = exported.find(name);
    ASSERT_NE(got, exported.end())
        << "the dashboard asks for " << name << ", which delayqd does not export";
    for (const std::string& l : labels) {
      if (l == "job" || l == "instance") continue;  // Prometheus's own, added by the scrape
      EXPECT_TRUE(got->second.contains(l)) << name << " has no label " << l;
    }
  }
}

// A process of this test's, stopped (SIGTERM, then SIGKILL) when it goes.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& log) {
    pid_ = fork();
    if (pid_ == 0) {
      FILE* out = freopen(log.c_str(), "w", stdout);
      if (out != nullptr) dup2(fileno(out), STDERR_FILENO);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~Child() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 100 && waitpid(pid_, nullptr, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(50ms);
    if (waitpid(pid_, nullptr, WNOHANG) == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  bool started() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(PrometheusScrape, AQueryThroughPrometheusReturnsTheJobsPut) {
  ASSERT_EQ(access(kPrometheus, X_OK), 0) << "no " << kPrometheus << " (Debian: prometheus)";
  std::string error;
  ServerProcess server;
  ASSERT_TRUE(server.Start(DelayqdPath(), {"--in-memory"}, &error)) << error;
  const uint16_t http = HttpPortOf(server);
  HttpClient c(http);
  for (int i = 0; i < 7; ++i)
    ASSERT_EQ(c.Call("POST", "/topics/scraped/jobs", R"({"body":"x"})").status, 201);
  ASSERT_EQ(c.Call("POST", "/topics/other/jobs", R"({"body":"x","delay_ms":600000})").status, 201);

  TempDir dir;
  const std::string config = dir.path() + "/prometheus.yml";
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                           "scrape_configs:\n  - job_name: delayq\n    static_configs:\n"
                           "      - targets: ['127.0.0.1:"
                        << http << "']\n";
  const uint16_t port = FreeLoopbackPort();
  ASSERT_NE(port, 0);
  const std::string log = dir.path() + "/prometheus.log";
  Child prometheus(
      {kPrometheus, "--config.file=" + config, "--storage.tsdb.path=" + dir.path() + "/data",
       "--web.listen-address=127.0.0.1:" + std::to_string(port), "--log.level=warn"},
      log);
  ASSERT_TRUE(prometheus.started());

  // A query through Prometheus's HTTP API, answered once it has scraped.
  auto query = [&](const std::string& promql) -> std::string {
    std::string target = "/api/v1/query?query=";
    for (unsigned char ch : promql) {
      if (isalnum(ch) || ch == '_') {
        target += static_cast<char>(ch);
      } else {
        char hex[4];
        snprintf(hex, sizeof hex, "%%%02X", ch);
        target += hex;
      }
    }
    HttpClient p(port);
    if (!p.ok()) return {};
    HttpResponse r = p.Call("GET", target);
    if (r.status != 200) return {};
    rapidjson::Document d;
    if (d.Parse(r.body.c_str()).HasParseError() || !d.HasMember("data")) return {};
    const rapidjson::Value& result = d["data"]["result"];
    if (!result.IsArray() || result.Empty()) return {};
    return result[0]["value"][1].GetString();
  };
  std::string ready, delayed, up;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    ready = query(R"(delayq_jobs{job="delayq",state="ready"})");
    delayed = query(R"(sum(delayq_jobs{job="delayq",state="delayed"}))");
    up = query(R"(up{job="delayq"})");
    if (ready == "7" && delayed == "1" && up == "1") break;
    std::this_thread::sleep_for(250ms);
  }
  EXPECT_EQ(ready, "7") << ReadAll(log);
  EXPECT_EQ(delayed, "1");
  EXPECT_EQ(up, "1");
}

}  // namespace
}  // namespace delayq::testing

// Leases, from outside (docs/http-api.md, "Reserving"; docs/engine.md,
// "Leases"): a worker whose reservation ended — its TTR ran out and the job
// went to another worker — can neither finish, release, bury nor touch the
// job, whatever it sends; and many workers whose TTRs run out on purpose
// finish every job exactly once, each by the lease of its last reservation,
// none lost. Each test runs on one delayqd (Local backend), on one delayqd
// over Redis, and on two delayqd over one Redis (the second worker talks to
// the other instance).
//
//   - Leases/StaleWorker.*       one job, two workers, every operation.
//   - Leases/ManyWorkers.*       300 jobs, 8 workers, a sixth of them late.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/http_client.h"
#include "server/redis_process.h"
#include "server/server_process.h"

namespace delayq::testing {
namespace {

using namespace std::chrono_literals;

std::string LeaseBody(const std::string& lease, const std::string& more = "") {
  return R"({"lease":")" + lease + "\"" + (more.empty() ? "" : "," + more) + "}";
}

// "local", "redis" (one delayqd over Redis), "redis2" (two).
class Leases : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string mode = GetParam();
    std::string error;
    std::vector<std::string> args = {"--in-memory"};
    if (mode != "local") {
      ASSERT_TRUE(redis_.Start(&error)) << error;
      args = {"--backend", redis_.url()};
    }
    const size_t n = mode == "redis2" ? 2 : 1;
    for (size_t i = 0; i < n; ++i) {
      auto s = std::make_unique<ServerProcess>();
      ASSERT_TRUE(s->Start(DelayqdPath(), args, &error)) << error;
      ports_.push_back(HttpPortOf(*s));
      ASSERT_NE(ports_.back(), 0) << s->Log();
      servers_.push_back(std::move(s));
    }
  }
  void TearDown() override {
    for (auto& s : servers_) {
      if (!s->Alive()) continue;
      int st = s->Stop();
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st << "\n" << s->Log();
    }
  }
  // The port of instance i (the last one when there are fewer).
  uint16_t Port(size_t i) const { return ports_[std::min(i, ports_.size() - 1)]; }
  HttpResponse Call(size_t instance, std::string_view method, std::string_view target,
                    std::string_view body = {}) {
    HttpClient c(Port(instance), 10s);
    return c.Call(method, target, body);
  }

  RedisProcess redis_;  // declared first: stopped after the servers
  std::vector<std::unique_ptr<ServerProcess>> servers_;
  std::vector<uint16_t> ports_;
};

INSTANTIATE_TEST_SUITE_P(Backends, Leases, ::testing::Values("local", "redis", "redis2"),
                         [](const auto& info) { return std::string(info.param); });

TEST_P(Leases, StaleWorkerChangesNothing) {
  auto put = Call(0, "POST", "/topics/chores/jobs", R"({"body":"job","ttr_ms":300})");
  ASSERT_EQ(put.status, 201) << put.body;
  const std::string id = std::to_string(Json(put.body)["id"].GetUint64());
  const std::string base = "/jobs/" + id;
  auto reserve = [&](size_t instance) {
    auto r = Call(instance, "POST", "/reserve", R"({"topics":["chores"],"timeout_ms":5000})");
    auto d = Json(r.body);
    EXPECT_EQ(r.status, 200) << r.body;
    if (d.HasParseError() || d["jobs"].Size() != 1) {
      ADD_FAILURE() << r.body;
      return std::string();
    }
    EXPECT_EQ(std::to_string(d["jobs"][0]["id"].GetUint64()), id);
    return std::string(d["jobs"][0]["lease"].GetString());
  };
  const std::string first = reserve(0);
  ASSERT_FALSE(first.empty());
  // The TTR runs out; the second worker (on the other instance, when there
  // are two) takes the job.
  std::this_thread::sleep_for(400ms);
  const std::string second = reserve(1);
  ASSERT_FALSE(second.empty());
  EXPECT_NE(first, second);
  auto deadline = [&] { return Json(Call(0, "GET", base).body)["deadline_ms"].GetInt64(); };
  const int64_t before = deadline();

  // The first worker, late, tries everything: each is refused, and says why.
  for (const char* op : {"finish", "release", "bury", "touch"}) {
    auto r = Call(0, "POST", base + "/" + op, LeaseBody(first));
    EXPECT_EQ(r.status, 409) << op << ": " << r.body;
    EXPECT_EQ(ErrorCode(r), "lease_lost") << op;
    EXPECT_NE(r.body.find("reserved under another lease"), std::string::npos) << r.body;
  }
  auto release = Call(0, "POST", base + "/release", LeaseBody(first, R"("delay_ms":60000)"));
  EXPECT_EQ(ErrorCode(release), "lease_lost");
  // Nothing changed: still reserved, same deadline, no release or bury.
  auto job = Json(Call(1, "GET", base).body);
  EXPECT_STREQ(job["state"].GetString(), "reserved");
  EXPECT_EQ(job["deadline_ms"].GetInt64(), before) << "the stale touch restarted the TTR";
  EXPECT_EQ(job["releases"].GetUint(), 0u);
  EXPECT_EQ(job["buries"].GetUint(), 0u);
  EXPECT_EQ(job["reserves"].GetUint(), 2u);

  // The holder's touch and finish work, from either instance.
  EXPECT_EQ(Call(0, "POST", base + "/touch", LeaseBody(second)).status, 200);
  auto fin = Call(1, "POST", base + "/finish", LeaseBody(second));
  EXPECT_EQ(fin.status, 200) << fin.body;
  EXPECT_EQ(Call(0, "GET", base).status, 404);
  // And once finished, the holder's lease holds nothing either.
  EXPECT_EQ(Call(0, "POST", base + "/finish", LeaseBody(second)).status, 404);
}

TEST_P(Leases, ManyWorkersFinishEveryJobOnceByItsLastLease) {
  constexpr int kJobs = 300, kWorkers = 8;
  {
    std::string batch = R"({"jobs":[)";
    for (int i = 0; i < kJobs; ++i)
      batch +=
          std::string(i ? "," : "") + R"({"body":")" + std::to_string(i) + R"(","ttr_ms":250})";
    batch += "]}";
    auto r = Call(0, "POST", "/topics/many/jobs", batch);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  std::mutex mu;
  // Per job: the leases of its reservations, in the order their replies came,
  // and the leases whose finish succeeded.
  std::map<uint64_t, std::vector<std::string>> reserved;
  std::map<uint64_t, std::vector<std::string>> finished;
  std::atomic<int> done{0}, stale_refused{0}, late{0}, errors{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      HttpClient client(Port(static_cast<size_t>(w)), 20s);
      int round = 0;
      const auto give_up = std::chrono::steady_clock::now() + 60s;
      while (done.load() < kJobs && std::chrono::steady_clock::now() < give_up) {
        const int count = 1 + (w + round) % 3;
        auto r = client.Call(
            "POST", "/reserve",
            R"({"topics":["many"],"timeout_ms":300,"count":)" + std::to_string(count) + "}");
        auto d = Json(r.body);
        if (r.status != 200 || d.HasParseError()) {
          errors++;
          return;
        }
        std::vector<std::pair<uint64_t, std::string>> got;
        {
          std::lock_guard<std::mutex> lock(mu);
          for (const auto& j : d["jobs"].GetArray()) {
            got.emplace_back(j["id"].GetUint64(), j["lease"].GetString());
            reserved[got.back().first].push_back(got.back().second);
          }
        }
        bool slept = false;  // the TTRs of the batch's later jobs may have run out too
        for (const auto& [id, lease] : got) {
          // One job in six is worked on too long: its TTR runs out first.
          if ((id + static_cast<uint64_t>(round)) % 6 == 0) {
            late++;
            slept = true;
            std::this_thread::sleep_for(350ms);
          }
          auto f = client.Call("POST", "/jobs/" + std::to_string(id) + "/finish", LeaseBody(lease));
          if (f.status == 200) {
            std::lock_guard<std::mutex> lock(mu);
            finished[id].push_back(lease);
            done++;
          } else if (f.status == 409 && ErrorCode(f) == "lease_lost") {
            stale_refused++;
          } else if (f.status == 404 && slept) {
            stale_refused++;  // finished meanwhile by its new holder
          } else {
            errors++;
          }
        }
        ++round;
      }
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(done.load(), kJobs);
  ASSERT_EQ(finished.size(), static_cast<size_t>(kJobs)) << "jobs lost or never finished";
  for (const auto& [id, leases] : finished) {
    ASSERT_EQ(leases.size(), 1u) << "job " << id << " finished more than once";
    // The finish that worked was made with the job's last reservation's
    // lease: no reservation came after it (the job was gone).
    ASSERT_FALSE(reserved[id].empty());
    EXPECT_EQ(leases[0], reserved[id].back()) << "job " << id << " finished by a stale lease";
  }
  EXPECT_GT(late.load(), 0);
  EXPECT_GT(stale_refused.load(), 0) << "no late finish was refused: the test tested nothing";
  // Nothing left: the topic is empty, or gone.
  auto topic = Call(0, "GET", "/topics/many");
  if (topic.status == 200) {
    auto st = Json(topic.body);
    EXPECT_EQ(st["jobs"]["ready"].GetUint64() + st["jobs"]["reserved"].GetUint64() +
                  st["jobs"]["delayed"].GetUint64() + st["jobs"]["buried"].GetUint64(),
              0u)
        << topic.body;
  } else {
    EXPECT_EQ(topic.status, 404) << topic.body;
  }
  std::printf("[ leases ] %s: %d jobs, %d late, %d stale finishes refused\n", GetParam(), kJobs,
              late.load(), stale_refused.load());
}

}  // namespace
}  // namespace delayq::testing

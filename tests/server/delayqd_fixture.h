// The fixture of the black-box tests that speak to one delayqd over HTTP
// (http_test.cc, push_test.cc, hostile_test.cc, schedule_config_test.cc):
// it starts build/delayqd, finds its HTTP port, calls it, and at the end
// of the test stops it and expects a clean exit (a crash or a hang at
// SIGTERM fails the test that caused it).
//
// The run's environment picks the backend and the transport, as
// RedisProcess::StartForDelayqd and OverTls read it: with
// DELAYQ_TEST_AGAINST=redis (or rediss) each test gets a redis-server of
// its own; with DELAYQ_TEST_TLS=1 delayqd serves TLS and the clients speak
// it.
//
// Thread: the test's.
#ifndef DELAYQ_TESTS_SERVER_DELAYQD_FIXTURE_H_
#define DELAYQ_TESTS_SERVER_DELAYQD_FIXTURE_H_

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_client.h"
#include "server/redis_process.h"
#include "server/server_process.h"

namespace delayq::testing {

class DelayqdFixture : public ::testing::Test {
 protected:
  // Starts delayqd with `args` (and the backend and TLS flags the run asks
  // for) and reads its HTTP port. Fails the test (fatally) when it does not
  // come up. May start it again after server_.Stop().
  void StartServer(std::vector<std::string> args) {
    std::string error;
    if (AgainstRedis() || AgainstRedisTls())
      ASSERT_TRUE(redis_.StartForDelayqd(&error, &args)) << error;
    if (OverTls()) {
      std::vector<std::string> tls = TlsServerArgs(&error);
      ASSERT_FALSE(tls.empty()) << error;
      args.insert(args.end(), tls.begin(), tls.end());
    }
    // A restart appends to the log of the runs before: this run's port
    // is in the lines after them.
    const size_t earlier_runs = server_.Log().size();
    ASSERT_TRUE(server_.Start(DelayqdPath(), args, &error)) << error;
    http_port_ = HttpPortOf(server_, std::chrono::milliseconds(10'000), earlier_runs);
    ASSERT_NE(http_port_, 0) << server_.Log();
  }

  void TearDown() override {
    if (server_.Alive()) {
      int st = server_.Stop();
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st << "\n"
                                                         << server_.Log();
    }
  }

  // One request on a connection of its own; `extra`: header lines
  // ("Name: v\r\n").
  HttpResponse Call(std::string_view method, std::string_view target, std::string_view body = {},
                    std::string_view extra = {}) {
    HttpClient c(http_port_, call_timeout_);
    return c.Call(method, target, body, extra);
  }

  // Puts a job (`json`: the body of POST /topics/{topic}/jobs); its id, or
  // 0 with the test failed.
  uint64_t Put(std::string_view topic, std::string_view json) {
    auto r = Call("POST", "/topics/" + std::string(topic) + "/jobs", json);
    auto d = Json(r.body);
    if (!r.ok || r.status / 100 != 2 || d.HasParseError() || !d.HasMember("id")) {
      ADD_FAILURE() << "put failed: " << r.status << " " << r.body << r.error;
      return 0;
    }
    return d["id"].GetUint64();
  }

  RedisProcess redis_;  // declared first: stopped after server_
  ServerProcess server_;
  uint16_t http_port_ = 0;
  // How long Call waits for each reply.
  std::chrono::milliseconds call_timeout_{10'000};
};

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_SERVER_DELAYQD_FIXTURE_H_

// Black-box tests of push topics (docs/push.md): a real build/delayqd, a
// real HTTP receiver on loopback (http_receiver.h) that answers as each
// test says, and the HTTP API to set targets and put jobs.
//
// Suites:
//  - Push.*         what a push carries (headers, Standard Webhooks
//                   signature), what each answer does to its job (2xx,
//                   500, 429 with Retry-After, 410, a slow answer, none),
//                   the retry times (never early; lateness printed and held
//                   to 10 ms outside the sanitizers), workers kept off push
//                   topics, private targets refused without the flag, the
//                   target's routes.
//  - PushDurable.*  a delayqd killed with SIGKILL mid-request loses no job;
//                   a buried job's last answer is kept across a restart.
//  - PushConfig.*   targets from the config file's [push."topic"] tables.
//  - PushRedis.*    two delayqd on one Redis: each try of each job is made
//                   once, by one of them; the last answer kept there too.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "delivery/webhook.h"
#include "sanitized.h"
#include "server/delayqd_fixture.h"
#include "server/http_client.h"
#include "server/http_receiver.h"
#include "server/redis_process.h"
#include "server/server_process.h"
#include "temp_dir.h"

namespace delayq::testing {
namespace {

using namespace std::chrono_literals;
using Answer = HttpReceiver::Answer;
using Request = HttpReceiver::Request;

// 24 bytes, base64: a secret as Standard Webhooks spells it.
constexpr const char* kPushSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

Answer PushAnswer(int status, std::vector<std::string> headers = {}) {
  Answer a;
  a.status = status;
  a.headers = std::move(headers);
  a.body = "answer " + std::to_string(status);
  return a;
}

// An answer of 500 whose body is longer than what a job keeps of it.
const std::string kLongAnswer = "overloaded: " + std::string(400, 'x');

// Puts a job to `topic` (its target answering kLongAnswer with 500, max
// tries 2) on the delayqd at `port`, waits until it is buried and checks
// that GET /jobs/{id} shows the last try's status and first 256 bytes.
// Returns the job's id (0 on a failure).
uint64_t BuryWithAnAnswer(uint16_t port, const std::string& topic, const std::string& url) {
  HttpClient c(port);
  auto t = c.Call("PUT", "/topics/" + topic + "/push",
                  R"({"url":")" + url + R"(","secret":")" + kPushSecret +
                      R"(","backoff":"50ms","max_tries":2})");
  EXPECT_TRUE(t.status == 200 || t.status == 201) << t.body;
  auto put = c.Call("POST", "/topics/" + topic + "/jobs", R"({"body":"b"})");
  auto d = Json(put.body);
  if (put.status != 201 || d.HasParseError() || !d.HasMember("id")) {
    ADD_FAILURE() << put.status << " " << put.body;
    return 0;
  }
  const uint64_t id = d["id"].GetUint64();
  std::string state;
  for (auto end = std::chrono::steady_clock::now() + 10s;
       state != "buried" && std::chrono::steady_clock::now() < end;
       std::this_thread::sleep_for(5ms)) {
    auto j = Json(c.Call("GET", "/jobs/" + std::to_string(id)).body);
    if (!j.HasParseError() && j.HasMember("state")) state = j["state"].GetString();
  }
  EXPECT_EQ(state, "buried");
  auto got = c.Call("GET", "/jobs/" + std::to_string(id));
  auto j = Json(got.body);
  EXPECT_TRUE(!j.HasParseError() && j.HasMember("last_answer")) << got.body;
  if (j.HasParseError() || !j.HasMember("last_answer")) return 0;
  EXPECT_EQ(j["last_answer"]["status"].GetUint(), 500u) << got.body;
  EXPECT_EQ(std::string(j["last_answer"]["text"].GetString()), kLongAnswer.substr(0, 256));
  EXPECT_EQ(j["reserves"].GetUint(), 2u) << got.body;
  return id;
}

double GapMs(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// The tries of one job, each after the one before by its delay: never
// early, and late by little (the lateness is printed; held to 10 ms outside
// the sanitizers, whose delayqd is several times slower, when `held`).
void ExpectTriesSpacedBy(const std::vector<Request>& reqs, const std::vector<double>& delays,
                         const char* backoff, bool held = true) {
  ASSERT_GT(reqs.size(), delays.size());
  for (size_t i = 1; i <= delays.size(); ++i) {
    EXPECT_EQ(reqs[i].headers.at("delayq-attempt"), std::to_string(i + 1));
    EXPECT_EQ(reqs[i].headers.at("webhook-id"), reqs[0].headers.at("webhook-id"));
    const double late = GapMs(reqs[i].at - reqs[i - 1].at) - delays[i - 1];
    std::printf("%s, try %zu: %.3f ms after its due time\n", backoff, i + 1, late);
    EXPECT_GE(late, 0) << "try " << i + 1 << " came early";
#ifndef DELAYQ_SANITIZED
    if (held) EXPECT_LE(late, 10) << "try " << i + 1;
#endif
  }
  (void)held;  // (unused under the sanitizers)
}

class PushFixture : public DelayqdFixture {
 protected:
  // Sets the topic's target: `url` and `more` JSON fields ("" or ",...").
  void Target(const std::string& topic, const std::string& url, const std::string& more = "") {
    auto r = Call("PUT", "/topics/" + topic + "/push",
                  R"({"url":")" + url + R"(","secret":")" + kPushSecret + "\"" + more + "}");
    ASSERT_TRUE(r.status == 200 || r.status == 201) << r.status << " " << r.body;
  }
  // The job's state ("ready", "buried", ...), or "gone" once it is finished.
  std::string StateOf(uint64_t id) {
    auto r = Call("GET", "/jobs/" + std::to_string(id));
    if (r.status == 404) return "gone";
    auto d = Json(r.body);
    return d.HasParseError() || !d.HasMember("state") ? r.body : d["state"].GetString();
  }
  // Waits until the job is in `state` (or 10 s passed): the last seen.
  std::string WaitState(uint64_t id, const std::string& state) {
    std::string seen;
    for (auto end = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(5ms))
      if ((seen = StateOf(id)) == state) break;
    return seen;
  }
};

class Push : public PushFixture {
 protected:
  void SetUp() override { StartServer({"--in-memory", "--push-allow-private"}); }
};

TEST_F(Push, APushCarriesTheBodyTheJobsHeadersAndAStandardWebhooksSignature) {
  HttpReceiver rx([](const Request&) { return PushAnswer(204); });
  Target("orders", rx.url("/hooks/orders?x=1"), R"(,"headers":{"Authorization":"Bearer t0k"})");
  const auto before = std::chrono::system_clock::now();
  const uint64_t id = Put("orders", R"({"body":"close order 42","key":"order-42"})");
  ASSERT_EQ(rx.WaitFor(1, 10s), 1u);
  const Request got = rx.requests()[0];
  EXPECT_EQ(got.method, "POST");
  EXPECT_EQ(got.target, "/hooks/orders?x=1");
  EXPECT_EQ(got.body, "close order 42");
  EXPECT_EQ(got.headers.at("authorization"), "Bearer t0k");
  EXPECT_EQ(got.headers.at("content-type"), "application/octet-stream");
  EXPECT_EQ(got.headers.at("delayq-job-id"), std::to_string(id));
  EXPECT_EQ(got.headers.at("delayq-topic"), "orders");
  EXPECT_EQ(got.headers.at("delayq-key"), "order-42");
  EXPECT_EQ(got.headers.at("delayq-attempt"), "1");
  EXPECT_FALSE(got.headers.at("delayq-due").empty());
  EXPECT_EQ(got.headers.at("webhook-id"), "job_" + std::to_string(id));
  const int64_t ts = std::stoll(got.headers.at("webhook-timestamp"));
  const int64_t then =
      std::chrono::duration_cast<std::chrono::seconds>(before.time_since_epoch()).count();
  EXPECT_GE(ts, then);
  EXPECT_LE(ts, then + 10);
  auto key = delivery::WebhookKey(kPushSecret);
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(got.headers.at("webhook-signature"),
            delivery::WebhookSignature(*key, got.headers.at("webhook-id"), ts, got.body));
  EXPECT_EQ(WaitState(id, "gone"), "gone");
}

// A failed try comes back on the target's back-off: never early, and
// late by little (the lateness is printed; held to 10 ms outside the
// sanitizers, whose delayqd is several times slower).
TEST_F(Push, FailedTriesAreRetriedOnTheBackoffNeverEarly) {
  std::atomic<int> n{0};
  HttpReceiver rx([&](const Request&) { return PushAnswer(++n < 4 ? 500 : 200); });
  Target("retry", rx.url(), R"(,"backoff":"200ms,300ms,400ms")");
  const uint64_t id = Put("retry", R"({"body":"b"})");
  ASSERT_EQ(rx.WaitFor(4, 10s), 4u);
  ExpectTriesSpacedBy(rx.requests(), {200, 300, 400}, "target's back-off");
  EXPECT_EQ(WaitState(id, "gone"), "gone");
}

TEST_F(Push, AJobIsBuriedAfterItsMaxTriesAndA410BuriesAtOnce) {
  HttpReceiver rx([](const Request& r) { return PushAnswer(r.body == "gone" ? 410 : 503); });
  Target("dead", rx.url(), R"(,"backoff":"50ms","max_tries":3)");
  const uint64_t tried = Put("dead", R"({"body":"fails"})");
  const uint64_t gone = Put("dead", R"({"body":"gone"})");
  EXPECT_EQ(WaitState(tried, "buried"), "buried");
  EXPECT_EQ(WaitState(gone, "buried"), "buried");
  std::this_thread::sleep_for(200ms);
  size_t fails = 0, gones = 0;
  for (const Request& r : rx.requests()) (r.body == "gone" ? gones : fails)++;
  EXPECT_EQ(fails, 3u);
  EXPECT_EQ(gones, 1u);
  // The job's own max_tries comes before the target's.
  const uint64_t once = Put("dead", R"({"body":"once","max_tries":1})");
  EXPECT_EQ(WaitState(once, "buried"), "buried");
  size_t onces = 0;
  for (const Request& r : rx.requests()) onces += r.body == "once";
  EXPECT_EQ(onces, 1u);
}

// A job's own back-off spaces its tries, not the target's: never early,
// and late by little.
TEST_F(Push, AJobsOwnBackoffComesBeforeTheTargets) {
  std::atomic<int> n{0};
  HttpReceiver rx([&](const Request&) { return PushAnswer(++n < 4 ? 500 : 200); });
  Target("own", rx.url(), R"(,"backoff":"20ms")");
  const uint64_t id = Put("own", R"({"body":"b","backoff":"150ms,250ms,350ms"})");
  ASSERT_EQ(rx.WaitFor(4, 10s), 4u);
  ExpectTriesSpacedBy(rx.requests(), {150, 250, 350}, "job's own back-off");
  EXPECT_EQ(WaitState(id, "gone"), "gone");
}

// A failed try's answer is kept with the job; one without an answer keeps
// status 0 and the failure's reason.
TEST_F(Push, TheLastAnswerIsKeptWithTheJob) {
  HttpReceiver rx([](const Request& r) {
    Answer a = PushAnswer(500);
    a.body = kLongAnswer;
    if (r.body == "close") a.close = true;
    return a;
  });
  BuryWithAnAnswer(http_port_, "kept", rx.url());
  Target("closed", rx.url(), R"(,"max_tries":1)");
  const uint64_t id = Put("closed", R"({"body":"close"})");
  EXPECT_EQ(WaitState(id, "buried"), "buried");
  auto got = Call("GET", "/jobs/" + std::to_string(id));
  auto j = Json(got.body);
  ASSERT_TRUE(j.HasMember("last_answer")) << got.body;
  EXPECT_EQ(j["last_answer"]["status"].GetUint(), 0u) << got.body;
  EXPECT_FALSE(std::string(j["last_answer"]["text"].GetString()).empty()) << got.body;
  // A job never tried has none.
  Call("DELETE", "/topics/closed/push");
  const uint64_t plain = Put("closed", R"({"body":"b"})");
  EXPECT_EQ(Call("GET", "/jobs/" + std::to_string(plain)).body.find("last_answer"),
            std::string::npos);
}

TEST_F(Push, A429Or503WithRetryAfterWaitsThatLong) {
  std::atomic<int> n{0};
  HttpReceiver rx([&](const Request&) {
    return ++n == 1 ? PushAnswer(429, {"Retry-After: 1"}) : PushAnswer(200);
  });
  Target("slowdown", rx.url(), R"(,"backoff":"10ms")");
  const uint64_t id = Put("slowdown", R"({"body":"b"})");
  ASSERT_EQ(rx.WaitFor(2, 10s), 2u);
  const auto reqs = rx.requests();
  const double gap = GapMs(reqs[1].at - reqs[0].at);
  std::printf("Retry-After 1: the next try %.3f ms later\n", gap);
  EXPECT_GE(gap, 1000);
  EXPECT_EQ(WaitState(id, "gone"), "gone");
}

TEST_F(Push, ATimeoutAndAClosedConnectionAreFailedTries) {
  std::atomic<int> n{0};
  HttpReceiver rx([&](const Request&) {
    Answer a = PushAnswer(200);
    const int k = ++n;
    if (k == 1) a.hang = true;   // never answers
    if (k == 2) a.delay = 2s;    // too slowly
    if (k == 3) a.close = true;  // closes without an answer
    return a;
  });
  Target("flaky", rx.url(), R"(,"backoff":"50ms","timeout_ms":300)");
  const auto start = std::chrono::steady_clock::now();
  const uint64_t id = Put("flaky", R"({"body":"b"})");
  ASSERT_EQ(rx.WaitFor(4, 15s), 4u);
  EXPECT_EQ(WaitState(id, "gone"), "gone");
  const auto reqs = rx.requests();
  EXPECT_EQ(reqs[3].headers.at("delayq-attempt"), "4");
  // Each of the first two waited out its 300 ms timeout, then its 50 ms
  // back-off (the timeout runs from the request's start, a moment before
  // the receiver has it whole: 10 ms allowed for that).
  EXPECT_GE(GapMs(reqs[1].at - reqs[0].at), 340);
  EXPECT_GE(GapMs(reqs[2].at - reqs[1].at), 340);
  EXPECT_LT(GapMs(reqs[3].at - start), 5000);
  EXPECT_NE(server_.Log().find("event=push_failed"), std::string::npos);
}

TEST_F(Push, WorkersDoNotReserveThePushTopicsJobs) {
  HttpReceiver rx([](const Request&) {
    Answer a = PushAnswer(200);
    a.delay = 300ms;
    return a;
  });
  Target("pushed", rx.url());
  auto r = Call("POST", "/topics/pushed/reserve", R"({"timeout_ms":0})");
  EXPECT_EQ(r.status, 409) << r.body;
  RawClient bean(server_.port());
  ASSERT_EQ(bean.Call("watch pushed\r\n"), "WATCHING 2\r\n");
  ASSERT_EQ(bean.Call("ignore default\r\n"), "WATCHING 1\r\n");
  ASSERT_TRUE(bean.Send("reserve-with-timeout 1\r\n"));
  const uint64_t id = Put("pushed", R"({"body":"b"})");
  EXPECT_EQ(bean.ReadReply(3s), "TIMED_OUT\r\n");
  EXPECT_EQ(rx.WaitFor(1, 5s), 1u);
  EXPECT_EQ(WaitState(id, "gone"), "gone");
  // A worker watching a push topic among others gets the others' jobs.
  RawClient mixed(server_.port());
  ASSERT_EQ(mixed.Call("watch pushed\r\n"), "WATCHING 2\r\n");
  ASSERT_EQ(mixed.Call("use default\r\n"), "USING default\r\n");
  ASSERT_EQ(mixed.Call("put 0 0 60 1\r\nx\r\n").rfind("INSERTED", 0), 0u);
  Put("pushed", R"({"body":"c"})");
  EXPECT_EQ(mixed.Call("reserve-with-timeout 1\r\n").rfind("RESERVED", 0), 0u);
  EXPECT_EQ(rx.WaitFor(2, 5s), 2u);
  // Nor by its id: a push topic's job is no worker's to reserve.
  const uint64_t later = Put("pushed", R"({"body":"d","delay_ms":60000})");
  EXPECT_EQ(mixed.Call("reserve-job " + std::to_string(later) + "\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(WaitState(later, "delayed"), "delayed");
}

TEST_F(Push, TheTargetIsShownWithoutItsSecretAndDeletedToEndPushing) {
  HttpReceiver rx([](const Request&) { return PushAnswer(200); });
  auto none = Call("GET", "/topics/t/push");
  EXPECT_EQ(none.status, 404);
  auto bad = Call("PUT", "/topics/t/push", R"({"url":"ftp://x/"})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  bad = Call("PUT", "/topics/t/push", R"({"url":")" + rx.url() + R"(","secret":"nope"})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  // Without a secret, delayqd makes one and shows it this once.
  auto made = Call("PUT", "/topics/t/push",
                   R"({"url":")" + rx.url() + R"(","rate":{"per_second":50,"burst":5}})");
  EXPECT_EQ(made.status, 201) << made.body;
  auto m = Json(made.body);
  ASSERT_TRUE(m.HasMember("secret")) << made.body;
  EXPECT_TRUE(delivery::WebhookKey(m["secret"].GetString()).ok());
  auto shown = Call("GET", "/topics/t/push");
  EXPECT_EQ(shown.status, 200);
  EXPECT_EQ(shown.body.find("whsec_"), std::string::npos) << shown.body;
  auto s = Json(shown.body);
  EXPECT_TRUE(s["secret_set"].GetBool());
  EXPECT_EQ(std::string(s["url"].GetString()), rx.url());
  EXPECT_EQ(s["rate"]["per_second"].GetUint(), 50u);
  EXPECT_EQ(s["concurrency"].GetUint(), 16u);
  EXPECT_EQ(server_.Log().find("whsec_"), std::string::npos);
  EXPECT_EQ(Call("DELETE", "/topics/t/push").status, 200);
  EXPECT_EQ(Call("DELETE", "/topics/t/push").status, 404);
  // No longer a push topic: its jobs wait for a worker.
  const uint64_t id = Put("t", R"({"body":"b"})");
  auto r = Call("POST", "/topics/t/reserve", R"({"timeout_ms":1000})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("\"id\":" + std::to_string(id)), std::string::npos) << r.body;
  EXPECT_EQ(rx.requests().size(), 0u);
}

TEST_F(Push, ARateLimitSpacesTheRequests) {
  HttpReceiver rx([](const Request&) { return PushAnswer(200); });
  Target("paced", rx.url(), R"(,"rate":{"per_second":20,"burst":1})");
  for (int i = 0; i < 6; ++i) Put("paced", R"({"body":"b"})");
  ASSERT_EQ(rx.WaitFor(6, 10s), 6u);
  const auto reqs = rx.requests();
  // 1 at once, then one each 50 ms. Measured where they arrive, from the
  // second on (the first also waits for its connection to be made, which
  // shortens the gap after it): 200 ms at least for four intervals, less a
  // margin for the arrivals' jitter on a loaded machine. Without the limit
  // the six come within a few ms.
  EXPECT_GE(GapMs(reqs[5].at - reqs[1].at), 180);
}

class PushPrivate : public PushFixture {
 protected:
  void SetUp() override { StartServer({"--in-memory"}); }
};

TEST_F(PushPrivate, ALoopbackTargetIsRefusedWithoutTheFlag) {
  HttpReceiver rx([](const Request&) { return PushAnswer(200); });
  Target("private", rx.url(), R"(,"max_tries":1)");
  const uint64_t id = Put("private", R"({"body":"b"})");
  EXPECT_EQ(WaitState(id, "buried"), "buried");
  EXPECT_EQ(rx.requests().size(), 0u);
  EXPECT_NE(server_.Log().find("refused"), std::string::npos) << server_.Log();
}

// kill -9 while the target holds a request: the job comes back at the
// restart (the Local backend keeps no reservation) and is delivered then.
TEST(PushDurable, ADelayqdKilledMidRequestLosesNoJob) {
  TempDir dir;
  std::atomic<int> n{0};
  HttpReceiver rx([&](const Request&) {
    Answer a = PushAnswer(200);
    if (++n == 1) a.hang = true;
    return a;
  });
  ServerProcess server;
  std::string error;
  const std::vector<std::string> args = {"-b", dir.path(), "--push-allow-private", "--fsync",
                                         "always"};
  ASSERT_TRUE(server.Start(DelayqdPath(), args, &error)) << error;
  auto call = [&](uint16_t port, std::string_view method, std::string_view target,
                  std::string_view body) {
    HttpClient c(port);
    return c.Call(method, target, body);
  };
  auto target = [&](uint16_t port) {
    auto r = call(port, "PUT", "/topics/durable/push",
                  R"({"url":")" + rx.url() + R"(","secret":")" + kPushSecret + "\"}");
    ASSERT_TRUE(r.status == 200 || r.status == 201) << r.body;
  };
  uint16_t port = HttpPortOf(server);
  target(port);
  auto put = call(port, "POST", "/topics/durable/jobs", R"({"body":"keep me"})");
  ASSERT_EQ(put.status, 201) << put.body;
  ASSERT_EQ(rx.WaitFor(1, 10s), 1u);
  server.Signal(SIGKILL);
  while (server.Alive()) std::this_thread::sleep_for(5ms);
  ServerProcess again;  // its log holds this start alone
  ASSERT_TRUE(again.Start(DelayqdPath(), args, &error)) << error;
  port = HttpPortOf(again);
  // The target was stored with the queue: the restart knows it.
  EXPECT_EQ(call(port, "GET", "/topics/durable/push", "").status, 200);
  ASSERT_EQ(rx.WaitFor(2, 10s), 2u) << again.Log();
  EXPECT_EQ(rx.requests()[1].body, "keep me");
  EXPECT_EQ(rx.requests()[1].headers.at("webhook-id"), rx.requests()[0].headers.at("webhook-id"));
}

// The last answer is written with the job: a restart shows it again.
TEST(PushDurable, ABuriedJobsLastAnswerOutlivesARestart) {
  TempDir dir;
  HttpReceiver rx([](const Request&) {
    Answer a = PushAnswer(500);
    a.body = kLongAnswer;
    return a;
  });
  const std::vector<std::string> args = {"-b", dir.path(), "--push-allow-private"};
  std::string error;
  uint64_t id = 0;
  {
    ServerProcess server;
    ASSERT_TRUE(server.Start(DelayqdPath(), args, &error)) << error;
    id = BuryWithAnAnswer(HttpPortOf(server), "restarted", rx.url());
    ASSERT_NE(id, 0u) << server.Log();
    const int st = server.Stop();
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << server.Log();
  }
  ServerProcess again;
  ASSERT_TRUE(again.Start(DelayqdPath(), args, &error)) << error;
  HttpClient c(HttpPortOf(again));
  auto got = c.Call("GET", "/jobs/" + std::to_string(id));
  auto j = Json(got.body);
  ASSERT_TRUE(!j.HasParseError() && j.HasMember("last_answer")) << got.body;
  EXPECT_EQ(std::string(j["state"].GetString()), "buried");
  EXPECT_EQ(j["last_answer"]["status"].GetUint(), 500u);
  EXPECT_EQ(std::string(j["last_answer"]["text"].GetString()), kLongAnswer.substr(0, 256));
}

TEST(PushConfig, TheConfigFilesTargetsAreSetAtStartAndPushTo) {
  HttpReceiver rx([](const Request&) { return PushAnswer(200); });
  TempDir dir;
  const std::string path = dir.path() + "/delayqd.toml";
  std::ofstream(path) << "[push.\"from-file\"]\n"
                      << "url = \"" << rx.url("/file") << "\"\n"
                      << "secret = \"" << kPushSecret << "\"\n"
                      << "timeout = \"5s\"\n"
                      << "headers = { Authorization = \"Bearer f\" }\n"
                      << "rate = { per_second = 100, burst = 10 }\n";
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(
      server.Start(DelayqdPath(), {"-c", path, "--in-memory", "--push-allow-private"}, &error))
      << error;
  const uint16_t port = HttpPortOf(server);
  HttpResponse shown;
  for (auto end = std::chrono::steady_clock::now() + 5s;
       shown.status != 200 && std::chrono::steady_clock::now() < end;
       std::this_thread::sleep_for(10ms)) {
    HttpClient c(port);
    shown = c.Call("GET", "/topics/from-file/push");
  }
  ASSERT_EQ(shown.status, 200) << server.Log();
  auto d = Json(shown.body);
  EXPECT_EQ(d["timeout_ms"].GetInt64(), 5000);
  EXPECT_EQ(d["rate"]["burst"].GetUint(), 10u);
  HttpClient c(port);
  EXPECT_EQ(c.Call("POST", "/topics/from-file/jobs", R"({"body":"b"})").status, 201);
  ASSERT_EQ(rx.WaitFor(1, 10s), 1u);
  EXPECT_EQ(rx.requests()[0].target, "/file");
  EXPECT_EQ(rx.requests()[0].headers.at("authorization"), "Bearer f");
  // A table without a secret stops the start, saying why.
  std::ofstream(path) << "[push.\"nosecret\"]\nurl = \"" << rx.url() << "\"\n";
  ServerProcess bad;
  EXPECT_FALSE(bad.Start(DelayqdPath(), {"-c", path, "--in-memory"}, &error, 5000ms));
  EXPECT_NE(bad.Log().find("a secret is required"), std::string::npos) << bad.Log();
}

// A Redis, and the arguments that start a delayqd on it.
class PushRedis : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(redis_.StartForDelayqd(&error_, &args_)) << error_; }
  RedisProcess redis_;
  std::string error_;
  std::vector<std::string> args_ = {"--push-allow-private"};
};

// Two instances on one Redis: the target set on one is learnt by the
// other (by polling the stored targets), and every job's first try
// (answered 500) and second try (200) each come once, some from each.
TEST_F(PushRedis, TwoInstancesMakeEachTryOnce) {
  std::mutex mu;
  std::map<std::string, int> tries;  // "<webhook-id> <attempt>" -> count
  HttpReceiver rx([&](const Request& r) {
    std::lock_guard<std::mutex> lock(mu);
    tries[r.headers.at("webhook-id") + " " + r.headers.at("delayq-attempt")]++;
    return PushAnswer(r.headers.at("delayq-attempt") == "1" ? 500 : 200);
  });
  ServerProcess a, b;
  ASSERT_TRUE(a.Start(DelayqdPath(), args_, &error_)) << error_;
  ASSERT_TRUE(b.Start(DelayqdPath(), args_, &error_)) << error_;
  const uint16_t pa = HttpPortOf(a), pb = HttpPortOf(b);
  {
    HttpClient c(pa);
    auto r = c.Call("PUT", "/topics/shared/push",
                    R"({"url":")" + rx.url() + R"(","secret":")" + kPushSecret +
                        R"(","backoff":"100ms","concurrency":4})");
    ASSERT_EQ(r.status, 201) << r.body;
  }
  int shown = 0;
  for (auto end = std::chrono::steady_clock::now() + 5s;
       shown != 200 && std::chrono::steady_clock::now() < end; std::this_thread::sleep_for(20ms)) {
    HttpClient c(pb);
    shown = c.Call("GET", "/topics/shared/push").status;
  }
  ASSERT_EQ(shown, 200) << "the other instance never learnt of the target";
  constexpr int kJobs = 200;
  for (int i = 0; i < kJobs; ++i) {
    HttpClient c(i % 2 == 0 ? pa : pb);
    ASSERT_EQ(c.Call("POST", "/topics/shared/jobs", R"({"body":"j"})").status, 201);
  }
  ASSERT_EQ(rx.WaitFor(2 * kJobs, 30s), size_t{2 * kJobs});
  std::this_thread::sleep_for(300ms);  // a repeat would come by now
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(rx.requests().size(), size_t{2 * kJobs});
  EXPECT_EQ(tries.size(), size_t{2 * kJobs});
  for (const auto& [what, n] : tries) EXPECT_EQ(n, 1) << what;
  // Both instances made some of the tries (each logs its failed ones).
  EXPECT_NE(a.Log().find("event=push_failed"), std::string::npos) << a.Log();
  EXPECT_NE(b.Log().find("event=push_failed"), std::string::npos) << b.Log();
}

// On Redis the answer is kept in the job's string, written by the same
// call that buries the job; another instance shows it too.
// A job's own back-off spaces its tries there too (never early; the
// lateness printed, not held: Redis's clock and a round trip are in it).
TEST_F(PushRedis, ABuriedJobsLastAnswerIsKeptAndItsOwnBackoffSpacesItsTries) {
  std::mutex mu;
  std::vector<Request> own;  // the tries of the job with its own back-off
  HttpReceiver rx([&](const Request& r) {
    Answer a = PushAnswer(500);
    a.body = kLongAnswer;
    if (r.body == "own") {
      std::lock_guard<std::mutex> lock(mu);
      own.push_back(r);
      if (own.size() == 3) a = PushAnswer(200);
    }
    return a;
  });
  ServerProcess a, b;
  ASSERT_TRUE(a.Start(DelayqdPath(), args_, &error_)) << error_;
  const uint64_t id = BuryWithAnAnswer(HttpPortOf(a), "kept", rx.url());
  ASSERT_NE(id, 0u) << a.Log();
  ASSERT_TRUE(b.Start(DelayqdPath(), args_, &error_)) << error_;
  HttpClient c(HttpPortOf(b));
  auto got = c.Call("GET", "/jobs/" + std::to_string(id));
  auto j = Json(got.body);
  ASSERT_TRUE(!j.HasParseError() && j.HasMember("last_answer")) << got.body;
  EXPECT_EQ(j["last_answer"]["status"].GetUint(), 500u);
  EXPECT_EQ(std::string(j["last_answer"]["text"].GetString()), kLongAnswer.substr(0, 256));
  // Kicked, it keeps the answer until its next failed try.
  EXPECT_EQ(c.Call("POST", "/jobs/" + std::to_string(id) + "/kick").status, 200);
  auto kept = Json(c.Call("GET", "/jobs/" + std::to_string(id)).body);
  EXPECT_TRUE(kept.HasMember("last_answer"));

  auto t =
      c.Call("PUT", "/topics/own/push",
             R"({"url":")" + rx.url() + R"(","secret":")" + kPushSecret + R"(","backoff":"20ms"})");
  ASSERT_EQ(t.status, 201) << t.body;
  ASSERT_EQ(c.Call("POST", "/topics/own/jobs", R"({"body":"own","backoff":"200ms,300ms"})").status,
            201);
  for (auto end = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < end;
       std::this_thread::sleep_for(10ms)) {
    std::lock_guard<std::mutex> lock(mu);
    if (own.size() >= 3) break;
  }
  std::lock_guard<std::mutex> lock(mu);
  ExpectTriesSpacedBy(own, {200, 300}, "job's own back-off on Redis", /*held=*/false);
}

}  // namespace
}  // namespace delayq::testing

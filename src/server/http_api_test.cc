// The HTTP/JSON API's logic over a Local backend and a manual clock, without
// sockets: routing, JSON in and out, errors, long-polls woken by puts,
// cancellation, and replies that wait for a durable store.
// Black-box tests over real sockets live in tests/server/http_test.cc.
#include "server/http_api.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "backend/forwarding_backend.h"
#include "backend/local_backend.h"
#include "delayq/operations.h"
#include "manual_clock.h"
#include "server/http_api_internal.h"
#include "store/mem_store.h"

namespace delayq::server {
namespace {

using namespace std::chrono_literals;

using testing::ManualClock;

rapidjson::Document Json(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str(), text.size());
  return d;
}

class HttpApiTest : public ::testing::Test {
 protected:
  explicit HttpApiTest(store::Store* store = nullptr)
      : backend_(io_, Options(store), clock_), ctx_(backend_), api_(ctx_) {
    ctx_.started_ms = clock_.now;
  }
  static backend::LocalBackend::Options Options(store::Store* store) {
    backend::LocalBackend::Options o;
    o.store = store;
    return o;
  }

  // Runs a request whose reply must come at once.
  HttpReply Call(std::string_view method, std::string_view target, std::string_view body = {}) {
    std::optional<HttpReply> got;
    HttpApi::CallId id =
        api_.Handle(HttpRequest{method, target, body}, [&](HttpReply r) { got = std::move(r); });
    EXPECT_EQ(id, 0u);
    EXPECT_TRUE(got.has_value()) << method << " " << target << " did not reply at once";
    return got.value_or(HttpReply{0, "", ""});
  }
  void Tick(TimeMs ms) {
    clock_.now += ms;
    backend_.Poll();
  }

  boost::asio::io_context io_;
  ManualClock clock_;
  backend::LocalBackend backend_;
  ServerContext ctx_;
  HttpApi api_;
};

TEST(HttpApiText, ErrorBodyIsJsonAndPrintable) {
  auto d = Json(HttpErrorBody("not_found", "no \"job\"\n\xff"));
  ASSERT_TRUE(d.IsObject());
  EXPECT_STREQ(d["error"]["code"].GetString(), "not_found");
  EXPECT_STREQ(d["error"]["message"].GetString(), "no \"job\"??");
}

TEST_F(HttpApiTest, PutGetReserveFinish) {
  HttpReply put = Call("POST", "/topics/t/jobs", R"({"body":"b1","delay_ms":1000,"key":"k"})");
  ASSERT_EQ(put.status, 201) << put.body;
  EXPECT_EQ(put.body, R"({"id":1,"created":true,"state":"delayed","due_ms":1700000001000})");
  HttpReply get = Call("GET", "/jobs/1");
  ASSERT_EQ(get.status, 200);
  auto g = Json(get.body);
  EXPECT_STREQ(g["key"].GetString(), "k");
  EXPECT_EQ(g["due_ms"].GetInt64(), 1'700'000'001'000);
  EXPECT_EQ(g["created_ms"].GetInt64(), 1'700'000'000'000);

  // Nothing ready: an immediate reserve answers no jobs.
  EXPECT_EQ(Call("POST", "/reserve", R"({"topics":["t"]})").body, R"({"jobs":[]})");
  Tick(1000);
  HttpReply res = Call("POST", "/reserve", R"({"topics":["t"]})");
  auto r = Json(res.body);
  ASSERT_EQ(r["jobs"].Size(), 1u) << res.body;
  EXPECT_EQ(r["jobs"][0]["deadline_ms"].GetInt64(), 1'700'000'001'000 + 60'000);
  std::string lease = r["jobs"][0]["lease"].GetString();
  EXPECT_EQ(lease.size(), 16u);
  EXPECT_EQ(Call("POST", "/jobs/1/finish").status, 400);
  EXPECT_EQ(Call("POST", "/jobs/1/finish", R"({"lease":")" + lease + R"("})").status, 200);
  EXPECT_EQ(Call("GET", "/jobs/1").status, 404);
}

TEST_F(HttpApiTest, LongPollIsWokenByAPutAndTimesOut) {
  std::optional<HttpReply> got;
  HttpApi::CallId id = api_.Handle(
      HttpRequest{"POST", "/reserve", R"({"topics":["a","b"],"timeout_ms":5000,"count":2})"},
      [&](HttpReply r) { got = std::move(r); });
  EXPECT_NE(id, 0u);
  EXPECT_FALSE(got.has_value());
  EXPECT_EQ(api_.waiting(), 1u);
  Call("POST", "/topics/b/jobs", R"({"body":"x"})");
  ASSERT_TRUE(got.has_value());
  auto r = Json(got->body);
  ASSERT_EQ(r["jobs"].Size(), 1u);
  EXPECT_STREQ(r["jobs"][0]["topic"].GetString(), "b");
  EXPECT_EQ(api_.waiting(), 0u);

  got.reset();
  api_.Handle(HttpRequest{"POST", "/reserve", R"({"topics":["a"],"timeout_ms":5000})"},
              [&](HttpReply r) { got = std::move(r); });
  Tick(4999);
  EXPECT_FALSE(got.has_value());
  Tick(1);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->body, R"({"jobs":[]})");
}

TEST_F(HttpApiTest, CancelledLongPollTakesNothing) {
  bool called = false;
  HttpApi::CallId id =
      api_.Handle(HttpRequest{"POST", "/reserve", R"({"topics":["a"],"timeout_ms":5000})"},
                  [&](HttpReply) { called = true; });
  ASSERT_NE(id, 0u);
  api_.Cancel(id);
  EXPECT_EQ(api_.waiting(), 0u);
  Call("POST", "/topics/a/jobs", R"({"body":"x"})");
  EXPECT_FALSE(called);
  EXPECT_STREQ(Json(Call("GET", "/jobs/1").body)["state"].GetString(), "ready");
}

TEST_F(HttpApiTest, WakeWaitersAnswersAsTimedOut) {
  int replies = 0;
  for (int i = 0; i < 3; ++i)
    api_.Handle(HttpRequest{"POST", "/reserve", R"({"topics":["a"],"timeout_ms":60000})"},
                [&](HttpReply r) {
                  EXPECT_EQ(r.body, R"({"jobs":[]})");
                  replies++;
                });
  EXPECT_EQ(api_.waiting(), 3u);
  api_.WakeWaiters();
  EXPECT_EQ(replies, 3);
  EXPECT_EQ(api_.waiting(), 0u);
  // The jobs put afterwards are still there for the next worker.
  Call("POST", "/topics/a/jobs", "{}");
  EXPECT_EQ(Json(Call("GET", "/topics/a").body)["jobs"]["ready"].GetUint64(), 1u);
}

TEST_F(HttpApiTest, ReserveSessionsAreReusedAcrossTopicSets) {
  Call("POST", "/topics/x/jobs", R"({"body":"x"})");
  Call("POST", "/topics/y/jobs", R"({"body":"y"})");
  // The pooled session watched x; now it must watch y only.
  EXPECT_EQ(Json(Call("POST", "/reserve", R"({"topics":"x"})").body)["jobs"].Size(), 1u);
  auto y = Json(Call("POST", "/reserve", R"({"topics":["y"],"count":5})").body);
  ASSERT_EQ(y["jobs"].Size(), 1u);
  EXPECT_STREQ(y["jobs"][0]["body"].GetString(), "y");
  // "default" is not watched unless asked for.
  Call("POST", "/topics/default/jobs", R"({"body":"d"})");
  EXPECT_EQ(Json(Call("POST", "/reserve", R"({"topics":["x"]})").body)["jobs"].Size(), 0u);
  EXPECT_EQ(Json(Call("POST", "/reserve", R"({"topics":["default"]})").body)["jobs"].Size(), 1u);
}

TEST_F(HttpApiTest, RoutingErrors) {
  EXPECT_EQ(Call("GET", "/").status, 404);
  EXPECT_EQ(Call("GET", "/topics/").status, 404);
  EXPECT_EQ(Call("GET", "healthz").status, 400);
  HttpReply m = Call("PATCH", "/jobs/1");
  EXPECT_EQ(m.status, 405);
  EXPECT_EQ(m.allow, "GET, DELETE, HEAD");
  EXPECT_EQ(Call("GET", "/healthz?verbose=1").status, 200);
  EXPECT_EQ(Call("HEAD", "/stats").status, 200);
  EXPECT_EQ(Call("GET", "/topics/a%zz").status, 400);
  EXPECT_EQ(Call("GET", "/topics/a%2").status, 400);
}

TEST_F(HttpApiTest, BackoffForms) {
  for (const char* b : {R"("4m,10m,1h")", R"([240000,"10m"])", R"({"base_ms":1000,"cap_ms":60000})",
                        R"("exp:1s:1h")", R"("none")"}) {
    HttpReply r = Call("POST", "/topics/t/jobs", std::string(R"({"backoff":)") + b + "}");
    EXPECT_EQ(r.status, 201) << b << " " << r.body;
  }
  for (const char* b : {R"("4x")", R"([])", R"({"base_ms":10})", R"({"base_ms":10,"cap_ms":5})",
                        R"(true)", R"([-1])"}) {
    HttpReply r = Call("POST", "/topics/t/jobs", std::string(R"({"backoff":)") + b + "}");
    EXPECT_EQ(r.status, 400) << b << " " << r.body;
  }
  // A list back-off applies on release without a delay.
  Call("POST", "/topics/r/jobs", R"({"backoff":[5000]})");
  auto got = Json(Call("POST", "/reserve", R"({"topics":["r"]})").body);
  ASSERT_EQ(got["jobs"].Size(), 1u);
  uint64_t id = Json(Call("GET", "/topics/r").body)["total_jobs"].GetUint64();
  EXPECT_EQ(id, 1u);
  HttpReply rel =
      Call("POST", "/jobs/6/release",
           R"({"lease":")" + std::string(got["jobs"][0]["lease"].GetString()) + R"("})");
  EXPECT_EQ(rel.body, R"({"id":6,"state":"delayed","priority":1024,"due_ms":1700000005000})");
}

TEST_F(HttpApiTest, MaxTriesBuriesOnRelease) {
  Call("POST", "/topics/m/jobs", R"({"max_tries":1})");
  auto got = Json(Call("POST", "/reserve", R"({"topics":["m"]})").body);
  EXPECT_EQ(Call("POST", "/jobs/1/release",
                 R"({"lease":")" + std::string(got["jobs"][0]["lease"].GetString()) + R"("})")
                .body,
            R"({"id":1,"state":"buried","priority":1024})");
}

TEST_F(HttpApiTest, YouzanIdsAcrossTopics) {
  Call("POST", "/push", R"({"topic":"a","id":"u1","delay":0,"ttr":5,"body":"in a"})");
  Call("POST", "/push", R"({"topic":"b","id":"u2","delay":10,"ttr":5,"body":"in b"})");
  auto g = Json(Call("POST", "/get", R"({"id":"u2"})").body);
  EXPECT_STREQ(g["data"]["topic"].GetString(), "b");
  EXPECT_EQ(g["data"]["delay"].GetInt(), 10);
  // A finish of a job that is not reserved changes nothing, and says so.
  EXPECT_EQ(Call("POST", "/finish", R"({"id":"u2"})").body,
            R"({"code":1,"message":"job 2 is delayed, not reserved","data":null})");
  EXPECT_EQ(Call("POST", "/delete", R"({"id":"u2"})").body,
            R"({"code":0,"message":"ok","data":null})");
  EXPECT_EQ(Json(Call("GET", "/topics/b").body)["total_jobs"].GetUint64(), 0u);
  auto pop = Json(Call("POST", "/pop", R"({"topic":"b, a","timeout":0})").body);
  EXPECT_STREQ(pop["data"]["id"].GetString(), "u1");
}

// A backend that counts the operations the API asks of the one it wraps
// (sessions and the clock are not operations).
class CallCountingBackend : public backend::ForwardingBackend {
 public:
  using F = backend::ForwardingBackend;
  using F::F;
  int calls = 0;

  void Put(SessionId s, const PutRequest& r, backend::Callback<PutResult> d) override {
    ++calls;
    F::Put(s, r, std::move(d));
  }
  void Reserve(const ReserveRequest& r, backend::JobsDone d) override {
    ++calls;
    F::Reserve(r, std::move(d));
  }
  void ReserveJob(SessionId s, JobId id, backend::JobsDone d) override {
    ++calls;
    F::ReserveJob(s, id, std::move(d));
  }
  void Delete(const backend::Claim& c, JobId id, backend::Callback<JobChange> d) override {
    ++calls;
    F::Delete(c, id, std::move(d));
  }
  void DeleteByKey(const backend::Claim& c, std::string_view t, std::string_view k,
                   backend::Callback<JobChange> d) override {
    ++calls;
    F::DeleteByKey(c, t, k, std::move(d));
  }
  void Finish(const backend::Claim& c, JobId id, backend::Callback<JobChange> d) override {
    ++calls;
    F::Finish(c, id, std::move(d));
  }
  void FinishByName(std::string_view n, backend::Callback<JobChange> d) override {
    ++calls;
    F::FinishByName(n, std::move(d));
  }
  void DeleteByName(std::string_view n, backend::Callback<JobChange> d) override {
    ++calls;
    F::DeleteByName(n, std::move(d));
  }
  void Release(const backend::Claim& c, JobId id, std::optional<uint32_t> p,
               std::optional<TimeMs> delay, backend::Callback<JobChange> d) override {
    ++calls;
    F::Release(c, id, p, delay, std::move(d));
  }
  void Bury(const backend::Claim& c, JobId id, std::optional<uint32_t> p,
            backend::Callback<JobChange> d) override {
    ++calls;
    F::Bury(c, id, p, std::move(d));
  }
  void Touch(const backend::Claim& c, JobId id, backend::Callback<JobChange> d) override {
    ++calls;
    F::Touch(c, id, std::move(d));
  }
  void Kick(SessionId s, std::string_view t, uint64_t n, backend::Callback<uint64_t> d) override {
    ++calls;
    F::Kick(s, t, n, std::move(d));
  }
  void KickJob(SessionId s, JobId id, backend::Callback<JobChange> d) override {
    ++calls;
    F::KickJob(s, id, std::move(d));
  }
  void Peek(SessionId s, PeekKind k, JobId id, std::string_view t, std::string_view key,
            backend::JobsDone d) override {
    ++calls;
    F::Peek(s, k, id, t, key, std::move(d));
  }
  void StatsJob(JobId id, backend::Callback<JobStats> d) override {
    ++calls;
    F::StatsJob(id, std::move(d));
  }
  void ListJobs(const ListJobsRequest& r, backend::PageDone d) override {
    ++calls;
    F::ListJobs(r, std::move(d));
  }
  void FindKey(std::string_view key, backend::JobsDone d) override {
    ++calls;
    F::FindKey(key, std::move(d));
  }
  void StatsTopic(std::string_view t, backend::Callback<TopicStats> d) override {
    ++calls;
    F::StatsTopic(t, std::move(d));
  }
  void TopicsStats(backend::Callback<std::vector<TopicStats>> d) override {
    ++calls;
    F::TopicsStats(std::move(d));
  }
  void Stats(backend::Callback<EngineStats> d) override {
    ++calls;
    F::Stats(std::move(d));
  }
  void ListTopics(backend::Callback<std::vector<std::string>> d) override {
    ++calls;
    F::ListTopics(std::move(d));
  }
  void PauseTopic(std::string_view t, TimeMs ms, backend::Done d) override {
    ++calls;
    F::PauseTopic(t, ms, std::move(d));
  }
  void ClearTopic(SessionId s, std::string_view t, uint8_t mask,
                  backend::Callback<uint64_t> d) override {
    ++calls;
    F::ClearTopic(s, t, mask, std::move(d));
  }
};

// Each route is one backend call, with no read before its write (a batch
// put: one per job); the Youzan-style routes too, by name or by number.
// Each route counts one request of its operation-table row, and only that.
TEST_F(HttpApiTest, EachRouteCountsItsOperation) {
  for (const HttpApiRoutes::Route& r : HttpApiRoutes::Table()) {
    std::string target;
    for (std::string_view seg : r.path)
      target += "/" + (seg.starts_with('{') ? std::string("1") : std::string(seg));
    const auto before = ctx_.counters.ops;
    HttpApi::CallId id = api_.Handle(HttpRequest{r.method, target, "{}"}, [](HttpReply) {});
    if (id != 0) api_.Cancel(id);  // a reserve that waits
    for (size_t p = 0; p < kNumProtocols; ++p) {
      for (size_t op = 0; op < kNumOps; ++op) {
        const bool mine = p == static_cast<size_t>(Protocol::kHttp) && op == size_t(r.op);
        EXPECT_EQ(ctx_.counters.ops[p][op], before[p][op] + (mine ? 1 : 0))
            << r.method << " " << target << ": " << kOperations[op].name;
      }
    }
  }
  // GET /stats shows them by name and protocol.
  auto d = Json(Call("GET", "/stats").body);
  ASSERT_TRUE(d.HasMember("operations"));
  EXPECT_EQ(d["operations"]["put"]["http"].GetUint64(), 2u);  // /topics/1/jobs and /push
  EXPECT_EQ(d["operations"]["stats"]["http"].GetUint64(), 2u);
  EXPECT_FALSE(d["operations"]["put"].HasMember("beanstalkd"));
  EXPECT_FALSE(d["operations"].HasMember("quit"));  // never asked for
}

TEST_F(HttpApiTest, EachRouteIsOneBackendCall) {
  CallCountingBackend counting(backend_);
  ServerContext ctx(counting);
  ctx.started_ms = clock_.now;
  HttpApi api(ctx);
  auto call = [&](std::string_view method, std::string target, std::string body = {}) {
    const int before = counting.calls;
    std::optional<HttpReply> got;
    api.Handle(HttpRequest{method, target, body}, [&](HttpReply r) { got = std::move(r); });
    EXPECT_TRUE(got.has_value()) << method << " " << target;
    return std::make_pair(counting.calls - before, got.value_or(HttpReply{0, "", ""}));
  };
  auto one = [&](std::string_view method, std::string target, std::string body = {}) {
    auto [n, reply] = call(method, target, body);
    EXPECT_EQ(n, 1) << method << " " << target << " -> " << reply.status << " " << reply.body;
    return reply;
  };
  one("POST", "/topics/c/jobs", R"({"body":"a","key":"k1","delay_ms":5000})");
  one("POST", "/topics/c/jobs", R"({"body":"a","key":"k1","delay_ms":5000})");  // exists
  one("POST", "/topics/c/jobs", R"({"body":"b","priority":1})");
  EXPECT_EQ(call("POST", "/topics/c/jobs", R"({"jobs":[{},{},{}]})").first, 3);
  one("GET", "/jobs/1");
  one("GET", "/topics/c/keys/k1");
  one("GET", "/topics/c/jobs?state=delayed");
  one("GET", "/jobs?key=k1");
  auto r = Json(one("POST", "/reserve", R"({"topics":["c"],"count":2})").body);
  ASSERT_EQ(r["jobs"].Size(), 2u);
  const std::string id = std::to_string(r["jobs"][0]["id"].GetUint64());
  const std::string lease = R"({"lease":")" + std::string(r["jobs"][0]["lease"].GetString());
  one("POST", "/jobs/" + id + "/touch", lease + "\"}");
  one("POST", "/jobs/" + id + "/release", lease + R"(","delay_ms":1000})");
  one("POST", "/jobs/" + id + "/touch", lease + "\"}");  // lease lost: refused, one call
  one("POST", "/jobs/" + id + "/kick");
  r = Json(one("POST", "/topics/c/reserve", R"({})").body);
  ASSERT_EQ(r["jobs"].Size(), 1u);
  const std::string id2 = std::to_string(r["jobs"][0]["id"].GetUint64());
  const std::string lease2 = R"({"lease":")" + std::string(r["jobs"][0]["lease"].GetString());
  one("POST", "/jobs/" + id2 + "/bury", lease2 + "\"}");
  one("POST", "/topics/c/kick", R"({"bound":5})");
  r = Json(one("POST", "/topics/c/reserve", R"({})").body);
  ASSERT_EQ(r["jobs"].Size(), 1u);
  one("POST", "/jobs/" + std::to_string(r["jobs"][0]["id"].GetUint64()) + "/finish",
      R"({"lease":")" + std::string(r["jobs"][0]["lease"].GetString()) + "\"}");
  one("DELETE", "/jobs/" + id2);
  one("DELETE", "/topics/c/keys/k1");
  one("POST", "/topics/c/pause", R"({"delay_ms":10})");
  one("POST", "/topics/c/clear", R"({})");
  one("GET", "/topics/c");
  one("GET", "/topics");
  one("POST", "/push", R"({"topic":"y","id":"u1","delay":0,"ttr":5,"body":"x"})");
  one("POST", "/push", R"({"topic":"z","id":"u1","delay":0,"ttr":5,"body":"x"})");  // refused
  one("POST", "/get", R"({"id":"u1"})");
  one("POST", "/finish", R"({"id":"u1"})");  // not reserved: refused
  one("POST", "/pop", R"({"topic":"y","timeout":0})");
  one("POST", "/finish", R"({"id":"u1"})");
  one("POST", "/push", R"({"topic":"y","id":"u2","delay":9,"ttr":5,"body":"x"})");
  one("POST", "/delete", R"({"id":"u2"})");
  one("POST", "/delete", R"({"id":"u2"})");  // gone
  const std::string n = std::to_string(
      Json(one("POST", "/topics/y/jobs", R"({"body":"keyless"})").body)["id"].GetUint64());
  one("POST", "/get", R"({"id":"#)" + n + R"("})");
  one("POST", "/get", R"({"id":")" + n + R"("})");
  one("POST", "/pop", R"({"topic":"y","timeout":0})");
  one("POST", "/finish", R"({"id":"#)" + n + R"("})");
  one("POST", "/delete", R"({"id":"#)" + n + R"("})");
}

TEST_F(HttpApiTest, DrainingRefusesPuts) {
  ctx_.draining = true;
  HttpReply r = Call("POST", "/topics/t/jobs", "{}");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(
      r.body,
      R"({"error":{"code":"draining","message":"the server is draining: it takes no new jobs"}})");
  HttpReply b = Call("POST", "/topics/t/jobs", R"({"jobs":[{},{}]})");
  EXPECT_EQ(b.status, 200);
  EXPECT_NE(b.body.find(R"({"error":{"code":"draining")"), std::string::npos) << b.body;
  EXPECT_EQ(Call("POST", "/push", R"({"topic":"t","id":"x","delay":0,"ttr":1})").body,
            R"({"code":1,"message":"the server is draining: it takes no new jobs","data":null})");
}

// With a durable store, a put is answered once the store holds it, and a
// long-poll is not handed a job whose put is not yet written.
// (The store is a base, built before the backend that uses it.)
struct MemStoreHolder {
  store::MemStore mem_;
};
class HttpApiStoreTest : protected MemStoreHolder, public HttpApiTest {
 protected:
  HttpApiStoreTest() : HttpApiTest(&mem_) {}
  bool RunUntil(const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      io_.restart();
      io_.run_for(5ms);
    }
    return true;
  }
};

TEST_F(HttpApiStoreTest, RepliesWaitForTheStore) {
  std::optional<HttpReply> put;
  HttpApi::CallId id = api_.Handle(HttpRequest{"POST", "/topics/t/jobs", R"({"body":"d"})"},
                                   [&](HttpReply r) { put = std::move(r); });
  EXPECT_EQ(id, 0u);  // not a long-poll: nothing to cancel
  EXPECT_FALSE(put.has_value()) << "replied before the store had the job";
  ASSERT_TRUE(RunUntil([&] { return put.has_value(); }));
  EXPECT_EQ(put->status, 201);
  std::string body;
  EXPECT_TRUE(mem_.GetJob(1, nullptr, &body).ok());
  EXPECT_EQ(body, "d");
}

TEST_F(HttpApiStoreTest, BatchPutAnswersOnce) {
  int replies = 0;
  std::string body;
  api_.Handle(HttpRequest{"POST", "/topics/t/jobs", R"({"jobs":[{"key":"a"},{"key":"a"},{}]})"},
              [&](HttpReply r) {
                replies++;
                body = r.body;
              });
  ASSERT_TRUE(RunUntil([&] { return replies > 0; }));
  EXPECT_EQ(replies, 1);
  EXPECT_EQ(
      body,
      R"({"jobs":[{"id":1,"created":true,"state":"ready"},)"
      R"({"id":1,"created":false,"state":"ready"},{"id":2,"created":true,"state":"ready"}]})");
}

}  // namespace
}  // namespace delayq::server

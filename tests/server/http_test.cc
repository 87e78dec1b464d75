// Black-box tests of delayqd's HTTP/JSON API (docs/http-api.md): a real
// build/delayqd on free loopback ports, spoken to over raw sockets.
//
// Suites:
//  - Http.*          every route and its errors, keep-alive, pipelining,
//                    limits, long-poll, SIGTERM with long-polls waiting.
//  - HttpYouzan.*    the Youzan-style routes (/push /pop /finish /delete /get).
//  - HttpCross.*     a job put over one protocol and taken over the other.
//  - HttpStress.*    many concurrent clients: every job delivered once.
//  - HttpDurable.*   an acknowledged HTTP put survives kill -9.
//  - Backends/Browse.*  browsing jobs, on each backend (the parameter).
//
// With DELAYQ_TEST_AGAINST=redis the fixture suites run on the Redis backend
// (ctest http_on_redis).
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "delayq/token.h"
#include "sanitized.h"
#include "server/delayqd_fixture.h"
#include "server/http_client.h"
#include "server/redis_process.h"
#include "server/server_process.h"

namespace delayq::testing {
namespace {

using namespace std::chrono_literals;

// The fixture's delayqd is in memory unless a test starts its own.
class HttpFixture : public DelayqdFixture {
 protected:
  void SetUp() override { StartServer({"--in-memory"}); }
};

using Http = HttpFixture;

TEST_F(Http, PutReserveFinish) {
  auto put = Call("POST", "/topics/orders/jobs", R"({"body":"close order 42","ttr_ms":30000})");
  ASSERT_TRUE(put.ok) << put.error;
  EXPECT_EQ(put.status, 201);
  EXPECT_EQ(put.Header("content-type"), "application/json");
  auto p = Json(put.body);
  ASSERT_TRUE(p.IsObject()) << put.body;
  EXPECT_TRUE(p["created"].GetBool());
  EXPECT_STREQ(p["state"].GetString(), "ready");
  uint64_t id = p["id"].GetUint64();

  auto res = Call("POST", "/reserve", R"({"topics":["orders"],"timeout_ms":0})");
  ASSERT_EQ(res.status, 200) << res.body;
  auto r = Json(res.body);
  ASSERT_EQ(r["jobs"].Size(), 1u) << res.body;
  const auto& j = r["jobs"][0];
  EXPECT_EQ(j["id"].GetUint64(), id);
  EXPECT_STREQ(j["topic"].GetString(), "orders");
  EXPECT_STREQ(j["state"].GetString(), "reserved");
  EXPECT_STREQ(j["body"].GetString(), "close order 42");
  EXPECT_EQ(j["ttr_ms"].GetInt64(), 30000);
  EXPECT_EQ(j["reserves"].GetUint(), 1u);
  EXPECT_TRUE(j.HasMember("deadline_ms"));
  ASSERT_TRUE(j.HasMember("lease")) << res.body;
  std::string lease = j["lease"].GetString();
  // Looking at a job never shows its lease.
  auto look = Call("GET", "/jobs/" + std::to_string(id));
  EXPECT_EQ(look.body.find("\"lease\""), std::string::npos) << look.body;

  // Nothing else is ready.
  auto empty = Call("POST", "/reserve", R"({"topics":"orders"})");
  EXPECT_EQ(empty.status, 200);
  EXPECT_EQ(Json(empty.body)["jobs"].Size(), 0u) << empty.body;

  // A finish must carry the lease.
  auto bare = Call("POST", "/jobs/" + std::to_string(id) + "/finish");
  EXPECT_EQ(bare.status, 400) << bare.body;
  EXPECT_NE(bare.body.find("'lease' is required"), std::string::npos) << bare.body;
  std::string with_lease = R"({"lease":")" + lease + R"("})";
  auto fin = Call("POST", "/jobs/" + std::to_string(id) + "/finish", with_lease);
  EXPECT_EQ(fin.status, 200) << fin.body;
  EXPECT_TRUE(Json(fin.body)["deleted"].GetBool());
  auto gone = Call("GET", "/jobs/" + std::to_string(id));
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(ErrorCode(gone), "not_found");
  auto again = Call("POST", "/jobs/" + std::to_string(id) + "/finish", with_lease);
  EXPECT_EQ(again.status, 404);
}

TEST_F(Http, IdempotentPutByKey) {
  auto a = Call("POST", "/topics/mail/jobs", R"({"body":"x","key":"user-7","delay_ms":60000})");
  ASSERT_EQ(a.status, 201) << a.body;
  auto b = Call("POST", "/topics/mail/jobs", R"({"body":"y","key":"user-7"})");
  ASSERT_EQ(b.status, 200) << b.body;
  auto ja = Json(a.body), jb = Json(b.body);
  EXPECT_EQ(ja["id"].GetUint64(), jb["id"].GetUint64());
  EXPECT_FALSE(jb["created"].GetBool());
  EXPECT_STREQ(jb["state"].GetString(), "delayed");
  EXPECT_EQ(ja["due_ms"].GetInt64(), jb["due_ms"].GetInt64());

  auto g = Call("GET", "/topics/mail/keys/user-7");
  ASSERT_EQ(g.status, 200) << g.body;
  auto jg = Json(g.body);
  EXPECT_STREQ(jg["body"].GetString(), "x");
  EXPECT_STREQ(jg["key"].GetString(), "user-7");
  EXPECT_STREQ(jg["state"].GetString(), "delayed");

  auto del = Call("DELETE", "/topics/mail/keys/user-7");
  EXPECT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(Call("GET", "/topics/mail/keys/user-7").status, 404);
  EXPECT_EQ(Call("DELETE", "/topics/mail/keys/user-7").status, 404);
  // The key is free again.
  EXPECT_EQ(Call("POST", "/topics/mail/jobs", R"({"key":"user-7"})").status, 201);
}

TEST_F(Http, DelayAndRunAt) {
  auto past = Call("POST", "/topics/t/jobs", R"({"run_at":"2001-02-03T04:05:06Z"})");
  ASSERT_EQ(past.status, 201) << past.body;
  EXPECT_STREQ(Json(past.body)["state"].GetString(), "ready");

  auto future = Call("POST", "/topics/t/jobs", R"({"run_at":"2999-01-01T00:00:00.250+01:00"})");
  ASSERT_EQ(future.status, 201) << future.body;
  auto jf = Json(future.body);
  EXPECT_STREQ(jf["state"].GetString(), "delayed");
  // 2998-12-31T23:00:00.250Z
  EXPECT_EQ(jf["due_ms"].GetInt64(), 32472140400250);

  auto epoch = Call("POST", "/topics/t/jobs", R"({"run_at":32503680000000})");
  EXPECT_EQ(Json(epoch.body)["due_ms"].GetInt64(), 32503680000000);

  auto d = Call("POST", "/topics/t/jobs", R"({"delay_ms":200,"body":"soon"})");
  EXPECT_STREQ(Json(d.body)["state"].GetString(), "delayed");
  auto res = Call("POST", "/reserve", R"({"topics":["t"],"timeout_ms":5000,"count":5})");
  auto jr = Json(res.body);
  // The past one is ready at once.
  ASSERT_GE(jr["jobs"].Size(), 1u) << res.body;
  EXPECT_EQ(jr["jobs"][0]["id"].GetUint64(), Json(past.body)["id"].GetUint64());
  auto res2 = Call("POST", "/reserve", R"({"topics":["t"],"timeout_ms":5000})");
  auto jr2 = Json(res2.body);
  ASSERT_EQ(jr2["jobs"].Size(), 1u) << res2.body;
  EXPECT_STREQ(jr2["jobs"][0]["body"].GetString(), "soon");

  auto bad = Call("POST", "/topics/t/jobs", R"({"run_at":"yesterday"})");
  EXPECT_EQ(bad.status, 400);
  auto both = Call("POST", "/topics/t/jobs", R"({"run_at":1,"delay_ms":1})");
  EXPECT_EQ(both.status, 400);
}

TEST_F(Http, BinaryBodyAndBase64) {
  // "\x00\xff\xfe binary" in base64.
  auto put = Call("POST", "/topics/bin/jobs", R"({"body_base64":"AP/+IGJpbmFyeQ=="})");
  ASSERT_EQ(put.status, 201) << put.body;
  auto res = Call("POST", "/topics/bin/reserve", "");
  auto j = Json(res.body);
  ASSERT_EQ(j["jobs"].Size(), 1u) << res.body;
  EXPECT_FALSE(j["jobs"][0].HasMember("body"));
  EXPECT_STREQ(j["jobs"][0]["body_base64"].GetString(), "AP/+IGJpbmFyeQ==");
  // Text stays text, UTF-8 included.
  Put("bin", R"({"body":"h\u00e9llo \u2603"})");
  auto t = Json(Call("POST", "/topics/bin/reserve", "").body);
  EXPECT_STREQ(t["jobs"][0]["body"].GetString(), "h\xc3\xa9llo \xe2\x98\x83");
  EXPECT_EQ(Call("POST", "/topics/bin/jobs", R"({"body_base64":"!!"})").status, 400);
}

TEST_F(Http, BatchPutAndBatchReserve) {
  std::string batch = R"({"jobs":[)";
  for (int i = 0; i < 10; ++i) {
    if (i > 0) batch += ",";
    batch +=
        R"({"body":"job )" + std::to_string(i) + R"(","priority":)" + std::to_string(100 - i) + "}";
  }
  batch += R"(,{"key":"k1"},{"key":"k1"}]})";
  auto put = Call("POST", "/topics/b/jobs", batch);
  ASSERT_EQ(put.status, 200) << put.body;
  auto p = Json(put.body);
  ASSERT_EQ(p["jobs"].Size(), 12u);
  EXPECT_TRUE(p["jobs"][10]["created"].GetBool());
  EXPECT_FALSE(p["jobs"][11]["created"].GetBool());
  EXPECT_EQ(p["jobs"][10]["id"].GetUint64(), p["jobs"][11]["id"].GetUint64());

  auto res = Call("POST", "/reserve", R"({"topics":["b"],"count":4})");
  auto r = Json(res.body);
  ASSERT_EQ(r["jobs"].Size(), 4u) << res.body;
  // Priority order: job 9 (priority 91) first.
  EXPECT_STREQ(r["jobs"][0]["body"].GetString(), "job 9");
  EXPECT_STREQ(r["jobs"][3]["body"].GetString(), "job 6");

  // A bad job anywhere rejects the whole batch.
  auto bad = Call("POST", "/topics/b/jobs", R"({"jobs":[{"body":"a"},{"ttr_ms":0}]})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("jobs[1]"), std::string::npos) << bad.body;
  std::string big = R"({"jobs":[)";
  for (int i = 0; i < 1001; ++i) big += i ? ",{}" : "{}";
  big += "]}";
  EXPECT_EQ(Call("POST", "/topics/b/jobs", big).status, 400);
  EXPECT_EQ(Call("POST", "/topics/b/jobs", R"({"jobs":[]})").status, 400);
  EXPECT_EQ(Call("POST", "/reserve", R"({"topics":["b"],"count":1001})").status, 400);
}

TEST_F(Http, ReleaseBuryKickTouch) {
  uint64_t id = Put("w", R"({"body":"b","priority":5})");
  std::string base = "/jobs/" + std::to_string(id);
  auto with = [](const std::string& lease, const std::string& more = "") {
    return R"({"lease":")" + lease + "\"" + (more.empty() ? "" : "," + more) + "}";
  };
  // Not reserved: whatever lease is named, it does not hold the job.
  const std::string stale = "0123456789abcdef";
  auto lost = Call("POST", base + "/release", with(stale));
  EXPECT_EQ(lost.status, 409) << lost.body;
  EXPECT_EQ(ErrorCode(lost), "lease_lost");
  EXPECT_NE(lost.body.find("is ready now"), std::string::npos) << lost.body;
  EXPECT_EQ(Call("POST", base + "/finish", with(stale)).status, 409);
  EXPECT_EQ(Call("POST", base + "/touch", with(stale)).status, 409);
  EXPECT_EQ(Call("POST", base + "/bury", with(stale)).status, 409);
  auto not_kickable = Call("POST", base + "/kick");
  EXPECT_EQ(not_kickable.status, 409);
  EXPECT_EQ(ErrorCode(not_kickable), "conflict");
  // No lease at all: a bad request.
  EXPECT_EQ(Call("POST", base + "/release").status, 400);
  EXPECT_EQ(Call("POST", base + "/touch", R"({"lease":7})").status, 400);

  auto reserve = [&] {
    auto r = Json(Call("POST", "/reserve", R"({"topics":["w"]})").body);
    EXPECT_EQ(r["jobs"].Size(), 1u);
    return std::string(r["jobs"].Size() == 1 ? r["jobs"][0]["lease"].GetString() : "");
  };
  std::string lease = reserve();
  EXPECT_EQ(Call("POST", base + "/touch", with(stale)).status, 409);
  auto touch = Call("POST", base + "/touch", with(lease));
  EXPECT_EQ(touch.status, 200) << touch.body;
  EXPECT_TRUE(Json(touch.body).HasMember("deadline_ms"));
  EXPECT_STREQ(Json(touch.body)["state"].GetString(), "reserved");
  auto rel = Call("POST", base + "/release", with(lease, R"("delay_ms":60000,"priority":7)"));
  ASSERT_EQ(rel.status, 200) << rel.body;
  EXPECT_STREQ(Json(rel.body)["state"].GetString(), "delayed");
  EXPECT_EQ(Json(rel.body)["priority"].GetUint(), 7u);
  EXPECT_TRUE(Json(rel.body).HasMember("due_ms"));
  // The lease went with the release.
  EXPECT_EQ(ErrorCode(Call("POST", base + "/finish", with(lease))), "lease_lost");
  auto got = Json(Call("GET", base).body);
  EXPECT_EQ(got["priority"].GetUint(), 7u);
  EXPECT_EQ(got["releases"].GetUint(), 1u);

  auto kick = Call("POST", base + "/kick");
  EXPECT_EQ(kick.status, 200) << kick.body;
  EXPECT_STREQ(Json(kick.body)["state"].GetString(), "ready");
  std::string second = reserve();
  EXPECT_NE(second, lease);
  EXPECT_EQ(Call("POST", base + "/bury", with(lease)).status, 409);
  auto bury = Call("POST", base + "/bury", with(second));
  EXPECT_EQ(bury.status, 200) << bury.body;
  EXPECT_STREQ(Json(bury.body)["state"].GetString(), "buried");
  EXPECT_EQ(Json(bury.body)["priority"].GetUint(), 7u) << "a bury without priority keeps it";
  EXPECT_STREQ(Json(Call("GET", base).body)["state"].GetString(), "buried");
  auto kt = Call("POST", "/topics/w/kick", R"({"bound":10})");
  EXPECT_EQ(kt.body, R"({"kicked":1})"
                     "\n");
  EXPECT_STREQ(Json(Call("GET", base).body)["state"].GetString(), "ready");
  EXPECT_EQ(Call("DELETE", base).status, 200);
  EXPECT_EQ(Call("DELETE", base).status, 404);
  EXPECT_EQ(Call("POST", "/jobs/99999/release", with(stale)).status, 404);
}

TEST_F(Http, TopicsStatsPauseClear) {
  Put("a", R"({"body":"1"})");
  Put("a", R"({"body":"2","delay_ms":100000})");
  Put("b", R"({"body":"3"})");
  auto list = Call("GET", "/topics");
  ASSERT_EQ(list.status, 200);
  auto l = Json(list.body);
  std::set<std::string> names;
  for (const auto& t : l["topics"].GetArray()) names.insert(t.GetString());
  EXPECT_TRUE(names.count("a") && names.count("b")) << list.body;

  auto ts = Json(Call("GET", "/topics/a").body);
  EXPECT_EQ(ts["jobs"]["ready"].GetUint64(), 1u);
  EXPECT_EQ(ts["jobs"]["delayed"].GetUint64(), 1u);
  EXPECT_EQ(ts["total_jobs"].GetUint64(), 2u);
  EXPECT_EQ(Call("GET", "/topics/nope").status, 404);
  EXPECT_EQ(Call("GET", "/topics/-bad").status, 400);
  // ?empty=true: a topic that does not exist is empty; one that does is as ever.
  auto none = Call("GET", "/topics/nope?empty=true");
  ASSERT_EQ(none.status, 200) << none.body;
  auto n = Json(none.body);
  EXPECT_EQ(std::string(n["name"].GetString()), "nope");
  EXPECT_EQ(n["jobs"]["ready"].GetUint64(), 0u);
  EXPECT_EQ(n["total_jobs"].GetUint64(), 0u);
  EXPECT_EQ(Json(Call("GET", "/topics/a?empty=true").body)["total_jobs"].GetUint64(), 2u);
  EXPECT_EQ(Call("GET", "/topics/nope?empty=false").status, 404);
  EXPECT_EQ(Call("GET", "/topics/nope?empty=maybe").status, 400);
  EXPECT_EQ(Call("GET", "/topics/a?stats=true").status, 400);  // not this route's

  auto pause = Call("POST", "/topics/a/pause", R"({"delay_ms":60000})");
  EXPECT_EQ(pause.status, 200) << pause.body;
  EXPECT_TRUE(Json(Call("GET", "/topics/a").body)["paused"].GetBool());
  EXPECT_EQ(Json(Call("POST", "/reserve", R"({"topics":["a"]})").body)["jobs"].Size(), 0u);
  EXPECT_EQ(Call("POST", "/topics/a/pause", "{}").status, 400);
  Call("POST", "/topics/a/pause", R"({"delay_ms":0})");
  EXPECT_FALSE(Json(Call("GET", "/topics/a").body)["paused"].GetBool());

  auto clear = Call("POST", "/topics/a/clear", R"({"states":["delayed"]})");
  EXPECT_EQ(clear.body, R"({"cleared":1})"
                        "\n");
  auto clear_all = Call("POST", "/topics/a/clear");
  EXPECT_EQ(clear_all.body, R"({"cleared":1})"
                            "\n");
  EXPECT_EQ(Call("POST", "/topics/a/clear", R"({"states":["reserved"]})").status, 400);

  auto st = Call("GET", "/stats");
  ASSERT_EQ(st.status, 200);
  auto s = Json(st.body);
  EXPECT_EQ(s["jobs"]["ready"].GetUint64(), 1u) << st.body;
  EXPECT_STREQ(s["version"].GetString(), "0.1.0");
  auto h = Call("GET", "/healthz");
  EXPECT_EQ(h.status, 200);
  EXPECT_FALSE(Json(h.body)["draining"].GetBool());
  HttpClient c(http_port_);
  auto head = c.Call("HEAD", "/healthz");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
  EXPECT_EQ(c.Call("GET", "/healthz").status, 200);  // the connection stayed in step
}

TEST_F(Http, Errors) {
  auto bad_json = Call("POST", "/topics/t/jobs", R"({"body":)");
  EXPECT_EQ(bad_json.status, 400);
  EXPECT_EQ(ErrorCode(bad_json), "bad_json");
  auto trailing = Call("POST", "/topics/t/jobs", R"({} x)");
  EXPECT_EQ(ErrorCode(trailing), "bad_json");
  auto not_obj = Call("POST", "/topics/t/jobs", "[1]");
  EXPECT_EQ(ErrorCode(not_obj), "invalid_argument");
  auto unknown = Call("POST", "/topics/t/jobs", R"({"bdy":"typo"})");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(ErrorCode(unknown), "invalid_argument");
  EXPECT_NE(unknown.body.find("bdy"), std::string::npos);
  EXPECT_EQ(ErrorCode(Call("POST", "/topics/t/jobs", R"({"ttr_ms":"60"})")), "invalid_argument");
  EXPECT_EQ(ErrorCode(Call("POST", "/topics/t/jobs", R"({"priority":-1})")), "invalid_argument");
  EXPECT_EQ(ErrorCode(Call("POST", "/topics/t/jobs", R"({"key":"has space"})")),
            "invalid_argument");
  EXPECT_EQ(ErrorCode(Call("POST", "/topics/t/jobs", "{\"body\":\"\xff\"}")), "bad_json");
  EXPECT_EQ(Call("POST", "/topics/t%2/jobs", "{}").status, 400);
  // A topic with '/' goes percent-encoded.
  EXPECT_EQ(Call("POST", "/topics/a%2Fb/jobs", "{}").status, 201);
  EXPECT_EQ(Call("GET", "/topics/a%2Fb").status, 200);

  auto route = Call("GET", "/nowhere");
  EXPECT_EQ(route.status, 404);
  EXPECT_EQ(ErrorCode(route), "not_found");
  auto method = Call("PUT", "/topics/t/jobs", "{}");
  EXPECT_EQ(method.status, 405);
  EXPECT_EQ(ErrorCode(method), "method_not_allowed");
  EXPECT_EQ(method.Header("allow"), "POST, GET, HEAD");  // put, and the page of jobs
  EXPECT_EQ(Call("DELETE", "/stats").Header("allow"), "GET, HEAD");
  EXPECT_EQ(ErrorCode(Call("GET", "/jobs/abc")), "invalid_argument");
  EXPECT_EQ(ErrorCode(Call("GET", "/jobs/0")), "invalid_argument");

  std::string big(70000, 'x');
  auto too_big = Call("POST", "/topics/t/jobs", R"({"body":")" + big + R"("})");
  EXPECT_EQ(too_big.status, 413);
  EXPECT_EQ(ErrorCode(too_big), "job_too_big");

  EXPECT_EQ(ErrorCode(Call("POST", "/reserve", "{}")), "invalid_argument");
  EXPECT_EQ(ErrorCode(Call("POST", "/reserve", R"({"topics":["ok","-bad"]})")), "invalid_argument");
  EXPECT_EQ(ErrorCode(Call("POST", "/reserve", R"({"topics":["t"],"timeout_ms":-1})")),
            "invalid_argument");
}

TEST_F(Http, DrainingRefusesPuts) {
  server_.Signal(SIGUSR1);
  HttpResponse r;
  for (int i = 0; i < 200; ++i) {  // the signal arrives asynchronously
    r = Call("POST", "/topics/t/jobs", "{}");
    if (r.status == 503) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(ErrorCode(r), "draining");
  EXPECT_TRUE(Json(Call("GET", "/healthz").body)["draining"].GetBool());
}

TEST(HttpLimits, OversizedHeaderAndBody) {
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(DelayqdPath(), {"--in-memory", "--http-max-body", "2048"}, &error))
      << error;
  uint16_t port = HttpPortOf(server);
  ASSERT_NE(port, 0);
  {
    HttpClient c(port);
    std::string body = R"({"body":")" + std::string(3000, 'x') + R"("})";
    auto r = c.Call("POST", "/topics/t/jobs", body);
    EXPECT_EQ(r.status, 413) << r.body;
    EXPECT_EQ(ErrorCode(r), "payload_too_large");
    EXPECT_TRUE(c.WaitClosed(5s));
  }
  {
    HttpClient c(port);
    std::string extra = "X-Big: " + std::string(20000, 'h') + "\r\n";
    auto r = c.Call("GET", "/healthz", "", extra);
    EXPECT_EQ(r.status, 431) << r.body;
    EXPECT_EQ(ErrorCode(r), "header_too_large");
    EXPECT_TRUE(c.WaitClosed(5s));
  }
  {
    HttpClient c(port);
    c.Send("NOT HTTP AT ALL\r\n\r\n");
    auto r = c.Read();
    EXPECT_EQ(r.status, 400) << r.body << r.error;
    EXPECT_EQ(ErrorCode(r), "bad_request");
  }
  {
    // A body under the limit with Expect: 100-continue gets the interim reply.
    HttpClient c(port);
    std::string body = R"({"body":"continue"})";
    c.Send("POST /topics/t/jobs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n");
    c.Send(body);
    auto r = c.Read();
    EXPECT_EQ(r.status, 201) << r.body << r.error;
  }
  int st = server.Stop();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

TEST_F(Http, KeepAliveAndPipelining) {
  HttpClient c(http_port_);
  // Three requests in one write: replies come back in order.
  std::string batch = HttpRequestText("POST", "/topics/p/jobs", R"({"body":"one"})") +
                      HttpRequestText("POST", "/topics/p/jobs", R"({"body":"two"})") +
                      HttpRequestText("POST", "/reserve", R"({"topics":["p"],"count":2})") +
                      HttpRequestText("GET", "/topics/p");
  ASSERT_TRUE(c.Send(batch));
  auto a = c.Read(), b = c.Read(), r = c.Read(), s = c.Read();
  ASSERT_TRUE(a.ok && b.ok && r.ok && s.ok) << a.error << b.error << r.error << s.error;
  EXPECT_EQ(a.status, 201);
  EXPECT_EQ(b.status, 201);
  EXPECT_EQ(Json(b.body)["id"].GetUint64(), Json(a.body)["id"].GetUint64() + 1);
  auto jr = Json(r.body);
  ASSERT_EQ(jr["jobs"].Size(), 2u) << r.body;
  EXPECT_STREQ(jr["jobs"][0]["body"].GetString(), "one");
  EXPECT_EQ(Json(s.body)["jobs"]["reserved"].GetUint64(), 2u);
  // Byte by byte, the same connection still works.
  std::string one = HttpRequestText("GET", "/healthz");
  for (char ch : one) ASSERT_TRUE(c.Send(std::string_view(&ch, 1)));
  EXPECT_EQ(c.Read().status, 200);
  // A long-poll ahead of a pipelined request holds it back, in order.
  ASSERT_TRUE(c.Send(HttpRequestText("POST", "/reserve", R"({"topics":["q"],"timeout_ms":300})") +
                     HttpRequestText("GET", "/healthz")));
  auto lp = c.Read();
  EXPECT_EQ(lp.status, 200);
  EXPECT_EQ(Json(lp.body)["jobs"].Size(), 0u) << lp.body;
  EXPECT_EQ(c.Read().status, 200);
  // Connection: close is honoured.
  auto last = c.Call("GET", "/healthz", "", "Connection: close\r\n");
  EXPECT_EQ(last.status, 200);
  EXPECT_EQ(last.Header("connection"), "close");
  EXPECT_TRUE(c.WaitClosed(5s));
  // HTTP/1.0 closes unless asked to keep alive.
  HttpClient old(http_port_);
  old.Send("GET /healthz HTTP/1.0\r\n\r\n");
  EXPECT_EQ(old.Read().status, 200);
  EXPECT_TRUE(old.WaitClosed(5s));
}

TEST_F(Http, PipelinedRequestsOfAClientThatDoesNotReadAreNotRunAhead) {
#ifdef DELAYQ_SANITIZED
  GTEST_SKIP() << "ASan keeps freed memory in quarantine: the RSS says nothing here";
#endif
  // A 60 KB job, then GETs of it for as long as the connection takes them,
  // nothing read. Running every request received buffered 636 MB of
  // replies after 3 s; the server must stop at a bounded amount.
  uint64_t id = Put("big", R"({"body":")" + std::string(60000, 'b') + R"("})");
  ASSERT_NE(id, 0u);
  HttpClient c(http_port_);
  std::string one = HttpRequestText("GET", "/jobs/" + std::to_string(id));
  const std::string req = Repeated(one, 2000);
  const uint64_t rss_before = RssKb(server_.pid());
  std::string error;
  uint64_t sent = SendWithoutReading(c.fd(), req, 2s, &error);
  ASSERT_EQ(error, "");
  ASSERT_GT(sent / one.size(), 20'000u) << "the test needs a long pipeline";
  std::this_thread::sleep_for(300ms);
  const uint64_t rss_after = RssKb(server_.pid());
  EXPECT_LT(rss_after, rss_before + 100 * 1024)
      << rss_before << " KB before, " << sent / one.size() << " requests sent";
  // The connection still works: whole replies, in order.
  for (int i = 0; i < 20; ++i) {
    HttpResponse r = c.Read();
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.status, 200) << i;
    EXPECT_EQ(Json(r.body)["id"].GetUint64(), id);
  }
}

TEST_F(Http, LongPollWakesOnPut) {
  HttpClient waiter(http_port_, 20s);
  ASSERT_TRUE(waiter.Send(
      HttpRequestText("POST", "/reserve", R"({"topics":["lp-a","lp-b"],"timeout_ms":15000})")));
  // Nothing yet.
  auto early = waiter.Read(300ms);
  EXPECT_FALSE(early.ok);
  EXPECT_EQ(early.error, "timeout");
  uint64_t id = Put("lp-b", R"({"body":"wake up"})");
  auto r = waiter.Read(15s);
  ASSERT_TRUE(r.ok) << r.error;
  auto j = Json(r.body);
  ASSERT_EQ(j["jobs"].Size(), 1u) << r.body;
  EXPECT_EQ(j["jobs"][0]["id"].GetUint64(), id);
  EXPECT_STREQ(j["jobs"][0]["topic"].GetString(), "lp-b");

  // A long-poll that times out answers with no jobs.
  auto t = Json(Call("POST", "/reserve", R"({"topics":["lp-a"],"timeout_ms":100})").body);
  EXPECT_EQ(t["jobs"].Size(), 0u);
}

TEST_F(Http, ClosedLongPollTakesNoJob) {
  {
    HttpClient gone(http_port_);
    ASSERT_TRUE(
        gone.Send(HttpRequestText("POST", "/reserve", R"({"topics":["c"],"timeout_ms":60000})")));
    std::this_thread::sleep_for(200ms);
  }  // closed while waiting
  // The server noticed: no waiter left on the topic.
  for (int i = 0; i < 200; ++i) {
    if (Json(Call("GET", "/topics/c").body)["waiting"].GetUint64() == 0) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(Json(Call("GET", "/topics/c").body)["waiting"].GetUint64(), 0u);
  uint64_t id = Put("c", R"({"body":"for the next one"})");
  auto r = Json(Call("POST", "/reserve", R"({"topics":["c"]})").body);
  ASSERT_EQ(r["jobs"].Size(), 1u);
  EXPECT_EQ(r["jobs"][0]["id"].GetUint64(), id);
}

TEST_F(Http, SigtermAnswersWaitingLongPolls) {
  std::vector<std::unique_ptr<HttpClient>> waiters;
  for (int i = 0; i < 5; ++i) {
    waiters.push_back(std::make_unique<HttpClient>(http_port_, 20s));
    ASSERT_TRUE(waiters.back()->Send(
        HttpRequestText("POST", "/reserve", R"({"topics":["s"],"timeout_ms":60000})")));
  }
  HttpClient idle(http_port_);
  EXPECT_EQ(idle.Call("GET", "/healthz").status, 200);
  std::this_thread::sleep_for(200ms);
  auto t0 = std::chrono::steady_clock::now();
  int st = server_.Stop(20s);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st << server_.Log();
  EXPECT_LT(MillisSince(t0), 10000) << "the long-polls held up the stop";
  for (auto& w : waiters) {
    auto r = w->Read(1s);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(Json(r.body)["jobs"].Size(), 0u);
    EXPECT_EQ(r.Header("connection"), "close");
  }
  EXPECT_TRUE(idle.WaitClosed(1s));
}

TEST(HttpIdle, IdleConnectionsAreClosed) {
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(DelayqdPath(), {"--in-memory", "--http-idle-timeout", "1s"}, &error))
      << error;
  uint16_t port = HttpPortOf(server);
  ASSERT_NE(port, 0);
  HttpClient c(port);
  EXPECT_EQ(c.Call("GET", "/healthz").status, 200);
  EXPECT_TRUE(c.WaitClosed(10s));
  // A waiting long-poll is not idle.
  HttpClient w(port, 10s);
  ASSERT_TRUE(w.Send(HttpRequestText("POST", "/reserve", R"({"topics":["i"],"timeout_ms":2500})")));
  auto r = w.Read(10s);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200);
  int st = server.Stop();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

// ---- Youzan-style -----------------------------------------------------------------

using HttpYouzan = HttpFixture;

TEST_F(HttpYouzan, PushPopFinish) {
  auto push = Call("POST", "/push",
                   R"({"topic":"order","id":"15702398321","delay":0,"ttr":120,"body":"close"})");
  ASSERT_EQ(push.status, 200);
  auto p = Json(push.body);
  EXPECT_EQ(p["code"].GetInt(), 0) << push.body;
  EXPECT_TRUE(p["data"].IsNull());
  // Same id again: kept once.
  auto again = Json(Call("POST", "/push",
                         R"({"topic":"order","id":"15702398321","delay":0,"ttr":120,"body":"x"})")
                        .body);
  EXPECT_EQ(again["code"].GetInt(), 0);
  EXPECT_STREQ(again["message"].GetString(), "exists");

  auto get = Json(Call("POST", "/get", R"({"id":"15702398321"})").body);
  EXPECT_EQ(get["code"].GetInt(), 0);
  EXPECT_STREQ(get["data"]["topic"].GetString(), "order");
  EXPECT_STREQ(get["data"]["body"].GetString(), "close");
  EXPECT_EQ(get["data"]["ttr"].GetInt(), 120);

  auto pop = Json(Call("POST", "/pop", R"({"topic":"other,order","timeout":0})").body);
  EXPECT_EQ(pop["code"].GetInt(), 0);
  ASSERT_TRUE(pop["data"].IsObject());
  EXPECT_STREQ(pop["data"]["id"].GetString(), "15702398321");
  EXPECT_STREQ(pop["data"]["body"].GetString(), "close");
  auto none = Json(Call("POST", "/pop", R"({"topic":"order","timeout":0})").body);
  EXPECT_TRUE(none["data"].IsNull());

  auto fin = Json(Call("POST", "/finish", R"({"id":"15702398321"})").body);
  EXPECT_EQ(fin["code"].GetInt(), 0);
  auto after = Json(Call("POST", "/get", R"({"id":"15702398321"})").body);
  EXPECT_TRUE(after["data"].IsNull());
  // As in the original: finishing or deleting an unknown id succeeds.
  EXPECT_EQ(Json(Call("POST", "/delete", R"({"id":"nope"})").body)["code"].GetInt(), 0);
}

TEST_F(HttpYouzan, DelayDeleteAndErrors) {
  auto push =
      Json(Call("POST", "/push", R"({"topic":"t","id":"a1","delay":3600,"ttr":10,"body":"later"})")
               .body);
  EXPECT_EQ(push["code"].GetInt(), 0);
  auto get = Json(Call("POST", "/get", R"({"id":"a1"})").body);
  EXPECT_STREQ(get["data"]["state"].GetString(), "delayed");
  EXPECT_GE(get["data"]["delay"].GetInt(), 3598);
  EXPECT_EQ(Json(Call("POST", "/delete", R"({"id":"a1"})").body)["code"].GetInt(), 0);
  EXPECT_EQ(Json(Call("GET", "/topics/t").body)["jobs"]["delayed"].GetUint64(), 0u);

  auto fails = [&](std::string_view route, std::string_view body) {
    auto r = Call("POST", route, body);
    EXPECT_EQ(r.status, 200);
    auto j = Json(r.body);
    return j.IsObject() && j["code"].GetInt() == 1 && j["data"].IsNull();
  };
  EXPECT_TRUE(fails("/push", R"({"topic":"t","delay":1,"ttr":1})"));  // no id
  EXPECT_TRUE(fails("/push", R"({"id":"x","delay":1,"ttr":1})"));     // no topic
  EXPECT_TRUE(fails("/push", R"({"topic":"t","id":"x","delay":1,"ttr":0})"));
  EXPECT_TRUE(fails("/push", R"({"topic":"t","id":"x","delay":-1,"ttr":5})"));
  EXPECT_TRUE(fails("/push", R"({"topic":"t","id":"x","delay":1,"ttr":86401})"));
  EXPECT_TRUE(fails("/push", "not json"));
  EXPECT_TRUE(fails("/pop", R"({"topic":""})"));
  EXPECT_TRUE(fails("/finish", R"({})"));
  EXPECT_TRUE(fails("/get", R"({"id":""})"));
  EXPECT_EQ(Call("GET", "/push").status, 405);
}

TEST_F(HttpYouzan, PopWaitsForAPush) {
  HttpClient waiter(http_port_, 20s);
  ASSERT_TRUE(waiter.Send(HttpRequestText("POST", "/pop", R"({"topic":"yz","timeout":15})")));
  std::this_thread::sleep_for(200ms);
  Call("POST", "/push", R"({"topic":"yz","id":"w1","delay":0,"ttr":5,"body":"hi"})");
  auto r = waiter.Read(15s);
  ASSERT_TRUE(r.ok) << r.error;
  auto j = Json(r.body);
  ASSERT_TRUE(j["data"].IsObject()) << r.body;
  EXPECT_STREQ(j["data"]["id"].GetString(), "w1");
}

// ---- cross-protocol ------------------------------------------------------------------

using HttpCross = HttpFixture;

TEST_F(HttpCross, BeanstalkPutHttpReserveAndBack) {
  RawClient bean(server_.port());
  ASSERT_TRUE(bean.ok());
  EXPECT_EQ(bean.Call("use x\r\n"), "USING x\r\n");
  std::string ins = bean.Call("put 10 0 60 5\r\nhello\r\n");
  ASSERT_EQ(ins.rfind("INSERTED ", 0), 0u) << ins;
  uint64_t id = std::stoull(ins.substr(9));
  auto r = Json(Call("POST", "/reserve", R"({"topics":["x"]})").body);
  ASSERT_EQ(r["jobs"].Size(), 1u);
  EXPECT_EQ(r["jobs"][0]["id"].GetUint64(), id);
  EXPECT_STREQ(r["jobs"][0]["body"].GetString(), "hello");
  EXPECT_EQ(r["jobs"][0]["priority"].GetUint(), 10u);
  // Held by its lease: a beanstalkd connection cannot finish it (as it
  // cannot finish a job another connection reserved).
  EXPECT_EQ(bean.Call("delete " + std::to_string(id) + "\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(bean.Call("release " + std::to_string(id) + " 1 0\r\n"), "NOT_FOUND\r\n");
  std::string lease = r["jobs"][0]["lease"].GetString();
  auto finished =
      Call("POST", "/jobs/" + std::to_string(id) + "/finish", R"({"lease":")" + lease + R"("})");
  EXPECT_EQ(finished.status, 200) << finished.body;

  // HTTP put, beanstalkd reserve.
  uint64_t id2 = Put("x", R"({"body":"from http","ttr_ms":5000})");
  EXPECT_EQ(bean.Call("watch x\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(bean.Call("reserve-with-timeout 5\r\n"),
            "RESERVED " + std::to_string(id2) + " 9\r\nfrom http\r\n");
  // Reserved by that connection: no lease holds it.
  auto fin =
      Call("POST", "/jobs/" + std::to_string(id2) + "/finish", R"({"lease":"0123456789abcdef"})");
  EXPECT_EQ(fin.status, 409) << fin.body;
  EXPECT_EQ(ErrorCode(fin), "lease_lost");
  EXPECT_EQ(bean.Call("delete " + std::to_string(id2) + "\r\n"), "DELETED\r\n");

  // put-ex with a key, seen by key over HTTP.
  std::string ex = bean.Call("put-ex 5 60000 1000 3 key=k9\r\nabc\r\n");
  ASSERT_EQ(ex.rfind("INSERTED ", 0), 0u) << ex;
  auto byk = Json(Call("GET", "/topics/x/keys/k9").body);
  EXPECT_STREQ(byk["state"].GetString(), "delayed");
  EXPECT_STREQ(byk["body"].GetString(), "abc");
}

// ---- concurrency -------------------------------------------------------------------

using HttpStress = HttpFixture;

TEST_F(HttpStress, ManyConcurrentClients) {
  constexpr int kClients = 40, kJobs = 50;
  std::atomic<int> failures{0};
  std::vector<std::thread> producers;
  for (int c = 0; c < kClients; ++c) {
    producers.emplace_back([&, c] {
      HttpClient client(http_port_);
      for (int i = 0; i < kJobs; ++i) {
        auto r = client.Call("POST", "/topics/stress/jobs",
                             R"({"body":")" + std::to_string(c * kJobs + i) + R"("})");
        if (r.status != 201) failures++;
      }
    });
  }
  std::mutex mu;
  std::multiset<std::string> seen;
  std::atomic<int> taken{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 8; ++w) {
    workers.emplace_back([&] {
      HttpClient client(http_port_, 20s);
      while (taken.load() < kClients * kJobs) {
        auto r =
            client.Call("POST", "/reserve", R"({"topics":["stress"],"count":7,"timeout_ms":200})");
        if (!r.ok) {
          failures++;
          return;
        }
        auto j = Json(r.body);
        for (const auto& job : j["jobs"].GetArray()) {
          {
            std::lock_guard<std::mutex> lock(mu);
            seen.insert(job["body"].GetString());
          }
          auto f = client.Call("POST", "/jobs/" + std::to_string(job["id"].GetUint64()) + "/finish",
                               R"({"lease":")" + std::string(job["lease"].GetString()) + R"("})");
          if (f.status != 200) failures++;
          taken++;
        }
      }
    });
  }
  for (auto& t : producers) t.join();
  for (auto& t : workers) t.join();
  EXPECT_EQ(failures.load(), 0);
  ASSERT_EQ(seen.size(), static_cast<size_t>(kClients * kJobs));
  for (int i = 0; i < kClients * kJobs; ++i) EXPECT_EQ(seen.count(std::to_string(i)), 1u) << i;
  auto st = Json(Call("GET", "/stats").body);
  EXPECT_EQ(st["jobs"]["ready"].GetUint64() + st["jobs"]["reserved"].GetUint64(), 0u);
}

// ---- durability --------------------------------------------------------------------

TEST(HttpDurable, PutSurvivesKill9) {
  TempDir dir;
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(DelayqdPath(), {"-b", dir.path()}, &error)) << error;
  uint16_t port = HttpPortOf(server);
  ASSERT_NE(port, 0);
  HttpClient c(port);
  auto put = c.Call("POST", "/topics/d/jobs",
                    R"({"body":"keep me","key":"order-1","delay_ms":3600000,"max_tries":3})");
  ASSERT_EQ(put.status, 201) << put.body;
  uint64_t id = Json(put.body)["id"].GetUint64();
  auto put2 = c.Call("POST", "/topics/d/jobs", R"({"body":"ready one"})");
  ASSERT_EQ(put2.status, 201);
  kill(server.pid(), SIGKILL);
  for (int i = 0; i < 500 && server.Alive(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_FALSE(server.Alive());

  ServerProcess again;
  ASSERT_TRUE(again.Start(DelayqdPath(), {"-b", dir.path()}, &error)) << error;
  uint16_t port2 = HttpPortOf(again);
  HttpClient c2(port2);
  auto got = c2.Call("GET", "/topics/d/keys/order-1");
  ASSERT_EQ(got.status, 200) << got.body;
  auto j = Json(got.body);
  EXPECT_EQ(j["id"].GetUint64(), id);
  EXPECT_STREQ(j["body"].GetString(), "keep me");
  EXPECT_STREQ(j["state"].GetString(), "delayed");
  EXPECT_EQ(j["max_tries"].GetUint(), 3u);
  auto r = Json(c2.Call("POST", "/reserve", R"({"topics":["d"]})").body);
  ASSERT_EQ(r["jobs"].Size(), 1u);
  EXPECT_STREQ(r["jobs"][0]["body"].GetString(), "ready one");
  int st = again.Stop();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

// ---- browsing jobs (docs/http-api.md, "Browsing jobs") ----------------------------------
// GET /topics/{topic}/jobs and GET /jobs?key=K against delayqd on each
// backend (the parameter): in memory, on its store with a horizon of one
// second (delayed jobs an hour away are then on disk only), and on a
// redis-server the test starts.

enum class Where { kMemory, kDisk, kRedis };

std::string WhereName(const ::testing::TestParamInfo<Where>& p) {
  return p.param == Where::kMemory ? "Memory" : p.param == Where::kDisk ? "Disk" : "Redis";
}

// The secrets of the scope test's tokens.
constexpr const char* kShopReader = "dq_shop-reader-secret";  // shop.*: consume
constexpr const char* kAllRights = "dq_all-rights-secret";    // *: every right

class Browse : public HttpFixture, public ::testing::WithParamInterface<Where> {
 protected:
  void SetUp() override {
    if (GetParam() == Where::kRedis && !RedisServerAvailable()) GTEST_SKIP() << "no redis-server";
    // Tokens for ScopeOfTheCaller; loopback stays trusted without one.
    const std::string file = dir_.path() + "/tokens.toml";
    auto entry = [](const char* name, const char* secret, const char* topics, const char* rights) {
      return std::string("[[token]]\nname = \"") + name + "\"\nsha256 = \"" +
             DigestHex(Sha256(secret)) + "\"\ntopics = " + topics + "\nrights = " + rights + "\n";
    };
    std::ofstream(file) << entry("shop", kShopReader, R"(["shop.*"])", R"(["consume"])")
                        << entry("all", kAllRights, R"(["*"])",
                                 R"(["produce", "consume", "admin"])");
    Start({"--auth-file", file});
  }
  void Start(std::vector<std::string> args) {
    std::string error;
    switch (GetParam()) {
      case Where::kMemory:
        args.push_back("--in-memory");
        break;
      case Where::kDisk:
        args.insert(args.end(), {"--data-dir", dir_.path() + "/data", "--horizon", "1s"});
        break;
      case Where::kRedis:
        ASSERT_TRUE(redis_.StartForDelayqd(&error, &args)) << error;
        break;
    }
    StartServer(args);
  }
  HttpResponse CallAs(std::string_view secret, std::string_view method, std::string_view target,
                      std::string_view body = {}) {
    HttpClient c(http_port_);
    return c.Call(method, target, body, "Authorization: Bearer " + std::string(secret) + "\r\n");
  }
  // Reserves up to `count` jobs of `topic`: their ids and leases.
  std::vector<std::pair<uint64_t, std::string>> Reserve(const std::string& topic, int count) {
    auto r =
        Call("POST", "/topics/" + topic + "/reserve", R"({"count":)" + std::to_string(count) + "}");
    auto d = Json(r.body);
    std::vector<std::pair<uint64_t, std::string>> out;
    if (r.status != 200 || !d.IsObject() || !d.HasMember("jobs")) {
      ADD_FAILURE() << "reserve failed: " << r.status << " " << r.body;
      return out;
    }
    for (const auto& j : d["jobs"].GetArray())
      out.emplace_back(j["id"].GetUint64(), j["lease"].GetString());
    return out;
  }

  // Every page of `topic`'s jobs in `state`, following "next": the ids in
  // the order shown. Checks each page as it goes.
  std::vector<uint64_t> PageThrough(const std::string& topic, const std::string& state, int limit,
                                    bool desc, const std::map<uint64_t, size_t>& bodies) {
    std::vector<uint64_t> ids;
    std::string after;
    for (int page = 0; page < 1000; ++page) {
      std::string target = "/topics/" + topic + "/jobs?state=" + state +
                           "&limit=" + std::to_string(limit) + (desc ? "&order=desc" : "");
      if (!after.empty()) target += "&after=" + after;
      HttpResponse r = Call("GET", target);
      EXPECT_EQ(r.status, 200) << target << ": " << r.body;
      auto d = Json(r.body);
      if (!d.IsObject() || !d.HasMember("jobs") || !d["jobs"].IsArray()) {
        ADD_FAILURE() << target << ": " << r.body;
        break;
      }
      const auto& jobs = d["jobs"];
      for (const auto& j : jobs.GetArray()) {
        const uint64_t id = j["id"].GetUint64();
        ids.push_back(id);
        EXPECT_STREQ(j["topic"].GetString(), topic.c_str());
        EXPECT_STREQ(j["state"].GetString(), state.c_str()) << id;
        EXPECT_FALSE(j.HasMember("body")) << r.body;
        EXPECT_FALSE(j.HasMember("body_base64")) << r.body;
        EXPECT_FALSE(j.HasMember("lease")) << r.body;
        EXPECT_TRUE(j.HasMember("body_bytes")) << r.body;
        if (!j.HasMember("body_bytes")) continue;
        if (auto b = bodies.find(id); b != bodies.end())
          EXPECT_EQ(j["body_bytes"].GetUint64(), b->second) << id;
        EXPECT_EQ(j.HasMember("due_ms"), state == "delayed") << r.body;
        EXPECT_EQ(j.HasMember("deadline_ms"), state == "reserved") << r.body;
      }
      if (!d.HasMember("next")) break;
      // "next" only after a full page, and it is the last id shown.
      EXPECT_EQ(jobs.Size(), static_cast<rapidjson::SizeType>(limit)) << r.body;
      if (jobs.Empty()) break;
      EXPECT_EQ(std::string(d["next"].GetString()), std::to_string(ids.back()));
      after = d["next"].GetString();
    }
    return ids;
  }

  TempDir dir_;
};

// 120 jobs in two topics in every state; each state paged through with 50
// and 7 a page, oldest and newest first: every job once, in id order, and
// no job of another state or topic.
TEST_P(Browse, PagesThroughEveryStateInIdOrder) {
  std::map<std::string, std::map<std::string, std::vector<uint64_t>>> want;  // topic, state
  std::map<uint64_t, size_t> bodies;
  // shop.a: 90 jobs, i % 9: 0-5 delayed an hour, 6 ready, 7 to reserve, 8
  // to bury; shop.b: 30 jobs, i % 3: 0 delayed, 1 ready, 2 to bury. The
  // priorities make a reserve take those to reserve, then those to bury.
  const std::map<std::string, int> sizes = {{"shop.a", 90}, {"shop.b", 30}};
  std::map<std::string, std::vector<uint64_t>> to_bury;
  for (const auto& [topic, n] : sizes) {
    for (int i = 0; i < n; ++i) {
      const int kind = topic == "shop.a" ? (i % 9 <= 5 ? 0 : i % 9 - 5) : (i % 3 == 2 ? 3 : i % 3);
      const std::string body(static_cast<size_t>(1 + i % 13), 'x');
      const char* pri = kind == 2 ? "1" : kind == 3 ? "2" : "100";
      const std::string delay = kind == 0 ? "3600000" : "0";
      uint64_t id = Put(topic, R"({"body":")" + body + R"(","priority":)" + pri +
                                   R"(,"ttr_ms":3600000,"delay_ms":)" + delay + "}");
      ASSERT_NE(id, 0u);
      bodies[id] = body.size();
      const char* state[] = {"delayed", "ready", "reserved", "buried"};
      want[topic][state[kind]].push_back(id);
    }
  }
  for (const auto& [topic, n] : sizes) {
    const size_t reserved = want[topic]["reserved"].size(), buried = want[topic]["buried"].size();
    auto got = Reserve(topic, static_cast<int>(reserved + buried));
    ASSERT_EQ(got.size(), reserved + buried);
    for (const auto& [id, lease] : got) {
      const auto& b = want[topic]["buried"];
      if (std::find(b.begin(), b.end(), id) == b.end()) continue;
      auto r =
          Call("POST", "/jobs/" + std::to_string(id) + "/bury", R"({"lease":")" + lease + "\"}");
      ASSERT_EQ(r.status, 200) << r.body;
    }
  }
  ASSERT_EQ(want["shop.a"]["delayed"].size(), 60u);
  ASSERT_EQ(want["shop.b"]["reserved"].size(), 0u);
  for (const auto& [topic, states] : want) {
    for (const char* state : {"ready", "delayed", "reserved", "buried"}) {
      std::vector<uint64_t> expect = want[topic][state];
      std::sort(expect.begin(), expect.end());
      for (int limit : {50, 7}) {
        for (bool desc : {false, true}) {
          SCOPED_TRACE(topic + " " + state + " limit " + std::to_string(limit) +
                       (desc ? " desc" : " asc"));
          std::vector<uint64_t> e = expect;
          if (desc) std::reverse(e.begin(), e.end());
          EXPECT_EQ(PageThrough(topic, state, limit, desc, bodies), e);
        }
      }
    }
  }
  // The default limit is 50; a limit beyond the jobs shows them all with no "next".
  auto d = Json(Call("GET", "/topics/shop.a/jobs?state=delayed").body);
  EXPECT_EQ(d["jobs"].Size(), 50u);
  EXPECT_STREQ(d["next"].GetString(), std::to_string(want["shop.a"]["delayed"][49]).c_str());
  d = Json(Call("GET", "/topics/shop.a/jobs?state=delayed&limit=1000").body);
  EXPECT_EQ(d["jobs"].Size(), 60u);
  EXPECT_FALSE(d.HasMember("next"));
  // A page shows the job as GET /jobs/{id} does, but for the body.
  const uint64_t first = want["shop.b"]["ready"].front();
  auto one = Json(Call("GET", "/jobs/" + std::to_string(first)).body);
  auto listed = Json(Call("GET", "/topics/shop.b/jobs?state=ready&limit=1").body);
  ASSERT_EQ(listed["jobs"].Size(), 1u);
  one.RemoveMember("body");
  one.AddMember("body_bytes", static_cast<uint64_t>(bodies[first]), one.GetAllocator());
  EXPECT_TRUE(one == listed["jobs"][0])
      << Call("GET", "/jobs/" + std::to_string(first)).body << " vs "
      << Call("GET", "/topics/shop.b/jobs?state=ready&limit=1").body;
  // An unknown topic has no jobs (not 404: a page of a topic that just
  // emptied looks the same).
  auto none = Call("GET", "/topics/nothing.here/jobs?state=ready");
  EXPECT_EQ(none.status, 200);
  EXPECT_EQ(none.body, R"({"jobs":[]})"
                       "\n");
}

// Jobs that change state between two pages: a page after the cursor shows
// each job still in the state once, never one shown before, in id order.
TEST_P(Browse, JobsMovingBetweenPagesAreNeitherRepeatedNorOutOfOrder) {
  std::vector<uint64_t> ids;
  for (int i = 0; i < 30; ++i) ids.push_back(Put("moving", R"({"body":"m","ttr_ms":3600000})"));
  auto first = Json(Call("GET", "/topics/moving/jobs?state=ready&limit=10").body);
  ASSERT_EQ(first["jobs"].Size(), 10u);
  const std::string cursor = first["next"].GetString();
  EXPECT_EQ(cursor, std::to_string(ids[9]));
  // Take the 5 oldest (shown already) and the 12th (not shown yet), delete
  // the 15th, and put 3 more (newer than every other).
  auto taken = Reserve("moving", 5);
  ASSERT_EQ(taken.size(), 5u);
  auto r = Call("POST", "/jobs/" + std::to_string(ids[11]) + "/kick");  // ready: refused
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(Call("DELETE", "/jobs/" + std::to_string(ids[14])).status, 200);
  for (int i = 0; i < 3; ++i) ids.push_back(Put("moving", R"({"body":"m"})"));
  std::vector<uint64_t> seen;
  for (const auto& j : first["jobs"].GetArray()) seen.push_back(j["id"].GetUint64());
  std::string after = cursor;
  while (!after.empty()) {
    auto page = Json(Call("GET", "/topics/moving/jobs?state=ready&limit=10&after=" + after).body);
    ASSERT_TRUE(page.IsObject() && page.HasMember("jobs"));
    for (const auto& j : page["jobs"].GetArray()) {
      EXPECT_GT(j["id"].GetUint64(), std::stoull(after));
      seen.push_back(j["id"].GetUint64());
    }
    after = page.HasMember("next") ? page["next"].GetString() : "";
  }
  std::vector<uint64_t> expect(ids.begin(), ids.begin() + 10);
  for (size_t i = 10; i < ids.size(); ++i)
    if (i != 14) expect.push_back(ids[i]);
  EXPECT_EQ(seen, expect);
  // The reserved ones are listed as such; a cursor naming a job that is
  // gone still works (it is only an id).
  auto reserved = Json(Call("GET", "/topics/moving/jobs?state=reserved").body);
  EXPECT_EQ(reserved["jobs"].Size(), 5u);
  auto from_gone = Json(
      Call("GET", "/topics/moving/jobs?state=ready&limit=1&after=" + std::to_string(ids[14])).body);
  ASSERT_EQ(from_gone["jobs"].Size(), 1u);
  EXPECT_EQ(from_gone["jobs"][0]["id"].GetUint64(), ids[15]);
  // Newest first after a cursor: the older ones.
  auto older = Json(
      Call("GET", "/topics/moving/jobs?state=ready&order=desc&after=" + std::to_string(ids[12]))
          .body);
  ASSERT_EQ(older["jobs"].Size(), 7u);  // ids[11] down to ids[5]: the 5 oldest are reserved
  EXPECT_EQ(older["jobs"][0]["id"].GetUint64(), ids[11]);
  EXPECT_EQ(older["jobs"][6]["id"].GetUint64(), ids[5]);
}

TEST_P(Browse, BadArgumentsAreRefusedWithWhatIsWrong) {
  struct Bad {
    std::string target, message;
  };
  const std::vector<Bad> bads = {
      {"/topics/t/jobs", "'state' is required: ready, delayed, reserved or buried"},
      {"/topics/t/jobs?state=done",
       "'state' must be ready, delayed, reserved or buried, not 'done'"},
      {"/topics/t/jobs?state=ready&limit=0", "'limit' must be an integer 1..1000"},
      {"/topics/t/jobs?state=ready&limit=1001", "'limit' must be an integer 1..1000"},
      {"/topics/t/jobs?state=ready&limit=5x", "'limit' must be an integer 1..1000"},
      {"/topics/t/jobs?state=ready&order=up",
       "'order' must be asc (oldest first) or desc (newest first)"},
      {"/topics/t/jobs?state=ready&after=-1",
       "'after' must be the 'next' of an earlier reply (a job id), not '-1'"},
      {"/topics/t/jobs?state=ready&after=0",
       "'after' must be the 'next' of an earlier reply (a job id), not '0'"},
      {"/topics/t/jobs?state=ready&sort=id",
       "unknown query parameter 'sort' (this route takes 'state', 'limit', 'order', 'after')"},
      {"/topics/t/jobs?state=ready&state=buried", "query parameter 'state' is given twice"},
      {"/topics/t/jobs?state=%zz", "bad percent-encoding in the query"},
      {"/topics/-t/jobs?state=ready", "bad topic name '-t'"},
      {"/jobs", "'key' is required: GET /jobs?key=K finds the jobs with key K in every topic"},
      {"/jobs?key=", "bad key ''"},
      {"/jobs?key=a&limit=3", "unknown query parameter 'limit' (this route takes 'key')"},
  };
  for (const Bad& b : bads) {
    HttpResponse r = Call("GET", b.target);
    EXPECT_EQ(r.status, 400) << b.target << ": " << r.body;
    auto d = Json(r.body);
    ASSERT_TRUE(d.IsObject() && d.HasMember("error")) << b.target << ": " << r.body;
    EXPECT_STREQ(d["error"]["code"].GetString(), "invalid_argument") << b.target;
    EXPECT_NE(std::string(d["error"]["message"].GetString()).find(b.message), std::string::npos)
        << b.target << ": " << r.body;
  }
  // Only GET (and HEAD) on the listing's path besides the put.
  HttpResponse r = Call("DELETE", "/topics/t/jobs");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("allow"), "POST, GET, HEAD");
  // Decoded values: a '+' is a space, %xx a byte.
  EXPECT_EQ(Call("GET", "/topics/t/jobs?st%61te=re%61dy&limit=+1").status, 400);  // " 1"
  EXPECT_EQ(Call("GET", "/topics/t/jobs?st%61te=re%61dy&limit=%31").status, 200);
}

// One key in several topics: GET /jobs?key=K shows each, in any state.
TEST_P(Browse, FindsAKeyInEveryTopic) {
  std::set<std::string> topics;
  std::map<std::string, uint64_t> ids;
  for (const char* topic : {"find.a", "find.b", "find.c"}) {
    const bool delayed = std::string_view(topic) == "find.b";
    ids[topic] = Put(topic, std::string(R"({"body":"hello","key":"order-42","delay_ms":)") +
                                (delayed ? "3600000" : "0") + "}");
    topics.insert(topic);
  }
  Put("find.d", R"({"body":"x","key":"order-43"})");
  Put("find.d", R"({"body":"x"})");
  auto found = [&](const std::string& key) {
    std::map<std::string, uint64_t> out;
    HttpResponse r = Call("GET", "/jobs?key=" + key);
    EXPECT_EQ(r.status, 200) << r.body;
    auto d = Json(r.body);
    EXPECT_FALSE(d.HasMember("next"));
    for (const auto& j : d["jobs"].GetArray()) {
      EXPECT_STREQ(j["key"].GetString(), key.c_str());
      EXPECT_EQ(j["body_bytes"].GetUint64(), key == "order-42" ? 5u : 1u);
      EXPECT_FALSE(j.HasMember("body"));
      out[j["topic"].GetString()] = j["id"].GetUint64();
      if (std::string_view(j["topic"].GetString()) == "find.b")
        EXPECT_STREQ(j["state"].GetString(), "delayed");
    }
    return out;
  };
  EXPECT_EQ(found("order-42"), ids);
  EXPECT_EQ(found("order-43").size(), 1u);
  EXPECT_TRUE(found("order-44").empty());
  ASSERT_EQ(Call("DELETE", "/jobs/" + std::to_string(ids["find.a"])).status, 200);
  ids.erase("find.a");
  EXPECT_EQ(found("order-42"), ids);
  // A key is taken apart as a query value: %2F is '/', which a key may hold.
  uint64_t slash = Put("find.a", R"({"body":"y","key":"a/b&c"})");
  auto d = Json(Call("GET", "/jobs?key=a%2Fb%26c").body);
  ASSERT_EQ(d["jobs"].Size(), 1u);
  EXPECT_EQ(d["jobs"][0]["id"].GetUint64(), slash);
}

// The read right on the topic: a token for other topics gets 403 for a
// listing, and a find shows only what the token may see. (A client on
// loopback that names a token is held to it.)
TEST_P(Browse, ScopeOfTheCaller) {
  for (const char* topic : {"shop.eu", "bank"}) {
    auto r = CallAs(kAllRights, "POST", "/topics/" + std::string(topic) + "/jobs",
                    R"({"body":"x","key":"k"})");
    ASSERT_EQ(r.status, 201) << r.body;
  }
  EXPECT_EQ(CallAs(kShopReader, "GET", "/topics/shop.eu/jobs?state=ready").status, 200);
  HttpResponse r = CallAs(kShopReader, "GET", "/topics/bank/jobs?state=ready");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(Call("GET", "/topics/bank/jobs?state=ready").status, 200);  // loopback: trusted
  auto d = Json(CallAs(kShopReader, "GET", "/jobs?key=k").body);
  ASSERT_EQ(d["jobs"].Size(), 1u);
  EXPECT_STREQ(d["jobs"][0]["topic"].GetString(), "shop.eu");
  EXPECT_EQ(Json(CallAs(kAllRights, "GET", "/jobs?key=k").body)["jobs"].Size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Backends, Browse,
                         ::testing::Values(Where::kMemory, Where::kDisk, Where::kRedis), WhereName);

}  // namespace
}  // namespace delayq::testing

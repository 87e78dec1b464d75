// The Youzan-style routes name a job by an id with no topic
// (docs/http-api.md, "Youzan-style routes"): a name given by /push, unique
// across topics while its job lives, or "#<number>" for a job put without
// one. These tests put jobs whose keys and numbers collide with the ids in
// play, in other topics and over both protocols, and check that /finish,
// /delete and /get act on the job the id names and on no other. They run on
// the Local backend and, as youzan_on_redis, on Redis.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "server/http_client.h"
#include "server/redis_process.h"
#include "server/server_process.h"
#include "temp_dir.h"

namespace delayq::testing {
namespace {

using namespace std::chrono_literals;

class Youzan : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> args = {"--in-memory"};
    std::string error;
    if (AgainstRedis()) {
      ASSERT_TRUE(redis_.Start(&error)) << error;
      args = {"--backend", redis_.url()};
    }
    ASSERT_TRUE(server_.Start(DelayqdPath(), args, &error)) << error;
    port_ = HttpPortOf(server_);
    ASSERT_NE(port_, 0) << server_.Log();
  }
  void TearDown() override {
    int st = server_.Stop();
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << server_.Log();
  }

  // A Youzan route's reply, parsed; {code, message, data}.
  rapidjson::Document Y(std::string_view route, std::string_view body) {
    HttpClient c(port_);
    auto r = c.Call("POST", route, body);
    EXPECT_EQ(r.status, 200) << route << " " << body << ": " << r.body << r.error;
    return Json(r.body);
  }
  static std::string Id(std::string_view id) { return R"({"id":")" + std::string(id) + R"("})"; }
  rapidjson::Document Push(std::string_view topic, std::string_view id, int delay = 0) {
    return Y("/push", R"({"topic":")" + std::string(topic) + R"(","id":")" + std::string(id) +
                          R"(","delay":)" + std::to_string(delay) + R"(,"ttr":60,"body":"b"})");
  }
  // The id /pop hands out for `topic`, or "" when no job came.
  std::string Pop(std::string_view topic) {
    auto p = Y("/pop", R"({"topic":")" + std::string(topic) + R"(","timeout":0})");
    if (!p["data"].IsObject()) return "";
    return p["data"]["id"].GetString();
  }
  // A native put: the job's number.
  uint64_t NativePut(std::string_view topic, std::string_view json) {
    HttpClient c(port_);
    auto r = c.Call("POST", "/topics/" + std::string(topic) + "/jobs", json);
    EXPECT_EQ(r.status, 201) << r.body;
    auto d = Json(r.body);
    return d.IsObject() && d.HasMember("id") ? d["id"].GetUint64() : 0;
  }
  // A job's state by number ("" when it is gone).
  std::string StateOf(uint64_t id) {
    HttpClient c(port_);
    auto r = c.Call("GET", "/jobs/" + std::to_string(id));
    if (r.status == 404) return "";
    return Json(r.body)["state"].GetString();
  }
  // A keyless job put over the beanstalkd protocol: its number.
  uint64_t BeanstalkPut(std::string_view tube) {
    RawClient b(server_.port());
    b.Call("use " + std::string(tube) + "\r\n");
    std::string ins = b.Call("put 0 0 60 1\r\nx\r\n");
    EXPECT_EQ(ins.rfind("INSERTED ", 0), 0u) << ins;
    return ins.rfind("INSERTED ", 0) == 0 ? std::stoull(ins.substr(9)) : 0;
  }
  static int Code(const rapidjson::Document& d) { return d["code"].GetInt(); }
  static std::string Message(const rapidjson::Document& d) { return d["message"].GetString(); }

  RedisProcess redis_;  // declared first: stopped after server_
  ServerProcess server_;
  uint16_t port_ = 0;
};

// A job put without a name pops as "#<number>"; that id, and its number in
// plain decimal, finish it, whatever keys other topics hold.
TEST_F(Youzan, KeylessJobIsNamedByItsNumber) {
  const uint64_t k = BeanstalkPut("bt");
  const std::string ks = std::to_string(k);
  // Other topics hold jobs whose keys are the number and the "#<number>".
  const uint64_t by_key = NativePut("x", R"({"body":"k","key":")" + ks + R"("})");
  const uint64_t by_hash_key = NativePut("x2", R"({"body":"k","key":"#)" + ks + R"("})");
  ASSERT_EQ(Pop("bt"), "#" + ks);
  auto fin = Y("/finish", Id("#" + ks));
  EXPECT_EQ(Code(fin), 0) << Message(fin);
  EXPECT_EQ(StateOf(k), "");
  EXPECT_EQ(StateOf(by_key), "ready");
  EXPECT_EQ(StateOf(by_hash_key), "ready");
  // Finished already: the id names no job, and the reply says so.
  auto again = Y("/finish", Id("#" + ks));
  EXPECT_EQ(Code(again), 1);

  // Plain decimal names a job without a name too.
  const uint64_t k2 = BeanstalkPut("bt");
  const std::string k2s = std::to_string(k2);
  NativePut("x", R"({"body":"k","key":")" + k2s + R"("})");
  EXPECT_EQ(Pop("bt"), "#" + k2s);
  auto get = Y("/get", Id(k2s));
  ASSERT_TRUE(get["data"].IsObject());
  EXPECT_EQ(std::string(get["data"]["topic"].GetString()), "bt");
  EXPECT_EQ(std::string(get["data"]["state"].GetString()), "reserved");
  EXPECT_EQ(Code(Y("/finish", Id(k2s))), 0);
  EXPECT_EQ(StateOf(k2), "");
  EXPECT_EQ(StateOf(by_key), "ready");
}

// An id is unique across topics while its job lives; /finish and /delete
// act on the named job only, never on a job of another topic with that key.
TEST_F(Youzan, NamesAreUniqueAcrossTopics) {
  const uint64_t native = NativePut("b", R"({"body":"native","key":"order-1"})");
  EXPECT_EQ(Message(Push("a", "order-1")), "added");
  EXPECT_EQ(Message(Push("a", "order-1")), "exists");
  auto dup = Push("c", "order-1");
  EXPECT_EQ(Code(dup), 1);
  EXPECT_EQ(Message(dup), "id 'order-1' belongs to a job in topic 'a'");
  // A key of the topic held by a job put without /push is not taken over.
  const uint64_t native2 = NativePut("b", R"({"body":"native","key":"order-2"})");
  auto over = Push("b", "order-2");
  EXPECT_EQ(Code(over), 1);
  EXPECT_EQ(Message(over), "topic 'b' holds a job with key 'order-2' that was not put by /push");
  EXPECT_EQ(Code(Y("/delete", Id("order-2"))), 0);  // names no job: changes nothing
  EXPECT_EQ(StateOf(native2), "ready");
  // An id of the form #<number> is the server's.
  EXPECT_EQ(Code(Push("a", "#12")), 1);

  // Not reserved: a finish changes nothing, and says so.
  auto early = Y("/finish", Id("order-1"));
  EXPECT_EQ(Code(early), 1);
  EXPECT_NE(Message(early).find("ready, not reserved"), std::string::npos) << Message(early);
  auto get = Y("/get", Id("order-1"));
  EXPECT_EQ(std::string(get["data"]["topic"].GetString()), "a");
  EXPECT_EQ(std::string(get["data"]["state"].GetString()), "ready");

  EXPECT_EQ(Pop("b"), "#" + std::to_string(native));  // native's, by number
  EXPECT_EQ(Pop("a"), "order-1");
  EXPECT_EQ(Code(Y("/finish", Id("order-1"))), 0);
  EXPECT_EQ(StateOf(native), "reserved");  // b's job is untouched
  EXPECT_TRUE(Y("/get", Id("order-1"))["data"].IsNull());
  // The name is free again: another topic may take it.
  EXPECT_EQ(Message(Push("c", "order-1", 3600)), "added");
  EXPECT_EQ(Code(Y("/delete", Id("order-1"))), 0);
  EXPECT_TRUE(Y("/get", Id("order-1"))["data"].IsNull());
  EXPECT_EQ(StateOf(native), "reserved");
  // As in the original, deleting an id that is not there succeeds.
  EXPECT_EQ(Code(Y("/delete", Id("order-1"))), 0);
}

// A name that is also a number: the name wins for the plain decimal; the
// job of that number keeps "#<number>".
TEST_F(Youzan, NameWinsOverANumber) {
  const uint64_t k = BeanstalkPut("bt");
  const std::string ks = std::to_string(k);
  EXPECT_EQ(Message(Push("named", ks)), "added");
  auto get = Y("/get", Id(ks));
  EXPECT_EQ(std::string(get["data"]["topic"].GetString()), "named");
  EXPECT_EQ(Pop("bt"), "#" + ks);
  EXPECT_EQ(Pop("named"), ks);
  EXPECT_EQ(Code(Y("/finish", Id(ks))), 0);  // the named job
  EXPECT_EQ(StateOf(k), "reserved");         // not the job of that number
  EXPECT_EQ(Code(Y("/finish", Id("#" + ks))), 0);
  EXPECT_EQ(StateOf(k), "");
}

// A worker whose TTR ran out finishes nothing once the job is gone; a
// delete takes a job in any state, by name or by number.
TEST_F(Youzan, DeleteInAnyStateAndALateFinish) {
  EXPECT_EQ(Message(Push("t", "late", 0)), "added");
  EXPECT_EQ(Pop("t"), "late");
  EXPECT_EQ(Code(Y("/delete", Id("late"))), 0);  // reserved: deleted all the same
  auto fin = Y("/finish", Id("late"));
  EXPECT_EQ(Code(fin), 1);
  EXPECT_EQ(Message(fin), "no job has id 'late'");
  const uint64_t buried = NativePut("t", R"({"body":"x"})");
  HttpClient c(port_);
  auto r = Json(c.Call("POST", "/topics/t/reserve", "{}").body);
  ASSERT_EQ(r["jobs"].Size(), 1u);
  c.Call("POST", "/jobs/" + std::to_string(buried) + "/bury",
         R"({"lease":")" + std::string(r["jobs"][0]["lease"].GetString()) + R"("})");
  EXPECT_EQ(StateOf(buried), "buried");
  EXPECT_EQ(Code(Y("/delete", Id("#" + std::to_string(buried)))), 0);
  EXPECT_EQ(StateOf(buried), "");
}

// Two instances on one Redis share the names: an id pushed through one is
// refused in another topic through the other, and finished there.
TEST_F(Youzan, TwoInstancesShareTheNames) {
  if (!AgainstRedis()) GTEST_SKIP() << "one Local backend is one instance";
  ServerProcess second;
  std::string error;
  ASSERT_TRUE(second.Start(DelayqdPath(), {"--backend", redis_.url()}, &error)) << error;
  const uint16_t port2 = HttpPortOf(second);
  ASSERT_NE(port2, 0);
  auto y2 = [&](std::string_view route, std::string body) {
    HttpClient c(port2);
    return Json(c.Call("POST", route, body).body);
  };
  EXPECT_EQ(Message(Push("a", "shared")), "added");
  auto dup = y2("/push", R"({"topic":"b","id":"shared","delay":0,"ttr":60})");
  EXPECT_EQ(Code(dup), 1);
  EXPECT_EQ(Message(dup), "id 'shared' belongs to a job in topic 'a'");
  auto pop = y2("/pop", R"({"topic":"a","timeout":0})");
  ASSERT_TRUE(pop["data"].IsObject());
  EXPECT_EQ(std::string(pop["data"]["id"].GetString()), "shared");
  EXPECT_EQ(Code(y2("/finish", Id("shared"))), 0);
  EXPECT_TRUE(Y("/get", Id("shared"))["data"].IsNull());
  EXPECT_EQ(Message(Push("b", "shared")), "added");
  int st = second.Stop();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

// Names survive a crash: a named job far beyond the horizon (on disk only)
// still holds its name after kill -9 and a restart.
TEST(YouzanDurable, NameOfAColdJobSurvivesKill9) {
  if (AgainstRedis()) GTEST_SKIP() << "the Local backend's store";
  TempDir dir;
  std::string error;
  auto start = [&](ServerProcess& s) {
    EXPECT_TRUE(s.Start(DelayqdPath(), {"-b", dir.path(), "--horizon", "1s"}, &error)) << error;
    return HttpPortOf(s);
  };
  auto y = [](uint16_t port, std::string_view route, std::string body) {
    HttpClient c(port);
    return Json(c.Call("POST", route, body).body);
  };
  ServerProcess first;
  uint16_t port = start(first);
  ASSERT_NE(port, 0);
  EXPECT_EQ(
      y(port, "/push", R"({"topic":"far","id":"n-1","delay":86400,"ttr":5})")["code"].GetInt(), 0);
  kill(first.pid(), SIGKILL);
  for (int i = 0; i < 500 && first.Alive(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_FALSE(first.Alive());

  ServerProcess again;
  port = start(again);
  ASSERT_NE(port, 0);
  auto dup = y(port, "/push", R"({"topic":"near","id":"n-1","delay":0,"ttr":5})");
  EXPECT_EQ(dup["code"].GetInt(), 1);
  EXPECT_EQ(std::string(dup["message"].GetString()), "id 'n-1' belongs to a job in topic 'far'");
  auto get = y(port, "/get", R"({"id":"n-1"})");
  ASSERT_TRUE(get["data"].IsObject());
  EXPECT_EQ(std::string(get["data"]["state"].GetString()), "delayed");
  EXPECT_EQ(y(port, "/delete", R"({"id":"n-1"})")["code"].GetInt(), 0);
  EXPECT_EQ(y(port, "/push", R"({"topic":"near","id":"n-1","delay":0,"ttr":5})")["code"].GetInt(),
            0);
  int st = again.Stop();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

}  // namespace
}  // namespace delayq::testing

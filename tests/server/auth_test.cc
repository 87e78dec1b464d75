// Access over the wire (docs/security.md), against a real delayqd on both
// backends (the Local one in memory, and a redis-server the test starts):
// every beanstalkd command and every HTTP route of the operation table is
// asked with no token, a wrong one, a token whose patterns do not cover the
// topic, and a good one; a case list that misses a command or route of the
// table fails. Then what the table cannot show: jobs named by id from
// another topic, a worker's delete against an operator's, reserves that
// skip watched topics out of scope, listings, rate limits, SIGHUP, and the
// trusted networks.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "delayq/operations.h"
#include "delayq/token.h"
#include "server/http_client.h"
#include "server/redis_process.h"
#include "server/server_process.h"
#include "temp_dir.h"

namespace delayq::testing {
namespace {

// The secrets of the tokens the tests' file lists.
constexpr const char* kOrders = "dq_orders-secret";      // orders.*: every right
constexpr const char* kPayments = "dq_payments-secret";  // payments: every right
constexpr const char* kOps = "dq_ops-secret";            // *: every right
constexpr const char* kWorker = "dq_worker-secret";      // orders.*: consume
constexpr const char* kLimited = "dq_limited-secret";    // *: produce, 2 a second

std::string Entry(const char* name, const char* secret, const char* topics, const char* rights,
                  const char* more = "") {
  return std::string("[[token]]\nname = \"") + name + "\"\nsha256 = \"" +
         DigestHex(Sha256(secret)) + "\"\ntopics = " + topics + "\nrights = " + rights + "\n" +
         more + "\n";
}

std::string TokenFile() {
  const char* all = R"(["produce", "consume", "admin"])";
  return Entry("orders", kOrders, R"(["orders.*"])", all) +
         Entry("payments", kPayments, R"(["payments"])", all) +
         Entry("ops", kOps, R"(["*"])", all) +
         Entry("worker", kWorker, R"(["orders.*"])", R"(["consume"])") +
         Entry("limited", kLimited, R"(["*"])", R"(["produce"])", "rate = 2\nburst = 2");
}

bool StartsWith(const std::string& s, std::string_view p) { return s.rfind(p, 0) == 0; }

enum class Backend { kLocal, kRedis };

class AuthTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    file_ = dir_.path() + "/tokens.toml";
    std::ofstream(file_) << TokenFile();
    if (GetParam() == Backend::kRedis) {
      if (!RedisServerAvailable()) GTEST_SKIP() << "no redis-server";
      std::string error;
      ASSERT_TRUE(redis_.Start(&error)) << error;
    }
    StartServer({"--trusted-networks", "none"});
  }

  void StartServer(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--auth-file", file_, "--http-port", "0"};
    if (GetParam() == Backend::kRedis) {
      args.insert(args.end(), {"--backend", redis_.url()});
    } else {
      args.push_back("--in-memory");
    }
    args.insert(args.end(), extra.begin(), extra.end());
    std::string error;
    ASSERT_TRUE(server_.Start(DelayqdPath(), args, &error)) << error;
    http_port_ = HttpPortOf(server_);
    ASSERT_NE(http_port_, 0) << server_.Log();
  }

  // A beanstalkd connection, authenticated with `secret` unless empty.
  RawClient Conn(std::string_view secret) {
    RawClient c(server_.port());
    EXPECT_TRUE(c.ok()) << c.error();
    if (!secret.empty())
      EXPECT_EQ(c.Call("auth " + std::string(secret) + "\r\n"), "AUTHENTICATED\r\n");
    return c;
  }

  // Puts a job into `topic` with the ops token: its id.
  std::string Put(const std::string& topic, std::string_view how = "put 0 0 60 1",
                  std::string_view body = "x") {
    RawClient c = Conn(kOps);
    EXPECT_EQ(c.Call("use " + topic + "\r\n"), "USING " + topic + "\r\n");
    std::string r = c.Call(std::string(how) + "\r\n" + std::string(body) + "\r\n");
    if (StartsWith(r, "EXISTS ")) return r.substr(7, r.size() - 9);  // a key put before
    EXPECT_TRUE(StartsWith(r, "INSERTED ")) << r;
    return r.substr(9, r.size() - 11);
  }

  // A job in orders.eu in the state `state` names: its id.
  std::string Prepare(std::string_view state) {
    if (state == "delayed") return Put("orders.eu", "put 0 600 60 1");
    if (state == "keyed") return Put("orders.eu", "put-ex 0 0 60000 1 key=k");
    std::string id = Put("orders.eu");
    if (state == "buried") {
      RawClient c = Conn(kOps);
      EXPECT_TRUE(StartsWith(c.Call("reserve-job " + id + "\r\n"), "RESERVED"));
      EXPECT_EQ(c.Call("bury " + id + " 0\r\n"), "BURIED\r\n");
    }
    return id;
  }

  HttpResponse Http(std::string_view method, const std::string& target, std::string_view body,
                    std::string_view secret) {
    HttpClient h(http_port_);
    EXPECT_TRUE(h.ok());
    std::string extra =
        secret.empty() ? std::string() : "Authorization: Bearer " + std::string(secret) + "\r\n";
    return h.Call(method, target, body, extra);
  }

  TempDir dir_;
  std::string file_;
  RedisProcess redis_;
  ServerProcess server_;
  uint16_t http_port_ = 0;
};

// ---- every beanstalkd command ------------------------------------------------------

struct BeanCase {
  const char* command;  // the table's word
  const char* prepare;  // the state of the job {ID} names: "ready", "delayed", "buried", "keyed"
  std::vector<const char*> setup;  // sent first, replies not checked ({ID} replaced)
  const char* line;                // the command ({ID} replaced); a put's body follows
  const char* good;                // the good token's reply starts so
  bool topic_right = true;         // needs a right on a topic (else any token may: FORBIDDEN never)
  const char* good_secret = kOrders;
};

std::string WithId(std::string s, const std::string& id) {
  for (size_t at; (at = s.find("{ID}")) != std::string::npos;) s.replace(at, 4, id);
  return s;
}

const std::vector<BeanCase>& BeanCases() {
  static const std::vector<BeanCase> cases = {
      {"put", "ready", {"use orders.eu"}, "put 0 0 10 1\r\nx", "INSERTED"},
      {"put-ex", "ready", {"use orders.eu"}, "put-ex 0 0 1000 1\r\nx", "INSERTED"},
      {"peek", "ready", {}, "peek {ID}", "FOUND {ID}"},
      {"peek-ready", "ready", {"use orders.eu"}, "peek-ready", "FOUND"},
      {"peek-delayed", "delayed", {"use orders.eu"}, "peek-delayed", "FOUND"},
      {"peek-buried", "buried", {"use orders.eu"}, "peek-buried", "FOUND"},
      {"reserve", "ready", {"watch orders.eu"}, "reserve", "RESERVED"},
      {"reserve-with-timeout", "ready", {"watch orders.eu"}, "reserve-with-timeout 0", "RESERVED"},
      {"reserve-batch", "ready", {"watch orders.eu"}, "reserve-batch 1 0", "RESERVED_BATCH 1"},
      {"reserve-job", "ready", {}, "reserve-job {ID}", "RESERVED {ID}"},
      {"delete", "ready", {}, "delete {ID}", "DELETED"},
      {"release", "ready", {"reserve-job {ID}"}, "release {ID} 0 0", "RELEASED"},
      {"bury", "ready", {"reserve-job {ID}"}, "bury {ID} 0", "BURIED"},
      {"touch", "ready", {"reserve-job {ID}"}, "touch {ID}", "TOUCHED"},
      {"use", "ready", {}, "use orders.eu", "USING orders.eu"},
      {"watch", "ready", {}, "watch orders.eu", "WATCHING 2"},
      {"ignore", "ready", {}, "ignore default", "NOT_IGNORED", false},
      {"kick", "buried", {"use orders.eu"}, "kick 1", "KICKED 1"},
      {"kick-job", "buried", {}, "kick-job {ID}", "KICKED"},
      {"stats", "ready", {}, "stats", "OK ", true, kOps},
      {"stats-job", "ready", {}, "stats-job {ID}", "OK "},
      {"stats-tube", "ready", {}, "stats-tube orders.eu", "OK "},
      {"list-tubes", "ready", {}, "list-tubes", "OK ", false},
      {"list-tube-used", "ready", {}, "list-tube-used", "USING default", false},
      {"list-tubes-watched", "ready", {}, "list-tubes-watched", "OK ", false},
      {"pause-tube", "ready", {}, "pause-tube orders.eu 0", "PAUSED"},
      {"delete-key", "keyed", {"use orders.eu"}, "delete-key k", "DELETED"},
      {"peek-key", "keyed", {"use orders.eu"}, "peek-key k", "FOUND {ID}"},
      {"clear-tube", "ready", {}, "clear-tube orders.eu all", "CLEARED"},
      {"quit", "ready", {}, "quit", "", false},
      {"auth", "ready", {}, "auth dq_orders-secret", "AUTHENTICATED", false},
  };
  return cases;
}

TEST(AuthCases, EveryBeanstalkCommandOfTheTableHasACase) {
  std::set<std::string> listed;
  for (const BeanCase& c : BeanCases()) listed.insert(c.command);
  for (const Operation& o : kOperations)
    for (std::string_view verb : BeanstalkCommandsOf(o))
      EXPECT_TRUE(listed.contains(std::string(verb))) << "no case for " << verb;
}

TEST_P(AuthTest, EveryBeanstalkCommandWithNoWrongOtherAndGoodToken) {
  for (const BeanCase& bc : BeanCases()) {
    SCOPED_TRACE(bc.command);
    // quit and auth are open to every caller (Scope::kPublic).
    const bool open =
        std::string_view(bc.command) == "quit" || std::string_view(bc.command) == "auth";
    for (const char* who : {"none", "wrong", "other", "good"}) {
      SCOPED_TRACE(who);
      const std::string id = Prepare(bc.prepare);
      RawClient c(server_.port());
      ASSERT_TRUE(c.ok());
      const std::string_view w = who;
      if (w == "wrong") EXPECT_EQ(c.Call("auth dq_not-a-token\r\n"), "UNAUTHORIZED\r\n");
      if (w == "other")
        EXPECT_EQ(c.Call("auth " + std::string(kPayments) + "\r\n"), "AUTHENTICATED\r\n");
      if (w == "good")
        EXPECT_EQ(c.Call("auth " + std::string(bc.good_secret) + "\r\n"), "AUTHENTICATED\r\n");
      for (const char* s : bc.setup) c.Call(WithId(s, id) + "\r\n");
      const std::string reply = c.Call(WithId(bc.line, id) + "\r\n");
      if (std::string_view(bc.command) == "quit") {
        EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));  // open to all
        continue;
      }
      if (open) {
        EXPECT_TRUE(StartsWith(reply, bc.good)) << reply;
      } else if (w == "none" || w == "wrong") {
        EXPECT_EQ(reply, "UNAUTHORIZED\r\n");
      } else if (w == "other" && bc.topic_right) {
        EXPECT_EQ(reply, "FORBIDDEN\r\n");
      } else {
        EXPECT_TRUE(StartsWith(reply, WithId(bc.good, id))) << reply;
      }
    }
  }
}

// ---- every HTTP route ----------------------------------------------------------------

struct HttpCase {
  const char* route;    // the table's "METHOD /path"
  const char* prepare;  // as BeanCase's; "reserved": reserved over HTTP ({LEASE})
  const char* method;
  const char* target;  // {ID} replaced
  const char* body;    // {ID}, {LEASE} replaced
  int good;            // the good token's status
  const char* good_secret = kOrders;
  bool topic_right = true;  // else a listing: any token gets it, showing what it may see
};

const std::vector<HttpCase>& HttpCases() {
  static const std::vector<HttpCase> cases = {
      {"GET /healthz", "ready", "GET", "/healthz", "", 200},
      {"GET /stats", "ready", "GET", "/stats", "", 200, kOps},
      {"GET /metrics", "ready", "GET", "/metrics", "", 200, kOps},
      {"GET /ui", "ready", "GET", "/ui", "", 200},
      {"GET /ui/{file}", "ready", "GET", "/ui/app.js", "", 200},
      {"GET /whoami", "ready", "GET", "/whoami?topic=orders.eu", "", 200, kOrders, false},
      {"GET /topics", "ready", "GET", "/topics", "", 200, kOrders, false},
      {"GET /topics/{topic}", "ready", "GET", "/topics/orders.eu", "", 200},
      {"POST /topics/{topic}/jobs", "ready", "POST", "/topics/orders.eu/jobs", R"({"body":"x"})",
       201},
      {"POST /topics/{topic}/reserve", "ready", "POST", "/topics/orders.eu/reserve", "{}", 200},
      {"POST /topics/{topic}/kick", "buried", "POST", "/topics/orders.eu/kick", "{}", 200},
      {"POST /topics/{topic}/pause", "ready", "POST", "/topics/orders.eu/pause",
       R"({"delay_ms":0})", 200},
      {"POST /topics/{topic}/clear", "ready", "POST", "/topics/orders.eu/clear", "{}", 200},
      {"GET /topics/{topic}/keys/{key}", "keyed", "GET", "/topics/orders.eu/keys/k", "", 200},
      {"GET /topics/{topic}/jobs", "ready", "GET", "/topics/orders.eu/jobs?state=ready", "", 200},
      {"GET /jobs", "keyed", "GET", "/jobs?key=k", "", 200, kOrders, false},
      {"DELETE /topics/{topic}/keys/{key}", "keyed", "DELETE", "/topics/orders.eu/keys/k", "", 200},
      {"POST /reserve", "ready", "POST", "/reserve", R"({"topics":["orders.eu"]})", 200},
      {"GET /jobs/{id}", "ready", "GET", "/jobs/{ID}", "", 200},
      {"DELETE /jobs/{id}", "ready", "DELETE", "/jobs/{ID}", "", 200},
      {"POST /jobs/{id}/finish", "reserved", "POST", "/jobs/{ID}/finish", R"({"lease":"{LEASE}"})",
       200},
      {"POST /jobs/{id}/release", "reserved", "POST", "/jobs/{ID}/release",
       R"({"lease":"{LEASE}"})", 200},
      {"POST /jobs/{id}/bury", "reserved", "POST", "/jobs/{ID}/bury", R"({"lease":"{LEASE}"})",
       200},
      {"POST /jobs/{id}/touch", "reserved", "POST", "/jobs/{ID}/touch", R"({"lease":"{LEASE}"})",
       200},
      {"POST /jobs/{id}/kick", "buried", "POST", "/jobs/{ID}/kick", "", 200},
      {"POST /push", "ready", "POST", "/push",
       R"({"id":"y1","topic":"orders.eu","delay":0,"ttr":10,"body":"x"})", 200},
      {"POST /pop", "ready", "POST", "/pop", R"({"topic":"orders.eu","timeout":0})", 200},
      {"POST /finish", "ready", "POST", "/finish", R"({"id":"#{ID}"})", 200},
      {"POST /delete", "ready", "POST", "/delete", R"({"id":"#{ID}"})", 200},
      {"POST /get", "ready", "POST", "/get", R"({"id":"#{ID}"})", 200},
      // Set, shown, ended, in this order (a documentation address: never
      // reached).
      {"PUT /topics/{topic}/push", "ready", "PUT", "/topics/orders.eu/push",
       R"({"url":"http://192.0.2.1/hook"})", 201},
      {"GET /topics/{topic}/push", "ready", "GET", "/topics/orders.eu/push", "", 200},
      {"DELETE /topics/{topic}/push", "ready", "DELETE", "/topics/orders.eu/push", "", 200},
      // A schedule of orders.eu: made by the first case, deleted by the last.
      {"PUT /schedules/{name}", "ready", "PUT", "/schedules/eu-digest",
       R"({"cron":"0 9 * * *","topic":"orders.eu","job":{"body":"x"}})", 201},
      {"POST /schedules/{name}/pause", "ready", "POST", "/schedules/eu-digest/pause", "", 200},
      {"POST /schedules/{name}/resume", "ready", "POST", "/schedules/eu-digest/resume", "", 200},
      {"GET /schedules", "ready", "GET", "/schedules", "", 200, kOrders, false},
      {"GET /schedules/{name}", "ready", "GET", "/schedules/eu-digest", "", 200},
      {"DELETE /schedules/{name}", "ready", "DELETE", "/schedules/eu-digest", "", 200},
  };
  return cases;
}

TEST(AuthCases, EveryHttpRouteOfTheTableHasACase) {
  std::set<std::string> listed;
  for (const HttpCase& c : HttpCases()) listed.insert(c.route);
  for (const Operation& o : kOperations)
    for (std::string_view route : HttpRoutesOf(o))
      EXPECT_TRUE(listed.contains(std::string(route))) << "no case for " << route;
}

TEST_P(AuthTest, EveryHttpRouteWithNoWrongOtherAndGoodToken) {
  for (const HttpCase& hc : HttpCases()) {
    SCOPED_TRACE(hc.route);
    // The routes of public rows (/healthz, the dashboard's files) are open
    // to every caller.
    const bool open = std::any_of(kOperations, std::end(kOperations), [&](const Operation& o) {
      std::vector<std::string_view> routes = HttpRoutesOf(o);
      return o.scope == Scope::kPublic &&
             std::find(routes.begin(), routes.end(), std::string_view(hc.route)) != routes.end();
    });
    for (const char* who : {"none", "wrong", "other", "good"}) {
      SCOPED_TRACE(who);
      std::string id, lease = "0123456789abcdef";
      if (std::string_view(hc.prepare) == "reserved") {
        Put("orders.eu");
        HttpResponse r = Http("POST", "/topics/orders.eu/reserve", "{}", kOps);
        ASSERT_EQ(r.status, 200) << r.body;
        auto d = Json(r.body);
        ASSERT_EQ(d["jobs"].Size(), 1u) << r.body;
        id = std::to_string(d["jobs"][0]["id"].GetUint64());
        lease = d["jobs"][0]["lease"].GetString();
      } else {
        id = Prepare(hc.prepare);
      }
      std::string body = WithId(hc.body, id);
      if (size_t at = body.find("{LEASE}"); at != std::string::npos) body.replace(at, 7, lease);
      const std::string_view w = who;
      const char* secret = w == "none"    ? ""
                           : w == "wrong" ? "dq_not-a-token"
                           : w == "other" ? kPayments
                                          : hc.good_secret;
      HttpResponse r = Http(hc.method, WithId(hc.target, id), body, secret);
      ASSERT_TRUE(r.ok) << r.error;
      if (w == "wrong") {
        EXPECT_EQ(r.status, 401) << r.body;
        EXPECT_EQ(r.Header("www-authenticate"), R"(Bearer realm="delayq", error="invalid_token")");
      } else if (open || w == "good" || (w == "other" && !hc.topic_right)) {
        EXPECT_EQ(r.status, open ? 200 : hc.good) << r.body;
      } else if (w == "none") {
        EXPECT_EQ(r.status, 401) << r.body;
        EXPECT_EQ(ErrorCode(r), "unauthenticated");
        EXPECT_EQ(r.Header("www-authenticate"), R"(Bearer realm="delayq")");
      } else {
        EXPECT_EQ(r.status, 403) << r.body;
        EXPECT_EQ(ErrorCode(r), "forbidden");
      }
    }
  }
}

// ---- what the table cannot show --------------------------------------------------------

TEST_P(AuthTest, AJobOfAnotherTopicCannotBeReachedByItsId) {
  const std::string id = Put("payments");
  RawClient c = Conn(kOrders);
  for (std::string cmd : {"peek ", "stats-job ", "delete ", "kick-job ", "reserve-job ", "touch ",
                          "bury ", "release "}) {
    std::string line = cmd + id + (cmd == "bury " ? " 0" : cmd == "release " ? " 0 0" : "");
    EXPECT_EQ(c.Call(line + "\r\n"), "FORBIDDEN\r\n") << line;
  }
  for (auto [method, target] : {std::pair{"GET", "/jobs/"}, std::pair{"DELETE", "/jobs/"}}) {
    HttpResponse r = Http(method, target + id, "", kOrders);
    EXPECT_EQ(r.status, 403) << method << " " << r.body;
  }
  EXPECT_EQ(Http("POST", "/get", R"({"id":"#)" + id + R"("})", kOrders).status, 403);
  EXPECT_EQ(Http("POST", "/delete", R"({"id":"#)" + id + R"("})", kOrders).status, 403);
  // Nothing happened to it; a job that does not exist is NOT_FOUND as ever.
  RawClient ops = Conn(kOps);
  EXPECT_TRUE(StartsWith(ops.Call("peek " + id + "\r\n"), "FOUND " + id)) << id;
  EXPECT_EQ(c.Call("peek 987654321\r\n"), "NOT_FOUND\r\n");
}

// reserve-job of a delayed or buried job is an operator's act: holding
// it, a worker could then delete it, or release it ready.
TEST_P(AuthTest, AWorkerCannotTakeADelayedOrBuriedJobByItsId) {
  for (std::string_view state : {"delayed", "buried"}) {
    SCOPED_TRACE(state);
    const std::string id = Prepare(state);
    RawClient w = Conn(kWorker);
    EXPECT_EQ(w.Call("reserve-job " + id + "\r\n"), "FORBIDDEN\r\n");
    EXPECT_EQ(w.Call("delete " + id + "\r\n"), "FORBIDDEN\r\n");
    EXPECT_EQ(w.Call("release " + id + " 0 0\r\n"), "NOT_FOUND\r\n");  // not its to release
    RawClient ops = Conn(kOps);
    EXPECT_NE(ops.Call("stats-job " + id + "\r\n").find("state: " + std::string(state)),
              std::string::npos);
    // A ready job is a worker's to take by its id.
    const std::string ready = Prepare("ready");
    EXPECT_TRUE(StartsWith(w.Call("reserve-job " + ready + "\r\n"), "RESERVED " + ready + " "));
    EXPECT_EQ(w.Call("delete " + ready + "\r\n"), "DELETED\r\n");
  }
}

// A refusal of a job or schedule found by its id or name does not name its
// topic: walking ids must not list the topics out of the caller's scope.
TEST_P(AuthTest, ARefusalByIdOrNameNamesNoTopic) {
  const std::string id = Put("payments");
  for (auto [method, target, body] :
       {std::tuple{"GET", "/jobs/" + id, std::string()},
        std::tuple{"DELETE", "/jobs/" + id, std::string()},
        std::tuple{"POST", std::string("/get"), R"({"id":"#)" + id + R"("})"}}) {
    HttpResponse r = Http(method, target, body, kOrders);
    EXPECT_EQ(r.status, 403) << method << " " << target << " " << r.body;
    EXPECT_EQ(r.body.find("payments"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("this job's topic"), std::string::npos) << r.body;
  }
  ASSERT_EQ(Http("PUT", "/schedules/pay-digest",
                 R"({"cron":"0 9 * * *","topic":"payments","job":{"body":"x"}})", kOps)
                .status,
            201);
  for (auto [method, target] :
       {std::pair{"GET", "/schedules/pay-digest"}, std::pair{"POST", "/schedules/pay-digest/pause"},
        std::pair{"DELETE", "/schedules/pay-digest"}}) {
    HttpResponse r = Http(method, target, "", kOrders);
    EXPECT_EQ(r.status, 403) << method << " " << target << " " << r.body;
    EXPECT_EQ(r.body.find("payments"), std::string::npos) << r.body;
  }
  // A name held in a topic out of scope: refused without naming it; a
  // token that reads every topic is told which.
  const std::string push = R"({"id":"inv-1","topic":"TOPIC","delay":0,"ttr":30,"body":"x"})";
  auto with = [&](std::string topic) {
    std::string b = push;
    b.replace(b.find("TOPIC"), 5, topic);
    return b;
  };
  ASSERT_EQ(Http("POST", "/push", with("payments"), kPayments).status, 200);
  HttpResponse other = Http("POST", "/push", with("orders.x"), kOrders);
  EXPECT_EQ(other.body.find("payments"), std::string::npos) << other.body;
  EXPECT_NE(other.body.find("another topic"), std::string::npos) << other.body;
  HttpResponse ops = Http("POST", "/push", with("orders.x"), kOps);
  EXPECT_NE(ops.body.find("in topic 'payments'"), std::string::npos) << ops.body;
}

// A push target's header values may carry the receiver's credentials: GET
// shows them to who may set them (admin on the topic), and "***" to others.
TEST_P(AuthTest, APushTargetsHeaderValuesAreShownToWhoMaySetThem) {
  ASSERT_EQ(
      Http("PUT", "/topics/orders.eu/push",
           R"({"url":"http://192.0.2.1/hook","headers":{"Authorization":"Bearer rcv-1"}})", kOps)
          .status,
      201);
  HttpResponse worker = Http("GET", "/topics/orders.eu/push", "", kWorker);
  EXPECT_EQ(worker.status, 200) << worker.body;
  EXPECT_EQ(worker.body.find("rcv-1"), std::string::npos) << worker.body;
  EXPECT_NE(worker.body.find(R"("Authorization":"***")"), std::string::npos) << worker.body;
  HttpResponse admin = Http("GET", "/topics/orders.eu/push", "", kOrders);
  EXPECT_NE(admin.body.find("Bearer rcv-1"), std::string::npos) << admin.body;
}

// A secret that fits no token is logged, with the peer's address and
// without the secret (one line per cause per 10 s: one test a protocol).
std::string LogOnceItHas(ServerProcess& server, std::string_view what) {
  std::string log = server.Log();
  for (int i = 0; i < 100 && log.find(what) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    log = server.Log();
  }
  return log;
}

TEST_P(AuthTest, AFailedAuthCommandIsLoggedWithItsPeer) {
  RawClient c(server_.port());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.Call("auth dq_not-a-token-1\r\n"), "UNAUTHORIZED\r\n");
  const std::string log =
      LogOnceItHas(server_, "event=auth_failed protocol=beanstalkd peer=127.0.0.1");
  EXPECT_NE(log.find("event=auth_failed protocol=beanstalkd peer=127.0.0.1"), std::string::npos)
      << log;
  EXPECT_EQ(log.find("not-a-token"), std::string::npos) << log;
}

TEST_P(AuthTest, AFailedBearerTokenIsLoggedWithItsPeer) {
  EXPECT_EQ(Http("GET", "/topics", "", "dq_not-a-token-2").status, 401);
  const std::string log = LogOnceItHas(server_, "event=auth_failed protocol=http peer=127.0.0.1");
  EXPECT_NE(log.find("event=auth_failed protocol=http peer=127.0.0.1"), std::string::npos) << log;
  EXPECT_EQ(log.find("not-a-token"), std::string::npos) << log;
}

TEST_P(AuthTest, AWorkerDeletesWhatItReservedAndNothingElse) {
  const std::string held = Put("orders.eu");
  RawClient w = Conn(kWorker);
  EXPECT_EQ(w.Call("watch orders.eu\r\n"), "WATCHING 2\r\n");
  // `default` is out of its scope: its reserve skips it.
  EXPECT_TRUE(StartsWith(w.Call("reserve-with-timeout 1\r\n"), "RESERVED " + held + " 1\r\n"));
  EXPECT_EQ(w.Call("list-tubes-watched\r\n"), "OK 16\r\n---\n- orders.eu\n\r\n");
  const std::string ready = Put("orders.eu", "put 5 0 60 1");
  EXPECT_EQ(w.Call("delete " + ready + "\r\n"), "FORBIDDEN\r\n");  // an operator's delete
  EXPECT_EQ(w.Call("delete " + held + "\r\n"), "DELETED\r\n");     // a worker's
  EXPECT_EQ(w.Call("put 0 0 10 1\r\nx\r\n"), "FORBIDDEN\r\n");     // no produce right
}

TEST_P(AuthTest, AJobWhoseReservationRanOutIsNoLongerTheWorkers) {
  const std::string id = Put("orders.eu", "put 0 0 1 1");  // TTR 1 s
  RawClient w = Conn(kWorker);
  EXPECT_EQ(w.Call("watch orders.eu\r\n"), "WATCHING 2\r\n");
  EXPECT_TRUE(StartsWith(w.Call("reserve-with-timeout 1\r\n"), "RESERVED " + id + " "));
  // Within a second of its deadline the connection looks the job up again:
  // it is ready (or about to be), and deleting a ready job is an admin's.
  std::this_thread::sleep_for(milliseconds(1200));
  EXPECT_EQ(w.Call("delete " + id + "\r\n"), "FORBIDDEN\r\n");
  RawClient ops = Conn(kOps);
  EXPECT_TRUE(StartsWith(ops.Call("peek " + id + "\r\n"), "FOUND " + id)) << id;
}

TEST_P(AuthTest, ListingsShowOnlyWhatTheTokenMaySee) {
  // Nothing it may see yet: an empty list that YAML reads as one.
  EXPECT_EQ(Conn(kPayments).Call("list-tubes\r\n"), "OK 7\r\n--- []\n\r\n");
  Put("orders.eu");
  Put("payments");
  RawClient c = Conn(kOrders);
  EXPECT_EQ(c.Call("list-tubes\r\n"), "OK 16\r\n---\n- orders.eu\n\r\n");
  EXPECT_EQ(c.Call("stats\r\n"), "FORBIDDEN\r\n");
  HttpResponse r = Http("GET", "/topics", "", kOrders);
  EXPECT_EQ(r.body, "{\"topics\":[\"orders.eu\"]}\n");
  EXPECT_EQ(Http("POST", "/reserve", R"({"topics":["orders.eu","payments"]})", kOrders).status,
            403);
  EXPECT_EQ(Http("GET", "/stats", "", kOrders).status, 403);
}

TEST_P(AuthTest, ATokenOverItsRateIsRefusedUntilItsBucketFills) {
  RawClient c = Conn(kLimited);
  EXPECT_EQ(c.Call("use orders.eu\r\n"), "USING orders.eu\r\n");
  EXPECT_TRUE(StartsWith(c.Call("put 0 0 10 1\r\nx\r\n"), "INSERTED"));
  EXPECT_EQ(c.Call("put 0 0 10 1\r\nx\r\n"), "RATE_LIMITED\r\n");
  HttpResponse r = Http("POST", "/topics/a/jobs", R"({"body":"x"})", kLimited);
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(ErrorCode(r), "rate_limited");
  EXPECT_EQ(r.Header("retry-after"), "1");
  std::this_thread::sleep_for(milliseconds(1100));  // 2 a second
  EXPECT_TRUE(StartsWith(c.Call("put 0 0 10 1\r\nx\r\n"), "INSERTED"));
  EXPECT_EQ(Http("POST", "/topics/a/jobs", R"({"body":"x"})", kLimited).status, 201);
}

TEST_P(AuthTest, SighupRevokesATokenOnOpenConnectionsAndABadFileChangesNothing) {
  RawClient orders = Conn(kOrders);
  RawClient payments = Conn(kPayments);
  EXPECT_EQ(orders.Call("use orders.eu\r\n"), "USING orders.eu\r\n");
  // A file that does not parse: logged, the tokens in force stay.
  std::ofstream(file_) << "[[token]]\nname = \"x\"\nrights = [\"fly\"]\n";
  server_.Signal(SIGHUP);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_TRUE(StartsWith(orders.Call("put 0 0 10 1\r\nx\r\n"), "INSERTED"));
  EXPECT_NE(server_.Log().find("event=reload_failed"), std::string::npos) << server_.Log();
  // Without the orders token: its connection is refused from its next
  // command on; the other goes on.
  std::string file = Entry("payments", kPayments, R"(["payments"])", R"(["produce"])");
  std::ofstream(file_) << file;
  server_.Signal(SIGHUP);
  for (int i = 0; i < 50 && server_.Log().find("event=reloaded") == std::string::npos; ++i)
    std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(orders.Call("put 0 0 10 1\r\nx\r\n"), "UNAUTHORIZED\r\n");
  EXPECT_EQ(payments.Call("use payments\r\n"), "USING payments\r\n");
  EXPECT_TRUE(StartsWith(payments.Call("put 0 0 10 1\r\nx\r\n"), "INSERTED"));
  EXPECT_EQ(payments.Call("reserve-with-timeout 0\r\n"), "FORBIDDEN\r\n");  // consume is gone
  // Secrets never reach the log.
  EXPECT_EQ(server_.Log().find("dq_"), std::string::npos) << server_.Log();
}

// A reserve already waiting when SIGHUP takes its right: refused when
// its token is gone, narrowed to the topics left when some are, and in
// neither case handed a job of a topic out of scope. HTTP long-polls too.
TEST_P(AuthTest, AReloadEndsOrNarrowsTheReservesThatWait) {
  RawClient gone = Conn(kOrders);
  EXPECT_EQ(gone.Call("watch orders.eu\r\n"), "WATCHING 2\r\n");
  ASSERT_TRUE(gone.Send("reserve-with-timeout 60\r\n"));
  RawClient narrowed = Conn(kWorker);
  EXPECT_EQ(narrowed.Call("watch orders.eu\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(narrowed.Call("watch orders.us\r\n"), "WATCHING 3\r\n");
  EXPECT_EQ(narrowed.Call("ignore default\r\n"), "WATCHING 2\r\n");
  ASSERT_TRUE(narrowed.Send("reserve\r\n"));
  // One that waits on for the rest of its timeout, not a new one.
  RawClient timed = Conn(kWorker);
  EXPECT_EQ(timed.Call("watch orders.eu\r\n"), "WATCHING 2\r\n");
  EXPECT_EQ(timed.Call("watch orders.us\r\n"), "WATCHING 3\r\n");
  const auto timed_sent = std::chrono::steady_clock::now();
  ASSERT_TRUE(timed.Send("reserve-with-timeout 3\r\n"));
  auto long_poll = [this](const std::string& target, const std::string& body, const char* secret) {
    auto h = std::make_unique<HttpClient>(http_port_);
    EXPECT_TRUE(h->Send("POST " + target + " HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " +
                        secret + "\r\nContent-Type: application/json\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body));
    return h;
  };
  auto native = long_poll("/topics/payments/reserve", R"({"timeout_ms":60000})", kPayments);
  auto youzan = long_poll("/pop", R"({"topic":"payments","timeout":60})", kPayments);
  auto gone_http = long_poll("/topics/orders.eu/reserve", R"({"timeout_ms":60000})", kOrders);
  // All wait (nothing to take), then the reload, 1.3 s into the timed
  // reserve: the orders token goes, the worker keeps orders.us alone,
  // payments may only produce.
  std::this_thread::sleep_for(milliseconds(1300));
  EXPECT_EQ(gone.ReadReply(milliseconds(50)), "<timeout>");
  std::ofstream(file_) << Entry("worker", kWorker, R"(["orders.us"])", R"(["consume"])") +
                              Entry("payments", kPayments, R"(["payments"])", R"(["produce"])") +
                              Entry("ops", kOps, R"(["*"])", R"(["produce", "consume", "admin"])");
  server_.Signal(SIGHUP);
  EXPECT_EQ(gone.ReadReply(milliseconds(5000)), "UNAUTHORIZED\r\n") << server_.Log();
  HttpResponse r = native->Read(milliseconds(5000));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(ErrorCode(r), "forbidden") << r.body;
  r = youzan->Read(milliseconds(5000));
  EXPECT_EQ(r.status, 403) << r.body;
  r = gone_http->Read(milliseconds(5000));
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(r.Header("www-authenticate"), "Bearer realm=\"delayq\"");
  // The timed reserve ran out 3 s after it was sent, not 3 s after the
  // reload.
  EXPECT_EQ(timed.ReadReply(milliseconds(5000)), "TIMED_OUT\r\n");
  const auto timed_waited = std::chrono::steady_clock::now() - timed_sent;
  EXPECT_GE(timed_waited, milliseconds(2900));
  EXPECT_LT(timed_waited, milliseconds(3900)) << "the reload started its timeout again";
  // The narrowed reserve waits on: a job of orders.eu is not its, one of
  // orders.us is.
  const std::string eu = Put("orders.eu");
  EXPECT_EQ(narrowed.ReadReply(milliseconds(500)), "<timeout>") << "handed a job out of its scope";
  RawClient ops = Conn(kOps);
  std::string stats = ops.Call("stats-job " + eu + "\r\n");
  EXPECT_NE(stats.find("state: ready"), std::string::npos) << stats;
  EXPECT_NE(stats.find("reserves: 0"), std::string::npos) << stats;
  const std::string us = Put("orders.us");
  EXPECT_EQ(narrowed.ReadReply(milliseconds(5000)), "RESERVED " + us + " 1\r\nx\r\n");
  EXPECT_EQ(narrowed.Call("list-tubes-watched\r\n"), "OK 16\r\n---\n- orders.us\n\r\n");
  // The connections go on, held to the new tokens.
  EXPECT_EQ(gone.Call("watch orders.eu\r\n"), "UNAUTHORIZED\r\n");
  EXPECT_EQ(narrowed.Call("delete " + us + "\r\n"), "DELETED\r\n");
}

INSTANTIATE_TEST_SUITE_P(Backends, AuthTest, ::testing::Values(Backend::kLocal, Backend::kRedis),
                         [](const auto& info) {
                           return info.param == Backend::kLocal ? "Local" : "Redis";
                         });

// ---- trusted networks, and the start ------------------------------------------------

// Starts `server` in memory with TokenFile() (written in `dir`) as its
// --auth-file, an HTTP port, and `extra` flags.
bool StartWithTokens(ServerProcess& server, const TempDir& dir, std::vector<std::string> extra,
                     std::string* error) {
  const std::string file = dir.path() + "/tokens.toml";
  std::ofstream(file) << TokenFile();
  std::vector<std::string> args = {"--in-memory", "--auth-file", file, "--http-port", "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return server.Start(DelayqdPath(), args, error);
}

TEST(AuthStart, LoopbackIsTrustedByDefaultAndATokenNarrowsIt) {
  TempDir dir;
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(StartWithTokens(server, dir, {}, &error)) << error;
  RawClient c(server.port());
  EXPECT_EQ(c.Call("use payments\r\n"), "USING payments\r\n");  // trusted: no token
  EXPECT_TRUE(StartsWith(c.Call("put 0 0 10 1\r\nx\r\n"), "INSERTED"));
  EXPECT_EQ(c.Call("auth " + std::string(kOrders) + "\r\n"), "AUTHENTICATED\r\n");
  EXPECT_EQ(c.Call("put 0 0 10 1\r\nx\r\n"), "FORBIDDEN\r\n");  // held to the token now
  HttpClient h(HttpPortOf(server));
  EXPECT_EQ(h.Call("GET", "/stats").status, 200);
  EXPECT_EQ(h.Call("GET", "/stats", "", "Authorization: Bearer wrong\r\n").status, 401);
}

// What a hostile client may put in Authorization, from outside the trusted
// networks: each answered as documented, the server unmoved.
TEST(AuthStart, HostileAuthorizationHeadersAreAnsweredAsDocumented) {
  TempDir dir;
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(StartWithTokens(server, dir, {"--trusted-networks", "none"}, &error)) << error;
  const uint16_t port = HttpPortOf(server);
  const std::string good = "Authorization: Bearer " + std::string(kOrders) + "\r\n";
  struct Case {
    std::string what, header;
    int status;
  };
  const std::vector<Case> cases = {
      {"a value as large as the header may be",
       "Authorization: Bearer " + std::string(16 * 1024, 'a') + "\r\n", 431},
      {"a long wrong secret", "Authorization: Bearer " + std::string(15 * 1024, 'a') + "\r\n", 401},
      {"a scheme and no secret", "Authorization: Bearer\r\n", 401},
      {"spaces only after the scheme", "Authorization: Bearer      \r\n", 401},
      {"another scheme", "Authorization: Basic " + std::string(kOrders) + "\r\n", 401},
      {"the secret with bytes beyond ASCII",
       "Authorization: Bearer \xff\xfe" + std::string(kOrders) + "\r\n", 401},
      {"a control byte in the value", "Authorization: Bearer a\x01b\r\n", 400},
      {"the good secret, then a wrong one: the first counts",
       good + "Authorization: Bearer wrong\r\n", 200},
      {"a wrong secret, then the good one: the first counts",
       "Authorization: Bearer wrong\r\n" + good, 401},
      {"the scheme in another case", "Authorization: bEaReR " + std::string(kOrders) + "\r\n", 200},
  };
  for (const Case& c : cases) {
    HttpClient h(port);
    HttpResponse r = h.Call("GET", "/topics", "", c.header);
    EXPECT_TRUE(r.ok) << c.what << ": " << r.error;
    EXPECT_EQ(r.status, c.status) << c.what << ": " << r.body;
    if (r.status == 401) EXPECT_FALSE(r.Header("www-authenticate").empty()) << c.what;
  }
  HttpClient after(port);
  EXPECT_EQ(after.Call("GET", "/topics", "", good).status, 200);
  EXPECT_TRUE(server.Alive());
}

TEST(AuthStart, ABadTokenFileOrNetworkStopsTheStartWithItsLine) {
  TempDir dir;
  const std::string file = dir.path() + "/tokens.toml";
  struct Bad {
    std::string text;
    std::string says;
  };
  const std::vector<Bad> bads = {
      {"[[token]]\nname = \"a\"\nsha256 = \"00\"\ntopics = [\"*\"]\nrights = [\"admin\"]\n",
       "line 3"},
      {Entry("a", "s1", R"(["*"])", R"(["admin"])") + "rihgts = 1\n", "unknown key 'rihgts'"},
      {Entry("a", "s1", R"(["*"])", R"(["fly"])"), "unknown right 'fly'"},
      {Entry("a", "s1", R"(["-x"])", R"(["admin"])"), "bad topic pattern"},
      {Entry("a", "s1", R"(["*"])", R"(["admin"])") + Entry("a", "s2", R"(["*"])", R"(["admin"])"),
       "two tokens named 'a'"},
      {"[[token]\n", "line 1"},
  };
  // delayqd with `args` on a port of its own: its exit status and output
  // (it stops before it listens).
  auto run = [](const std::string& args, std::string* out) {
    std::FILE* p =
        ::popen((DelayqdPath() + " --in-memory -p 0 --no-http " + args + " 2>&1").c_str(), "r");
    char buf[4096];
    for (size_t n; p != nullptr && (n = std::fread(buf, 1, sizeof buf, p)) > 0;)
      out->append(buf, n);
    return p == nullptr ? -1 : ::pclose(p);
  };
  for (const Bad& b : bads) {
    std::ofstream(file) << b.text;
    std::string out;
    EXPECT_NE(run("--auth-file " + file, &out), 0) << b.text;
    EXPECT_NE(out.find("event=bad_auth_file"), std::string::npos) << out;
    EXPECT_NE(out.find(b.says), std::string::npos) << b.says << "\n" << out;
  }
  std::string out;
  EXPECT_NE(run("--trusted-networks 10.0.0.0/33", &out), 0);
  EXPECT_NE(out.find("10.0.0.0/33"), std::string::npos) << out;
}

}  // namespace
}  // namespace delayq::testing

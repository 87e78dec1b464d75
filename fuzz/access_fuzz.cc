// libFuzzer target for access control over both front-ends: the beanstalkd
// `auth` command and every command after it, and HTTP requests with an
// Authorization header, from a client outside the trusted networks, over a
// Local backend in memory.
//
// The token file lists "orders" (orders.*: produce, consume, admin),
// "worker" (orders.*: consume) and "slow" (slow.*: produce, 1 a second); the
// dictionary (fuzz/access.dict) holds their secrets. Before the input runs,
// a job is put into the topic `payments`, which no token may touch, and one
// into `default`. With an odd-sized input, a reserve left waiting sees a
// reload (SIGHUP) that removes "orders" and narrows "worker" to orders.us,
// and then a job put into orders.eu. Checks:
//  - whatever the input, both jobs are still there, unchanged, afterwards:
//    no command and no request of a caller without a right on their topic
//    removed, reserved, buried, kicked, released or paused them;
//  - no beanstalkd reply shows either job (FOUND, RESERVED, stats-job),
//    nor an HTTP body; nor the orders.eu job put after the reload, which
//    stays ready and never reserved;
//  - every HTTP request is answered once, with a documented status and
//    error code in a JSON body (http_fuzz_common.h); a 401 carries
//    WWW-Authenticate, a 429 Retry-After.
//
// The input is a script: bytes up to a 0xff byte go to the beanstalkd
// connection; after it, requests "<method byte><target>\n<authorization>\n
// <body>" separated by 0xfe bytes go to the HTTP API.
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backend/local_backend.h"
#include "fuzz_check.h"
#include "http_fuzz_common.h"
#include "server/beanstalk_handler.h"
#include "server/http_api.h"

using namespace delayq;

namespace {

Token MakeToken(const char* name, const char* secret, const char* topic, uint8_t rights,
                double rate = 0) {
  Token t;
  t.name = name;
  t.sha256 = Sha256(secret);
  t.topics = {topic};
  t.rights = rights;
  t.rate = rate;
  return t;
}

// The job `id` is as it was put: ready, in its topic, never reserved.
void CheckUntouched(backend::LocalBackend& b, JobId id, std::string_view topic) {
  bool seen = false;
  b.StatsJob(id, [&](Result<JobStats> r) {
    seen = true;
    FUZZ_CHECK(r.ok(), "a job out of every token's scope was removed");
    FUZZ_CHECK(r->topic == topic, "the job's topic changed");
    FUZZ_CHECK(r->state == JobState::kReady, "a job out of every token's scope changed state");
    FUZZ_CHECK(r->reserves == 0 && r->buries == 0 && r->kicks == 0,
               "a job out of every token's scope was worked on");
  });
  FUZZ_CHECK(seen, "StatsJob did not answer");
  bool paused = true;
  b.StatsTopic(topic, [&](Result<TopicStats> r) { paused = r.ok() && r->pause_ms > 0; });
  FUZZ_CHECK(!paused, "a topic out of every token's scope was paused");
}

JobId PutInto(backend::LocalBackend& b, SessionId s, const char* topic) {
  FUZZ_CHECK(b.Use(s, topic).ok(), "use");
  PutRequest r;
  r.body = "sentinel";
  r.ttr_ms = 60'000;
  JobId id = 0;
  b.Put(s, r, [&](Result<PutResult> p) { id = p.ok() ? p->id : 0; });
  FUZZ_CHECK(id != 0, "the sentinel put");
  return id;
}

// The ids of the jobs the replies in `out` show: FOUND and RESERVED with
// their bodies, and stats-job's YAML ("---\nid: N\n"). Replies are whole.
std::vector<JobId> HandedOut(std::string_view out) {
  std::vector<JobId> ids;
  while (!out.empty()) {
    const size_t eol = out.find("\r\n");
    FUZZ_CHECK(eol != std::string_view::npos, "a reply without its line end");
    const std::string_view line = out.substr(0, eol);
    out.remove_prefix(eol + 2);
    auto number = [](std::string_view s) {
      uint64_t v = 0;
      for (char c : s.substr(0, s.find(' '))) v = v * 10 + static_cast<uint64_t>(c - '0');
      return v;
    };
    uint64_t bytes = 0;
    if (line.starts_with("FOUND ") || line.starts_with("RESERVED ")) {
      const std::string_view rest = line.substr(line.find(' ') + 1);
      ids.push_back(number(rest));
      bytes = number(rest.substr(rest.find(' ') + 1));
    } else if (line.starts_with("OK ")) {
      bytes = number(line.substr(3));
      const std::string_view yaml = out.substr(0, bytes);
      if (yaml.starts_with("---\nid: ")) ids.push_back(number(yaml.substr(8)));
    } else {
      continue;
    }
    FUZZ_CHECK(out.size() >= bytes + 2, "a reply shorter than it says");
    out.remove_prefix(bytes + 2);
  }
  return ids;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* kMethods[] = {"GET", "POST", "DELETE", "HEAD"};
  boost::asio::io_context io;
  ManualClock clock;
  backend::LocalBackend::Options o;
  o.max_job_size = 256;
  backend::LocalBackend b(io, o, clock);
  server::ServerContext ctx(b);
  ctx.max_job_size = 256;
  auto policy =
      server::AccessPolicy::Make({MakeToken("orders", "dq_orders", "orders.*", kAllRights),
                                  MakeToken("worker", "dq_worker", "orders.*", kRightConsume),
                                  MakeToken("slow", "dq_slow", "slow.*", kRightProduce, 1)},
                                 *server::Networks::Parse("none"));
  FUZZ_CHECK(policy.ok(), "the policy");
  ctx.access.Reload(*policy);
  const SessionId setup = b.OpenSession();
  const JobId payments = PutInto(b, setup, "payments");
  const JobId dflt = PutInto(b, setup, "default");
  b.CloseSession(setup);
  const auto peer = boost::asio::ip::make_address("192.0.2.7");

  std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t split = in.find('\xff');
  std::string_view bean = in.substr(0, split);
  std::string_view http =
      split == std::string_view::npos ? std::string_view() : in.substr(split + 1);
  // With an odd input, a reserve that waits sees a reload (SIGHUP) take
  // "orders" away and narrow "worker" to orders.us; then a job is put into
  // orders.eu, which no token may take any more: it is never handed out.
  JobId revoked = 0;
  {
    server::BeanstalkHandler h(ctx, nullptr, peer);
    h.input().Append(bean);
    for (int round = 0; round < 64 && !h.want_close(); ++round) {
      h.Process();
      for (JobId id : HandedOut(h.output()))
        FUZZ_CHECK(id != payments && id != dflt && id != revoked,
                   "a reply hands out a job out of every token's scope");
      if (h.reserving() && revoked == 0 && size % 2 == 1) {
        auto narrowed = server::AccessPolicy::Make(
            {MakeToken("worker", "dq_worker", "orders.us", kRightConsume),
             MakeToken("slow", "dq_slow", "slow.*", kRightProduce, 1)},
            *server::Networks::Parse("none"));
        FUZZ_CHECK(narrowed.ok(), "the narrowed policy");
        ctx.ReloadAccess(*narrowed);
        const SessionId later = b.OpenSession();
        revoked = PutInto(b, later, "orders.eu");
        b.CloseSession(later);
        continue;
      }
      if (h.output().empty() && (h.blocked() || h.input().size() == 0)) break;
      h.output().clear();
      if (h.reserving()) h.CancelReserve();
    }
  }
  {
    server::HttpApi api(ctx);
    server::Caller caller(ctx.access, peer);
    while (!http.empty()) {
      size_t end = http.find('\xfe');
      std::string_view req = http.substr(0, end);
      http = end == std::string_view::npos ? std::string_view() : http.substr(end + 1);
      if (req.empty()) continue;
      const char* method = kMethods[static_cast<uint8_t>(req[0]) % 4];
      req.remove_prefix(1);
      size_t nl = req.find('\n');
      std::string target(req.substr(0, nl));
      std::string rest(nl == std::string_view::npos ? std::string_view() : req.substr(nl + 1));
      size_t nl2 = rest.find('\n');
      std::string authorization = rest.substr(0, nl2);
      std::string body = nl2 == std::string::npos ? std::string() : rest.substr(nl2 + 1);
      int calls = 0;
      api.Handle(server::HttpRequest{method, target, body, authorization, &caller},
                 [&](server::HttpReply r) {
                   calls++;
                   CheckReply(r, /*access=*/true);
                   FUZZ_CHECK(r.status != 401 || r.headers.find("WWW-Authenticate: Bearer") == 0,
                              "a 401 without WWW-Authenticate");
                   FUZZ_CHECK(r.status != 429 || r.headers.find("Retry-After: ") == 0,
                              "a 429 without Retry-After");
                   for (JobId id : {payments, dflt})
                     FUZZ_CHECK(
                         r.body.find("\"id\":" + std::to_string(id) + ",") == std::string::npos,
                         "a reply shows a job out of every token's scope");
                 });
      clock.now += 1000;
      b.Poll();
      api.WakeWaiters();
      FUZZ_CHECK(calls == 1, "an HTTP request was not answered exactly once");
    }
  }
  if (revoked != 0) {
    bool seen = false;
    b.StatsJob(revoked, [&](Result<JobStats> r) {
      seen = true;
      FUZZ_CHECK(r.ok() && r->state == JobState::kReady && r->reserves == 0,
                 "a job put after the reload, out of every token's new scope, was taken");
    });
    FUZZ_CHECK(seen, "StatsJob did not answer");
  }
  CheckUntouched(b, payments, "payments");
  // `default` is out of every token's scope too.
  CheckUntouched(b, dflt, "default");
  return 0;
}

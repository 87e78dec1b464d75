// Black-box tests of "never early" (docs/engine.md and docs/redis-backend.md,
// "Time"): measured from the client, a delayed job is not reserved before
// its delay has passed since the client sent the put; a pause, a TTR, a
// release with a delay and a back-off do not end before their time either.
//
// Each measurement starts from a steady-clock reading the client takes
// BEFORE it sends the request that starts the wait (the server sees the
// request later, so the wait it starts ends later still), and ends when the
// reply that shows the wait over arrives (the server acted earlier). So
// `elapsed >= duration` must hold whatever the network and the scheduler
// did; a server that counts from a millisecond clock rounded down (up to
// 1 ms before the request arrived) fails it in most tries.
//
// The suite runs against delayqd on the Local backend (its store on disk,
// as by default), and with DELAYQ_TEST_AGAINST=redis on the Redis backend
// (ctest never_early_on_redis).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "server/http_client.h"
#include "server/redis_process.h"
#include "server/server_process.h"

namespace delayq::testing {
namespace {

using namespace std::chrono_literals;

// Steady-clock microseconds (the same clock in every thread).
int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// "RESERVED <id> <n>\r\n<body>\r\n": the id and the body; false otherwise.
bool ParseReserved(const std::string& reply, uint64_t* id, std::string* body) {
  if (reply.rfind("RESERVED ", 0) != 0) return false;
  size_t sp = reply.find(' ', 9), eol = reply.find("\r\n");
  if (sp == std::string::npos || eol == std::string::npos || sp > eol) return false;
  *id = std::stoull(reply.substr(9, sp - 9));
  size_t n = std::stoull(reply.substr(sp + 1, eol - sp - 1));
  *body = reply.substr(eol + 2, n);
  return true;
}

std::string PutEx(std::string_view body, int64_t delay_ms, int64_t ttr_ms,
                  std::string_view options = {}) {
  return "put-ex 0 " + std::to_string(delay_ms) + " " + std::to_string(ttr_ms) + " " +
         std::to_string(body.size()) + (options.empty() ? "" : " ") + std::string(options) +
         "\r\n" + std::string(body) + "\r\n";
}

std::string Put(std::string_view body, int64_t delay_s, int64_t ttr_s) {
  return "put 0 " + std::to_string(delay_s) + " " + std::to_string(ttr_s) + " " +
         std::to_string(body.size()) + "\r\n" + std::string(body) + "\r\n";
}

// What went early, and the closest call, across threads.
class Record {
 public:
  // `what` waited `elapsed_us` for something of `wait_us`.
  void Add(const std::string& what, int64_t elapsed_us, int64_t wait_us) {
    std::lock_guard<std::mutex> lock(mu_);
    n_++;
    min_margin_us_ = std::min(min_margin_us_, elapsed_us - wait_us);
    if (elapsed_us < wait_us) {
      early_++;
      if (examples_.size() < 10)
        examples_.push_back(what + ": " + std::to_string(elapsed_us) + " us after the request, " +
                            std::to_string(wait_us - elapsed_us) + " us early");
    }
  }
  void Fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failures_.size() < 10) failures_.push_back(what);
  }
  std::string Report() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out = std::to_string(early_) + " of " + std::to_string(n_) +
                      " early; least margin " + std::to_string(min_margin_us_) + " us";
    for (const std::string& e : examples_) out += "\n  " + e;
    for (const std::string& f : failures_) out += "\n  failure: " + f;
    return out;
  }
  uint64_t early() const {
    std::lock_guard<std::mutex> lock(mu_);
    return early_;
  }
  uint64_t count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return n_;
  }
  bool failed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return !failures_.empty();
  }

 private:
  mutable std::mutex mu_;
  uint64_t n_ = 0, early_ = 0;
  int64_t min_margin_us_ = INT64_MAX;
  std::vector<std::string> examples_;
  std::vector<std::string> failures_;
};

class NeverEarly : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    std::vector<std::string> args;
    if (AgainstRedis()) {
      ASSERT_TRUE(redis_.Start(&error)) << error;
      args = {"--backend", redis_.url()};
    }
    ASSERT_TRUE(server_.Start(DelayqdPath(), args, &error)) << error;
    http_port_ = HttpPortOf(server_);
    ASSERT_NE(http_port_, 0) << server_.Log();
  }
  void TearDown() override {
    if (HasFailure()) {
      std::string log = server_.Log();
      if (log.size() > 4000) log = "..." + log.substr(log.size() - 4000);
      std::cerr << "---- server stderr (last 4000 bytes) ----\n" << log << "----\n";
    }
  }

  // A connection that uses and watches only `tube`.
  RawClient On(const std::string& tube) {
    RawClient c(server_.port());
    EXPECT_TRUE(c.ok()) << c.error();
    EXPECT_EQ(c.Call("use " + tube + "\r\n"), "USING " + tube + "\r\n");
    EXPECT_EQ(c.Call("watch " + tube + "\r\n"), "WATCHING 2\r\n");
    EXPECT_EQ(c.Call("ignore default\r\n"), "WATCHING 1\r\n");
    return c;
  }

  RedisProcess redis_;  // declared first: stopped after server_
  ServerProcess server_;
  uint16_t http_port_ = 0;
};

// 1,200 delayed jobs from four connections (put-ex with delays of 1-1500 ms,
// and classic puts of 1 s) and 40 over HTTP (delay_ms), at random instants;
// four workers reserve and delete them. Every body carries the client's
// clock reading taken before its put was sent, and the delay.
TEST_F(NeverEarly, DelayedJobsAreNotReservedBeforeTheirDelay) {
  constexpr int kProducers = 4, kPerProducer = 300, kHttp = 40, kWorkers = 4;
  constexpr int kTotal = kProducers * kPerProducer + kHttp;
  const std::string tube = "never-early";
  Record rec;
  std::atomic<int> received{0};
  std::atomic<bool> stop{false};

  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      RawClient c = On(tube);
      while (!stop.load() && received.load() < kTotal) {
        if (!c.Send("reserve-with-timeout 1\r\n")) return rec.Fail("worker: send failed");
        std::string reply = c.ReadReply(5000ms);
        int64_t now = NowUs();
        if (reply == "TIMED_OUT\r\n") continue;
        uint64_t id = 0;
        std::string body;
        if (!ParseReserved(reply, &id, &body)) return rec.Fail("worker: got " + reply);
        long long sent = 0, delay = 0;
        if (std::sscanf(body.c_str(), "t=%lld d=%lld", &sent, &delay) != 2)
          return rec.Fail("worker: body " + body);
        rec.Add("job " + std::to_string(id) + " (delay " + std::to_string(delay) + " ms)",
                now - sent, delay * 1000);
        received++;
        if (c.Call("delete " + std::to_string(id) + "\r\n") != "DELETED\r\n")
          return rec.Fail("worker: delete " + std::to_string(id));
      }
    });
  }
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      std::mt19937_64 rng(1000 + p);
      RawClient c = On(tube);
      for (int i = 0; i < kPerProducer; ++i) {
        // At a random instant within the millisecond (0-2 ms apart).
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
        bool whole_second = i % 4 == 3;
        int64_t delay_ms = whole_second ? 1000 : 1 + static_cast<int64_t>(rng() % 1500);
        int64_t t = NowUs();
        std::string body = "t=" + std::to_string(t) + " d=" + std::to_string(delay_ms);
        std::string req = whole_second ? Put(body, 1, 60) : PutEx(body, delay_ms, 60000);
        std::string reply = c.Call(req);
        if (reply.rfind("INSERTED ", 0) != 0) return rec.Fail("put: " + reply);
      }
    });
  }
  producers.emplace_back([&] {
    std::mt19937_64 rng(77);
    HttpClient h(http_port_);
    for (int i = 0; i < kHttp; ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
      int64_t delay_ms = 1 + static_cast<int64_t>(rng() % 1500);
      int64_t t = NowUs();
      std::string json = R"({"body":"t=)" + std::to_string(t) + " d=" + std::to_string(delay_ms) +
                         R"(","delay_ms":)" + std::to_string(delay_ms) + "}";
      HttpResponse r = h.Call("POST", "/topics/" + tube + "/jobs", json);
      if (!r.ok || r.status != 201) return rec.Fail("http put: " + r.error + r.body);
    }
  });
  for (std::thread& t : producers) t.join();
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (received.load() < kTotal && std::chrono::steady_clock::now() < deadline && !rec.failed())
    std::this_thread::sleep_for(10ms);
  stop = true;
  for (std::thread& t : workers) t.join();
  EXPECT_FALSE(rec.failed()) << rec.Report();
  EXPECT_EQ(received.load(), kTotal) << rec.Report();
  EXPECT_EQ(rec.early(), 0u) << rec.Report();
  std::cerr << "never early: " << rec.Report() << "\n";
}

// One try of each kind in its own thread, several times over, at random
// instants: a pause, a TTR, a release with a delay, a back-off after a
// release, and a back-off after a TTR, in milliseconds (put-ex, HTTP pause)
// and in whole seconds (classic put, pause-tube, release).
TEST_F(NeverEarly, PausesTtrsReleasesAndBackOffsDoNotEndEarly) {
  Record rec;
  std::atomic<int> tube_no{0};
  auto fresh_tube = [&] { return "ne" + std::to_string(tube_no++); };
  // The reply of a worker's reserve on `tube` that waits for the job: its
  // arrival time, or 0 (recorded as a failure).
  auto wait_for_job = [&](RawClient& worker, const std::string& what) -> int64_t {
    std::string reply = worker.ReadReply(10000ms);
    int64_t now = NowUs();
    uint64_t id = 0;
    std::string body;
    if (!ParseReserved(reply, &id, &body)) {
      rec.Fail(what + ": the waiting reserve got " + reply);
      return 0;
    }
    return now;
  };
  auto reserve_one = [&](RawClient& c, const std::string& what) -> uint64_t {
    uint64_t id = 0;
    std::string body;
    std::string reply = c.Call("reserve-with-timeout 5\r\n");
    if (!ParseReserved(reply, &id, &body)) rec.Fail(what + ": reserve got " + reply);
    return id;
  };

  // Pause: a ready job, the tube paused, a worker waiting on it.
  auto pause = [&](int64_t ms, bool seconds, std::mt19937_64& rng) {
    std::string tube = fresh_tube(), what = "pause of " + std::to_string(ms) + " ms";
    RawClient c = On(tube), worker = On(tube);
    if (c.Call(PutEx("p", 0, 60000)).rfind("INSERTED", 0) != 0) return rec.Fail(what + ": put");
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 1000));
    int64_t t0 = NowUs();
    if (seconds) {
      if (c.Call("pause-tube " + tube + " " + std::to_string(ms / 1000) + "\r\n") != "PAUSED\r\n")
        return rec.Fail(what + ": pause-tube");
    } else {
      HttpClient h(http_port_);
      HttpResponse r = h.Call("POST", "/topics/" + tube + "/pause",
                              R"({"delay_ms":)" + std::to_string(ms) + "}");
      if (!r.ok || r.status / 100 != 2) return rec.Fail(what + ": " + r.error + r.body);
    }
    worker.Send("reserve-with-timeout 10\r\n");
    if (int64_t t1 = wait_for_job(worker, what)) rec.Add(what, t1 - t0, ms * 1000);
  };
  // TTR: reserved and left alone; another worker waits for it.
  auto ttr = [&](int64_t ms, bool seconds, std::mt19937_64& rng) {
    std::string tube = fresh_tube(), what = "TTR of " + std::to_string(ms) + " ms";
    RawClient c = On(tube), worker = On(tube);
    std::string put = seconds ? Put("t", 0, ms / 1000) : PutEx("t", 0, ms);
    if (c.Call(put).rfind("INSERTED", 0) != 0) return rec.Fail(what + ": put");
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 1000));
    int64_t t0 = NowUs();  // before the reserve is sent: earlier than the TTR's start
    if (reserve_one(c, what) == 0) return;
    worker.Send("reserve-with-timeout 10\r\n");
    if (int64_t t1 = wait_for_job(worker, what)) rec.Add(what, t1 - t0, ms * 1000);
  };
  // Release with a delay (whole seconds), or without one on a job with a
  // back-off of `ms`; another worker waits for it.
  auto release = [&](int64_t ms, bool seconds, std::mt19937_64& rng) {
    std::string tube = fresh_tube(),
                what = (seconds ? "release delay of " : "back-off after release of ") +
                       std::to_string(ms) + " ms";
    RawClient c = On(tube), worker = On(tube);
    std::string put =
        seconds ? Put("r", 0, 60) : PutEx("r", 0, 60000, "backoff=" + std::to_string(ms));
    if (c.Call(put).rfind("INSERTED", 0) != 0) return rec.Fail(what + ": put");
    uint64_t id = reserve_one(c, what);
    if (id == 0) return;
    worker.Send("reserve-with-timeout 10\r\n");
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 1000));
    int64_t t0 = NowUs();
    std::string rel =
        "release " + std::to_string(id) + " 0 " + std::to_string(seconds ? ms / 1000 : 0) + "\r\n";
    if (c.Call(rel) != "RELEASED\r\n") return rec.Fail(what + ": release");
    if (int64_t t1 = wait_for_job(worker, what)) rec.Add(what, t1 - t0, ms * 1000);
  };
  // A TTR of `ms`, then a back-off of `ms`.
  auto ttr_backoff = [&](int64_t ms, bool, std::mt19937_64& rng) {
    std::string tube = fresh_tube(), what = "TTR then back-off of " + std::to_string(ms) + " ms";
    RawClient c = On(tube), worker = On(tube);
    if (c.Call(PutEx("b", 0, ms, "backoff=" + std::to_string(ms))).rfind("INSERTED", 0) != 0)
      return rec.Fail(what + ": put");
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 1000));
    int64_t t0 = NowUs();
    if (reserve_one(c, what) == 0) return;
    worker.Send("reserve-with-timeout 10\r\n");
    if (int64_t t1 = wait_for_job(worker, what)) rec.Add(what, t1 - t0, 2 * ms * 1000);
  };

  using Kind = std::function<void(int64_t, bool, std::mt19937_64&)>;
  struct Try {
    Kind run;
    int64_t ms;
    bool seconds;
  };
  std::vector<Try> tries;
  for (int i = 0; i < 10; ++i) {
    int64_t ms = 20 + 23 * i;  // 20 .. 227 ms
    tries.push_back({pause, ms, false});
    tries.push_back({ttr, ms, false});
    tries.push_back({release, ms, false});
    tries.push_back({ttr_backoff, ms, false});
  }
  tries.push_back({pause, 1000, true});
  tries.push_back({ttr, 1000, true});
  tries.push_back({release, 1000, true});
  // Eight at a time.
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(500 + t);
      for (size_t i; (i = next++) < tries.size();) tries[i].run(tries[i].ms, tries[i].seconds, rng);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(rec.failed()) << rec.Report();
  EXPECT_EQ(rec.count(), tries.size()) << rec.Report();
  EXPECT_EQ(rec.early(), 0u) << rec.Report();
  std::cerr << "never early: " << rec.Report() << "\n";
}

}  // namespace
}  // namespace delayq::testing

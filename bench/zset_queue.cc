// zset_queue: the Redis sorted-set delay queue that most blog posts show,
// as a baseline for bench/redis_bench.sh. Producers ZADD each job with its
// due time as the score; one poller asks ZRANGEBYSCORE key -inf now LIMIT 0
// <batch>, ZREMs each job it got (the job is its if ZREM removed it), and
// sleeps --poll-ms unless the batch came back full. Prints the lateness of each
// job taken (take time - due time) as `name: value` lines.
//
//   zset_queue --port P [--rate R] [--seconds S] [--max-delay-ms MS]
//              [--poll-ms MS] [--batch N] [--key K]
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double NowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "zset_queue: %s\n"
               "usage: zset_queue --port P [--host H] [--rate JOBS_PER_S] [--seconds S]\n"
               "                  [--max-delay-ms MS] [--poll-ms MS] [--batch N] [--key K]\n",
               why);
  std::exit(2);
}

redisContext* Connect(const std::string& host, int port) {
  redisContext* c = redisConnect(host.c_str(), port);
  if (c == nullptr || c->err != 0) {
    std::fprintf(stderr, "zset_queue: cannot connect to %s:%d: %s\n", host.c_str(), port,
                 c != nullptr ? c->errstr : "out of memory");
    std::exit(1);
  }
  return c;
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1", key = "zset_queue";
  int port = 0, rate = 5000, max_delay_ms = 2000, poll_ms = 1000, batch = 100;
  double seconds = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) Usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--host")
      host = next();
    else if (a == "--port")
      port = std::atoi(next());
    else if (a == "--rate")
      rate = std::atoi(next());
    else if (a == "--seconds")
      seconds = std::atof(next());
    else if (a == "--max-delay-ms")
      max_delay_ms = std::atoi(next());
    else if (a == "--poll-ms")
      poll_ms = std::atoi(next());
    else if (a == "--batch")
      batch = std::atoi(next());
    else if (a == "--key")
      key = next();
    else
      Usage(("unknown option " + a).c_str());
  }
  if (port <= 0 || rate <= 0 || seconds <= 0 || max_delay_ms < 1 || poll_ms < 0 || batch < 1)
    Usage("bad arguments");

  redisContext* producer = Connect(host, port);
  redisContext* poller = Connect(host, port);
  freeReplyObject(redisCommand(producer, "DEL %s", key.c_str()));

  const int64_t total = static_cast<int64_t>(rate * seconds);
  std::atomic<int64_t> put{0};
  std::atomic<bool> done_putting{false};
  std::thread prod([&] {
    std::mt19937_64 rng(42);
    auto start = std::chrono::steady_clock::now();
    for (int64_t n = 0; n < total; ++n) {
      // Paced: job n goes at start + n / rate.
      auto at = start + std::chrono::microseconds(static_cast<int64_t>(1e6 * n / rate));
      std::this_thread::sleep_until(at);
      int64_t due = NowMs() + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(max_delay_ms));
      std::string member = std::to_string(n) + ":" + std::to_string(due);
      redisReply* r = static_cast<redisReply*>(redisCommand(
          producer, "ZADD %s %lld %s", key.c_str(), static_cast<long long>(due), member.c_str()));
      if (r == nullptr) {
        std::fprintf(stderr, "zset_queue: ZADD failed: %s\n", producer->errstr);
        std::exit(1);
      }
      freeReplyObject(r);
      put++;
    }
    done_putting = true;
  });

  std::vector<double> lateness_ms;
  lateness_ms.reserve(static_cast<size_t>(total));
  int64_t polls = 0;
  auto give_up = std::chrono::steady_clock::now() +
                 std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000) + max_delay_ms +
                                           poll_ms + 10'000);
  while (static_cast<int64_t>(lateness_ms.size()) < total &&
         std::chrono::steady_clock::now() < give_up) {
    int64_t now = NowMs();
    polls++;
    auto* r =
        static_cast<redisReply*>(redisCommand(poller, "ZRANGEBYSCORE %s -inf %lld LIMIT 0 %d",
                                              key.c_str(), static_cast<long long>(now), batch));
    if (r == nullptr) {
      std::fprintf(stderr, "zset_queue: ZRANGEBYSCORE failed: %s\n", poller->errstr);
      return 1;
    }
    size_t got = r->elements;
    for (size_t i = 0; i < r->elements; ++i) {
      std::string member(r->element[i]->str, r->element[i]->len);
      auto* z =
          static_cast<redisReply*>(redisCommand(poller, "ZREM %s %s", key.c_str(), member.c_str()));
      if (z != nullptr && z->integer == 1) {
        int64_t due = std::atoll(member.c_str() + member.find(':') + 1);
        lateness_ms.push_back((NowUs() - static_cast<double>(due) * 1000.0) / 1000.0);
      }
      freeReplyObject(z);
    }
    freeReplyObject(r);
    // As the usual recipe does: sleep unless the batch came back full.
    if (got < static_cast<size_t>(batch))
      std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
  prod.join();
  redisFree(producer);
  redisFree(poller);

  std::printf("zset_rate_jobs_per_s: %d\n", rate);
  std::printf("zset_poll_ms: %d\n", poll_ms);
  std::printf("zset_jobs_put: %lld\n", static_cast<long long>(put.load()));
  std::printf("zset_jobs_taken: %zu\n", lateness_ms.size());
  std::printf("zset_polls: %lld\n", static_cast<long long>(polls));
  std::printf("lateness_p50_ms: %.1f\n", Percentile(lateness_ms, 0.50));
  std::printf("lateness_p99_ms: %.1f\n", Percentile(lateness_ms, 0.99));
  return static_cast<int64_t>(lateness_ms.size()) == total ? 0 : 1;
}

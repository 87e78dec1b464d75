// http_loadgen: a load generator for delayqd's HTTP/JSON API, with
// keep-alive connections (bench/http_bench.sh runs it beside build/loadgen,
// the beanstalkd-protocol generator, against the same delayqd).
//
//   build/http_loadgen --port 11380 --connections 50 --mode put --seconds 2
//
// Modes (one request in flight per connection):
//   put        POST /topics/bench/jobs -> 201, again. Latency: the round trip.
//   lifecycle  put, POST /topics/bench/reserve (waits up to 1 s), POST
//              /jobs/{id}/finish, again. Latency: the whole cycle.
//   longpoll   --connections connections wait in POST /reserve on topic
//              `lp`; one more connection puts one job at a time and waits
//              until a waiter has it. Latency: from sending the put to the
//              arrival of the long-poll's reply (--jobs samples).
//
// Single-threaded epoll, non-blocking sockets; requests are formatted once;
// a reply is complete at its header's end plus Content-Length bytes.
// Output: `name: value` lines (jobs_per_s, latency_p50_us, latency_p99_us);
// exit status 1 on a usage or connection error, 2 on an unexpected reply.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "http_reply.h"

namespace {

namespace bench = delayq::bench;

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(int code, const std::string& msg) { bench::Die("http_loadgen", code, msg); }

struct Options {
  int port = 11380;
  int connections = 1;
  std::string mode = "put";
  double seconds = 2;
  double warmup = 0.5;
  int jobs = 2000;  // longpoll samples
  int body_size = 32;
};

// "Authorization: Bearer <secret>\r\n" with --token, else empty.
std::string g_authorization;

std::string Request(std::string_view method, std::string_view target, std::string_view body) {
  std::string r(method);
  r += ' ';
  r += target;
  r += " HTTP/1.1\r\nHost: b\r\n" + g_authorization +
       "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  r += body;
  return r;
}

struct Conn {
  int fd = -1;
  std::string in;
  int step = 0;  // lifecycle: 0 put, 1 reserve, 2 finish
  Clock::time_point started;
  bool waiting = false;  // longpoll: a reserve is out
};

void SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      continue;  // tiny requests: the kernel takes them at once in practice
    } else {
      Die(1, std::string("send: ") + std::strerror(errno));
    }
  }
}

uint64_t FirstId(const std::string& body) {
  size_t at = body.find("\"id\":");
  return at == std::string::npos ? 0 : std::strtoull(body.c_str() + at + 5, nullptr, 10);
}

// The "lease" of the first job in a reserve's reply ("" if none).
std::string FirstLease(const std::string& body) {
  size_t at = body.find("\"lease\":\"");
  if (at == std::string::npos) return "";
  at += 9;
  return body.substr(at, body.find('"', at) - at);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die(1, "missing value for " + a);
      return argv[++i];
    };
    if (a == "--port") {
      o.port = std::atoi(next().c_str());
    } else if (a == "--connections") {
      o.connections = std::atoi(next().c_str());
    } else if (a == "--mode") {
      o.mode = next();
    } else if (a == "--seconds") {
      o.seconds = std::atof(next().c_str());
    } else if (a == "--warmup") {
      o.warmup = std::atof(next().c_str());
    } else if (a == "--jobs") {
      o.jobs = std::atoi(next().c_str());
    } else if (a == "--body-size") {
      o.body_size = std::atoi(next().c_str());
    } else if (a == "--token") {
      g_authorization = "Authorization: Bearer " + next() + "\r\n";
    } else {
      Die(1,
          "usage: http_loadgen --port P --connections N --mode put|lifecycle|longpoll "
          "[--seconds S] [--warmup S] [--jobs N] [--body-size B] [--token SECRET]");
    }
  }
  if (o.mode != "put" && o.mode != "lifecycle" && o.mode != "longpoll") Die(1, "unknown --mode");
  const std::string put = Request("POST", "/topics/bench/jobs",
                                  R"({"body":")" + std::string(o.body_size, 'x') + R"("})");
  const std::string reserve = Request("POST", "/topics/bench/reserve", R"({"timeout_ms":1000})");
  const std::string lp_put = Request("POST", "/topics/lp/jobs", R"({"body":"lp"})");
  const std::string lp_reserve = Request("POST", "/topics/lp/reserve", R"({"timeout_ms":10000})");

  int ep = epoll_create1(0);
  const bool longpoll = o.mode == "longpoll";
  std::vector<Conn> conns(static_cast<size_t>(o.connections + (longpoll ? 1 : 0)));
  for (size_t i = 0; i < conns.size(); ++i) {
    conns[i].fd = bench::ConnectLoopback(o.port, /*nonblocking=*/true, "http_loadgen");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
  }
  std::vector<double> lat;
  lat.reserve(1 << 20);
  uint64_t done = 0;
  auto t0 = Clock::now();
  const Clock::time_point measure_from =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.warmup));
  const Clock::time_point stop_at = measure_from + std::chrono::duration_cast<Clock::duration>(
                                                       std::chrono::duration<double>(o.seconds));
  Clock::time_point measured_start = measure_from;

  // Longpoll: the producer is the last connection.
  const size_t producer = conns.size() - 1;
  Clock::time_point put_sent;
  bool put_acked = false, job_taken = false;
  auto next_put = [&] {
    put_acked = job_taken = false;
    put_sent = Clock::now();
    SendAll(conns[producer].fd, lp_put);
  };
  if (longpoll) {
    for (size_t i = 0; i < producer; ++i) {
      SendAll(conns[i].fd, lp_reserve);
      conns[i].waiting = true;
    }
    usleep(200'000);  // let every waiter arrive first
    next_put();
  } else {
    for (Conn& c : conns) {
      c.started = Clock::now();
      SendAll(c.fd, put);
    }
  }

  std::vector<epoll_event> events(conns.size());
  std::string body;
  char buf[65536];
  while (true) {
    auto now = Clock::now();
    if (!longpoll && now >= stop_at) break;
    if (longpoll && static_cast<int>(lat.size()) >= o.jobs) break;
    int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 1000);
    for (int k = 0; k < n; ++k) {
      size_t i = events[k].data.u64;
      Conn& c = conns[i];
      ssize_t got = recv(c.fd, buf, sizeof buf, 0);
      if (got <= 0) {
        if (got < 0 && errno == EAGAIN) continue;
        Die(1, "the server closed a connection");
      }
      auto arrived = Clock::now();
      c.in.append(buf, static_cast<size_t>(got));
      int status;
      while (bench::TakeHttpReply(c.in, &status, &body, "http_loadgen")) {
        if (longpoll) {
          if (i == producer) {
            if (status != 201) Die(2, "put: " + std::to_string(status) + " " + body);
            put_acked = true;
          } else {
            if (status != 200) Die(2, "reserve: " + std::to_string(status) + " " + body);
            if (FirstId(body) != 0) {
              lat.push_back(std::chrono::duration<double, std::micro>(arrived - put_sent).count());
              job_taken = true;
            }
            SendAll(c.fd, lp_reserve);  // wait again (the job stays reserved: in memory)
          }
          if (put_acked && job_taken) next_put();
          continue;
        }
        if (o.mode == "put" || c.step == 2) {
          if (status != (o.mode == "put" ? 201 : 200))
            Die(2, "reply " + std::to_string(status) + " " + body);
          if (arrived >= measure_from && arrived < stop_at) {
            done++;
            lat.push_back(std::chrono::duration<double, std::micro>(arrived - c.started).count());
          }
          c.step = 0;
          c.started = arrived;
          SendAll(c.fd, put);
        } else if (c.step == 0) {
          if (status != 201) Die(2, "put: " + std::to_string(status) + " " + body);
          c.step = 1;
          SendAll(c.fd, reserve);
        } else {
          uint64_t id = FirstId(body);
          if (status != 200) Die(2, "reserve: " + std::to_string(status) + " " + body);
          if (id == 0) {  // another connection took the jobs meanwhile: reserve again
            SendAll(c.fd, reserve);
            continue;
          }
          c.step = 2;
          // A finish names the lease the reserve answered with (docs/http-api.md).
          SendAll(c.fd, Request("POST", "/jobs/" + std::to_string(id) + "/finish",
                                "{\"lease\":\"" + FirstLease(body) + "\"}"));
        }
      }
    }
  }
  double secs = std::chrono::duration<double>(stop_at - measured_start).count();
  if (longpoll) {
    std::printf("samples: %zu\n", lat.size());
    std::printf("wakeup_p50_us: %.0f\n", bench::Percentile(lat, 0.50));
    std::printf("wakeup_p99_us: %.0f\n", bench::Percentile(lat, 0.99));
  } else {
    std::printf("jobs_per_s: %.0f\n", static_cast<double>(done) / secs);
    std::printf("latency_p50_us: %.0f\n", bench::Percentile(lat, 0.50));
    std::printf("latency_p99_us: %.0f\n", bench::Percentile(lat, 0.99));
  }
  return 0;
}

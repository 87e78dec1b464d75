// push_bench: what push topics (docs/push.md) do on this machine, against a
// delayqd started with --push-allow-private (bench/push_bench.sh starts
// one), and a receiver in this process: one thread, epoll, HTTP/1.1
// keep-alive, answering each push at once (so its cost is on the same
// cores as delayqd's, as a local receiver's would be).
//
//   build/push_bench --port HTTP_PORT [--jobs N] [--rate R] [--seconds S]
//
// Phases, each on a topic of its own:
//   throughput  N jobs put while the topic has no target; then the target
//               is set (concurrency 64) and the time until the receiver
//               has them all is measured: pushes per second.
//   lateness    jobs due one every 1/R s for S s (put ahead, delayed): how
//               late each push arrives after its due time (delayq-due).
//   retry       the same at R/2 a second, each first try answered 500 and
//               retried after the target's 100 ms back-off: how late the
//               second try arrives after the first's answer plus 100 ms
//               (never early: the least is printed too).
// Output: `name: value` lines, the headline `push_per_s` last.
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "http_reply.h"

namespace {

namespace bench = delayq::bench;
constexpr const char* kProgram = "push_bench";

int64_t WallUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A header's value in a request head (names matched without case), or "".
std::string HeaderOf(std::string_view head, std::string_view name) {
  for (size_t at = head.find("\r\n"); at != std::string_view::npos;) {
    const size_t start = at + 2, end = head.find("\r\n", start);
    const std::string_view line = head.substr(start, end - start);
    if (line.size() > name.size() && line[name.size()] == ':' &&
        strncasecmp(line.data(), name.data(), name.size()) == 0) {
      std::string_view v = line.substr(name.size() + 1);
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      return std::string(v);
    }
    at = end;
  }
  return "";
}

// The receiver: what came, by topic.
struct Arrival {
  int64_t at_us = 0;        // when its last byte was read
  int64_t due_ms = 0;       // delayq-due
  int attempt = 0;          // delayq-attempt
  std::string id;           // webhook-id
  int64_t answered_us = 0;  // when the answer went
};

class Receiver {
 public:
  Receiver() {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(listener_, 1024) != 0)
      bench::Die(kProgram, 1, "the receiver cannot listen");
    socklen_t len = sizeof a;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~Receiver() {
    stop_ = true;
    thread_.join();
    close(listener_);
  }
  int port() const { return port_; }
  size_t Count(const std::string& topic) {
    std::lock_guard<std::mutex> l(mu_);
    return got_[topic].size();
  }
  std::vector<Arrival> Of(const std::string& topic) {
    std::lock_guard<std::mutex> l(mu_);
    return got_[topic];
  }

 private:
  void Run() {
    const int ep = epoll_create1(0);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = listener_;
    epoll_ctl(ep, EPOLL_CTL_ADD, listener_, &ev);
    std::map<int, std::string> in;
    epoll_event events[64];
    char buf[65536];
    while (!stop_) {
      const int n = epoll_wait(ep, events, 64, 50);
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == listener_) {
          for (int c; (c = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK)) >= 0;) {
            epoll_event ce{};
            ce.events = EPOLLIN;
            ce.data.fd = c;
            epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
            in[c];
          }
          continue;
        }
        std::string& b = in[fd];
        ssize_t r;
        while ((r = read(fd, buf, sizeof buf)) > 0) b.append(buf, static_cast<size_t>(r));
        if (r == 0) {
          close(fd);
          in.erase(fd);
          continue;
        }
        std::string out;
        for (size_t end; (end = b.find("\r\n\r\n")) != std::string::npos;) {
          const std::string_view head(b.data(), end);
          const size_t length = std::strtoul(HeaderOf(head, "content-length").c_str(), nullptr, 10);
          if (b.size() < end + 4 + length) break;
          Arrival a;
          a.at_us = WallUs();
          a.due_ms = std::strtoll(HeaderOf(head, "delayq-due").c_str(), nullptr, 10);
          a.attempt = std::atoi(HeaderOf(head, "delayq-attempt").c_str());
          a.id = HeaderOf(head, "webhook-id");
          const std::string topic = HeaderOf(head, "delayq-topic");
          // The retry phase's first tries fail.
          const bool fail = topic == "retry" && a.attempt == 1;
          out += fail ? "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"
                      : "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
          a.answered_us = WallUs();
          {
            std::lock_guard<std::mutex> l(mu_);
            got_[topic].push_back(std::move(a));
          }
          b.erase(0, end + 4 + length);
        }
        if (!out.empty() && write(fd, out.data(), out.size()) < 0) {
          close(fd);
          in.erase(fd);
        }
      }
    }
    for (auto& [fd, b] : in) close(fd);
    close(ep);
  }

  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, std::vector<Arrival>> got_;
};

// One blocking HTTP/1.1 exchange with delayqd on its own connection.
int Call(int port, const std::string& method, const std::string& target, const std::string& body,
         std::string* reply = nullptr) {
  const int fd = bench::ConnectLoopback(port, false, kProgram);
  const std::string req = method + " " + target + " HTTP/1.1\r\nHost: bench\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size()))
    bench::Die(kProgram, 1, "cannot send to delayqd");
  std::string in;
  char buf[65536];
  int status = 0;
  std::string got;
  while (!bench::TakeHttpReply(in, &status, &got, kProgram)) {
    const ssize_t r = read(fd, buf, sizeof buf);
    if (r <= 0) bench::Die(kProgram, 1, "delayqd closed the connection");
    in.append(buf, static_cast<size_t>(r));
  }
  close(fd);
  if (reply != nullptr) *reply = got;
  return status;
}

void SetTarget(int port, const std::string& topic, int receiver, const std::string& more) {
  std::string reply;
  const int st = Call(port, "PUT", "/topics/" + topic + "/push",
                      R"({"url":"http://127.0.0.1:)" + std::to_string(receiver) + "/" + topic +
                          R"(","secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")" + more + "}",
                      &reply);
  if (st != 201 && st != 200) bench::Die(kProgram, 1, "the target was refused: " + reply);
}

// Puts `n` jobs, delayed by delay(i) ms, in batches of 500.
template <typename Delay>
void PutJobs(int port, const std::string& topic, int n, Delay delay) {
  for (int i = 0; i < n;) {
    std::string body = R"({"jobs":[)";
    for (int k = 0; k < 500 && i < n; ++k, ++i) {
      if (k > 0) body += ',';
      body += R"({"body":"job )" + std::to_string(i) + R"(","delay_ms":)" +
              std::to_string(delay(i)) + "}";
    }
    body += "]}";
    std::string reply;
    const int st = Call(port, "POST", "/topics/" + topic + "/jobs", body, &reply);
    if (st != 200 && st != 201) bench::Die(kProgram, 1, "a put failed: " + reply.substr(0, 200));
  }
}

bool WaitCount(Receiver& rx, const std::string& topic, size_t n, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (rx.Count(topic) < n) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0, jobs = 100'000, rate = 1000;
  double seconds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view a = argv[i];
    if (a == "--port") port = std::atoi(argv[i + 1]);
    if (a == "--jobs") jobs = std::atoi(argv[i + 1]);
    if (a == "--rate") rate = std::atoi(argv[i + 1]);
    if (a == "--seconds") seconds = std::atof(argv[i + 1]);
  }
  if (port <= 0 || jobs <= 0 || rate <= 0 || seconds <= 0)
    bench::Die(kProgram, 1,
               "usage: push_bench --port HTTP_PORT [--jobs N] [--rate R] [--seconds S]");
  Receiver rx;

  // Lateness at `rate` a second: due from 1 s ahead, one each 1/rate s.
  const int timed = static_cast<int>(rate * seconds);
  SetTarget(port, "late", rx.port(), R"(,"concurrency":64)");
  PutJobs(port, "late", timed, [&](int i) { return 1000 + (i * 1000LL) / rate; });
  // Retries at rate/2: the first try fails, the second comes 100 ms later.
  const int retried = timed / 2;
  SetTarget(port, "retry", rx.port(), R"(,"concurrency":64,"backoff":"100ms")");
  PutJobs(port, "retry", retried, [&](int i) { return 1000 + (i * 2000LL) / rate; });
  if (!WaitCount(rx, "late", static_cast<size_t>(timed), seconds + 30) ||
      !WaitCount(rx, "retry", static_cast<size_t>(2 * retried), seconds + 30))
    bench::Die(kProgram, 2, "not every timed push came");
  std::vector<double> late;
  for (const Arrival& a : rx.Of("late")) late.push_back((a.at_us - a.due_ms * 1000) / 1000.0);
  std::vector<double> retry;
  std::map<std::string, int64_t> answered;
  for (const Arrival& a : rx.Of("retry"))
    if (a.attempt == 1) answered[a.id] = a.answered_us;
  for (const Arrival& a : rx.Of("retry"))
    if (a.attempt == 2) retry.push_back((a.at_us - answered[a.id] - 100'000) / 1000.0);
  const double retry_min = *std::min_element(retry.begin(), retry.end());

  // Throughput: the jobs wait; the target comes; they go.
  PutJobs(port, "bulk", jobs, [](int) { return 0; });
  const auto start = std::chrono::steady_clock::now();
  SetTarget(port, "bulk", rx.port(), R"(,"concurrency":64)");
  if (!WaitCount(rx, "bulk", static_cast<size_t>(jobs), 120))
    bench::Die(kProgram, 2, "not every push came within 120 s");
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("push_lateness_p50_ms: %.3f\n", bench::Percentile(late, 0.50));
  std::printf("push_lateness_p99_ms: %.3f (at %d/s, %d pushes)\n", bench::Percentile(late, 0.99),
              rate, timed);
  std::printf("retry_lateness_p50_ms: %.3f\n", bench::Percentile(retry, 0.50));
  std::printf("retry_lateness_p99_ms: %.3f (at %d/s, %zu retries)\n",
              bench::Percentile(retry, 0.99), rate / 2, retry.size());
  std::printf("retry_lateness_min_ms: %.3f (below 0: a retry came early)\n", retry_min);
  std::printf("push_jobs: %d\n", jobs);
  std::printf("push_per_s: %.0f\n", jobs / took);
  return 0;
}

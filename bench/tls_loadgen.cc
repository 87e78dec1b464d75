// tls_loadgen: the lifecycle load (put -> reserve -> delete/finish, one
// request in flight per connection) over plaintext or TLS, on either
// protocol, with the same client code for both, so that the two figures
// compare the transports and nothing else (bench/tls_bench.sh runs it).
//
//   build/tls_loadgen --port P --protocol beanstalkd|http --connections 50
//                     [--tls CAFILE] [--seconds S] [--warmup S] [--server-pid PID]
//
// Single-threaded epoll, non-blocking sockets, level-triggered EPOLLIN.
// With --tls each connection does a full TLS handshake (OpenSSL, verifying
// the server against CAFILE) before the load starts. OpenSSL reads ahead
// (one recv takes what the socket holds, not a record's header and then
// its body); each read is SSL_read until OpenSSL holds nothing more (what
// it holds, epoll does not see), as a plain read is recv until it did not
// fill the buffer; every request is one SSL_write or one send. Output:
// `name: value` lines (jobs_per_s, latency_p50_us, latency_p99_us; and
// the CPU time per job over the measured seconds, client_cpu_us_per_job
// from getrusage, and with --server-pid server_cpu_us_per_job from
// /proc/PID/stat: steadier than the rate on a noisy machine, and the
// server's share alone); exit status 1 on a usage or connection error, 2
// on an unexpected reply.
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "http_reply.h"

namespace {

namespace bench = delayq::bench;

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(int code, const std::string& msg) { bench::Die("tls_loadgen", code, msg); }

struct Conn {
  int fd = -1;
  SSL* ssl = nullptr;  // --tls
  std::string in;
  int step = 0;  // 0 put, 1 reserve, 2 delete / finish
  Clock::time_point started;
};

void Wait(int fd, short events) {
  pollfd p{fd, events, 0};
  ::poll(&p, 1, 1000);
}

void SendAll(Conn& c, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    if (c.ssl != nullptr) {
      int n = SSL_write(c.ssl, s.data() + off, static_cast<int>(s.size() - off));
      if (n > 0) {
        off += static_cast<size_t>(n);
        continue;
      }
      int e = SSL_get_error(c.ssl, n);
      if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
        Wait(c.fd, e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN);
        continue;
      }
      Die(1, "SSL_write failed");
    }
    ssize_t n = send(c.fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      Wait(c.fd, POLLOUT);
    } else {
      Die(1, std::string("send: ") + std::strerror(errno));
    }
  }
}

// Reads what is there into c.in: false when the server closed.
bool ReadSome(Conn& c) {
  char buf[65536];
  for (;;) {
    if (c.ssl != nullptr) {
      int n = SSL_read(c.ssl, buf, sizeof buf);
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
        if (SSL_has_pending(c.ssl) == 0) return true;  // level-triggered: the rest is seen
        continue;
      }
      int e = SSL_get_error(c.ssl, n);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return true;
      return false;
    }
    ssize_t n = recv(c.fd, buf, sizeof buf, 0);
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      if (static_cast<size_t>(n) < sizeof buf) return true;
      continue;
    }
    return n < 0 && (errno == EAGAIN || errno == EINTR);
  }
}

// beanstalkd: one complete reply at the front of `in` (a line, and for
// RESERVED its body); consumed.
bool TakeBeanstalkReply(std::string& in, std::string* line) {
  size_t eol = in.find("\r\n");
  if (eol == std::string::npos) return false;
  size_t len = eol + 2;
  if (in.compare(0, 9, "RESERVED ") == 0) {
    size_t sp = in.rfind(' ', eol);
    len += std::strtoul(in.c_str() + sp + 1, nullptr, 10) + 2;
    if (in.size() < len) return false;
  }
  line->assign(in, 0, eol);
  in.erase(0, len);
  return true;
}

std::string HttpRequest(const std::string& target, const std::string& body) {
  return "POST " + target +
         " HTTP/1.1\r\nHost: b\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         body;
}

std::string JsonField(const std::string& body, const char* key, bool quoted) {
  std::string k = std::string("\"") + key + "\":" + (quoted ? "\"" : "");
  size_t at = body.find(k);
  if (at == std::string::npos) return "";
  at += k.size();
  size_t end = body.find_first_of(quoted ? "\"" : ",}", at);
  return body.substr(at, end - at);
}

// CPU seconds (user + system) of process `pid` so far, from /proc; -1 when
// it cannot be read.
double ProcessCpuSeconds(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));  // from field 3, the state
  std::string f;
  double utime = -1, stime = -1;
  for (int field = 3; fields >> f && field <= 15; ++field) {
    if (field == 14) utime = std::atof(f.c_str());
    if (field == 15) stime = std::atof(f.c_str());
  }
  if (utime < 0 || stime < 0) return -1;
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double OwnCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0, connections = 1, server_pid = 0;
  double seconds = 2, warmup = 0.5;
  std::string protocol = "beanstalkd", ca;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die(1, "missing value for " + a);
      return argv[++i];
    };
    if (a == "--port") {
      port = std::atoi(next().c_str());
    } else if (a == "--connections") {
      connections = std::atoi(next().c_str());
    } else if (a == "--protocol") {
      protocol = next();
    } else if (a == "--tls") {
      ca = next();
    } else if (a == "--seconds") {
      seconds = std::atof(next().c_str());
    } else if (a == "--warmup") {
      warmup = std::atof(next().c_str());
    } else if (a == "--server-pid") {
      server_pid = std::atoi(next().c_str());
    } else {
      Die(1,
          "usage: tls_loadgen --port P --protocol beanstalkd|http [--connections N] "
          "[--tls CAFILE] [--seconds S] [--warmup S] [--server-pid PID]");
    }
  }
  const bool http = protocol == "http";
  if (!http && protocol != "beanstalkd") Die(1, "unknown --protocol");
  SSL_CTX* ctx = nullptr;
  if (!ca.empty()) {
    ctx = SSL_CTX_new(TLS_client_method());
    if (SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) != 1) Die(1, "cannot read " + ca);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set_read_ahead(ctx, 1);
  }
  const std::string put =
      http ? HttpRequest("/topics/bench/jobs", R"({"body":"hello"})") : "put 0 0 60 5\r\nhello\r\n";
  const std::string reserve =
      http ? HttpRequest("/topics/bench/reserve", R"({"timeout_ms":1000})") : "reserve\r\n";

  int ep = epoll_create1(0);
  std::vector<Conn> conns(static_cast<size_t>(connections));
  for (size_t i = 0; i < conns.size(); ++i) {
    Conn& c = conns[i];
    c.fd = bench::ConnectLoopback(port, /*nonblocking=*/false, "tls_loadgen");
    if (ctx != nullptr) {  // the handshake, blocking, before the load
      c.ssl = SSL_new(ctx);
      SSL_set_fd(c.ssl, c.fd);
      if (SSL_connect(c.ssl) != 1) {
        ERR_print_errors_fp(stderr);
        Die(1, "TLS handshake failed");
      }
    }
    int fl = 1;
    ioctl(c.fd, FIONBIO, &fl);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
  }
  std::vector<double> lat;
  lat.reserve(1 << 20);
  uint64_t done = 0;
  const auto t0 = Clock::now();
  const auto measure_from =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warmup));
  const auto stop_at = measure_from + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(seconds));
  for (Conn& c : conns) {
    c.started = Clock::now();
    SendAll(c, put);
  }
  std::vector<epoll_event> events(conns.size());
  std::string line, body;
  // CPU time at the start of the measured seconds (taken on the first
  // wake-up in them).
  bool measuring = false;
  double client_cpu0 = 0, server_cpu0 = 0;
  while (Clock::now() < stop_at) {
    if (!measuring && Clock::now() >= measure_from) {
      measuring = true;
      client_cpu0 = OwnCpuSeconds();
      if (server_pid > 0) server_cpu0 = ProcessCpuSeconds(server_pid);
    }
    int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 1000);
    for (int k = 0; k < n; ++k) {
      Conn& c = conns[events[k].data.u64];
      if (!ReadSome(c)) Die(1, "the server closed a connection");
      const auto arrived = Clock::now();
      for (;;) {
        int status = 0;
        if (http ? !bench::TakeHttpReply(c.in, &status, &body, "tls_loadgen")
                 : !TakeBeanstalkReply(c.in, &line))
          break;
        if (c.step == 0) {
          if (http ? status != 201 : line.compare(0, 9, "INSERTED ") != 0)
            Die(2, "put: " + (http ? std::to_string(status) + " " + body : line));
          c.step = 1;
          SendAll(c, reserve);
        } else if (c.step == 1) {
          if (http) {
            std::string id = JsonField(body, "id", false);
            if (status != 200) Die(2, "reserve: " + std::to_string(status) + " " + body);
            if (id.empty()) {  // another connection took the jobs: again
              SendAll(c, reserve);
              continue;
            }
            c.step = 2;
            SendAll(c, HttpRequest("/jobs/" + id + "/finish",
                                   "{\"lease\":\"" + JsonField(body, "lease", true) + "\"}"));
          } else {
            if (line.compare(0, 9, "RESERVED ") != 0) Die(2, "reserve: " + line);
            std::string id = line.substr(9, line.find(' ', 9) - 9);
            c.step = 2;
            SendAll(c, "delete " + id + "\r\n");
          }
        } else {
          if (http ? status != 200 : line != "DELETED")
            Die(2, "delete: " + (http ? std::to_string(status) + " " + body : line));
          if (arrived >= measure_from && arrived < stop_at) {
            done++;
            lat.push_back(std::chrono::duration<double, std::micro>(arrived - c.started).count());
          }
          c.step = 0;
          c.started = arrived;
          SendAll(c, put);
        }
      }
    }
  }
  const double client_cpu = OwnCpuSeconds() - client_cpu0;
  const double server_cpu = server_pid > 0 ? ProcessCpuSeconds(server_pid) - server_cpu0 : -1;
  std::printf("jobs_per_s: %.0f\n", static_cast<double>(done) / seconds);
  std::printf("latency_p50_us: %.0f\n", bench::Percentile(lat, 0.50));
  std::printf("latency_p99_us: %.0f\n", bench::Percentile(lat, 0.99));
  if (done > 0) {
    const double n = static_cast<double>(done);
    std::printf("client_cpu_us_per_job: %.1f\n", client_cpu * 1e6 / n);
    if (server_pid > 0 && server_cpu0 >= 0 && server_cpu >= 0)
      std::printf("server_cpu_us_per_job: %.1f\n", server_cpu * 1e6 / n);
  }
  for (Conn& c : conns) {
    if (c.ssl != nullptr) SSL_free(c.ssl);
    close(c.fd);
  }
  if (ctx != nullptr) SSL_CTX_free(ctx);
  return 0;
}

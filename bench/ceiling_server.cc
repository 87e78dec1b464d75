// ceiling_server: the least work a beanstalkd-protocol server can do for the
// load generator's lifecycle (put -> reserve -> delete), as a peer in
// bench/server_bench.sh. Its jobs/s is the ceiling any single-threaded
// epoll server reaches on the machine: what is left over is the kernel's
// loopback TCP path and the load generator's share of the cores.
//
//   build/ceiling_server --port N [--host 127.0.0.1]
//
// It does what delayqd's connection loop does with the sockets, and nothing
// else: one epoll (level-triggered), one recv per readable socket, every
// complete command answered, all replies in one send; the recvs of one
// epoll_wait, then the sends, made in one batch through io_uring where the
// kernel allows (src/server/io_batch.h; --no-io-uring: one call each). A put's job goes to
// the back of one in-memory FIFO and a reserve takes the front (so replies
// carry the same bytes as a real server's); delete finds nothing and
// answers DELETED. No priorities, delays, timeouts, tubes or stats: `use`,
// `watch` and `ignore` are acknowledged, anything else is UNKNOWN_COMMAND.
// Not a server to use: a measuring stick.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "server/io_batch.h"

namespace {

// Bodies beyond this are refused (beanstalkd's own limit is 65,535 by default).
constexpr uint64_t kMaxBody = uint64_t{1} << 30;

constexpr char kUsage[] =
    "usage: ceiling_server --port N [--host ADDR] [--no-io-uring]\n"
    "  Answers put/put-ex, reserve, delete, use, watch and ignore with as\n"
    "  little work as possible: the ceiling for bench/server_bench.sh.\n";

struct Job {
  uint64_t id;
  std::string body;
};

struct Conn {
  int fd = -1;
  std::string in;
  std::string out;       // replies being sent
  size_t body_left = 0;  // bytes of a put's body (with its CRLF) still to come
  std::string body;      // the body read so far
};

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "ceiling_server: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

class Ceiling {
 public:
  // Appends the replies to every complete command in c.in to out_.
  void Serve(Conn& c) {
    size_t pos = 0;
    for (;;) {
      if (c.body_left > 0) {
        size_t take = std::min(c.body_left, c.in.size() - pos);
        c.body.append(c.in, pos, take);
        pos += take;
        c.body_left -= take;
        if (c.body_left > 0) break;
        c.body.resize(c.body.size() - 2);  // its CRLF
        uint64_t id = next_id_++;
        jobs_.push_back(Job{id, std::move(c.body)});
        c.body.clear();
        Reply("INSERTED ", id, "\r\n");
        continue;
      }
      size_t eol = c.in.find("\r\n", pos);
      if (eol == std::string::npos) break;
      std::string_view line(c.in.data() + pos, eol - pos);
      pos = eol + 2;
      Command(c, line);
    }
    c.in.erase(0, pos);
  }

  std::string& out() { return out_; }

 private:
  void Command(Conn& c, std::string_view line) {
    if (StartsWith(line, "put ") || StartsWith(line, "put-ex ")) {
      // The last argument is the body's size.
      size_t sp = line.rfind(' ');
      uint64_t bytes = 0;
      auto [p, ec] = std::from_chars(line.data() + sp + 1, line.data() + line.size(), bytes);
      if (ec != std::errc() || p != line.data() + line.size()) {
        out_ += "BAD_FORMAT\r\n";
        return;
      }
      if (bytes > kMaxBody) {  // not read past: what follows is taken for commands
        out_ += "JOB_TOO_BIG\r\n";
        return;
      }
      c.body_left = bytes + 2;
    } else if (line == "reserve" || StartsWith(line, "reserve-with-timeout ")) {
      if (jobs_.empty()) {
        out_ += "TIMED_OUT\r\n";
        return;
      }
      Job& j = jobs_.front();
      Reply("RESERVED ", j.id, " ");
      AppendNumber(j.body.size());
      out_ += "\r\n";
      out_ += j.body;
      out_ += "\r\n";
      jobs_.pop_front();
    } else if (StartsWith(line, "delete ")) {
      out_ += "DELETED\r\n";
    } else if (StartsWith(line, "use ")) {
      out_ += "USING ";
      out_ += line.substr(4);
      out_ += "\r\n";
    } else if (StartsWith(line, "watch ")) {
      out_ += "WATCHING 2\r\n";
    } else if (StartsWith(line, "ignore ")) {
      out_ += "WATCHING 1\r\n";
    } else {
      out_ += "UNKNOWN_COMMAND\r\n";
    }
  }

  void Reply(const char* head, uint64_t n, const char* tail) {
    out_ += head;
    AppendNumber(n);
    out_ += tail;
  }

  void AppendNumber(uint64_t n) {
    char buf[24];
    auto [p, ec] = std::to_chars(buf, buf + sizeof buf, n);
    out_.append(buf, p);
  }

  std::deque<Job> jobs_;
  uint64_t next_id_ = 1;
  std::string out_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = -1;
  bool use_uring = true;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--no-io-uring") {
      use_uring = false;
      continue;
    }
    if ((a == "--port" || a == "--host") && i + 1 < argc) {
      if (a == "--port") {
        port = std::atoi(argv[++i]);
      } else {
        host = argv[++i];
      }
      continue;
    }
    std::fprintf(stderr, "ceiling_server: unknown argument '%s'\n%s", argv[i], kUsage);
    return 1;
  }
  if (port < 1 || port > 65535) {
    std::fprintf(stderr, "ceiling_server: --port 1..65535 is required\n%s", kUsage);
    return 1;
  }
  std::signal(SIGPIPE, SIG_IGN);

  int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener < 0) Die("socket");
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    std::fprintf(stderr, "ceiling_server: --host needs an IPv4 address, not '%s'\n", host.c_str());
    return 1;
  }
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) Die("bind");
  if (listen(listener, 1024) != 0) Die("listen");
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) Die("epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev) != 0) Die("epoll_ctl");

  Ceiling server;
  delayq::server::IoBatch batch(use_uring);
  std::unordered_map<int, Conn> conns;
  std::vector<epoll_event> events(1024);
  std::vector<char> buf;  // 64 KB per socket of one epoll_wait
  for (;;) {
    int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      Die("epoll_wait");
    }
    // One recv per readable socket, each into its own slice of buf.
    const size_t slice = 64 * 1024;
    if (buf.size() < slice * static_cast<size_t>(n)) buf.resize(slice * static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == listener) {
        int c;
        while ((c = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
          setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          epoll_event cev{};
          cev.events = EPOLLIN;
          cev.data.fd = c;
          if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) != 0) Die("epoll_ctl");
          conns[c].fd = c;
        }
        continue;
      }
      batch.Recv(fd, buf.data() + slice * static_cast<size_t>(i), slice, static_cast<uint64_t>(i));
    }
    for (const auto& r : batch.Run()) {
      int fd = events[r.tag].data.fd;
      if (r.result == -EAGAIN || r.result == -EINTR) continue;
      if (r.result <= 0) {
        close(fd);  // also leaves the epoll set
        conns.erase(fd);
        continue;
      }
      Conn& c = conns[fd];
      c.in.append(buf.data() + slice * r.tag, static_cast<size_t>(r.result));
      std::string& out = server.out();
      out.clear();
      server.Serve(c);
      // Replies to a client that does not read them are dropped: the load
      // generator always reads (a real server would buffer and wait).
      if (!out.empty()) {
        c.out.swap(out);
        batch.Send(fd, c.out.data(), c.out.size(), 0);
      }
    }
    batch.Run();
  }
}

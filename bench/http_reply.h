// What the HTTP load generators (http_loadgen.cc, tls_loadgen.cc) share:
// ending the program with a message, connecting to the server, taking one
// reply off the front of what a connection received, and a percentile of
// the latencies measured.
#ifndef DELAYQ_BENCH_HTTP_REPLY_H_
#define DELAYQ_BENCH_HTTP_REPLY_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace delayq::bench {

// Ends the program with exit status `code`, saying "<program>: <msg>".
[[noreturn]] inline void Die(const char* program, int code, const std::string& msg) {
  std::fprintf(stderr, "%s: %s\n", program, msg.c_str());
  std::exit(code);
}

// A TCP connection to 127.0.0.1:port with TCP_NODELAY. `nonblocking`: the
// socket is non-blocking, and its connect may still be under way. A
// failure ends the program (exit status 1).
inline int ConnectLoopback(int port, bool nonblocking, const char* program) {
  int fd = socket(AF_INET, SOCK_STREAM | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 &&
      !(nonblocking && errno == EINPROGRESS))
    Die(program, 1, std::string("connect: ") + std::strerror(errno));
  return fd;
}

// A complete reply at the front of `in` (its header, then Content-Length
// bytes): its status and body, consumed. False while it is incomplete; a
// header without Content-Length ends the program (`program` names it),
// with exit status 2.
inline bool TakeHttpReply(std::string& in, int* status, std::string* body, const char* program) {
  size_t end = in.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  size_t cl = in.find("Content-Length: ");
  if (cl == std::string::npos || cl > end) {
    std::fprintf(stderr, "%s: reply without Content-Length\n", program);
    std::exit(2);
  }
  size_t len = std::strtoul(in.c_str() + cl + 16, nullptr, 10);
  if (in.size() < end + 4 + len) return false;
  *status = std::atoi(in.c_str() + 9);
  body->assign(in, end + 4, len);
  in.erase(0, end + 4 + len);
  return true;
}

// The p-th percentile of v (sorted in place); 0 when v is empty.
inline double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace delayq::bench

#endif  // DELAYQ_BENCH_HTTP_REPLY_H_

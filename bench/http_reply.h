// What the HTTP load generators (http_loadgen.cc, tls_loadgen.cc) share:
// taking one reply off the front of what a connection received, and a
// percentile of the latencies measured.
#ifndef DELAYQ_BENCH_HTTP_REPLY_H_
#define DELAYQ_BENCH_HTTP_REPLY_H_

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace delayq::bench {

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

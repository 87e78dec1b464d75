// libFuzzer target for the HTTP/JSON API's request handling (routing, path
// decoding, JSON parsing and validation, replies) over a Local backend in
// memory.
//
// The input is a short script of requests, each "<method byte><target>\n
// <body>" separated by a 0xff byte; the method byte picks GET, POST, DELETE,
// HEAD, PUT. Checks, for every request:
//  - the completion runs exactly once: at once, or (a waiting long-poll)
//    when the clock passes its timeout or WakeWaiters answers it;
//  - the status is one the API documents, and the body is one JSON object
//    (an error has {"error":{"code","message"}} with a known code), or, for
//    GET /metrics, lines of the Prometheus text format;
//  - the engine's invariants hold after the script.
//
// Build and run by hand:
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -I src -I include \
//     fuzz/http_api_fuzz.cc src/server/http_api.cc src/server/http_json.cc \
//     src/server/http_input.cc src/server/http_native.cc src/server/http_youzan.cc \
//     src/server/http_metrics.cc src/server/prometheus_text.cc \
//     src/server/json_input.cc src/backend/local_backend.cc \
//     src/store/writer.cc src/store/journal.cc src/store/record_codec.cc \
//     src/core/*.cc (minus *_test.cc) \
//     -o /tmp/http_api_fuzz
//   /tmp/http_api_fuzz -max_total_time=60 -dict=fuzz/http_api.dict /tmp/corpus fuzz/corpus/http
#include <rapidjson/document.h>

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "backend/local_backend.h"
#include "http_fuzz_common.h"
#include "server/http_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* kMethods[] = {"GET", "POST", "DELETE", "HEAD", "PUT"};
  boost::asio::io_context io;
  ManualClock clock;
  backend::LocalBackend::Options o;
  o.max_job_size = 256;
  backend::LocalBackend b(io, o, clock);
  server::ServerContext ctx(b);
  ctx.max_job_size = 256;
  {
    server::HttpApiOptions ao;
    ao.max_batch = 8;
    ao.pop_wait_ms = 50;
    server::HttpApi api(ctx, ao);
    std::string_view in(reinterpret_cast<const char*>(data), size);
    std::vector<int> calls;  // replies seen per request
    while (!in.empty()) {
      size_t end = in.find('\xff');
      std::string_view req = in.substr(0, end);
      in = end == std::string_view::npos ? std::string_view() : in.substr(end + 1);
      if (req.empty()) {
        clock.now += 100;  // an empty request: time passes
        b.Poll();
        continue;
      }
      const char* method = kMethods[static_cast<uint8_t>(req[0]) % 5];
      req.remove_prefix(1);
      size_t nl = req.find('\n');
      std::string target(req.substr(0, nl));
      std::string body(nl == std::string_view::npos ? std::string_view() : req.substr(nl + 1));
      calls.push_back(0);
      size_t index = calls.size() - 1;
      api.Handle(server::HttpRequest{method, target, body}, [&calls, index](server::HttpReply r) {
        calls[index]++;
        CheckReply(r);
      });
      if (index % 4 == 3) ctx.draining = !ctx.draining;
    }
    // Waiting long-polls end by their timeout or by WakeWaiters.
    clock.now += 60'000;
    b.Poll();
    api.WakeWaiters();
    for (size_t i = 0; i < calls.size(); ++i)
      FUZZ_CHECK(calls[i] == 1, "a request not answered once");
  }
  std::string broken = b.engine().CheckInvariants();
  FUZZ_CHECK(broken.empty(), broken.c_str());
  return 0;
}

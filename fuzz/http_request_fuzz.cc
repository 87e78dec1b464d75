// libFuzzer target for the whole HTTP request path short of the socket:
// bytes as a client sends them -> HttpRequestReader (Beast's parser with the
// server's limits and checks) -> HttpApi over a Local backend in memory.
// Inputs go up to the body limit (make fuzz: -max_len=8388608).
//
// The input is fed twice: whole, and cut into pieces at positions taken
// from its own bytes. Checks:
//  - no crash: an exception from the parser is a refusal, never an abort;
//  - both feeds frame the same requests (method, target, body, flags):
//    see SameFraming for where Beast lets them end differently;
//  - a refusal is 400, 413, 415, 431 or 501 with a JSON error body;
//  - every request is answered exactly once, with a documented reply.
//
// Build and run by hand: see the Makefile's run_fuzzers.
#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "backend/local_backend.h"
#include "http_fuzz_common.h"
#include "server/http_request_reader.h"

namespace {

using server::HttpRequestReader;

struct Outcome {
  std::vector<std::string> requests;  // method, target, body and flags, joined
  int refused = 0;                    // the refusal's status, 0 for none
};

// Whole and in pieces, the input framed the same requests. Beast decides
// some refusals by what one call sees: a header both over its limit and
// malformed past it is 400 whole and 431 in pieces; a header ended by a
// bare LF LF is refused whole and waits for more in pieces (the server's
// header timeout ends it). So: where neither refused, the same requests;
// where one did, the requests before it agree.
bool SameFraming(const Outcome& a, const Outcome& b) {
  if (a.refused == 0 && b.refused == 0) return a.requests == b.requests;
  size_t n = std::min(a.requests.size(), b.requests.size());
  return std::equal(a.requests.begin(), a.requests.begin() + static_cast<long>(n),
                    b.requests.begin());
}

// Feeds `pieces` to a reader; each request parsed is handed to `api` (when
// given) and must be answered once.
Outcome Feed(const std::vector<std::string_view>& pieces, server::HttpApi* api) {
  HttpRequestReader reader(4 * 1024, 64 * 1024);
  Outcome out;
  std::string interim;
  for (std::string_view p : pieces) {
    reader.Append(p);
    for (;;) {
      auto r = reader.Parse(HttpRequestReader::Clock::now(), &interim);
      if (r == HttpRequestReader::Result::kNeedMore) break;
      if (r == HttpRequestReader::Result::kRefused) {
        const server::HttpReply& no = reader.refusal();
        FUZZ_CHECK(no.status == 400 || no.status == 413 || no.status == 415 || no.status == 431 ||
                       no.status == 501,
                   no.body.c_str());
        rapidjson::Document d;
        d.Parse(no.body.c_str(), no.body.size());
        FUZZ_CHECK(!d.HasParseError() && d.IsObject() && d.HasMember("error"), no.body.c_str());
        out.refused = no.status;
        return out;
      }
      HttpRequestReader::Request q = reader.request();
      std::string seen(q.method);
      seen += ' ';
      seen += q.target;
      seen += q.keep_alive ? " keep" : " close";
      seen += q.http10 ? " 1.0" : " 1.1";
      seen += '\n';
      seen += q.body;
      out.requests.push_back(std::move(seen));
      if (api != nullptr) {
        int calls = 0;
        api->Handle(server::HttpRequest{q.method == "HEAD" ? "GET" : q.method, q.target, q.body},
                    [&calls](server::HttpReply r) {
                      ++calls;
                      CheckReply(r);
                    });
        // Long-polls are not answered at once: end them now.
        api->WakeWaiters();
        FUZZ_CHECK(calls == 1, "a request not answered once");
      }
      reader.Next();
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  boost::asio::io_context io;
  ManualClock clock;
  backend::LocalBackend::Options o;
  o.max_job_size = 1024;
  backend::LocalBackend b(io, o, clock);
  server::ServerContext ctx(b);
  ctx.max_job_size = 1024;
  Outcome whole;
  {
    server::HttpApiOptions ao;
    ao.max_batch = 8;
    server::HttpApi api(ctx, ao);
    whole = Feed({in}, &api);
  }
  // Cut points from the input's own bytes: the first up to 8 bytes, each a
  // step of 1..256 bytes.
  std::vector<std::string_view> pieces;
  size_t pos = 0;
  for (size_t k = 0; k < 8 && k < size && pos < size; ++k) {
    size_t step = 1 + static_cast<uint8_t>(in[k]);
    pieces.push_back(in.substr(pos, step));
    pos += step;
  }
  if (pos < size) pieces.push_back(in.substr(pos));
  Outcome split = Feed(pieces, nullptr);
  if (!SameFraming(split, whole)) {
    std::fprintf(stderr, "whole: %zu requests, refused %d; split: %zu requests, refused %d\n",
                 whole.requests.size(), whole.refused, split.requests.size(), split.refused);
    FUZZ_CHECK(false, "the input cut in pieces was framed otherwise than whole");
  }
  std::string broken = b.engine().CheckInvariants();
  FUZZ_CHECK(broken.empty(), broken.c_str());
  return 0;
}

// HTTP requests out of bytes: pipelined requests split at every position
// and fed a byte at a time give the same requests; what the reader
// refuses, and the reply it gives; interim 100 Continue; its clock.
#include "server/http_request_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace delayq::server {
namespace {

using Clock = HttpRequestReader::Clock;

struct Seen {
  std::string method, target, body;
  bool keep_alive, http10, head;
  bool operator==(const Seen&) const = default;
};

// Feeds `chunks` one after another; returns the requests parsed and, in
// *refused, the status of a refusal (0: none) and *interim what was to be
// sent meanwhile.
std::vector<Seen> Feed(const std::vector<std::string>& chunks, int* refused = nullptr,
                       std::string* interim = nullptr, size_t max_header = 16 * 1024,
                       size_t max_body = 1024 * 1024) {
  HttpRequestReader r(max_header, max_body);
  std::vector<Seen> out;
  std::string extra;
  if (refused) *refused = 0;
  for (const std::string& c : chunks) {
    r.Append(c);
    for (;;) {
      auto res = r.Parse(Clock::now(), &extra);
      if (res == HttpRequestReader::Result::kNeedMore) break;
      if (res == HttpRequestReader::Result::kRefused) {
        if (refused) *refused = r.refusal().status;
        if (interim) *interim = extra;
        return out;
      }
      auto q = r.request();
      out.push_back(Seen{std::string(q.method), std::string(q.target), std::string(q.body),
                         q.keep_alive, q.http10, q.head});
      r.Next();
    }
  }
  if (interim) *interim = extra;
  return out;
}

const std::string kPipeline =
    "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
    "POST /topics/x/jobs HTTP/1.1\r\nHost: a\r\nContent-Length: 13\r\n\r\n{\"body\":\"hi\"}"
    "POST /reserve HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
    "4\r\n{\"to\r\n9\r\npics\":\"x\"\r\n1\r\n}\r\n0\r\nX-Trailer: t\r\n\r\n"
    "HEAD /stats HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
    "GET /topics HTTP/1.0\r\n\r\n";

const std::vector<Seen> kExpected = {
    {"GET", "/healthz", "", true, false, false},
    {"POST", "/topics/x/jobs", "{\"body\":\"hi\"}", true, false, false},
    {"POST", "/reserve", "{\"topics\":\"x\"}", true, false, false},
    {"HEAD", "/stats", "", false, false, true},
    {"GET", "/topics", "", false, true, false},
};

TEST(HttpRequestReader, PipelinedRequestsWhole) { EXPECT_EQ(Feed({kPipeline}), kExpected); }

TEST(HttpRequestReader, SplitInTwoAtEveryPosition) {
  for (size_t i = 1; i < kPipeline.size(); ++i)
    ASSERT_EQ(Feed({kPipeline.substr(0, i), kPipeline.substr(i)}), kExpected) << "split at " << i;
}

TEST(HttpRequestReader, OneByteAtATime) {
  std::vector<std::string> bytes;
  for (char c : kPipeline) bytes.emplace_back(1, c);
  EXPECT_EQ(Feed(bytes), kExpected);
}

TEST(HttpRequestReader, Refusals) {
  struct Case {
    std::string input;
    int status;
  };
  const std::vector<Case> cases = {
      {"GET / HTTP/1.1\r\nX: " + std::string(300, 'a') + "\r\n\r\n", 431},
      {"POST / HTTP/1.1\r\nContent-Length: 300\r\n\r\n", 413},
      {"POST / HTTP/1.1\r\nContent-Length: 9223372036854775808\r\n\r\n", 413},
      {"POST / HTTP/1.1\r\nContent-Length: 1, 2\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}", 415},
      {"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 tls hello\r\n\r\n", 400},
      {std::string("GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n", 29), 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n", 400},
  };
  for (const Case& c : cases) {
    int refused = 0;
    EXPECT_TRUE(Feed({c.input}, &refused, nullptr, 256, 256).empty()) << c.input;
    EXPECT_EQ(refused, c.status) << c.input;
  }
}

// Beast throws std::length_error on a trailer field of 64 KiB or more:
// refused with 400, and the exception is told for the log.
TEST(HttpRequestReader, TrailerFieldsAreDroppedAndHeldToTheHeaderLimit) {
  // Trailer fields after a chunked body: read and dropped; an
  // Authorization among them is not the request's.
  HttpRequestReader r(16 * 1024, 1024);
  std::string extra;
  r.Append(
      "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n"
      "Authorization: Bearer from-the-trailer\r\nX: y\r\n\r\n");
  ASSERT_EQ(r.Parse(Clock::now(), &extra), HttpRequestReader::Result::kRequest);
  EXPECT_EQ(r.request().body, "{}");
  EXPECT_EQ(r.request().authorization, "");
  r.Next();
  // More trailer than the header may have: 431, whether it comes whole
  // and ended, or without end a piece at a time (refused before the input
  // held grows past twice the limit by much).
  const std::string chunked = "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  {
    HttpRequestReader t(16 * 1024, 1024);
    t.Append(chunked + "0\r\nX: " + std::string(20'000, 'a') + "\r\n\r\n");
    ASSERT_EQ(t.Parse(Clock::now(), &extra), HttpRequestReader::Result::kRefused);
    EXPECT_EQ(t.refusal().status, 431);
  }
  {
    HttpRequestReader t(16 * 1024, 1024);
    t.Append(chunked + "0\r\nX: ");
    HttpRequestReader::Result got = t.Parse(Clock::now(), &extra);
    size_t sent = 0;
    while (got == HttpRequestReader::Result::kNeedMore && sent < 100'000) {
      t.Append(std::string(1000, 'a'));
      sent += 1000;
      got = t.Parse(Clock::now(), &extra);
    }
    ASSERT_EQ(got, HttpRequestReader::Result::kRefused);
    EXPECT_EQ(t.refusal().status, 431);
    EXPECT_LE(sent, 2u * 16 * 1024 + 1000);
    EXPECT_EQ(t.buffered(), 0u);
  }
  // A chunk's extensions, likewise.
  {
    HttpRequestReader t(16 * 1024, 1024);
    t.Append(chunked + "2;x=" + std::string(20'000, 'e') + "\r\n{}\r\n0\r\n\r\n");
    ASSERT_EQ(t.Parse(Clock::now(), &extra), HttpRequestReader::Result::kRefused);
    EXPECT_EQ(t.refusal().status, 431);
  }
}

TEST(HttpRequestReader, ExpectContinueOnceTheHeaderIsWholeAndTheBodyIsNot) {
  const std::string head =
      "POST /topics/x/jobs HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n";
  std::string interim;
  EXPECT_TRUE(Feed({head}, nullptr, &interim).empty());
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  // Split anywhere in the header: still once.
  for (size_t i = 1; i < head.size(); ++i) {
    auto got = Feed({head.substr(0, i), head.substr(i), "{}"}, nullptr, &interim);
    ASSERT_EQ(got.size(), 1u) << i;
    EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n") << i;
  }
  // The body came with the header: no interim reply.
  EXPECT_EQ(Feed({head + "{}"}, nullptr, &interim).size(), 1u);
  EXPECT_EQ(interim, "");
}

TEST(HttpRequestReader, TellsWhenARequestBeganAndItsHeaderEnded) {
  HttpRequestReader r(16 * 1024, 1024);
  std::string extra;
  const Clock::time_point t0{};
  EXPECT_FALSE(r.begun());
  r.Append("POST / HTTP/1.1\r\nContent-");
  EXPECT_EQ(r.Parse(t0 + std::chrono::seconds(1), &extra), HttpRequestReader::Result::kNeedMore);
  EXPECT_TRUE(r.begun());
  EXPECT_FALSE(r.header_done());
  EXPECT_EQ(r.begun_at(), t0 + std::chrono::seconds(1));
  r.Append("Length: 4\r\n\r\n{}");
  EXPECT_EQ(r.Parse(t0 + std::chrono::seconds(3), &extra), HttpRequestReader::Result::kNeedMore);
  EXPECT_TRUE(r.header_done());
  EXPECT_EQ(r.header_done_at(), t0 + std::chrono::seconds(3));
  EXPECT_EQ(r.begun_at(), t0 + std::chrono::seconds(1));
  r.Append("{}");
  ASSERT_EQ(r.Parse(t0 + std::chrono::seconds(4), &extra), HttpRequestReader::Result::kRequest);
  EXPECT_EQ(r.request().body, "{}{}");
  r.Next();
  EXPECT_FALSE(r.begun());
  EXPECT_FALSE(r.header_done());
}

}  // namespace
}  // namespace delayq::server

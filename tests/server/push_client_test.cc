// PushClient (delivery/push_client.h) against a real HTTP receiver on
// loopback, on a real Asio loop: what arrives (method, headers, body), what
// comes back (status, the answer's first bytes, Retry-After), each way a
// request can fail (timeout, a close without an answer, nobody listening, a
// private address refused), connections kept alive and reused, redirects
// followed only when asked, many requests at once, and a client destroyed
// with requests in flight.
#include "delivery/push_client.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "server/http_receiver.h"
#include "server/io_wait.h"

namespace delayq::testing {
namespace {

using delivery::PushClient;
using delivery::PushFailure;
using delivery::PushRequest;
using delivery::PushResponse;
using namespace std::chrono_literals;

PushRequest To(std::string url) {
  PushRequest r;
  r.url = std::move(url);
  return r;
}

class PushClientTest : public ::testing::Test {
 protected:
  PushClient::Options Open() {
    PushClient::Options o;
    o.allow_private = true;  // the receiver is on loopback
    return o;
  }
  // Sends one request and runs the loop until its answer.
  PushResponse SendOne(PushClient& c, PushRequest r) {
    std::optional<PushResponse> got;
    c.Send(std::move(r), [&](PushResponse resp) { got = std::move(resp); });
    EXPECT_TRUE(RunIoUntil(
        io_, [&] { return got.has_value(); }, 20s));
    return got.value_or(PushResponse{});
  }
  boost::asio::io_context io_;
};

TEST_F(PushClientTest, ARequestArrivesWhole_AndItsAnswerComesBack) {
  HttpReceiver rx([](const HttpReceiver::Request&) {
    HttpReceiver::Answer a;
    a.status = 201;
    a.body = "created " + std::string(2000, 'x');
    return a;
  });
  PushClient c(io_, Open());
  PushRequest r;
  r.url = rx.url("/hooks/order?shop=7");
  r.headers = {"Content-Type: application/json", "webhook-id: msg_1"};
  r.body = R"({"order":42})";
  PushResponse resp = SendOne(c, r);
  EXPECT_EQ(resp.failure, PushFailure::kNone) << resp.error;
  EXPECT_EQ(resp.status, 201);
  EXPECT_EQ(resp.body_prefix.size(), PushClient::kBodyPrefixBytes);  // the first 1 KiB only
  EXPECT_EQ(resp.body_prefix.substr(0, 8), "created ");
  const std::vector<HttpReceiver::Request> first = rx.requests();
  ASSERT_EQ(first.size(), 1u);
  const HttpReceiver::Request& got = first[0];
  EXPECT_EQ(got.method, "POST");
  EXPECT_EQ(got.target, "/hooks/order?shop=7");
  EXPECT_EQ(got.body, R"({"order":42})");
  EXPECT_EQ(got.headers.at("content-type"), "application/json");
  EXPECT_EQ(got.headers.at("webhook-id"), "msg_1");
  EXPECT_EQ(got.headers.count("expect"), 0u);
  // Other methods; a large body arrives whole.
  r.method = "PUT";
  r.body = std::string(1 << 20, 'b');
  EXPECT_EQ(SendOne(c, r).status, 201);
  r.method = "GET";
  r.body.clear();
  EXPECT_EQ(SendOne(c, r).status, 201);
  ASSERT_EQ(rx.requests().size(), 3u);
  EXPECT_EQ(rx.requests()[1].method, "PUT");
  EXPECT_EQ(rx.requests()[1].body.size(), size_t{1} << 20);
  EXPECT_EQ(rx.requests()[2].method, "GET");
}

TEST_F(PushClientTest, ErrorsAndRetryAfterAreTheReceivers) {
  HttpReceiver rx([](const HttpReceiver::Request& q) {
    HttpReceiver::Answer a;
    if (q.target == "/busy") {
      a.status = 429;
      a.headers = {"Retry-After: 7"};
    } else if (q.target == "/gone") {
      a.status = 410;
    } else {
      a.status = 500;
      a.body = "boom";
    }
    return a;
  });
  PushClient c(io_, Open());
  PushResponse busy = SendOne(c, To(rx.url("/busy")));
  EXPECT_EQ(busy.status, 429);
  EXPECT_EQ(busy.retry_after, "7");
  EXPECT_EQ(SendOne(c, To(rx.url("/gone"))).status, 410);
  PushResponse boom = SendOne(c, To(rx.url("/x")));
  EXPECT_EQ(boom.status, 500);
  EXPECT_EQ(boom.body_prefix, "boom");
  EXPECT_FALSE(boom.retry_after.has_value());
}

TEST_F(PushClientTest, NoAnswerIsAFailureThatSaysWhy) {
  HttpReceiver rx([](const HttpReceiver::Request& q) {
    HttpReceiver::Answer a;
    a.hang = q.target == "/hang";
    a.close = q.target == "/close";
    return a;
  });
  PushClient c(io_, Open());
  PushRequest slow = To(rx.url("/hang"));
  slow.timeout_ms = 300;
  PushResponse t = SendOne(c, slow);
  EXPECT_EQ(t.status, 0);
  EXPECT_EQ(t.failure, PushFailure::kTimeout) << t.error;
  EXPECT_GE(t.elapsed_ms, 290);
  EXPECT_LT(t.elapsed_ms, 3000);
  PushResponse closed = SendOne(c, To(rx.url("/close")));
  EXPECT_EQ(closed.status, 0);
  EXPECT_EQ(closed.failure, PushFailure::kProtocol) << closed.error;
  EXPECT_FALSE(closed.error.empty());
  // Nobody listening.
  uint16_t dead_port;
  {
    HttpReceiver gone;
    dead_port = gone.port();
  }
  PushResponse refused = SendOne(c, To("http://127.0.0.1:" + std::to_string(dead_port) + "/"));
  EXPECT_EQ(refused.failure, PushFailure::kConnect) << refused.error;
}

TEST_F(PushClientTest, PrivateAddressesAreRefusedUnlessAllowed) {
  HttpReceiver rx;
  PushClient::Options strict;  // allow_private false: the default
  PushClient c(io_, strict);
  for (std::string url : {rx.url("/"), "http://localhost:" + std::to_string(rx.port()) + "/",
                          "http://[::ffff:127.0.0.1]:" + std::to_string(rx.port()) + "/"}) {
    PushResponse r = SendOne(c, To(url));
    EXPECT_EQ(r.failure, PushFailure::kRefused) << url << ": " << r.error;
    EXPECT_NE(r.error.find("loopback"), std::string::npos) << r.error;
  }
  EXPECT_EQ(rx.connections(), 0);  // not a byte reached it
  EXPECT_EQ(rx.requests().size(), 0u);
}

TEST_F(PushClientTest, ConnectionsAreKeptAliveAndReused) {
  HttpReceiver rx;
  PushClient c(io_, Open());
  for (int i = 0; i < 50; ++i) ASSERT_EQ(SendOne(c, To(rx.url("/k"))).status, 200);
  EXPECT_EQ(rx.connections(), 1);
  EXPECT_EQ(c.connections_opened(), 1u);
}

TEST_F(PushClientTest, RedirectsAreFollowedOnlyWhenAsked) {
  HttpReceiver rx([](const HttpReceiver::Request& q) {
    HttpReceiver::Answer a;
    if (q.target == "/old") {
      a.status = 302;
      a.headers = {"Location: /new"};
    }
    return a;
  });
  PushClient c(io_, Open());
  EXPECT_EQ(SendOne(c, To(rx.url("/old"))).status, 302);
  PushRequest follow = To(rx.url("/old"));
  follow.follow_redirects = true;
  EXPECT_EQ(SendOne(c, follow).status, 200);
  EXPECT_EQ(rx.requests().back().target, "/new");
}

TEST_F(PushClientTest, ManyRequestsAtOnceAllComplete) {
  HttpReceiver rx([](const HttpReceiver::Request&) {
    HttpReceiver::Answer a;
    a.delay = 5ms;
    return a;
  });
  PushClient::Options o = Open();
  o.max_host_connections = 16;
  PushClient c(io_, o);
  int ok = 0, done = 0;
  for (int i = 0; i < 300; ++i)
    c.Send(To(rx.url("/m/" + std::to_string(i))), [&](PushResponse r) {
      ++done;
      if (r.status == 200) ++ok;
    });
  EXPECT_EQ(c.in_flight(), 300u);
  ASSERT_TRUE(RunIoUntil(
      io_, [&] { return done == 300; }, 60s))
      << done;
  EXPECT_EQ(ok, 300);
  EXPECT_LE(rx.connections(), 16);
  EXPECT_EQ(c.in_flight(), 0u);
}

TEST_F(PushClientTest, ADestroyedClientCallsNoCompletion) {
  HttpReceiver rx([](const HttpReceiver::Request&) {
    HttpReceiver::Answer a;
    a.hang = true;
    return a;
  });
  int called = 0;
  {
    PushClient c(io_, Open());
    for (int i = 0; i < 5; ++i) c.Send(To(rx.url("/h")), [&](PushResponse) { ++called; });
    rx.WaitFor(0, 0ms);
    RunIoUntil(
        io_, [&] { return rx.requests().size() == 5; }, 10s);
  }
  RunIoFor(io_, 100ms);
  EXPECT_EQ(called, 0);
}

}  // namespace
}  // namespace delayq::testing

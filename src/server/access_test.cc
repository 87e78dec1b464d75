// The pieces of access control (access.h, delayq/token.h) on their own:
// topic patterns, networks, token digests and secrets, rate buckets, and a
// caller's standing across a reload. The server-level behaviour is in
// tests/server/auth_test.cc.
#include "server/access.h"

#include <gtest/gtest.h>

#include <set>

namespace delayq::server {
namespace {

using boost::asio::ip::make_address;

TEST(TopicPattern, StarsStandForAnyRun) {
  EXPECT_TRUE(TopicMatches("*", "anything"));
  EXPECT_TRUE(TopicMatches("orders.*", "orders.eu"));
  EXPECT_TRUE(TopicMatches("orders.*", "orders."));
  EXPECT_TRUE(TopicMatches("orders.*", "orders.eu.paris"));
  EXPECT_FALSE(TopicMatches("orders.*", "orders"));
  EXPECT_FALSE(TopicMatches("orders.*", "xorders.eu"));
  EXPECT_TRUE(TopicMatches("*.eu", "orders.eu"));
  EXPECT_FALSE(TopicMatches("*.eu", "orders.eu2"));
  EXPECT_TRUE(TopicMatches("a*b*c", "aXXbYYbc"));
  EXPECT_FALSE(TopicMatches("a*b*c", "aXXbYYb"));
  EXPECT_TRUE(TopicMatches("orders", "orders"));
  EXPECT_FALSE(TopicMatches("orders", "orders2"));
  EXPECT_TRUE(TopicMatches("**", ""));
  // Worst case of backing up: still quick on 200-byte names.
  EXPECT_FALSE(TopicMatches(std::string(100, '*') + "b", std::string(199, 'a')));
}

TEST(TopicPattern, IsATopicNameWithStars) {
  for (const char* good : {"*", "orders.*", "a", "*.eu", "x*y*z", "$(tmp)_+;/"})
    EXPECT_TRUE(CheckTopicPattern(good).ok()) << good;
  for (const char* bad : {"", "-x", "a b", "a\"", "ä"})
    EXPECT_FALSE(CheckTopicPattern(bad).ok()) << bad;
  EXPECT_FALSE(CheckTopicPattern(std::string(201, 'a')).ok());
}

TEST(Networks, ParsedMatchedAndShown) {
  auto n = Networks::Parse("10.0.0.0/8, 192.168.1.7,fd00::/8,::1");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->ToString(), "10.0.0.0/8,192.168.1.7/32,fd00::/8,::1/128");
  EXPECT_TRUE(n->Contains(make_address("10.200.3.4")));
  EXPECT_FALSE(n->Contains(make_address("11.0.0.1")));
  EXPECT_TRUE(n->Contains(make_address("192.168.1.7")));
  EXPECT_FALSE(n->Contains(make_address("192.168.1.8")));
  EXPECT_TRUE(n->Contains(make_address("fd12::1")));
  EXPECT_FALSE(n->Contains(make_address("fe80::1")));
  EXPECT_TRUE(n->Contains(make_address("::1")));
  // An IPv4 client on an IPv6 socket counts as its IPv4 address.
  EXPECT_TRUE(n->Contains(make_address("::ffff:10.1.2.3")));
  EXPECT_FALSE(n->Contains(make_address("::ffff:11.1.2.3")));
  auto odd = Networks::Parse("10.1.2.3/13");  // bits past the prefix do not matter
  ASSERT_TRUE(odd.ok());
  EXPECT_TRUE(odd->Contains(make_address("10.7.255.255")));
  EXPECT_FALSE(odd->Contains(make_address("10.8.0.0")));
  auto all = Networks::Parse("0.0.0.0/0");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->Contains(make_address("203.0.113.9")));
  EXPECT_FALSE(all->Contains(make_address("2001:db8::1")));
  for (const char* none : {"", "none", " none "}) {
    auto e = Networks::Parse(none);
    ASSERT_TRUE(e.ok());
    EXPECT_TRUE(e->empty());
    EXPECT_EQ(e->ToString(), "none");
    EXPECT_FALSE(e->Contains(make_address("127.0.0.1")));
  }
  for (const char* bad : {"10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/x", "host.example",
                          "10.0.0.0/8,,", "1.2.3.4/0008", "10.0.0.0/-1"}) {
    auto b = Networks::Parse(bad);
    EXPECT_FALSE(b.ok()) << bad;
  }
}

TEST(Token, DigestsAndSecrets) {
  // FIPS 180-2's example.
  EXPECT_EQ(DigestHex(Sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Digest d{};
  EXPECT_TRUE(ParseDigestHex(DigestHex(Sha256("x")), &d));
  EXPECT_TRUE(DigestsEqual(d, Sha256("x")));
  EXPECT_TRUE(
      ParseDigestHex("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD", &d));
  EXPECT_FALSE(ParseDigestHex("ba78", &d));
  EXPECT_FALSE(ParseDigestHex(std::string(63, 'a') + "g", &d));
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    auto s = NewSecret();
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->size(), 46u);
    EXPECT_EQ(s->substr(0, 3), "dq_");
    EXPECT_EQ(
        s->find_first_not_of("dq_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-"),
        std::string::npos);
    seen.insert(*s);
  }
  EXPECT_EQ(seen.size(), 100u);
}

std::shared_ptr<const AccessPolicy> Policy(std::vector<Token> tokens, const char* nets = "none") {
  auto p = AccessPolicy::Make(std::move(tokens), *Networks::Parse(nets));
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return *p;
}

Token MakeToken(std::string name, std::string secret, std::vector<std::string> topics,
                uint8_t rights, double rate = 0, double burst = 0) {
  Token t;
  t.name = std::move(name);
  t.sha256 = Sha256(secret);
  t.topics = std::move(topics);
  t.rights = rights;
  t.rate = rate;
  t.burst = burst;
  return t;
}

TEST(AccessPolicy, RefusesTokensThatCannotBeTold) {
  EXPECT_FALSE(
      AccessPolicy::Make(
          {MakeToken("a", "s", {"*"}, kRightAdmin), MakeToken("a", "t", {"*"}, kRightAdmin)}, {})
          .ok());
  EXPECT_FALSE(
      AccessPolicy::Make(
          {MakeToken("a", "s", {"*"}, kRightAdmin), MakeToken("b", "s", {"*"}, kRightAdmin)}, {})
          .ok());
  EXPECT_FALSE(AccessPolicy::Make({MakeToken("a", "s", {"*"}, 0)}, {}).ok());
  EXPECT_FALSE(AccessPolicy::Make({MakeToken("a", "s", {}, kRightAdmin)}, {}).ok());
  EXPECT_FALSE(AccessPolicy::Make({MakeToken("a", "s", {"*"}, kRightAdmin, -1)}, {}).ok());
}

TEST(AccessGuard, ABucketRefillsAtItsRate) {
  AccessGuard g;
  const Token t = MakeToken("t", "s", {"*"}, kRightProduce, 10, 3);
  const auto t0 = AccessGuard::Clock::time_point{} + std::chrono::hours(1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(g.Take(t, t0), 0) << i;  // the burst
  EXPECT_EQ(g.Take(t, t0), 100);                                 // one more in 100 ms
  EXPECT_EQ(g.Take(t, t0 + std::chrono::milliseconds(50)), 50);
  EXPECT_EQ(g.Take(t, t0 + std::chrono::milliseconds(100)), 0);
  EXPECT_GT(g.Take(t, t0 + std::chrono::milliseconds(100)), 0);
  // Never more than the burst, however long it rests.
  const auto later = t0 + std::chrono::hours(1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(g.Take(t, later), 0) << i;
  EXPECT_GT(g.Take(t, later), 0);
  const Token free = MakeToken("f", "s2", {"*"}, kRightProduce);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(g.Take(free, t0), 0);
}

TEST(Caller, StandingFromPeerTokenAndReload) {
  AccessGuard g;
  g.Reload(Policy({MakeToken("orders", "so", {"orders.*"}, kRightProduce | kRightConsume),
                   MakeToken("ops", "sx", {"*"}, kAllRights)},
                  "10.0.0.0/8"));
  int64_t retry = 0;
  Caller inside(g, make_address("10.1.1.1"));
  EXPECT_TRUE(inside.trusted());
  EXPECT_TRUE(inside.Admit(Op::kStats, &retry).ok());
  EXPECT_TRUE(inside.Everywhere(Scope::kAdmin));

  Caller outside(g, make_address("192.0.2.1"));
  EXPECT_FALSE(outside.trusted());
  EXPECT_EQ(outside.Admit(Op::kPut, &retry).code(), Code::kUnauthenticated);
  EXPECT_TRUE(outside.Admit(Op::kQuit, &retry).ok());
  EXPECT_TRUE(outside.Admit(Op::kHealth, &retry).ok());
  EXPECT_EQ(outside.Authenticate("wrong").code(), Code::kUnauthenticated);
  ASSERT_TRUE(outside.Authenticate("so").ok());
  EXPECT_TRUE(outside.Admit(Op::kPut, &retry).ok());
  EXPECT_TRUE(outside.Check(Scope::kProduce, "orders.eu").ok());
  EXPECT_TRUE(outside.Check(Scope::kRead, "orders.eu").ok());
  EXPECT_EQ(outside.Check(Scope::kAdmin, "orders.eu").code(), Code::kPermissionDenied);
  EXPECT_EQ(outside.Check(Scope::kProduce, "payments").code(), Code::kPermissionDenied);
  EXPECT_EQ(outside.Check(Scope::kProduce, "payments").message(),
            "token 'orders' has no 'produce' right on topic 'payments'");
  EXPECT_TRUE(outside.Check(Scope::kAuthenticated, "payments").ok());
  EXPECT_FALSE(outside.Everywhere(Scope::kProduce));
  EXPECT_FALSE(outside.Sees("payments"));

  // A token narrows a trusted caller too.
  ASSERT_TRUE(inside.Authenticate("so").ok());
  EXPECT_FALSE(inside.Everywhere(Scope::kAdmin));

  // Reloaded without the token: refused from the next request; with it
  // again under other rights: those.
  g.Reload(Policy({MakeToken("ops", "sx", {"*"}, kAllRights)}, "10.0.0.0/8"));
  EXPECT_EQ(outside.Admit(Op::kPut, &retry).code(), Code::kUnauthenticated);
  EXPECT_EQ(inside.Admit(Op::kPut, &retry).code(), Code::kUnauthenticated);
  g.Reload(Policy({MakeToken("orders", "so", {"*"}, kRightAdmin)}, "none"));
  EXPECT_TRUE(outside.Admit(Op::kPut, &retry).ok());
  EXPECT_TRUE(outside.Check(Scope::kAdmin, "payments").ok());
  EXPECT_EQ(outside.Check(Scope::kProduce, "payments").code(), Code::kPermissionDenied);
  Caller was_inside(g, make_address("10.1.1.1"));  // the networks changed too
  EXPECT_EQ(was_inside.Admit(Op::kPut, &retry).code(), Code::kUnauthenticated);
  // A caller in this process is trusted.
  Caller local(g, std::nullopt);
  EXPECT_TRUE(local.Admit(Op::kClearTopic, &retry).ok());
}

TEST(Caller, OverItsRateSaysWhenToComeBack) {
  AccessGuard g;
  g.Reload(Policy({MakeToken("slow", "s", {"*"}, kRightProduce, 1, 1)}));
  Caller a(g, make_address("192.0.2.1")), b(g, make_address("192.0.2.2"));
  ASSERT_TRUE(a.Authenticate("s").ok());
  ASSERT_TRUE(b.Authenticate("s").ok());
  int64_t retry = 0;
  EXPECT_TRUE(a.Admit(Op::kPut, &retry).ok());
  // The bucket is the token's: another connection of it finds it empty.
  Status st = b.Admit(Op::kPut, &retry);
  EXPECT_EQ(st.code(), Code::kRateLimited);
  EXPECT_GT(retry, 900);
  EXPECT_LE(retry, 1000);
  EXPECT_TRUE(b.Admit(Op::kQuit, &retry).ok());  // open to all, not counted
}

}  // namespace
}  // namespace delayq::server

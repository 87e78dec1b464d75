// A push target's JSON: every field read, each refusal saying which field,
// the stored form read back to the same target, the shown form without
// the secret; PushTargets telling its listeners of real changes only.
#include "delivery/push_target.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "delivery/webhook.h"

namespace delayq::delivery {
namespace {

constexpr const char* kTargetSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

TEST(PushTarget, EveryFieldIsRead_AndTheStoredFormReadsBackTheSame) {
  auto t = ParsePushTarget(
      "orders",
      R"({"url":"https://hooks.example.com/o?x=1","secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",)"
      R"("method":"PUT","headers":{"Authorization":"Bearer x","X-Env":"prod"},"timeout":"10s",)"
      R"("concurrency":4,"rate":{"per_second":50,"burst":5},"follow_redirects":true,)"
      R"("backoff":"1s,1m","max_tries":3})");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->topic, "orders");
  EXPECT_EQ(t->url, "https://hooks.example.com/o?x=1");
  EXPECT_EQ(t->secret, kTargetSecret);
  EXPECT_EQ(t->method, "PUT");
  ASSERT_EQ(t->headers.size(), 2u);
  EXPECT_EQ(t->headers[0].first, "Authorization");
  EXPECT_EQ(t->timeout_ms, 10'000);
  EXPECT_EQ(t->concurrency, 4u);
  EXPECT_EQ(t->rate_per_second, 50u);
  EXPECT_EQ(t->burst, 5u);
  EXPECT_TRUE(t->follow_redirects);
  EXPECT_EQ(t->backoff, Backoff::List({1000, 60'000}));
  EXPECT_EQ(t->max_tries, 3u);
  auto back = ParsePushTarget("orders", StoredJson(*t));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, *t);
  const std::string shown = ShownJson(*t);
  EXPECT_EQ(shown.find("whsec_"), std::string::npos) << shown;
  EXPECT_NE(shown.find(R"("secret_set":true)"), std::string::npos) << shown;
}

TEST(PushTarget, DefaultsAndAMadeSecret) {
  auto t = ParsePushTarget("t", R"({"url":"http://h/"})");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->method, "POST");
  EXPECT_EQ(t->timeout_ms, 30'000);
  EXPECT_EQ(t->concurrency, 16u);
  EXPECT_EQ(t->rate_per_second, 0u);
  EXPECT_EQ(t->backoff.kind, Backoff::Kind::kNone);
  EXPECT_TRUE(WebhookKey(t->secret).ok());
  auto kept = ParsePushTarget("t", R"({"url":"http://h/"})", kTargetSecret);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->secret, kTargetSecret);
}

TEST(PushTarget, EachRefusalNamesItsField) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"[]", "JSON object"},
      {R"({})", "'url'"},
      {R"({"url":"ftp://h/"})", "'url'"},
      {R"({"url":"http://u:p@h/"})", "'url'"},
      {R"({"url":"http://h/","secret":"whsec_short"})", "'secret'"},
      {R"({"url":"http://h/","method":"TRACE"})", "'method'"},
      {R"({"url":"http://h/","headers":{"webhook-id":"x"}})", "'headers'"},
      {R"({"url":"http://h/","headers":{"Host":"x"}})", "'headers'"},
      {R"({"url":"http://h/","headers":{"X":"a\r\nB: c"}})", "'headers'"},
      {R"({"url":"http://h/","headers":{"bad name":"x"}})", "'headers'"},
      {R"({"url":"http://h/","timeout_ms":0})", "'timeout_ms'"},
      {R"({"url":"http://h/","timeout":"1h"})", "'timeout'"},
      {R"({"url":"http://h/","concurrency":0})", "'concurrency'"},
      {R"({"url":"http://h/","rate":{"per_second":-1}})", "'rate.per_second'"},
      {R"({"url":"http://h/","rate":{"often":1}})", "'rate.often'"},
      {R"({"url":"http://h/","backoff":"soon"})", "'backoff'"},
      {R"({"url":"http://h/","topic":"other"})", "'topic'"},
      {R"({"url":"http://h/","colour":"red"})", "'colour'"},
  };
  for (const auto& [json, field] : bad) {
    auto t = ParsePushTarget("t", json);
    ASSERT_FALSE(t.ok()) << json;
    EXPECT_EQ(t.status().code(), Code::kInvalidArgument) << json;
    EXPECT_NE(t.status().message().find(field), std::string::npos)
        << json << ": " << t.status().message();
  }
}

TEST(PushTargets, ListenersHearOfChangesOnly) {
  PushTargets targets;
  std::vector<std::string> heard;
  targets.Listen([&](std::string_view topic, const PushTarget* now) {
    heard.push_back(std::string(topic) + (now != nullptr ? " set" : " removed"));
  });
  auto t = ParsePushTarget("a", R"({"url":"http://h/"})", kTargetSecret);
  ASSERT_TRUE(t.ok());
  targets.Set(*t);
  targets.Set(*t);  // the same: nothing to tell
  t->concurrency = 2;
  targets.Set(*t);
  EXPECT_TRUE(targets.IsPushTopic("a"));
  EXPECT_TRUE(targets.Remove("a"));
  EXPECT_FALSE(targets.Remove("a"));
  EXPECT_EQ(heard, (std::vector<std::string>{"a set", "a set", "a removed"}));
  // Save and Drop without a store behind them act at once.
  std::vector<::delayq::Status> done;
  targets.Save(*t, [&](::delayq::Status st) { done.push_back(st); });
  targets.Drop("a", [&](::delayq::Status st) { done.push_back(st); });
  targets.Drop("a", [&](::delayq::Status st) { done.push_back(st); });
  ASSERT_EQ(done.size(), 3u);
  EXPECT_TRUE(done[0].ok());
  EXPECT_TRUE(done[1].ok());
  EXPECT_EQ(done[2].code(), Code::kNotFound);
}

}  // namespace
}  // namespace delayq::delivery

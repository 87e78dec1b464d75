// The Standard Webhooks signature against the specification's own example
// (its reference libraries' test: the same key, id, time and body give
// this signature), and the secrets it refuses.
#include "delivery/webhook.h"

#include <gtest/gtest.h>

namespace delayq::delivery {
namespace {

TEST(Webhook, SignsAsTheStandardsExampleDoes) {
  Result<std::string> key = WebhookKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
  ASSERT_TRUE(key.ok()) << key.status().message();
  EXPECT_EQ(key->size(), 24u);
  EXPECT_EQ(
      WebhookSignature(*key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, R"({"test": 2432232314})"),
      "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  // The prefix is optional; any change of id, time or body changes it.
  Result<std::string> bare = WebhookKey("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(*bare, *key);
  const std::string base =
      WebhookSignature(*key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, R"({"test": 2432232314})");
  EXPECT_NE(
      WebhookSignature(*key, "msg_p5jXN8AQM9LWM0D4loKWxJeK", 1614265330, R"({"test": 2432232314})"),
      base);
  EXPECT_NE(
      WebhookSignature(*key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265331, R"({"test": 2432232314})"),
      base);
  EXPECT_NE(
      WebhookSignature(*key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, R"({"test": 2432232315})"),
      base);
}

TEST(Webhook, RefusesSecretsThatAreNotBase64OrOfTheWrongSize) {
  for (const char* s : {"", "whsec_", "whsec_not base64!",
                        "whsec_c2hvcnQ=", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS"}) {
    Result<std::string> k = WebhookKey(s);
    EXPECT_FALSE(k.ok()) << s;
    if (!k.ok()) EXPECT_EQ(k.code(), Code::kInvalidArgument);
  }
  // 65 bytes: too long.
  EXPECT_FALSE(WebhookKey("whsec_" + std::string(88, 'A')).ok());
}

TEST(Webhook, NewSecretsAreWellFormedAndDiffer) {
  Result<std::string> a = NewWebhookSecret(), b = NewWebhookSecret();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->rfind("whsec_", 0), 0u);
  EXPECT_NE(*a, *b);
  Result<std::string> key = WebhookKey(*a);
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(key->size(), 32u);
}

}  // namespace
}  // namespace delayq::delivery

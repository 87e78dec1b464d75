#include "delivery/webhook.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <string>

#include "delayq/text.h"

namespace delayq::delivery {

Result<std::string> WebhookKey(std::string_view secret) {
  constexpr std::string_view kPrefix = "whsec_";
  if (secret.substr(0, kPrefix.size()) == kPrefix) secret.remove_prefix(kPrefix.size());
  std::string key;
  if (!Base64Decode(secret, &key))
    return Status::InvalidArgument("a webhook secret is \"whsec_\" and base64 (RFC 4648)");
  if (key.size() < 24 || key.size() > 64)
    return Status::InvalidArgument("a webhook secret holds 24 to 64 bytes; this one holds " +
                                   std::to_string(key.size()));
  return key;
}

std::string WebhookSignature(std::string_view key, std::string_view id, int64_t timestamp_s,
                             std::string_view body) {
  std::string signed_text;
  signed_text.reserve(id.size() + body.size() + 24);
  signed_text.append(id).append(".").append(std::to_string(timestamp_s)).append(".").append(body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(signed_text.data()), signed_text.size(), mac, &len);
  return "v1," + Base64Encode(std::string_view(reinterpret_cast<const char*>(mac), len));
}

Result<std::string> NewWebhookSecret() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return Status::Internal("no random bytes for a secret");
  return "whsec_" +
         Base64Encode(std::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

}  // namespace delayq::delivery

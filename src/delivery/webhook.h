// Signing pushed requests by the Standard Webhooks scheme
// (https://www.standardwebhooks.com; docs/push.md): a topic's secret is
// "whsec_" and the base64 of 24..64 random bytes; each request carries
// `webhook-id`, `webhook-timestamp` (Unix seconds) and `webhook-signature`,
// "v1," and the base64 of HMAC-SHA256(key, "<id>.<timestamp>.<body>").
// A receiver recomputes it with the same secret (docs/push.md shows it in
// Python and Node).
#ifndef DELAYQ_DELIVERY_WEBHOOK_H_
#define DELAYQ_DELIVERY_WEBHOOK_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "delayq/status.h"

namespace delayq::delivery {

// The key a secret stands for: the bytes of its base64 ("whsec_" is
// optional). kInvalidArgument when it is not base64 or not 24..64 bytes.
Result<std::string> WebhookKey(std::string_view secret);

// "v1,<base64 of HMAC-SHA256(key, id.timestamp.body)>".
std::string WebhookSignature(std::string_view key, std::string_view id, int64_t timestamp_s,
                             std::string_view body);

// A new secret: "whsec_" and the base64 of 32 random bytes.
Result<std::string> NewWebhookSecret();

}  // namespace delayq::delivery

#endif  // DELAYQ_DELIVERY_WEBHOOK_H_

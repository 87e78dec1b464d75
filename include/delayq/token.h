// Access tokens (docs/security.md): what a token is (a name, the SHA-256
// digest of its secret, topic patterns, rights, a rate), how a new secret is
// made, and the entry of the token file that describes a token. delayqd
// knows a token by its digest and never keeps the secret itself.
//
// Thread: any.
#ifndef DELAYQ_TOKEN_H_
#define DELAYQ_TOKEN_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"

namespace delayq {

using Digest = std::array<uint8_t, 32>;

// SHA-256 of `data`.
Digest Sha256(std::string_view data);
// 64 lower-case hex digits.
std::string DigestHex(const Digest& d);
// 64 hex digits (either case) to a digest; false on anything else.
bool ParseDigestHex(std::string_view hex, Digest* out);

// A new secret: "dq_" and 43 characters of base64url, 256 bits from the
// operating system's random source (OpenSSL RAND_bytes). kInternal if that
// source fails.
Result<std::string> NewSecret();

// Digests compared in constant time.
bool DigestsEqual(const Digest& a, const Digest& b);

// A token's rights, as bits: `produce` (put), `consume` (reserve, and what
// a worker does to the jobs it holds), `admin` (delete, kick, pause, clear,
// server-wide stats).
enum Right : uint8_t { kRightProduce = 1, kRightConsume = 2, kRightAdmin = 4 };
inline constexpr uint8_t kAllRights = kRightProduce | kRightConsume | kRightAdmin;
// "produce" -> kRightProduce; 0 for anything else.
uint8_t RightNamed(std::string_view name);
// "produce,consume" (in that order), "" for none.
std::string RightsText(uint8_t rights);

// A topic pattern: `*` stands for any run of characters (none too); every
// other character for itself. "orders.*" matches "orders.eu" and
// "orders.", not "orders"; "*" matches every topic.
bool TopicMatches(std::string_view pattern, std::string_view topic);
// kInvalidArgument unless `pattern` is a topic name in which some
// characters may be `*`.
Status CheckTopicPattern(std::string_view pattern);
// kInvalidArgument unless `name` is 1..64 bytes of A-Za-z0-9._- (it is
// written in logs and errors as it is).
Status CheckTokenName(std::string_view name);

struct Token {
  std::string name;
  Digest sha256{};
  std::vector<std::string> topics;  // patterns
  uint8_t rights = 0;
  // Requests per second over all of the token's callers (of one delayqd),
  // and the most it may make at once (0: as many as the rate); rate 0: no
  // limit.
  double rate = 0;
  double burst = 0;
};

// The token's [[token]] table as the token file holds it (TOML; its
// digest, never a secret).
std::string TokenFileEntry(const Token& t);

}  // namespace delayq

#endif  // DELAYQ_TOKEN_H_

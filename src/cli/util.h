// Pure helpers of the delayq command-line client (docs/cli.md): the server
// URL, times and numbers given on the command line, job bodies as JSON
// text or base64, beanstalkd's YAML replies, and times shown to people.
// None of them does I/O, so each is tested on its own (util_test.cc).
#ifndef DELAYQ_CLI_UTIL_H_
#define DELAYQ_CLI_UTIL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "delayq/text.h"  // IsText, Base64*, ParseRfc3339: shared with the HTTP API
#include "delayq/types.h"

namespace delayq::cli {

// Where the client talks to, from `--server` / DELAYQ_SERVER.
struct ServerAddress {
  enum class Protocol : uint8_t { kHttp, kBeanstalk };
  Protocol protocol = Protocol::kHttp;
  std::string host = "127.0.0.1";
  uint16_t port = 11380;
  // The secret of the token to present (docs/security.md); empty: none.
  // Never shown.
  std::string token;
  // "http://127.0.0.1:11380", as shown in messages.
  std::string ToString() const;
};

inline constexpr uint16_t kDefaultHttpPort = 11380;
inline constexpr uint16_t kDefaultBeanstalkPort = 11300;
inline constexpr std::string_view kDefaultServer = "http://127.0.0.1:11380";

// "http://HOST[:PORT][/]" or "beanstalk://HOST[:PORT][/]"; HOST may be an
// IPv6 literal in brackets. nullopt with *error set otherwise.
std::optional<ServerAddress> ParseServerUrl(std::string_view url, std::string* error);

// A time given with --at: epoch milliseconds (digits only) or an RFC 3339
// date-time ("2026-05-01T09:00:00Z", "...T09:00:00.250+02:00").
std::optional<TimeMs> ParseTimeArg(std::string_view text);
// Epoch milliseconds as "2026-11-21T17:41:53.632Z".
std::string FormatRfc3339(TimeMs ms);

// A decimal number in [lo, hi], nothing else (no sign, no spaces).
std::optional<uint64_t> ParseUint(std::string_view text, uint64_t lo, uint64_t hi);

// A user key: 1..200 bytes of printable ASCII without spaces, as the
// server wants it (so that it fits a beanstalkd command line).
bool IsValidKey(std::string_view key);

// Percent-encodes a path segment: every byte but A-Za-z0-9-._~.
std::string PercentEncode(std::string_view segment);

// The "key: value" lines of a beanstalkd YAML dictionary (stats, stats-job,
// stats-tube), in order, with quotes around a value removed.
std::vector<std::pair<std::string, std::string>> ParseYamlMap(std::string_view yaml);
// The "- item" lines of a beanstalkd YAML list (list-tubes).
std::vector<std::string> ParseYamlList(std::string_view yaml);

// A count with its noun: "1 job", "2 jobs".
std::string Plural(uint64_t n, std::string_view noun);

// How deep arrays and objects nest in `json` (0 for a scalar), counted in
// one pass over the bytes without recursion (strings skipped). The CLI
// refuses a server reply nested deeper than kMaxReplyDepth before parsing
// it: printing a document recurses once per level.
size_t JsonDepth(std::string_view json);
inline constexpr size_t kMaxReplyDepth = 64;

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_UTIL_H_

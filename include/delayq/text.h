// Text helpers shared by the HTTP API, the Redis backend and the CLI:
// whether a job body is text, base64 for the bodies that are not, RFC 3339
// times, job ids, percent-decoding.
#ifndef DELAYQ_TEXT_H_
#define DELAYQ_TEXT_H_

#include <optional>
#include <string>
#include <string_view>

#include "delayq/types.h"

namespace delayq {

// Valid UTF-8 without control characters other than tab, CR and LF: a body
// that can travel as a JSON string and be printed as it is.
bool IsText(std::string_view bytes);

// Standard alphabet, padded.
std::string Base64Encode(std::string_view bytes);
// A job's body as a member of a JSON object, as the HTTP API takes and
// shows it: "body" when it is text, else "body_base64". Writer: a
// rapidjson writer (the server's replies, the command-line client's
// requests).
template <typename Writer>
void WriteJsonBody(Writer& w, std::string_view body) {
  if (IsText(body)) {
    w.Key("body");
    w.String(body.data(), static_cast<unsigned>(body.size()));
  } else {
    const std::string encoded = Base64Encode(body);
    w.Key("body_base64");
    w.String(encoded.data(), static_cast<unsigned>(encoded.size()));
  }
}

// Standard alphabet, padded, canonical (RFC 4648, section 4). False on
// anything else: other characters (white space too), a length that is not
// a multiple of 4, missing or misplaced padding, non-zero bits left over.
bool Base64Decode(std::string_view text, std::string* out);

// RFC 3339 date-time ("2026-01-02T03:04:05.250Z", "...+02:00") to epoch ms.
// Fractions beyond milliseconds are truncated; a leap second (:60) counts as
// the last second of its minute. nullopt for anything else.
std::optional<TimeMs> ParseRfc3339(std::string_view text);

// A job id written in canonical decimal (digits only, no leading zero, no
// more than fits a JobId), or 0 for anything else: how a job without a name
// is named (docs/engine.md, "Names").
JobId ParseDecimalId(std::string_view text);

// Percent-decodes `in` (an HTTP path segment, a URL's user or password):
// "%2F" is '/', and every other byte stands for itself. False on a '%' not
// followed by two hex digits.
bool PercentDecode(std::string_view in, std::string* out);

}  // namespace delayq

#endif  // DELAYQ_TEXT_H_

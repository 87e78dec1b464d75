// JSON request bodies, parsed with limits a client cannot get around: how
// deep values nest, and no object naming a member twice. The shape checks
// run before RapidJSON builds anything, in one pass over the bytes with no
// recursion, so no input can make the parser (or anything that walks its
// document) recurse deeper than kMaxJsonDepth; RapidJSON then parses in its
// iterative mode as well.
//
// Thread: any (pure functions).
#ifndef DELAYQ_SERVER_JSON_INPUT_H_
#define DELAYQ_SERVER_JSON_INPUT_H_

#include <rapidjson/document.h>

#include <cstddef>
#include <string_view>

#include "delayq/status.h"

namespace delayq::server {

// Arrays and objects may nest this deep (a top-level object is depth 1).
// No request of the API needs more than 4; the rest is room for bodies a
// future route may take as JSON.
inline constexpr size_t kMaxJsonDepth = 64;

// The checks ParseJsonObject makes before it parses, in one pass: no NUL
// byte outside a string (kInvalidArgument "bad_json:..."; RapidJSON would
// stop reading there and take what follows for the end), arrays
// and objects nested no deeper than `max_depth`, and no \u escape that is
// half of a surrogate pair without its other half (RapidJSON lets a lone
// low surrogate through, as bytes that are not UTF-8). Returns
// kInvalidArgument "the body holds <what> (at byte N)" for the first
// offence.
// Strings and their escapes are followed correctly; any other malformed
// input is left for the parser to report.
[[nodiscard]] Status CheckJsonShape(std::string_view body, size_t max_depth = kMaxJsonDepth);

// Parses a request body that must be a JSON object (or empty, when
// `empty_ok`: then `d` is {}). UTF-8 is validated; nesting is limited to
// kMaxJsonDepth; an object that names a member twice is refused.
// Returns kInvalidArgument with a message that starts "bad_json:" when the
// body is not JSON by its grammar, and without that prefix when it breaks
// one of these limits or is JSON but not an object.
[[nodiscard]] Status ParseJsonObject(std::string_view body, rapidjson::Document* d, bool empty_ok);

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_JSON_INPUT_H_

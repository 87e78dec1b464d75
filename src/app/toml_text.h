// A guard in front of toml++ (Debian 12's 3.3.0): its parser reaches an
// "unreachable" point, undefined behaviour, on some non-ASCII characters
// where it looks for white space (U+00A1 to U+0499 among them: "é" at the
// start of a line), found by fuzzing the token file. delayq's files need
// non-ASCII only inside strings (a path) or comments, so anything else is
// refused before toml++ sees it, with the line named.
//
// Thread: any.
#ifndef DELAYQ_APP_TOML_TEXT_H_
#define DELAYQ_APP_TOML_TEXT_H_

#include <string_view>

#include "delayq/status.h"

namespace delayq::app {

// kInvalidArgument ("<source> line N: ...") for a byte outside 0x01..0x7f
// outside a string or a comment, or anywhere when `ascii_only`.
Status CheckTomlText(std::string_view text, std::string_view source, bool ascii_only);

}  // namespace delayq::app

#endif  // DELAYQ_APP_TOML_TEXT_H_

#include "app/toml_text.h"

#include <string>

namespace delayq::app {

Status CheckTomlText(std::string_view text, std::string_view source, bool ascii_only) {
  enum class In { kCode, kComment, kBasic, kLiteral, kMultiBasic, kMultiLiteral };
  In in = In::kCode;
  size_t line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const std::string_view rest = text.substr(i);
    if (c == 0 || c >= 0x80) {
      if (ascii_only || in == In::kCode)
        return Status::InvalidArgument(
            std::string(source) + " line " + std::to_string(line) +
            (c == 0       ? ": a NUL byte"
             : ascii_only ? ": a non-ASCII character (the file holds ASCII only)"
                          : ": a non-ASCII character outside a string or a comment"));
      continue;
    }
    if (c == '\n') {
      ++line;
      if (in == In::kComment || in == In::kBasic || in == In::kLiteral) in = In::kCode;
      continue;
    }
    switch (in) {
      case In::kCode:
        if (c == '#') {
          in = In::kComment;
        } else if (rest.starts_with("\"\"\"")) {
          in = In::kMultiBasic;
          i += 2;
        } else if (rest.starts_with("'''")) {
          in = In::kMultiLiteral;
          i += 2;
        } else if (c == '"') {
          in = In::kBasic;
        } else if (c == '\'') {
          in = In::kLiteral;
        }
        break;
      case In::kComment:
        break;
      case In::kBasic:
        if (c == '\\') {
          ++i;  // an escape: the next byte is the string's
        } else if (c == '"') {
          in = In::kCode;
        }
        break;
      case In::kLiteral:
        if (c == '\'') in = In::kCode;
        break;
      case In::kMultiBasic:
        if (c == '\\') {
          ++i;
        } else if (rest.starts_with("\"\"\"")) {
          in = In::kCode;
          i += 2;
        }
        break;
      case In::kMultiLiteral:
        if (rest.starts_with("'''")) {
          in = In::kCode;
          i += 2;
        }
        break;
    }
  }
  return Status::Ok();
}

}  // namespace delayq::app

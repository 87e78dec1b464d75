// The JSON writer both transports of the command-line client build their
// documents with (beanstalk_client.cc, http_client.cc).
#ifndef DELAYQ_CLI_JSON_WRITER_H_
#define DELAYQ_CLI_JSON_WRITER_H_

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <string_view>

#include "delayq/text.h"

namespace delayq::cli {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// Writes `s` as a JSON string (any bytes; the writer escapes them).
inline void Str(JsonWriter& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// A job's body as the HTTP API takes and shows it: "body" when it is text,
// else "body_base64".
inline void BodyMember(JsonWriter& w, std::string_view body) {
  if (IsText(body)) {
    w.Key("body");
    Str(w, body);
  } else {
    w.Key("body_base64");
    Str(w, Base64Encode(body));
  }
}

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_JSON_WRITER_H_

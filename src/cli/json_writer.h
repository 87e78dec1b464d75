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

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_JSON_WRITER_H_

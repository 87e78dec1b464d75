// How the command-line client shows results: one compact JSON document per
// line (-o json), the job's body bytes alone (-o body), or text for people
// (the default). Every text form is made from the same JSON documents as
// the JSON output (client.h), so both say the same thing.
#ifndef DELAYQ_CLI_OUTPUT_H_
#define DELAYQ_CLI_OUTPUT_H_

#include <rapidjson/document.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace delayq::cli {

// kLease: a reserved job as ID@LEASE (reserve only), what finish, release,
// touch and bury take.
enum class Format : uint8_t { kText, kJson, kBody, kLease };

// The unsigned integer member `name` of an object, or 0 (a reply that is
// not what delayqd sends is shown, not trusted).
uint64_t UintField(const rapidjson::Value& object, const char* name);
// The string member `name`, or empty.
std::string StringField(const rapidjson::Value& object, const char* name);
// A reserved job as ID@LEASE; ID alone when it has no lease (the
// beanstalkd protocol).
std::string JobHandle(const rapidjson::Value& job);

// The value as compact JSON, followed by a newline.
std::string JsonLine(const rapidjson::Value& v);

// A job (reserve, peek) as "name: value" lines, its body last:
//   id:        3
//   ...
//   body:      17 bytes
//   send the reminder
// A body that is not text is not shown (-o json or -o body show it).
std::string JobText(const rapidjson::Value& job);
// The job's body bytes ("body", or "body_base64" decoded).
std::string JobBody(const rapidjson::Value& job);

// The reply of a put: "job 3 created (ready)", "job 1 exists with key K
// (delayed until ...)".
std::string PutText(const rapidjson::Value& reply, std::string_view key);
// An {"id","state",...} reply after `verb`: "job 2 released (delayed until
// ...)", "job 4 buried".
std::string StateText(const rapidjson::Value& reply, std::string_view verb);
// An object of counters and settings (stats), one aligned "name: value"
// line per field: times as RFC 3339, durations with units.
std::string FieldsText(const rapidjson::Value& object);

// One field's label and value as shown in text: "due_ms" -> "due" and an
// RFC 3339 time; "ttr_ms" -> "ttr" and "1m"; "time_left_s" -> "time left"
// and "59s".
std::string FieldLabel(std::string_view name);
// Milliseconds for people: "250ms", "30m", "1m30s", "52.014s", "1d2h".
std::string HumanDuration(int64_t ms);
std::string FieldValue(std::string_view name, const rapidjson::Value& v);

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_OUTPUT_H_

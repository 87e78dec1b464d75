// The on-disk encoding of a job (docs/storage.md): a versioned value that
// holds a JobRecord and the body, and the order-preserving keys of the
// store's indexes. Pure functions; no I/O.
#ifndef DELAYQ_STORE_RECORD_CODEC_H_
#define DELAYQ_STORE_RECORD_CODEC_H_

#include <string>
#include <string_view>

#include "delayq/status.h"
#include "delayq/types.h"

namespace delayq::store {

// The newest version this build writes. Readers accept every version up to
// it (docs/storage.md says how to bump it). Version 2 adds a flags byte
// before the body; version 3 the flag kRecordAnswered, whose answer follows
// the flags byte. A job is written as the oldest version that holds it: one
// with no flag set as version 1, one without an answer as version 2.
inline constexpr uint8_t kRecordVersion = 3;
// Flags of version 2.
inline constexpr uint8_t kRecordNamed = 1;  // JobRecord::named
// Flags of version 3.
inline constexpr uint8_t kRecordAnswered = 2;  // JobRecord::answer

// Appends `v` as a varint (7 bits a byte, low first; the journal's
// records use it too).
void PutVarint(std::string* out, uint64_t v);

// Appends the value of a job record: version, fields, body.
void EncodeJobValue(const JobRecord& record, std::string_view body, std::string* out);

// Parses a value written by EncodeJobValue of any known version. The body
// view points into `value`. Returns kCorruption for a truncated or damaged
// value, kInvalidArgument for a version newer than kRecordVersion.
Status DecodeJobValue(std::string_view value, JobRecord* record, std::string_view* body);

// A named object's value (docs/storage.md, "Named objects"): version (1
// byte), kind (1 byte), name and value as strings. The journal carries it
// for kPutObject and kDeleteObject (a delete with an empty value).
inline constexpr uint8_t kObjectVersion = 1;
void EncodeObjectValue(const StoredObject& object, std::string* out);
// kCorruption for a truncated or damaged value (an unknown kind, no name),
// kInvalidArgument for a version newer than kObjectVersion.
Status DecodeObjectValue(std::string_view value, StoredObject* object);
// The key of a named object in the `default` family: the prefix, the kind
// (1 byte), the name. The prefix holds a NUL, which no other key of that
// family has, so a scan of it yields the objects alone, by kind, then name.
inline constexpr std::string_view kObjectKeyPrefix{"object\0", 7};
std::string ObjectKey(ObjectKind kind, std::string_view name);

// Keys: a job by id (8 bytes, big-endian, so ids sort numerically); the due
// index (topic, NUL, then due and id big-endian: a scan of a topic's prefix
// yields its soonest jobs first); the user-key index (topic, NUL, key), which
// also holds the names of named jobs under the topic "" (NUL, name): no
// topic is empty.
std::string JobKey(JobId id);
std::string DueKey(std::string_view topic, TimeMs due, JobId id);
std::string UserKey(std::string_view topic, std::string_view key);
inline std::string NameKey(std::string_view name) { return UserKey({}, name); }
// Return false when the key has the wrong size.
bool ParseJobKey(std::string_view key, JobId* id);
bool ParseDueKey(std::string_view key, std::string_view* topic, TimeMs* due, JobId* id);

}  // namespace delayq::store

#endif  // DELAYQ_STORE_RECORD_CODEC_H_

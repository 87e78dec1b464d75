// What the HTTP API reads from a request's JSON body and path: Fields,
// which reads one object's members by name and names a member nobody asked
// for; the checks of topic names, keys and job ids; one job of a put
// (PutSpec, ParsePut) and the states of a clear; and the limits on what one
// request may ask for. The body itself is parsed by ParseJsonObject
// (json_input.h).
//
// Private to the HTTP API's sources (http_api.cc, http_native.cc,
// http_youzan.cc). Thread: any (pure functions).
#ifndef DELAYQ_SERVER_HTTP_INPUT_H_
#define DELAYQ_SERVER_HTTP_INPUT_H_

#include <rapidjson/document.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "delayq/engine.h"
#include "delayq/status.h"

namespace delayq::server {

// Reads the members of one JSON object by name, remembering which were
// asked for, so that Unknown() can name a member nobody reads (a typo).
class Fields {
 public:
  Fields(const rapidjson::Value& obj, std::string prefix) : obj_(obj), prefix_(std::move(prefix)) {}

  const rapidjson::Value* Get(const char* name) {
    known_.push_back(name);
    auto it = obj_.FindMember(name);
    return it == obj_.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
  }
  bool Has(const char* name) const {
    auto it = obj_.FindMember(name);
    return it != obj_.MemberEnd() && !it->value.IsNull();
  }

  Status Int(const char* name, int64_t lo, int64_t hi, int64_t* out) {
    const rapidjson::Value* v = Get(name);
    if (v == nullptr) return Status::Ok();
    if (!v->IsInt64() || v->GetInt64() < lo || v->GetInt64() > hi)
      return Bad(name, "an integer " + std::to_string(lo) + ".." + std::to_string(hi));
    *out = v->GetInt64();
    return Status::Ok();
  }
  template <typename T>
  Status Num(const char* name, int64_t lo, int64_t hi, T* out) {
    int64_t v = static_cast<int64_t>(*out);
    if (Status st = Int(name, lo, hi, &v); !st.ok()) return st;
    *out = static_cast<T>(v);
    return Status::Ok();
  }
  Status String(const char* name, std::string_view* out) {
    const rapidjson::Value* v = Get(name);
    if (v == nullptr) return Status::Ok();
    if (!v->IsString()) return Bad(name, "a string");
    *out = std::string_view(v->GetString(), v->GetStringLength());
    return Status::Ok();
  }
  Status Unknown() const {
    for (auto it = obj_.MemberBegin(); it != obj_.MemberEnd(); ++it) {
      std::string_view n(it->name.GetString(), it->name.GetStringLength());
      if (std::find(known_.begin(), known_.end(), n) == known_.end())
        return Status::InvalidArgument(prefix_ + "unknown field '" + std::string(n) + "'");
    }
    return Status::Ok();
  }
  Status Bad(std::string_view name, std::string_view want) const {
    return Status::InvalidArgument(prefix_ + "'" + std::string(name) + "' must be " +
                                   std::string(want));
  }

 private:
  const rapidjson::Value& obj_;
  std::string prefix_;
  std::vector<std::string_view> known_;
};

// A key: 1 to kMaxKeyLength bytes of printable ASCII without spaces.
bool IsValidKey(std::string_view key);
// Ok, or kInvalidArgument naming the bad topic name or key.
Status CheckTopic(std::string_view topic);
Status CheckKey(std::string_view key);

// One job of a put: the request points into the JSON document and `body`.
struct PutSpec {
  PutRequest req;
  std::string decoded;  // body_base64, decoded
  bool has_run_at = false;
};

// Reads one job of a put from `v` (the request body, or one of a batch's
// "jobs", whose errors start with `prefix`). Delays and run_at are
// checked against `now`.
Status ParsePut(const rapidjson::Value& v, std::string_view prefix, TimeMs now, PutSpec* p);

// "ready", "delayed", "buried" names to a ClearMask.
Result<uint8_t> ParseStates(const rapidjson::Value* v);

// A job id in a path: a decimal number > 0.
Result<JobId> ParseId(std::string_view s);

// The parameters of a request target's query ("/x?state=ready&limit=5"),
// percent-decoded ('+' is a space), by name. kInvalidArgument, naming it,
// for bad percent-encoding, a parameter given twice, or one not `known`.
Result<std::map<std::string, std::string>> ParseQuery(
    std::string_view target, std::initializer_list<std::string_view> known);

// The most jobs one page of GET /topics/{topic}/jobs may hold, and its
// default (docs/http-api.md, "Browsing jobs").
inline constexpr uint32_t kMaxPageJobs = 1000;
inline constexpr uint32_t kDefaultPageJobs = 50;
// A boolean parameter of a ParseQuery result: absent -> `absent`;
// "true", "1", "" -> true; "false", "0" -> false; anything else
// kInvalidArgument naming it.
Result<bool> QueryFlag(const std::map<std::string, std::string>& query, std::string_view name,
                       bool absent);

// The most topics one reserve may name (HTTP /reserve and Youzan /pop).
inline constexpr size_t kMaxReserveTopics = 1024;
// The bodies one reserve's reply may carry at most, counted at the maximum
// job size: 128 jobs of 64 KiB, 1000 (the most of any reserve) up to 8 KiB.
inline constexpr size_t kReserveReplyBudget = 8 * 1024 * 1024;
// The longest lease a finish, release, bury or touch may name (the
// backends' are 16 to 40 characters).
inline constexpr size_t kMaxLeaseLength = 64;

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_HTTP_INPUT_H_

#include "delayq/status.h"

#include <algorithm>

#include "delayq/engine.h"
#include "delayq/types.h"

namespace delayq {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kNotFound:
      return "not_found";
    case Code::kInvalidArgument:
      return "invalid_argument";
    case Code::kNotIgnored:
      return "not_ignored";
    case Code::kDeadlineSoon:
      return "deadline_soon";
    case Code::kTimedOut:
      return "timed_out";
    case Code::kJobTooBig:
      return "job_too_big";
    case Code::kConflict:
      return "conflict";
    case Code::kDraining:
      return "draining";
    case Code::kResourceExhausted:
      return "resource_exhausted";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kInternal:
      return "internal";
    case Code::kCorruption:
      return "corruption";
  }
  return "unknown";
}

std::string Status::ToString() const {
  std::string s(CodeName(code_));
  if (!message_.empty()) {
    s += ": ";
    s += message_;
  }
  return s;
}

std::string_view JobStateName(JobState s) {
  switch (s) {
    case JobState::kReady:
      return "ready";
    case JobState::kDelayed:
      return "delayed";
    case JobState::kReserved:
      return "reserved";
    case JobState::kBuried:
      return "buried";
  }
  return "unknown";
}

TimeMs Backoff::DelayFor(uint32_t failures) const {
  if (failures == 0) failures = 1;
  switch (kind) {
    case Kind::kNone:
      return 0;
    case Kind::kList:
      if (delays_ms.empty()) return 0;
      return delays_ms[std::min<size_t>(failures, delays_ms.size()) - 1];
    case Kind::kExponential: {
      TimeMs d = base_ms;
      for (uint32_t i = 1; i < failures && d < cap_ms; ++i) d *= 2;
      return std::min(d, cap_ms);
    }
  }
  return 0;
}

bool IsValidTopicName(std::string_view name) {
  if (name.empty() || name.size() > kMaxTopicNameLength || name[0] == '-') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '+' || c == '/' || c == ';' || c == '.' || c == '$' || c == '_' ||
              c == '(' || c == ')';
    if (!ok) return false;
  }
  return true;
}

}  // namespace delayq

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
    case Code::kLeaseLost:
      return "lease_lost";
    case Code::kUnauthenticated:
      return "unauthenticated";
    case Code::kPermissionDenied:
      return "forbidden";
    case Code::kRateLimited:
      return "rate_limited";
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

std::string_view ObjectKindName(ObjectKind k) {
  switch (k) {
    case ObjectKind::kPush:
      return "push";
    case ObjectKind::kSchedule:
      return "schedule";
    case ObjectKind::kScheduleCursor:
      return "cursor";
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

Status RefuseJob(JobId id, Refusal why, JobState found) {
  std::string job = "job " + std::to_string(id) + " is ";
  std::string state(JobStateName(found));
  switch (why) {
    case Refusal::kNoJob:
      return Status::NotFound("no job " + std::to_string(id));
    case Refusal::kLeaseLost:
      return Status::LeaseLost(
          job + (found == JobState::kReserved ? "reserved under another lease" : state + " now") +
          ": the lease no longer holds it");
    case Refusal::kNotReserved:
      return Status::Conflict(job + state + ", not reserved");
    case Refusal::kNotKickable:
      return Status::Conflict(job + state + ", not buried or delayed");
    case Refusal::kHeldByLease:
      return Status::Conflict(job + "reserved under a lease");
    case Refusal::kHeldBySession:
      return Status::Conflict(job + "reserved by another connection");
  }
  return Status::Internal("unknown refusal");
}

std::string FormatLease(uint64_t lease) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, lease >>= 4) out[static_cast<size_t>(i)] = kHex[lease & 15];
  return out;
}

bool ParseLease(std::string_view text, uint64_t* lease) {
  if (text.size() != 16) return false;
  uint64_t v = 0;
  for (char c : text) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  *lease = v;
  return v != 0;
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

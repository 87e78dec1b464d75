// Errors as values. Every fallible operation of delayq returns a Status or a
// Result<T>; exceptions never cross a layer boundary. One table in each
// front-end maps a Code to its wire reply (beanstalkd text, HTTP status).
#ifndef DELAYQ_STATUS_H_
#define DELAYQ_STATUS_H_

#include <cassert>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace delayq {

enum class Code : uint8_t {
  kOk = 0,
  kNotFound,           // no such job / topic / key, or not reserved by the caller
  kInvalidArgument,    // malformed name, out-of-range number, bad back-off spec
  kNotIgnored,         // ignore would leave a session watching nothing
  kDeadlineSoon,       // a job held by the session is about to exceed its TTR
  kTimedOut,           // a reserve with a timeout found no job in time
  kJobTooBig,          // body larger than the configured maximum
  kConflict,           // the operation does not apply to the job's state
  kDraining,           // the server no longer accepts new jobs
  kResourceExhausted,  // a configured limit (jobs, memory) is reached
  kUnavailable,        // storage is failing or full; retry later
  kInternal,           // a bug or an unexpected failure of a dependency
  kCorruption,         // stored data is damaged or of an unknown format
  kLeaseLost,          // the lease named no longer holds the job (docs/engine.md, "Leases")
  kUnauthenticated,    // no credentials, or credentials that name no token (docs/security.md)
  kPermissionDenied,   // the caller's token lacks the right on that topic
  kRateLimited,        // the caller's token is over its request rate; retry later
};

// Stable lower-case name of a code ("not_found"), used in logs and JSON errors.
std::string_view CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status NotFound(std::string_view msg = {}) { return {Code::kNotFound, msg}; }
  static Status InvalidArgument(std::string_view msg) { return {Code::kInvalidArgument, msg}; }
  static Status NotIgnored() { return {Code::kNotIgnored, {}}; }
  static Status DeadlineSoon() { return {Code::kDeadlineSoon, {}}; }
  static Status TimedOut() { return {Code::kTimedOut, {}}; }
  static Status JobTooBig(std::string_view msg = {}) { return {Code::kJobTooBig, msg}; }
  static Status Conflict(std::string_view msg) { return {Code::kConflict, msg}; }
  static Status Draining() { return {Code::kDraining, {}}; }
  static Status ResourceExhausted(std::string_view msg) { return {Code::kResourceExhausted, msg}; }
  static Status Unavailable(std::string_view msg) { return {Code::kUnavailable, msg}; }
  static Status Internal(std::string_view msg) { return {Code::kInternal, msg}; }
  static Status Corruption(std::string_view msg) { return {Code::kCorruption, msg}; }
  static Status LeaseLost(std::string_view msg) { return {Code::kLeaseLost, msg}; }
  static Status Unauthenticated(std::string_view msg) { return {Code::kUnauthenticated, msg}; }
  static Status PermissionDenied(std::string_view msg) { return {Code::kPermissionDenied, msg}; }
  static Status RateLimited(std::string_view msg) { return {Code::kRateLimited, msg}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "not_found: no job 12" style text for logs.
  std::string ToString() const;

  friend bool operator==(const Status& a, const Status& b) { return a.code_ == b.code_; }

 private:
  Status(Code code, std::string_view msg) : code_(code), message_(msg) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or an error. REQUIRES for value(): ok().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok());
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  const T& operator*() const { return value(); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  Code code() const { return ok() ? Code::kOk : std::get<Status>(v_).code(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace delayq

#endif  // DELAYQ_STATUS_H_

// CountingBackend (counting_backend.h), and the names of the counted
// operations and outcomes (backend.h).
#include "backend/counting_backend.h"

#include <utility>

namespace delayq::backend {

namespace {

// In the order of the enums (backend.h).
constexpr std::string_view kCountedOpNames[kNumCountedOps] = {
    "put", "reserve", "finish", "release", "bury", "kick", "delete", "touch"};
constexpr std::string_view kOutcomeNames[kNumOutcomes] = {"ok",         "not_found",   "conflict",
                                                          "lease_lost", "invalid",     "limit",
                                                          "timed_out",  "unavailable", "error"};
static_assert(static_cast<size_t>(CountedOp::kTouch) + 1 == kNumCountedOps);
static_assert(static_cast<size_t>(Outcome::kError) + 1 == kNumOutcomes);

}  // namespace

std::string_view CountedOpName(CountedOp op) { return kCountedOpNames[static_cast<size_t>(op)]; }
std::string_view OutcomeName(Outcome o) { return kOutcomeNames[static_cast<size_t>(o)]; }

Outcome OutcomeOf(Code c) {
  switch (c) {
    case Code::kOk:
      return Outcome::kOk;
    case Code::kNotFound:
      return Outcome::kNotFound;
    case Code::kConflict:
      return Outcome::kConflict;
    case Code::kLeaseLost:
      return Outcome::kLeaseLost;
    case Code::kInvalidArgument:
    case Code::kJobTooBig:
    case Code::kNotIgnored:
      return Outcome::kInvalid;
    case Code::kResourceExhausted:
    case Code::kDraining:
    case Code::kRateLimited:
      return Outcome::kLimit;
    case Code::kTimedOut:
    case Code::kDeadlineSoon:
      return Outcome::kTimedOut;
    case Code::kUnavailable:
      return Outcome::kUnavailable;
    default:
      return Outcome::kError;
  }
}

CountingBackend::CountingBackend(std::unique_ptr<Backend> inner)
    : ForwardingBackend(*inner), owned_(std::move(inner)) {}

CountingBackend::~CountingBackend() { owned_.reset(); }

template <typename T>
Callback<T> CountingBackend::Counted(CountedOp op, Callback<T> done) {
  return [counts = &counts_, op, done = std::move(done)](Result<T> r) {
    counts->Count(op, r.ok() ? Code::kOk : r.status().code());
    done(std::move(r));
  };
}

JobsDone CountingBackend::CountedJobs(CountedOp op, JobsDone done) {
  return [counts = &counts_, op, done = std::move(done)](Status st, Jobs jobs) {
    counts->Count(op, st.code());
    done(std::move(st), jobs);
  };
}

void CountingBackend::Put(SessionId s, const PutRequest& r, Callback<PutResult> d) {
  inner().Put(s, r, Counted(CountedOp::kPut, std::move(d)));
}
void CountingBackend::FireSchedule(std::string_view n, TimeMs at, std::string_view rev,
                                   const PutRequest& r, Callback<PutResult> d) {
  inner().FireSchedule(n, at, rev, r, Counted(CountedOp::kPut, std::move(d)));
}
void CountingBackend::Reserve(const ReserveRequest& r, JobsDone d) {
  inner().Reserve(r, CountedJobs(CountedOp::kReserve, std::move(d)));
}
void CountingBackend::ReserveJob(SessionId s, JobId id, JobsDone d) {
  inner().ReserveJob(s, id, CountedJobs(CountedOp::kReserve, std::move(d)));
}
void CountingBackend::Delete(const Claim& c, JobId id, Callback<JobChange> d) {
  inner().Delete(c, id, Counted(CountedOp::kDelete, std::move(d)));
}
void CountingBackend::DeleteByKey(const Claim& c, std::string_view t, std::string_view k,
                                  Callback<JobChange> d) {
  inner().DeleteByKey(c, t, k, Counted(CountedOp::kDelete, std::move(d)));
}
void CountingBackend::DeleteByName(std::string_view n, Callback<JobChange> d) {
  inner().DeleteByName(n, Counted(CountedOp::kDelete, std::move(d)));
}
void CountingBackend::Finish(const Claim& c, JobId id, Callback<JobChange> d) {
  inner().Finish(c, id, Counted(CountedOp::kFinish, std::move(d)));
}
void CountingBackend::FinishByName(std::string_view n, Callback<JobChange> d) {
  inner().FinishByName(n, Counted(CountedOp::kFinish, std::move(d)));
}
void CountingBackend::Release(const Claim& c, JobId id, std::optional<uint32_t> p,
                              std::optional<TimeMs> delay, Callback<JobChange> d) {
  inner().Release(c, id, p, delay, Counted(CountedOp::kRelease, std::move(d)));
}
void CountingBackend::Bury(const Claim& c, JobId id, std::optional<uint32_t> p,
                           Callback<JobChange> d) {
  inner().Bury(c, id, p, Counted(CountedOp::kBury, std::move(d)));
}
void CountingBackend::ReleaseAnswered(const Claim& c, JobId id, std::optional<TimeMs> delay,
                                      const PushAnswer& a, Callback<JobChange> d) {
  inner().ReleaseAnswered(c, id, delay, a, Counted(CountedOp::kRelease, std::move(d)));
}
void CountingBackend::BuryAnswered(const Claim& c, JobId id, const PushAnswer& a,
                                   Callback<JobChange> d) {
  inner().BuryAnswered(c, id, a, Counted(CountedOp::kBury, std::move(d)));
}
void CountingBackend::Touch(const Claim& c, JobId id, Callback<JobChange> d) {
  inner().Touch(c, id, Counted(CountedOp::kTouch, std::move(d)));
}
void CountingBackend::Kick(SessionId s, std::string_view t, uint64_t n, Callback<uint64_t> d) {
  inner().Kick(s, t, n, Counted(CountedOp::kKick, std::move(d)));
}
void CountingBackend::KickJob(SessionId s, JobId id, Callback<JobChange> d) {
  inner().KickJob(s, id, Counted(CountedOp::kKick, std::move(d)));
}

}  // namespace delayq::backend

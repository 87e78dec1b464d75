// The outcomes of the operations the front-ends ask for (GET /metrics,
// delayq_operations_total; docs/operations.md): a decorator over a
// backend that does not count them itself (Redis), which delayqd gives every
// front-end, so that both protocols and the push workers are counted at one
// place, as the caller sees the answer. The Local backend counts the same
// kinds itself (LocalBackend::CountOutcome), without the wrapper around
// each completion that costs this one an allocation per operation.
// Counting is a plain increment on the loop thread; a completion that is
// dropped (its session closed) is not counted.
//
// Which calls count as which operation: put (Put, and FireSchedule: a
// schedule's firing is a put, refused as a conflict when another instance
// or an earlier run made it); reserve (Reserve, ReserveJob;
// a batch is one); finish (Finish, FinishByName); release; bury; kick
// (Kick, KickJob); delete (Delete, DeleteByKey, DeleteByName); touch.
//
// Thread: the loop thread, as the backend it wraps.
#ifndef DELAYQ_BACKEND_COUNTING_BACKEND_H_
#define DELAYQ_BACKEND_COUNTING_BACKEND_H_

#include <memory>
#include <optional>
#include <string_view>

#include "backend/forwarding_backend.h"

namespace delayq::backend {

class CountingBackend final : public ForwardingBackend {
 public:
  explicit CountingBackend(std::unique_ptr<Backend> inner);
  // Destroys the inner backend first: a completion it runs meanwhile
  // still finds the counts.
  ~CountingBackend() override;

  void Put(SessionId s, const PutRequest& r, Callback<PutResult> d) override;
  void FireSchedule(std::string_view n, TimeMs at, std::string_view rev, const PutRequest& r,
                    Callback<PutResult> d) override;
  void Reserve(const ReserveRequest& r, JobsDone d) override;
  void ReserveJob(SessionId s, JobId id, JobsDone d) override;
  void Delete(const Claim& c, JobId id, Callback<JobChange> d) override;
  void DeleteByKey(const Claim& c, std::string_view t, std::string_view k,
                   Callback<JobChange> d) override;
  void DeleteByName(std::string_view n, Callback<JobChange> d) override;
  void Finish(const Claim& c, JobId id, Callback<JobChange> d) override;
  void FinishByName(std::string_view n, Callback<JobChange> d) override;
  void Release(const Claim& c, JobId id, std::optional<uint32_t> p, std::optional<TimeMs> delay,
               Callback<JobChange> d) override;
  void Bury(const Claim& c, JobId id, std::optional<uint32_t> p, Callback<JobChange> d) override;
  void Touch(const Claim& c, JobId id, Callback<JobChange> d) override;
  void ReleaseAnswered(const Claim& c, JobId id, std::optional<TimeMs> delay, const PushAnswer& a,
                       Callback<JobChange> d) override;
  void BuryAnswered(const Claim& c, JobId id, const PushAnswer& a, Callback<JobChange> d) override;
  void Kick(SessionId s, std::string_view t, uint64_t n, Callback<uint64_t> d) override;
  void KickJob(SessionId s, JobId id, Callback<JobChange> d) override;

  const OperationOutcomes* operation_outcomes() const override { return &counts_; }

 private:
  template <typename T>
  Callback<T> Counted(CountedOp op, Callback<T> done);
  JobsDone CountedJobs(CountedOp op, JobsDone done);

  OperationOutcomes counts_;  // before owned_: outlives it
  std::unique_ptr<Backend> owned_;
};

}  // namespace delayq::backend

#endif  // DELAYQ_BACKEND_COUNTING_BACKEND_H_

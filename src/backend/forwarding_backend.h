// A Backend that passes every call on to another one, as it is: the base
// of decorators that watch the calls (CountingBackend, tests' call
// counters), which override only what they watch.
//
// Thread: the inner backend's (its loop thread).
#ifndef DELAYQ_BACKEND_FORWARDING_BACKEND_H_
#define DELAYQ_BACKEND_FORWARDING_BACKEND_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace delayq::backend {

class ForwardingBackend : public Backend {
 public:
  // `inner` must outlive this.
  explicit ForwardingBackend(Backend& inner) : b_(inner) {}

  const BackendInfo& info() const override { return b_.info(); }
  SessionId OpenSession() override { return b_.OpenSession(); }
  void CloseSession(SessionId s) override { b_.CloseSession(s); }
  Status Use(SessionId s, std::string_view t) override { return b_.Use(s, t); }
  Result<size_t> Watch(SessionId s, std::string_view t) override { return b_.Watch(s, t); }
  Result<size_t> Ignore(SessionId s, std::string_view t) override { return b_.Ignore(s, t); }
  std::string UsedTopic(SessionId s) const override { return b_.UsedTopic(s); }
  std::vector<std::string> WatchedTopics(SessionId s) const override { return b_.WatchedTopics(s); }
  void DiscardJobId() override { b_.DiscardJobId(); }
  void Put(SessionId s, const PutRequest& r, Callback<PutResult> d) override {
    b_.Put(s, r, std::move(d));
  }
  void Reserve(const ReserveRequest& r, JobsDone d) override { b_.Reserve(r, std::move(d)); }
  void CancelReserve(SessionId s) override { b_.CancelReserve(s); }
  void ReserveJob(SessionId s, JobId id, JobsDone d) override {
    b_.ReserveJob(s, id, std::move(d));
  }
  void Delete(const Claim& c, JobId id, Callback<JobChange> d) override {
    b_.Delete(c, id, std::move(d));
  }
  void DeleteByKey(const Claim& c, std::string_view t, std::string_view k,
                   Callback<JobChange> d) override {
    b_.DeleteByKey(c, t, k, std::move(d));
  }
  void Finish(const Claim& c, JobId id, Callback<JobChange> d) override {
    b_.Finish(c, id, std::move(d));
  }
  void Release(const Claim& c, JobId id, std::optional<uint32_t> p, std::optional<TimeMs> delay,
               Callback<JobChange> d) override {
    b_.Release(c, id, p, delay, std::move(d));
  }
  void Bury(const Claim& c, JobId id, std::optional<uint32_t> p, Callback<JobChange> d) override {
    b_.Bury(c, id, p, std::move(d));
  }
  void Touch(const Claim& c, JobId id, Callback<JobChange> d) override {
    b_.Touch(c, id, std::move(d));
  }
  void ReleaseAnswered(const Claim& c, JobId id, std::optional<TimeMs> delay, const PushAnswer& a,
                       Callback<JobChange> d) override {
    b_.ReleaseAnswered(c, id, delay, a, std::move(d));
  }
  void BuryAnswered(const Claim& c, JobId id, const PushAnswer& a, Callback<JobChange> d) override {
    b_.BuryAnswered(c, id, a, std::move(d));
  }
  void FinishByName(std::string_view n, Callback<JobChange> d) override {
    b_.FinishByName(n, std::move(d));
  }
  void DeleteByName(std::string_view n, Callback<JobChange> d) override {
    b_.DeleteByName(n, std::move(d));
  }
  void Kick(SessionId s, std::string_view t, uint64_t n, Callback<uint64_t> d) override {
    b_.Kick(s, t, n, std::move(d));
  }
  void KickJob(SessionId s, JobId id, Callback<JobChange> d) override {
    b_.KickJob(s, id, std::move(d));
  }
  void Peek(SessionId s, PeekKind k, JobId id, std::string_view t, std::string_view key,
            JobsDone d) override {
    b_.Peek(s, k, id, t, key, std::move(d));
  }
  std::optional<std::string_view> KnownTopicOf(JobId id) const override {
    return b_.KnownTopicOf(id);
  }
  void StatsJob(JobId id, Callback<JobStats> d) override { b_.StatsJob(id, std::move(d)); }
  void ListJobs(const ListJobsRequest& r, PageDone d) override { b_.ListJobs(r, std::move(d)); }
  void FindKey(std::string_view key, JobsDone d) override { b_.FindKey(key, std::move(d)); }
  const EngineMetrics* engine_metrics() const override { return b_.engine_metrics(); }
  const OperationOutcomes* operation_outcomes() const override { return b_.operation_outcomes(); }
  BackendMetrics SampleMetrics() const override { return b_.SampleMetrics(); }
  void StatsTopic(std::string_view t, Callback<TopicStats> d) override {
    b_.StatsTopic(t, std::move(d));
  }
  void TopicsStats(Callback<std::vector<TopicStats>> d) override { b_.TopicsStats(std::move(d)); }
  void Stats(Callback<EngineStats> d) override { b_.Stats(std::move(d)); }
  void ListTopics(Callback<std::vector<std::string>> d) override { b_.ListTopics(std::move(d)); }
  void PauseTopic(std::string_view t, TimeMs ms, Done d) override {
    b_.PauseTopic(t, ms, std::move(d));
  }
  void ClearTopic(SessionId s, std::string_view t, uint8_t mask, Callback<uint64_t> d) override {
    b_.ClearTopic(s, t, mask, std::move(d));
  }
  void PutObject(ObjectKind k, std::string_view n, std::string_view v, Done d) override {
    b_.PutObject(k, n, v, std::move(d));
  }
  void DeleteObject(ObjectKind k, std::string_view n, Done d) override {
    b_.DeleteObject(k, n, std::move(d));
  }
  void ListObjects(ObjectKind k, Callback<std::vector<StoredObject>> d) override {
    b_.ListObjects(k, std::move(d));
  }
  void ObjectsVersion(ObjectKind k, Callback<uint64_t> d) override {
    b_.ObjectsVersion(k, std::move(d));
  }
  void FireSchedule(std::string_view n, TimeMs at, std::string_view rev, const PutRequest& r,
                    Callback<PutResult> d) override {
    b_.FireSchedule(n, at, rev, r, std::move(d));
  }
  void UnfireSchedule(std::string_view n, std::string_view topic, TimeMs at, std::string_view rev,
                      std::string_view key, Callback<bool> d) override {
    b_.UnfireSchedule(n, topic, at, rev, key, std::move(d));
  }
  TimeMs Now() const override { return b_.Now(); }
  bool RepliesWaitForStore() const override { return b_.RepliesWaitForStore(); }
  bool StoreBehind() const override { return b_.StoreBehind(); }
  bool ReserveServed(SessionId s) const override { return b_.ReserveServed(s); }
  bool CompletesInOrder() const override { return b_.CompletesInOrder(); }
  uint64_t StoreCompletionsRun() const override { return b_.StoreCompletionsRun(); }

 protected:
  Backend& inner() const { return b_; }

 private:
  Backend& b_;
};

}  // namespace delayq::backend

#endif  // DELAYQ_BACKEND_FORWARDING_BACKEND_H_

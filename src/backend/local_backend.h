// The Local backend: the engine in this process, owned by the loop thread
// that runs `io`. A steady timer wakes the engine at its next due time.
// (The durable store plugs in here: completions of changes then wait for the
// writer thread; see docs/storage.md once it exists.)
//
// Thread: every method, and `io`, on one thread.
#ifndef DELAYQ_BACKEND_LOCAL_BACKEND_H_
#define DELAYQ_BACKEND_LOCAL_BACKEND_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/clock.h"

namespace delayq::backend {

class LocalBackend final : public Backend {
 public:
  struct Options {
    size_t max_job_size = 65535;
  };
  // `clock` must outlive the backend.
  LocalBackend(boost::asio::io_context& io, const Options& options, const Clock& clock);
  ~LocalBackend() override;

  const BackendInfo& info() const override { return info_; }

  SessionId OpenSession() override;
  void CloseSession(SessionId s) override;
  Status Use(SessionId s, std::string_view topic) override;
  Result<size_t> Watch(SessionId s, std::string_view topic) override;
  Result<size_t> Ignore(SessionId s, std::string_view topic) override;
  std::string UsedTopic(SessionId s) const override;
  std::vector<std::string> WatchedTopics(SessionId s) const override;

  void DiscardJobId() override { engine_.DiscardJobId(); }
  void Put(SessionId s, const PutRequest& r, Callback<PutResult> done) override;
  void Reserve(const ReserveRequest& r, JobsDone done) override;
  void CancelReserve(SessionId s) override;
  void ReserveJob(SessionId s, JobId id, JobsDone done) override;
  void Delete(SessionId s, JobId id, Done done) override;
  void DeleteByKey(SessionId s, std::string_view topic, std::string_view key,
                   Done done) override;
  void Release(SessionId s, JobId id, uint32_t priority, std::optional<TimeMs> delay,
               Callback<JobState> done) override;
  void Bury(SessionId s, JobId id, uint32_t priority, Done done) override;
  void Touch(SessionId s, JobId id, Done done) override;
  void Kick(std::string_view topic, uint64_t bound, Callback<uint64_t> done) override;
  void KickJob(JobId id, Done done) override;
  void Peek(PeekKind kind, JobId id, std::string_view topic, std::string_view key,
            JobsDone done) override;
  void StatsJob(JobId id, Callback<JobStats> done) override;
  void StatsTopic(std::string_view topic, Callback<TopicStats> done) override;
  void Stats(Callback<EngineStats> done) override;
  void ListTopics(Callback<std::vector<std::string>> done) override;
  void PauseTopic(std::string_view topic, TimeMs delay_ms, Done done) override;
  void ClearTopic(std::string_view topic, uint8_t mask, Callback<uint64_t> done) override;

  TimeMs Now() const override { return clock_.Now(); }

  // Applies what fell due up to Now() at once, without waiting for the
  // timer (tests drive a manual clock with it).
  void Poll() { OnTimer(); }

  // For tests and benchmarks.
  Engine& engine() { return engine_; }

 private:
  // After every engine call: hands served reserves to their completions and
  // re-arms the timer.
  void Settle();
  void ArmTimer();
  void OnTimer();
  void CompleteWaiter(SessionId s, Status st, std::span<const JobId> ids);
  void ReplyJobs(const JobsDone& done, std::span<const JobId> ids);

  boost::asio::io_context& io_;
  const Clock& clock_;
  BackendInfo info_;
  Engine engine_;
  boost::asio::steady_timer timer_;
  TimeMs timer_at_ = kNever;
  std::unordered_map<SessionId, JobsDone> waiting_;
  std::vector<Event> events_;
  std::vector<JobView> views_;
  bool settling_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace delayq::backend

#endif  // DELAYQ_BACKEND_LOCAL_BACKEND_H_

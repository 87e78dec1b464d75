// The dispatcher of push topics (docs/push.md): a worker inside delayqd
// that, for each topic with a target, reserves the topic's ready jobs
// through the Backend like any worker, sends each to the target with
// PushClient, and finishes, releases (retries) or buries it as JudgePush
// says. Every delayqd runs one; on Redis they share the work, as workers
// do: each try is one reservation, made by one instance.
//
// Per topic ("lane"): one session of its own watching the topic alone; at
// most one pending reserve, with `detach` (the job is held by the lease
// the reserve answers, which every later call on it names), asking for as
// many jobs as the target's concurrency and its token bucket allow; no
// reserve while the lane is full or out of tokens (a timer tells when the
// next token comes). A job's reservation lasts its TTR, which PushGuard
// made at least the target's timeout plus kPushTtrMarginMs at its put; a
// request's timeout is cut to fit a shorter TTR (jobs put before the
// target was set), so a try never outlives its reservation. A delayqd that
// dies mid-request loses nothing: the reservation ends (at its restart on
// the Local backend, after the TTR on Redis) and the job is ready again.
//
// Retries: an answer JudgePush calls kRetry releases the job with the
// delay its Retry-After asks for, else by the job's own back-off (released
// without a delay, which the backend spaces by it), else the target's
// back-off (default DefaultPushBackoff) for the tries made so far; a try
// that reaches the job's max_tries (else the target's, else
// kDefaultPushMaxTries) buries it. Either way the try's answer (its status
// and first bytes: PushAnswer) is kept with the job in the same call
// (Backend::ReleaseAnswered, BuryAnswered), for GET /jobs/{id}.
//
// Thread: the loop thread of the io_context and the backend.
#ifndef DELAYQ_DELIVERY_PUSH_DISPATCHER_H_
#define DELAYQ_DELIVERY_PUSH_DISPATCHER_H_

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "delivery/push_client.h"
#include "delivery/push_policy.h"
#include "delivery/push_target.h"

namespace delayq::delivery {

class PushDispatcher {
 public:
  struct Options {
    PushClient::Options client;
    // Where each failed try, failed settle or failed reserve is told:
    // `cause`, the event and its topic ("push_failed topic=orders"), and
    // the rest ("id=7 attempt=2 note=\"500: ...\""); never the secret.
    // delayqd gives its rate-limited warnings, a line per cause at most
    // every 10 s, so a target that is down does not flood the log. Empty:
    // nowhere.
    std::function<void(std::string_view cause, std::string_view detail)> log;
  };
  // What this dispatcher did since it started.
  struct Counters {
    uint64_t sent = 0;       // requests sent
    uint64_t delivered = 0;  // jobs finished after a 2xx
    uint64_t retried = 0;    // jobs released for another try
    uint64_t buried = 0;     // jobs buried (410, or max_tries reached)
    uint64_t lost = 0;       // settles refused (the lease was lost: another try took it)
  };

  // `backend` is the one beneath PushGuard (it must let the dispatcher
  // reserve push topics); it and `targets` must outlive this. Lanes open
  // for the targets there are now and follow every change.
  PushDispatcher(boost::asio::io_context& io, backend::Backend& backend, PushTargets& targets,
                 Options options);
  // Closes every lane; tries in flight are dropped (their jobs come back
  // after their TTR, or at once on a restart of the Local backend).
  ~PushDispatcher();
  PushDispatcher(const PushDispatcher&) = delete;
  PushDispatcher& operator=(const PushDispatcher&) = delete;

  const Counters& counters() const { return counters_; }
  // Requests in flight to the topic's target now (0 for a topic without).
  uint32_t InFlight(std::string_view topic) const;

 private:
  struct Lane;
  struct Try;
  void TargetChanged(std::string_view topic, const PushTarget* now);
  void Open(const PushTarget& t);
  void Close(std::string_view topic);
  void Pump(const std::shared_ptr<Lane>& lane);
  void Send(const std::shared_ptr<Lane>& lane, Try t);
  void Settle(const std::shared_ptr<Lane>& lane, const Try& t, const PushResponse& r);
  void Log(std::string_view event, std::string_view topic, const std::string& detail) const;

  boost::asio::io_context& io_;
  backend::Backend& backend_;
  PushTargets& targets_;
  Options options_;
  PushClient client_;
  std::map<std::string, std::shared_ptr<Lane>, std::less<>> lanes_;
  Counters counters_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace delayq::delivery

#endif  // DELAYQ_DELIVERY_PUSH_DISPATCHER_H_

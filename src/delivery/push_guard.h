// The workers' side of push topics (docs/push.md, "Workers"): the backend
// the front-ends call is wrapped in a PushGuard, so that a worker never
// reserves a job of a push topic, whose jobs the dispatcher alone takes
// (it calls the backend beneath). The filter is here, in front of the
// backend, not in the engine or the Lua scripts: both backends stay as
// they are, and a topic becomes a push topic or stops being one without a
// change to the stored jobs.
//
// - A reserve of a session that watches push topics besides others first
//   ignores the push topics (the session stops watching them, as an
//   `ignore` would have done), then reserves from the others.
// - A reserve of a session that watches push topics only waits as if no job
//   were ready: its timeout passes (TIMED_OUT), or it waits until closed or
//   cancelled; if the last of those topics stops being a push topic, the
//   reserve goes on as asked. (HTTP reserves of a push topic are refused
//   before they come here: server/http_api.cc.)
// - A reserve of one job by its id (beanstalkd's `reserve-job`) of a push
//   topic is answered as if there were no such job: the job's topic is
//   looked up first (one more backend call, made only while some topic
//   pushes).
// - A put to a push topic gets a TTR of at least the target's timeout plus
//   kPushTtrMarginMs, so a reservation outlives its request.
//
// Thread: the backend's loop thread.
#ifndef DELAYQ_DELIVERY_PUSH_GUARD_H_
#define DELAYQ_DELIVERY_PUSH_GUARD_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <memory>

#include "backend/forwarding_backend.h"
#include "delivery/push_target.h"

namespace delayq::delivery {

// How much longer than a push's timeout its reservation lasts: the time to
// settle the job after the answer (a Redis round trip, a store write).
inline constexpr TimeMs kPushTtrMarginMs = 5'000;

class PushGuard : public backend::ForwardingBackend {
 public:
  // `inner` and `targets` must outlive this.
  PushGuard(boost::asio::io_context& io, backend::Backend& inner, PushTargets& targets);
  ~PushGuard() override;

  void CloseSession(SessionId s) override;
  void Put(SessionId s, const PutRequest& r, backend::Callback<PutResult> done) override;
  void Reserve(const ReserveRequest& r, backend::JobsDone done) override;
  void ReserveJob(SessionId s, JobId id, backend::JobsDone done) override;
  void CancelReserve(SessionId s) override;

 private:
  struct Held {
    ReserveRequest request;
    backend::JobsDone done;
    std::unique_ptr<boost::asio::steady_timer> timer;
  };
  void TopicChanged(std::string_view topic, const PushTarget* now);

  boost::asio::io_context& io_;
  backend::Backend& inner_;
  PushTargets& targets_;
  std::map<SessionId, Held> held_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace delayq::delivery

#endif  // DELAYQ_DELIVERY_PUSH_GUARD_H_

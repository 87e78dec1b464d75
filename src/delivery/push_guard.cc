// The workers' side of push topics (push_guard.h).
#include "delivery/push_guard.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace delayq::delivery {

PushGuard::PushGuard(boost::asio::io_context& io, backend::Backend& inner, PushTargets& targets)
    : ForwardingBackend(inner), io_(io), inner_(inner), targets_(targets) {
  targets_.Listen([this, alive = alive_](std::string_view topic, const PushTarget* now) {
    if (*alive) TopicChanged(topic, now);
  });
}

PushGuard::~PushGuard() { *alive_ = false; }

void PushGuard::CloseSession(SessionId s) {
  held_.erase(s);
  inner_.CloseSession(s);
}

void PushGuard::CancelReserve(SessionId s) {
  held_.erase(s);
  inner_.CancelReserve(s);
}

void PushGuard::Put(SessionId s, const PutRequest& r, backend::Callback<PutResult> done) {
  if (targets_.all().empty()) return inner_.Put(s, r, std::move(done));
  const PushTarget* t = targets_.Find(r.topic.empty() ? inner_.UsedTopic(s) : r.topic);
  if (t == nullptr || r.ttr_ms >= t->timeout_ms + kPushTtrMarginMs)
    return inner_.Put(s, r, std::move(done));
  PutRequest longer = r;
  longer.ttr_ms = t->timeout_ms + kPushTtrMarginMs;
  inner_.Put(s, longer, std::move(done));
}

void PushGuard::ReserveJob(SessionId s, JobId id, backend::JobsDone done) {
  if (targets_.all().empty()) return inner_.ReserveJob(s, id, std::move(done));
  std::weak_ptr<bool> alive = alive_;
  inner_.StatsJob(id, [this, alive, s, id, done = std::move(done)](Result<JobStats> st) mutable {
    if (alive.expired()) return;
    if (st.ok() && targets_.IsPushTopic(st->topic))
      return done(Status::NotFound("job " + std::to_string(id) + " is in push topic '" + st->topic +
                                   "': its target alone takes it"),
                  {});
    inner_.ReserveJob(s, id, std::move(done));
  });
}

void PushGuard::Reserve(const ReserveRequest& r, backend::JobsDone done) {
  held_.erase(r.session);
  // No push topic: nothing to look at (a reserve's cost stays as it was).
  if (targets_.all().empty()) return inner_.Reserve(r, std::move(done));
  const std::vector<std::string> watched = inner_.WatchedTopics(r.session);
  const size_t pushed =
      static_cast<size_t>(std::count_if(watched.begin(), watched.end(), [&](const std::string& t) {
        return targets_.IsPushTopic(t);
      }));
  if (pushed == 0) return inner_.Reserve(r, std::move(done));
  if (pushed < watched.size()) {
    for (const std::string& t : watched)
      if (targets_.IsPushTopic(t)) (void)inner_.Ignore(r.session, t);
    return inner_.Reserve(r, std::move(done));
  }
  // Push topics only: nothing for a worker, now or later, unless one of
  // them stops being a push topic (TopicChanged).
  if (r.timeout_ms == 0) return done(Status::TimedOut(), {});
  Held& h = held_[r.session];
  h.request = r;
  h.done = std::move(done);
  if (r.timeout_ms > 0) {
    h.timer = std::make_unique<boost::asio::steady_timer>(io_);
    h.timer->expires_after(std::chrono::milliseconds(r.timeout_ms));
    h.timer->async_wait([this, alive = alive_, s = r.session](const boost::system::error_code& ec) {
      if (ec || !*alive) return;
      auto it = held_.find(s);
      if (it == held_.end()) return;
      backend::JobsDone d = std::move(it->second.done);
      held_.erase(it);
      d(Status::TimedOut(), {});
    });
  }
}

void PushGuard::TopicChanged(std::string_view, const PushTarget* now) {
  if (now != nullptr || held_.empty()) return;
  // A topic stopped being a push topic: the reserves held for sessions
  // watching it go on as asked (their timeouts start again).
  std::vector<SessionId> sessions;
  for (const auto& [s, h] : held_) sessions.push_back(s);
  for (SessionId s : sessions) {
    auto it = held_.find(s);
    if (it == held_.end()) continue;
    const std::vector<std::string> watched = inner_.WatchedTopics(s);
    if (std::all_of(watched.begin(), watched.end(),
                    [&](const std::string& t) { return targets_.IsPushTopic(t); }))
      continue;
    Held h = std::move(it->second);
    held_.erase(it);
    Reserve(h.request, std::move(h.done));
  }
}

}  // namespace delayq::delivery

// The dispatcher of push topics (push_dispatcher.h).
#include "delivery/push_dispatcher.h"

#include <strings.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "delivery/push_guard.h"
#include "delivery/webhook.h"

namespace delayq::delivery {

namespace {

// The wait before a reserve that failed (Redis away) is made again.
constexpr std::chrono::milliseconds kReserveRetry{1000};
// The shortest request timeout a short TTR leaves.
constexpr TimeMs kMinPushTimeoutMs = 1000;

TimeMs WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool NamesContentType(const std::vector<std::pair<std::string, std::string>>& headers) {
  return std::any_of(headers.begin(), headers.end(), [](const auto& h) {
    return h.first.size() == 12 && strncasecmp(h.first.c_str(), "content-type", 12) == 0;
  });
}

// `text` as one quoted logfmt value: at most 200 bytes, its quotes and
// control bytes (an answer's first bytes may hold any) made harmless.
std::string Quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text.substr(0, 200)) {
    const auto u = static_cast<unsigned char>(c);
    out += c == '"' ? '\'' : u < 0x20 || u == 0x7f ? ' ' : c;
  }
  return out + "\"";
}

// What a failed try leaves with its job: the status, and the answer's first
// bytes, or the failure's reason when no answer came.
PushAnswer AnswerOf(const PushResponse& r) {
  PushAnswer a;
  a.status = r.status > 0 ? static_cast<uint32_t>(r.status) : 0;
  a.text = r.status > 0 ? r.body_prefix : std::string(PushFailureName(r.failure)) + ": " + r.error;
  if (a.text.size() > kMaxAnswerBytes) a.text.resize(kMaxAnswerBytes);
  return a;
}

}  // namespace

// A topic's delivery: its target, its session and what it has in flight.
struct PushDispatcher::Lane {
  explicit Lane(boost::asio::io_context& io) : timer(io) {}
  PushTarget target;
  std::string key;  // the secret's HMAC key (WebhookKey)
  SessionId session = 0;
  bool reserving = false;  // a reserve is pending
  bool closed = false;
  uint32_t in_flight = 0;
  // The token bucket (rate_per_second > 0).
  double tokens = 0;
  std::chrono::steady_clock::time_point refilled;
  boost::asio::steady_timer timer;  // the next token, or a reserve again
  bool timer_armed = false;
};

// One job's try, copied out of the reserve's view.
struct PushDispatcher::Try {
  JobId id = 0;
  std::string key, body, lease;
  uint32_t attempt = 0;  // reserves so far, this one included
  uint32_t max_tries = 0;
  bool own_backoff = false;  // the job's back-off applies, not the target's
  TimeMs ttr_ms = 0;
  TimeMs due_ms = 0;  // when it was due for its first try
};

PushDispatcher::PushDispatcher(boost::asio::io_context& io, backend::Backend& backend,
                               PushTargets& targets, Options options)
    : io_(io),
      backend_(backend),
      targets_(targets),
      options_(std::move(options)),
      client_(io, options_.client) {
  for (const auto& [topic, t] : targets_.all()) Open(t);
  targets_.Listen([this, alive = alive_](std::string_view topic, const PushTarget* now) {
    if (*alive) TargetChanged(topic, now);
  });
}

PushDispatcher::~PushDispatcher() {
  *alive_ = false;
  for (auto& [topic, lane] : lanes_) {
    lane->closed = true;
    lane->timer.cancel();
    backend_.CloseSession(lane->session);
  }
}

uint32_t PushDispatcher::InFlight(std::string_view topic) const {
  auto it = lanes_.find(topic);
  return it == lanes_.end() ? 0 : it->second->in_flight;
}

void PushDispatcher::Log(std::string_view event, std::string_view topic,
                         const std::string& detail) const {
  if (options_.log) options_.log(std::string(event) + " topic=" + std::string(topic), detail);
}

void PushDispatcher::TargetChanged(std::string_view topic, const PushTarget* now) {
  if (now == nullptr) return Close(topic);
  auto it = lanes_.find(topic);
  if (it == lanes_.end()) return Open(*now);
  // Changed in place: the next reserve and the next request follow it.
  auto key = WebhookKey(now->secret);
  if (!key.ok()) return Close(topic);
  it->second->target = *now;
  it->second->key = *std::move(key);
  Pump(it->second);
}

void PushDispatcher::Open(const PushTarget& t) {
  auto key = WebhookKey(t.secret);
  if (!key.ok()) {
    Log("push_target_refused", t.topic, "error=" + Quoted(key.status().message()));
    return;
  }
  auto lane = std::make_shared<Lane>(io_);
  lane->target = t;
  lane->key = *std::move(key);
  lane->session = backend_.OpenSession();
  const std::vector<std::string> watched = backend_.WatchedTopics(lane->session);
  if (auto w = backend_.Watch(lane->session, t.topic); !w.ok()) {
    Log("push_target_refused", t.topic, "error=" + Quoted(w.status().message()));
    backend_.CloseSession(lane->session);
    return;
  }
  for (const std::string& other : watched)
    if (other != t.topic) (void)backend_.Ignore(lane->session, other);
  lane->tokens = t.burst > 0 ? t.burst : t.rate_per_second;
  lane->refilled = std::chrono::steady_clock::now();
  lanes_[t.topic] = lane;
  Pump(lane);
}

void PushDispatcher::Close(std::string_view topic) {
  auto it = lanes_.find(topic);
  if (it == lanes_.end()) return;
  std::shared_ptr<Lane> lane = it->second;
  lanes_.erase(it);
  lane->closed = true;
  lane->timer.cancel();
  // Cancels the pending reserve; the tries in flight still settle.
  backend_.CloseSession(lane->session);
}

void PushDispatcher::Pump(const std::shared_ptr<Lane>& lane) {
  if (lane->closed || lane->reserving || lane->timer_armed) return;
  const PushTarget& t = lane->target;
  if (lane->in_flight >= t.concurrency) return;
  uint32_t room = t.concurrency - lane->in_flight;
  if (t.rate_per_second > 0) {
    const auto now = std::chrono::steady_clock::now();
    const double cap = t.burst > 0 ? t.burst : t.rate_per_second;
    lane->tokens =
        std::min(cap, lane->tokens + std::chrono::duration<double>(now - lane->refilled).count() *
                                         t.rate_per_second);
    lane->refilled = now;
    if (lane->tokens < 1) {
      const auto wait = std::chrono::microseconds(
          static_cast<int64_t>(std::ceil((1 - lane->tokens) * 1e6 / t.rate_per_second)));
      lane->timer_armed = true;
      lane->timer.expires_after(wait);
      lane->timer.async_wait([this, alive = alive_, lane](const boost::system::error_code& ec) {
        lane->timer_armed = false;
        if (ec || !*alive) return;
        Pump(lane);
      });
      return;
    }
    room = std::min<uint32_t>(room, static_cast<uint32_t>(lane->tokens));
  }
  ReserveRequest r;
  r.session = lane->session;
  r.timeout_ms = -1;
  r.count = room;
  r.detach = true;
  lane->reserving = true;
  backend_.Reserve(r, [this, alive = alive_, lane](Status st, backend::Jobs jobs) {
    if (!*alive) return;
    lane->reserving = false;
    if (!st.ok()) {
      if (lane->closed) return;
      Log("push_reserve_failed", lane->target.topic,
          "error=" + Quoted(std::string(CodeName(st.code())) + ": " + st.message()));
      lane->timer_armed = true;
      lane->timer.expires_after(kReserveRetry);
      lane->timer.async_wait([this, alive, lane](const boost::system::error_code& ec) {
        lane->timer_armed = false;
        if (ec || !*alive) return;
        Pump(lane);
      });
      return;
    }
    for (const JobView& j : jobs) {
      Try t;
      t.id = j.id;
      t.key = std::string(j.key);
      t.body = std::string(j.body);
      t.lease = std::string(j.lease);
      t.attempt = j.reserves;
      t.max_tries = j.max_tries;
      t.own_backoff = j.own_backoff;
      t.ttr_ms = j.ttr_ms;
      t.due_ms = j.created_ms + j.delay_ms;
      lane->tokens -= 1;
      Send(lane, std::move(t));
    }
    Pump(lane);
  });
}

void PushDispatcher::Send(const std::shared_ptr<Lane>& lane, Try t) {
  const PushTarget& target = lane->target;
  PushRequest req;
  req.url = target.url;
  req.method = target.method;
  req.follow_redirects = target.follow_redirects;
  req.timeout_ms =
      std::min(target.timeout_ms, std::max(kMinPushTimeoutMs, t.ttr_ms - kPushTtrMarginMs));
  for (const auto& [name, value] : target.headers) req.headers.push_back(name + ": " + value);
  if (!NamesContentType(target.headers))
    req.headers.push_back("Content-Type: application/octet-stream");
  // The job's id names the message: the same on every try, so a receiver
  // can drop a repeat (Standard Webhooks' webhook-id).
  const std::string msg_id = "job_" + std::to_string(t.id);
  const int64_t timestamp = WallMs() / 1000;
  req.headers.push_back("webhook-id: " + msg_id);
  req.headers.push_back("webhook-timestamp: " + std::to_string(timestamp));
  req.headers.push_back("webhook-signature: " +
                        WebhookSignature(lane->key, msg_id, timestamp, t.body));
  req.headers.push_back("delayq-job-id: " + std::to_string(t.id));
  req.headers.push_back("delayq-topic: " + target.topic);
  if (!t.key.empty()) req.headers.push_back("delayq-key: " + t.key);
  req.headers.push_back("delayq-attempt: " + std::to_string(t.attempt));
  req.headers.push_back("delayq-due: " + std::to_string(t.due_ms));
  req.body = t.body;
  lane->in_flight++;
  counters_.sent++;
  client_.Send(std::move(req), [this, alive = alive_, lane, t = std::move(t)](PushResponse r) {
    if (!*alive) return;
    Settle(lane, t, r);
  });
}

void PushDispatcher::Settle(const std::shared_ptr<Lane>& lane, const Try& t,
                            const PushResponse& r) {
  const PushTarget& target = lane->target;
  const PushVerdict v = JudgePush(r, WallMs());
  const backend::Claim claim(SessionId{0}, t.lease);
  const std::string what = "id=" + std::to_string(t.id) + " attempt=" + std::to_string(t.attempt);
  auto settled = [this, alive = alive_, lane, what](const char* outcome, Result<JobChange> c) {
    if (!*alive) return;
    lane->in_flight--;
    if (!c.ok()) {
      counters_.lost++;
      Log("push_settle_failed", lane->target.topic,
          what + " outcome=" + outcome + " error=" +
              Quoted(std::string(CodeName(c.status().code())) + ": " + c.status().message()));
    } else if (c->state == JobState::kBuried) {
      counters_.buried++;
    } else if (std::string_view(outcome) == "delivered") {
      counters_.delivered++;
    } else {
      counters_.retried++;
    }
    Pump(lane);
  };
  if (v.kind == PushVerdict::Kind::kDelivered)
    return backend_.Finish(claim, t.id,
                           [settled](Result<JobChange> c) { settled("delivered", std::move(c)); });
  Log("push_failed", target.topic, what + " note=" + Quoted(v.note));
  const PushAnswer answer = AnswerOf(r);
  const uint32_t max_tries = t.max_tries > 0        ? t.max_tries
                             : target.max_tries > 0 ? target.max_tries
                                                    : kDefaultPushMaxTries;
  if (v.kind == PushVerdict::Kind::kBury || t.attempt >= max_tries)
    return backend_.BuryAnswered(
        claim, t.id, answer, [settled](Result<JobChange> c) { settled("buried", std::move(c)); });
  // A job with a back-off of its own is released without a delay: the
  // backend applies its back-off (Engine::Release, dq_release), on both
  // backends alike and with no need to carry the back-off here.
  std::optional<TimeMs> delay = v.delay_ms;
  if (!delay && !t.own_backoff) {
    const Backoff& backoff =
        target.backoff.kind == Backoff::Kind::kNone ? DefaultPushBackoff() : target.backoff;
    delay = backoff.DelayFor(std::max<uint32_t>(t.attempt, 1));
  }
  backend_.ReleaseAnswered(claim, t.id, delay, answer,
                           [settled](Result<JobChange> c) { settled("retried", std::move(c)); });
}

}  // namespace delayq::delivery

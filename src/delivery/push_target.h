// A push topic's target (docs/push.md): where delayqd sends the topic's
// jobs, how (method, extra headers, timeout, redirects), how many at once
// and how fast, with which secret it signs them, and how a failed try is
// retried. Its JSON is what PUT /topics/{topic}/push takes, what the
// config file's [push."topic"] sections say, and what the targets' store
// keeps; GET shows it without the secret (ShownJson).
//
// PushTargets holds the targets of this delayqd, by topic, and tells its
// listeners (the dispatcher, the workers' guard) of every change.
//
// Thread: the loop thread.
#ifndef DELAYQ_DELIVERY_PUSH_TARGET_H_
#define DELAYQ_DELIVERY_PUSH_TARGET_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"
#include "delayq/types.h"

namespace delayq::delivery {

struct PushTarget {
  std::string topic;
  std::string url;     // http(s), checked by ParsePushUrl
  std::string secret;  // "whsec_..." (webhook.h)
  std::string method = "POST";
  std::vector<std::pair<std::string, std::string>> headers;  // sent with every request
  TimeMs timeout_ms = 30'000;                                // the whole exchange
  uint32_t concurrency = 16;  // requests in flight at most, on each delayqd
  // Token bucket (0: no limit): requests a second, and how many may go at
  // once after a quiet spell (0: one second's worth).
  uint32_t rate_per_second = 0;
  uint32_t burst = 0;
  bool follow_redirects = false;
  // The retries of a job that names none of its own (kNone here: the
  // default, DefaultPushBackoff).
  Backoff backoff;
  uint32_t max_tries = 0;  // of a job that names none; 0: kDefaultPushMaxTries
  bool operator==(const PushTarget&) const = default;
};

inline constexpr TimeMs kMaxPushTimeoutMs = 15 * 60 * 1000;
inline constexpr size_t kMaxPushHeaders = 32;

// The target `json` describes for `topic` (docs/push.md, "The target").
// `secret` absent: `fallback_secret` if it is not empty, else a new one.
// kInvalidArgument, saying which field and why, for anything else.
Result<PushTarget> ParsePushTarget(std::string_view topic, std::string_view json,
                                   std::string_view fallback_secret = {});

// Every field, the secret too: what the store keeps.
std::string StoredJson(const PushTarget& t);
// What GET shows: every field but the secret, and "secret_set"; without
// `header_values`, each header's value is "***" (they may hold the
// receiver's credentials, shown only to who may set them).
std::string ShownJson(const PushTarget& t, bool header_values = true);

// The targets of this delayqd by topic. Set and Remove change them here and
// tell the listeners at once; a store behind them (when there is one)
// learns of the change through the listener too.
class PushTargets {
 public:
  using Listener = std::function<void(std::string_view topic, const PushTarget* now)>;

  const PushTarget* Find(std::string_view topic) const;
  bool IsPushTopic(std::string_view topic) const { return Find(topic) != nullptr; }
  const std::map<std::string, PushTarget, std::less<>>& all() const { return targets_; }

  // Adds or replaces; listeners hear of it unless it is unchanged.
  void Set(PushTarget t);
  // false when the topic had none.
  bool Remove(std::string_view topic);

  // What PUT and DELETE /topics/{topic}/push call: the store first (when
  // there is one), then Set or Remove here. `done` runs once, on the loop:
  // Ok, the store's error (nothing changed here), or for Drop kNotFound
  // when the topic has no target.
  using Persist = std::function<void(std::string_view topic, const PushTarget* t,
                                     std::function<void(::delayq::Status)> done)>;
  void set_persist(Persist p) { persist_ = std::move(p); }
  void Save(PushTarget t, std::function<void(::delayq::Status)> done);
  void Drop(std::string_view topic, std::function<void(::delayq::Status)> done);
  // Called with the topic and its target (nullptr: removed) after each
  // change. Listeners are never removed; they must outlive this.
  void Listen(Listener l) { listeners_.push_back(std::move(l)); }

 private:
  void Tell(std::string_view topic, const PushTarget* now);
  std::map<std::string, PushTarget, std::less<>> targets_;
  std::vector<Listener> listeners_;
  Persist persist_;
};

}  // namespace delayq::delivery

#endif  // DELAYQ_DELIVERY_PUSH_TARGET_H_

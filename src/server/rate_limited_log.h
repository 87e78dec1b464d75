// Warnings about what clients do (a limit reached, a request timed out),
// at most one line per cause per interval: a flood of bad clients must not
// become a flood of log lines. A line that follows suppressed ones says how
// many there were: `event=<cause> <detail> suppressed=N`.
//
// Thread: the loop thread (one instance per server, no locking).
#ifndef DELAYQ_SERVER_RATE_LIMITED_LOG_H_
#define DELAYQ_SERVER_RATE_LIMITED_LOG_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace delayq::server {

class RateLimitedLog {
 public:
  using Clock = std::chrono::steady_clock;
  // `sink` takes a whole logfmt line (without the time and level); none: the
  // lines are counted and dropped.
  using Sink = std::function<void(std::string_view line)>;

  explicit RateLimitedLog(std::chrono::milliseconds every = std::chrono::seconds(10))
      : every_(every) {}

  void set_sink(Sink sink) { sink_ = std::move(sink); }

  // Logs `event=<cause> <detail>` unless `cause` was logged less than the
  // interval before `now`; then it only counts it.
  void Warn(std::string_view cause, std::string_view detail, Clock::time_point now = Clock::now()) {
    auto [it, fresh] = causes_.try_emplace(std::string(cause));
    Entry& e = it->second;
    ++e.total;
    if (!fresh && now - e.last < every_) {
      ++e.suppressed;
      return;
    }
    e.last = now;
    if (!sink_) {
      e.suppressed = 0;
      return;
    }
    std::string line = "event=";
    line.append(cause);
    if (!detail.empty()) {
      line.push_back(' ');
      line.append(detail);
    }
    if (e.suppressed > 0) line.append(" suppressed=" + std::to_string(e.suppressed));
    e.suppressed = 0;
    sink_(line);
  }

  // How many times `cause` happened (logged or not).
  uint64_t count(std::string_view cause) const {
    auto it = causes_.find(std::string(cause));
    return it == causes_.end() ? 0 : it->second.total;
  }

 private:
  struct Entry {
    Clock::time_point last{};
    uint64_t suppressed = 0;
    uint64_t total = 0;
  };
  std::chrono::milliseconds every_;
  Sink sink_;
  std::unordered_map<std::string, Entry> causes_;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_RATE_LIMITED_LOG_H_

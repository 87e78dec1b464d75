// One log line per cause, not one per event: the first event of a cause is
// logged at once (count=1); the events of the next `period` are counted and
// logged together in one line when it ends (count=N, the events since the
// line before); a period without events ends the series.
//
// Thread: the loop thread of `io`.
#ifndef DELAYQ_SERVER_RATE_LIMITED_LOG_H_
#define DELAYQ_SERVER_RATE_LIMITED_LOG_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace delayq::server {

class RateLimitedLog {
 public:
  // `line` is the cause's text (key=value pairs) without the count; `sink`
  // writes a line (none: nothing is logged). It must outlive this object.
  RateLimitedLog(boost::asio::io_context& io, const std::function<void(const std::string&)>& sink,
                 std::string line, std::chrono::milliseconds period = std::chrono::seconds(10))
      : sink_(sink), line_(std::move(line)), period_(period), timer_(io) {}

  // An event of this cause.
  void Hit() {
    ++count_;
    if (!armed_) Emit();
  }

 private:
  void Emit() {
    if (sink_) sink_(line_ + " count=" + std::to_string(count_));
    count_ = 0;
    armed_ = true;
    timer_.expires_after(period_);
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;  // cancelled: this object may be gone
      if (count_ > 0) return Emit();
      armed_ = false;
    });
  }

  const std::function<void(const std::string&)>& sink_;
  std::string line_;
  std::chrono::milliseconds period_;
  boost::asio::steady_timer timer_;
  uint64_t count_ = 0;  // events not logged yet
  bool armed_ = false;  // a period runs: events wait for its end
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_RATE_LIMITED_LOG_H_

#include "server/event_loop.h"

namespace delayq::server {

LoopStats RunEventLoop(boost::asio::io_context& io, std::chrono::microseconds poll_window) {
  if (poll_window.count() <= 0) {
    io.run();
    return {};
  }
  using clock = std::chrono::steady_clock;
  PollPolicy policy(poll_window);
  clock::duration missed{};
  while (!io.stopped()) {
    if (io.poll() > 0) continue;
    if (io.stopped()) break;
    if (policy.ShouldPoll()) {
      const auto start = clock::now();
      bool hit = false;
      while (!io.stopped()) {
        if (io.poll() > 0) {
          hit = true;
          break;
        }
        if (clock::now() - start >= poll_window) break;
      }
      policy.Polled(hit);
      if (hit) continue;
      missed += clock::now() - start;
    }
    const auto slept_at = clock::now();
    if (io.run_one() == 0) break;
    policy.Slept(clock::now() - slept_at);
  }
  return {
      policy.polls(), policy.hits(),
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(missed).count())};
}

}  // namespace delayq::server

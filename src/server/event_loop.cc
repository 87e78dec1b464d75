#include "server/event_loop.h"

namespace delayq::server {

LoopStats RunEventLoop(boost::asio::io_context& io, std::chrono::microseconds poll_window,
                       const LoopHooks& hooks) {
  if (poll_window.count() <= 0) {
    io.run();
    return {};
  }
  using clock = std::chrono::steady_clock;
  PollPolicy policy(poll_window);
  PollPolicy waiting_policy(poll_window);  // while replies wait elsewhere
  const bool hooked = hooks.waiting_elsewhere && hooks.completions_from_elsewhere;
  clock::duration missed{};
  while (!io.stopped()) {
    if (io.poll() > 0) continue;
    if (io.stopped()) break;
    const bool waiting = hooked && hooks.waiting_elsewhere();
    PollPolicy& p = waiting ? waiting_policy : policy;
    if (p.ShouldPoll()) {
      const auto start = clock::now();
      const uint64_t elsewhere = waiting ? hooks.completions_from_elsewhere() : 0;
      size_t ran = 0;
      while (!io.stopped()) {
        ran = io.poll();
        if (ran > 0) break;
        if (clock::now() - start >= poll_window) break;
      }
      // Waiting: a poll that the other thread's completion ended (with the
      // replies it let go) is no reason to poll; socket work is.
      const bool hit = ran > 0 && (!waiting || hooks.completions_from_elsewhere() == elsewhere);
      p.Polled(hit);
      if (hit) continue;
      missed += clock::now() - start;
      if (ran > 0) continue;
    }
    const auto slept_at = clock::now();
    if (io.run_one() == 0) break;
    p.Slept(clock::now() - slept_at);
  }
  return {
      policy.polls() + waiting_policy.polls(), policy.hits() + waiting_policy.hits(),
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(missed).count())};
}

}  // namespace delayq::server

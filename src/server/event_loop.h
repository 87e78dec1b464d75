// The loop thread's main loop: runs the io_context until it stops, and
// decides each time it runs out of work whether to keep polling the sockets
// for a short while or to sleep in epoll_wait.
//
// Why poll at all: a client that sends one request and waits for its reply
// (every beanstalkd client with one connection) leaves the server idle for
// the few tens of microseconds the reply takes to reach it and the next
// request to come back. A server that sleeps then pays a wake-up per request
// (about 40 µs of CPU on a VM, and the latency with it); one that keeps
// polling for that long finds the next request without one.
//
// Why adaptively: polling that finds nothing is a core spent for nothing.
// PollPolicy polls only while recent polls found work within the window,
// probes now and then when they stopped doing so, and never probes after a
// long sleep, so a trickle of requests or an idle server costs no polling.
// docs/decisions.md has the measurements.
//
// Thread: the loop thread.
#ifndef DELAYQ_SERVER_EVENT_LOOP_H_
#define DELAYQ_SERVER_EVENT_LOOP_H_

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>

namespace delayq::server {

class PollPolicy {
 public:
  // `window`: how long one poll lasts at most before the loop sleeps.
  explicit PollPolicy(std::chrono::microseconds window) : window_(window) {}

  // The loop ran out of work. True: poll for up to the window, then report
  // with Polled. False: sleep, then report with Slept.
  bool ShouldPoll() {
    probing_ = false;
    if (score_ >= kOn) return true;
    // Polling is off. Probe after every probe_every_-th short sleep (work
    // that came soon after the loop went to sleep may have come within the
    // window); each probe that finds nothing doubles the wait for the next.
    if (!last_sleep_short_) return false;
    if (++since_probe_ < probe_every_) return false;
    since_probe_ = 0;
    probing_ = true;
    return true;
  }

  // A poll ended: `hit` if work came within the window.
  void Polled(bool hit) {
    ++polls_;
    if (hit) {
      ++hits_;
      score_ += (kMax - score_) / 8;
      probe_every_ = kProbeFirst;
    } else {
      score_ -= score_ / 8;
      if (probing_) probe_every_ = std::min(probe_every_ * 2, kProbeLast);
    }
  }

  // A sleep ended after `slept` (the wake-up included).
  void Slept(std::chrono::nanoseconds slept) { last_sleep_short_ = slept < 2 * window_; }

  bool polling() const { return score_ >= kOn; }
  uint64_t polls() const { return polls_; }
  uint64_t hits() const { return hits_; }

  // A moving average of recent polls' hits, in 1/256 (kMax: all hit).
  // Polling stays on while it is at least kOn: from all hits, six misses in
  // a row turn it off; from all misses, six hits in a row turn it on.
  static constexpr uint32_t kMax = 256;
  static constexpr uint32_t kOn = 128;
  // Probes come after every 8th short sleep at first, every 1024th at most.
  static constexpr uint32_t kProbeFirst = 8;
  static constexpr uint32_t kProbeLast = 1024;

 private:
  std::chrono::microseconds window_;
  uint32_t score_ = 0;
  uint32_t since_probe_ = 0;
  uint32_t probe_every_ = kProbeFirst;
  bool probing_ = false;
  bool last_sleep_short_ = false;
  uint64_t polls_ = 0;
  uint64_t hits_ = 0;
};

// Runs `io` until it stops or runs out of work. `poll_window` 0: io.run(),
// never polling; otherwise polls for up to that long after work, as
// PollPolicy decides. Returns the policy's counters (zero without polling).
struct LoopStats {
  uint64_t polls = 0;
  uint64_t hits = 0;
  uint64_t missed_us = 0;  // time spent in polls that found nothing
};

// What the loop may ask about work that other threads post to it (the
// store's writer). Both or neither.
struct LoopHooks {
  // True while replies wait for that thread (changes not yet synced).
  std::function<bool()> waiting_elsewhere;
  // How many of its completions have run so far.
  std::function<uint64_t()> completions_from_elsewhere;
};

// With hooks, the loop keeps a second PollPolicy for the moments it runs out
// of work while replies wait for the other thread. There, a poll counts as
// a hit only when socket work ends it, not the other thread's completion
// (nor the replies that completion lets go): with one client waiting for
// an fsync, polling would spin
// through the sync to save one wake-up, so it stops; with many clients,
// new requests keep coming during the sync and polling stays on.
LoopStats RunEventLoop(boost::asio::io_context& io, std::chrono::microseconds poll_window,
                       const LoopHooks& hooks = {});

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_EVENT_LOOP_H_

// A topic (beanstalkd: tube): its ready queue, buried list, user keys,
// counters, pause state and the sessions waiting on it.
//
// A topic lives while it is referenced (see Topic::refs); the engine drops it
// when the count reaches zero, except for the default topic.
// Thread: owned by the engine's thread.
#ifndef DELAYQ_CORE_TOPIC_H_
#define DELAYQ_CORE_TOPIC_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "core/job.h"
#include "core/ready_queue.h"

namespace delayq::core {

struct Topic {
  explicit Topic(std::string n, uint64_t s) : name(std::move(n)), seq(s) {}
  Topic(const Topic&) = delete;
  Topic& operator=(const Topic&) = delete;

  std::string name;
  uint64_t seq;  // creation order

  ReadyQueue ready;
  Link buried;  // oldest first
  // The delayed and the reserved jobs, in no order (the timing wheel
  // orders them): a listing of one topic's jobs by state (ListJobs) walks
  // its own jobs, not the wheel's.
  Link delayed_jobs, reserved_jobs;
  std::unordered_map<std::string_view, Job*> keys;  // views into the jobs

  uint64_t urgent = 0, reserved = 0, delayed = 0, buried_count = 0;
  // Delayed jobs kept out of memory beyond the horizon, and this topic's
  // own horizon mark while its loading lags the common one (engine.h).
  uint64_t cold = 0;
  std::optional<DueMark> mark;
  uint64_t total_jobs = 0, cmd_delete = 0, cmd_pause = 0;
  uint64_t using_count = 0, watching = 0, waiting = 0;

  TimeMs pause_ms = 0;
  TimeMs paused_until = 0;  // paused while now < paused_until

  // Sessions that wait on this topic, oldest first, with the wait's sequence
  // number; entries of waits that ended are skipped lazily.
  std::deque<std::pair<SessionId, uint64_t>> waiters;
  bool drop_pending = false;  // queued for a check at the end of the call

  uint64_t jobs() const { return ready.size() + reserved + delayed + buried_count; }
  // References that keep the topic alive: sessions using, watching or
  // waiting on it, and its jobs (cold ones too).
  uint64_t refs() const { return using_count + watching + waiting + jobs() + cold; }
  bool paused(TimeMs now) const { return now < paused_until; }
};

}  // namespace delayq::core

#endif  // DELAYQ_CORE_TOPIC_H_

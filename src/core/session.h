// A session: a beanstalkd connection or one HTTP request. It uses one topic
// for puts, watches a set for reserves, holds the jobs it reserved, and may
// have one pending (blocking) reserve.
// Thread: owned by the engine's thread.
#ifndef DELAYQ_CORE_SESSION_H_
#define DELAYQ_CORE_SESSION_H_

#include <cstdint>
#include <vector>

#include "core/job.h"
#include "core/topic.h"

namespace delayq::core {

struct Session {
  SessionId id = 0;
  Topic* used = nullptr;
  std::vector<Topic*> watched;  // in the order watched
  std::vector<Job*> reserved;   // Job::pos is the index here

  // The pending reserve, if `waiting`.
  bool waiting = false;
  uint64_t wait_seq = 0;  // distinguishes this wait in Topic::waiters
  uint32_t wait_count = 1;
  bool wait_detach = false;
  TimeMs wait_deadline = kNever;  // TIMED_OUT at this time
  TimeMs wake_at = kNever;        // key in the engine's wake set
  std::vector<Topic*> wait_topics;
};

}  // namespace delayq::core

#endif  // DELAYQ_CORE_SESSION_H_

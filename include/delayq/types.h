// The job model shared by every layer: ids, states, requests, snapshots and
// the durable mutations the engine reports to the store.
#ifndef DELAYQ_TYPES_H_
#define DELAYQ_TYPES_H_

#include <compare>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/histogram.h"

namespace delayq {

using JobId = uint64_t;
using SessionId = uint64_t;
// Milliseconds. Absolute times are epoch milliseconds (or virtual time in tests).
using TimeMs = int64_t;

inline constexpr TimeMs kNever = std::numeric_limits<TimeMs>::max();
inline constexpr uint32_t kDefaultPriority = 1024;
// beanstalkd calls a job with a priority below this "urgent".
inline constexpr uint32_t kUrgentPriority = 1024;
// A session holding a reserved job with less TTR left than this is told
// DEADLINE_SOON instead of waiting for another job (beanstalkd's margin).
inline constexpr TimeMs kDeadlineSafetyMarginMs = 1000;
inline constexpr size_t kMaxTopicNameLength = 200;
inline constexpr size_t kMaxKeyLength = 200;
// Farthest a due time may lie ahead of now: 2^47 ms, about 4,400 years.
inline constexpr TimeMs kMaxDelayMs = TimeMs{1} << 47;

enum class JobState : uint8_t { kReady = 0, kDelayed = 1, kReserved = 2, kBuried = 3 };
std::string_view JobStateName(JobState s);  // "ready", "delayed", "reserved", "buried"

// How long a job waits before its next try when it times out or is released
// without an explicit delay. Try n (1-based: the n-th time it comes back)
// waits delays[min(n, size) - 1] for a list, min(base * 2^(n-1), cap) for
// exponential, and nothing for kNone (beanstalkd's behaviour).
struct Backoff {
  enum class Kind : uint8_t { kNone, kList, kExponential };
  Kind kind = Kind::kNone;
  std::vector<TimeMs> delays_ms;  // kList
  TimeMs base_ms = 0;             // kExponential
  TimeMs cap_ms = 0;              // kExponential

  static Backoff List(std::vector<TimeMs> d) { return {Kind::kList, std::move(d), 0, 0}; }
  static Backoff Exponential(TimeMs base, TimeMs cap) {
    return {Kind::kExponential, {}, base, cap};
  }
  // Delay before the try that follows `failures` failed tries (failures >= 1).
  TimeMs DelayFor(uint32_t failures) const;
  bool operator==(const Backoff&) const = default;
};

// The outcome of a job's last push try (docs/push.md, "Retries"), kept
// with the job until its next failed try overwrites it: the HTTP status
// (0: no answer came) and the first bytes of the answer's body, or the
// failure's reason ("timeout", "refused: ..."), at most kMaxAnswerBytes.
inline constexpr size_t kMaxAnswerBytes = 256;
struct PushAnswer {
  uint32_t status = 0;
  std::string text;
  bool operator==(const PushAnswer&) const = default;
};

struct PutRequest {
  std::string_view topic;  // empty: the session's used topic
  std::string_view body;
  uint32_t priority = kDefaultPriority;
  TimeMs delay_ms = 0;           // relative to now; ignored when run_at is set
  std::optional<TimeMs> run_at;  // absolute due time, epoch ms
  TimeMs ttr_ms = 60'000;        // >= 1
  std::string_view key;          // optional user key, unique in its topic while the job lives
  uint32_t max_tries = 0;        // 0: unlimited
  Backoff backoff;
  // The key is also the job's name: unique across all topics while the job
  // lives (the Youzan-style routes; docs/engine.md, "Names"). A put whose
  // name a live job of the same topic holds returns that job; one held in
  // another topic, or a key of the topic held by a job without a name, is
  // refused (kConflict).
  bool named = false;
};

struct PutResult {
  JobId id = 0;
  bool created = true;  // false: the key named a live job, which is returned
  JobState state = JobState::kReady;
  TimeMs due_ms = 0;  // delayed: its due time; else 0
};

// A read-only view of a job: what a reserve or a peek answers, in one call
// (the figures are StatsJob's). The string views stay valid until the next
// mutating call on the engine (or backend) that produced it.
struct JobView {
  JobId id = 0;
  std::string_view topic;
  std::string_view key;
  std::string_view body;
  JobState state = JobState::kReady;
  uint32_t priority = 0;
  TimeMs due_ms = 0;  // delayed: due time; reserved: TTR deadline; else 0
  TimeMs created_ms = 0;
  TimeMs delay_ms = 0;  // the delay last asked for
  TimeMs ttr_ms = 0;
  uint32_t reserves = 0, timeouts = 0, releases = 0, buries = 0, kicks = 0;
  uint32_t max_tries = 0;
  // The lease of the reservation that answered it (a reserve with
  // `detach`: docs/engine.md, "Leases"); empty in every other view, so that
  // looking at a job never hands out the right to finish it.
  std::string_view lease;
  bool named = false;  // its key is its name (PutRequest::named)
  // It has a back-off of its own (PutRequest::backoff), which a release
  // without a delay applies.
  bool own_backoff = false;
  // Its last push try's outcome (PushAnswer), when a push try failed.
  bool answered = false;
  uint32_t answer_status = 0;
  std::string_view answer_text;
};

// A page of a topic's jobs in one state, in job-id order (Engine::ListJobs,
// Backend::ListJobs; docs/http-api.md, "Browsing jobs").
struct ListJobsRequest {
  std::string_view topic;
  JobState state = JobState::kReady;
  // The page starts after this id in the order asked for; 0: at the start.
  JobId after = 0;
  uint32_t limit = 50;  // >= 1
  bool desc = false;    // newest (highest id) first
};

// What an operation on one job did (delete, finish, release, bury, touch,
// kick): the job, and the state it left it in. A delete reports the state
// it found the job in.
struct JobChange {
  JobId id = 0;
  JobState state = JobState::kReady;
  TimeMs due_ms = 0;  // delayed: due time; reserved: TTR deadline; else 0
  uint32_t priority = 0;
};

// Per-job statistics, beanstalkd's stats-job plus delayq's fields.
struct JobStats {
  JobId id = 0;
  std::string topic;
  std::string key;
  JobState state = JobState::kReady;
  uint32_t priority = 0;
  TimeMs created_ms = 0;
  TimeMs age_ms = 0;
  TimeMs delay_ms = 0;  // the delay last asked for (put, release or back-off)
  TimeMs ttr_ms = 0;
  // Both rounded up to whole milliseconds (an engine with finer ticks):
  TimeMs time_left_ms = 0;  // delayed: until due; reserved: until TTR expiry; else 0
  TimeMs due_ms = 0;        // delayed: due time; reserved: TTR deadline; else 0
  uint32_t reserves = 0, timeouts = 0, releases = 0, buries = 0, kicks = 0;
  uint32_t max_tries = 0;
  uint32_t body_size = 0;
};

// beanstalkd's stats-tube, per topic.
struct TopicStats {
  std::string name;
  uint64_t urgent = 0, ready = 0, reserved = 0, delayed = 0, buried = 0;
  uint64_t total_jobs = 0;
  uint64_t using_count = 0, watching = 0, waiting = 0;
  uint64_t cmd_delete = 0, cmd_pause = 0;
  TimeMs pause_ms = 0;  // the pause last asked for
  TimeMs pause_time_left_ms = 0;
};

// What the engine counts for /metrics beyond its stats (docs/operations.md):
// how late jobs became ready after their due time (lateness), how long a
// ready job then waited to be reserved, and the jobs buried because they
// used up their max_tries.
struct EngineMetrics {
  LatencyHistogram lateness;
  LatencyHistogram ready_wait;
  uint64_t buried_max_tries = 0;
};

// The engine's share of beanstalkd's server stats.
struct EngineStats {
  uint64_t urgent = 0, ready = 0, reserved = 0, delayed = 0, buried = 0;
  uint64_t total_jobs = 0;
  uint64_t job_timeouts = 0;
  uint64_t topics = 0;
  uint64_t sessions = 0;
  uint64_t waiting = 0;
  JobId next_id = 1;
};

// The persistent image of a job: what the store writes and recovers.
// `state` is never kReserved: reservations are not persisted, a reserved job
// is stored as ready (at-least-once after a restart).
struct JobRecord {
  JobId id = 0;
  std::string topic;
  std::string key;
  JobState state = JobState::kReady;  // kReady, kDelayed or kBuried
  uint32_t priority = 0;
  TimeMs due_ms = 0;      // kDelayed: due time, rounded up to a whole millisecond
  TimeMs created_ms = 0;  // rounded down
  TimeMs delay_ms = 0;
  TimeMs ttr_ms = 0;
  uint32_t reserves = 0, timeouts = 0, releases = 0, buries = 0, kicks = 0;
  uint32_t max_tries = 0;
  Backoff backoff;
  bool named = false;                // the key is also the job's name (PutRequest::named)
  std::optional<PushAnswer> answer;  // its last push try's outcome
  bool operator==(const JobRecord&) const = default;
};

// A place in the (due time, id) order of delayed jobs: the horizon's marks
// (docs/storage.md, "The horizon").
struct DueMark {
  TimeMs due = 0;
  JobId id = 0;
  auto operator<=>(const DueMark&) const = default;
};

// A delayed job the engine keeps out of memory (beyond the horizon): its
// persistent image and body.
struct ColdJob {
  JobRecord record;
  std::string body;
};

// Settings kept with the queue itself (push targets, schedules, and the
// schedules' firing cursors): durable as jobs are, shared by every instance
// on Redis (docs/storage.md, "Named objects"). The kind is part of the
// on-disk format: never renumber.
enum class ObjectKind : uint8_t { kPush = 1, kSchedule = 2, kScheduleCursor = 3 };
inline constexpr uint8_t kMaxObjectKind = 3;
// "push", "schedule", "cursor": their names in Redis keys and logs.
std::string_view ObjectKindName(ObjectKind k);
// A named object: its value is JSON text (a cursor's is a decimal number).
struct StoredObject {
  ObjectKind kind = ObjectKind::kPush;
  std::string name;
  std::string value;
  bool operator==(const StoredObject&) const = default;
};

// One durable change implied by an engine operation, in order.
// kPut carries the body; kUpdate the new metadata; kDelete only the
// identity (id, topic, key) and the due time the record was indexed under.
// kPutObject and kDeleteObject change a named object (`object`; its value
// in `object.value`), not a job: `record` is left empty (id 0).
struct Mutation {
  enum class Kind : uint8_t { kPut, kUpdate, kDelete, kPutObject, kDeleteObject };
  Kind kind = Kind::kPut;
  JobRecord record;
  std::string body;  // kPut only
  // A change no reply waits for and the next change of the same job
  // repeats (a reserve's counters): the writer may hold it back for a
  // moment and drop it when that next change comes first.
  bool deferrable = false;
  StoredObject object{};  // kPutObject, kDeleteObject only
  bool is_object() const { return kind == Kind::kPutObject || kind == Kind::kDeleteObject; }
};

// Something that happened to a session without it asking at that moment:
// a pending reserve was served, timed out, or cut short by DEADLINE_SOON.
struct Event {
  enum class Kind : uint8_t { kReserved, kTimedOut, kDeadlineSoon };
  Kind kind = Kind::kReserved;
  SessionId session = 0;
  JobId job = 0;  // kReserved; a batch reserve yields consecutive events
  bool operator==(const Event&) const = default;
};

}  // namespace delayq

#endif  // DELAYQ_TYPES_H_

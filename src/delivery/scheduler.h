// The scheduler (docs/schedules.md): runs every schedule stored in the
// backend (named objects of kind kSchedule) on the server's loop, putting
// each firing's job through Backend::FireSchedule, which makes a firing
// once however many instances run it and however often they restart.
//
// A firing is made ahead of its time (docs/schedules.md, "When a firing is
// made"): its job is put `lead_ms` before the fire time (at most half the
// interval since the schedule's previous firing, so that one firing is
// ahead at a time), delayed until the fire time, when the backend's timer
// makes it ready as it does any delayed job. So 10,000 schedules that fire
// at the same second put their jobs before it, and the jobs become ready
// at it, not one put after another from it. When a schedule changes, is
// paused or deleted, the firing its old version made ahead is taken back
// (Backend::UnfireSchedule) if its time has not come.
//
// A heap of the times firings are to be made and one Asio timer armed at
// its top: a firing is made when the clock reaches its make time, the next
// firing of its schedule pushed. Every instance runs every schedule; the
// schedules are listed again when their kind's version moves (polled every
// `poll_ms`, and at once after Reload, as after a change made through this
// instance).
//
// Missed firings: when a schedule is first seen at start (or after the
// instance could not list them), firings between its last possible one and
// now are skipped, or with `missed: one` the last of them is made once,
// late (its cursor stops it if another instance made it already).
//
// Thread: every method on the loop thread that runs `io` (the backend's).
#ifndef DELAYQ_DELIVERY_SCHEDULER_H_
#define DELAYQ_DELIVERY_SCHEDULER_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/clock.h"
#include "delayq/histogram.h"
#include "delivery/schedule.h"

namespace delayq::delivery {

// What a scheduler did (tests, the bench, logs).
struct SchedulerStats {
  uint64_t schedules = 0;  // loaded, paused ones included
  uint64_t made = 0;       // firings whose job this instance put
  uint64_t elsewhere = 0;  // firings another instance (or a past run) made
  uint64_t failed = 0;     // puts that failed (retried a second later)
  uint64_t unfired = 0;    // firings made ahead taken back by this instance
  // Microseconds from each made firing's fire time to its put's reply
  // (0 when the reply came before the fire time, as it does when made
  // ahead).
  LatencyHistogram lateness;
};

class Scheduler {
 public:
  struct Options {
    TimeMs poll_ms = 1000;
    // How long before its fire time a firing's job is put (at most half
    // the interval since the previous firing); 0: at the fire time.
    TimeMs lead_ms = 1000;
    // How far back `missed: one` looks for a firing missed while no
    // instance ran.
    TimeMs missed_lookback_ms = TimeMs{366} * 24 * 3600 * 1000;
    // (delayq::Status spelled out: a test's file-local Status in a unity
    // batch must not shadow it.)
    // Told of what goes wrong (a firing's put that failed, a stored
    // schedule that cannot be read), for the log; the scheduler goes on.
    std::function<void(std::string_view schedule, const delayq::Status& error)> on_error;
    // Told of every firing this instance made: its fire time and how late
    // (µs) after it its put was acknowledged, 0 if before
    // (bench/schedule_bench.cc).
    std::function<void(TimeMs fire_ms, int64_t late_us)> on_made;
  };
  // `backend` and `clock` must outlive the scheduler.
  Scheduler(boost::asio::io_context& io, backend::Backend& backend, const backend::Clock& clock,
            Options options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Lists the schedules and starts firing them.
  void Start();
  // Lists the schedules again now (after a change through this instance).
  void Reload();
  // Makes no firing from now on (delayqd is stopping); puts in flight finish.
  void Stop();
  const SchedulerStats& stats() const { return stats_; }
  // Makes the firings due by the clock's now at once, without waiting for
  // the timer (tests drive a manual clock).
  void RunDue() { OnTimer(); }
  // A schedule's next fire time as this instance has it (tests); nullopt:
  // none, paused, or unknown.
  std::optional<TimeMs> NextOf(const std::string& name) const;

 private:
  struct Entry {
    // Shared with the firings in flight: a firing copies no schedule.
    std::shared_ptr<const Schedule> schedule;
    std::string value;     // as stored: a change is a different value
    std::string revision;  // ScheduleRevision(value)
    std::shared_ptr<const FireTimes> times;
    TimeMs next = kNever;   // the next firing to make
    TimeMs ahead = kNever;  // the last firing made (its time may be to come)
    uint64_t gen = 0;       // heap entries of older generations are stale
  };
  struct Due {
    TimeMs at;    // when the firing is made (its job put)
    TimeMs fire;  // its fire time
    uint64_t gen;
    std::string name;
    bool operator>(const Due& o) const { return at > o.at; }
  };
  void Poll();
  void List();
  void Apply(std::vector<StoredObject> objects);
  // Sets the entry's next fire time after `after` and pushes it, to be
  // made ahead of it; `previous`: the firing before it (kNever: unknown).
  void Plan(Entry& e, TimeMs after, TimeMs previous);
  void ArmTimer();
  void OnTimer();
  void Fire(const std::string& name, TimeMs at, uint64_t gen);
  // Takes back the firing an old version of a schedule made ahead, if its
  // time has not come.
  void Unfire(const std::string& name, const Entry& old);

  boost::asio::io_context& io_;
  backend::Backend& backend_;
  const backend::Clock& clock_;
  Options options_;
  boost::asio::steady_timer timer_, poll_timer_;
  TimeMs timer_at_ = kNever;
  std::map<std::string, Entry> entries_;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> heap_;
  uint64_t next_gen_ = 1;
  uint64_t version_ = 0;
  bool loaded_ = false;  // the first list applied: later ones are changes
  bool listing_ = false;
  bool stopped_ = false;
  SchedulerStats stats_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace delayq::delivery

#endif  // DELAYQ_DELIVERY_SCHEDULER_H_

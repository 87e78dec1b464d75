// A hierarchical timing wheel over absolute times in ticks (the engine's:
// milliseconds or microseconds, EngineOptions::ticks_per_ms); one slot of
// level 0 is one tick.
//
// Eleven levels of 64 slots cover all 64-bit times. A job due at `t` sits on
// level L = (highest bit in which t and now() differ) / 6, in slot
// (t >> 6L) & 63; a job due at or before now() sits in the `due_` slot.
// Invariant: for every job on level L, t and now() agree on all digits above
// L and differ on digit L. A per-level 64-bit occupancy mask finds the next
// occupied slot with one bit scan. Moving now() forward to the start of the
// lowest occupied slot keeps the invariant for every other slot; that slot is
// then cascaded to lower levels (or fired, on level 0).
//
// A slot is an array of job pointers (Job::wpos is the job's index in it):
// a cascade walks it with prefetches far ahead, so the cache misses of
// thousands of jobs overlap instead of queueing behind one another as in a
// linked list. Insert is O(1) amortized; Remove is O(1) (the slot's last
// job takes the hole); each job moves at most once per level.
//
// Thread: owned by the engine's thread.
#ifndef DELAYQ_CORE_TIMING_WHEEL_H_
#define DELAYQ_CORE_TIMING_WHEEL_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/job.h"

namespace delayq::core {

class TimingWheel {
 public:
  static constexpr int kBits = 6;
  static constexpr int kSlots = 1 << kBits;
  static constexpr int kLevels = 11;  // 66 bits >= 64

  explicit TimingWheel(TimeMs now) : now_(static_cast<uint64_t>(now)) {}
  TimingWheel(const TimingWheel&) = delete;
  TimingWheel& operator=(const TimingWheel&) = delete;

  TimeMs now() const { return static_cast<TimeMs>(now_); }
  size_t size() const { return size_; }

  // REQUIRES: j is not in the wheel; j->due >= 0.
  void Insert(Job* j) {
    ++size_;
    Place(j);
    if (next_known_ && static_cast<uint64_t>(j->due) < next_) next_ = static_cast<uint64_t>(j->due);
  }

  // REQUIRES: j is in this wheel (its `due` unchanged since Insert).
  void Remove(Job* j) {
    --size_;
    uint64_t due = static_cast<uint64_t>(j->due);
    if (due == next_) next_known_ = false;
    Slot* slot;
    int level = -1, index = 0;
    if (due <= now_) {
      slot = &due_;
    } else {
      level = LevelOf(due);
      index = SlotOf(due, level);
      slot = &slots_[level][index];
    }
    Job* last = slot->back();
    (*slot)[j->wpos] = last;
    last->wpos = j->wpos;
    slot->pop_back();
    if (slot->empty() && level >= 0) masks_[level] &= ~(uint64_t{1} << index);
  }

  // The earliest time at which AdvanceTo can have work: exact when a job is
  // due within the current 64 ticks, else the start of the next occupied slot.
  // kNever when empty.
  TimeMs NextEventBound() const {
    if (!due_.empty()) return static_cast<TimeMs>(now_);
    for (int level = 0; level < kLevels; ++level) {
      uint64_t mask = masks_[level];
      if (mask == 0) continue;
      int slot = __builtin_ctzll(mask);
      int shift = level * kBits;
      uint64_t above = (shift + kBits >= 64) ? 0 : (now_ >> (shift + kBits)) << (shift + kBits);
      return static_cast<TimeMs>(above | (static_cast<uint64_t>(slot) << shift));
    }
    return kNever;
  }

  // The earliest due time in the wheel (now() when one is due already),
  // exact unless the first occupied slot holds more than kMaxScan jobs (then
  // the start of that slot, as NextEventBound). kNever when empty. The value
  // is kept from call to call: an insert lowers it, and it is found again
  // (a walk over that slot) only after its job left or fired.
  TimeMs NextEvent() const {
    if (!due_.empty()) return static_cast<TimeMs>(now_);
    if (next_known_) return static_cast<TimeMs>(next_);
    TimeMs bound = NextEventBound();
    if (bound == kNever) return kNever;
    int level = 0;
    while (masks_[level] == 0) ++level;
    if (level > 0) {  // (a slot of level 0 is one tick: its start is exact)
      const Slot& first = slots_[level][__builtin_ctzll(masks_[level])];
      if (first.size() > kMaxScan) return bound;
      uint64_t min = ~uint64_t{0};
      for (const Job* j : first) min = std::min(min, static_cast<uint64_t>(j->due));
      bound = static_cast<TimeMs>(min);
    }
    next_ = static_cast<uint64_t>(bound);
    next_known_ = true;
    return bound;
  }

  // Moves now() forward to `t` (no-op if t <= now()) and calls fire(Job*) for
  // every job whose due time is <= t, after taking it out; jobs are fired in
  // order of due time (ties in no particular order). `fire` may not touch
  // the wheel. A negative `t` is before now() too (not a huge unsigned one).
  template <typename F>
  void AdvanceTo(TimeMs t, F&& fire) {
    uint64_t target = static_cast<uint64_t>(std::max<TimeMs>(t, 0));
    if (target >= next_) next_known_ = false;  // it fires
    for (;;) {
      FireDue(fire);
      TimeMs bound = NextEventBound();
      if (bound == kNever || static_cast<uint64_t>(bound) > target) break;
      now_ = static_cast<uint64_t>(bound);
      Cascade();
    }
    if (target > now_) now_ = target;
  }

  // Calls visit(Job*) for every job, slot by slot in time order (jobs
  // within one slot are in no particular order), and slot_done() after each
  // slot; stops when slot_done() returns true. For rare operations
  // (peek-delayed, kick) only: it may walk every job.
  template <typename F, typename G>
  void VisitInTimeOrder(F&& visit, G&& slot_done) const {
    if (VisitSlot(due_, visit, slot_done)) return;
    for (int level = 0; level < kLevels; ++level) {
      uint64_t mask = masks_[level];
      while (mask != 0) {
        int slot = __builtin_ctzll(mask);
        mask &= mask - 1;
        if (VisitSlot(slots_[level][slot], visit, slot_done)) return;
      }
    }
  }

  // Whether a job is due at or before now() (AdvanceTo would fire it).
  bool HasDue() const { return !due_.empty(); }

  // Checks the placement invariant of every job; for tests.
  bool Valid() const {
    size_t n = 0;
    for (size_t i = 0; i < due_.size(); ++i, ++n)
      if (static_cast<uint64_t>(due_[i]->due) > now_ || due_[i]->wpos != i) return false;
    for (int level = 0; level < kLevels; ++level) {
      for (int slot = 0; slot < kSlots; ++slot) {
        const Slot& s = slots_[level][slot];
        if (s.empty() == (((masks_[level] >> slot) & 1) != 0)) return false;
        for (size_t i = 0; i < s.size(); ++i, ++n) {
          uint64_t due = static_cast<uint64_t>(s[i]->due);
          if (due <= now_ || LevelOf(due) != level || SlotOf(due, level) != slot || s[i]->wpos != i)
            return false;
        }
      }
    }
    return n == size_;
  }

  size_t MemoryUsage() const {
    size_t n = sizeof(*this) + due_.capacity() * sizeof(Job*);
    for (const auto& level : slots_)
      for (const Slot& s : level) n += s.capacity() * sizeof(Job*);
    return n;
  }

 private:
  using Slot = std::vector<Job*>;
  // How far ahead a walk over a slot prefetches.
  static constexpr size_t kPrefetchAhead = 8;
  // A slot emptied by a cascade keeps its array only up to this capacity.
  static constexpr size_t kKeepCapacity = 1024;
  // NextEvent walks a first slot of at most this many jobs.
  static constexpr size_t kMaxScan = 256;

  int LevelOf(uint64_t due) const { return (63 - __builtin_clzll(due ^ now_)) / kBits; }
  static int SlotOf(uint64_t due, int level) {
    return static_cast<int>((due >> (level * kBits)) & (kSlots - 1));
  }

  static void Append(Slot& s, Job* j) {
    j->wpos = static_cast<uint32_t>(s.size());
    s.push_back(j);
  }

  void Place(Job* j) {
    uint64_t due = static_cast<uint64_t>(j->due);
    if (due <= now_) {
      Append(due_, j);
      return;
    }
    int level = LevelOf(due);
    int slot = SlotOf(due, level);
    Append(slots_[level][slot], j);
    masks_[level] |= uint64_t{1} << slot;
  }

  template <typename F>
  void FireDue(F& fire) {
    if (due_.empty()) return;
    Slot fired;
    fired.swap(due_);
    size_ -= fired.size();
    for (size_t i = 0; i < fired.size(); ++i) {
      if (i + kPrefetchAhead < fired.size()) __builtin_prefetch(fired[i + kPrefetchAhead], 1, 3);
      fire(fired[i]);
    }
    fired.clear();
    if (due_.empty() && fired.capacity() <= kKeepCapacity) due_.swap(fired);
  }

  // now_ has just reached the start of the lowest occupied slot: move its
  // jobs down (those due exactly now go to due_).
  void Cascade() {
    for (int level = 0; level < kLevels; ++level) {
      if (masks_[level] == 0) continue;
      int index = __builtin_ctzll(masks_[level]);
      masks_[level] &= ~(uint64_t{1} << index);
      Slot moving;
      moving.swap(slots_[level][index]);
      for (size_t i = 0; i < moving.size(); ++i) {
        if (i + kPrefetchAhead < moving.size())
          __builtin_prefetch(moving[i + kPrefetchAhead], 1, 3);
        Place(moving[i]);  // never back into this slot: it goes lower
      }
      moving.clear();
      if (moving.capacity() <= kKeepCapacity) slots_[level][index].swap(moving);
      return;
    }
  }

  template <typename F, typename G>
  static bool VisitSlot(const Slot& s, F& visit, G& slot_done) {
    for (Job* j : s) visit(j);
    return slot_done();
  }

  uint64_t now_;
  size_t size_ = 0;
  // NextEvent's last answer, while it holds.
  mutable uint64_t next_ = 0;
  mutable bool next_known_ = false;
  Slot due_;
  std::array<uint64_t, kLevels> masks_{};
  std::array<std::array<Slot, kSlots>, kLevels> slots_;
};

}  // namespace delayq::core

#endif  // DELAYQ_CORE_TIMING_WHEEL_H_

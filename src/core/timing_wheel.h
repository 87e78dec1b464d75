// A hierarchical timing wheel over absolute milliseconds (1 ms tick).
//
// Eleven levels of 64 slots cover all 64-bit times. A job due at `t` sits on
// level L = (highest bit in which t and now() differ) / 6, in slot
// (t >> 6L) & 63; a job due at or before now() sits in the `due_` list.
// Invariant: for every job on level L, t and now() agree on all digits above
// L and differ on digit L. A per-level 64-bit occupancy mask finds the next
// occupied slot with one bit scan. Moving now() forward to the start of the
// lowest occupied slot keeps the invariant for every other slot; that slot is
// then cascaded to lower levels (or fired, on level 0).
//
// Insert and Remove are O(1); each job moves at most once per level.
// Thread: owned by the engine's thread.
#ifndef DELAYQ_CORE_TIMING_WHEEL_H_
#define DELAYQ_CORE_TIMING_WHEEL_H_

#include <array>
#include <cstddef>
#include <cstdint>

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

  // REQUIRES: j is in no list; j->due >= 0.
  void Insert(Job* j) {
    ++size_;
    Place(j);
  }

  // REQUIRES: j is in this wheel (its `due` unchanged since Insert).
  void Remove(Job* j) {
    --size_;
    Link* next = j->next;
    Link::Unlink(j);
    if (next->empty()) ClearBitOfSlot(next, static_cast<uint64_t>(j->due));
  }

  // The earliest time at which AdvanceTo can have work: exact when a job is
  // due within the current 64 ms, else the start of the next occupied slot.
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

  // Moves now() forward to `t` (no-op if t <= now()) and calls fire(Job*) for
  // every job whose due time is <= t, after unlinking it; jobs are fired in
  // order of due time (ties in no particular order). `fire` may not touch
  // the wheel.
  template <typename F>
  void AdvanceTo(TimeMs t, F&& fire) {
    uint64_t target = static_cast<uint64_t>(t);
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
    if (VisitList(&due_, visit, slot_done)) return;
    for (int level = 0; level < kLevels; ++level) {
      uint64_t mask = masks_[level];
      while (mask != 0) {
        int slot = __builtin_ctzll(mask);
        mask &= mask - 1;
        if (VisitList(&slots_[level][slot], visit, slot_done)) return;
      }
    }
  }

  // Whether a job is due at or before now() (AdvanceTo would fire it).
  bool HasDue() const { return !due_.empty(); }

  // Checks the placement invariant of every job; for tests.
  bool Valid() const {
    size_t n = 0;
    for (const Link* l = due_.next; l != &due_; l = l->next, ++n)
      if (static_cast<uint64_t>(Job::From(const_cast<Link*>(l))->due) > now_) return false;
    for (int level = 0; level < kLevels; ++level) {
      for (int slot = 0; slot < kSlots; ++slot) {
        const Link* head = &slots_[level][slot];
        if (head->empty() == (((masks_[level] >> slot) & 1) != 0)) return false;
        for (const Link* l = head->next; l != head; l = l->next, ++n) {
          uint64_t due = static_cast<uint64_t>(Job::From(const_cast<Link*>(l))->due);
          if (due <= now_ || LevelOf(due) != level || SlotOf(due, level) != slot) return false;
        }
      }
    }
    return n == size_;
  }

  size_t MemoryUsage() const { return sizeof(*this); }

 private:
  int LevelOf(uint64_t due) const {
    return (63 - __builtin_clzll(due ^ now_)) / kBits;
  }
  static int SlotOf(uint64_t due, int level) {
    return static_cast<int>((due >> (level * kBits)) & (kSlots - 1));
  }

  void Place(Job* j) {
    uint64_t due = static_cast<uint64_t>(j->due);
    if (due <= now_) {
      due_.PushBack(j);
      return;
    }
    int level = LevelOf(due);
    int slot = SlotOf(due, level);
    slots_[level][slot].PushBack(j);
    masks_[level] |= uint64_t{1} << slot;
  }

  void ClearBitOfSlot(Link* head, uint64_t due) {
    if (head == &due_ || due <= now_) return;
    int level = LevelOf(due);
    masks_[level] &= ~(uint64_t{1} << SlotOf(due, level));
  }

  template <typename F>
  void FireDue(F& fire) {
    while (!due_.empty()) {
      Job* j = Job::From(due_.next);
      __builtin_prefetch(j->next, 1, 3);
      Link::Unlink(j);
      --size_;
      fire(j);
    }
  }

  // now_ has just reached the start of the lowest occupied slot: move its
  // jobs down (those due exactly now go to due_). The list is detached
  // whole and walked with the next job prefetched, so the cache misses of
  // a long slot overlap instead of queueing one behind the other.
  void Cascade() {
    for (int level = 0; level < kLevels; ++level) {
      if (masks_[level] == 0) continue;
      int slot = __builtin_ctzll(masks_[level]);
      masks_[level] &= ~(uint64_t{1} << slot);
      Link* head = &slots_[level][slot];
      Link* l = head->next;
      head->prev->next = nullptr;  // terminate the detached chain
      head->prev = head->next = head;
      while (l != nullptr) {
        Link* next = l->next;
        if (next != nullptr) __builtin_prefetch(next, 1, 3);
        Place(Job::From(l));
        l = next;
      }
      return;
    }
  }

  template <typename F, typename G>
  static bool VisitList(const Link* head, F& visit, G& slot_done) {
    for (const Link* l = head->next; l != head; l = l->next) visit(Job::From(const_cast<Link*>(l)));
    return slot_done();
  }

  uint64_t now_;
  size_t size_ = 0;
  Link due_;
  std::array<uint64_t, kLevels> masks_{};
  std::array<std::array<Link, kSlots>, kLevels> slots_;
};

}  // namespace delayq::core

#endif  // DELAYQ_CORE_TIMING_WHEEL_H_

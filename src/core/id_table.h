// Map from job id to job: Robin Hood open addressing over 8-byte slots.
// A slot packs the job pointer (low 48 bits; user-space pointers fit) with
// its probe distance + 1 (high 16 bits; 0 = empty), so inserting, erasing
// (backward shift) and rejecting absent ids never read a job: only the one
// candidate whose home matches is dereferenced to compare ids.
//
// Home slot: ids go in groups of eight consecutive ids to one aligned block
// of eight slots (one cache line, so a burst of puts touches one line per
// eight jobs), and the blocks are spread by Fibonacci hashing of the group
// number (so the dense band of recent ids does not pile up in one region).
// About 8 bytes / load factor per job; grows at 7/8 full, shrinks below 1/16.
//
// Thread: owned by the engine's thread.
#ifndef DELAYQ_CORE_ID_TABLE_H_
#define DELAYQ_CORE_ID_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/job.h"

namespace delayq::core {

class IdTable {
 public:
  IdTable() { Rehash(kMinCapacity); }

  size_t size() const { return size_; }
  size_t capacity() const { return slots_.size(); }

  Job* Find(JobId id) const {
    size_t i = Home(id);
    for (uint64_t dist = 1;; ++dist, i = (i + 1) & mask_) {
      uint64_t s = slots_[i];
      // Robin Hood: once a slot is closer to its home than we are to ours,
      // the id is absent.
      if (Dist(s) < dist) return nullptr;
      if (Dist(s) == dist && Ptr(s)->id == id) return Ptr(s);
    }
  }

  // Starts loading the home slot of `id` into the cache: a job that becomes
  // ready is soon reserved and finished by id.
  void Prefetch(JobId id) const { __builtin_prefetch(&slots_[Home(id)], 0, 1); }

  // REQUIRES: no job with j->id is present.
  void Insert(Job* j) {
    if ((size_ + 1) * 8 > slots_.size() * 7) Rehash(slots_.size() * 2);
    Place(j);
    ++size_;
  }

  // Returns whether a job with that id was present.
  bool Erase(JobId id) {
    size_t i = Home(id);
    for (uint64_t dist = 1;; ++dist, i = (i + 1) & mask_) {
      uint64_t s = slots_[i];
      if (Dist(s) < dist) return false;
      if (Dist(s) == dist && Ptr(s)->id == id) break;
    }
    // Backward shift until an empty slot or one at its home.
    for (;;) {
      size_t next = (i + 1) & mask_;
      uint64_t s = slots_[next];
      if (Dist(s) <= 1) break;
      slots_[i] = s - (uint64_t{1} << kPtrBits);
      i = next;
    }
    slots_[i] = 0;
    --size_;
    if (slots_.size() > kMinCapacity && size_ * 16 < slots_.size()) Rehash(slots_.size() / 4);
    return true;
  }

  template <typename F>
  void ForEach(F&& f) const {
    for (uint64_t s : slots_)
      if (s != 0) f(Ptr(s));
  }

  size_t MemoryUsage() const { return slots_.capacity() * sizeof(uint64_t); }

 private:
  static constexpr size_t kMinCapacity = 1024;
  static constexpr int kPtrBits = 48;
  static constexpr uint64_t kPtrMask = (uint64_t{1} << kPtrBits) - 1;
  static constexpr uint64_t kMaxDist = 0xFFFF;

  static uint64_t Dist(uint64_t s) { return s >> kPtrBits; }
  static Job* Ptr(uint64_t s) { return reinterpret_cast<Job*>(s & kPtrMask); }

  size_t Home(JobId id) const {
    uint64_t block = ((id >> 3) * 0x9E3779B97F4A7C15ull) >> (64 - (bits_ - 3));
    return static_cast<size_t>((block << 3) | (id & 7));
  }

  void Place(Job* j) {
    uint64_t entry = reinterpret_cast<uint64_t>(j) | (uint64_t{1} << kPtrBits);
    size_t i = Home(j->id);
    for (;;) {
      uint64_t s = slots_[i];
      if (s == 0) {
        slots_[i] = entry;
        return;
      }
      if (Dist(s) < Dist(entry)) {  // take from the rich
        slots_[i] = entry;
        entry = s;
      }
      entry += uint64_t{1} << kPtrBits;
      if (Dist(entry) >= kMaxDist) {  // pathological clustering: spread out
        Job* carried = Ptr(entry);
        Rehash(slots_.size() * 2);
        Place(carried);
        return;
      }
      i = (i + 1) & mask_;
    }
  }

  void Rehash(size_t capacity) {
    std::vector<uint64_t> old;
    old.swap(slots_);
    slots_.assign(capacity, 0);
    mask_ = capacity - 1;
    bits_ = static_cast<unsigned>(__builtin_ctzll(capacity));
    for (uint64_t s : old)
      if (s != 0) Place(Ptr(s));
  }

  std::vector<uint64_t> slots_;
  size_t mask_ = 0;
  unsigned bits_ = 0;
  size_t size_ = 0;
};

}  // namespace delayq::core

#endif  // DELAYQ_CORE_ID_TABLE_H_

// Map from job id to job: open addressing with linear probing over job
// pointers (the id is read from the job), Fibonacci hashing, backward-shift
// deletion (no tombstones). About 8 bytes / load factor per job.
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
    for (size_t i = Home(id);; i = (i + 1) & mask_) {
      Job* j = slots_[i];
      if (j == nullptr) return nullptr;
      if (j->id == id) return j;
    }
  }

  // REQUIRES: no job with j->id is present.
  void Insert(Job* j) {
    if ((size_ + 1) * 4 > slots_.size() * 3) Rehash(slots_.size() * 2);
    Place(j);
    ++size_;
  }

  // Returns whether a job with that id was present.
  bool Erase(JobId id) {
    size_t i = Home(id);
    for (;; i = (i + 1) & mask_) {
      if (slots_[i] == nullptr) return false;
      if (slots_[i]->id == id) break;
    }
    // Backward-shift: pull later members of the probe run into the hole.
    for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      Job* m = slots_[j];
      if (m == nullptr) break;
      size_t home = Home(m->id);
      // m may move to i when i lies cyclically in [home, j).
      bool movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
      if (movable) {
        slots_[i] = m;
        i = j;
      }
    }
    slots_[i] = nullptr;
    --size_;
    if (slots_.size() > kMinCapacity && size_ * 16 < slots_.size()) Rehash(slots_.size() / 4);
    return true;
  }

  template <typename F>
  void ForEach(F&& f) const {
    for (Job* j : slots_)
      if (j != nullptr) f(j);
  }

  size_t MemoryUsage() const { return slots_.capacity() * sizeof(Job*); }

 private:
  static constexpr size_t kMinCapacity = 1024;

  size_t Home(JobId id) const {
    return static_cast<size_t>((id * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void Place(Job* j) {
    size_t i = Home(j->id);
    while (slots_[i] != nullptr) i = (i + 1) & mask_;
    slots_[i] = j;
  }
  void Rehash(size_t capacity) {
    std::vector<Job*> old;
    old.swap(slots_);
    slots_.assign(capacity, nullptr);
    mask_ = capacity - 1;
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(capacity));
    for (Job* j : old)
      if (j != nullptr) Place(j);
  }

  std::vector<Job*> slots_;
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t size_ = 0;
};

}  // namespace delayq::core

#endif  // DELAYQ_CORE_ID_TABLE_H_

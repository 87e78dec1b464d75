// A topic's ready jobs: a binary min-heap on (priority, id) that records each
// job's position in Job::pos, so any job can be removed in O(log n).
//
// Thread: owned by the engine's thread.
#ifndef DELAYQ_CORE_READY_QUEUE_H_
#define DELAYQ_CORE_READY_QUEUE_H_

#include <cstddef>
#include <vector>

#include "core/job.h"

namespace delayq::core {

inline bool ReadyBefore(const Job* a, const Job* b) {
  return a->priority != b->priority ? a->priority < b->priority : a->id < b->id;
}

class ReadyQueue {
 public:
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // REQUIRES: !empty().
  Job* top() const { return heap_.front(); }

  void Push(Job* j) {
    j->pos = static_cast<uint32_t>(heap_.size());
    heap_.push_back(j);
    SiftUp(j->pos);
  }

  // REQUIRES: j is in this queue.
  void Remove(Job* j) {
    size_t i = j->pos;
    Job* last = heap_.back();
    heap_.pop_back();
    if (last == j) return;
    heap_[i] = last;
    last->pos = static_cast<uint32_t>(i);
    if (i > 0 && ReadyBefore(last, heap_[(i - 1) / 2])) {
      SiftUp(i);
    } else {
      SiftDown(i);
    }
  }

  const std::vector<Job*>& jobs() const { return heap_; }
  size_t MemoryUsage() const { return heap_.capacity() * sizeof(Job*); }
  void ShrinkIfSparse() {
    if (heap_.capacity() > 4096 && heap_.size() * 16 < heap_.capacity()) heap_.shrink_to_fit();
  }

  // For invariant checks: heap order and positions.
  bool Valid() const {
    for (size_t i = 0; i < heap_.size(); ++i) {
      if (heap_[i]->pos != i) return false;
      if (i > 0 && ReadyBefore(heap_[i], heap_[(i - 1) / 2])) return false;
    }
    return true;
  }

 private:
  void SiftUp(size_t i) {
    Job* j = heap_[i];
    while (i > 0) {
      size_t p = (i - 1) / 2;
      if (!ReadyBefore(j, heap_[p])) break;
      heap_[i] = heap_[p];
      heap_[i]->pos = static_cast<uint32_t>(i);
      i = p;
    }
    heap_[i] = j;
    j->pos = static_cast<uint32_t>(i);
  }
  void SiftDown(size_t i) {
    Job* j = heap_[i];
    size_t n = heap_.size();
    for (;;) {
      size_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && ReadyBefore(heap_[c + 1], heap_[c])) ++c;
      if (!ReadyBefore(heap_[c], j)) break;
      heap_[i] = heap_[c];
      heap_[i]->pos = static_cast<uint32_t>(i);
      i = c;
    }
    heap_[i] = j;
    j->pos = static_cast<uint32_t>(i);
  }

  std::vector<Job*> heap_;
};

}  // namespace delayq::core

#endif  // DELAYQ_CORE_READY_QUEUE_H_

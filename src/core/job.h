// A live job: one allocation holding the header, then the key bytes, then
// the body bytes. The header's links put the job in exactly one place at a
// time, by state:
//   ready    -> its topic's ReadyQueue (pos = heap index)
//   delayed  -> the TimingWheel, keyed by `due` (wpos = index in its slot),
//               and its topic's delayed list (intrusive, unordered)
//   reserved -> the TimingWheel, keyed by `due` (= TTR deadline), its
//               topic's reserved list (intrusive, unordered), and its
//               reserver's list (pos = index in Session::reserved)
//   buried   -> its topic's buried list (intrusive, oldest first)
#ifndef DELAYQ_CORE_JOB_H_
#define DELAYQ_CORE_JOB_H_

#include <cstdint>
#include <cstring>
#include <new>
#include <string_view>

#include "delayq/types.h"

namespace delayq::core {

struct Topic;
struct Session;
struct Job;

// Doubly linked circular list node; a list is a sentinel Link.
struct Link {
  Link* prev = this;
  Link* next = this;

  bool empty() const { return next == this; }
  void PushBack(Link* n) {
    n->prev = prev;
    n->next = this;
    prev->next = n;
    prev = n;
  }
  static void Unlink(Link* n) {
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
  }
};

struct Job : Link {
  JobId id = 0;
  // delayed: due time; reserved: TTR deadline; ready: when it became
  // ready (the metrics' wait before a reserve)
  TimeMs due = 0;
  TimeMs created = 0;
  TimeMs delay = 0;  // the delay last asked for
  TimeMs ttr = 0;
  Topic* topic = nullptr;
  Session* reserver = nullptr;  // reserved by; null when detached or not reserved
  uint64_t lease = 0;           // the last reservation's lease (docs/engine.md, "Leases")
  uint32_t priority = 0;
  uint32_t pos = 0;
  uint32_t wpos = 0;  // index in its timing-wheel slot
  uint32_t reserves = 0, timeouts = 0, releases = 0, buries = 0, kicks = 0;
  uint32_t max_tries = 0;
  uint32_t backoff = 0;  // interned policy, 0: none
  uint32_t body_size = 0;
  uint16_t key_size = 0;
  JobState state = JobState::kReady;
  bool named = false;  // the key is also its name (Engine's names_)

  std::string_view key() const { return {data(), key_size}; }
  std::string_view body() const { return {data() + key_size, body_size}; }
  // The key, then the body, follow the header (JobPool::Create).
  char* data() { return reinterpret_cast<char*>(this + 1); }

  static Job* From(Link* l) { return static_cast<Job*>(l); }

 private:
  const char* data() const { return reinterpret_cast<const char*>(this + 1); }
};

static_assert(sizeof(Job) <= 128, "a pending job's header must stay small");

// Recycles job blocks by size class (16-byte steps up to 1 KiB), LIFO, so
// the put/delete churn of a queue reuses warm blocks instead of making the
// allocator coalesce and split. Holds at most kMaxCachedBytes of free blocks.
class JobPool {
 public:
  JobPool() = default;
  JobPool(const JobPool&) = delete;
  JobPool& operator=(const JobPool&) = delete;
  ~JobPool() {
    for (FreeBlock*& head : free_) {
      while (head != nullptr) {
        FreeBlock* next = head->next;
        ::operator delete(head);
        head = next;
      }
    }
  }

  Job* Create(std::string_view key, std::string_view body) {
    size_t size = sizeof(Job) + key.size() + body.size();
    size_t cls = Class(size);
    void* mem;
    if (cls < kClasses && free_[cls] != nullptr) {
      FreeBlock* b = free_[cls];
      free_[cls] = b->next;
      cached_bytes_ -= BlockBytes(cls);
      mem = b;
    } else {
      mem = ::operator new(cls < kClasses ? BlockBytes(cls) : size);
    }
    Job* j = new (mem) Job();
    j->key_size = static_cast<uint16_t>(key.size());
    j->body_size = static_cast<uint32_t>(body.size());
    if (!key.empty()) std::memcpy(j->data(), key.data(), key.size());
    if (!body.empty()) std::memcpy(j->data() + key.size(), body.data(), body.size());
    return j;
  }

  void Destroy(Job* j) {
    size_t cls = Class(sizeof(Job) + j->key_size + j->body_size);
    j->~Job();
    if (cls < kClasses && cached_bytes_ + BlockBytes(cls) <= kMaxCachedBytes) {
      FreeBlock* b = reinterpret_cast<FreeBlock*>(j);
      b->next = free_[cls];
      free_[cls] = b;
      cached_bytes_ += BlockBytes(cls);
    } else {
      ::operator delete(j);
    }
  }

  size_t cached_bytes() const { return cached_bytes_; }

 private:
  static constexpr size_t kStep = 16;
  static constexpr size_t kClasses = 1024 / kStep;
  static constexpr size_t kMaxCachedBytes = 4 << 20;
  struct FreeBlock {
    FreeBlock* next;
  };
  // glibc hands out chunks of 16k bytes holding 16k - 8 usable ones: a
  // class is sized to fill its chunk exactly.
  static size_t Class(size_t size) { return (size + 8 + kStep - 1) / kStep - 1; }
  static size_t BlockBytes(size_t cls) { return (cls + 1) * kStep - 8; }

  FreeBlock* free_[kClasses] = {};
  size_t cached_bytes_ = 0;
};

}  // namespace delayq::core

#endif  // DELAYQ_CORE_JOB_H_

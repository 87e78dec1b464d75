// A live job: one allocation holding the header, then the key bytes, then
// the body bytes. The header's links put the job in exactly one place at a
// time, by state:
//   ready    -> its topic's ReadyQueue (pos = heap index)
//   delayed  -> the TimingWheel, keyed by `due`
//   reserved -> the TimingWheel, keyed by `due` (= TTR deadline), and its
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
  TimeMs due = 0;       // delayed: due time; reserved: TTR deadline
  TimeMs created = 0;
  TimeMs delay = 0;     // the delay last asked for
  TimeMs ttr = 0;
  Topic* topic = nullptr;
  Session* reserver = nullptr;  // reserved by; null when detached or not reserved
  uint32_t priority = 0;
  uint32_t pos = 0;
  uint32_t reserves = 0, timeouts = 0, releases = 0, buries = 0, kicks = 0;
  uint32_t max_tries = 0;
  uint32_t backoff = 0;  // interned policy, 0: none
  uint32_t body_size = 0;
  uint16_t key_size = 0;
  JobState state = JobState::kReady;

  std::string_view key() const { return {data(), key_size}; }
  std::string_view body() const { return {data() + key_size, body_size}; }

  // REQUIRES: key.size() <= kMaxKeyLength, body.size() < 4 GiB.
  static Job* Create(std::string_view key, std::string_view body) {
    void* mem = ::operator new(sizeof(Job) + key.size() + body.size());
    Job* j = new (mem) Job();
    j->key_size = static_cast<uint16_t>(key.size());
    j->body_size = static_cast<uint32_t>(body.size());
    if (!key.empty()) std::memcpy(j->data(), key.data(), key.size());
    if (!body.empty()) std::memcpy(j->data() + key.size(), body.data(), body.size());
    return j;
  }
  static void Destroy(Job* j) {
    j->~Job();
    ::operator delete(j);
  }
  static Job* From(Link* l) { return static_cast<Job*>(l); }

 private:
  char* data() { return reinterpret_cast<char*>(this + 1); }
  const char* data() const { return reinterpret_cast<const char*>(this + 1); }
};

static_assert(sizeof(Job) <= 128, "a pending job's header must stay small");

}  // namespace delayq::core

#endif  // DELAYQ_CORE_JOB_H_

// The Redis backend's private header, for its own .cc files only
// (redis_backend.h declares the class): what several of them share. Reading
// hiredis replies, a job's member and its topic's number, a call's
// arguments in RESP, and the member templates that more than one file
// instantiates (Guard, TopicByNumber, ForJob).
//
// The class RedisBackend is defined across these files:
//   redis_backend.cc  construction, sessions, the operations (Put, Delete,
//                     Release, ..., the calls by name), peek, pause, clear
//   redis_topics.cc   the topic table and the registry of topic numbers
//   redis_calls.cc    the call pipeline: a topic's calls batched, the
//                     FCALL written, the reply handed back
//   redis_waiters.cc  reserving: reserves, waiting reserves and their
//                     wake-ups, the timers (due ticks, the sweep)
//   redis_stats.cc    job and topic stats, the list of topics
#ifndef DELAYQ_BACKEND_REDIS_BACKEND_INTERNAL_H_
#define DELAYQ_BACKEND_REDIS_BACKEND_INTERNAL_H_

#include <hiredis/hiredis.h>

#include <charconv>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "backend/redis_backend.h"
#include "backend/resp.h"
#include "delayq/engine.h"

namespace delayq::backend {

namespace redis_internal {

using redis::Script;

constexpr JobId kSeqMask = (JobId{1} << RedisBackend::kSeqBits) - 1;

inline std::string_view Str(const redisReply* r) {
  if (r == nullptr || r->str == nullptr) return {};
  return std::string_view(r->str, r->len);
}

inline int64_t Int(const redisReply* r) {
  if (r == nullptr) return 0;
  if (r->type == REDIS_REPLY_INTEGER) return r->integer;
  int64_t v = 0;
  std::string_view s = Str(r);
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

inline const redisReply* At(const redisReply* r, size_t i) {
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || i >= r->elements) return nullptr;
  return r->element[i];
}

inline size_t Size(const redisReply* r) {
  return r != nullptr && r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
}

inline JobState StateOf(std::string_view s) {
  if (s == "d") return JobState::kDelayed;
  if (s == "u") return JobState::kReserved;
  if (s == "b") return JobState::kBuried;
  return JobState::kReady;
}

// A job's member: its sequence number in its topic, 13 digits.
inline std::string Member(JobId id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%013llu", static_cast<unsigned long long>(id & kSeqMask));
  return buf;
}

// The number of a job's topic: a call naming the job by member carries it
// (RedisBackend::Run), so that a job of an incarnation that has ended is
// not taken for one of a later incarnation with the same member.
inline int64_t NoOf(JobId id) { return static_cast<int64_t>(id >> RedisBackend::kSeqBits); }

inline Status Unexpected(std::string_view what) {
  return Status::Internal("redis: unexpected reply to " + std::string(what));
}

inline JobId JobIdOf(int64_t topic_no, std::string_view member) {
  JobId seq = 0;
  std::from_chars(member.data(), member.data() + member.size(), seq);
  return (static_cast<uint64_t>(topic_no) << RedisBackend::kSeqBits) | seq;
}

// A call's arguments in RESP (RedisBackend::Topic::Call).
template <typename Range>
std::string RespArgs(const Range& args) {
  std::string out;
  out.reserve(resp::BulksSize(args));
  resp::AppendBulks(out, args);
  return out;
}

}  // namespace redis_internal

// The backend's files use these unqualified, as when they were one file.
using namespace redis_internal;  // NOLINT(build/namespaces)

template <typename F>
F RedisBackend::Guard(SessionId sid, F done) {
  if (sid == 0) return done;
  std::weak_ptr<bool> alive = alive_;
  return [this, alive, sid, done = std::move(done)](auto&&... args) {
    if (alive.expired() || sessions_.count(sid) == 0) return;
    done(std::forward<decltype(args)>(args)...);
  };
}

template <typename F>
void RedisBackend::TopicByNumber(uint64_t no, F&& then) {
  if (auto it = by_number_.find(no); it != by_number_.end()) return then(Status::Ok(), it->second);
  std::string n = std::to_string(no);
  router_->Command(registry_numbers_, {"HGET", registry_numbers_, n},
                   [this, no, then = std::forward<F>(then)](const redisReply* r) mutable {
                     if (r == nullptr)
                       return then(Status::Unavailable("redis: not connected"), nullptr);
                     if (r->type == REDIS_REPLY_NIL) return then(Status::Ok(), nullptr);
                     if (r->type != REDIS_REPLY_STRING) return then(Unexpected("HGET"), nullptr);
                     Topic& t = GetTopic(std::string(Str(r)));
                     MapNumber(no, t);
                     then(Status::Ok(), &t);
                   });
}

template <typename F>
void RedisBackend::ForJob(JobId id, F&& then) {
  JobId seq = id & kSeqMask;
  if (seq == 0) return then(Status::Ok(), nullptr, std::string());
  TopicByNumber(id >> kSeqBits, [id, then = std::forward<F>(then)](Status st, Topic* t) mutable {
    then(st, t, Member(id));
  });
}

}  // namespace delayq::backend

#endif  // DELAYQ_BACKEND_REDIS_BACKEND_INTERNAL_H_

// The Redis backend's topics (redis_backend.h): the table of the topics
// this instance knows (GetTopic, DropUnused), their numbers (by_number_),
// what a topic's reply says of it (NoteAnswer), and the registry of topic
// numbers in Redis (RegisterFor, RefreshRegistry, ScanRegistry;
// docs/redis-backend.md, "Topics come and go").
#include <hiredis/hiredis.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/redis_backend.h"
#include "backend/redis_backend_internal.h"

namespace delayq::backend {

// ---- topics ----------------------------------------------------------------

bool RedisBackend::LocallyKnown(const std::string& name) const {
  auto it = topics_.find(name);
  return name == "default" ||
         (it != topics_.end() && (it->second->using_count > 0 || it->second->watching > 0));
}

Status RedisBackend::RoomForTopic(std::string_view name) const {
  if (options_.max_topics == 0 || topics_.size() < options_.max_topics ||
      topics_.count(std::string(name)) > 0)
    return Status::Ok();
  return Status::ResourceExhausted("too many topics: this instance holds " +
                                   std::to_string(topics_.size()) + " (--max-topics)");
}

RedisBackend::Topic& RedisBackend::GetTopic(const std::string& name) {
  auto it = topics_.find(name);
  if (it != topics_.end()) return *it->second;
  auto t = std::make_unique<Topic>();
  t->name = name;
  t->prefix = "dq:{" + name + "}:";
  t->local_seq = next_topic_seq_++;
  for (const char* k : {"ready", "delayed", "reserved", "buried", "keys", "topic"})
    t->keys.push_back(t->prefix + k);
  Topic& ref = *t;
  topics_.emplace(name, std::move(t));
  if (name == "default") {
    // Number 0 without asking the registry: the default topic's ids are
    // then 1, 2, 3... as beanstalkd's are.
    ref.no = 0;
    ref.live = true;
    MapNumber(0, ref);
  }
  return ref;
}

void RedisBackend::SetNumber(Topic& t, int64_t no) {
  if (t.name == "default" || t.no == no) return;
  t.no = no;
  if (no < 0) return;
  MapNumber(static_cast<uint64_t>(no), t);
  t.fresh = 0;
  t.fresh_tries = 0;
}

void RedisBackend::RegisterFor(Topic& t, std::vector<Topic::Call> calls, uint64_t tried) {
  for (Topic::Call& c : calls) t.need_number.push_back(std::move(c));
  // A number registered since those calls left: they take it.
  if (t.fresh != tried || t.no >= 0) {
    for (Topic::Call& c : t.need_number) Enqueue(t, std::move(c));
    t.need_number.clear();
    return;
  }
  if (t.registering) return;
  Topic* tp = &t;
  auto fail = [tp](Status st) {
    auto waiting = std::move(tp->need_number);
    tp->need_number.clear();
    for (Topic::Call& c : waiting) c.done(st, nullptr);
  };
  // A number a tombstone refused (RETIRED_TTL) is followed by a newer one;
  // a few in a row and the calls fail.
  if (++t.fresh_tries > 3) {
    t.fresh_tries = 0;
    return fail(Status::Unavailable("redis: the topic registry gave no usable number"));
  }
  t.registering = true;
  const std::string max_topics = std::to_string(options_.max_topics);
  RunRaw(Script::kRegister, {registry_names_, registry_numbers_}, {t.name, max_topics},
         [this, tp, fail](Status st, const redisReply* r) {
           tp->registering = false;
           if (st.code() == Code::kInternal &&
               st.message().find("TOPICS delayq") != std::string::npos) {
             st = Status::ResourceExhausted("too many topics: the Redis registry holds " +
                                            std::to_string(options_.max_topics) +
                                            " with jobs or a pause (--max-topics)");
           }
           if (st.ok() && (r->type != REDIS_REPLY_INTEGER || r->integer <= 0))
             st = Unexpected("the topic registry");
           if (!st.ok()) return fail(st);
           uint64_t no = static_cast<uint64_t>(r->integer);
           tp->fresh = no;
           tp->fresh_at = Now();
           registry_.emplace(no, Registered{tp->name, Now()});
           MapNumber(no, *tp);
           auto waiting = std::move(tp->need_number);
           tp->need_number.clear();
           for (Topic::Call& c : waiting) Enqueue(*tp, std::move(c));
         });
}

void RedisBackend::MapNumber(uint64_t no, Topic& t) {
  // A number names one topic for good: an entry is never moved.
  if (by_number_.try_emplace(no, &t).second) t.numbers.push_back(no);
}

void RedisBackend::UnmapNumber(uint64_t no) {
  auto it = by_number_.find(no);
  if (it == by_number_.end()) return;
  std::vector<uint64_t>& v = it->second->numbers;
  v.erase(std::remove(v.begin(), v.end(), no), v.end());
  by_number_.erase(it);
}

void RedisBackend::DropUnused() {
  for (auto it = topics_.begin(); it != topics_.end();) {
    // (An idle incarnation's number, and the others by_number_ has for the
    // topic, are looked up again when a reply or an id names them.)
    const Topic& t = *it->second;
    bool unused = t.name != "default" && t.using_count == 0 && t.watching == 0 &&
                  t.waiters.empty() && !t.subscribed && t.batch.empty() && t.need_number.empty() &&
                  !t.flush_posted && t.in_flight == 0 && !t.registering && !t.serving &&
                  t.wake == kNever && !t.live && t.fresh == 0 && t.pins == 0;
    if (!unused) {
      ++it;
      continue;
    }
    for (uint64_t no : t.numbers) by_number_.erase(no);
    it = topics_.erase(it);
  }
}

void RedisBackend::NoteAnswer(Topic& t, int64_t no, int64_t next_wake) {
  SetNumber(t, no);
  // (ms from now, as Redis's clock sees it; -2: idle)
  t.live = next_wake != -2 || t.name == "default";
  NoteWake(t, next_wake < 0 ? kNever : Now() + next_wake);
}

// ---- registry --------------------------------------------------------------

void RedisBackend::RefreshRegistry(std::function<void()> then) {
  // The counter of numbers first: the numbers above the one last read are
  // new (registered since). On the first read, the whole registry.
  router_->Command(
      registry_names_, {"HGET", registry_names_, " next"}, [this, then](const redisReply* r) {
        if (r == nullptr || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL))
          return then();
        uint64_t next = static_cast<uint64_t>(Int(r));
        auto add = [this](uint64_t no, std::string_view name) {
          if (name.empty() || registry_.count(no)) return;
          registry_.emplace(no, Registered{std::string(name), Now()});
          Topic& t = GetTopic(std::string(name));
          MapNumber(no, t);
          // Ticked by the next sweep, which tells whether it is live.
          if (t.no < 0) t.live = true;
        };
        if (!registry_loaded_) {
          return router_->Command(registry_numbers_, {"HGETALL", registry_numbers_},
                                  [this, next, add, then](const redisReply* r) {
                                    if (r == nullptr || r->type != REDIS_REPLY_ARRAY) return then();
                                    for (size_t i = 0; i + 1 < Size(r); i += 2)
                                      add(static_cast<uint64_t>(Int(At(r, i))), Str(At(r, i + 1)));
                                    registry_loaded_ = true;
                                    registry_seen_ = next;
                                    then();
                                  });
        }
        if (next <= registry_seen_) return then();
        uint64_t last = std::min(next, registry_seen_ + 1000);
        std::vector<std::string> argv{"HMGET", registry_numbers_};
        for (uint64_t no = registry_seen_ + 1; no <= last; ++no) argv.push_back(std::to_string(no));
        std::vector<std::string_view> views(argv.begin(), argv.end());
        router_->Command(registry_numbers_, views,
                         [this, first = registry_seen_ + 1, last, add, then](const redisReply* r) {
                           if (r == nullptr || r->type != REDIS_REPLY_ARRAY) return then();
                           for (size_t i = 0; i < Size(r); ++i) add(first + i, Str(At(r, i)));
                           registry_seen_ = std::max(registry_seen_, last);
                           then();
                         });
      });
}

void RedisBackend::ScanRegistry() {
  // A few numbers per sweep, round the registry: the scan's cost per sweep
  // is bounded, however many topics are idle.
  constexpr size_t kPerSweep = 16;
  TimeMs now = Now();
  // A number is looked at once its registration is a while old, so that a
  // call that carries it has long landed.
  TimeMs age = std::min<TimeMs>(options_.topic_idle_ms, 60'000);
  auto it = registry_.upper_bound(scan_cursor_);
  size_t count = std::min(kPerSweep, registry_.size());
  for (size_t n = 0; n < count; ++n) {
    if (it == registry_.end()) it = registry_.begin();
    uint64_t no = it->first;
    scan_cursor_ = no;
    bool old_enough = now - it->second.seen >= age;
    Topic* tp = &GetTopic(it->second.name);
    ++it;
    if (!old_enough) continue;
    Run(Script::kRetire, *tp, {std::to_string(no), std::to_string(options_.topic_idle_ms)},
        [this, no](Status st, const redisReply* r) {
          if (!st.ok() || Int(r) != 1) return;
          std::string n = std::to_string(no);
          router_->Command(registry_numbers_, {"HDEL", registry_numbers_, n},
                           [this, no](const redisReply* r) {
                             if (r == nullptr || r->type != REDIS_REPLY_INTEGER) return;
                             registry_.erase(no);
                             if (auto b = by_number_.find(no);
                                 b != by_number_.end() && b->second->no != static_cast<int64_t>(no))
                               UnmapNumber(no);
                           });
        });
  }
}

}  // namespace delayq::backend

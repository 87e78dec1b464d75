// The Redis backend's stats (redis_backend.h): a job's (StatsJob), a
// topic's (StatsTopic), the instance's (Stats), and the list of topics
// (ListTopics), the last two over every topic of the registry
// (TopicCounts).
#include <hiredis/hiredis.h>

#include <algorithm>
#include <memory>
#include <tuple>

#include "backend/redis_backend.h"
#include "backend/redis_backend_internal.h"
#include "delayq/engine.h"

namespace delayq::backend {

namespace {

TopicStats ParseTopicStats(const std::string& name, const redisReply* r) {
  TopicStats ts;
  ts.name = name;
  ts.ready = static_cast<uint64_t>(Int(At(r, 0)));
  ts.urgent = static_cast<uint64_t>(Int(At(r, 1)));
  ts.reserved = static_cast<uint64_t>(Int(At(r, 2)));
  ts.delayed = static_cast<uint64_t>(Int(At(r, 3)));
  ts.buried = static_cast<uint64_t>(Int(At(r, 4)));
  ts.total_jobs = static_cast<uint64_t>(Int(At(r, 5)));
  ts.cmd_delete = static_cast<uint64_t>(Int(At(r, 6)));
  ts.cmd_pause = static_cast<uint64_t>(Int(At(r, 7)));
  ts.pause_ms = Int(At(r, 8));
  TimeMs until = Int(At(r, 9)), now = Int(At(r, 11));
  ts.pause_time_left_ms = until > now ? until - now : 0;
  return ts;
}

uint64_t JobsIn(const TopicStats& t) { return t.ready + t.reserved + t.delayed + t.buried; }

// Whether a topic of the registry exists as beanstalkd's tubes do: it holds
// jobs, or a session uses or watches it, or it is "default".
bool TopicExists(const TopicStats& t) {
  return JobsIn(t) > 0 || t.using_count > 0 || t.watching > 0 || t.name == "default";
}

}  // namespace

// ---- stats -----------------------------------------------------------------

void RedisBackend::StatsJob(JobId id, Callback<JobStats> done) {
  ForJob(id, [this, id, done](Status st, Topic* t, std::string member) {
    if (!st.ok()) return done(st);
    if (t == nullptr) return done(Status::NotFound());
    Run(Script::kStatsJob, *t, NoOf(id), {member}, [t, id, done](Status st, const redisReply* r) {
      if (!st.ok()) return done(st);
      if (Size(r) < 3) return done(Status::NotFound());
      TimeMs now = Int(At(r, 0));
      // Fields at their defaults are not stored (docs/redis-backend.md).
      JobStats js;
      js.id = id;
      js.topic = t->name;
      TimeMs due = 0;
      for (size_t i = 1; i + 1 < Size(r); i += 2) {
        std::string_view f = Str(At(r, i));
        const redisReply* v = At(r, i + 1);
        if (f == "k")
          js.key = std::string(Str(v));
        else if (f == "b")
          js.body_size = static_cast<uint32_t>(Str(v).size());
        else if (f == "s")
          js.state = StateOf(Str(v));
        else if (f == "p")
          js.priority = static_cast<uint32_t>(Int(v));
        else if (f == "due")
          due = Int(v);
        else if (f == "c")
          js.created_ms = Int(v);
        else if (f == "dl")
          js.delay_ms = Int(v);
        else if (f == "ttr")
          js.ttr_ms = Int(v);
        else if (f == "rs")
          js.reserves = static_cast<uint32_t>(Int(v));
        else if (f == "to")
          js.timeouts = static_cast<uint32_t>(Int(v));
        else if (f == "rl")
          js.releases = static_cast<uint32_t>(Int(v));
        else if (f == "bu")
          js.buries = static_cast<uint32_t>(Int(v));
        else if (f == "ki")
          js.kicks = static_cast<uint32_t>(Int(v));
        else if (f == "mt")
          js.max_tries = static_cast<uint32_t>(Int(v));
      }
      js.age_ms = std::max<TimeMs>(0, now - js.created_ms);
      bool timed = js.state == JobState::kDelayed || js.state == JobState::kReserved;
      js.due_ms = timed ? due : 0;
      js.time_left_ms = timed ? std::max<TimeMs>(0, due - now) : 0;
      done(js);
    });
  });
}

void RedisBackend::TopicCounts(
    std::function<void(Status, std::vector<std::pair<Topic*, TopicStats>>)> done) {
  RefreshRegistry([this, done] {
    auto out = std::make_shared<std::vector<std::pair<Topic*, TopicStats>>>();
    auto failed = std::make_shared<Status>();
    // Those with an incarnation (a job or a pause, or idle for less than
    // topic_idle_ms: their counts of puts go on) as the last reply told,
    // and those sessions here use or watch.
    // They stay until every answer is in (DropUnused).
    std::vector<Topic*> registered, pinned;
    for (auto& [name, t] : topics_) {
      if (t->live || t->no >= 0) {
        registered.push_back(t.get());
      } else if (LocallyKnown(name)) {
        TopicStats ts;
        ts.name = name;
        out->emplace_back(t.get(), ts);
      } else {
        continue;
      }
      t->pins++;
      pinned.push_back(t.get());
    }
    auto remaining = std::make_shared<size_t>(registered.size());
    auto finish = [this, out, failed, done, pinned] {
      for (Topic* t : pinned) t->pins--;
      for (auto& [t, ts] : *out) {
        ts.using_count = t->using_count;
        ts.watching = t->watching;
        uint64_t waiting = 0;
        for (const auto& [sid, s] : sessions_)
          if (s.waiting &&
              std::find(s.watched.begin(), s.watched.end(), t->name) != s.watched.end())
            waiting++;
        ts.waiting = waiting;
      }
      std::sort(out->begin(), out->end(), [](const auto& a, const auto& b) {
        auto rank = [](const Topic* t) {
          return std::make_tuple(t->name != "default", t->no < 0,
                                 t->no >= 0 ? static_cast<uint64_t>(t->no) : t->local_seq);
        };
        return rank(a.first) < rank(b.first);
      });
      done(*failed, std::move(*out));
    };
    if (registered.empty()) return finish();
    for (Topic* t : registered) {
      Run(Script::kStatsTopic, *t, {},
          [t, out, failed, remaining, finish](Status st, const redisReply* r) {
            if (!st.ok()) {
              *failed = st;
            } else {
              out->emplace_back(t, ParseTopicStats(t->name, r));
              t->timeouts = static_cast<uint64_t>(Int(At(r, 10)));
            }
            if (--*remaining == 0) finish();
          });
    }
  });
}

void RedisBackend::StatsTopic(std::string_view topic, Callback<TopicStats> done) {
  std::string name(topic);
  auto local = [this, name]() { return LocallyKnown(name); };
  if (!IsValidTopicName(name)) return done(Status::NotFound());
  Topic* t = &GetTopic(name);
  {
    auto fill_local = [this, name](TopicStats& ts) {
      Topic& lt = GetTopic(name);
      ts.using_count = lt.using_count;
      ts.watching = lt.watching;
      for (const auto& [sid, s] : sessions_)
        if (s.waiting && std::find(s.watched.begin(), s.watched.end(), name) != s.watched.end())
          ts.waiting++;
    };
    Run(Script::kStatsTopic, *t, {}, [t, local, fill_local, done](Status st, const redisReply* r) {
      if (!st.ok()) return done(st);
      TopicStats ts = ParseTopicStats(t->name, r);
      fill_local(ts);
      if (JobsIn(ts) == 0 && !t->live && !local()) return done(Status::NotFound());
      done(ts);
    });
  }
}

void RedisBackend::Stats(Callback<EngineStats> done) {
  TopicCounts([this, done](Status st, std::vector<std::pair<Topic*, TopicStats>> all) {
    if (!st.ok()) return done(st);
    EngineStats es;
    for (const auto& [t, ts] : all) {
      if (TopicExists(ts)) es.topics++;
      es.urgent += ts.urgent;
      es.ready += ts.ready;
      es.reserved += ts.reserved;
      es.delayed += ts.delayed;
      es.buried += ts.buried;
      es.total_jobs += ts.total_jobs;
      es.job_timeouts += t->timeouts;
    }
    es.sessions = sessions_.size();
    for (const auto& [sid, s] : sessions_)
      if (s.waiting) es.waiting++;
    done(es);
  });
}

void RedisBackend::TopicsStats(Callback<std::vector<TopicStats>> done) {
  TopicCounts([done](Status st, std::vector<std::pair<Topic*, TopicStats>> all) {
    if (!st.ok()) return done(st);
    std::vector<TopicStats> out;
    out.reserve(all.size());
    for (auto& [t, ts] : all)
      if (TopicExists(ts)) out.push_back(std::move(ts));
    done(std::move(out));
  });
}

void RedisBackend::ListTopics(Callback<std::vector<std::string>> done) {
  TopicsStats([done](Result<std::vector<TopicStats>> r) {
    if (!r.ok()) return done(r.status());
    std::vector<std::string> names;
    names.reserve(r->size());
    for (TopicStats& ts : r.value()) names.push_back(std::move(ts.name));
    done(std::move(names));
  });
}

}  // namespace delayq::backend

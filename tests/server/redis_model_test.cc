// The Redis backend against the reference implementation of docs/engine.md
// (tests/core/reference_engine.h), in virtual time: the rules that depend on
// time, which the differential tests against the Local backend
// (redis_backend_test.cc) leave out because they run in real time. Delays
// falling due, TTR expiry with back-off and max_tries, touch, release with a
// delay, pause and its end, DEADLINE_SOON of a reserve that finds nothing,
// sessions closing; with keys, priorities, bury and kick, peeks and stats.
//
// The backend runs its functions on a manual clock that the test sets
// (RedisBackend::Options::time_from_clock). Between two operations virtual
// time moves on by a random amount, and it stops at every instant at which
// the reference has something to do: there one Stats call, which calls every
// topic's function, applies on Redis what fell due (as the backend's wake
// timer does in production), and the two sides' Stats are compared. The
// manual clock starts in 2096, far beyond the steady clock's reach, so the
// backend's own timers never fire during the test, and the sweep is set to
// an hour: every call to Redis is the test's. Reserves never wait (timeout 0).
//
// Each reply is compared as text, with job ids named by put order (#0 is the
// first job created).
//
// Environment:
//   DELAYQ_REDIS_MODEL_OPS   operations (default 3000)
//   DELAYQ_REDIS_MODEL_SEED  seed (default fixed); printed on a failure
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/redis_backend.h"
#include "core/reference_engine.h"
#include "server/io_wait.h"
#include "server/redis_backend_start.h"
#include "server/redis_process.h"

namespace delayq::backend {
namespace {

using std::chrono::milliseconds;
using testing::Ch;
using testing::RedisProcess;
using testing::ReferenceEngine;

// 2096-10-02: beyond the steady clock's reach for the test's lifetime.
constexpr TimeMs kStart = 4'000'000'000'000;
// A job id that no put hands out, on either side.
constexpr JobId kNoJob = 1'000'000;

class ModelClock : public Clock {
 public:
  TimeUs NowUs() const override { return now_us_; }
  void Set(TimeMs t) { now_us_ = t * 1000; }
  void SetUs(TimeUs t) { now_us_ = t; }

 private:
  TimeUs now_us_ = kStart * 1000;
};

// A job as a reply carried it (the views die with the call).
struct Owned {
  JobId id = 0;
  std::string topic, key, body;
  JobState state = JobState::kReady;
  uint32_t priority = 0;
  std::string lease;  // not compared: each backend words its own
};

using NameFn = std::function<std::string(JobId)>;

// A fault (not a rule's answer) with its message.
std::string Text(const Status& st) {
  if (st.code() == Code::kInternal) return st.ToString();
  return std::string(CodeName(st.code()));
}

std::string Text(const Owned& j, const NameFn& name) {
  return name(j.id) + "/" + j.topic + "/" + j.key + "/" + j.body + "/" +
         std::string(JobStateName(j.state)) + "/" + std::to_string(j.priority);
}

std::string Text(const JobView& v, const NameFn& name) {
  return Text(Owned{v.id,
                    std::string(v.topic),
                    std::string(v.key),
                    std::string(v.body),
                    v.state,
                    v.priority,
                    {}},
              name);
}

std::string Text(const Status& st, const std::vector<Owned>& jobs, const NameFn& name) {
  if (!st.ok()) return Text(st);
  std::string out = "jobs";
  for (const Owned& j : jobs) out += " " + Text(j, name);
  return out;
}

std::string Text(const JobStats& s, const NameFn& name) {
  return name(s.id) + " " + s.topic + " key=" + s.key + " " + std::string(JobStateName(s.state)) +
         " pri=" + std::to_string(s.priority) + " created=" + std::to_string(s.created_ms) +
         " age=" + std::to_string(s.age_ms) + " delay=" + std::to_string(s.delay_ms) +
         " ttr=" + std::to_string(s.ttr_ms) + " left=" + std::to_string(s.time_left_ms) +
         " due=" + std::to_string(s.due_ms) + " counts=" + std::to_string(s.reserves) + "," +
         std::to_string(s.timeouts) + "," + std::to_string(s.releases) + "," +
         std::to_string(s.buries) + "," + std::to_string(s.kicks) +
         " max_tries=" + std::to_string(s.max_tries) + " size=" + std::to_string(s.body_size);
}

std::string Text(const TopicStats& s) {
  return s.name + " urgent=" + std::to_string(s.urgent) + " ready=" + std::to_string(s.ready) +
         " reserved=" + std::to_string(s.reserved) + " delayed=" + std::to_string(s.delayed) +
         " buried=" + std::to_string(s.buried) + " total=" + std::to_string(s.total_jobs) +
         " using=" + std::to_string(s.using_count) + " watching=" + std::to_string(s.watching) +
         " waiting=" + std::to_string(s.waiting) + " deletes=" + std::to_string(s.cmd_delete) +
         " pauses=" + std::to_string(s.cmd_pause) + " pause=" + std::to_string(s.pause_ms) +
         " pause_left=" + std::to_string(s.pause_time_left_ms);
}

// All but next_id: the Redis backend's ids are per topic (docs/redis-backend.md).
std::string Text(const EngineStats& s) {
  return "urgent=" + std::to_string(s.urgent) + " ready=" + std::to_string(s.ready) +
         " reserved=" + std::to_string(s.reserved) + " delayed=" + std::to_string(s.delayed) +
         " buried=" + std::to_string(s.buried) + " total=" + std::to_string(s.total_jobs) +
         " timeouts=" + std::to_string(s.job_timeouts) + " topics=" + std::to_string(s.topics) +
         " sessions=" + std::to_string(s.sessions) + " waiting=" + std::to_string(s.waiting);
}

template <typename T, typename F>
std::string Text(const Result<T>& r, F ok) {
  return r.ok() ? ok(r.value()) : Text(r.status());
}

// What an operation on one job did: its code, and the state it left.
std::string Text(const Result<JobChange>& r) {
  return Text(r, [](const JobChange& c) { return "ok " + std::string(JobStateName(c.state)); });
}
std::string StateText(const JobChange& c) { return std::string(JobStateName(c.state)); }

std::string BackoffText(const Backoff& b) {
  switch (b.kind) {
    case Backoff::Kind::kNone:
      return "none";
    case Backoff::Kind::kList: {
      std::string s = "list";
      for (TimeMs d : b.delays_ms) s += ":" + std::to_string(d);
      return s;
    }
    case Backoff::Kind::kExponential:
      return "exp:" + std::to_string(b.base_ms) + ":" + std::to_string(b.cap_ms);
  }
  return "?";
}

class RedisModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(redis_.Start(&error)) << error;
  }

  std::unique_ptr<RedisBackend> Make() {
    RedisBackend::Options o;
    o.sweep_ms = 3'600'000;
    o.time_from_clock = true;
    return testing::StartRedisBackend(io_, redis_.url(), o, clock_, milliseconds(10000));
  }

  template <typename Pred>
  bool RunUntil(Pred done, milliseconds timeout = milliseconds(10000)) {
    return testing::RunIoUntil(io_, done, timeout);
  }
  void RunFor(milliseconds d) { testing::RunIoFor(io_, d); }

  // The reply of an asynchronous operation, once it has come.
  template <typename T, typename F>
  Result<T> Get(F start) {
    std::optional<Result<T>> out;
    start([&](Result<T> r) { out = std::move(r); });
    EXPECT_TRUE(RunUntil([&] { return out.has_value(); }));
    return out ? *out : Result<T>(Status::Internal("no reply"));
  }
  template <typename F>
  Status Do(F start) {
    std::optional<Status> out;
    start([&](Status st) { out = st; });
    EXPECT_TRUE(RunUntil([&] { return out.has_value(); }));
    return out ? *out : Status::Internal("no reply");
  }
  template <typename F>
  std::pair<Status, std::vector<Owned>> GetJobs(F start) {
    std::optional<std::pair<Status, std::vector<Owned>>> out;
    start([&](Status st, Jobs views) {
      std::vector<Owned> jobs;
      for (const JobView& v : views)
        jobs.push_back(Owned{v.id, std::string(v.topic), std::string(v.key), std::string(v.body),
                             v.state, v.priority, std::string(v.lease)});
      out.emplace(st, std::move(jobs));
    });
    EXPECT_TRUE(RunUntil([&] { return out.has_value(); }));
    return out ? *out : std::make_pair(Status::Internal("no reply"), std::vector<Owned>{});
  }

  RedisProcess redis_;
  boost::asio::io_context io_;
  ModelClock clock_;
};

// Whether the reference's ready job `id` is a job that a reserve of a
// session watching `watched` may take first on Redis: the head of one of
// those topics that is not paused, with the lowest priority of such heads.
// (The engine breaks a tie between topics by id; Redis, by topic number.)
bool LegalFirst(const ReferenceEngine& ref, const std::vector<std::string>& watched, JobId id) {
  auto it = ref.jobs().find(id);
  if (it == ref.jobs().end() || it->second.state != JobState::kReady) return false;
  const testing::RefJob& job = it->second;
  auto serving = [&](const std::string& topic) {
    if (std::find(watched.begin(), watched.end(), topic) == watched.end()) return false;
    for (const testing::RefTopic& t : ref.topics())
      if (t.name == topic) return !t.paused;
    return false;
  };
  if (!serving(job.topic)) return false;
  for (const auto& [other_id, j] : ref.jobs()) {
    if (j.state != JobState::kReady || !serving(j.topic)) continue;
    if (j.priority < job.priority) return false;
    if (j.topic == job.topic && j.priority == job.priority && other_id < id) return false;
  }
  return true;
}

TEST_F(RedisModelTest, RandomOperationsMatchTheReference) {
  uint64_t seed = 20260301;
  if (const char* env = std::getenv("DELAYQ_REDIS_MODEL_SEED"))
    seed = std::strtoull(env, nullptr, 10);
  int ops = 3000;
  if (const char* env = std::getenv("DELAYQ_REDIS_MODEL_OPS")) ops = std::atoi(env);
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t n) { return static_cast<uint64_t>(rng() % n); };

  auto redis = Make();
  EngineOptions eo;
  eo.start_ms = kStart;
  eo.record_mutations = false;
  ReferenceEngine ref(eo);
  TimeMs now = kStart;

  const std::vector<std::string> topics = {"default", "t1", "t2"};
  const std::vector<std::string> keys = {"k1", "k2", "k3", "k4"};
  const std::vector<uint32_t> priorities = {0, 1, 1023, 1024, 1025, 4294967295u};

  // The engine drops a topic that nothing refers to, pause and counters
  // with it; on Redis a topic's meta hash outlives its last job (a pause, a
  // total-jobs count). Not what this test is about: a session that does
  // nothing else watches every topic, so that none is ever dropped.
  SessionId ref_keeper = ref.OpenSession(now), redis_keeper = redis->OpenSession();
  for (const std::string& t : topics) {
    ASSERT_TRUE(ref.Watch(ref_keeper, t).ok());
    ASSERT_TRUE(redis->Watch(redis_keeper, t).ok());
  }

  // Job n (the n-th created) is ref_ids[n] and redis_ids[n].
  std::vector<JobId> ref_ids, redis_ids;
  // Per job (its index in ref_ids): the leases of its detached reservations,
  // the reference's and Redis's, in order.
  std::map<size_t, std::vector<std::pair<uint64_t, std::string>>> leases;
  int leased_ok = 0, leased_lost = 0, leased_other = 0;
  std::map<JobId, size_t> ref_index, redis_index;
  auto namer = [](const std::map<JobId, size_t>& index) -> NameFn {
    return [&index](JobId id) {
      auto it = index.find(id);
      return it == index.end() ? "?" + std::to_string(id) : "#" + std::to_string(it->second);
    };
  };
  NameFn ref_name = namer(ref_index), redis_name = namer(redis_index);

  // Sessions: slot i is ref_sessions[i] and redis_sessions[i].
  constexpr size_t kSessions = 4;
  std::vector<SessionId> ref_sessions, redis_sessions;
  std::deque<std::string> history;
  // The seed, the last operations, and the reference's state.
  auto trail = [&] {
    std::string out =
        "seed " + std::to_string(seed) + " (DELAYQ_REDIS_MODEL_SEED); last operations:";
    for (const std::string& h : history) out += "\n  " + h;
    out += "\nreference at +" + std::to_string(now - kStart) + " (sessions s0..: ";
    for (SessionId id : ref_sessions) out += std::to_string(id) + " ";
    out += "):";
    for (const testing::RefTopic& t : ref.topics())
      if (t.paused)
        out += "\n  " + t.name + " paused until +" + std::to_string(t.pause_until - kStart);
    for (const auto& [id, j] : ref.jobs()) {
      out += "\n  " + ref_name(id) + " " + j.topic + " " + std::string(JobStateName(j.state)) +
             " pri=" + std::to_string(j.priority);
      if (j.state == JobState::kDelayed || j.state == JobState::kReserved)
        out += " due=+" + std::to_string(j.due_ms - kStart);
      if (j.state == JobState::kReserved)
        out += j.detached ? " detached" : " by session " + std::to_string(j.reserver);
    }
    return out;
  };
  auto note = [&](std::string line) {
    history.push_back(std::move(line));
    if (history.size() > 40) history.pop_front();
  };

  // A fresh session watches one or two topics (the default one ignored
  // unless picked).
  auto open = [&](size_t slot) {
    SessionId rs = ref.OpenSession(now), bs = redis->OpenSession();
    std::string first = topics[pick(topics.size())];
    std::vector<std::string> watch{first};
    if (pick(3) == 0) watch.push_back(topics[pick(topics.size())]);
    for (const std::string& t : watch) {
      ASSERT_TRUE(ref.Watch(rs, t).ok());
      ASSERT_TRUE(redis->Watch(bs, t).ok());
    }
    if (std::find(watch.begin(), watch.end(), "default") == watch.end()) {
      ASSERT_TRUE(ref.Ignore(rs, "default").ok());
      ASSERT_TRUE(redis->Ignore(bs, "default").ok());
    }
    if (slot < ref_sessions.size()) {
      ref_sessions[slot] = rs;
      redis_sessions[slot] = bs;
    } else {
      ref_sessions.push_back(rs);
      redis_sessions.push_back(bs);
    }
  };
  for (size_t i = 0; i < kSessions; ++i) open(i);
  ASSERT_FALSE(HasFatalFailure());

  // Stats, then every topic's, on both sides; on Redis, Stats calls every
  // topic's function, which applies what fell due.
  auto stats = [&](std::string* ref_text, std::string* redis_text) {
    *ref_text = Text(ref.Stats(now));
    *redis_text = Text(Get<EngineStats>([&](Callback<EngineStats> cb) { redis->Stats(cb); }),
                       [](const EngineStats& s) { return Text(s); });
    auto t = [](const TopicStats& s) { return Text(s); };
    for (const std::string& topic : topics) {
      *ref_text += "\n    " + Text(ref.StatsTopic(now, topic), t);
      *redis_text +=
          "\n    " +
          Text(Get<TopicStats>([&](Callback<TopicStats> cb) { redis->StatsTopic(topic, cb); }), t);
    }
  };

  for (int i = 0; i < ops; ++i) {
    // Time moves on, instant by instant; mostly by small steps, so that a
    // reservation often lives for a few operations.
    TimeMs step = 0;
    if (uint64_t p = pick(20); p >= 10 && p < 16) {
      step = 1 + static_cast<TimeMs>(pick(30));
    } else if (p >= 16 && p < 19) {
      step = 1 + static_cast<TimeMs>(pick(1000));
    } else if (p == 19) {
      step = 1 + static_cast<TimeMs>(pick(6000));
    }
    TimeMs target = now + step;
    // Often exactly when something falls due: the edges of each rule.
    if (TimeMs w = ref.NextWakeup(); pick(4) == 0 && w != kNever && w - now <= 6000)
      target = std::max(w, now);
    for (TimeMs w = ref.NextWakeup(); w <= target; w = ref.NextWakeup()) {
      now = std::max(w, now);
      clock_.Set(now);
      ref.Advance(now);
      std::string a, b;
      stats(&a, &b);
      if (a != b)
        FAIL() << "stats at +" << now - kStart << " ms\n  reference " << a << "\n  redis     " << b
               << "\n"
               << trail();
    }
    now = target;
    clock_.Set(now);
    ref.Advance(now);

    uint64_t op = pick(100);
    bool on_reserved = (op >= 47 && op < 54) || (op >= 56 && op < 76);
    // A session; for release, bury, touch and delete often one that holds
    // a job.
    size_t slot = pick(kSessions);
    if (on_reserved && pick(4) != 0) {
      std::vector<size_t> holders;
      for (size_t k = 0; k < kSessions; ++k)
        for (const auto& [id, j] : ref.jobs())
          if (j.state == JobState::kReserved && !j.detached && j.reserver == ref_sessions[k]) {
            holders.push_back(k);
            break;
          }
      if (!holders.empty()) slot = holders[pick(holders.size())];
    }
    SessionId rs = ref_sessions[slot], bs = redis_sessions[slot];
    // Operations on a reserved job may also come from the operator (session 0).
    bool op0 = on_reserved && pick(10) == 0;
    // A job: for release, bury, touch and delete often one the caller may act
    // on, for kick-job often a buried or delayed one; else often a recent
    // one; sometimes none.
    size_t job = ref_ids.size();
    {
      std::vector<size_t> likely;
      for (const auto& [id, j] : ref.jobs()) {
        bool mine = j.state == JobState::kReserved && (j.reserver == rs || j.detached || op0);
        bool kickable = j.state == JobState::kBuried || j.state == JobState::kDelayed;
        if (on_reserved ? mine : op >= 79 && op < 81 && kickable)
          likely.push_back(ref_index.at(id));
      }
      uint64_t how = pick(10);
      if (how < 8 && !likely.empty()) {
        job = likely[pick(likely.size())];
      } else if (how < 9 && !ref_ids.empty()) {
        job = ref_ids.size() - 1 - pick(std::min<size_t>(ref_ids.size(), 8));
      } else if (!ref_ids.empty()) {
        job = pick(ref_ids.size() + 1);  // == size: no such job
      }
    }
    JobId rid = job < ref_ids.size() ? ref_ids[job] : kNoJob;
    JobId bid = job < redis_ids.size() ? redis_ids[job] : kNoJob;
    // For an operation on a reserved job, often a lease: the job's latest,
    // an earlier (stale) one, or another job's; else none.
    uint64_t ref_lease = 0;
    std::string redis_lease, lease_what;
    if (on_reserved && !leases.empty() && pick(3) != 0) {
      auto mine = leases.find(job);
      uint64_t how = pick(4);
      const std::vector<std::pair<uint64_t, std::string>>* from = nullptr;
      size_t at = 0;
      if (mine != leases.end() && how < 2) {
        from = &mine->second;
        at = from->size() - 1;
        lease_what = " lease=latest";
      } else if (mine != leases.end() && how == 2 && mine->second.size() > 1) {
        from = &mine->second;
        at = pick(from->size() - 1);
        lease_what = " lease=stale";
      } else {
        auto other = std::next(leases.begin(), static_cast<long>(pick(leases.size())));
        from = &other->second;
        at = from->size() - 1;
        lease_what = " lease=of-job-" + std::to_string(other->first);
      }
      ref_lease = (*from)[at].first;
      redis_lease = (*from)[at].second;
    }
    const std::string& topic = topics[pick(topics.size())];
    const std::string key = pick(3) == 0 ? keys[pick(keys.size())] : "";
    uint32_t pri = priorities[pick(priorities.size())];
    std::string what = "+" + std::to_string(now - kStart) + " s" + std::to_string(slot) + " ";
    std::string got_ref, got_redis;

    if (op < 22) {
      PutRequest r;
      r.topic = pick(4) == 0 ? std::string_view() : std::string_view(topic);
      std::string body = "b" + std::to_string(i);
      r.body = body;
      r.priority = pri;
      r.key = key;
      switch (pick(6)) {
        case 0:
        case 1:
          break;
        case 2:
          r.delay_ms = 1 + static_cast<TimeMs>(pick(20));
          break;
        case 3:
        case 4:
          r.delay_ms = 1 + static_cast<TimeMs>(pick(5000));
          break;
        default:
          r.run_at = now - 100 + static_cast<TimeMs>(pick(3000));
          break;
      }
      r.ttr_ms =
          pick(4) == 0 ? 1 + static_cast<TimeMs>(pick(20)) : 1000 + static_cast<TimeMs>(pick(5000));
      r.max_tries = pick(2) == 0 ? 0 : static_cast<uint32_t>(1 + pick(4));
      switch (pick(3)) {
        case 0:
          break;
        case 1: {
          std::vector<TimeMs> d(1 + pick(3));
          for (TimeMs& x : d) x = pick(4) == 0 ? 0 : 1 + static_cast<TimeMs>(pick(3000));
          r.backoff = Backoff::List(d);
          break;
        }
        default: {
          TimeMs base = 1 + static_cast<TimeMs>(pick(500));
          r.backoff = Backoff::Exponential(base, base + static_cast<TimeMs>(pick(5000)));
          break;
        }
      }
      what += "put " + std::string(r.topic) + " pri=" + std::to_string(pri) +
              " delay=" + std::to_string(r.delay_ms) +
              " run_at=" + (r.run_at ? "+" + std::to_string(*r.run_at - kStart) : "-") +
              " ttr=" + std::to_string(r.ttr_ms) + " key=" + key +
              " max_tries=" + std::to_string(r.max_tries) + " backoff=" + BackoffText(r.backoff);
      auto a = ref.Put(now, rs, r);
      auto b = Get<PutResult>([&](Callback<PutResult> cb) { redis->Put(bs, r, cb); });
      if (a.ok() && a->created) {
        ref_index[a->id] = ref_ids.size();
        ref_ids.push_back(a->id);
      }
      if (b.ok() && b->created) {
        redis_index[b->id] = redis_ids.size();
        redis_ids.push_back(b->id);
      }
      auto put_text = [](const NameFn& name) {
        return [name](const PutResult& p) {
          return "put " + name(p.id) + (p.created ? " new " : " old ") +
                 std::string(JobStateName(p.state));
        };
      };
      got_ref = Text(a, put_text(ref_name));
      got_redis = Text(b, put_text(redis_name));
    } else if (op < 44) {
      std::vector<std::string> watched = redis->WatchedTopics(bs);
      bool several = watched.size() > 1;
      // Over several topics, Redis reserves from the one topic whose head
      // goes first: a count above 1 could take jobs of that topic that the
      // engine would leave for a better one of another topic.
      uint32_t count = several ? 1 : static_cast<uint32_t>(1 + pick(3));
      bool detach = !several && pick(8) == 0;
      what += "reserve count=" + std::to_string(count) + (detach ? " detach" : "");
      auto b = GetJobs([&](JobsDone cb) {
        redis->Reserve(ReserveRequest{bs, 0, count, detach}, std::move(cb));
      });
      got_redis = Text(b.first, b.second, redis_name);
      std::vector<Owned> jobs;
      Status st;
      // The reference's id of the job Redis took first, if any.
      std::optional<JobId> took;
      if (!b.second.empty())
        if (auto it = redis_index.find(b.second.front().id); it != redis_index.end())
          took = ref_ids.at(it->second);
      if (several && took && LegalFirst(ref, watched, *took)) {
        // A fair pick (a tie of priorities between topics Redis breaks by
        // topic number): the reference takes the same job.
        auto a = ref.ReserveJob(now, rs, *took);
        st = a.status();
        if (a.ok())
          jobs.push_back(Owned{a->id,
                               std::string(a->topic),
                               std::string(a->key),
                               std::string(a->body),
                               a->state,
                               a->priority,
                               {}});
      } else {
        auto a = ref.Reserve(now, ReserveRequest{rs, 0, count, detach});
        st = a.status();
        if (a.ok())
          for (JobId id : *a) {
            const testing::RefJob& j = ref.jobs().at(id);
            jobs.push_back(Owned{id, j.topic, j.key, j.body, j.state, j.priority, {}});
          }
      }
      got_ref = Text(st, jobs, ref_name);
      // The leases of a detached reserve, the reference's and Redis's, for
      // the operations below to name (docs/engine.md, "Leases").
      for (const Owned& o : b.second) {
        auto it = redis_index.find(o.id);
        if (o.lease.empty() || it == redis_index.end()) continue;
        auto view = ref.PeekReservation(now, ref_ids.at(it->second));
        uint64_t ref_lease = 0;
        if (view.ok() && ParseLease(view->lease, &ref_lease))
          leases[it->second].emplace_back(ref_lease, o.lease);
      }
    } else if (op < 47) {
      what += "reserve-job " + std::to_string(job);
      auto a = ref.ReserveJob(now, rs, rid);
      auto b = GetJobs([&](JobsDone cb) { redis->ReserveJob(bs, bid, std::move(cb)); });
      got_ref = Text(a, [&](const JobView& v) { return "jobs " + Text(v, ref_name); });
      got_redis = Text(b.first, b.second, redis_name);
    } else if (op < 54) {
      SessionId r0 = op0 ? 0 : rs, b0 = op0 ? 0 : bs;
      const bool finish = pick(2) == 0;
      what += (finish ? "finish " : "delete ") + std::to_string(job) + (op0 ? " by 0" : "") +
              lease_what;
      Holder rh(r0, ref_lease);
      backend::Claim bh(b0, redis_lease);
      got_ref = Text(finish ? ref.Finish(now, rh, rid) : ref.Delete(now, rh, rid));
      got_redis = Text(Get<JobChange>([&](Callback<JobChange> cb) {
        if (finish) return redis->Finish(bh, bid, cb);
        redis->Delete(bh, bid, cb);
      }));
    } else if (op < 56) {
      what += "delete-key " + topic + " " + key;
      got_ref = Text(ref.DeleteByKey(now, rs, topic, key));
      got_redis = Text(
          Get<JobChange>([&](Callback<JobChange> cb) { redis->DeleteByKey(bs, topic, key, cb); }));
    } else if (op < 66) {
      SessionId r0 = op0 ? 0 : rs, b0 = op0 ? 0 : bs;
      std::optional<TimeMs> delay;
      if (uint64_t d = pick(4); d == 1) {
        delay = 0;
      } else if (d >= 2) {
        delay = 1 + static_cast<TimeMs>(pick(3000));
      }
      what += "release " + std::to_string(job) + " pri=" + std::to_string(pri) +
              " delay=" + (delay ? std::to_string(*delay) : "-") + (op0 ? " by 0" : "");
      auto state = [](const auto& s) { return StateText(s); };
      what += lease_what;
      got_ref = Text(ref.Release(now, Holder(r0, ref_lease), rid, pri, delay), state);
      got_redis = Text(Get<JobChange>([&](Callback<JobChange> cb) {
                         redis->Release(backend::Claim(b0, redis_lease), bid, pri, delay, cb);
                       }),
                       state);
    } else if (op < 70) {
      SessionId r0 = op0 ? 0 : rs, b0 = op0 ? 0 : bs;
      what += "bury " + std::to_string(job) + " pri=" + std::to_string(pri) + (op0 ? " by 0" : "") +
              lease_what;
      got_ref = Text(ref.Bury(now, Holder(r0, ref_lease), rid, pri));
      got_redis = Text(Get<JobChange>([&](Callback<JobChange> cb) {
        redis->Bury(backend::Claim(b0, redis_lease), bid, pri, cb);
      }));
    } else if (op < 76) {
      SessionId r0 = op0 ? 0 : rs, b0 = op0 ? 0 : bs;
      what += "touch " + std::to_string(job) + (op0 ? " by 0" : "") + lease_what;
      got_ref = Text(ref.Touch(now, Holder(r0, ref_lease), rid));
      got_redis = Text(Get<JobChange>(
          [&](Callback<JobChange> cb) { redis->Touch(backend::Claim(b0, redis_lease), bid, cb); }));
    } else if (op < 79) {
      uint64_t bound = 1 + pick(4);
      what += "kick " + topic + " " + std::to_string(bound);
      auto n = [](uint64_t k) { return "kicked " + std::to_string(k); };
      got_ref = Text(ref.Kick(now, topic, bound), n);
      got_redis =
          Text(Get<uint64_t>([&](Callback<uint64_t> cb) { redis->Kick(bs, topic, bound, cb); }), n);
    } else if (op < 81) {
      what += "kick-job " + std::to_string(job);
      got_ref = Text(ref.KickJob(now, rid));
      got_redis =
          Text(Get<JobChange>([&](Callback<JobChange> cb) { redis->KickJob(bs, bid, cb); }));
    } else if (op < 86) {
      auto kind = static_cast<Backend::PeekKind>(pick(5));
      Result<JobView> a = Status::NotFound();
      switch (kind) {
        case Backend::PeekKind::kId:
          a = ref.Peek(now, rid);
          break;
        case Backend::PeekKind::kKey:
          a = ref.PeekByKey(now, topic, key);
          break;
        case Backend::PeekKind::kReady:
          a = ref.PeekReady(now, topic);
          break;
        case Backend::PeekKind::kDelayed:
          a = ref.PeekDelayed(now, topic);
          break;
        case Backend::PeekKind::kBuried:
          a = ref.PeekBuried(now, topic);
          break;
        case Backend::PeekKind::kName:  // not picked (pick(5)): names are tested on their own
          break;
      }
      what += "peek " + std::to_string(static_cast<int>(kind)) + " " + std::to_string(job) + " " +
              topic + " " + key;
      auto b = GetJobs([&](JobsDone cb) { redis->Peek(bs, kind, bid, topic, key, std::move(cb)); });
      got_ref = Text(a, [&](const JobView& v) { return "jobs " + Text(v, ref_name); });
      got_redis = Text(b.first, b.second, redis_name);
    } else if (op < 92) {
      what += "stats-job " + std::to_string(job);
      got_ref = Text(ref.StatsJob(now, rid), [&](const JobStats& s) { return Text(s, ref_name); });
      got_redis = Text(Get<JobStats>([&](Callback<JobStats> cb) { redis->StatsJob(bid, cb); }),
                       [&](const JobStats& s) { return Text(s, redis_name); });
    } else if (op < 95) {
      what += "stats-topic " + topic;
      auto t = [](const TopicStats& s) { return Text(s); };
      got_ref = Text(ref.StatsTopic(now, topic), t);
      got_redis =
          Text(Get<TopicStats>([&](Callback<TopicStats> cb) { redis->StatsTopic(topic, cb); }), t);
    } else if (op < 97) {
      TimeMs d = pick(3) == 0 ? 0 : 1 + static_cast<TimeMs>(pick(5000));
      what += "pause " + topic + " " + std::to_string(d);
      got_ref = Text(ref.PauseTopic(now, topic, d));
      got_redis = Text(Do([&](Done cb) { redis->PauseTopic(topic, d, cb); }));
    } else if (op < 98) {
      // Watch, ignore or use a topic.
      auto n = [](size_t k) { return std::to_string(k); };
      switch (pick(3)) {
        case 0:
          what += "watch " + topic;
          got_ref = Text(ref.Watch(rs, topic), n);
          got_redis = Text(redis->Watch(bs, topic), n);
          break;
        case 1:
          what += "ignore " + topic;
          got_ref = Text(ref.Ignore(rs, topic), n);
          got_redis = Text(redis->Ignore(bs, topic), n);
          break;
        default:
          what += "use " + topic;
          got_ref = Text(ref.Use(rs, topic));
          got_redis = Text(redis->Use(bs, topic));
          break;
      }
    } else if (op < 99) {
      if (pick(4) == 0) {
        uint8_t mask = static_cast<uint8_t>(1 + pick(7));
        what += "clear " + topic + " " + std::to_string(mask);
        auto n = [](uint64_t k) { return "cleared " + std::to_string(k); };
        got_ref = Text(ref.ClearTopic(now, topic, mask), n);
        got_redis = Text(
            Get<uint64_t>([&](Callback<uint64_t> cb) { redis->ClearTopic(bs, topic, mask, cb); }),
            n);
      } else {
        what += "stats";
        stats(&got_ref, &got_redis);
      }
    } else {
      // A connection closes (its jobs come back) and another takes its place.
      what += "close";
      ref.CloseSession(now, rs);
      redis->CloseSession(bs);
      open(slot);
      ASSERT_FALSE(HasFatalFailure());
      // Its jobs go back in calls of their own: a Stats call comes after
      // them, and compares what they did.
      stats(&got_ref, &got_redis);
    }
    note(what + " -> " + got_redis);
    if (!lease_what.empty()) {
      (got_redis.rfind("ok", 0) == 0 ? leased_ok
       : got_redis == "lease_lost"   ? leased_lost
                                     : leased_other)++;
    }
    if (got_ref != got_redis)
      FAIL() << "operation " << i << ": " << what << "\n  reference " << got_ref << "\n  redis     "
             << got_redis << "\n"
             << trail();
  }

  // The lease paths ran, both ways.
  std::printf("[ leases ] %d operations under a lease took effect, %d were lease_lost, %d other\n",
              leased_ok, leased_lost, leased_other);
  EXPECT_GT(leased_ok, 0);
  EXPECT_GT(leased_lost, 0);

  // At the end, every job's stats.
  EXPECT_GT(ref_ids.size(), static_cast<size_t>(ops) / 8);
  ASSERT_EQ(ref_ids.size(), redis_ids.size());
  for (size_t n = 0; n < ref_ids.size(); ++n) {
    auto a = ref.StatsJob(now, ref_ids[n]);
    auto b = Get<JobStats>([&](Callback<JobStats> cb) { redis->StatsJob(redis_ids[n], cb); });
    ASSERT_EQ(Text(a, [&](const JobStats& s) { return Text(s, ref_name); }),
              Text(b, [&](const JobStats& s) { return Text(s, redis_name); }))
        << "job #" << n << " at the end\n"
        << trail();
  }
}

// Never early (docs/redis-backend.md, "Time"): the same backend at random
// instants within milliseconds (the manual clock in microseconds, which each
// call carries as Redis's TIME would), checked against the rule rather than
// the reference: no job is reserved before the delay of the put or release
// that delayed it has run since that call, before its TTR has run since its
// reserve or last touch, or from a topic whose pause has not run since the
// pause. Time often stops just before, at and just after such an end.
TEST_F(RedisModelTest, NeverEarlyAtSubMillisecondInstants) {
  uint64_t seed = 20261127;
  if (const char* env = std::getenv("DELAYQ_REDIS_MODEL_SEED"))
    seed = std::strtoull(env, nullptr, 10);
  int ops = 1500;
  if (const char* env = std::getenv("DELAYQ_REDIS_MODEL_OPS")) ops = std::atoi(env) / 2;
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t n) { return static_cast<uint64_t>(rng() % n); };

  auto redis = Make();
  TimeUs now = kStart * 1000 + 123;  // microseconds
  clock_.SetUs(now);
  const std::vector<std::string> topics = {"t1", "t2"};
  struct Tracked {
    std::string topic;
    TimeUs not_before = 0;  // delayed by a put or release until then
    TimeUs held_until = 0;  // reserved until its TTR runs out; 0: not held
    size_t holder = 0;
    TimeMs ttr = 0;
  };
  std::map<JobId, Tracked> jobs;
  std::map<std::string, TimeUs> paused_until;
  constexpr size_t kSessions = 3;
  std::vector<SessionId> sessions;
  for (size_t i = 0; i < kSessions; ++i) {
    sessions.push_back(redis->OpenSession());
    for (const std::string& t : topics) ASSERT_TRUE(redis->Watch(sessions[i], t).ok());
    ASSERT_TRUE(redis->Ignore(sessions[i], "default").ok());
  }
  size_t reserved = 0;
  std::deque<std::string> history;
  auto note = [&](std::string line) {
    history.push_back("+" + std::to_string(now - kStart * 1000) + " us " + std::move(line));
    if (history.size() > 30) history.pop_front();
  };
  auto trail = [&] {
    std::string out = "seed " + std::to_string(seed) + "; last operations:";
    for (const std::string& h : history) out += "\n  " + h;
    return out;
  };
  // The instants at which something may end: the next one after now.
  auto next_end = [&]() -> TimeUs {
    TimeUs best = kNever;
    for (const auto& [id, j] : jobs) {
      if (j.not_before > now) best = std::min(best, j.not_before);
      if (j.held_until > now) best = std::min(best, j.held_until);
    }
    for (const auto& [t, until] : paused_until)
      if (until > now) best = std::min(best, until);
    return best;
  };

  for (int i = 0; i < ops; ++i) {
    // Time: a random step, or to just before, at or just after the next end.
    TimeUs end = next_end();
    if (end != kNever && pick(2) == 0) {
      TimeUs off[] = {-1, 0, 1, -static_cast<TimeUs>(1 + pick(999)),
                      static_cast<TimeUs>(pick(1000))};
      now = std::max(now, end + off[pick(5)]);
    } else {
      now += pick(4) == 0 ? static_cast<TimeUs>(pick(3'000'000)) : static_cast<TimeUs>(pick(3000));
    }
    clock_.SetUs(now);

    size_t slot = pick(kSessions);
    SessionId s = sessions[slot];
    const std::string& topic = topics[pick(topics.size())];
    // A job the session holds, if any.
    std::optional<JobId> mine;
    for (const auto& [id, j] : jobs)
      if (j.held_until > now && j.holder == slot) mine = id;
    uint64_t op = pick(10);
    if (op < 3) {
      PutRequest r;
      r.topic = topic;
      std::string body = "b" + std::to_string(i);
      r.body = body;
      TimeMs delay = pick(3) == 0 ? 0 : static_cast<TimeMs>(pick(3) == 0 ? pick(5) : pick(2500));
      r.delay_ms = delay;
      if (pick(8) == 0) r.run_at = now / 1000 + static_cast<TimeMs>(pick(2000)) - 500;
      r.ttr_ms = 1 + static_cast<TimeMs>(pick(4) == 0 ? pick(5) : pick(2000));
      auto put = Get<PutResult>([&](Callback<PutResult> cb) { redis->Put(s, r, cb); });
      ASSERT_TRUE(put.ok()) << put.status().ToString();
      TimeUs nb = r.run_at ? *r.run_at * 1000 : now + delay * 1000;
      jobs[put->id] = Tracked{topic, nb, 0, 0, r.ttr_ms};
      note("put " + std::to_string(put->id) + " " + topic + " delay=" + std::to_string(delay) +
           (r.run_at ? " run_at=" + std::to_string(*r.run_at) : "") +
           " ttr=" + std::to_string(r.ttr_ms) + " -> " + std::string(JobStateName(put->state)));
    } else if (op < 7) {
      auto got = GetJobs([&](JobsDone cb) {
        redis->Reserve(ReserveRequest{s, 0, 1 + static_cast<uint32_t>(pick(3)), false},
                       std::move(cb));
      });
      std::string ids;
      for (const Owned& o : got.second) ids += " " + std::to_string(o.id);
      note("reserve s" + std::to_string(slot) + " -> " + Text(got.first) + ids);
      reserved += got.second.size();
      for (const Owned& o : got.second) {
        auto it = jobs.find(o.id);
        ASSERT_NE(it, jobs.end()) << "an unknown job " << o.id << "\n" << trail();
        Tracked& j = it->second;
        std::string at = "job " + std::to_string(o.id) + " reserved at +" +
                         std::to_string(now - kStart * 1000) + " us";
        ASSERT_LE(j.not_before, now)
            << at << ", before its delay runs out at +" << j.not_before - kStart * 1000 << " us\n"
            << trail();
        ASSERT_LE(j.held_until, now) << at << ", while another reservation's TTR runs to +"
                                     << j.held_until - kStart * 1000 << " us\n"
                                     << trail();
        ASSERT_LE(paused_until[j.topic], now) << at << ", from " << j.topic << " paused until +"
                                              << paused_until[j.topic] - kStart * 1000 << " us\n"
                                              << trail();
        j.not_before = 0;
        j.held_until = now + j.ttr * 1000;
        j.holder = slot;
      }
    } else if (op < 8 && mine) {
      std::optional<TimeMs> delay;
      if (pick(3) != 0) delay = static_cast<TimeMs>(pick(3) == 0 ? pick(5) : pick(2000));
      auto st = Get<JobChange>(
          [&](Callback<JobChange> cb) { redis->Release(s, *mine, 1024, delay, cb); });
      ASSERT_TRUE(st.ok()) << st.status().ToString() << "\n" << trail();
      Tracked& j = jobs[*mine];
      j.held_until = 0;
      j.not_before = delay ? now + *delay * 1000 : 0;
      note("release " + std::to_string(*mine) + " delay=" + (delay ? std::to_string(*delay) : "-"));
    } else if (op < 9 && mine) {
      if (pick(2) == 0) {
        ASSERT_TRUE(Do([&](Done d) { redis->Touch(s, *mine, Ch(d)); }).ok()) << trail();
        jobs[*mine].held_until = now + jobs[*mine].ttr * 1000;
        note("touch " + std::to_string(*mine));
      } else {
        ASSERT_TRUE(Do([&](Done d) { redis->Delete(s, *mine, Ch(d)); }).ok()) << trail();
        jobs.erase(*mine);
        note("delete " + std::to_string(*mine));
      }
    } else {
      TimeMs d = pick(4) == 0 ? 0 : static_cast<TimeMs>(pick(3) == 0 ? pick(5) : pick(1500));
      Status st = Do([&](Done cb) { redis->PauseTopic(topic, d, cb); });
      note("pause " + topic + " " + std::to_string(d) + " -> " + Text(st));
      if (st.ok()) paused_until[topic] = d > 0 ? now + d * 1000 : 0;
    }
    // Now and then: every job a delay holds back reads as delayed.
    if (i % 50 == 0) {
      for (const auto& [id, j] : jobs) {
        if (j.not_before <= now) continue;
        auto st = Get<JobStats>([&, id = id](Callback<JobStats> cb) { redis->StatsJob(id, cb); });
        ASSERT_TRUE(st.ok()) << st.status().ToString() << "\n" << trail();
        ASSERT_EQ(st->state, JobState::kDelayed)
            << "job " << id << " at +" << now - kStart * 1000 << " us, delayed until +"
            << j.not_before - kStart * 1000 << " us\n"
            << trail();
      }
    }
  }
  EXPECT_GT(reserved, static_cast<size_t>(ops) / 10);
}

}  // namespace
}  // namespace delayq::backend

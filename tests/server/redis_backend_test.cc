// The Redis backend against a real redis-server started by the test: every
// operation, blocking reserves woken across instances, TTR expiry, retries,
// and a Redis restart under the backend's feet.
#include "backend/redis_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <set>
#include <span>

#include "backend/local_backend.h"
#include "server/io_wait.h"
#include "server/redis_backend_start.h"
#include "server/redis_process.h"

namespace delayq::backend {
namespace {

using std::chrono::milliseconds;
using testing::Ch;
using testing::RedisProcess;

// A job as a reply carried it (the views die with the call).
struct Job {
  JobId id = 0;
  std::string topic, key, body;
  JobState state = JobState::kReady;
  uint32_t priority = 0;
  std::string lease;
  bool named = false;
};

struct ReplyJobs {
  Status status;
  std::vector<Job> jobs;
};

// What a shell command prints, its last newline taken off.
std::string ShellText(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  pclose(p);
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// The number a shell command prints first, or -1.
int ShellNumber(const std::string& cmd) {
  int v = -1;
  if (std::sscanf(ShellText(cmd).c_str(), "%d", &v) != 1) v = -1;
  return v;
}

class RedisBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(redis_.Start(&error, {"--appendonly", "yes", "--appendfsync", "always"})) << error;
  }

  std::unique_ptr<RedisBackend> Make(TimeMs sweep_ms = 200) {
    RedisBackend::Options o;
    o.sweep_ms = sweep_ms;
    return testing::StartRedisBackend(io_, redis_.url(), o, clock_, milliseconds(5000));
  }

  // One whose idle topics end after 300 ms, with sweeps every 50 ms
  // (docs/redis-backend.md, "Topics come and go").
  std::unique_ptr<RedisBackend> MakeQuick() {
    RedisBackend::Options o;
    o.sweep_ms = 50;
    o.topic_idle_ms = 300;
    return testing::StartRedisBackend(io_, redis_.url(), o, clock_, milliseconds(5000));
  }

  template <typename Pred>
  bool RunUntil(Pred done, milliseconds timeout = milliseconds(5000)) {
    return testing::RunIoUntil(io_, done, timeout);
  }
  void RunFor(milliseconds d) { testing::RunIoFor(io_, d); }

  Result<PutResult> Put(Backend& b, SessionId s, std::string body, TimeMs delay = 0,
                        std::string_view topic = "", std::string_view key = "", TimeMs ttr = 60'000,
                        uint32_t max_tries = 0, Backoff backoff = {}) {
    PutRequest r;
    r.topic = topic;
    r.body = body;
    r.delay_ms = delay;
    r.key = key;
    r.ttr_ms = ttr;
    r.max_tries = max_tries;
    r.backoff = backoff;
    std::optional<Result<PutResult>> out;
    b.Put(s, r, [&](Result<PutResult> x) { out = std::move(x); });
    EXPECT_TRUE(RunUntil([&] { return out.has_value(); }));
    return out ? *out : Result<PutResult>(Status::Internal("no reply"));
  }

  // A named put (PutRequest::named): the key is also the job's name.
  Result<PutResult> PutNamed(Backend& b, std::string_view topic, std::string_view name,
                             std::string body = "body", TimeMs delay = 0, TimeMs ttr = 60'000) {
    PutRequest r;
    r.topic = topic;
    r.body = body;
    r.key = name;
    r.named = true;
    r.delay_ms = delay;
    r.ttr_ms = ttr;
    return Get<PutResult>([&](Callback<PutResult> cb) { b.Put(0, r, cb); });
  }
  Result<JobChange> FinishByName(Backend& b, std::string_view name) {
    return Get<JobChange>([&](Callback<JobChange> cb) { b.FinishByName(name, cb); });
  }
  Result<JobChange> DeleteByName(Backend& b, std::string_view name) {
    return Get<JobChange>([&](Callback<JobChange> cb) { b.DeleteByName(name, cb); });
  }

  static ReplyJobs Own(Status st, backend::Jobs views) {
    ReplyJobs j{st, {}};
    for (const JobView& v : views)
      j.jobs.push_back(Job{v.id, std::string(v.topic), std::string(v.key), std::string(v.body),
                           v.state, v.priority, std::string(v.lease), v.named});
    return j;
  }

  ReplyJobs Reserve(Backend& b, SessionId s, TimeMs timeout = 0, uint32_t count = 1,
                    bool detach = false, milliseconds wait = milliseconds(5000)) {
    std::optional<ReplyJobs> out;
    b.Reserve(ReserveRequest{s, timeout, count, detach},
              [&](Status st, backend::Jobs v) { out = Own(st, v); });
    EXPECT_TRUE(RunUntil([&] { return out.has_value(); }, wait));
    return out ? *out : ReplyJobs{Status::Internal("no reply"), {}};
  }

  // Starts a reserve of one job that may wait up to `timeout`; *out gets
  // its answer when it comes (the caller runs the loop).
  static void StartReserve(Backend& b, SessionId s, TimeMs timeout, std::optional<ReplyJobs>* out) {
    b.Reserve(ReserveRequest{s, timeout, 1, false},
              [out](Status st, backend::Jobs v) { *out = Own(st, v); });
  }

  template <typename F>
  Status Do(F start) {
    std::optional<Status> out;
    start([&](Status st) { out = st; });
    EXPECT_TRUE(RunUntil([&] { return out.has_value(); }));
    return out ? *out : Status::Internal("no reply");
  }
  template <typename T, typename F>
  Result<T> Get(F start) {
    std::optional<Result<T>> out;
    start([&](Result<T> r) { out = std::move(r); });
    EXPECT_TRUE(RunUntil([&] { return out.has_value(); }));
    return out ? *out : Result<T>(Status::Internal("no reply"));
  }
  // The firing of `schedule` at `at` by revision `rev`: a job "tick" into
  // "reports", due at `at`, its key "<schedule>@<at>".
  Result<PutResult> Fire(Backend& x, const std::string& schedule, TimeMs at, std::string_view rev) {
    const std::string key = schedule + "@" + std::to_string(at);
    PutRequest r;
    r.topic = "reports";
    r.body = "tick";
    r.key = key;
    r.run_at = at;
    r.ttr_ms = 60'000;
    return Get<PutResult>(
        [&](Callback<PutResult> cb) { x.FireSchedule(schedule, at, rev, r, cb); });
  }
  // UnfireSchedule of that firing: 1 taken back, 0 not, -1 an error.
  int Unfire(Backend& x, const std::string& schedule, TimeMs at, std::string_view rev) {
    auto r = Get<bool>([&](Callback<bool> cb) {
      x.UnfireSchedule(schedule, "reports", at, rev, schedule + "@" + std::to_string(at), cb);
    });
    return r.ok() ? int{*r} : -1;
  }
  ReplyJobs Peek(Backend& b, Backend::PeekKind kind, JobId id, std::string_view topic = "default",
                 std::string_view key = "") {
    std::optional<ReplyJobs> out;
    b.Peek(0, kind, id, topic, key, [&](Status st, backend::Jobs v) { out = Own(st, v); });
    EXPECT_TRUE(RunUntil([&] { return out.has_value(); }));
    return out ? *out : ReplyJobs{Status::Internal("no reply"), {}};
  }
  Result<JobStats> StatsJob(Backend& b, JobId id) {
    return Get<JobStats>([&](Callback<JobStats> cb) { b.StatsJob(id, cb); });
  }
  Result<TopicStats> StatsTopic(Backend& b, std::string_view t) {
    return Get<TopicStats>([&](Callback<TopicStats> cb) { b.StatsTopic(t, cb); });
  }

  // A session that uses and watches only `topic`.
  SessionId SessionOn(Backend& b, const std::string& topic) {
    SessionId s = b.OpenSession();
    EXPECT_TRUE(b.Use(s, topic).ok());
    EXPECT_TRUE(b.Watch(s, topic).ok());
    EXPECT_TRUE(b.Ignore(s, "default").ok());
    return s;
  }

  // What redis-cli prints for a command on the test's Redis.
  std::string Cli(const std::string& args) {
    return ShellText("redis-cli -p " + std::to_string(redis_.port()) + " " + args);
  }

  // How many times the test's Redis ran a command (INFO commandstats).
  int Calls(const std::string& command) {
    std::string info = Cli("info commandstats");
    std::string field = "cmdstat_" + command + ":calls=";
    size_t at = info.find(field);
    return at == std::string::npos ? 0 : std::atoi(info.c_str() + at + field.size());
  }

  // A job's member in its topic's sets (13 digits).
  static std::string MemberOf(JobId id) {
    char m[16];
    std::snprintf(m, sizeof m, "%013llu",
                  static_cast<unsigned long long>(id & ((JobId{1} << RedisBackend::kSeqBits) - 1)));
    return m;
  }

  // How many keys of the test's Redis match a pattern (SCAN).
  int CountKeys(const std::string& pattern) {
    return ShellNumber("redis-cli -p " + std::to_string(redis_.port()) + " --scan --pattern '" +
                       pattern + "' | wc -l");
  }

  RedisProcess redis_;
  boost::asio::io_context io_;
  Clock clock_;
};

TEST(RedisUrlTest, ParsesAndRejects) {
  auto a = ParseRedisUrl("redis://10.0.0.2:6380/3");
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->cluster);
  ASSERT_EQ(a->nodes.size(), 1u);
  EXPECT_EQ(a->nodes[0].host, "10.0.0.2");
  EXPECT_EQ(a->nodes[0].port, 6380);
  EXPECT_EQ(a->db, 3);
  auto b = ParseRedisUrl("redis://localhost");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->nodes.at(0).port, 6379);
  EXPECT_EQ(b->db, 0);
  auto c = ParseRedisUrl("redis-cluster://10.0.0.1:7000,10.0.0.2");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->cluster);
  ASSERT_EQ(c->nodes.size(), 2u);
  EXPECT_EQ(c->nodes[1].host, "10.0.0.2");
  EXPECT_EQ(c->nodes[1].port, 6379);
  EXPECT_FALSE(ParseRedisUrl("redis://a:1,b:2").ok());
  EXPECT_FALSE(ParseRedisUrl("redis-cluster://a:1/2").ok());
  EXPECT_FALSE(ParseRedisUrl("redis-cluster://a:1,,b:2").ok());
  EXPECT_FALSE(ParseRedisUrl("http://x").ok());
  EXPECT_FALSE(ParseRedisUrl("redis://:6379").ok());
  EXPECT_FALSE(ParseRedisUrl("redis://h:0").ok());
  EXPECT_FALSE(ParseRedisUrl("redis://h:6379/x").ok());
}

TEST(RedisRouterTest, KeySlotsFollowTheHashTag) {
  // Values from the Redis Cluster specification and redis-cli CLUSTER KEYSLOT.
  EXPECT_EQ(RedisRouter::KeySlot("123456789"), 0x31C3 % 16384);
  EXPECT_EQ(RedisRouter::KeySlot("foo"), 12182);
  EXPECT_EQ(RedisRouter::KeySlot("{user1000}.following"), RedisRouter::KeySlot("user1000"));
  EXPECT_EQ(RedisRouter::KeySlot("dq:{orders}:ready"), RedisRouter::KeySlot("dq:{orders}:j:1"));
  // An empty tag does not count: the whole key is hashed.
  EXPECT_EQ(RedisRouter::KeySlot("foo{}{bar}"),
            RedisRouter::KeySlot(std::string_view("foo{}{bar}")));
  EXPECT_NE(RedisRouter::KeySlot("foo{}{bar}"), RedisRouter::KeySlot("bar"));
}

TEST_F(RedisBackendTest, PutReserveDelete) {
  auto b = Make();
  SessionId s = b->OpenSession();
  auto put = Put(*b, s, "hello");
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_TRUE(put->created);
  EXPECT_EQ(put->state, JobState::kReady);
  ReplyJobs got = Reserve(*b, s);
  ASSERT_TRUE(got.status.ok()) << got.status.ToString();
  ASSERT_EQ(got.jobs.size(), 1u);
  EXPECT_EQ(got.jobs[0].id, put->id);
  EXPECT_EQ(got.jobs[0].body, "hello");
  EXPECT_EQ(got.jobs[0].topic, "default");
  // Nothing else is ready.
  EXPECT_EQ(Reserve(*b, s).status.code(), Code::kTimedOut);
  auto st = StatsJob(*b, put->id);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->state, JobState::kReserved);
  EXPECT_EQ(st->reserves, 1u);
  EXPECT_EQ(st->body_size, 5u);
  EXPECT_TRUE(Do([&](Done d) { b->Delete(s, put->id, Ch(d)); }).ok());
  EXPECT_EQ(Do([&](Done d) { b->Delete(s, put->id, Ch(d)); }).code(), Code::kNotFound);
  EXPECT_EQ(StatsJob(*b, put->id).code(), Code::kNotFound);
  // Ids that name no topic, or no job.
  EXPECT_EQ(Do([&](Done d) { b->Delete(s, 1, Ch(d)); }).code(), Code::kNotFound);
  EXPECT_EQ(Do([&](Done d) { b->Delete(s, (JobId{999} << 40) | 1, Ch(d)); }).code(),
            Code::kNotFound);
}

// Named objects are shared: what one instance puts or deletes, another
// lists, and each kind's version tells a poller that something changed.
TEST_F(RedisBackendTest, NamedObjectsAreSharedByInstances) {
  auto a = Make();
  auto b = Make();
  auto version = [&](Backend& x) {
    return Get<uint64_t>([&](Callback<uint64_t> cb) { x.ObjectsVersion(ObjectKind::kPush, cb); });
  };
  auto list = [&](Backend& x, ObjectKind k) {
    auto r = Get<std::vector<StoredObject>>(
        [&](Callback<std::vector<StoredObject>> cb) { x.ListObjects(k, cb); });
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<StoredObject>{};
  };
  auto put = [&](Backend& x, ObjectKind k, std::string name, std::string value) {
    std::optional<Status> st;
    x.PutObject(k, name, value, [&](Status s) { st = s; });
    EXPECT_TRUE(RunUntil([&] { return st.has_value(); }));
    return st.value_or(Status::Internal("no reply"));
  };
  auto del = [&](Backend& x, ObjectKind k, std::string name) {
    std::optional<Status> st;
    x.DeleteObject(k, name, [&](Status s) { st = s; });
    EXPECT_TRUE(RunUntil([&] { return st.has_value(); }));
    return st.value_or(Status::Internal("no reply"));
  };
  auto v0 = version(*b);
  ASSERT_TRUE(v0.ok()) << v0.status().ToString();
  ASSERT_TRUE(put(*a, ObjectKind::kPush, "orders", R"({"url":"https://a.example/"})").ok());
  ASSERT_TRUE(put(*a, ObjectKind::kPush, "bills", "{}").ok());
  ASSERT_TRUE(put(*a, ObjectKind::kSchedule, "orders", "{}").ok());
  auto v1 = version(*b);
  ASSERT_TRUE(v1.ok());
  EXPECT_NE(*v1, *v0);
  std::vector<StoredObject> want{{ObjectKind::kPush, "bills", "{}"},
                                 {ObjectKind::kPush, "orders", R"({"url":"https://a.example/"})"}};
  EXPECT_EQ(list(*b, ObjectKind::kPush), want);
  EXPECT_EQ(list(*b, ObjectKind::kSchedule).size(), 1u);
  EXPECT_TRUE(del(*b, ObjectKind::kPush, "bills").ok());
  EXPECT_EQ(del(*b, ObjectKind::kPush, "bills").code(), Code::kNotFound);
  EXPECT_EQ(put(*b, ObjectKind::kPush, "", "{}").code(), Code::kInvalidArgument);
  EXPECT_EQ(list(*a, ObjectKind::kPush).size(), 1u);
  auto v2 = version(*a);
  ASSERT_TRUE(v2.ok());
  EXPECT_NE(*v2, *v1);
}

// Two instances fire the same schedule at the same time: one job, and the
// other instance is told the firing was made.
TEST_F(RedisBackendTest, AFiringIsMadeOnceByTwoInstances) {
  auto a = Make();
  auto b = Make();
  std::optional<Result<PutResult>> ra, rb;
  PutRequest r;
  r.topic = "reports";
  r.body = "tick";
  r.key = "nightly@1000";
  r.ttr_ms = 60'000;
  a->FireSchedule("nightly", 1000, "r1", r, [&](Result<PutResult> x) { ra = std::move(x); });
  b->FireSchedule("nightly", 1000, "r1", r, [&](Result<PutResult> x) { rb = std::move(x); });
  ASSERT_TRUE(RunUntil([&] { return ra.has_value() && rb.has_value(); }));
  EXPECT_NE(ra->ok(), rb->ok()) << "exactly one instance makes the firing";
  const Result<PutResult>& made = ra->ok() ? *ra : *rb;
  const Result<PutResult>& refused = ra->ok() ? *rb : *ra;
  EXPECT_TRUE(made->created);
  EXPECT_EQ(refused.status().code(), Code::kConflict);
  EXPECT_EQ(Fire(*a, "nightly", 999, "r1").status().code(), Code::kConflict);
  auto later = Fire(*b, "nightly", 2000, "r1");
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_TRUE(later->created);
  auto stats = Get<TopicStats>([&](Callback<TopicStats> cb) { a->StatsTopic("reports", cb); });
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->ready, 2u);
}

// A firing made ahead by one instance is taken back by another only with
// the revision that made it and only before its time (dq_unfire); the
// cursor steps back, so the firing can be made again; a firing whose time
// came is not taken back.
TEST_F(RedisBackendTest, AFiringMadeAheadIsTakenBackByItsRevision) {
  auto a = Make();
  auto b = Make();
  const TimeMs at = (a->Now() / 1000 + 600) * 1000;
  auto delayed = [&] {
    auto st = Get<TopicStats>([&](Callback<TopicStats> cb) { a->StatsTopic("reports", cb); });
    EXPECT_TRUE(st.ok() || st.status().code() == Code::kNotFound) << st.status().ToString();
    return st.ok() ? st->delayed : 0;
  };
  ASSERT_TRUE(Fire(*a, "nightly", at, "r1").ok());
  EXPECT_EQ(delayed(), 1u);
  EXPECT_EQ(Unfire(*b, "nightly", at, "r0"), 0) << "another revision's";
  EXPECT_EQ(Unfire(*b, "nightly", at, "r1"), 1);
  EXPECT_EQ(delayed(), 0u);
  EXPECT_EQ(Unfire(*a, "nightly", at, "r1"), 0) << "taken back twice";
  auto again = Fire(*b, "nightly", at, "r2");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->created);
  EXPECT_EQ(Unfire(*a, "nightly", at, "r1"), 0) << "a stale revision takes back the new";
  EXPECT_EQ(delayed(), 1u);
  // A firing whose time has come stays.
  const TimeMs past = a->Now() - 1000;
  ASSERT_TRUE(Fire(*a, "later", past, "r1").ok());
  EXPECT_EQ(Unfire(*b, "later", past, "r1"), 0);
}

TEST_F(RedisBackendTest, ReadyOrderIsPriorityThenId) {
  auto b = Make();
  SessionId s = SessionOn(*b, "orders");
  std::vector<JobId> ids;
  for (uint32_t pri : {5u, 1u, 5u, 0u}) {
    std::string body = "p" + std::to_string(pri);  // outlives the put (it holds a view)
    PutRequest r;
    r.body = body;
    r.priority = pri;
    auto res = Get<PutResult>([&](Callback<PutResult> cb) { b->Put(s, r, cb); });
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    ids.push_back(res->id);
  }
  std::vector<JobId> order;
  for (int i = 0; i < 4; ++i) {
    ReplyJobs j = Reserve(*b, s);
    ASSERT_EQ(j.jobs.size(), 1u);
    order.push_back(j.jobs[0].id);
  }
  EXPECT_EQ(order, (std::vector<JobId>{ids[3], ids[1], ids[0], ids[2]}));
}

TEST_F(RedisBackendTest, DelayedJobBecomesReadyOnTime) {
  auto b = Make();
  SessionId s = b->OpenSession();
  auto put = Put(*b, s, "later", 300);
  ASSERT_TRUE(put.ok());
  EXPECT_EQ(put->state, JobState::kDelayed);
  EXPECT_EQ(Reserve(*b, s).status.code(), Code::kTimedOut);
  auto t0 = std::chrono::steady_clock::now();
  ReplyJobs got = Reserve(*b, s, 5000);
  auto waited = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0);
  ASSERT_EQ(got.jobs.size(), 1u) << got.status.ToString();
  EXPECT_EQ(got.jobs[0].id, put->id);
  EXPECT_GE(waited.count(), 150);  // it was not ready before its time
}

TEST_F(RedisBackendTest, KeyedPutIsIdempotentAndCancellable) {
  auto b = Make();
  SessionId s = b->OpenSession();
  auto a = Put(*b, s, "x", 60'000, "orders", "order-42");
  ASSERT_TRUE(a.ok());
  auto again = Put(*b, s, "y", 0, "orders", "order-42");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->id, a->id);
  EXPECT_EQ(again->state, JobState::kDelayed);
  ReplyJobs p = Peek(*b, Backend::PeekKind::kKey, 0, "orders", "order-42");
  ASSERT_EQ(p.jobs.size(), 1u);
  EXPECT_EQ(p.jobs[0].body, "x");
  EXPECT_TRUE(Do([&](Done d) { b->DeleteByKey(s, "orders", "order-42", Ch(d)); }).ok());
  EXPECT_EQ(Peek(*b, Backend::PeekKind::kKey, 0, "orders", "order-42").status.code(),
            Code::kNotFound);
  // The key is free again.
  auto c = Put(*b, s, "z", 0, "orders", "order-42");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->created);
  EXPECT_NE(c->id, a->id);
}

// A reserved job comes back as one string of the functions
// (<member><deadline>,<priority>,<index>,<key length>,<key><body>): keys
// and bodies with commas, digits, NULs and nothing at all come through
// byte for byte, whether one job is reserved, several at once, one by id,
// or several waiters are served by one call.
TEST_F(RedisBackendTest, ReservedJobsKeepTheirKeysAndBodiesByteForByte) {
  auto b = Make();
  SessionId s = SessionOn(*b, "t");
  const std::vector<std::pair<std::string, std::string>> jobs = {
      {"1,2,3,", std::string("x,\0,9,", 6)},
      {"", ""},
      {"k", std::string(20'000, ',')},
      {",", "0000000000001"},
  };
  std::vector<JobId> ids;
  for (const auto& [key, body] : jobs) {
    auto put = Put(*b, s, body, 0, "t", key, 60'000);
    ASSERT_TRUE(put.ok()) << put.status().ToString();
    ids.push_back(put->id);
  }
  auto check = [&](const Job& got, size_t i) {
    EXPECT_EQ(got.id, ids[i]);
    EXPECT_EQ(got.key, jobs[i].first);
    EXPECT_EQ(got.body, jobs[i].second);
    EXPECT_EQ(got.topic, "t");
  };
  ReplyJobs one = Reserve(*b, s);
  ASSERT_EQ(one.jobs.size(), 1u);
  check(one.jobs[0], 0);
  ReplyJobs two = Reserve(*b, s, 0, 2);
  ASSERT_EQ(two.jobs.size(), 2u);
  check(two.jobs[0], 1);
  check(two.jobs[1], 2);
  std::optional<ReplyJobs> by_id;
  b->ReserveJob(s, ids[3], [&](Status st, backend::Jobs v) { by_id = Own(st, v); });
  ASSERT_TRUE(RunUntil([&] { return by_id.has_value(); }));
  ASSERT_EQ(by_id->jobs.size(), 1u) << by_id->status.ToString();
  check(by_id->jobs[0], 3);
  // Three waiters, and three jobs that become ready together: one call
  // serves the three (their answer a table, each job with its waiter's
  // index), and each gets its own job.
  std::vector<std::optional<ReplyJobs>> got(3);
  for (auto& g : got) StartReserve(*b, SessionOn(*b, "t"), 10'000, &g);
  RunFor(milliseconds(100));
  for (size_t i = 0; i < 3; ++i)
    ASSERT_TRUE(Put(*b, s, jobs[i].second, 300, "t", jobs[i].first + "-again").ok());
  ASSERT_TRUE(RunUntil([&] { return got[0] && got[1] && got[2]; }));
  std::set<std::string> bodies;
  for (const auto& g : got) {
    ASSERT_EQ(g->jobs.size(), 1u) << g->status.ToString();
    bodies.insert(g->jobs[0].body);
    EXPECT_EQ(g->jobs[0].key.substr(g->jobs[0].key.size() - 6), "-again");
  }
  EXPECT_EQ(bodies.size(), 3u);
}

TEST_F(RedisBackendTest, ReleaseBuryKickTouchPeek) {
  auto b = Make();
  SessionId s = b->OpenSession();
  auto put = Put(*b, s, "job");
  ASSERT_TRUE(put.ok());
  JobId id = put->id;
  ASSERT_EQ(Reserve(*b, s).jobs.size(), 1u);
  EXPECT_TRUE(Do([&](Done d) { b->Touch(s, id, Ch(d)); }).ok());
  auto rel = Get<JobChange>([&](Callback<JobChange> cb) { b->Release(s, id, 7, 10'000, cb); });
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(rel->state, JobState::kDelayed);
  EXPECT_EQ(Peek(*b, Backend::PeekKind::kDelayed, 0).jobs.at(0).id, id);
  auto kicked = Get<uint64_t>([&](Callback<uint64_t> cb) { b->Kick(s, "default", 10, cb); });
  ASSERT_TRUE(kicked.ok());
  EXPECT_EQ(*kicked, 1u);
  ReplyJobs r = Peek(*b, Backend::PeekKind::kReady, 0);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].priority, 7u);
  ASSERT_EQ(Reserve(*b, s).jobs.size(), 1u);
  EXPECT_TRUE(Do([&](Done d) { b->Bury(s, id, 9, Ch(d)); }).ok());
  EXPECT_EQ(Peek(*b, Backend::PeekKind::kBuried, 0).jobs.at(0).state, JobState::kBuried);
  auto ts = StatsTopic(*b, "default");
  ASSERT_TRUE(ts.ok());
  EXPECT_EQ(ts->buried, 1u);
  EXPECT_EQ(ts->ready, 0u);
  EXPECT_EQ(ts->total_jobs, 1u);
  EXPECT_TRUE(Do([&](Done d) { b->KickJob(s, id, Ch(d)); }).ok());
  auto js = StatsJob(*b, id);
  ASSERT_TRUE(js.ok());
  EXPECT_EQ(js->state, JobState::kReady);
  EXPECT_EQ(js->kicks, 2u);
  EXPECT_EQ(js->buries, 1u);
  EXPECT_EQ(js->releases, 1u);
  EXPECT_EQ(js->reserves, 2u);
  // Not reserved: release, bury and touch do not apply, and say so.
  EXPECT_EQ(Do([&](Done d) { b->Touch(s, id, Ch(d)); }).code(), Code::kConflict);
  auto bury = Get<JobChange>([&](Callback<JobChange> cb) { b->Bury(s, id, 1, cb); });
  EXPECT_EQ(bury.code(), Code::kConflict);
  EXPECT_EQ(bury.status().message(), "job " + std::to_string(id) + " is ready, not reserved");
}

// A kick of many jobs is many calls of at most 1,000 (no call holds Redis
// long), keeps to the state its first chunk took (once buried jobs are
// kicked, delayed ones are not), and kicks no more in all than that state
// held at its first call.
TEST_F(RedisBackendTest, AKickOfManyJobsGoesInChunksOfOneState) {
  auto b = Make(/*sweep_ms=*/600'000);  // no sweep's calls among the kick's
  SessionId s = b->OpenSession();
  constexpr uint32_t kBuried = 2000;
  for (uint32_t i = 0; i < kBuried; ++i) ASSERT_TRUE(Put(*b, s, "b").ok());
  // Reserves 1,000 ready jobs and buries them: whether it could.
  auto bury_1000 = [&] {
    ReplyJobs got = Reserve(*b, s, 0, 1000);
    if (got.jobs.size() != 1000u) return false;
    int buried = 0;
    for (const Job& j : got.jobs)
      b->Bury(s, j.id, std::nullopt, [&](Result<JobChange> r) {
        EXPECT_TRUE(r.ok());
        buried++;
      });
    return RunUntil([&] { return buried == 1000; });
  };
  ASSERT_TRUE(bury_1000());
  ASSERT_TRUE(bury_1000());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(Put(*b, s, "d", 600'000).ok());
  const int calls = Calls("fcall");
  auto kicked = Get<uint64_t>([&](Callback<uint64_t> cb) { b->Kick(s, "default", 5000, cb); });
  ASSERT_TRUE(kicked.ok()) << kicked.status().ToString();
  EXPECT_EQ(*kicked, kBuried);
  EXPECT_EQ(Calls("fcall") - calls, 2) << "1,000 + 1,000, and no more than the 2,000 there were";
  auto ts = StatsTopic(*b, "default");
  ASSERT_TRUE(ts.ok());
  EXPECT_EQ(ts->ready, kBuried);
  EXPECT_EQ(ts->buried, 0u);
  EXPECT_EQ(ts->delayed, 10u);
  // With none buried, delayed ones, a chunk at a time too.
  kicked = Get<uint64_t>([&](Callback<uint64_t> cb) { b->Kick(s, "default", 4, cb); });
  ASSERT_TRUE(kicked.ok());
  EXPECT_EQ(*kicked, 4u);
  // No more calls than the state held asks: 1,000 buried, one full chunk,
  // and the kick ends there (it kicks no more than that in all).
  ASSERT_TRUE(bury_1000());
  const int before = Calls("fcall");
  kicked = Get<uint64_t>([&](Callback<uint64_t> cb) { b->Kick(s, "default", 5000, cb); });
  ASSERT_TRUE(kicked.ok());
  EXPECT_EQ(*kicked, 1000u);
  EXPECT_EQ(Calls("fcall") - before, 1);
}

// A page of a state larger than one call of dq_list reads (20,000
// members) is made in several calls of bounded length, so that Redis serves
// others between them, and is the page one call would make: the first jobs
// in id order after the cursor, either way.
TEST_F(RedisBackendTest, BrowsingAStateOfManyJobsGoesInCallsOfBoundedLength) {
  auto b = Make(/*sweep_ms=*/600'000);  // no sweep's calls among the list's
  SessionId s = b->OpenSession();
  constexpr size_t kJobs = 45'000;
  std::vector<JobId> ids;
  size_t answered = 0;
  PutRequest r;
  r.body = "x";
  for (size_t i = 0; i < kJobs; ++i)
    b->Put(s, r, [&](Result<PutResult> x) {
      answered++;
      if (x.ok()) ids.push_back(x->id);
    });
  ASSERT_TRUE(RunUntil([&] { return answered == kJobs; }, std::chrono::seconds(60)));
  ASSERT_EQ(ids.size(), kJobs);
  std::sort(ids.begin(), ids.end());
  struct Page {
    std::vector<JobId> ids;
    bool more = false;
  };
  // A page; with `worker`, a reserve of the first 1,000 ready jobs is sent
  // right after the first call (on the same connection: Redis runs it
  // between that call and the next).
  SessionId worker = b->OpenSession();
  auto list = [&](JobId after, uint32_t limit, bool desc, bool reserving = false) {
    ListJobsRequest q;
    q.topic = "default";
    q.state = JobState::kReady;
    q.after = after;
    q.limit = limit;
    q.desc = desc;
    std::optional<Page> page;
    b->ListJobs(q, [&](Status st, Jobs jobs, bool more) {
      EXPECT_TRUE(st.ok()) << st.ToString();
      page.emplace();
      for (const JobView& v : jobs) page->ids.push_back(v.id);
      page->more = more;
    });
    std::optional<ReplyJobs> taken;
    if (reserving)
      b->Reserve(ReserveRequest{worker, 0, 1000, false},
                 [&](Status st, backend::Jobs v) { taken = Own(st, v); });
    EXPECT_TRUE(RunUntil([&] { return page.has_value() && (!reserving || taken.has_value()); }));
    if (reserving) EXPECT_EQ(taken ? taken->jobs.size() : 0u, 1000u);
    return page.value_or(Page{});
  };
  const int calls = Calls("fcall");
  Page p = list(0, 10, false);
  EXPECT_EQ(Calls("fcall") - calls, 3) << "45,000 members, 20,000 a call";
  EXPECT_EQ(p.ids, std::vector<JobId>(ids.begin(), ids.begin() + 10));
  EXPECT_TRUE(p.more);
  p = list(ids[kJobs - 5], 10, false);
  EXPECT_EQ(p.ids, std::vector<JobId>(ids.end() - 4, ids.end()));
  EXPECT_FALSE(p.more);
  p = list(0, 3, true);
  EXPECT_EQ(p.ids, (std::vector<JobId>{ids[kJobs - 1], ids[kJobs - 2], ids[kJobs - 3]}));
  EXPECT_TRUE(p.more);
  p = list(ids[2], 10, true);
  EXPECT_EQ(p.ids, (std::vector<JobId>{ids[1], ids[0]}));
  EXPECT_FALSE(p.more);
  // From the middle: what follows the cursor, wherever the calls cut.
  p = list(ids[29'999], 5, false);
  EXPECT_EQ(p.ids, std::vector<JobId>(ids.begin() + 30'000, ids.begin() + 30'005));
  EXPECT_TRUE(p.more);

  // A busy topic: a worker reserves the first 1,000 ready jobs between the
  // first call and the second. The ranks of the jobs not read yet move
  // back by 1,000: the next call goes on after the last job read, not at
  // its old rank, so none of them is skipped.
  p = list(ids[19'999], 5, false, /*reserving=*/true);
  EXPECT_EQ(p.ids, std::vector<JobId>(ids.begin() + 20'000, ids.begin() + 20'005));
  EXPECT_TRUE(p.more);
  // The jobs the first call chose (the first ones after the cursor) are
  // reserved before the last call: it starts again, and the page is of
  // the jobs ready now, not a short one that says nothing follows.
  p = list(0, 5, false, /*reserving=*/true);
  EXPECT_EQ(p.ids, std::vector<JobId>(ids.begin() + 2'000, ids.begin() + 2'005));
  EXPECT_TRUE(p.more);
}

TEST_F(RedisBackendTest, TtrExpiryReturnsTheJobAndCountsATimeout) {
  auto b = Make(50);
  SessionId s = b->OpenSession();
  auto put = Put(*b, s, "slow", 0, "", "", /*ttr=*/200);
  ASSERT_TRUE(put.ok());
  ASSERT_EQ(Reserve(*b, s).jobs.size(), 1u);
  SessionId other = b->OpenSession();
  ReplyJobs again = Reserve(*b, other, 3000);
  ASSERT_EQ(again.jobs.size(), 1u) << again.status.ToString();
  EXPECT_EQ(again.jobs[0].id, put->id);
  auto js = StatsJob(*b, put->id);
  ASSERT_TRUE(js.ok());
  EXPECT_EQ(js->timeouts, 1u);
  EXPECT_EQ(js->reserves, 2u);
  // The first session no longer holds it.
  EXPECT_EQ(Do([&](Done d) { b->Delete(s, put->id, Ch(d)); }).code(), Code::kConflict);
  EXPECT_TRUE(Do([&](Done d) { b->Delete(other, put->id, Ch(d)); }).ok());
}

TEST_F(RedisBackendTest, MaxTriesAndBackoff) {
  auto b = Make();
  SessionId s = b->OpenSession();
  auto put = Put(*b, s, "retry", 0, "", "", 60'000, /*max_tries=*/2, Backoff::List({150}));
  ASSERT_TRUE(put.ok());
  ASSERT_EQ(Reserve(*b, s).jobs.size(), 1u);
  auto rel = Get<JobChange>(
      [&](Callback<JobChange> cb) { b->Release(s, put->id, 1024, std::nullopt, cb); });
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(rel->state, JobState::kDelayed);  // the back-off's first delay
  ReplyJobs second = Reserve(*b, s, 3000);
  ASSERT_EQ(second.jobs.size(), 1u);
  rel = Get<JobChange>(
      [&](Callback<JobChange> cb) { b->Release(s, put->id, 1024, std::nullopt, cb); });
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(rel->state, JobState::kBuried);  // two tries used
}

TEST_F(RedisBackendTest, ClosedSessionReturnsItsJobs) {
  auto b = Make();
  SessionId s = b->OpenSession();
  auto put = Put(*b, s, "held");
  ASSERT_TRUE(put.ok());
  ASSERT_EQ(Reserve(*b, s).jobs.size(), 1u);
  SessionId other = b->OpenSession();
  EXPECT_EQ(Reserve(*b, other).status.code(), Code::kTimedOut);
  b->CloseSession(s);
  ReplyJobs got = Reserve(*b, other, 2000);
  ASSERT_EQ(got.jobs.size(), 1u);
  EXPECT_EQ(got.jobs[0].id, put->id);
}

// A reserve cancelled while its first call to Redis still runs is never
// answered, and the job that call took goes back as if never reserved
// (the front-ends cancel a reserve when a reload takes its right, or its
// client stops reading).
TEST_F(RedisBackendTest, AReserveCancelledInFlightAnswersNobodyAndGivesItsJobBack) {
  auto b = Make();
  SessionId s = b->OpenSession();
  auto put = Put(*b, s, "taken back");
  ASSERT_TRUE(put.ok());
  for (bool detach : {false, true}) {
    std::optional<ReplyJobs> got;
    b->Reserve(ReserveRequest{s, 10'000, 1, detach},
               [&](Status st, backend::Jobs v) { got = Own(st, v); });
    b->CancelReserve(s);  // before the loop has run: the call is in flight
    RunFor(milliseconds(300));
    EXPECT_FALSE(got.has_value()) << "a cancelled reserve was answered";
    auto st = StatsJob(*b, put->id);
    ASSERT_TRUE(st.ok()) << st.status().message();
    EXPECT_EQ(st->state, JobState::kReady);
    EXPECT_EQ(st->reserves, 0u);
  }
  // A reserve after a cancelled one is answered, with the job.
  ReplyJobs again = Reserve(*b, s, 1000);
  ASSERT_EQ(again.jobs.size(), 1u);
  EXPECT_EQ(again.jobs[0].id, put->id);
}

TEST_F(RedisBackendTest, WaitingReserveOnOneInstanceIsWokenByAPutOnAnother) {
  auto a = Make();
  // No sweep within the test: only the pub/sub wake-up can serve b's wait.
  auto b = Make(/*sweep_ms=*/600'000);
  SessionId sa = a->OpenSession(), sb = b->OpenSession();
  std::optional<ReplyJobs> got;
  StartReserve(*b, sb, 10'000, &got);
  RunFor(milliseconds(50));
  EXPECT_FALSE(got.has_value());
  auto put = Put(*a, sa, "cross");
  ASSERT_TRUE(put.ok());
  ASSERT_TRUE(RunUntil([&] { return got.has_value(); }));
  ASSERT_EQ(got->jobs.size(), 1u);
  EXPECT_EQ(got->jobs[0].id, put->id);
  // Ids are unique across instances.
  auto p2 = Put(*b, sb, "second");
  ASSERT_TRUE(p2.ok());
  EXPECT_NE(p2->id, put->id);
}

// A wake-up goes out only when a reserve may be waiting: after a reserve
// found no ready job, the next put publishes once; puts into a ready set
// that no reserve found empty since publish nothing. The waiter on the
// other instance (no sweep) is served by that one wake-up.
TEST_F(RedisBackendTest, WakeUpsGoOutOnlyWhenAReserveMayWait) {
  auto publishes = [&] { return Calls("publish"); };
  auto a = Make();
  auto b = Make(/*sweep_ms=*/600'000);
  SessionId sa = a->OpenSession(), sb = b->OpenSession();
  // A new topic starts wanting: its first ready job publishes, the rest not.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Put(*a, sa, "j" + std::to_string(i)).ok());
  EXPECT_EQ(publishes(), 1);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Reserve(*b, sb).jobs.size(), 1u);
  EXPECT_EQ(publishes(), 1);
  // b waits: its tries find nothing, so a's next put publishes, once.
  std::optional<ReplyJobs> got;
  StartReserve(*b, sb, 10'000, &got);
  RunFor(milliseconds(100));
  ASSERT_FALSE(got.has_value());
  auto put = Put(*a, sa, "wanted");
  ASSERT_TRUE(put.ok());
  ASSERT_TRUE(RunUntil([&] { return got.has_value(); }));
  ASSERT_EQ(got->jobs.size(), 1u);
  EXPECT_EQ(got->jobs[0].id, put->id);
  EXPECT_EQ(publishes(), 2);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Put(*a, sa, "k" + std::to_string(i)).ok());
  EXPECT_EQ(publishes(), 2);
  // A reserve that comes away empty (timeout 0) also makes the next put
  // publish: its caller could have waited.
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Reserve(*b, sb).jobs.size(), 1u);
  EXPECT_EQ(Reserve(*b, sb).status.code(), Code::kTimedOut);
  ASSERT_TRUE(Put(*a, sa, "after").ok());
  EXPECT_EQ(publishes(), 3);
  // The end of a pause publishes whatever the flag: reserves that found
  // the topic paused may wait.
  ASSERT_TRUE(Do([&](Done d) { a->PauseTopic("default", 100, d); }).ok());
  int before = publishes();
  RunFor(milliseconds(400));
  EXPECT_GE(publishes(), before + 1);
}

TEST_F(RedisBackendTest, BatchReserveAndDetach) {
  auto b = Make();
  SessionId s = b->OpenSession();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Put(*b, s, "j" + std::to_string(i)).ok());
  ReplyJobs got = Reserve(*b, s, 0, 3, /*detach=*/true);
  ASSERT_EQ(got.jobs.size(), 3u);
  EXPECT_EQ(got.jobs[0].body, "j0");
  EXPECT_EQ(got.jobs[2].body, "j2");
  // Detached: each is held by its own lease, which any session may name
  // (and nothing else); closing does not return them.
  EXPECT_FALSE(got.jobs[0].lease.empty());
  EXPECT_NE(got.jobs[0].lease, got.jobs[1].lease);
  EXPECT_NE(got.jobs[1].lease, got.jobs[2].lease);
  SessionId other = b->OpenSession();
  EXPECT_EQ(Do([&](Done d) { b->Delete(other, got.jobs[0].id, Ch(d)); }).code(), Code::kConflict);
  EXPECT_EQ(
      Do([&](Done d) { b->Finish(Claim(other, got.jobs[1].lease), got.jobs[0].id, Ch(d)); }).code(),
      Code::kLeaseLost);
  EXPECT_TRUE(
      Do([&](Done d) { b->Finish(Claim(other, got.jobs[0].lease), got.jobs[0].id, Ch(d)); }).ok());
  b->CloseSession(s);
  auto ts = StatsTopic(*b, "default");
  ASSERT_TRUE(ts.ok());
  EXPECT_EQ(ts->reserved, 2u);
  EXPECT_EQ(ts->ready, 2u);
}

TEST_F(RedisBackendTest, PauseClearAndStats) {
  auto b = Make();
  SessionId s = b->OpenSession();
  ASSERT_TRUE(b->Use(s, "t1").ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Put(*b, s, "x").ok());
  ASSERT_TRUE(Put(*b, s, "d", 60'000).ok());
  EXPECT_TRUE(Do([&](Done d) { b->PauseTopic("t1", 60'000, d); }).ok());
  ASSERT_TRUE(b->Watch(s, "t1").ok());
  ASSERT_TRUE(b->Ignore(s, "default").ok());
  EXPECT_EQ(Reserve(*b, s).status.code(), Code::kTimedOut);
  auto ts = StatsTopic(*b, "t1");
  ASSERT_TRUE(ts.ok());
  EXPECT_EQ(ts->ready, 3u);
  EXPECT_EQ(ts->delayed, 1u);
  EXPECT_EQ(ts->cmd_pause, 1u);
  EXPECT_GT(ts->pause_time_left_ms, 50'000);
  auto all = Get<EngineStats>([&](Callback<EngineStats> cb) { b->Stats(cb); });
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->ready, 3u);
  EXPECT_EQ(all->delayed, 1u);
  auto topics = Get<std::vector<std::string>>(
      [&](Callback<std::vector<std::string>> cb) { b->ListTopics(cb); });
  ASSERT_TRUE(topics.ok());
  EXPECT_EQ(*topics, (std::vector<std::string>{"default", "t1"}));
  auto cleared =
      Get<uint64_t>([&](Callback<uint64_t> cb) { b->ClearTopic(s, "t1", kClearAll, cb); });
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(*cleared, 4u);
  EXPECT_EQ(StatsTopic(*b, "nope").code(), Code::kNotFound);
}

// A call writes the jobs it changed at its end and deletes the ones it
// finished with one DEL of at most 500 keys (docs/redis-backend.md): however
// a job leaves, and however many leave in one call, its key goes too.
TEST_F(RedisBackendTest, FinishedJobsLeaveNoKeysBehind) {
  auto b = Make();
  SessionId s = SessionOn(*b, "gc");
  // All in flight at once, so that calls carry many puts each.
  constexpr int kJobs = 1500;
  std::vector<std::string> bodies;
  for (int i = 0; i < kJobs; ++i) bodies.push_back("job-" + std::to_string(i));
  int replies = 0, failed = 0;
  for (int i = 0; i < kJobs; ++i) {
    PutRequest r;
    r.body = bodies[i];
    r.delay_ms = i % 3 == 0 ? 600'000 : 0;
    b->Put(s, r, [&](Result<PutResult> x) {
      ++replies;
      if (!x.ok()) ++failed;
    });
  }
  ASSERT_TRUE(RunUntil([&] { return replies == kJobs; }, milliseconds(20000)));
  ASSERT_EQ(failed, 0);
  EXPECT_EQ(CountKeys("dq:{gc}:j:*"), kJobs);
  // 100 reserved at once: 60 deleted, 20 released and then deleted, 20 buried.
  ReplyJobs got = Reserve(*b, s, 0, 100);
  ASSERT_EQ(got.jobs.size(), 100u) << got.status.ToString();
  int i = 0;
  for (const Job& j : got.jobs) {
    if (i < 60) {
      EXPECT_TRUE(Do([&](Done d) { b->Delete(s, j.id, Ch(d)); }).ok());
    } else if (i < 80) {
      auto st = Get<JobChange>(
          [&](Callback<JobChange> cb) { b->Release(s, j.id, j.priority, TimeMs{0}, cb); });
      EXPECT_TRUE(st.ok() && st->state == JobState::kReady);
      EXPECT_TRUE(Do([&](Done d) { b->Delete(s, j.id, Ch(d)); }).ok());
    } else {
      EXPECT_TRUE(Do([&](Done d) { b->Bury(s, j.id, j.priority, Ch(d)); }).ok());
    }
    ++i;
  }
  EXPECT_EQ(CountKeys("dq:{gc}:j:*"), kJobs - 80);
  // The rest in one clear: more than one call takes (1,000), more than one
  // DEL names (500).
  auto cleared =
      Get<uint64_t>([&](Callback<uint64_t> cb) { b->ClearTopic(s, "gc", kClearAll, cb); });
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(*cleared, static_cast<uint64_t>(kJobs - 80));
  EXPECT_EQ(CountKeys("dq:{gc}:j:*"), 0);
  auto ts = StatsTopic(*b, "gc");
  ASSERT_TRUE(ts.ok());
  EXPECT_EQ(ts->ready + ts->delayed + ts->buried + ts->reserved, 0u);
  EXPECT_EQ(ts->total_jobs, static_cast<uint64_t>(kJobs));
  EXPECT_EQ(ts->cmd_delete, 80u);
}

// Naming a topic that has no jobs (watch, reserve, peek, stats, kick,
// clear) leaves nothing in Redis: no key of the topic and no registry
// entry; so the sweep, which calls Redis per topic that has jobs or a
// pause, does not call it for them (issue 25: 17,000 such topics cost
// Redis 91% of a core with no jobs anywhere).
TEST_F(RedisBackendTest, TopicsWithoutJobsLeaveNothingInRedis) {
  auto b = Make(50);
  SessionId s = b->OpenSession();
  constexpr int kTopics = 200;
  for (int i = 0; i < kTopics; ++i) {
    std::string t = "idle-" + std::to_string(i);
    SessionId one = SessionOn(*b, t);
    EXPECT_EQ(Reserve(*b, one).status.code(), Code::kTimedOut);
    b->CloseSession(one);
    ASSERT_TRUE(b->Watch(s, t).ok());
  }
  // One reserve over all of them, one that waits and gives up.
  EXPECT_EQ(Reserve(*b, s).status.code(), Code::kTimedOut);
  EXPECT_EQ(Reserve(*b, s, 100).status.code(), Code::kTimedOut);
  EXPECT_TRUE(Peek(*b, Backend::PeekKind::kReady, 0, "idle-1").jobs.empty());
  EXPECT_TRUE(StatsTopic(*b, "idle-2").ok());  // watched here
  EXPECT_EQ(StatsTopic(*b, "never-named").code(), Code::kNotFound);
  auto kicked = Get<uint64_t>([&](Callback<uint64_t> cb) { b->Kick(s, "idle-3", 10, cb); });
  EXPECT_TRUE(kicked.ok() && *kicked == 0u);
  auto cleared =
      Get<uint64_t>([&](Callback<uint64_t> cb) { b->ClearTopic(s, "idle-4", kClearAll, cb); });
  EXPECT_TRUE(cleared.ok() && *cleared == 0u);
  RunFor(milliseconds(200));
  EXPECT_EQ(CountKeys("dq:{idle-*"), 0);
  EXPECT_EQ(Cli("hlen 'dq:{dq}:topic-names'"), "0");
  // Ten sweeps of 50 ms: no call for any of the 200 topics.
  int before = Calls("fcall");
  RunFor(milliseconds(500));
  EXPECT_LT(Calls("fcall") - before, 20);
}

// A topic's incarnation (docs/redis-backend.md, "Topics come and go"):
// its sets go with its last job, its number and sequence stay for
// topic_idle_ms (a put meanwhile goes on with them), then it ends, its
// number leaves the registry, and a later put gives it a new number. An id
// of the ended incarnation is not found, on any instance, even where the
// new incarnation has a job of the same member; a pause keeps a topic
// without jobs alive until it ends.
TEST_F(RedisBackendTest, IdleTopicsEndAndTheirIdsNeverNameAnotherJob) {
  auto a = MakeQuick(), b = MakeQuick();
  SessionId sa = SessionOn(*a, "cycle"), sb = b->OpenSession();
  constexpr JobId kSeq = (JobId{1} << RedisBackend::kSeqBits) - 1;
  auto p1 = Put(*a, sa, "one");
  ASSERT_TRUE(p1.ok()) << p1.status().ToString();
  ReplyJobs got = Reserve(*a, sa);
  ASSERT_EQ(got.jobs.size(), 1u);
  ASSERT_TRUE(Do([&](Done d) { a->Delete(sa, got.jobs[0].id, Ch(d)); }).ok());
  EXPECT_EQ(CountKeys("dq:{cycle}:*"), 1);  // the topic string alone
  auto p2 = Put(*a, sa, "two");
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(p2->id, p1->id + 1);  // within topic_idle_ms: the same number
  EXPECT_EQ(Peek(*b, Backend::PeekKind::kId, p2->id).jobs.size(), 1u);
  auto cleared =
      Get<uint64_t>([&](Callback<uint64_t> cb) { a->ClearTopic(sa, "cycle", kClearAll, cb); });
  ASSERT_TRUE(cleared.ok() && *cleared == 1u);
  EXPECT_EQ(Cli("hlen 'dq:{dq}:topic-names'"), "1");
  // Idle for topic_idle_ms: the sweeps end it; a tombstone is left for a
  // while (RETIRED_TTL), which keeps its number from coming back.
  EXPECT_TRUE(RunUntil([&] { return Cli("hlen 'dq:{dq}:topic-names'") == "0"; }));
  EXPECT_EQ(CountKeys("dq:{cycle}:*"), 1);
  EXPECT_GT(std::atoi(Cli("pttl 'dq:{cycle}:topic'").c_str()), 0);
  EXPECT_EQ(Peek(*a, Backend::PeekKind::kId, p2->id).status.code(), Code::kNotFound);
  // b still has the old number for it: its put learns the new one.
  auto p3 = Put(*b, sb, "three", 0, "cycle");
  ASSERT_TRUE(p3.ok()) << p3.status().ToString();
  EXPECT_GT(p3->id >> RedisBackend::kSeqBits, p1->id >> RedisBackend::kSeqBits);
  EXPECT_EQ(p3->id & kSeq, 1u);  // the member p1 had
  for (RedisBackend* x : {a.get(), b.get()}) {
    ReplyJobs by_old = Peek(*x, Backend::PeekKind::kId, p1->id);
    EXPECT_EQ(by_old.status.code(), Code::kNotFound);
    ReplyJobs by_new = Peek(*x, Backend::PeekKind::kId, p3->id);
    ASSERT_EQ(by_new.jobs.size(), 1u);
    EXPECT_EQ(by_new.jobs[0].body, "three");
  }
  EXPECT_EQ(Do([&](Done d) { a->Delete(0, p1->id, Ch(d)); }).code(), Code::kNotFound);
  EXPECT_EQ(Do([&](Done d) { b->Delete(0, p3->id, Ch(d)); }).code(), Code::kOk);

  // A pause of a topic without jobs (watched here) lives until it ends.
  // (Whether "cycle" is still registered beside it depends on how long the
  // steps above took: its topic_idle_ms runs from its last delete.)
  auto pz_registered = [&] {
    return Cli("hvals 'dq:{dq}:topic-names'").find("pz") != std::string::npos;
  };
  SessionId sp = SessionOn(*a, "pz");
  EXPECT_TRUE(Do([&](Done d) { a->PauseTopic("pz", 300, d); }).ok());
  EXPECT_TRUE(pz_registered());
  RunFor(milliseconds(200));
  EXPECT_TRUE(pz_registered());
  EXPECT_TRUE(RunUntil([&] { return Cli("hlen 'dq:{dq}:topic-names'") == "0"; }));
  // One nobody here uses or watches, and without jobs, does not exist.
  b->CloseSession(sb);
  a->CloseSession(sp);
  EXPECT_EQ(Do([&](Done d) { b->PauseTopic("pz", 300, d); }).code(), Code::kNotFound);
  EXPECT_EQ(CountKeys("dq:{pz}:*"), 1);  // its tombstone
}

// Two instances put into a topic that has no incarnation at once: each
// registers a number, one number becomes the topic's and the other is
// retired by a later sweep; both jobs keep ids of the topic's number, which
// a third instance (that knows nothing yet) resolves, and a delayed job an
// instance put before it went away becomes ready in another's sweeps.
TEST_F(RedisBackendTest, ConcurrentFirstPutsShareOneNumber) {
  auto a = MakeQuick(), b = MakeQuick();
  SessionId sa = a->OpenSession(), sb = b->OpenSession();
  std::optional<Result<PutResult>> ra, rb;
  PutRequest r;
  r.topic = "race";
  r.body = "from-a";
  a->Put(sa, r, [&](Result<PutResult> x) { ra = std::move(x); });
  r.body = "from-b";
  b->Put(sb, r, [&](Result<PutResult> x) { rb = std::move(x); });
  ASSERT_TRUE(RunUntil([&] { return ra.has_value() && rb.has_value(); }));
  ASSERT_TRUE(ra->ok() && rb->ok()) << ra->status().ToString() << rb->status().ToString();
  EXPECT_EQ((*ra)->id >> RedisBackend::kSeqBits, (*rb)->id >> RedisBackend::kSeqBits);
  EXPECT_NE((*ra)->id, (*rb)->id);
  EXPECT_EQ(Cli("hlen 'dq:{dq}:topic-names'"), "2");
  // The number the topic did not take leaves the registry; the other stays.
  EXPECT_TRUE(RunUntil([&] { return Cli("hlen 'dq:{dq}:topic-names'") == "1"; }));
  RunFor(milliseconds(500));
  EXPECT_EQ(Cli("hlen 'dq:{dq}:topic-names'"), "1");
  auto c = MakeQuick();
  for (JobId id : {(*ra)->id, (*rb)->id}) {
    ReplyJobs p = Peek(*c, Backend::PeekKind::kId, id);
    ASSERT_EQ(p.jobs.size(), 1u) << p.status.ToString();
    EXPECT_EQ(p.jobs[0].topic, "race");
  }
  // A delayed job of an instance that went away: another's sweep ticks its
  // topic, so it is ready when due (and a wake-up goes out).
  auto late = Put(*a, sa, "late", 300, "gone-with-a");
  ASSERT_TRUE(late.ok());
  a->CloseSession(sa);
  a.reset();
  SessionId sc = SessionOn(*c, "gone-with-a");
  RunFor(milliseconds(500));
  EXPECT_EQ(Cli("zcard 'dq:{gone-with-a}:ready'"), "2");  // the job and the sentinel
  ReplyJobs got = Reserve(*c, sc);
  ASSERT_EQ(got.jobs.size(), 1u);
  EXPECT_EQ(got.jobs[0].id, late->id);
}

// A topic's sets hold a sentinel that keeps them skiplists (lua/delayq.lua,
// SENT); a topic written before it gets it on its next call, and no count,
// peek, kick or reserve ever shows it.
TEST_F(RedisBackendTest, SetsStaySkiplistsAndHideTheirSentinel) {
  auto b = Make();
  SessionId s = SessionOn(*b, "sk");
  ASSERT_TRUE(Put(*b, s, "a").ok());
  for (const char* set : {"ready", "delayed", "reserved", "buried"})
    EXPECT_EQ(Cli(std::string("object encoding 'dq:{sk}:") + set + "'"), "skiplist") << set;
  auto ts = StatsTopic(*b, "sk");
  ASSERT_TRUE(ts.ok());
  EXPECT_EQ(ts->ready, 1u);
  EXPECT_EQ(ts->delayed + ts->reserved + ts->buried, 0u);
  ReplyJobs got = Reserve(*b, s, 0, 5);
  ASSERT_EQ(got.jobs.size(), 1u);  // the job, and not the sentinel
  ReplyJobs none = Reserve(*b, s, 0, 1);
  EXPECT_EQ(none.status.code(), Code::kTimedOut);
  EXPECT_TRUE(none.jobs.empty());
  EXPECT_EQ(Cli("zcard 'dq:{sk}:ready'"), "1");  // the sentinel went back
  for (auto kind :
       {Backend::PeekKind::kReady, Backend::PeekKind::kDelayed, Backend::PeekKind::kBuried})
    EXPECT_TRUE(Peek(*b, kind, 0, "sk").jobs.empty());
  auto kicked = Get<uint64_t>([&](Callback<uint64_t> cb) { b->Kick(s, "sk", 10, cb); });
  ASSERT_TRUE(kicked.ok());
  EXPECT_EQ(*kicked, 0u);

  // The topic's last job goes: its sets go too (the topic string keeps its
  // number and sequence: docs/redis-backend.md, "Topics come and go"); the
  // next put brings them back, with their sentinel, and the sequence goes
  // on.
  ASSERT_EQ(got.jobs.size(), 1u);
  ASSERT_TRUE(Do([&](Done d) { b->Delete(s, got.jobs[0].id, Ch(d)); }).ok());
  for (const char* set : {"ready", "delayed", "reserved", "buried"})
    EXPECT_EQ(Cli(std::string("exists 'dq:{sk}:") + set + "'"), "0") << set;
  auto put = Put(*b, s, "b", 60'000);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->id, got.jobs[0].id + 1);
  EXPECT_EQ(Cli("object encoding 'dq:{sk}:delayed'"), "skiplist");
  EXPECT_EQ(Cli("zcard 'dq:{sk}:delayed'"), "2");
  ts = StatsTopic(*b, "sk");
  ASSERT_TRUE(ts.ok());
  EXPECT_EQ(ts->delayed, 1u);
  EXPECT_EQ(ts->ready + ts->reserved + ts->buried, 0u);
}

// A job's string packs ten values while max_tries, back-off and the counts
// of timeouts, releases, buries and kicks are at their defaults, sixteen
// once one is not (lua/delayq.lua, pack_job); a job string of the order
// before (sixteen values, the body last) is still read, and written back
// in the new order.
TEST_F(RedisBackendTest, JobStringsLeaveOutRareFieldsAndOldOnesStillRead) {
  auto b = Make();
  SessionId s = SessionOn(*b, "jf");
  auto member = [](JobId id) { return "'dq:{jf}:j:" + MemberOf(id) + "'"; };
  // How many values a job's string packs, and the type of its last.
  auto shape = [&](JobId id) {
    return Cli(
        "eval \"local t = {cmsgpack.unpack(redis.call('GET', KEYS[1]))}; "
        "return #t .. ' ' .. type(t[#t])\" 1 " +
        member(id));
  };
  // The counts stats-job gives: reserves, timeouts, releases, buries,
  // kicks, max_tries, and the body's size.
  auto counts = [&](JobId id) {
    auto st = StatsJob(*b, id);
    if (!st.ok()) return std::vector<uint32_t>();
    return std::vector<uint32_t>{st->reserves, st->timeouts,  st->releases, st->buries,
                                 st->kicks,    st->max_tries, st->body_size};
  };
  auto plain = Put(*b, s, "plain", 0, "jf");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(shape(plain->id), "10 string");
  auto retried = Put(*b, s, "retried", 0, "jf", "", 60'000, 3, Backoff::List({5'000, 9'000}));
  ASSERT_TRUE(retried.ok());
  EXPECT_EQ(shape(retried->id), "16 number");

  // A reserve and a release of the plain job make it count a release (and
  // put it behind the other job, by priority).
  ReplyJobs got = Reserve(*b, s);
  ASSERT_EQ(got.jobs.size(), 1u);
  ASSERT_EQ(got.jobs[0].id, plain->id);
  EXPECT_EQ(shape(plain->id), "10 string");
  auto rel = Get<JobChange>(
      [&](Callback<JobChange> cb) { b->Release(s, plain->id, 2000, TimeMs{0}, cb); });
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(rel->state, JobState::kReady);
  EXPECT_EQ(shape(plain->id), "16 number");
  EXPECT_EQ(counts(plain->id), (std::vector<uint32_t>{1, 0, 1, 0, 0, 0, 5}));

  // The retried job with the order before: state, priority, due, owner,
  // key, delay, ttr, created, max_tries, back-off, reserves, timeouts,
  // releases, buries, kicks, body.
  Cli("eval \"redis.call('SET', KEYS[1], cmsgpack.pack('r', 1024, 0, '', '', 0, 60000, "
      "1763800000000, 4, 'L:7000', 1, 2, 3, 4, 5, 'old body'))\" 1 " +
      member(retried->id));
  auto js = StatsJob(*b, retried->id);
  ASSERT_TRUE(js.ok()) << js.status().ToString();
  EXPECT_EQ(js->state, JobState::kReady);
  EXPECT_EQ(js->created_ms, 1'763'800'000'000);
  EXPECT_EQ(js->ttr_ms, 60'000);
  EXPECT_EQ(counts(retried->id), (std::vector<uint32_t>{1, 2, 3, 4, 5, 4, 8}));
  // Reserved and released: its back-off is the one it had, its second try
  // of four.
  got = Reserve(*b, s);
  ASSERT_EQ(got.jobs.size(), 1u);
  EXPECT_EQ(got.jobs[0].id, retried->id);
  EXPECT_EQ(got.jobs[0].body, "old body");
  rel = Get<JobChange>(
      [&](Callback<JobChange> cb) { b->Release(s, retried->id, 1024, std::nullopt, cb); });
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(rel->state, JobState::kDelayed);
  EXPECT_EQ(shape(retried->id), "16 number");
  js = StatsJob(*b, retried->id);
  ASSERT_TRUE(js.ok());
  EXPECT_EQ(js->state, JobState::kDelayed);
  EXPECT_EQ(js->delay_ms, 7'000);
  EXPECT_EQ(counts(retried->id), (std::vector<uint32_t>{2, 2, 4, 4, 5, 4, 8}));
}

// The reserved set's changes of a call are made at its end, in one ZREM
// and one ZADD (lua/delayq.lua, flush_reserved). Operations queued in one
// turn of the loop go in one call: a reserve, touch, release and second
// reserve of one job, and a reserve and delete of another, leave the set as
// the operations one by one would.
TEST_F(RedisBackendTest, ReservedSetChangesOfOneCallAddUp) {
  // No sweep within the test: its calls would be counted too (a loaded
  // machine can take 200 ms between two counts).
  auto b = Make(60'000);
  SessionId s = SessionOn(*b, "rs");
  auto a = Put(*b, s, "a", 0, "rs");
  auto c = Put(*b, s, "c", 0, "rs");
  ASSERT_TRUE(a.ok() && c.ok());
  auto in_set = [&](JobId id) { return !Cli("zscore 'dq:{rs}:reserved' " + MemberOf(id)).empty(); };
  std::optional<ReplyJobs> ra, ra2, rc;
  std::optional<Status> touched, deleted;
  std::optional<Result<JobChange>> released;
  int calls = Calls("fcall");
  b->ReserveJob(s, a->id, [&](Status st, backend::Jobs v) { ra = Own(st, v); });
  b->Touch(s, a->id, [&](Result<JobChange> st_r) {
    Status st = st_r.status();
    touched = st;
  });
  b->Release(s, a->id, 1024, TimeMs{0}, [&](Result<JobChange> r) { released = r; });
  b->ReserveJob(s, a->id, [&](Status st, backend::Jobs v) { ra2 = Own(st, v); });
  b->ReserveJob(s, c->id, [&](Status st, backend::Jobs v) { rc = Own(st, v); });
  b->Delete(s, c->id, [&](Result<JobChange> st_r) {
    Status st = st_r.status();
    deleted = st;
  });
  ASSERT_TRUE(RunUntil([&] { return ra && touched && released && ra2 && rc && deleted; }));
  EXPECT_EQ(Calls("fcall") - calls, 1);
  ASSERT_EQ(ra->jobs.size(), 1u);
  EXPECT_TRUE(touched->ok());
  ASSERT_TRUE(released->ok());
  EXPECT_EQ((*released)->state, JobState::kReady);
  ASSERT_EQ(ra2->jobs.size(), 1u);
  ASSERT_EQ(rc->jobs.size(), 1u);
  EXPECT_TRUE(deleted->ok());
  EXPECT_TRUE(in_set(a->id));
  EXPECT_FALSE(in_set(c->id));
  EXPECT_EQ(Cli("zcard 'dq:{rs}:reserved'"), "2");  // a, and the sentinel
  auto js = StatsJob(*b, a->id);
  ASSERT_TRUE(js.ok());
  EXPECT_EQ(js->state, JobState::kReserved);
  EXPECT_EQ(js->reserves, 2u);
  EXPECT_EQ(js->releases, 1u);
  EXPECT_EQ(StatsJob(*b, c->id).code(), Code::kNotFound);

  // A touch and a delete in one call: the job leaves the set.
  touched.reset();
  deleted.reset();
  calls = Calls("fcall");
  b->Touch(s, a->id, [&](Result<JobChange> st_r) {
    Status st = st_r.status();
    touched = st;
  });
  b->Delete(s, a->id, [&](Result<JobChange> st_r) {
    Status st = st_r.status();
    deleted = st;
  });
  ASSERT_TRUE(RunUntil([&] { return touched && deleted; }));
  EXPECT_EQ(Calls("fcall") - calls, 1);
  EXPECT_TRUE(touched->ok());
  EXPECT_TRUE(deleted->ok());
  EXPECT_FALSE(in_set(a->id));
  auto ts = StatsTopic(*b, "rs");
  ASSERT_TRUE(ts.ok());
  EXPECT_EQ(ts->reserved + ts->ready + ts->delayed + ts->buried, 0u);
}

// Names (PutRequest::named; docs/redis-backend.md, "Names"): a named job's
// key is unique across topics while it lives. A named put, and each
// operation by name, is one FCALL.
TEST_F(RedisBackendTest, NamedPutsKeepANameUniqueAcrossTopics) {
  auto b = Make(3'600'000);  // no sweep's ticks among the calls counted
  SessionId s = b->OpenSession();
  // The topics have their numbers before the calls are counted (a
  // topic's first put registers one, dq_register, and calls again).
  ASSERT_TRUE(Put(*b, s, "plain", 0, "orders", "plain").ok());
  ASSERT_TRUE(Put(*b, s, "x", 0, "other").ok());

  int calls = Calls("fcall");
  auto a = PutNamed(*b, "orders", "n1", "first");
  EXPECT_EQ(Calls("fcall") - calls, 1);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->created);
  EXPECT_EQ(Cli("hget 'dq:{dq}:names' n1"), MemberOf(a->id) + "dq:{orders}:");
  // Its string: ten values, as an ordinary job's, the key packed as {name}.
  auto packed = [&](JobId id) {
    return Cli(
        "eval \"local v = {cmsgpack.unpack(redis.call('GET', KEYS[1]))}"
        " return #v .. ' ' .. type(v[5])\" 1 'dq:{orders}:j:" +
        MemberOf(id) + "'");
  };
  EXPECT_EQ(packed(a->id), "10 table");
  EXPECT_EQ(packed(a->id - 1), "10 string");

  // The same topic: the job already there, as an idempotent keyed put.
  auto again = PutNamed(*b, "orders", "n1", "second");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->id, a->id);
  // Another topic: refused, whoever asks.
  calls = Calls("fcall");
  auto other = PutNamed(*b, "other", "n1");
  EXPECT_EQ(Calls("fcall") - calls, 1);
  EXPECT_EQ(other.code(), Code::kConflict);
  EXPECT_EQ(other.status().message(), "id 'n1' belongs to a job in topic 'orders'");
  // A key of the topic that a job without a name holds.
  auto unnamed = PutNamed(*b, "orders", "plain");
  EXPECT_EQ(unnamed.code(), Code::kConflict);
  EXPECT_EQ(unnamed.status().message(),
            "topic 'orders' holds a job with key 'plain' that was not put by /push");
  EXPECT_EQ(PutNamed(*b, "orders", "").code(), Code::kInvalidArgument);
  // An ordinary keyed put of the name's key finds the named job.
  auto keyed = Put(*b, s, "y", 0, "orders", "n1");
  ASSERT_TRUE(keyed.ok());
  EXPECT_FALSE(keyed->created);
  EXPECT_EQ(keyed->id, a->id);

  // The job says it is named where it is seen.
  calls = Calls("fcall");
  ReplyJobs p = Peek(*b, Backend::PeekKind::kName, 0, "", "n1");
  EXPECT_EQ(Calls("fcall") - calls, 1);
  ASSERT_EQ(p.jobs.size(), 1u) << p.status.ToString();
  EXPECT_EQ(p.jobs[0].id, a->id);
  EXPECT_EQ(p.jobs[0].topic, "orders");
  EXPECT_EQ(p.jobs[0].body, "first");
  EXPECT_TRUE(p.jobs[0].named);
  p = Peek(*b, Backend::PeekKind::kKey, 0, "orders", "plain");
  ASSERT_EQ(p.jobs.size(), 1u);
  EXPECT_FALSE(p.jobs[0].named);
  SessionId w = SessionOn(*b, "named-only");
  auto r = PutNamed(*b, "named-only", "n2", std::string("a,\0b", 4));
  ASSERT_TRUE(r.ok());
  ReplyJobs got = Reserve(*b, w);
  ASSERT_EQ(got.jobs.size(), 1u) << got.status.ToString();
  EXPECT_EQ(got.jobs[0].key, "n2");
  EXPECT_EQ(got.jobs[0].body, std::string("a,\0b", 4));
  EXPECT_TRUE(got.jobs[0].named);
  ASSERT_TRUE(Put(*b, w, "plain", 0, "named-only", "k2").ok());
  got = Reserve(*b, w, 0, 1, true);  // detached: a lease's answer carries the figures too
  ASSERT_EQ(got.jobs.size(), 1u);
  EXPECT_FALSE(got.jobs[0].named);
  // The name lives in the job's string (its key packed as {name}): it
  // outlives what the call keeps, a release and a second reserve.
  ASSERT_TRUE(Get<JobChange>([&](Callback<JobChange> cb) {
                b->Release(w, r->id, std::nullopt, TimeMs{0}, cb);
              }).ok());
  got = Reserve(*b, w);
  ASSERT_EQ(got.jobs.size(), 1u);
  EXPECT_EQ(got.jobs[0].id, r->id);
  EXPECT_TRUE(got.jobs[0].named);
}

TEST_F(RedisBackendTest, FinishAndDeleteByName) {
  auto b = Make(3'600'000);
  SessionId s = SessionOn(*b, "fin");
  ASSERT_TRUE(Put(*b, s, "x", 0, "fin").ok());
  ASSERT_TRUE(Reserve(*b, s).jobs.size() == 1);
  auto a = PutNamed(*b, "fin", "job-a");
  ASSERT_TRUE(a.ok());
  // Not reserved: refused as an operator's finish of the job would be, and
  // the job stays as it was.
  auto by_id = Get<JobChange>([&](Callback<JobChange> cb) { b->Finish(Claim{0}, a->id, cb); });
  int calls = Calls("fcall");
  auto refused = FinishByName(*b, "job-a");
  EXPECT_EQ(Calls("fcall") - calls, 1);
  EXPECT_EQ(refused.code(), Code::kConflict);
  EXPECT_EQ(refused.status().message(), by_id.status().message());
  EXPECT_NE(refused.status().message().find("ready"), std::string::npos);
  ReplyJobs p = Peek(*b, Backend::PeekKind::kName, 0, "", "job-a");
  ASSERT_EQ(p.jobs.size(), 1u);
  EXPECT_EQ(p.jobs[0].state, JobState::kReady);
  // Reserved (by anyone): finished.
  ReplyJobs got = Reserve(*b, s);
  ASSERT_EQ(got.jobs.size(), 1u);
  EXPECT_EQ(got.jobs[0].id, a->id);
  calls = Calls("fcall");
  auto done = FinishByName(*b, "job-a");
  EXPECT_EQ(Calls("fcall") - calls, 1);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->id, a->id);
  EXPECT_EQ(done->state, JobState::kReserved);
  EXPECT_EQ(StatsJob(*b, a->id).code(), Code::kNotFound);
  EXPECT_EQ(Cli("hexists 'dq:{dq}:names' job-a"), "0");
  EXPECT_EQ(FinishByName(*b, "job-a").code(), Code::kNotFound);
  EXPECT_EQ(FinishByName(*b, "job-a").status().message(), "no job has id 'job-a'");

  // Delete by name takes a job in any state.
  auto d = PutNamed(*b, "fin", "job-d", "later", 60'000);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->state, JobState::kDelayed);
  calls = Calls("fcall");
  auto gone = DeleteByName(*b, "job-d");
  EXPECT_EQ(Calls("fcall") - calls, 1);
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_EQ(gone->id, d->id);
  EXPECT_EQ(gone->state, JobState::kDelayed);
  EXPECT_EQ(DeleteByName(*b, "job-d").code(), Code::kNotFound);
  EXPECT_EQ(Peek(*b, Backend::PeekKind::kName, 0, "", "job-d").status.code(), Code::kNotFound);
  EXPECT_EQ(Peek(*b, Backend::PeekKind::kName, 0, "", "").status.code(), Code::kNotFound);
}

// A name is free again as soon as its job ends, however it ends.
TEST_F(RedisBackendTest, ANameIsFreedWithItsJob) {
  auto b = Make(3'600'000);
  SessionId s = SessionOn(*b, "one");
  auto put_then_end = [&](const std::string& how, auto end) {
    auto a = PutNamed(*b, "one", "n-" + how);
    ASSERT_TRUE(a.ok()) << how << ": " << a.status().ToString();
    EXPECT_EQ(PutNamed(*b, "two", "n-" + how).code(), Code::kConflict) << how;
    end(a->id);
    EXPECT_EQ(Cli("hexists 'dq:{dq}:names' n-" + how), "0") << how;
    auto moved = PutNamed(*b, "two", "n-" + how);
    ASSERT_TRUE(moved.ok()) << how << ": " << moved.status().ToString();
    EXPECT_TRUE(moved->created) << how;
    ReplyJobs p = Peek(*b, Backend::PeekKind::kName, 0, "", "n-" + how);
    ASSERT_EQ(p.jobs.size(), 1u) << how;
    EXPECT_EQ(p.jobs[0].topic, "two") << how;
  };
  put_then_end("delete",
               [&](JobId id) { EXPECT_TRUE(Do([&](Done d) { b->Delete(s, id, Ch(d)); }).ok()); });
  put_then_end("delete-by-key", [&](JobId) {
    EXPECT_TRUE(Do([&](Done d) { b->DeleteByKey(s, "one", "n-delete-by-key", Ch(d)); }).ok());
  });
  put_then_end("finish", [&](JobId id) {
    ASSERT_EQ(Reserve(*b, s).jobs.size(), 1u);
    EXPECT_TRUE(Do([&](Done d) { b->Finish(s, id, Ch(d)); }).ok());
  });
  put_then_end("finish-by-name", [&](JobId) {
    ASSERT_EQ(Reserve(*b, s).jobs.size(), 1u);
    EXPECT_TRUE(FinishByName(*b, "n-finish-by-name").ok());
  });
  put_then_end("delete-by-name",
               [&](JobId) { EXPECT_TRUE(DeleteByName(*b, "n-delete-by-name").ok()); });
  put_then_end("clear", [&](JobId) {
    auto n = Get<uint64_t>([&](Callback<uint64_t> cb) { b->ClearTopic(s, "one", kClearAll, cb); });
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, 1u);
  });
  // Ended by a batch of the topic's calls: each of them sees the one before.
  auto a = PutNamed(*b, "one", "n-batch");
  ASSERT_TRUE(a.ok());
  std::optional<Status> deleted;
  std::optional<Result<PutResult>> again;
  int calls = Calls("fcall");
  b->Delete(s, a->id, Ch([&](Status st) { deleted = st; }));
  PutRequest r;
  r.topic = "one";
  r.body = "again";
  r.key = "n-batch";
  r.named = true;
  b->Put(0, r, [&](Result<PutResult> x) { again = std::move(x); });
  ASSERT_TRUE(RunUntil([&] { return deleted && again; }));
  EXPECT_EQ(Calls("fcall") - calls, 1);
  EXPECT_TRUE(deleted->ok());
  ASSERT_TRUE(again->ok()) << again->status().ToString();
  EXPECT_TRUE((*again)->created);
  EXPECT_NE((*again)->id, a->id);
  EXPECT_EQ(Cli("hget 'dq:{dq}:names' n-batch"), MemberOf((*again)->id) + "dq:{one}:");
}

// A name that is a job id in decimal names that job when it has no name,
// and no named job holds the name.
TEST_F(RedisBackendTest, ANameInDecimalNamesTheJobOfThatId) {
  auto b = Make(3'600'000);
  SessionId s = SessionOn(*b, "dec");
  auto plain = Put(*b, s, "plain", 0, "dec");
  ASSERT_TRUE(plain.ok());
  std::string id = std::to_string(plain->id);
  int calls = Calls("fcall");
  ReplyJobs p = Peek(*b, Backend::PeekKind::kName, 0, "", id);
  EXPECT_EQ(Calls("fcall") - calls, 1);
  ASSERT_EQ(p.jobs.size(), 1u) << p.status.ToString();
  EXPECT_EQ(p.jobs[0].id, plain->id);
  EXPECT_FALSE(p.jobs[0].named);
  EXPECT_EQ(FinishByName(*b, id).code(), Code::kConflict);
  // Not in canonical decimal: no job.
  EXPECT_EQ(Peek(*b, Backend::PeekKind::kName, 0, "", "0" + id).status.code(), Code::kNotFound);
  EXPECT_EQ(Peek(*b, Backend::PeekKind::kName, 0, "", "+" + id).status.code(), Code::kNotFound);
  EXPECT_EQ(Peek(*b, Backend::PeekKind::kName, 0, "", "99999999999999999999999").status.code(),
            Code::kNotFound);
  // A named job whose name is that id wins over the job of that id.
  auto named = PutNamed(*b, "dec-2", id, "named");
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  p = Peek(*b, Backend::PeekKind::kName, 0, "", id);
  ASSERT_EQ(p.jobs.size(), 1u);
  EXPECT_EQ(p.jobs[0].id, named->id);
  EXPECT_TRUE(p.jobs[0].named);
  auto gone = DeleteByName(*b, id);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->id, named->id);
  // Then the name is the id's again.
  p = Peek(*b, Backend::PeekKind::kName, 0, "", id);
  ASSERT_EQ(p.jobs.size(), 1u);
  EXPECT_EQ(p.jobs[0].id, plain->id);
  ASSERT_EQ(Reserve(*b, s).jobs.size(), 1u);
  calls = Calls("fcall");
  auto done = FinishByName(*b, id);
  EXPECT_EQ(Calls("fcall") - calls, 1);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->id, plain->id);
  EXPECT_EQ(DeleteByName(*b, id).code(), Code::kNotFound);
  // A named job's id is not a name of it.
  auto n = PutNamed(*b, "dec", "not-a-number");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(Peek(*b, Backend::PeekKind::kName, 0, "", std::to_string(n->id)).status.code(),
            Code::kNotFound);
  EXPECT_EQ(DeleteByName(*b, std::to_string(n->id)).code(), Code::kNotFound);
  EXPECT_TRUE(DeleteByName(*b, "not-a-number").ok());
}

// An entry of the names hash whose job is gone (or is not that name's)
// holds nothing: it neither blocks a put nor names a job.
TEST_F(RedisBackendTest, AStaleNameEntryIsFree) {
  auto b = Make(3'600'000);
  SessionId s = SessionOn(*b, "st");
  auto plain = Put(*b, s, "plain", 0, "st", "k");
  ASSERT_TRUE(plain.ok());
  Cli("hset 'dq:{dq}:names' ghost 0000000000099dq:{st}:");
  Cli("hset 'dq:{dq}:names' borrowed " + MemberOf(plain->id) + "dq:{st}:");
  Cli("hset 'dq:{dq}:names' nowhere 0000000000001dq:{no-such-topic}:");
  for (const char* name : {"ghost", "borrowed", "nowhere"}) {
    EXPECT_EQ(Peek(*b, Backend::PeekKind::kName, 0, "", name).status.code(), Code::kNotFound)
        << name;
    EXPECT_EQ(FinishByName(*b, name).code(), Code::kNotFound) << name;
    EXPECT_EQ(DeleteByName(*b, name).code(), Code::kNotFound) << name;
    auto put = PutNamed(*b, "st-2", name);
    ASSERT_TRUE(put.ok()) << name << ": " << put.status().ToString();
    EXPECT_TRUE(put->created);
    EXPECT_EQ(Cli(std::string("hget 'dq:{dq}:names' ") + name), MemberOf(put->id) + "dq:{st-2}:");
    ReplyJobs p = Peek(*b, Backend::PeekKind::kName, 0, "", name);
    ASSERT_EQ(p.jobs.size(), 1u) << name;
    EXPECT_EQ(p.jobs[0].id, put->id);
  }
  // The job the entry pointed at is untouched.
  EXPECT_EQ(Peek(*b, Backend::PeekKind::kId, plain->id).jobs.size(), 1u);
}

// The call by name takes its time from the instance's clock under
// Options::time_from_clock, as every topic function does: a TTR that ran
// out in virtual time is applied before the finish looks at the job.
TEST_F(RedisBackendTest, CallsByNameRunOnTheTestsClock) {
  struct ManualClock : Clock {
    TimeUs NowUs() const override { return us; }
    TimeUs us = TimeUs{4'000'000'000'000} * 1000;
  } clock;
  RedisBackend::Options o;
  o.sweep_ms = 3'600'000;
  o.time_from_clock = true;
  auto b = testing::StartRedisBackend(io_, redis_.url(), o, clock, milliseconds(5000));
  SessionId s = SessionOn(*b, "vt");
  auto a = PutNamed(*b, "vt", "v", "body", 0, 1000);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(Reserve(*b, s).jobs.size(), 1u);
  clock.us += 500'000;
  ReplyJobs p = Peek(*b, Backend::PeekKind::kName, 0, "", "v");
  ASSERT_EQ(p.jobs.size(), 1u);
  EXPECT_EQ(p.jobs[0].state, JobState::kReserved);
  clock.us += 600'000;  // past its TTR
  auto f = FinishByName(*b, "v");
  EXPECT_EQ(f.code(), Code::kConflict) << f.status().ToString();
  p = Peek(*b, Backend::PeekKind::kName, 0, "", "v");
  ASSERT_EQ(p.jobs.size(), 1u);
  EXPECT_EQ(p.jobs[0].state, JobState::kReady);
  auto js = StatsJob(*b, a->id);
  ASSERT_TRUE(js.ok());
  EXPECT_EQ(js->timeouts, 1u);
}

TEST_F(RedisBackendTest, ReloadsItsFunctionsWhenRedisLostThem) {
  auto b = Make();
  SessionId s = b->OpenSession();
  ASSERT_TRUE(Put(*b, s, "before").ok());
  std::string cmd = "redis-cli -p " + std::to_string(redis_.port()) + " function flush >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto after = Put(*b, s, "after");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(Reserve(*b, s, 0, 2).jobs.size(), 2u);
}

TEST_F(RedisBackendTest, SurvivesARedisRestart) {
  auto b = Make();
  SessionId s = b->OpenSession();
  auto put = Put(*b, s, "durable");
  ASSERT_TRUE(put.ok());
  redis_.Kill();
  RunUntil([&] { return !b->connected(); });
  EXPECT_EQ(Put(*b, s, "refused").code(), Code::kUnavailable);
  std::string error;
  ASSERT_TRUE(redis_.Start(&error)) << error;
  ASSERT_TRUE(RunUntil([&] { return b->connected(); }, milliseconds(10000)));
  RunFor(milliseconds(20));
  // The acknowledged put survived (appendfsync always), and work goes on.
  ReplyJobs got = Reserve(*b, s, 2000);
  ASSERT_EQ(got.jobs.size(), 1u) << got.status.ToString();
  EXPECT_EQ(got.jobs[0].id, put->id);
  EXPECT_TRUE(Put(*b, s, "after").ok());
}

}  // namespace
}  // namespace delayq::backend

namespace delayq::backend {
namespace {

// The same random operations on the Local backend (in memory) and on the
// Redis backend give the same replies. Ids differ between the two (the
// Redis backend's carry their topic), so replies name jobs by the order of
// their puts. Delays are 0 or an hour, so that no job changes state by
// itself during the test; each session watches one topic, so that ties
// between topics (ordered differently, docs/redis-backend.md) never arise.
TEST_F(RedisBackendTest, RandomOperationsMatchTheLocalBackend) {
  auto redis = Make();
  LocalBackend::Options lo;
  auto local = std::make_unique<LocalBackend>(io_, lo, clock_);
  uint64_t seed = 20261121;
  if (const char* env = std::getenv("DELAYQ_REDIS_SEED")) seed = std::strtoull(env, nullptr, 10);
  int ops = 800;
  if (const char* env = std::getenv("DELAYQ_REDIS_OPS")) ops = std::atoi(env);
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t n) { return static_cast<uint64_t>(rng() % n); };
  const char* topics[] = {"t0", "t1"};
  std::vector<SessionId> ls, rs;
  for (int i = 0; i < 4; ++i) {
    ls.push_back(local->OpenSession());
    rs.push_back(redis->OpenSession());
    for (Backend* b : {static_cast<Backend*>(local.get()), static_cast<Backend*>(redis.get())}) {
      SessionId s = b == local.get() ? ls.back() : rs.back();
      ASSERT_TRUE(b->Watch(s, topics[i % 2]).ok());
      ASSERT_TRUE(b->Ignore(s, "default").ok());
    }
  }
  // Job n (the n-th put) is local_ids[n] and redis_ids[n].
  std::vector<JobId> local_ids, redis_ids;
  auto name = [&](Backend& b, JobId id) {
    const auto& ids = &b == local.get() ? local_ids : redis_ids;
    auto it = std::find(ids.begin(), ids.end(), id);
    return it == ids.end() ? "?" + std::to_string(id) : "#" + std::to_string(it - ids.begin());
  };
  auto show_jobs = [&](Backend& b, const ReplyJobs& j) {
    if (!j.status.ok()) return std::string(CodeName(j.status.code()));
    std::string out = "jobs";
    for (const Job& v : j.jobs)
      out += " " + name(b, v.id) + "/" + v.topic + "/" + v.key + "/" + v.body + "/" +
             std::string(JobStateName(v.state)) + "/" + std::to_string(v.priority);
    return out;
  };
  auto show = [](const Status& st) { return std::string(CodeName(st.code())); };
  for (int i = 0; i < ops; ++i) {
    size_t sess = pick(4);
    std::string topic = topics[pick(2)];
    size_t n = redis_ids.empty() ? 0 : pick(redis_ids.size() + 1);  // == size: no such job
    std::string key = pick(3) == 0 ? "k" + std::to_string(pick(6)) : "";
    uint64_t op = pick(100);
    uint32_t pri = static_cast<uint32_t>(pick(3));
    TimeMs delay = pick(4) == 0 ? 3'600'000 : 0;
    auto id_in = [&](Backend& b) {
      const auto& ids = &b == local.get() ? local_ids : redis_ids;
      return n < ids.size() ? ids[n] : JobId{0x7fff'ffff'ffff};
    };
    auto run = [&](Backend& b) -> std::string {
      SessionId s = &b == local.get() ? ls[sess] : rs[sess];
      JobId id = id_in(b);
      if (op < 25) {
        auto r = Put(b, s, "b" + std::to_string(i), delay, topic, key, 3'600'000);
        if (!r.ok()) return show(r.status());
        if (r->created) (&b == local.get() ? local_ids : redis_ids).push_back(r->id);
        return "put " + name(b, r->id) + " " + (r->created ? "new " : "old ") +
               std::string(JobStateName(r->state));
      }
      if (op < 40) return show_jobs(b, Reserve(b, s, 0, 1 + pick(2)));
      if (op < 48) return show(Do([&](Done d) { b.Delete(s, id, Ch(d)); }));
      if (op < 52) return show(Do([&](Done d) { b.DeleteByKey(s, topic, key, Ch(d)); }));
      if (op < 60) {
        auto r = Get<JobChange>([&](Callback<JobChange> cb) { b.Release(s, id, pri, delay, cb); });
        return r.ok() ? std::string(JobStateName(r->state)) : show(r.status());
      }
      if (op < 64) return show(Do([&](Done d) { b.Bury(s, id, pri, Ch(d)); }));
      if (op < 67) return show(Do([&](Done d) { b.Touch(s, id, Ch(d)); }));
      if (op < 71) {
        auto r = Get<uint64_t>([&](Callback<uint64_t> cb) { b.Kick(s, topic, 1 + pick(3), cb); });
        return r.ok() ? "kicked " + std::to_string(*r) : show(r.status());
      }
      if (op < 74) return show(Do([&](Done d) { b.KickJob(s, id, Ch(d)); }));
      if (op < 82) {
        auto kind = static_cast<Backend::PeekKind>(pick(5));
        return show_jobs(b, Peek(b, kind, id, topic, key));
      }
      if (op < 87) {
        auto r = StatsJob(b, id);
        if (!r.ok()) return show(r.status());
        return name(b, r->id) + " " + r->topic + " " + r->key + " " +
               std::string(JobStateName(r->state)) + " pri=" + std::to_string(r->priority) +
               " delay=" + std::to_string(r->delay_ms) + " counts=" + std::to_string(r->reserves) +
               "," + std::to_string(r->timeouts) + "," + std::to_string(r->releases) + "," +
               std::to_string(r->buries) + "," + std::to_string(r->kicks) +
               " size=" + std::to_string(r->body_size);
      }
      if (op < 92) {
        auto r = StatsTopic(b, topic);
        if (!r.ok()) return show(r.status());
        return "ready=" + std::to_string(r->ready) + " urgent=" + std::to_string(r->urgent) +
               " reserved=" + std::to_string(r->reserved) +
               " delayed=" + std::to_string(r->delayed) + " buried=" + std::to_string(r->buried) +
               " total=" + std::to_string(r->total_jobs) +
               " deletes=" + std::to_string(r->cmd_delete);
      }
      if (op < 97) {
        std::optional<ReplyJobs> out;
        b.ReserveJob(s, id, [&](Status st, backend::Jobs v) { out = Own(st, v); });
        EXPECT_TRUE(RunUntil([&] { return out.has_value(); }));
        return show_jobs(b, *out);
      }
      if (op < 98) {
        auto r = Get<uint64_t>([&](Callback<uint64_t> cb) {
          b.ClearTopic(s, topic, pick(2) ? kClearDelayed : kClearAll, cb);
        });
        return r.ok() ? "cleared " + std::to_string(*r) : show(r.status());
      }
      // A connection closes (its jobs come back) and another takes its place.
      b.CloseSession(s);
      SessionId fresh = b.OpenSession();
      EXPECT_TRUE(b.Watch(fresh, topics[sess % 2]).ok());
      EXPECT_TRUE(b.Ignore(fresh, "default").ok());
      (&b == local.get() ? ls : rs)[sess] = fresh;
      return "reconnected";
    };
    // The random picks inside `run` must be the same for both backends.
    auto saved = rng;
    std::string got_local = run(*local);
    auto after = rng;
    rng = saved;
    std::string got_redis = run(*redis);
    ASSERT_EQ(rng, after);
    // A closed session's jobs go back in scripts of their own; a reply to a
    // later command on the same connection comes after theirs.
    if (got_redis == "reconnected") EXPECT_TRUE(StatsTopic(*redis, "t0").ok());
    ASSERT_EQ(got_local, got_redis) << "operation " << i << " (kind " << op << ")";
  }
  EXPECT_GT(redis_ids.size(), 50u);
}

// Job ids in a reply text, named once the round's puts are known: Token
// writes "@<id>@", Resolve replaces each with name(id).
std::string Token(JobId id) { return "@" + std::to_string(id) + "@"; }
template <typename Name>
std::string Resolve(const std::string& text, Name name) {
  std::string out;
  size_t p = 0;
  while (true) {
    size_t a = text.find('@', p);
    size_t e = a == std::string::npos ? a : text.find('@', a + 1);
    if (e == std::string::npos) return out + text.substr(p);
    out += text.substr(p, a - p) + name(std::stoull(text.substr(a + 1, e - a - 1)));
    p = e + 1;
  }
}

// As above, but operations go out in rounds of up to 16 without waiting for
// replies, so that the Redis backend runs them as batches (dq_batch): one
// function call then holds several puts, reserves and deletes, whose set
// writes it defers to its end. One topic, whose operations Redis runs in
// the order they were made, as the Local backend does.
TEST_F(RedisBackendTest, BatchedOperationsMatchTheLocalBackend) {
  auto redis = Make();
  LocalBackend::Options lo;
  auto local = std::make_unique<LocalBackend>(io_, lo, clock_);
  uint64_t seed = 20261122;
  if (const char* env = std::getenv("DELAYQ_REDIS_SEED")) seed = std::strtoull(env, nullptr, 10);
  int rounds = 150;
  if (const char* env = std::getenv("DELAYQ_REDIS_OPS")) rounds = std::atoi(env) / 8;
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t n) { return static_cast<uint64_t>(rng() % n); };
  const std::string topic = "t0";
  std::vector<SessionId> ls, rs;
  // A connection has one request in flight at a time (the front-ends answer
  // in order), so the operations of a round come from distinct sessions.
  constexpr size_t kSessions = 16;
  for (size_t i = 0; i < kSessions; ++i) {
    ls.push_back(local->OpenSession());
    rs.push_back(redis->OpenSession());
    for (Backend* b : {static_cast<Backend*>(local.get()), static_cast<Backend*>(redis.get())}) {
      SessionId s = b == local.get() ? ls.back() : rs.back();
      ASSERT_TRUE(b->Watch(s, topic).ok());
      ASSERT_TRUE(b->Ignore(s, "default").ok());
    }
  }
  std::vector<JobId> local_ids, redis_ids;
  // The first put registers the topic (an extra round trip on Redis).
  local_ids.push_back(Put(*local, ls[0], "first", 0, topic)->id);
  redis_ids.push_back(Put(*redis, rs[0], "first", 0, topic)->id);
  auto name = [&](Backend& b, JobId id) {
    const auto& ids = &b == local.get() ? local_ids : redis_ids;
    auto it = std::find(ids.begin(), ids.end(), id);
    return it == ids.end() ? "?" + std::to_string(id) : "#" + std::to_string(it - ids.begin());
  };
  auto show = [](const Status& st) { return std::string(CodeName(st.code())); };
  struct Op {
    uint64_t kind;
    size_t sess, job;
    std::string key, body;
    uint32_t pri, count;
    TimeMs delay;
  };
  int total = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<Op> ops(1 + pick(kSessions));
    std::vector<size_t> order(kSessions);
    for (size_t i = 0; i < kSessions; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i = 0; i < ops.size(); ++i) {
      Op& o = ops[i];
      o.kind = pick(100);
      o.sess = order[i];
      // Half of them on the latest jobs, so that a round often acts twice on one.
      size_t n = local_ids.size();
      o.job = pick(2) == 0 ? pick(n) : n - 1 - pick(std::min<size_t>(n, 6));
      o.key = pick(3) == 0 ? "k" + std::to_string(pick(6)) : "";
      o.body = "b" + std::to_string(total++);
      o.pri = static_cast<uint32_t>(pick(3));
      o.count = static_cast<uint32_t>(1 + pick(3));
      // Distinct delays: the two backends' clocks differ, so equal delays
      // could order the delayed jobs differently (a kick takes the earliest).
      o.delay = pick(4) == 0 ? 3'600'000 + 1000 * static_cast<TimeMs>(i) : 0;
    }
    // Issues every operation of the round; replies land in `out` by index.
    auto issue = [&](Backend& b, std::vector<std::optional<std::string>>& out,
                     std::vector<JobId>& created) {
      bool is_local = &b == local.get();
      const auto& ids = is_local ? local_ids : redis_ids;
      out.assign(ops.size(), std::nullopt);
      created.assign(ops.size(), 0);
      auto jobs_text = [](Status st, backend::Jobs v) {
        if (!st.ok()) return std::string(CodeName(st.code()));
        std::string t = "jobs";
        for (const JobView& j : v)
          t += " " + Token(j.id) + "/" + std::string(j.key) + "/" + std::string(j.body) + "/" +
               std::string(JobStateName(j.state)) + "/" + std::to_string(j.priority);
        return t;
      };
      for (size_t i = 0; i < ops.size(); ++i) {
        const Op& o = ops[i];
        SessionId s = is_local ? ls[o.sess] : rs[o.sess];
        JobId id = ids[o.job];
        auto* slot = &out[i];
        auto done = [slot, show](Status st) { *slot = show(st); };
        if (o.kind < 35) {
          PutRequest r;
          r.topic = topic;
          r.body = o.body;
          r.delay_ms = o.delay;
          r.key = o.key;
          r.priority = o.pri;
          r.ttr_ms = 3'600'000;
          JobId* c = &created[i];
          b.Put(s, r, [slot, c, show](Result<PutResult> x) {
            if (!x.ok()) {
              *slot = show(x.status());
              return;
            }
            if (x->created) *c = x->id;
            *slot = std::string(x->created ? "new " : "old ") + std::string(JobStateName(x->state));
          });
        } else if (o.kind < 60) {
          b.Reserve(ReserveRequest{s, 0, o.count, false},
                    [slot, jobs_text](Status st, backend::Jobs v) { *slot = jobs_text(st, v); });
        } else if (o.kind < 75) {
          b.Delete(s, id, Ch(done));
        } else if (o.kind < 80) {
          b.DeleteByKey(s, topic, o.key.empty() ? "k0" : o.key, Ch(done));
        } else if (o.kind < 85) {
          b.Release(s, id, o.pri, o.delay, [slot, show](Result<JobChange> r) {
            *slot = r.ok() ? std::string(JobStateName(r->state)) : show(r.status());
          });
        } else if (o.kind < 88) {
          b.Bury(s, id, o.pri, Ch(done));
        } else if (o.kind < 90) {
          b.Touch(s, id, Ch(done));
        } else if (o.kind < 92) {
          b.Kick(s, topic, o.count, [slot, show](Result<uint64_t> r) {
            *slot = r.ok() ? "kicked " + std::to_string(*r) : show(r.status());
          });
        } else if (o.kind < 94) {
          b.ReserveJob(s, id,
                       [slot, jobs_text](Status st, backend::Jobs v) { *slot = jobs_text(st, v); });
        } else if (o.kind < 97) {
          b.StatsJob(id, [slot, show](Result<JobStats> r) {
            *slot = r.ok() ? Token(r->id) + " " + std::string(JobStateName(r->state)) +
                                 " pri=" + std::to_string(r->priority) +
                                 " counts=" + std::to_string(r->reserves) + "," +
                                 std::to_string(r->releases) + "," + std::to_string(r->buries) +
                                 "," + std::to_string(r->kicks)
                           : show(r.status());
          });
        } else {
          b.StatsTopic(topic, [slot, show](Result<TopicStats> r) {
            *slot = r.ok() ? "ready=" + std::to_string(r->ready) +
                                 " reserved=" + std::to_string(r->reserved) +
                                 " delayed=" + std::to_string(r->delayed) +
                                 " buried=" + std::to_string(r->buried) +
                                 " total=" + std::to_string(r->total_jobs) +
                                 " deletes=" + std::to_string(r->cmd_delete)
                           : show(r.status());
          });
        }
      }
      ASSERT_TRUE(RunUntil([&] {
        return std::all_of(out.begin(), out.end(), [](const auto& x) { return x.has_value(); });
      }));
    };
    std::vector<std::optional<std::string>> got_local, got_redis;
    std::vector<JobId> new_local, new_redis;
    issue(*local, got_local, new_local);
    issue(*redis, got_redis, new_redis);
    for (size_t i = 0; i < ops.size(); ++i) {
      ASSERT_EQ(new_local[i] != 0, new_redis[i] != 0);
      if (new_local[i] != 0) {
        local_ids.push_back(new_local[i]);
        redis_ids.push_back(new_redis[i]);
      }
    }
    std::string trace;  // the whole round, for a failure message
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& o = ops[i];
      trace += "  " + std::to_string(i) + ": kind " + std::to_string(o.kind) + " session " +
               std::to_string(o.sess) + " job #" + std::to_string(o.job) + " key '" + o.key +
               "' pri " + std::to_string(o.pri) + " count " + std::to_string(o.count) + " delay " +
               std::to_string(o.delay) +
               " -> local: " + Resolve(*got_local[i], [&](JobId id) { return name(*local, id); }) +
               " | redis: " + Resolve(*got_redis[i], [&](JobId id) { return name(*redis, id); }) +
               "\n";
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      ASSERT_EQ(Resolve(*got_local[i], [&](JobId id) { return name(*local, id); }),
                Resolve(*got_redis[i], [&](JobId id) { return name(*redis, id); }))
          << "round " << round << ", operation " << i << " of " << ops.size() << " (kind "
          << ops[i].kind << ")\n"
          << trace;
    }
  }
  EXPECT_GT(redis_ids.size(), 100u);
}

}  // namespace
}  // namespace delayq::backend

namespace delayq::backend {
namespace {

// A three-master Redis Cluster on loopback ports, made with redis-cli.
class RedisClusterTest : public RedisBackendTest {
 protected:
  void SetUp() override {
    std::string error;
    for (auto& n : nodes_)
      ASSERT_TRUE(
          n.Start(&error, {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                           "--cluster-node-timeout", "5000", "--appendonly", "yes"}))
          << error;
    std::string cmd = "redis-cli --cluster create";
    for (auto& n : nodes_) cmd += " 127.0.0.1:" + std::to_string(n.port());
    cmd += " --cluster-replicas 0 --cluster-yes >/dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    // Every node must see every slot served before the test starts.
    for (auto& n : nodes_) {
      std::string check = "for i in $(seq 100); do redis-cli -p " + std::to_string(n.port()) +
                          " cluster info | grep -q cluster_state:ok && exit 0; sleep 0.1; done;"
                          " exit 1";
      ASSERT_EQ(std::system(check.c_str()), 0) << "cluster not ok on " << n.port();
    }
  }
  std::unique_ptr<RedisBackend> MakeOnCluster() {
    return testing::StartRedisBackend(
        io_, "redis-cluster://127.0.0.1:" + std::to_string(nodes_[0].port()), {}, clock_,
        milliseconds(10000));
  }
  // Keys held by a node.
  int DbSize(const testing::RedisProcess& n) {
    return ShellNumber("redis-cli -p " + std::to_string(n.port()) + " dbsize");
  }
  testing::RedisProcess nodes_[3];
};

TEST_F(RedisClusterTest, TopicsSpreadOverTheMastersAndWorkAcrossInstances) {
  auto a = MakeOnCluster();
  auto b = MakeOnCluster();
  SessionId sa = a->OpenSession(), sb = b->OpenSession();
  std::vector<std::pair<std::string, JobId>> puts;
  for (int i = 0; i < 12; ++i) {
    std::string topic = "topic-" + std::to_string(i);
    auto r = Put(*a, sa, "body-" + std::to_string(i), 0, topic, "key-" + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    puts.emplace_back(topic, r->id);
  }
  int nodes_used = 0;
  for (auto& n : nodes_) nodes_used += DbSize(n) > 0;
  EXPECT_GE(nodes_used, 2) << "twelve topics should land on more than one master";
  // Instance b finds each job by id and by key, reserves and deletes it.
  for (const auto& [topic, id] : puts) {
    ReplyJobs p = Peek(*b, Backend::PeekKind::kId, id);
    ASSERT_EQ(p.jobs.size(), 1u) << p.status.ToString();
    EXPECT_EQ(p.jobs[0].topic, topic);
    ASSERT_TRUE(b->Watch(sb, topic).ok());
  }
  ASSERT_TRUE(b->Ignore(sb, "default").ok());
  for (size_t i = 0; i < puts.size(); ++i) {
    ReplyJobs got = Reserve(*b, sb);
    ASSERT_EQ(got.jobs.size(), 1u) << got.status.ToString();
    EXPECT_TRUE(Do([&](Done d) { b->Delete(sb, got.jobs[0].id, Ch(d)); }).ok());
  }
  EXPECT_EQ(Reserve(*b, sb).status.code(), Code::kTimedOut);
  // A waiting reserve on b is woken by a put on a, whichever master holds it.
  std::optional<ReplyJobs> waited;
  StartReserve(*b, sb, 10'000, &waited);
  RunFor(milliseconds(50));
  auto late = Put(*a, sa, "late", 0, "topic-7");
  ASSERT_TRUE(late.ok());
  ASSERT_TRUE(RunUntil([&] { return waited.has_value(); }));
  ASSERT_EQ(waited->jobs.size(), 1u);
  EXPECT_EQ(waited->jobs[0].id, late->id);
  auto all = Get<EngineStats>([&](Callback<EngineStats> cb) { b->Stats(cb); });
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->total_jobs, 13u);
  EXPECT_EQ(all->reserved, 1u);
}

// Names are unique across topics, which a cluster cannot keep in one call:
// a named put and the operations by name are refused there.
TEST_F(RedisClusterTest, TheRoutesByNameNeedOneServer) {
  auto a = MakeOnCluster();
  const std::string why =
      "the Youzan-style routes need a single Redis server: on a cluster an id cannot be kept "
      "unique across topics in one call";
  auto put = PutNamed(*a, "t", "n");
  EXPECT_EQ(put.code(), Code::kInvalidArgument);
  EXPECT_EQ(put.status().message(), why);
  EXPECT_EQ(FinishByName(*a, "n").status().message(), why);
  EXPECT_EQ(DeleteByName(*a, "n").code(), Code::kInvalidArgument);
  ReplyJobs p = Peek(*a, Backend::PeekKind::kName, 0, "", "n");
  EXPECT_EQ(p.status.code(), Code::kInvalidArgument);
  EXPECT_EQ(p.status.message(), why);
  // An ordinary keyed put is as before.
  EXPECT_TRUE(Put(*a, 0, "x", 0, "t", "n").ok());
}

// Three masters with a replica each; one master is killed, and its replica
// takes its slots. No node reconnects and nobody answers MOVED for the
// dead master's slots: the router reads the map again on its own (a lost
// connection, then every second while a slot has no master connected),
// and puts to every topic work again.
TEST(RedisClusterFailoverTest, AMastersReplicaTakesOverAndEveryTopicWorksAgain) {
  testing::RedisProcess nodes[6];
  std::string error;
  for (auto& n : nodes)
    ASSERT_TRUE(n.Start(&error, {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                 "--cluster-node-timeout", "1000"}))
        << error;
  std::string cmd = "redis-cli --cluster create";
  for (auto& n : nodes) cmd += " 127.0.0.1:" + std::to_string(n.port());
  cmd += " --cluster-replicas 1 --cluster-yes >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto wait_ok = [&](const testing::RedisProcess& n) {
    std::string check = "for i in $(seq 200); do redis-cli -p " + std::to_string(n.port()) +
                        " cluster info | grep -q cluster_state:ok && exit 0; sleep 0.1; done;"
                        " exit 1";
    return std::system(check.c_str()) == 0;
  };
  for (auto& n : nodes) ASSERT_TRUE(wait_ok(n)) << "cluster not ok on " << n.port();
  // Each replica must have synced with its master before one is killed.
  std::string synced = "for i in $(seq 200); do n=0; for p in";
  for (auto& n : nodes) synced += " " + std::to_string(n.port());
  synced +=
      "; do redis-cli -p $p info replication | grep -q 'master_link_status:up' && n=$((n+1));"
      " done; [ $n -eq 3 ] && exit 0; sleep 0.1; done; exit 1";
  ASSERT_EQ(std::system(synced.c_str()), 0) << "replicas not in sync";

  boost::asio::io_context io;
  Clock clock;
  auto b =
      testing::StartRedisBackend(io, "redis-cluster://127.0.0.1:" + std::to_string(nodes[0].port()),
                                 {}, clock, milliseconds(10000));
  ASSERT_NE(b, nullptr);
  auto put_all = [&] {
    int ok = 0;
    for (int i = 0; i < 12; ++i) {
      std::atomic<bool> done{false};
      bool good = false;
      const std::string topic = "topic-" + std::to_string(i);
      PutRequest req;
      req.topic = topic;
      req.body = "x";
      b->Put(SessionId{0}, req, [&](Result<PutResult> r) {
        good = r.ok();
        done = true;
      });
      testing::RunIoUntil(
          io, [&] { return done.load(); }, milliseconds(5000));
      ok += good;
    }
    return ok;
  };
  ASSERT_EQ(put_all(), 12);
  // A master that holds keys goes: not the node the backend was given (a
  // seed, kept for finding the cluster again).
  testing::RedisProcess* master = nullptr;
  for (auto& n : std::span(nodes).subspan(1))
    if (ShellText("redis-cli -p " + std::to_string(n.port()) + " role").rfind("master", 0) == 0 &&
        ShellNumber("redis-cli -p " + std::to_string(n.port()) + " dbsize") > 0) {
      master = &n;
      break;
    }
  ASSERT_NE(master, nullptr);
  master->Kill();
  // Within 20 s (the failover takes a few seconds), every topic takes puts.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int ok = 0;
  while (std::chrono::steady_clock::now() < deadline && (ok = put_all()) < 12)
    testing::RunIoFor(io, milliseconds(500));
  EXPECT_EQ(ok, 12) << "puts to some topics still fail after the failover";
  EXPECT_TRUE(b->connected());
  // The old master, down and named by no slot, is dropped, not tried
  // again for ever: no error of it is left to report.
  const std::string dead = "127.0.0.1:" + std::to_string(master->port());
  EXPECT_TRUE(testing::RunIoUntil(
      io, [&] { return b->last_error().find(dead) == std::string::npos; }, milliseconds(5000)))
      << b->last_error();
}

}  // namespace
}  // namespace delayq::backend

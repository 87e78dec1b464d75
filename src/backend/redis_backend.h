// The Redis backend: the queue's state lives in Redis, and any number of
// delayqd instances serve it at once (docs/redis-backend.md).
//
// Every state change is one atomic Lua script on the job's topic
// (redis_scripts.h); the keys of a topic share the `{topic}` hash tag.
// Job ids are unique across instances: a topic number from a registry in
// Redis (high bits) and the topic's own sequence (low 40 bits), so an id
// alone names its topic.
//
// What an instance keeps for itself: its sessions (used and watched topics,
// the jobs they hold, a pending reserve). Due jobs and TTRs are applied by
// whichever instance comes first: each one times the topics it knows of by
// their next due moment (every script answers it), sweeps every topic
// every `sweep_ms`, and every script applies what is due before it acts.
// A waiting reserve is woken by a pub/sub message the scripts publish when
// a job becomes ready (and by the sweep, should a message be missed).
//
// Thread: every method, and `io`, on one thread.
//
// The class is defined across redis_backend.cc, redis_topics.cc,
// redis_calls.cc, redis_waiters.cc and redis_stats.cc (their private
// header, redis_backend_internal.h, says what each holds).
#ifndef DELAYQ_BACKEND_REDIS_BACKEND_H_
#define DELAYQ_BACKEND_REDIS_BACKEND_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/clock.h"
#include "backend/redis_client.h"
#include "backend/redis_router.h"
#include "backend/redis_scripts.h"

namespace delayq::backend {

// Parsed `redis://[[user]:password@]host[:port][/db]` or
// `redis-cluster://[[user]:password@]host[:port],host[:port],...` (any
// reachable nodes of the cluster; it tells the rest), or the same over TLS:
// `rediss://...`, `rediss-cluster://...`. The user and password are
// percent-decoded (a password holding '@', ':' or '/' is written %40, %3A,
// %2F).
struct RedisAddress {
  bool cluster = false;
  bool tls = false;  // rediss:// or rediss-cluster://
  std::vector<RedisRouter::Node> nodes;
  int db = 0;
  RedisCredentials auth;
  // The user information had no ':' ("redis://secret@h"): the password of
  // the default user, or, with the password in a file of its own
  // (--redis-password-file), the name of an ACL user.
  bool password_alone = false;
};
// kInvalidArgument with the reason for a malformed URL; the message never
// holds the password (it names the URL as RedactRedisUrl writes it).
Result<RedisAddress> ParseRedisUrl(std::string_view url);
// `url` as logs and messages may show it: a password replaced by "***"
// ("redis://worker:***@h:6379"), also in a URL that does not parse (a '/'
// in the password; "redis://worker:secret", a port that is no number);
// any other URL as it is.
std::string RedactRedisUrl(std::string_view url);

class RedisBackend final : public Backend {
 public:
  struct Options {
    RedisAddress address;
    size_t max_job_size = 65535;
    // Every topic is checked for due jobs and TTRs at least this often,
    // and waiting reserves retried (a backstop for missed wake-ups).
    TimeMs sweep_ms = 200;
    // The most topics with jobs or a pause, across the instances (the
    // registry's size; 0: no limit): a put or pause that would register
    // one more fails with kResourceExhausted.
    size_t max_topics = 0;
    // Names this instance's reservations; random when empty.
    std::string instance_id;
    // For tests only: the functions take the time from `clock` (each call
    // carries its NowUs(), microseconds as TIME gives them) instead of
    // Redis's TIME, so that a test can drive the backend in virtual time.
    // Never in production: several instances must share one clock, Redis's.
    bool time_from_clock = false;
    // A topic with no job and no pause keeps its number and job sequence
    // in Redis this long (a job put meanwhile continues them), then its
    // incarnation ends and its number leaves the registry
    // (docs/redis-backend.md, "Topics come and go").
    TimeMs topic_idle_ms = 24 * 3600 * 1000;
    // Every connection's RedisClient::Options::reply_timeout (0: none).
    TimeMs reply_timeout_ms = 10'000;
    // Told when a connection to Redis that was up is lost (`error`: why,
    // never a secret), and when it is up again: the node's host:port
    // ("subscriber host:port" for the connection that hears wake-ups).
    std::function<void(const std::string& node, bool up, const std::string& error)> on_connection;
    // The TLS context of every connection when `address.tls`
    // (NewRedisTlsContext); null: one trusting the system's CA store.
    std::shared_ptr<boost::asio::ssl::context> tls;
  };
  RedisBackend(boost::asio::io_context& io, Options options, const Clock& clock);
  ~RedisBackend() override;

  // Connects (and keeps reconnecting). Operations fail with kUnavailable
  // while there is no connection.
  void Start();
  bool connected() const;
  // Why it is not connected ("127.0.0.1:6379: AUTH refused: WRONGPASS ..."),
  // or empty.
  std::string last_error() const;

  const BackendInfo& info() const override { return info_; }

  SessionId OpenSession() override;
  void CloseSession(SessionId s) override;
  Status Use(SessionId s, std::string_view topic) override;
  Result<size_t> Watch(SessionId s, std::string_view topic) override;
  Result<size_t> Ignore(SessionId s, std::string_view topic) override;
  std::string UsedTopic(SessionId s) const override;
  std::vector<std::string> WatchedTopics(SessionId s) const override;

  void DiscardJobId() override {}
  void Put(SessionId s, const PutRequest& r, Callback<PutResult> done) override;
  void Reserve(const ReserveRequest& r, JobsDone done) override;
  void CancelReserve(SessionId s) override;
  void ReserveJob(SessionId s, JobId id, JobsDone done) override;
  void Delete(const Claim& c, JobId id, Callback<JobChange> done) override;
  void DeleteByKey(const Claim& c, std::string_view topic, std::string_view key,
                   Callback<JobChange> done) override;
  void Finish(const Claim& c, JobId id, Callback<JobChange> done) override;
  void Release(const Claim& c, JobId id, std::optional<uint32_t> priority,
               std::optional<TimeMs> delay, Callback<JobChange> done) override;
  void Bury(const Claim& c, JobId id, std::optional<uint32_t> priority,
            Callback<JobChange> done) override;
  void Touch(const Claim& c, JobId id, Callback<JobChange> done) override;
  void ReleaseAnswered(const Claim& c, JobId id, std::optional<TimeMs> delay,
                       const PushAnswer& answer, Callback<JobChange> done) override;
  void BuryAnswered(const Claim& c, JobId id, const PushAnswer& answer,
                    Callback<JobChange> done) override;
  void FinishByName(std::string_view name, Callback<JobChange> done) override;
  void DeleteByName(std::string_view name, Callback<JobChange> done) override;
  void Kick(SessionId s, std::string_view topic, uint64_t bound, Callback<uint64_t> done) override;
  void KickJob(SessionId s, JobId id, Callback<JobChange> done) override;
  void Peek(SessionId s, PeekKind kind, JobId id, std::string_view topic, std::string_view key,
            JobsDone done) override;
  void StatsJob(JobId id, Callback<JobStats> done) override;
  void ListJobs(const ListJobsRequest& r, PageDone done) override;
  void FindKey(std::string_view key, JobsDone done) override;
  void StatsTopic(std::string_view topic, Callback<TopicStats> done) override;
  // The topics' scripts sent at once (pipelined; one per topic, since a
  // cluster spreads them over its masters), after the registry's refresh.
  void TopicsStats(Callback<std::vector<TopicStats>> done) override;
  // Connected (healthy), and the connections' counts (RedisCallCounts).
  BackendMetrics SampleMetrics() const override;
  void Stats(Callback<EngineStats> done) override;
  void ListTopics(Callback<std::vector<std::string>> done) override;
  void PauseTopic(std::string_view topic, TimeMs delay_ms, Done done) override;
  void ClearTopic(SessionId s, std::string_view topic, uint8_t mask,
                  Callback<uint64_t> done) override;

  // Named objects (redis_objects.cc): one hash per kind in the slot of
  // {dq}, and a hash of the kinds' versions (docs/redis-backend.md,
  // "Named objects").
  void PutObject(ObjectKind kind, std::string_view name, std::string_view value,
                 Done done) override;
  void DeleteObject(ObjectKind kind, std::string_view name, Done done) override;
  void ListObjects(ObjectKind kind, Callback<std::vector<StoredObject>> done) override;
  void ObjectsVersion(ObjectKind kind, Callback<uint64_t> done) override;
  // One dq_fire: the cursor lives in the job's topic's slot (dq:{T}:cursors).
  void FireSchedule(std::string_view schedule, TimeMs fire_ms, std::string_view revision,
                    const PutRequest& r, Callback<PutResult> done) override;
  void UnfireSchedule(std::string_view schedule, std::string_view topic, TimeMs fire_ms,
                      std::string_view revision, std::string_view key,
                      Callback<bool> done) override;

  TimeMs Now() const override { return clock_.Now(); }

  static constexpr int kSeqBits = 40;

 private:
  struct Topic {
    std::string name;
    // The number of the topic's incarnation in Redis as the last reply
    // told it; -1: none (or not known yet). The default topic's is 0.
    int64_t no = -1;
    // A number registered for the topic, which its next call may give its
    // incarnation (0: none); and how many were registered in a row.
    uint64_t fresh = 0;
    TimeMs fresh_at = 0;  // when it was registered
    int fresh_tries = 0;
    bool registering = false;
    // The last reply said the topic has a job or a pause: the sweep ticks
    // it. (The default topic always.)
    bool live = false;
    // The entries of by_number_ naming it; operations over several topics
    // holding it between their calls (the sweep drops a topic nothing here
    // refers to: DropUnused).
    std::vector<uint64_t> numbers;
    int pins = 0;
    uint64_t local_seq = 0;  // creation order in this instance
    std::string prefix;
    std::vector<std::string> keys;                       // the six keys of the scripts
    TimeMs wake = kNever;                                // keyed in wakes_
    std::deque<std::pair<SessionId, uint64_t>> waiters;  // (session, wait generation)
    bool serving = false;
    bool serve_again = false;
    bool subscribed = false;
    uint64_t using_count = 0, watching = 0;
    uint64_t timeouts = 0;  // TTR expiries, as the last stats read them
    // Calls waiting to go to Redis, and whether their flush is posted, and
    // whether a batch of this topic awaits its reply.
    // A call's arguments are written in RESP when it is made (Run), so
    // that a batch only copies them.
    struct Call {
      redis::Script script;
      size_t nargs = 0;
      std::string args;
      std::function<void(Status, const redisReply*)> done;
      // The number of the topic whose job the call names by member (-1:
      // none): a batch carries one (FlushBatch).
      int64_t job_no = -1;
    };
    std::vector<Call> batch;
    // Calls that need the topic to have an incarnation, waiting for a
    // number from the registry (RegisterFor).
    std::vector<Call> need_number;
    bool flush_posted = false;
    int in_flight = 0;
  };
  struct Held {
    std::string topic;
    TimeMs deadline = 0;
  };
  struct Session {
    std::string used = "default";
    std::vector<std::string> watched{"default"};
    std::map<JobId, Held> held;
    bool waiting = false;
    // Counts the session's reserves and cancels: an attempt whose number
    // is no longer this one (cancelled, or a reserve after it) answers
    // nobody and gives what it took back.
    uint64_t attempt = 0;
    uint64_t wait_gen = 0;
    uint32_t wait_count = 1;
    bool wait_detach = false;
    TimeMs wait_deadline = kNever;
    JobsDone wait_done;
    std::string owner;  // of its reservations: "<instance>:<session>"
    std::unique_ptr<boost::asio::steady_timer> wait_timer;
  };
  using ReplyFn = std::function<void(Status, const redisReply*)>;

  // A schedule's firing (FireSchedule).
  struct Firing {
    std::string schedule;
    TimeMs at;
    std::string revision;
  };
  // Put, or with a firing FireSchedule's dq_fire of it.
  void PutOrFire(SessionId sid, const PutRequest& r, const Firing* firing,
                 Callback<PutResult> done);
  Topic& GetTopic(const std::string& name);
  // kResourceExhausted when `name` would be one topic more than
  // max_topics in this instance's table (sessions' used and watched topics).
  Status RoomForTopic(std::string_view name) const;
  // Used or watched by a session of this instance (or the default topic):
  // such a topic exists even with no job in Redis.
  bool LocallyKnown(const std::string& name) const;
  // Registers a new number for the topic (dq_register), then queues
  // `calls` again: they found the topic without an incarnation (their
  // answer 'N'), and the number lets them give it one.
  void RegisterFor(Topic& t, std::vector<Topic::Call> calls, uint64_t tried);
  // The topic's number, as a reply told it.
  void SetNumber(Topic& t, int64_t no);
  // by_number_[no] = &t, and the reverse.
  void MapNumber(uint64_t no, Topic& t);
  void UnmapNumber(uint64_t no);
  // Forgets the topics that nothing here refers to and that have no job
  // or pause in Redis as far as this instance knows: its memory, and the
  // sweep's work, follow the topics in use.
  void DropUnused();
  // Finds a topic by number (asking the registry when unknown): nullptr
  // when no topic has it.
  // (At once, and not through a std::function, when the topic is known.)
  template <typename F>
  void TopicByNumber(uint64_t no, F&& then);
  // Finds the topic and member of a job: `then(Status, Topic*, member)`,
  // the topic nullptr when no topic has the job's number.
  template <typename F>
  void ForJob(JobId id, F&& then);
  // Ends (dq_retire) the incarnations, idle long enough, of a few
  // registered numbers, and takes them out of the registry.
  void ScanRegistry();
  // Runs a topic function. A topic has at most kMaxInFlight calls to Redis
  // in flight; the calls made meanwhile go together when one returns, as
  // one dq_batch (what is due applied once), in the order made: group
  // commit, so batches grow with the load and an idle topic's call leaves
  // at once. (One connection: Redis applies them in the order sent.)
  void Run(redis::Script sc, Topic& t, std::initializer_list<std::string_view> args, ReplyFn done);
  // A call that names a job of the topic's incarnation of number `job_no`
  // by its member (its first argument): not found in another incarnation.
  void Run(redis::Script sc, Topic& t, int64_t job_no, std::initializer_list<std::string_view> args,
           ReplyFn done);
  void Run(redis::Script sc, Topic& t, const std::vector<std::string>& args, ReplyFn done);
  void Run(redis::Script sc, Topic& t, int64_t job_no, const std::vector<std::string>& args,
           ReplyFn done);
  // A call on job `id` (found by ForJob) of a function that answers a
  // change or a refusal (redis_scripts.h): args are the member, the claim's
  // caller and lease, then `more`.
  void JobCall(redis::Script sc, const Claim& c, JobId id, std::vector<std::string> more,
               Callback<JobChange> done);
  // A call by name (dq_named): the operation `op` ('f' finish, 'x' delete,
  // 'e' peek) on the job `name` names, in one FCALL. `then` gets the job's
  // topic (nullptr: the name names no job), its id, and the operation's
  // result as the function answered it.
  using NamedFn = std::function<void(Status, Topic*, JobId, const redisReply*)>;
  void ByName(char op, std::string_view name, NamedFn then);
  // FinishByName's and DeleteByName's `then`: the change, or the refusal.
  NamedFn ChangeByName(std::string_view name, Callback<JobChange> done);
  // Notes what a topic's call answered: its number, and, from next_wake
  // (ms from now; -2: no job and no pause), whether it is live and when it
  // next needs a tick.
  void NoteAnswer(Topic& t, int64_t no, int64_t next_wake);
  // What this instance notes of a change: a reserved job's new deadline
  // for its holder; any other state: no longer held here, and a ready job
  // may go to a waiter.
  void AfterChange(Topic& t, const JobChange& c);
  // The base of the leases of one reserve made with detach (NameLeases):
  // 16 random hex digits.
  std::string NewLeaseBase() { return FormatLease(lease_rng_()); }
  void Enqueue(Topic& t, Topic::Call call);
  void FlushBatch(Topic& t);
  // The first argument of a topic function: the topic's prefix, after the
  // call's time with Options::time_from_clock (lua/delayq.lua, context).
  std::string Header(const Topic& t) const;
  // The second: the number `no`, and the one registered for the topic
  // that the call may give it.
  std::string Known(const Topic& t, int64_t no) const;
  // Calls a function with these keys and arguments.
  void RunRaw(redis::Script sc, const std::vector<std::string>& keys,
              const std::vector<std::string>& args,
              std::function<void(Status, const redisReply*)> done);
  // Sends an FCALL (in RESP) to the node of `route`; when Redis has lost
  // the library, loads it again and sends the call once more (`retried`).
  void Call(const std::string& route, std::shared_ptr<const std::string> command, bool retried,
            std::function<void(Status, const redisReply*)> done);
  void NoteWake(Topic& t, TimeMs when);
  void ArmWakeTimer();
  void OnWakeTimer();
  void Sweep();
  void RefreshRegistry(std::function<void()> then);
  void ServeTopic(const std::string& name);
  void TryWaiters(Topic& t);
  void StartWait(SessionId sid);
  void EndWait(Session& s);
  void ArmWaitTimer(SessionId sid);
  void OnWaitTimer(SessionId sid, uint64_t gen);
  bool DeadlineSoon(Session& s);
  // Reserves up to `count` from the best of `topics` for the session.
  // `paused_ready`: a paused topic among them has ready jobs, which defer
  // DEADLINE_SOON (as in the engine, and beanstalkd). Jobs taken after the
  // session's `attempt` moved on go back (Session::attempt).
  void TryReserve(SessionId sid, uint64_t attempt, const std::vector<std::string>& topics,
                  uint32_t count, bool detach,
                  std::function<void(Status, std::vector<JobView>, bool paused_ready)> done);
  std::string Owner(SessionId sid) const;
  // The caller of an operation on a job: the session's owner, or "*" for
  // the operator (session 0).
  std::string_view Caller(SessionId sid) const;
  // `done` wrapped so that it is dropped when the session has closed.
  template <typename F>
  F Guard(SessionId sid, F done);
  // The session holds the job now (no other session does any more).
  void NoteHeld(SessionId sid, const std::string& topic, JobId id, TimeMs deadline);
  // No session holds the job any more.
  void Forget(JobId id);
  void TopicCounts(std::function<void(Status, std::vector<std::pair<Topic*, TopicStats>>)> done);
  JobId IdOf(const Topic& t, std::string_view member) const;
  // A job as dq_peek answers it ({member, key, body, state, ...}), its
  // strings pointing into `r`; nullopt for an answer too short.
  std::optional<JobView> PeekView(const Topic& t, const redisReply* r) const;
  // Deletes the topic's jobs of `mask` a chunk at a time.
  void ClearStep(Topic* t, std::string mask, uint64_t total, Callback<uint64_t> done);
  // Kicks up to `left` more jobs of the state `only` ("b", "d"; "" for the
  // first chunk, which picks it), a chunk per call.
  void KickStep(Topic* t, uint64_t left, std::string only, uint64_t total, Callback<uint64_t> done);
  // One call of dq_list (ListJobs): again, from where it stopped, until the
  // set is read through; from the start again (kListRestarts times at
  // most) when jobs it chose left the state meanwhile.
  struct ListProgress {
    uint64_t calls = 0;  // since the last start
    uint64_t bound = 0;  // of calls, from the set's size at the first
    int restarts = 0;
  };
  static constexpr uint64_t kListChunk = 20'000;  // members a call reads (delayq.lua)
  static constexpr int kListRestarts = 3;
  void ListStep(Topic* t, int64_t no, std::vector<std::string> args, ListProgress progress,
                PageDone done);

  boost::asio::io_context& io_;
  Options options_;
  const Clock& clock_;
  BackendInfo info_;
  RedisCallCounts counts_;  // before the clients that count in it
  std::unique_ptr<RedisRouter> router_;
  std::unique_ptr<RedisClient> subscriber_;
  // Nodes whose connection was lost and is not up again (on_connection).
  std::set<std::string> lost_;
  // A connection to `node` was lost (`up` false) or is up again after a
  // loss: Options::on_connection is told, once for each.
  void ConnectionChanged(const std::string& node, bool up, const std::string& error);
  // Why no TLS context could be made for a rediss:// address (then nothing
  // connects), or empty.
  std::string tls_error_;
  std::unordered_map<std::string, std::unique_ptr<Topic>> topics_;
  std::unordered_map<uint64_t, Topic*> by_number_;
  std::unordered_map<SessionId, Session> sessions_;
  // Job -> the session whose `held` has it: at most one does. An entry may
  // outlive the reservation (a TTR that ran out), until the job is held
  // again, forgotten, or the session sees its deadline pass.
  std::unordered_map<JobId, SessionId> holders_;
  std::mt19937_64 lease_rng_{std::random_device{}()};
  SessionId next_session_ = 1;
  uint64_t next_topic_seq_ = 0;
  std::set<std::pair<TimeMs, std::string>> wakes_;
  // The registry as this instance last read it: number -> topic name, and
  // when this instance first saw it.
  struct Registered {
    std::string name;
    TimeMs seen = 0;
  };
  std::map<uint64_t, Registered> registry_;
  bool registry_loaded_ = false;
  uint64_t registry_seen_ = 0;  // the registry's counter, last read
  uint64_t scan_cursor_ = 0;
  boost::asio::steady_timer wake_timer_, sweep_timer_;
  TimeMs wake_timer_at_ = kNever;
  std::string registry_names_, registry_numbers_;
  // The names of named jobs, across topics (docs/redis-backend.md, "Names").
  std::string names_;
  // Named objects: the versions hash (kind -> counter).
  std::string object_versions_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace delayq::backend

#endif  // DELAYQ_BACKEND_REDIS_BACKEND_H_

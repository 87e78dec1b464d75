#include "backend/redis_backend.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <charconv>
#include <cstdio>
#include <random>
#include <span>

#include "backend/resp.h"
#include "delayq/engine.h"

namespace delayq::backend {

namespace {

using redis::Script;

constexpr JobId kSeqMask = (JobId{1} << RedisBackend::kSeqBits) - 1;
// Topics served per reserve script when several sessions wait on one topic.
constexpr size_t kWaitersPerScript = 32;
// Calls of one topic sent to Redis as one batch, at most.
constexpr size_t kCallsPerBatch = 64;
// Batches of one topic awaiting their replies, at most.
constexpr int kMaxInFlight = 2;
// Jobs a clear script deletes at once.
constexpr int kClearChunk = 1000;
// How long calls carry a number registered for their topic (FlushBatch).
constexpr TimeMs kFreshMs = 30'000;
// Names are unique across topics, which takes one hash that every
// topic's call may reach (docs/redis-backend.md, "Names").
constexpr std::string_view kNamesNeedOneServer =
    "the Youzan-style routes need a single Redis server: on a cluster an id cannot be kept "
    "unique across topics in one call";

std::string_view Str(const redisReply* r) {
  if (r == nullptr || r->str == nullptr) return {};
  return std::string_view(r->str, r->len);
}

int64_t Int(const redisReply* r) {
  if (r == nullptr) return 0;
  if (r->type == REDIS_REPLY_INTEGER) return r->integer;
  int64_t v = 0;
  std::string_view s = Str(r);
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

const redisReply* At(const redisReply* r, size_t i) {
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || i >= r->elements) return nullptr;
  return r->element[i];
}

size_t Size(const redisReply* r) {
  return r != nullptr && r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
}

JobState StateOf(std::string_view s) {
  if (s == "d") return JobState::kDelayed;
  if (s == "u") return JobState::kReserved;
  if (s == "b") return JobState::kBuried;
  return JobState::kReady;
}

// A job's member: its sequence number in its topic, 13 digits.
std::string Member(JobId id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%013llu", static_cast<unsigned long long>(id & kSeqMask));
  return buf;
}

// The number of a job's topic: a call naming the job by member carries it
// (RedisBackend::Run), so that a job of an incarnation that has ended is
// not taken for one of a later incarnation with the same member.
int64_t NoOf(JobId id) { return static_cast<int64_t>(id >> RedisBackend::kSeqBits); }

std::string EncodeBackoff(const Backoff& b) {
  switch (b.kind) {
    case Backoff::Kind::kNone:
      return "";
    case Backoff::Kind::kList: {
      std::string s = "L:";
      for (size_t i = 0; i < b.delays_ms.size(); ++i) {
        if (i > 0) s += ',';
        s += std::to_string(b.delays_ms[i]);
      }
      return s;
    }
    case Backoff::Kind::kExponential:
      return "E:" + std::to_string(b.base_ms) + ":" + std::to_string(b.cap_ms);
  }
  return "";
}

Status Unexpected(std::string_view what) {
  return Status::Internal("redis: unexpected reply to " + std::string(what));
}

// A reserved job as a script returned it, owned until handed out.
struct Got {
  JobId id = 0;
  std::string topic, key, body;
  uint32_t priority = 0;
  TimeMs deadline = 0;
  // A reserve with detach: the job's other figures (created, delay, ttr,
  // reserves, timeouts, releases, buries, kicks, max_tries), and its lease.
  bool full = false;
  int64_t figures[9] = {};
  std::string lease;
  bool named = false;
};

// A name that is a job id in canonical decimal (digits only, no leading
// zero, within 64 bits): that id; else 0.
JobId DecimalId(std::string_view name) {
  if (name.empty() || name.size() > 20 || name[0] == '0') return 0;
  for (char ch : name)
    if (ch < '0' || ch > '9') return 0;
  JobId id = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), id);
  return ec == std::errc() && end == name.data() + name.size() ? id : 0;
}

JobId JobIdOf(int64_t topic_no, std::string_view member) {
  JobId seq = 0;
  std::from_chars(member.data(), member.data() + member.size(), seq);
  return (static_cast<uint64_t>(topic_no) << RedisBackend::kSeqBits) | seq;
}

// A reserved job as the functions write it (reserve_one in
// lua/delayq.lua): "<member><deadline>,<priority>,<index>,<key
// length>,<key><body>", the member 13 digits; index: which owner of the
// call it went to; for a lease's job, 'L' and nine more figures before the
// key length (Got::figures); for a named job, 'N' just before the key
// length. False when s is not one.
bool ParseGot(int64_t topic_no, const std::string& topic, std::string_view s, Got* g,
              size_t* index) {
  constexpr size_t kMemberDigits = 13;
  if (s.size() < kMemberDigits) return false;
  std::string_view member = s.substr(0, kMemberDigits);
  s.remove_prefix(kMemberDigits);
  auto number = [&s](int64_t* x) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *x);
    if (ec != std::errc() || end == s.data() + s.size() || *end != ',' || *x < 0) return false;
    s.remove_prefix(static_cast<size_t>(end - s.data()) + 1);
    return true;
  };
  int64_t v[4];
  for (int i = 0; i < 3; ++i)
    if (!number(&v[i])) return false;
  g->full = !s.empty() && s.front() == 'L';
  if (g->full) {
    s.remove_prefix(1);
    for (int64_t& x : g->figures)
      if (!number(&x)) return false;
  }
  g->named = !s.empty() && s.front() == 'N';
  if (g->named) s.remove_prefix(1);
  if (!number(&v[3]) || static_cast<uint64_t>(v[3]) > s.size()) return false;
  g->id = JobIdOf(topic_no, member);
  g->topic = topic;
  g->deadline = v[0];
  g->priority = static_cast<uint32_t>(v[1]);
  *index = static_cast<size_t>(v[2]);
  g->key = std::string(s.substr(0, static_cast<size_t>(v[3])));
  g->body = std::string(s.substr(static_cast<size_t>(v[3])));
  return true;
}

// The jobs a reserve answered (dq_reserve, dq_reserve_job), in order, each
// with the index of the owner it went to: one job's string, or {'ok', job
// string, ...}. False when r is neither ({'paused', n} included).
bool ReservedIn(int64_t topic_no, const std::string& topic, const redisReply* r,
                std::vector<std::pair<Got, size_t>>* out) {
  out->clear();
  if (r == nullptr) return false;
  auto one = [&](const redisReply* s) {
    if (s == nullptr || s->type != REDIS_REPLY_STRING) return false;
    out->emplace_back();
    return ParseGot(topic_no, topic, Str(s), &out->back().first, &out->back().second);
  };
  if (r->type == REDIS_REPLY_STRING) return one(r);
  if (Size(r) == 0 || Str(At(r, 0)) != "ok") return false;
  for (size_t i = 1; i < Size(r); ++i)
    if (!one(At(r, i))) return false;
  return true;
}

// Gives the jobs reserved for a lease base (an owner of a reserve made
// with detach; empty for a session's) their leases: the base, '.', and the
// job's place among the base's jobs of the call, from 1 (reserve_one in
// the Lua).
void NameLeases(std::vector<std::pair<Got, size_t>>& answered,
                const std::vector<std::string>& bases) {
  std::vector<size_t> count(bases.size(), 0);
  for (auto& [g, index] : answered) {
    if (index >= bases.size() || bases[index].empty()) continue;
    g.lease = bases[index] + "." + std::to_string(++count[index]);
  }
}

// A call's arguments in RESP (RedisBackend::Topic::Call).
template <typename Range>
std::string RespArgs(const Range& args) {
  std::string out;
  out.reserve(resp::BulksSize(args));
  resp::AppendBulks(out, args);
  return out;
}

std::vector<JobView> Views(const std::vector<Got>& got) {
  std::vector<JobView> views;
  views.reserve(got.size());
  for (const Got& g : got) {
    JobView& v = views.emplace_back();
    v.id = g.id;
    v.topic = g.topic;
    v.key = g.key;
    v.body = g.body;
    v.state = JobState::kReserved;
    v.priority = g.priority;
    v.due_ms = g.deadline;
    v.lease = g.lease;
    v.named = g.named;
    if (g.full) {
      const int64_t* f = g.figures;
      v.created_ms = f[0];
      v.delay_ms = f[1];
      v.ttr_ms = f[2];
      v.reserves = static_cast<uint32_t>(f[3]);
      v.timeouts = static_cast<uint32_t>(f[4]);
      v.releases = static_cast<uint32_t>(f[5]);
      v.buries = static_cast<uint32_t>(f[6]);
      v.kicks = static_cast<uint32_t>(f[7]);
      v.max_tries = static_cast<uint32_t>(f[8]);
    }
  }
  return views;
}

// What a job operation answered (change() in the Lua: '<state><due>,
// <priority>'), or its refusal ('!...': refusal() in the Lua), as the
// engine says it (RefuseJob).
Result<JobChange> ChangeOf(JobId id, const redisReply* r, std::string_view what) {
  if (r == nullptr || r->type != REDIS_REPLY_STRING || Str(r).empty()) return Unexpected(what);
  std::string_view a = Str(r);
  if (a[0] == '!') {
    char why = a.size() > 1 ? a[1] : 'n';
    std::string_view rest = a.size() > 2 ? a.substr(2) : std::string_view();
    JobState found = StateOf(rest);
    switch (why) {
      case 'l':
        return RefuseJob(id, Refusal::kLeaseLost, found);
      case 'k':
        return RefuseJob(id, Refusal::kNotKickable, found);
      case 'c':
        if (rest == "l") return RefuseJob(id, Refusal::kHeldByLease, JobState::kReserved);
        if (rest == "s") return RefuseJob(id, Refusal::kHeldBySession, JobState::kReserved);
        return RefuseJob(id, Refusal::kNotReserved, found);
      default:
        return RefuseJob(id, Refusal::kNoJob, found);
    }
  }
  JobChange c;
  c.id = id;
  c.state = StateOf(a.substr(0, 1));
  a.remove_prefix(1);
  size_t comma = a.find(',');
  if (comma == std::string_view::npos) return Unexpected(what);
  int64_t due = 0, pri = 0;
  std::from_chars(a.data(), a.data() + comma, due);
  std::from_chars(a.data() + comma + 1, a.data() + a.size(), pri);
  c.due_ms = due;
  c.priority = static_cast<uint32_t>(pri);
  return c;
}

}  // namespace

Result<RedisAddress> ParseRedisUrl(std::string_view url) {
  constexpr std::string_view kPlain = "redis://", kCluster = "redis-cluster://";
  RedisAddress a;
  std::string_view rest;
  if (url.substr(0, kPlain.size()) == kPlain) {
    rest = url.substr(kPlain.size());
  } else if (url.substr(0, kCluster.size()) == kCluster) {
    a.cluster = true;
    rest = url.substr(kCluster.size());
  } else {
    return Status::InvalidArgument(
        "a Redis address is redis://host[:port][/db] or redis-cluster://host[:port],...");
  }
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) {
      auto [p, ec] = std::from_chars(db.data(), db.data() + db.size(), a.db);
      if (ec != std::errc() || p != db.data() + db.size() || a.db < 0)
        return Status::InvalidArgument("bad database number in " + std::string(url));
      if (a.cluster && a.db != 0)
        return Status::InvalidArgument("a Redis Cluster has database 0 only: " + std::string(url));
    }
  }
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view one = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    RedisRouter::Node n;
    if (size_t colon = one.rfind(':'); colon != std::string_view::npos) {
      std::string_view port = one.substr(colon + 1);
      one = one.substr(0, colon);
      auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), n.port);
      if (ec != std::errc() || p != port.data() + port.size() || n.port < 1 || n.port > 65535)
        return Status::InvalidArgument("bad port in " + std::string(url));
    }
    if (one.empty()) return Status::InvalidArgument("no host in " + std::string(url));
    n.host = std::string(one);
    a.nodes.push_back(std::move(n));
  }
  if (a.nodes.empty()) return Status::InvalidArgument("no host in " + std::string(url));
  if (!a.cluster && a.nodes.size() > 1)
    return Status::InvalidArgument("redis:// names one server; use redis-cluster:// for several");
  return a;
}

RedisBackend::RedisBackend(boost::asio::io_context& io, Options options, const Clock& clock)
    : io_(io),
      options_(std::move(options)),
      clock_(clock),
      wake_timer_(io),
      sweep_timer_(io),
      registry_names_("dq:{dq}:topics"),
      registry_numbers_("dq:{dq}:topic-names"),
      names_("dq:{dq}:names") {
  info_.name = "redis";
  GetTopic("default");  // number 0, known without the registry
  info_.max_job_size = options_.max_job_size;
  if (options_.instance_id.empty()) {
    std::random_device rd;
    char buf[17];
    std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
    options_.instance_id = buf;
  }
  RedisRouter::Options ro;
  ro.seeds = options_.address.nodes;
  ro.cluster = options_.address.cluster;
  ro.db = options_.address.db;
  ro.on_node_connect = [](RedisClient& node) {
    node.Command({"FUNCTION", "LOAD", "REPLACE", redis::Library()}, [](const redisReply*) {});
  };
  router_ = std::make_unique<RedisRouter>(io_, ro);
  // Messages published in a cluster reach the subscribers of every node:
  // one subscription, on the first node named, hears them all.
  RedisClient::Options so;
  so.host = options_.address.nodes.front().host;
  so.port = options_.address.nodes.front().port;
  so.subscriber = true;
  // A wake-up, or a subscription confirmed: a job that became ready before
  // Redis had the subscription published to nobody, and the next one may
  // not publish (docs/redis-backend.md, "Missed messages"), so the waiters
  // look.
  auto serve = [this](std::string_view channel) {
    // dq:{topic}:wake
    constexpr std::string_view kHead = "dq:{", kTail = "}:wake";
    if (channel.size() <= kHead.size() + kTail.size()) return;
    ServeTopic(
        std::string(channel.substr(kHead.size(), channel.size() - kHead.size() - kTail.size())));
  };
  so.on_message = [serve](std::string_view channel, std::string_view) { serve(channel); };
  so.on_subscribed = serve;
  subscriber_ = std::make_unique<RedisClient>(io_, so);
}

RedisBackend::~RedisBackend() {
  wake_timer_.cancel();
  sweep_timer_.cancel();
  for (auto& [id, s] : sessions_)
    if (s.wait_timer) s.wait_timer->cancel();
}

void RedisBackend::Start() {
  router_->Start();
  subscriber_->Start();
  Sweep();
}

bool RedisBackend::connected() const { return router_->connected(); }

std::string RedisBackend::Owner(SessionId sid) const {
  if (auto it = sessions_.find(sid); it != sessions_.end()) return it->second.owner;
  return options_.instance_id + ":" + std::to_string(sid);
}

std::string_view RedisBackend::Caller(SessionId sid) const {
  if (sid == 0) return "*";
  auto it = sessions_.find(sid);
  // A closed session's jobs went back (CloseSession): it holds none.
  return it == sessions_.end() ? std::string_view("-") : std::string_view(it->second.owner);
}

JobId RedisBackend::IdOf(const Topic& t, std::string_view member) const {
  return JobIdOf(t.no, member);
}

template <typename F>
F RedisBackend::Guard(SessionId sid, F done) {
  if (sid == 0) return done;
  std::weak_ptr<bool> alive = alive_;
  return [this, alive, sid, done = std::move(done)](auto&&... args) {
    if (alive.expired() || sessions_.count(sid) == 0) return;
    done(std::forward<decltype(args)>(args)...);
  };
}

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
  auto fail = [this, tp](Status st) {
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

// ---- scripts ---------------------------------------------------------------

void RedisBackend::RunRaw(Script sc, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args,
                          std::function<void(Status, const redisReply*)> done) {
  std::string nkeys = std::to_string(keys.size());
  std::vector<std::string_view> argv{"FCALL", redis::Name(sc), nkeys};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  Call(keys.front(), std::make_shared<const std::string>(resp::Format(argv)), false,
       std::move(done));
}

void RedisBackend::Call(const std::string& route, std::shared_ptr<const std::string> command,
                        bool retried, std::function<void(Status, const redisReply*)> done) {
  std::weak_ptr<bool> alive = alive_;
  router_->Send(
      route, command,
      [this, alive, route, command, retried, done = std::move(done)](const redisReply* r) {
        if (alive.expired()) return;
        if (r == nullptr) {
          std::string why = router_->last_error().empty() ? "not connected" : router_->last_error();
          return done(Status::Unavailable("redis " + router_->address() + ": " + why), nullptr);
        }
        if (r->type == REDIS_REPLY_ERROR) {
          std::string_view e = Str(r);
          if (!retried && e.find("Function not found") != std::string_view::npos) {
            // The library is gone (FUNCTION FLUSH, or a Redis that
            // lost it): load it again on that node, then call once
            // more.
            router_->Command(route, {"FUNCTION", "LOAD", "REPLACE", redis::Library()},
                             [](const redisReply*) {});
            return Call(route, command, true, done);
          }
          return done(Status::Internal("redis: " + std::string(e)), nullptr);
        }
        done(Status::Ok(), r);
      });
}

void RedisBackend::Run(Script sc, Topic& t, std::initializer_list<std::string_view> args,
                       ReplyFn done) {
  Enqueue(t, Topic::Call{sc, args.size(), RespArgs(args), std::move(done)});
}

void RedisBackend::Run(Script sc, Topic& t, int64_t job_no,
                       std::initializer_list<std::string_view> args, ReplyFn done) {
  Enqueue(t, Topic::Call{sc, args.size(), RespArgs(args), std::move(done), job_no});
}

void RedisBackend::Run(Script sc, Topic& t, const std::vector<std::string>& args, ReplyFn done) {
  Enqueue(t, Topic::Call{sc, args.size(), RespArgs(args), std::move(done)});
}

void RedisBackend::Run(Script sc, Topic& t, int64_t job_no, const std::vector<std::string>& args,
                       ReplyFn done) {
  Enqueue(t, Topic::Call{sc, args.size(), RespArgs(args), std::move(done), job_no});
}

void RedisBackend::Enqueue(Topic& t, Topic::Call call) {
  t.batch.push_back(std::move(call));
  if (t.flush_posted || t.in_flight >= kMaxInFlight) return;
  t.flush_posted = true;
  std::weak_ptr<bool> alive = alive_;
  Topic* tp = &t;
  boost::asio::post(io_, [this, alive, tp] {
    if (!alive.expired()) FlushBatch(*tp);
  });
}

std::string RedisBackend::Header(const Topic& t) const {
  if (!options_.time_from_clock) return t.prefix;
  return std::to_string(clock_.NowUs()) + "|" + t.prefix;
}

std::string RedisBackend::Known(const Topic& t, int64_t no) const {
  std::string k = std::to_string(no);
  if (t.fresh != 0) {
    k += '/';
    k += std::to_string(t.fresh);
  }
  return k;
}

void RedisBackend::FlushBatch(Topic& t) {
  t.flush_posted = false;
  if (t.batch.empty() || t.in_flight >= kMaxInFlight) return;
  // A registered number goes with calls for a short while only: the
  // registry gives it up a minute after it was registered, unless the
  // topic took it (ScanRegistry), and a tombstone refuses it for
  // RETIRED_TTL after that (lua/delayq.lua); a call made later registers
  // a new one.
  if (t.fresh != 0 && Now() - t.fresh_at >= kFreshMs) t.fresh = 0;
  // The first calls of t.batch go, up to one that names a job of another
  // incarnation than those before it (rare: an id from before the topic's
  // last number); t.batch keeps its capacity. The call carries the number
  // of the jobs it names, or the topic's as known here.
  int64_t no = -2;
  size_t take = 0;
  for (; take < std::min(t.batch.size(), kCallsPerBatch); ++take) {
    int64_t j = t.batch[take].job_no;
    if (j < 0) continue;
    if (no != -2 && j != no) break;
    no = j;
  }
  if (no == -2) no = t.no;
  std::span<Topic::Call> calls(t.batch.data(), take);
  t.in_flight++;
  Topic* tp = &t;
  // First thing on the reply: the calls queued meanwhile leave (posted, so
  // after this batch's callbacks, which may queue more).
  auto landed = [this, tp, no](const redisReply* r) {
    tp->in_flight--;
    if (r != nullptr && (Size(r) == 2 || Size(r) == 3)) {
      // The topic's number: the one the call carried, or, when it is not,
      // the one the answer tells.
      NoteAnswer(*tp, Size(r) == 3 ? Int(At(r, 2)) : no, Int(At(r, 0)));
    }
    if (!tp->batch.empty() && !tp->flush_posted) {
      tp->flush_posted = true;
      std::weak_ptr<bool> alive = alive_;
      boost::asio::post(io_, [this, alive, tp] {
        if (!alive.expired()) FlushBatch(*tp);
      });
    }
  };
  // The command, written straight from the calls: FCALL <function> 6
  // <keys> <header> <arguments>, where a batch's arguments are, for each
  // call, its code and argument count ("p4") and its arguments.
  bool single = calls.size() == 1;
  std::string header = Header(t), known = Known(t, no);
  std::string_view fn = redis::Name(single ? calls.front().script : Script::kBatch);
  size_t nargs = 3 + t.keys.size() + 2;
  size_t size =
      16 + resp::BulkSize(fn.size()) + resp::BulkSize(header.size()) + resp::BulkSize(known.size());
  for (const std::string& k : t.keys) size += resp::BulkSize(k.size());
  for (const Topic::Call& c : calls) {
    if (!single) {
      nargs += 1;
      size += resp::BulkSize(8);
    }
    nargs += c.nargs;
    size += c.args.size();
  }
  std::string cmd;
  cmd.reserve(size);
  resp::AppendArray(cmd, nargs);
  resp::AppendBulk(cmd, "FCALL");
  resp::AppendBulk(cmd, fn);
  resp::AppendBulk(cmd, std::to_string(t.keys.size()));
  for (const std::string& k : t.keys) resp::AppendBulk(cmd, k);
  resp::AppendBulk(cmd, header);
  resp::AppendBulk(cmd, known);
  for (Topic::Call& c : calls) {
    if (!single) {
      // The operation's code and argument count: "p4".
      char code[8];
      code[0] = redis::Code(c.script);
      char* end = std::to_chars(code + 1, code + sizeof code, c.nargs).ptr;
      resp::AppendBulk(cmd, std::string_view(code, static_cast<size_t>(end - code)));
    }
    cmd.append(c.args);
  }
  // The calls stay until the reply: a put or pause that found the topic
  // without an incarnation ('N') goes again once a number is registered.
  auto sent = std::make_shared<std::vector<Topic::Call>>(std::make_move_iterator(calls.begin()),
                                                         std::make_move_iterator(calls.end()));
  t.batch.erase(t.batch.begin(), t.batch.begin() + static_cast<ptrdiff_t>(calls.size()));
  auto command = std::make_shared<const std::string>(std::move(cmd));
  Call(t.keys.front(), std::move(command), false,
       [this, tp, landed, sent, single, fresh = t.fresh](Status st, const redisReply* r) {
         landed(st.ok() ? r : nullptr);
         std::vector<Topic::Call>& calls = *sent;
         if (st.ok() && (Size(r) < 2 || (!single && Size(At(r, 1)) != calls.size())))
           st = Unexpected(single ? "a function" : "a batch");
         if (!st.ok()) {
           for (Topic::Call& c : calls) c.done(st, nullptr);
           return;
         }
         std::vector<Topic::Call> again;
         for (size_t i = 0; i < calls.size(); ++i) {
           const redisReply* one = single ? At(r, 1) : At(At(r, 1), i);
           if (one != nullptr && one->type == REDIS_REPLY_STRING && Str(one) == "N" &&
               (calls[i].script == Script::kPut || calls[i].script == Script::kPause)) {
             again.push_back(std::move(calls[i]));
             continue;
           }
           calls[i].done(Status::Ok(), one);
         }
         if (!again.empty()) RegisterFor(*tp, std::move(again), fresh);
       });
}

void RedisBackend::NoteAnswer(Topic& t, int64_t no, int64_t next_wake) {
  SetNumber(t, no);
  // (ms from now, as Redis's clock sees it; -2: idle)
  t.live = next_wake != -2 || t.name == "default";
  NoteWake(t, next_wake < 0 ? kNever : Now() + next_wake);
}

void RedisBackend::ByName(char op, std::string_view name, NamedFn then) {
  if (options_.address.cluster)
    return then(Status::InvalidArgument(kNamesNeedOneServer), nullptr, 0, nullptr);
  if (name.empty()) return then(Status::Ok(), nullptr, 0, nullptr);
  // The name is looked up in the function. A name that is an id in
  // decimal may also name the job of that id: the call carries that job's
  // topic (found here, as for any id), for the function to fall back on.
  auto send = [this, op, name = std::string(name), then](Topic* t, JobId id) {
    std::string prefix = t != nullptr ? t->prefix : std::string("dq:");
    std::string header =
        options_.time_from_clock ? std::to_string(clock_.NowUs()) + "|" + prefix : prefix;
    std::string no = t != nullptr ? std::to_string(NoOf(id)) : std::string("-1");
    std::string member = t != nullptr ? Member(id) : std::string();
    RunRaw(Script::kNamed, {names_}, {header, no, std::string(1, op), name, member},
           [this, then](Status st, const redisReply* r) {
             if (!st.ok()) return then(st, nullptr, 0, nullptr);
             if (r->type == REDIS_REPLY_STRING && Str(r) == "!n")
               return then(Status::Ok(), nullptr, 0, nullptr);
             if (Size(r) != 5) return then(Unexpected("a call by name"), nullptr, 0, nullptr);
             // {next_wake, result, number, topic, member}: the call ran as one
             // of that topic's, and the instance notes its answer as theirs.
             int64_t no = Int(At(r, 2));
             Topic& t = GetTopic(std::string(Str(At(r, 3))));
             NoteAnswer(t, no, Int(At(r, 0)));
             then(Status::Ok(), &t, no >= 0 ? JobIdOf(no, Str(At(r, 4))) : 0, At(r, 1));
           });
  };
  JobId id = DecimalId(name);
  if (id == 0) return send(nullptr, 0);
  ForJob(id,
         [send = std::move(send), then = std::move(then), id](Status st, Topic* t, std::string) {
           if (!st.ok()) return then(st, nullptr, 0, nullptr);
           send(t, id);
         });
}

// ---- timing ----------------------------------------------------------------

void RedisBackend::NoteWake(Topic& t, TimeMs when) {
  if (t.wake == when) return;
  if (t.wake != kNever) wakes_.erase({t.wake, t.name});
  t.wake = when;
  if (when != kNever) wakes_.emplace(when, t.name);
  ArmWakeTimer();
}

void RedisBackend::ArmWakeTimer() {
  if (wakes_.empty()) return;
  // At least a millisecond ahead: Redis's clock may run a little behind.
  TimeMs at = std::max(wakes_.begin()->first, Now() + 1);
  if (wake_timer_at_ != kNever && wake_timer_at_ <= at) return;
  wake_timer_at_ = at;
  wake_timer_.expires_at(clock_.SteadyAt(at));
  std::weak_ptr<bool> alive = alive_;
  wake_timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    OnWakeTimer();
  });
}

void RedisBackend::OnWakeTimer() {
  wake_timer_at_ = kNever;
  TimeMs now = Now();
  std::vector<std::string> due;
  while (!wakes_.empty() && wakes_.begin()->first <= now) {
    due.push_back(wakes_.begin()->second);
    wakes_.erase(wakes_.begin());
  }
  for (const std::string& name : due) {
    Topic& t = GetTopic(name);
    t.wake = kNever;
    Run(Script::kTick, t, {}, [](Status, const redisReply*) {});
  }
  ArmWakeTimer();
}

void RedisBackend::Sweep() {
  std::weak_ptr<bool> alive = alive_;
  if (router_->connected()) {
    RefreshRegistry([this, alive] {
      if (alive.expired()) return;
      // The topics with a job or a pause, and those a reserve of this
      // instance waits on (whose reserve applies what is due): the sweep
      // costs what the live topics do, however many were ever named.
      for (auto& [name, t] : topics_) {
        Topic& topic = *t;
        TryWaiters(topic);
        if (topic.waiters.empty() && topic.subscribed) {
          subscriber_->Unsubscribe(topic.prefix + "wake");
          topic.subscribed = false;
        }
        if (topic.live && !topic.serving)
          Run(Script::kTick, topic, {}, [](Status, const redisReply*) {});
      }
      DropUnused();
      ScanRegistry();
    });
  }
  sweep_timer_.expires_after(std::chrono::milliseconds(options_.sweep_ms));
  sweep_timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (!ec && !alive.expired()) Sweep();
  });
}

// ---- sessions --------------------------------------------------------------

SessionId RedisBackend::OpenSession() {
  SessionId id = next_session_++;
  Session& s = sessions_.emplace(id, Session{}).first->second;
  s.owner = options_.instance_id + ":" + std::to_string(id);
  Topic& d = GetTopic("default");
  d.using_count++;
  d.watching++;
  return id;
}

void RedisBackend::CloseSession(SessionId sid) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return;
  Session& s = it->second;
  EndWait(s);
  std::string owner = Owner(sid);
  for (auto& [id, held] : s.held) {
    Topic& t = GetTopic(held.topic);
    Run(Script::kReturn, t, NoOf(id), {Member(id), owner, "0"}, [](Status, const redisReply*) {});
    holders_.erase(id);
  }
  GetTopic(s.used).using_count--;
  for (const std::string& w : s.watched) GetTopic(w).watching--;
  sessions_.erase(it);
}

Status RedisBackend::Use(SessionId sid, std::string_view topic) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return Status::NotFound("no such session");
  if (!IsValidTopicName(topic)) return Status::InvalidArgument("bad topic name");
  if (Status st = RoomForTopic(topic); !st.ok()) return st;
  Session& s = it->second;
  GetTopic(s.used).using_count--;
  s.used = std::string(topic);
  GetTopic(s.used).using_count++;
  return Status::Ok();
}

Result<size_t> RedisBackend::Watch(SessionId sid, std::string_view topic) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return Status::NotFound("no such session");
  if (!IsValidTopicName(topic)) return Status::InvalidArgument("bad topic name");
  Session& s = it->second;
  if (std::find(s.watched.begin(), s.watched.end(), topic) == s.watched.end()) {
    if (Status st = RoomForTopic(topic); !st.ok()) return st;
    s.watched.emplace_back(topic);
    GetTopic(s.watched.back()).watching++;
  }
  return s.watched.size();
}

Result<size_t> RedisBackend::Ignore(SessionId sid, std::string_view topic) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return Status::NotFound("no such session");
  if (!IsValidTopicName(topic)) return Status::InvalidArgument("bad topic name");
  Session& s = it->second;
  auto w = std::find(s.watched.begin(), s.watched.end(), topic);
  if (w == s.watched.end()) return s.watched.size();
  if (s.watched.size() == 1) return Status::NotIgnored();
  GetTopic(*w).watching--;
  s.watched.erase(w);
  return s.watched.size();
}

std::string RedisBackend::UsedTopic(SessionId sid) const {
  auto it = sessions_.find(sid);
  return it == sessions_.end() ? std::string() : it->second.used;
}

std::vector<std::string> RedisBackend::WatchedTopics(SessionId sid) const {
  auto it = sessions_.find(sid);
  return it == sessions_.end() ? std::vector<std::string>() : it->second.watched;
}

void RedisBackend::NoteHeld(SessionId sid, const std::string& topic, JobId id, TimeMs deadline) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return;
  // A session that held the job before (its TTR ran out) holds it no more.
  Forget(id);
  it->second.held[id] = Held{topic, deadline};
  holders_[id] = sid;
}

void RedisBackend::Forget(JobId id) {
  auto h = holders_.find(id);
  if (h == holders_.end()) return;
  if (auto it = sessions_.find(h->second); it != sessions_.end()) it->second.held.erase(id);
  holders_.erase(h);
}

// ---- producing -------------------------------------------------------------

void RedisBackend::Put(SessionId sid, const PutRequest& r, Callback<PutResult> done) {
  done = Guard(sid, std::move(done));
  if (r.body.size() > options_.max_job_size)
    return done(Status::JobTooBig("job body exceeds the maximum size"));
  if (r.ttr_ms < 1 || r.ttr_ms > kMaxDelayMs)
    return done(Status::InvalidArgument("ttr out of range"));
  if (r.key.size() > kMaxKeyLength)
    return done(Status::InvalidArgument("key longer than 200 bytes"));
  TimeMs now = Now();
  if (r.run_at) {
    if (*r.run_at < 0 || *r.run_at - now > kMaxDelayMs)
      return done(Status::InvalidArgument("run_at out of range"));
  } else if (r.delay_ms < 0 || r.delay_ms > kMaxDelayMs) {
    return done(Status::InvalidArgument("delay out of range"));
  }
  if (Status st = ValidateBackoff(r.backoff); !st.ok()) return done(st);
  if (r.named && r.key.empty())
    return done(Status::InvalidArgument("a name is a key: the key is empty"));
  if (r.named && options_.address.cluster)
    return done(Status::InvalidArgument(kNamesNeedOneServer));
  std::string name;
  if (!r.topic.empty()) {
    if (!IsValidTopicName(r.topic)) return done(Status::InvalidArgument("bad topic name"));
    name = std::string(r.topic);
  } else if (auto it = sessions_.find(sid); it != sessions_.end()) {
    name = it->second.used;
  } else {
    name = "default";
  }
  // The optional arguments go only up to the last one not at its default
  // (docs/redis-backend.md): each argument costs Redis a conversion.
  // The call is written now (its arguments point into `r`), and queued
  // once the topic has its number.
  std::string backoff = EncodeBackoff(r.backoff);
  size_t optional = r.named            ? 5
                    : !backoff.empty() ? 4
                    : r.max_tries != 0 ? 3
                    : !r.key.empty()   ? 2
                    : r.run_at         ? 1
                                       : 0;
  std::string pri = std::to_string(r.priority), delay = std::to_string(r.delay_ms),
              ttr = std::to_string(r.ttr_ms);
  std::string run_at = r.run_at ? std::to_string(*r.run_at) : std::string();
  std::string max_tries = std::to_string(r.max_tries);
  const std::string_view all[] = {r.body, pri, delay, ttr, run_at, r.key, max_tries, backoff, "1"};
  std::span<const std::string_view> args(all, 4 + optional);
  Topic::Call call{Script::kPut, args.size(), RespArgs(args), nullptr};
  Topic& t = GetTopic(name);
  Topic* tp = &t;
  call.done = [this, tp, done = std::move(done), name = r.named ? std::string(r.key) : ""](
                  Status st, const redisReply* r) {
    if (!st.ok()) return done(st);
    // Created: "<state><member>"; a job with that key already: {0,
    // member, state}; a named put refused: "!u" or "!o<topic>".
    PutResult res;
    if (r != nullptr && r->type == REDIS_REPLY_STRING && r->len > 1 && r->str[0] == '!') {
      if (r->str[1] == 'u')
        return done(Status::Conflict("topic '" + tp->name + "' holds a job with key '" + name +
                                     "' that was not put by /push"));
      return done(Status::Conflict("id '" + name + "' belongs to a job in topic '" +
                                   std::string(Str(r).substr(2)) + "'"));
    }
    if (r != nullptr && r->type == REDIS_REPLY_STRING && r->len > 1) {
      res.created = true;
      res.id = IdOf(*tp, Str(r).substr(1, 13));
      res.state = StateOf(Str(r).substr(0, 1));
      if (res.state == JobState::kDelayed) {
        std::string_view due = Str(r).substr(std::min<size_t>(14, Str(r).size()));
        std::from_chars(due.data(), due.data() + due.size(), res.due_ms);
      }
    } else if (Size(r) >= 3) {
      res.created = false;
      res.id = IdOf(*tp, Str(At(r, 1)));
      res.state = StateOf(Str(At(r, 2)));
      res.due_ms = Int(At(r, 3));
    } else {
      return done(Unexpected("put"));
    }
    if (res.created && res.state == JobState::kReady) TryWaiters(*tp);
    done(res);
  };
  Enqueue(t, std::move(call));
}

// ---- consuming -------------------------------------------------------------

void RedisBackend::TryReserve(SessionId sid, const std::vector<std::string>& topics, uint32_t count,
                              bool detach,
                              std::function<void(Status, std::vector<JobView>, bool)> done) {
  // Reserves from one topic; `then` gets the jobs (owned), and whether the
  // topic is paused with ready jobs.
  auto reserve_from = [this, sid, count, detach](
                          Topic* tp, std::function<void(Status, std::vector<Got>, bool)> then) {
    // A session that closed while its topic was registered reserves
    // nothing (its reply would be dropped). So the session exists here, and
    // Owner(sid) below, after it closed, is the owner the jobs got.
    if (sessions_.count(sid) == 0) return then(Status::Ok(), {}, false);
    // Detached: the jobs are held by leases (NameLeases), not the session.
    std::string owner = detach ? NewLeaseBase() : std::string(Caller(sid));
    // One job: the owner alone (its count defaults to 1).
    ReplyFn got_reply = [this, tp, sid, detach, owner, then = std::move(then)](
                            Status st, const redisReply* r) {
      std::vector<Got> got;
      if (!st.ok()) return then(st, got, false);
      if (Str(At(r, 0)) == "paused") return then(Status::Ok(), got, Int(At(r, 1)) > 0);
      std::vector<std::pair<Got, size_t>> answered;
      if (!ReservedIn(tp->no, tp->name, r, &answered))
        return then(Unexpected("reserve"), got, false);
      if (detach) NameLeases(answered, {owner});
      bool gone = sessions_.count(sid) == 0;
      for (auto& answer : answered) {
        Got& g = answer.first;
        if (gone) {
          // The session closed while the call ran: nobody will get the
          // job, so it goes back, as if never reserved.
          Run(Script::kReturn, *tp, NoOf(g.id), {Member(g.id), detach ? g.lease : Owner(sid), "1"},
              [](Status, const redisReply*) {});
          continue;
        }
        if (detach) {
          Forget(g.id);
        } else {
          NoteHeld(sid, tp->name, g.id, g.deadline);
        }
        got.push_back(std::move(g));
      }
      then(Status::Ok(), std::move(got), false);
    };
    if (count == 1) return Run(Script::kReserve, *tp, {owner}, std::move(got_reply));
    Run(Script::kReserve, *tp, {owner, std::to_string(count)}, std::move(got_reply));
  };
  auto finish = [done = std::move(done)](Status st, std::vector<Got> got, bool paused_ready) {
    std::vector<JobView> views = Views(got);  // they point into `got`
    done(st, views, paused_ready);
  };
  if (topics.size() == 1) return reserve_from(&GetTopic(topics.front()), std::move(finish));
  // The next job of each topic first (a topic with none has no state in
  // Redis, and the call leaves it so).
  auto remaining = std::make_shared<size_t>(topics.size());
  auto failed = std::make_shared<Status>();
  auto candidates = std::make_shared<std::vector<std::pair<std::pair<int64_t, JobId>, Topic*>>>();
  auto paused_ready = std::make_shared<bool>(false);
  // The topics stay until every answer is in (DropUnused).
  auto pinned = std::make_shared<std::vector<Topic*>>();
  auto after_tops = [reserve_from, finish, candidates, failed, paused_ready, pinned]() {
    for (Topic* t : *pinned) t->pins--;
    if (!failed->ok()) return finish(*failed, {}, false);
    if (candidates->empty()) return finish(Status::Ok(), {}, *paused_ready);
    std::sort(candidates->begin(), candidates->end());
    reserve_from(candidates->front().second,
                 [finish, paused_ready](Status st, std::vector<Got> got, bool p) {
                   finish(st, std::move(got), p || *paused_ready);
                 });
  };
  for (const std::string& name : topics) {
    Topic* tp = &GetTopic(name);
    tp->pins++;
    pinned->push_back(tp);
    auto one_done = [remaining, after_tops] {
      if (--*remaining == 0) after_tops();
    };
    Run(Script::kTop, *tp, {},
        [this, tp, failed, candidates, paused_ready, one_done](Status st, const redisReply* r) {
          if (!st.ok()) {
            *failed = st;
          } else if (Str(At(r, 0)) == "paused") {
            if (Int(At(r, 1)) > 0) *paused_ready = true;
          } else if (Size(r) == 2) {
            candidates->push_back({{Int(At(r, 0)), IdOf(*tp, Str(At(r, 1)))}, tp});
          }
          one_done();
        });
  }
}

bool RedisBackend::DeadlineSoon(Session& s) {
  TimeMs now = Now();
  for (auto it = s.held.begin(); it != s.held.end();) {
    if (it->second.deadline <= now) {
      holders_.erase(it->first);
      it = s.held.erase(it);  // its TTR ran out: it is not ours any more
    } else {
      if (it->second.deadline - now <= kDeadlineSafetyMarginMs) return true;
      ++it;
    }
  }
  return false;
}

void RedisBackend::Reserve(const ReserveRequest& r, JobsDone done) {
  auto it = sessions_.find(r.session);
  if (it == sessions_.end()) return done(Status::NotFound("no such session"), {});
  Session& s = it->second;
  EndWait(s);
  SessionId sid = r.session;
  uint32_t count = std::max<uint32_t>(1, r.count);
  TimeMs timeout = r.timeout_ms;
  bool detach = r.detach;
  done = Guard(sid, std::move(done));
  TryReserve(sid, s.watched, count, detach,
             [this, sid, count, timeout, detach, done = std::move(done)](
                 Status st, std::vector<JobView> views, bool paused_ready) mutable {
               if (!st.ok()) return done(st, {});
               if (!views.empty()) return done(Status::Ok(), views);
               auto it = sessions_.find(sid);
               if (it == sessions_.end()) return;
               Session& s = it->second;
               if (!paused_ready && DeadlineSoon(s)) return done(Status::DeadlineSoon(), {});
               if (timeout == 0) return done(Status::TimedOut(), {});
               s.waiting = true;
               s.wait_gen++;
               s.wait_count = count;
               s.wait_detach = detach;
               s.wait_deadline =
                   timeout < 0 ? kNever : Now() + std::min<TimeMs>(timeout, kMaxDelayMs);
               s.wait_done = std::move(done);
               StartWait(sid);
             });
}

void RedisBackend::StartWait(SessionId sid) {
  Session& s = sessions_.at(sid);
  for (const std::string& name : s.watched) {
    Topic& t = GetTopic(name);
    t.waiters.emplace_back(sid, s.wait_gen);
    if (!t.subscribed) {
      subscriber_->Subscribe(t.prefix + "wake");
      t.subscribed = true;
    }
  }
  ArmWaitTimer(sid);
  // A job that became ready between the attempt and now sent its wake-up
  // to nobody: look once more.
  for (const std::string& name : s.watched) TryWaiters(GetTopic(name));
}

void RedisBackend::EndWait(Session& s) {
  if (!s.waiting) return;
  s.waiting = false;
  s.wait_done = nullptr;
  if (s.wait_timer) s.wait_timer->cancel();
  // Entries left in the topics' waiter lists are skipped by generation.
}

void RedisBackend::CancelReserve(SessionId sid) {
  if (auto it = sessions_.find(sid); it != sessions_.end()) EndWait(it->second);
}

void RedisBackend::ArmWaitTimer(SessionId sid) {
  Session& s = sessions_.at(sid);
  TimeMs w = s.wait_deadline;
  for (const auto& [id, h] : s.held) w = std::min(w, h.deadline - kDeadlineSafetyMarginMs);
  if (w == kNever) return;
  if (!s.wait_timer) s.wait_timer = std::make_unique<boost::asio::steady_timer>(io_);
  s.wait_timer->expires_at(clock_.SteadyAt(w));
  uint64_t gen = s.wait_gen;
  std::weak_ptr<bool> alive = alive_;
  s.wait_timer->async_wait([this, alive, sid, gen](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    OnWaitTimer(sid, gen);
  });
}

void RedisBackend::OnWaitTimer(SessionId sid, uint64_t gen) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return;
  Session& s = it->second;
  if (!s.waiting || s.wait_gen != gen) return;
  Status st;
  if (DeadlineSoon(s)) {
    st = Status::DeadlineSoon();
  } else if (Now() >= s.wait_deadline) {
    st = Status::TimedOut();
  } else {
    return ArmWaitTimer(sid);
  }
  JobsDone done = std::move(s.wait_done);
  EndWait(s);
  if (done) done(st, {});
}

void RedisBackend::ServeTopic(const std::string& name) {
  auto it = topics_.find(name);
  if (it != topics_.end()) TryWaiters(*it->second);
}

void RedisBackend::TryWaiters(Topic& t) {
  if (t.serving) {
    t.serve_again = true;
    return;
  }
  // The live waiters, oldest first (stale entries are dropped).
  std::vector<std::pair<SessionId, uint64_t>> batch;
  auto live = [this](const std::pair<SessionId, uint64_t>& w) {
    auto it = sessions_.find(w.first);
    return it != sessions_.end() && it->second.waiting && it->second.wait_gen == w.second;
  };
  while (!t.waiters.empty() && !live(t.waiters.front())) t.waiters.pop_front();
  for (const auto& w : t.waiters) {
    if (batch.size() >= kWaitersPerScript) break;
    if (live(w)) batch.push_back(w);
  }
  if (batch.empty()) return;
  std::vector<std::string> args, bases;
  for (const auto& [sid, gen] : batch) {
    const Session& s = sessions_.at(sid);
    bases.push_back(s.wait_detach ? NewLeaseBase() : std::string());
    args.push_back(s.wait_detach ? bases.back() : Owner(sid));
    args.push_back(std::to_string(s.wait_count));
  }
  t.serving = true;
  t.serve_again = false;
  Topic* tp = &t;
  Run(Script::kReserve, t, std::move(args),
      [this, tp, batch, bases = std::move(bases), live](Status st, const redisReply* r) {
        tp->serving = false;
        std::vector<std::pair<Got, size_t>> answered;
        if (!st.ok() || !ReservedIn(tp->no, tp->name, r, &answered)) return;
        NameLeases(answered, bases);
        // Jobs per waiter, in the order served.
        std::vector<std::vector<Got>> per(batch.size());
        for (auto& [g, w] : answered)
          if (w < batch.size()) per[w].push_back(std::move(g));
        bool all_served = true;
        for (size_t w = 0; w < batch.size(); ++w) {
          if (per[w].empty()) {
            all_served = false;
            continue;
          }
          auto [sid, gen] = batch[w];
          if (!live(batch[w])) {
            // The wait ended while the script ran: give the jobs back.
            for (const Got& g : per[w])
              Run(Script::kReturn, *tp, NoOf(g.id),
                  {Member(g.id), bases[w].empty() ? Owner(sid) : g.lease, "1"},
                  [](Status, const redisReply*) {});
            continue;
          }
          Session& s = sessions_.at(sid);
          for (const Got& g : per[w]) {
            if (s.wait_detach) {
              Forget(g.id);
            } else {
              NoteHeld(sid, g.topic, g.id, g.deadline);
            }
          }
          JobsDone done = std::move(s.wait_done);
          EndWait(s);
          std::vector<JobView> views = Views(per[w]);
          if (done) done(Status::Ok(), views);
        }
        if (tp->serve_again || (all_served && !tp->waiters.empty())) TryWaiters(*tp);
      });
}

void RedisBackend::ReserveJob(SessionId sid, JobId id, JobsDone done) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return done(Status::NotFound("no such session"), {});
  EndWait(it->second);
  done = Guard(sid, std::move(done));
  ForJob(id, [this, sid, id, done](Status st, Topic* t, std::string member) {
    if (!st.ok()) return done(st, {});
    if (t == nullptr) return done(Status::NotFound(), {});
    Run(Script::kReserveJob, *t, NoOf(id), {member, Owner(sid)},
        [this, t, sid, id, done](Status st, const redisReply* r) {
          if (!st.ok()) return done(st, {});
          std::vector<std::pair<Got, size_t>> answered;
          if (!ReservedIn(t->no, t->name, r, &answered) || answered.size() != 1)
            return done(Status::NotFound(), {});
          Got& g = answered.front().first;
          NoteHeld(sid, t->name, id, g.deadline);
          std::vector<Got> got{std::move(g)};
          std::vector<JobView> views = Views(got);
          done(Status::Ok(), views);
        });
  });
}

// ---- operations on a job ---------------------------------------------------

void RedisBackend::JobCall(Script script, const Claim& c, JobId id, std::vector<std::string> more,
                           Callback<JobChange> done) {
  done = Guard(c.session, std::move(done));
  std::vector<std::string> args{std::string(), std::string(Caller(c.session)),
                                std::string(c.lease)};
  for (std::string& a : more) args.push_back(std::move(a));
  ForJob(id, [this, script, id, args = std::move(args), done = std::move(done)](
                 Status st, Topic* t, std::string member) mutable {
    if (!st.ok()) return done(st);
    if (t == nullptr) return done(RefuseJob(id, Refusal::kNoJob, JobState::kReady));
    args[0] = std::move(member);
    Run(script, *t, NoOf(id), std::move(args),
        [this, t, id, done = std::move(done)](Status st, const redisReply* r) {
          if (!st.ok()) return done(st);
          auto c = ChangeOf(id, r, "a job operation");
          if (c.ok()) AfterChange(*t, *c);
          done(std::move(c));
        });
  });
}

void RedisBackend::AfterChange(Topic& t, const JobChange& c) {
  if (c.state == JobState::kReserved) {
    // Touched: the holder's deadline, whoever touched it (the operator may).
    if (auto h = holders_.find(c.id); h != holders_.end())
      if (auto it = sessions_.find(h->second); it != sessions_.end())
        it->second.held[c.id] = Held{t.name, c.due_ms};
    return;
  }
  Forget(c.id);
  if (c.state == JobState::kReady) TryWaiters(t);
}

void RedisBackend::Delete(const Claim& c, JobId id, Callback<JobChange> done) {
  JobCall(Script::kDelete, c, id, {}, std::move(done));
}

void RedisBackend::Finish(const Claim& c, JobId id, Callback<JobChange> done) {
  JobCall(Script::kFinish, c, id, {}, std::move(done));
}

void RedisBackend::DeleteByKey(const Claim& c, std::string_view topic, std::string_view key,
                               Callback<JobChange> done) {
  done = Guard(c.session, std::move(done));
  auto none = [&] {
    return Status::NotFound("no job with key '" + std::string(key) + "' in topic '" +
                            std::string(topic) + "'");
  };
  // (A name the functions cannot take names no topic.)
  if (key.empty() || !IsValidTopicName(topic)) return done(none());
  Topic* t = &GetTopic(std::string(topic));
  Run(Script::kDelete, *t,
      {"key", std::string(key), std::string(Caller(c.session)), std::string(c.lease)},
      [this, t, none = none(), done](Status st, const redisReply* r) {
        if (!st.ok()) return done(st);
        // Deleted: {change, member}; otherwise the refusal.
        if (r != nullptr && r->type == REDIS_REPLY_ARRAY && Size(r) == 2) {
          JobId id = IdOf(*t, Str(At(r, 1)));
          auto c = ChangeOf(id, At(r, 0), "delete");
          if (c.ok()) Forget(id);
          return done(std::move(c));
        }
        if (r != nullptr && r->type == REDIS_REPLY_STRING && Str(r) == "!n") return done(none);
        // A refusal names the job by its key: its id is not known here.
        auto c = ChangeOf(0, r, "delete");
        done(c.ok() ? Result<JobChange>(Unexpected("delete")) : c);
      });
}

RedisBackend::NamedFn RedisBackend::ChangeByName(std::string_view name, Callback<JobChange> done) {
  return [this, name = std::string(name), done = std::move(done)](Status st, Topic* t, JobId id,
                                                                  const redisReply* r) {
    if (!st.ok()) return done(st);
    if (t == nullptr || Str(r) == "!n")
      return done(Status::NotFound("no job has id '" + name + "'"));
    auto c = ChangeOf(id, r, "an operation by name");
    if (c.ok()) AfterChange(*t, *c);
    done(std::move(c));
  };
}

void RedisBackend::FinishByName(std::string_view name, Callback<JobChange> done) {
  ByName('f', name, ChangeByName(name, std::move(done)));
}

void RedisBackend::DeleteByName(std::string_view name, Callback<JobChange> done) {
  ByName('x', name, ChangeByName(name, std::move(done)));
}

void RedisBackend::Release(const Claim& c, JobId id, std::optional<uint32_t> priority,
                           std::optional<TimeMs> delay, Callback<JobChange> done) {
  if (delay && (*delay < 0 || *delay > kMaxDelayMs))
    return Guard(c.session, std::move(done))(Status::InvalidArgument("delay out of range"));
  JobCall(Script::kRelease, c, id,
          {priority ? std::to_string(*priority) : std::string(),
           delay ? std::to_string(*delay) : std::string()},
          std::move(done));
}

void RedisBackend::Bury(const Claim& c, JobId id, std::optional<uint32_t> priority,
                        Callback<JobChange> done) {
  JobCall(Script::kBury, c, id, {priority ? std::to_string(*priority) : std::string()},
          std::move(done));
}

void RedisBackend::Touch(const Claim& c, JobId id, Callback<JobChange> done) {
  JobCall(Script::kTouch, c, id, {}, std::move(done));
}

void RedisBackend::Kick(SessionId sid, std::string_view topic, uint64_t bound,
                        Callback<uint64_t> done) {
  done = Guard(sid, std::move(done));
  std::string b = std::to_string(std::min<uint64_t>(bound, uint64_t{1} << 50));
  std::string name(topic);
  if (!IsValidTopicName(name)) return done(Status::NotFound("no such topic"));
  Topic* t = &GetTopic(name);
  Run(Script::kKick, *t, {b}, [this, t, done](Status st, const redisReply* r) {
    if (!st.ok()) return done(st);
    uint64_t n = static_cast<uint64_t>(Int(r));
    if (n > 0) TryWaiters(*t);
    // A topic exists while it has a job or a pause, or a session uses or
    // watches it.
    if (n == 0 && !t->live && !LocallyKnown(t->name))
      return done(Status::NotFound("no such topic"));
    done(n);
  });
}

void RedisBackend::KickJob(SessionId sid, JobId id, Callback<JobChange> done) {
  done = Guard(sid, std::move(done));
  ForJob(id, [this, id, done](Status st, Topic* t, std::string member) {
    if (!st.ok()) return done(st);
    if (t == nullptr) return done(RefuseJob(id, Refusal::kNoJob, JobState::kReady));
    Run(Script::kKickJob, *t, NoOf(id), {member},
        [this, t, id, done](Status st, const redisReply* r) {
          if (!st.ok()) return done(st);
          auto c = ChangeOf(id, r, "kick-job");
          if (c.ok()) TryWaiters(*t);
          done(std::move(c));
        });
  });
}

// ---- looking ---------------------------------------------------------------

void RedisBackend::Peek(SessionId sid, PeekKind kind, JobId id, std::string_view topic,
                        std::string_view key, JobsDone done) {
  done = Guard(sid, std::move(done));
  // dq_peek's answer: {member, key, body, state, priority, due, created,
  // delay, ttr, reserves, timeouts, releases, buries, kicks, max_tries[,
  // 1: named]}, or {} (no such job).
  auto answer = [this, done](Status st, Topic* t, const redisReply* r) {
    if (!st.ok()) return done(st, {});
    if (t == nullptr || Size(r) < 15) return done(Status::NotFound(), {});
    JobView v;
    v.id = IdOf(*t, Str(At(r, 0)));
    v.topic = t->name;
    v.key = Str(At(r, 1));
    v.body = Str(At(r, 2));
    v.state = StateOf(Str(At(r, 3)));
    v.priority = static_cast<uint32_t>(Int(At(r, 4)));
    v.due_ms = Int(At(r, 5));
    v.created_ms = Int(At(r, 6));
    v.delay_ms = Int(At(r, 7));
    v.ttr_ms = Int(At(r, 8));
    uint32_t* counts[] = {&v.reserves, &v.timeouts, &v.releases, &v.buries, &v.kicks, &v.max_tries};
    for (size_t i = 0; i < std::size(counts); ++i)
      *counts[i] = static_cast<uint32_t>(Int(At(r, 9 + i)));
    v.named = Size(r) >= 16 && Int(At(r, 15)) == 1;
    done(Status::Ok(), std::span<const JobView>(&v, 1));
  };
  if (kind == PeekKind::kName) {
    return ByName('e', key,
                  [answer](Status st, Topic* t, JobId, const redisReply* r) { answer(st, t, r); });
  }
  // (job_no: of the job named by id; -1 otherwise.)
  auto peek = [this, answer](Topic* t, int64_t job_no, std::string what, std::string arg) {
    Run(Script::kPeek, *t, job_no, {what, arg},
        [t, answer](Status st, const redisReply* r) { answer(st, t, r); });
  };
  if (kind == PeekKind::kId) {
    return ForJob(id, [peek, id, done](Status st, Topic* t, std::string member) {
      if (!st.ok()) return done(st, {});
      if (t == nullptr) return done(Status::NotFound(), {});
      peek(t, NoOf(id), "id", member);
    });
  }
  if (kind == PeekKind::kKey && key.empty()) return done(Status::NotFound(), {});
  std::string what = kind == PeekKind::kKey       ? "key"
                     : kind == PeekKind::kReady   ? "ready"
                     : kind == PeekKind::kDelayed ? "delayed"
                                                  : "buried";
  if (!IsValidTopicName(topic)) return done(Status::NotFound(), {});
  peek(&GetTopic(std::string(topic)), -1, what, std::string(key));
}

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

}  // namespace

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
      bool exists = JobsIn(ts) > 0 || ts.using_count > 0 || ts.watching > 0 || t->name == "default";
      if (exists) es.topics++;
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

void RedisBackend::ListTopics(Callback<std::vector<std::string>> done) {
  TopicCounts([done](Status st, std::vector<std::pair<Topic*, TopicStats>> all) {
    if (!st.ok()) return done(st);
    std::vector<std::string> names;
    for (const auto& [t, ts] : all)
      if (JobsIn(ts) > 0 || ts.using_count > 0 || ts.watching > 0 || t->name == "default")
        names.push_back(t->name);
    done(names);
  });
}

// ---- topics ----------------------------------------------------------------

void RedisBackend::PauseTopic(std::string_view topic, TimeMs delay_ms, Done done) {
  if (delay_ms < 0 || delay_ms > kMaxDelayMs)
    return done(Status::InvalidArgument("pause out of range"));
  std::string name(topic), d = std::to_string(delay_ms);
  if (!IsValidTopicName(name)) return done(Status::NotFound());
  // A topic no session here uses or watches exists only with a job.
  Topic* t = &GetTopic(name);
  Run(Script::kPause, *t, {d, LocallyKnown(name) ? "0" : "1"},
      [this, t, done](Status st, const redisReply* r) {
        if (!st.ok()) return done(st);
        if (Int(r) != 1) return done(Status::NotFound());
        TryWaiters(*t);
        done(Status::Ok());
      });
}

void RedisBackend::ClearTopic(SessionId sid, std::string_view topic, uint8_t mask,
                              Callback<uint64_t> done) {
  done = Guard(sid, std::move(done));
  std::string m = std::to_string(mask & kClearAll);
  std::string name(topic);
  if (!IsValidTopicName(name)) return done(Status::NotFound());
  ClearStep(&GetTopic(name), m, 0, done);
}

void RedisBackend::ClearStep(Topic* t, std::string mask, uint64_t total, Callback<uint64_t> done) {
  Run(Script::kClear, *t, {mask, std::to_string(kClearChunk)},
      [this, t, mask, total, done](Status st, const redisReply* r) {
        if (!st.ok()) return done(st);
        int64_t n = Int(r);
        if (n < kClearChunk) {
          if (total + static_cast<uint64_t>(n) == 0 && !t->live && !LocallyKnown(t->name))
            return done(Status::NotFound());
          return done(total + static_cast<uint64_t>(n));
        }
        ClearStep(t, mask, total + static_cast<uint64_t>(n), done);
      });
}

}  // namespace delayq::backend

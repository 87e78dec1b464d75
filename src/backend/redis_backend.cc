// The Redis backend (redis_backend.h): its construction, the sessions
// (used and watched topics, the jobs they hold), and the operations: put,
// the operations on a job (by id, by key and by name), peek, pause and
// clear. Reserving is in redis_waiters.cc, stats in redis_stats.cc, the
// topics and their registry in redis_topics.cc, the calls to Redis in
// redis_calls.cc (redis_backend_internal.h lists them).
#include "backend/redis_backend.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <random>
#include <span>

#include "backend/redis_backend_internal.h"
#include "backend/resp.h"
#include "delayq/engine.h"
#include "delayq/text.h"

namespace delayq::backend {

namespace {

// Jobs a clear script deletes at once.
constexpr int kClearChunk = 1000;
// Jobs one dq_kick call moves at most (a kick of millions is many calls).
constexpr uint64_t kKickChunk = 1000;

// Names are unique across topics, which takes one hash that every
// topic's call may reach (docs/redis-backend.md, "Names").
constexpr std::string_view kNamesNeedOneServer =
    "the Youzan-style routes need a single Redis server: on a cluster an id cannot be kept "
    "unique across topics in one call";

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

namespace {

struct Scheme {
  std::string_view prefix;
  bool cluster, tls;
};
constexpr Scheme kSchemes[] = {{"redis://", false, false},
                               {"rediss://", false, true},
                               {"redis-cluster://", true, false},
                               {"rediss-cluster://", true, true}};

// The scheme `url` starts with, or nullptr for another.
const Scheme* SchemeOf(std::string_view url) {
  for (const Scheme& s : kSchemes)
    if (url.starts_with(s.prefix)) return &s;
  return nullptr;
}

// The part of `url` after its scheme, or npos for another scheme.
size_t AfterScheme(std::string_view url) {
  const Scheme* s = SchemeOf(url);
  return s != nullptr ? s->prefix.size() : std::string_view::npos;
}

// The user information of `url` ("user:password" before the last '@' of
// the authority), or npos for none.
std::pair<size_t, size_t> UserInfo(std::string_view url) {
  size_t from = AfterScheme(url);
  if (from == std::string_view::npos) return {std::string_view::npos, 0};
  size_t end = url.find('/', from);
  size_t at = url.substr(0, end).rfind('@');
  if (at == std::string_view::npos || at < from) return {std::string_view::npos, 0};
  return {from, at - from};
}

}  // namespace

std::string RedactRedisUrl(std::string_view url) {
  // Written for malformed URLs too (the messages about them show it): the
  // user information runs to the last '@' anywhere, a '/' in the password
  // included; the scheme may be misspelt.
  size_t from = url.find("://");
  from = from == std::string_view::npos ? 0 : from + 3;
  if (size_t at = url.rfind('@'); at != std::string_view::npos && at >= from) {
    std::string_view info = url.substr(from, at - from);
    size_t colon = info.find(':');
    std::string out(url.substr(0, from));
    out += colon == std::string_view::npos ? "***" : std::string(info.substr(0, colon)) + ":***";
    out += url.substr(at);
    return out;
  }
  // No '@': shown as it is only if it is well formed (hosts with numeric
  // ports of 1 to 65535, a numeric database). Anything else may hold a
  // password where the host or port goes ("redis://worker:secret",
  // "redis://worker:sec/ret"): shown as the scheme alone.
  auto digits = [](std::string_view t) {
    return !t.empty() &&
           std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  std::string_view rest = url.substr(from);
  const size_t slash = rest.find('/');
  bool well_formed = from > 0;
  if (slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    well_formed = well_formed && (db.empty() || (digits(db) && db.size() < 10));
  }
  std::string_view hosts = rest.substr(0, slash);
  while (well_formed) {
    const size_t comma = hosts.find(',');
    std::string_view one = hosts.substr(0, comma);
    const size_t colon = one.rfind(':');
    std::string_view host = one.substr(0, colon);
    // An IPv6 address only in brackets ("[::1]:6379").
    if (host.find(':') != std::string_view::npos)
      well_formed = host.front() == '[' && host.back() == ']';
    well_formed = well_formed && !host.empty();
    if (colon != std::string_view::npos) {
      std::string_view port = one.substr(colon + 1);
      int number = 0;
      std::from_chars(port.data(), port.data() + port.size(), number);
      well_formed =
          well_formed && digits(port) && port.size() <= 5 && number >= 1 && number <= 65535;
    }
    if (comma == std::string_view::npos) break;
    hosts = hosts.substr(comma + 1);
  }
  if (well_formed) return std::string(url);
  return std::string(url.substr(0, from)) + "***";
}

Result<RedisAddress> ParseRedisUrl(std::string_view url) {
  RedisAddress a;
  const std::string shown = RedactRedisUrl(url);
  size_t from = AfterScheme(url);
  if (from == std::string_view::npos)
    return Status::InvalidArgument(
        "a Redis address is redis://[[user]:password@]host[:port][/db] or "
        "redis-cluster://[[user]:password@]host[:port],... (rediss:// and rediss-cluster:// "
        "for TLS)");
  a.cluster = SchemeOf(url)->cluster;
  a.tls = SchemeOf(url)->tls;
  std::string_view rest = url.substr(from);
  if (auto [info_from, info_len] = UserInfo(url); info_from != std::string_view::npos) {
    std::string_view info = url.substr(info_from, info_len);
    rest = url.substr(info_from + info_len + 1);
    size_t colon = info.find(':');
    // "user:password", ":password", or "password" alone (the default user).
    std::string_view user = colon == std::string_view::npos ? "" : info.substr(0, colon);
    std::string_view password = colon == std::string_view::npos ? info : info.substr(colon + 1);
    if (!PercentDecode(user, &a.auth.user) || !PercentDecode(password, &a.auth.password))
      return Status::InvalidArgument("bad percent-encoding in the user or password of " + shown);
    if (a.auth.password.empty()) return Status::InvalidArgument("an empty password in " + shown);
    a.password_alone = colon == std::string_view::npos;
  }
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) {
      auto [p, ec] = std::from_chars(db.data(), db.data() + db.size(), a.db);
      if (ec != std::errc() || p != db.data() + db.size() || a.db < 0)
        return Status::InvalidArgument("bad database number in " + shown);
      if (a.cluster && a.db != 0)
        return Status::InvalidArgument("a Redis Cluster has database 0 only: " + shown);
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
        return Status::InvalidArgument("bad port in " + shown);
    }
    if (one.empty()) return Status::InvalidArgument("no host in " + shown);
    n.host = std::string(one);
    a.nodes.push_back(std::move(n));
  }
  if (a.nodes.empty()) return Status::InvalidArgument("no host in " + shown);
  if (!a.cluster && a.nodes.size() > 1)
    return Status::InvalidArgument(a.tls ? "rediss:// names one server; use rediss-cluster:// "
                                           "for several"
                                         : "redis:// names one server; use redis-cluster:// for "
                                           "several");
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
      names_("dq:{dq}:names"),
      object_versions_("dq:{dq}:objects") {
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
  ro.auth = options_.address.auth;
  if (options_.address.tls && !options_.tls) {
    auto made = NewRedisTlsContext({});
    if (made.ok()) {
      options_.tls = *made;
    } else {
      tls_error_ = made.status().message();
    }
  }
  ro.tls = options_.address.tls ? options_.tls : nullptr;
  ro.counts = &counts_;
  // The largest reply asked for: a batch of up to 1,000 jobs (the HTTP
  // API's most) of the largest size, and then some.
  ro.max_reply = std::max<size_t>(size_t{1} << 30, 1001 * options_.max_job_size);
  ro.reply_timeout = std::chrono::milliseconds(options_.reply_timeout_ms);
  ro.on_node_connect = [this](RedisClient& node) {
    node.Command({"FUNCTION", "LOAD", "REPLACE", redis::Library()}, [](const redisReply*) {});
    ConnectionChanged(node.address(), true, {});
  };
  ro.on_node_disconnect = [this](RedisClient& node, const std::string& error) {
    ConnectionChanged(node.address(), false, error);
  };
  router_ = std::make_unique<RedisRouter>(io_, ro);
  // Messages published in a cluster reach the subscribers of every node:
  // one subscription, on the first node named, hears them all.
  RedisClient::Options so;
  so.host = options_.address.nodes.front().host;
  so.port = options_.address.nodes.front().port;
  so.auth = options_.address.auth;
  so.tls = ro.tls;
  so.subscriber = true;
  so.reply_timeout = ro.reply_timeout;
  so.counts = &counts_;
  const std::string node = "subscriber " + so.host + ":" + std::to_string(so.port);
  so.on_disconnect = [this, node](const std::string& error) {
    ConnectionChanged(node, false, error);
  };
  so.on_connect = [this, node] { ConnectionChanged(node, true, {}); };
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

void RedisBackend::ConnectionChanged(const std::string& node, bool up, const std::string& error) {
  // Up: told only after a loss (not at the first connect).
  if (up ? lost_.erase(node) == 0 : !lost_.insert(node).second) return;
  if (options_.on_connection) options_.on_connection(node, up, error);
}

RedisBackend::~RedisBackend() {
  wake_timer_.cancel();
  sweep_timer_.cancel();
  for (auto& [id, s] : sessions_)
    if (s.wait_timer) s.wait_timer->cancel();
}

void RedisBackend::Start() {
  if (!tls_error_.empty()) return;  // never in plain text instead
  router_->Start();
  subscriber_->Start();
  Sweep();
}

bool RedisBackend::connected() const { return router_->connected(); }

BackendMetrics RedisBackend::SampleMetrics() const {
  BackendMetrics m;
  m.healthy = connected();
  RedisMetrics& r = m.redis.emplace();
  r.calls = counts_.calls;
  r.call_duration = counts_.duration;
  r.reconnects = counts_.reconnects;
  r.connected = m.healthy;
  return m;
}
std::string RedisBackend::last_error() const {
  return tls_error_.empty() ? router_->last_error() : tls_error_;
}

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
  PutOrFire(sid, r, nullptr, std::move(done));
}

void RedisBackend::FireSchedule(std::string_view schedule, TimeMs fire_ms,
                                std::string_view revision, const PutRequest& r,
                                Callback<PutResult> done) {
  if (Status st = CheckObjectName(schedule); !st.ok()) return done(st);
  if (r.topic.empty()) return done(Status::InvalidArgument("a firing names its topic"));
  const Firing firing{std::string(schedule), fire_ms, std::string(revision)};
  PutOrFire(0, r, &firing, std::move(done));
}

void RedisBackend::UnfireSchedule(std::string_view schedule, std::string_view topic, TimeMs fire_ms,
                                  std::string_view revision, std::string_view key,
                                  Callback<bool> done) {
  if (Status st = CheckObjectName(schedule); !st.ok()) return done(st);
  // (A name the functions cannot take names no topic: nothing to take back.)
  if (key.empty() || revision.empty() || !IsValidTopicName(topic)) return done(false);
  Run(Script::kUnfire, GetTopic(std::string(topic)),
      {schedule, std::to_string(fire_ms), revision, key},
      [done = std::move(done)](Status st, const redisReply* r) {
        if (!st.ok()) return done(st);
        done(Int(r) == 1);
      });
}

void RedisBackend::PutOrFire(SessionId sid, const PutRequest& r, const Firing* firing,
                             Callback<PutResult> done) {
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
  std::string fire_at = firing != nullptr ? std::to_string(firing->at) : std::string();
  const std::string_view all[] = {firing != nullptr ? std::string_view(firing->schedule) : "",
                                  fire_at,
                                  firing != nullptr ? std::string_view(firing->revision) : "",
                                  r.body,
                                  pri,
                                  delay,
                                  ttr,
                                  run_at,
                                  r.key,
                                  max_tries,
                                  backoff,
                                  "1"};
  // A firing (dq_fire) takes the schedule, the fire time and the
  // revision before the put's arguments.
  std::span<const std::string_view> args =
      firing != nullptr ? std::span<const std::string_view>(all, 7 + optional)
                        : std::span<const std::string_view>(all + 3, 4 + optional);
  Topic::Call call{firing != nullptr ? Script::kFire : Script::kPut, args.size(), RespArgs(args),
                   nullptr};
  Topic& t = GetTopic(name);
  Topic* tp = &t;
  call.done = [this, tp, done = std::move(done), name = r.named ? std::string(r.key) : ""](
                  Status st, const redisReply* r) {
    if (!st.ok()) return done(st);
    // Created: "<state><member>"; a job with that key already: {0,
    // member, state}; a named put refused: "!u" or "!o<topic>".
    PutResult res;
    if (r != nullptr && r->type == REDIS_REPLY_STRING && r->len > 1 && r->str[0] == '!') {
      if (r->str[1] == 'f') return done(Status::Conflict("that firing was made already"));
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

// dq_release and dq_bury take the answer as two more arguments, its status
// and text: the same call, no second round trip.
void RedisBackend::ReleaseAnswered(const Claim& c, JobId id, std::optional<TimeMs> delay,
                                   const PushAnswer& answer, Callback<JobChange> done) {
  if (delay && (*delay < 0 || *delay > kMaxDelayMs))
    return Guard(c.session, std::move(done))(Status::InvalidArgument("delay out of range"));
  JobCall(Script::kRelease, c, id,
          {std::string(), delay ? std::to_string(*delay) : std::string(),
           std::to_string(answer.status), answer.text.substr(0, kMaxAnswerBytes)},
          std::move(done));
}

void RedisBackend::Bury(const Claim& c, JobId id, std::optional<uint32_t> priority,
                        Callback<JobChange> done) {
  JobCall(Script::kBury, c, id, {priority ? std::to_string(*priority) : std::string()},
          std::move(done));
}

void RedisBackend::BuryAnswered(const Claim& c, JobId id, const PushAnswer& answer,
                                Callback<JobChange> done) {
  JobCall(Script::kBury, c, id,
          {std::string(), std::to_string(answer.status), answer.text.substr(0, kMaxAnswerBytes)},
          std::move(done));
}

void RedisBackend::Touch(const Claim& c, JobId id, Callback<JobChange> done) {
  JobCall(Script::kTouch, c, id, {}, std::move(done));
}

void RedisBackend::Kick(SessionId sid, std::string_view topic, uint64_t bound,
                        Callback<uint64_t> done) {
  done = Guard(sid, std::move(done));
  std::string name(topic);
  if (!IsValidTopicName(name)) return done(Status::NotFound("no such topic"));
  KickStep(&GetTopic(name), std::min<uint64_t>(bound, uint64_t{1} << 50), "", 0, done);
}

void RedisBackend::KickStep(Topic* t, uint64_t left, std::string only, uint64_t total,
                            Callback<uint64_t> done) {
  const uint64_t chunk = std::min<uint64_t>(left, kKickChunk);
  Run(Script::kKick, *t, {std::to_string(chunk), only},
      [this, t, left, chunk, total, done](Status st, const redisReply* r) {
        // (A chunk that failed after others worked: the kick's outcome is
        // unknown, as a clear's.)
        if (!st.ok()) return done(st);
        if (Size(r) != 3) return done(Unexpected("dq_kick"));
        auto count = [&](size_t i) {
          return static_cast<uint64_t>(std::max<int64_t>(0, Int(At(r, i))));
        };
        const uint64_t n = count(0);
        if (n > 0) TryWaiters(*t);
        uint64_t rest = left - std::min(left, n);
        // No more in all than the state held at the first chunk: the kick
        // ends, however fast others bury or delay jobs meanwhile.
        if (total == 0) rest = std::min(rest, count(2) - std::min(count(2), n));
        // A full chunk: more of the same state may follow.
        if (n == chunk && rest > 0)
          return KickStep(t, rest, std::string(Str(At(r, 1))), total + n, done);
        // A topic exists while it has a job or a pause, or a session uses
        // or watches it.
        if (total + n == 0 && !t->live && !LocallyKnown(t->name))
          return done(Status::NotFound("no such topic"));
        done(total + n);
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
    std::optional<JobView> v;
    if (t != nullptr) v = PeekView(*t, r);
    if (!v) return done(Status::NotFound(), {});
    done(Status::Ok(), std::span<const JobView>(&*v, 1));
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

std::optional<JobView> RedisBackend::PeekView(const Topic& t, const redisReply* r) const {
  if (Size(r) < 15) return std::nullopt;
  JobView v;
  v.id = IdOf(t, Str(At(r, 0)));
  v.topic = t.name;
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
  // A job with a push try's answer has it as the 17th and 18th values.
  if (Size(r) >= 18) {
    v.answered = true;
    v.answer_status = static_cast<uint32_t>(Int(At(r, 16)));
    v.answer_text = Str(At(r, 17));
  }
  return v;
}

void RedisBackend::ListJobs(const ListJobsRequest& r, PageDone done) {
  if (!IsValidTopicName(r.topic)) return done(Status::Ok(), {}, false);
  static constexpr char kStates[] = {'r', 'd', 'u', 'b'};  // JobState's order
  const std::string state(1, kStates[static_cast<size_t>(r.state)]);
  // (The cursor's member, and its incarnation's number: -1 for none.)
  const std::string member = r.after != 0 ? Member(r.after) : std::string();
  const int64_t no = r.after != 0 ? NoOf(r.after) : -1;
  ListStep(&GetTopic(std::string(r.topic)), no,
           {state, member, std::to_string(r.limit), r.desc ? std::string("1") : std::string("0"),
            "0", "", "", "0"},
           ListProgress{}, std::move(done));
}

void RedisBackend::ListStep(Topic* t, int64_t no, std::vector<std::string> args,
                            ListProgress progress, PageDone done) {
  Run(Script::kList, *t, no, args,
      [this, t, no, args, progress, done](Status st, const redisReply* reply) mutable {
        if (!st.ok()) return done(st, {}, false);
        if (Size(reply) < 1) return done(Unexpected("dq_list"), {}, false);
        const int64_t kind = Int(At(reply, 0));
        // {3}: members an earlier call chose left the state; from the
        // start again, a few times, then the page as it is.
        if (kind == 3) {
          progress.restarts++;
          progress.calls = 0;
          progress.bound = 0;
          args[4] = "0";
          args[5].clear();
          args[6].clear();
          args[7] = progress.restarts >= kListRestarts ? "1" : "0";
          return ListStep(t, no, std::move(args), progress, std::move(done));
        }
        // {2, rank, size, last members read, member, ...}: the set goes on;
        // again from there, with the members chosen so far. No more calls
        // than the set's size at the first one asks for, and a few (a set
        // that grows at its end as fast as it is read ends too).
        if (kind == 2) {
          if (Size(reply) < 4) return done(Unexpected("dq_list"), {}, false);
          if (progress.calls++ == 0)
            progress.bound =
                static_cast<uint64_t>(std::max<int64_t>(0, Int(At(reply, 2)))) / kListChunk + 3;
          args[4] = std::to_string(Int(At(reply, 1)));
          args[6] = std::string(Str(At(reply, 3)));
          if (progress.calls >= progress.bound) {
            // The last call reads nothing more (a rank past any set's
            // end): the page of what was read, which says that more may
            // follow.
            args[4] = std::to_string(uint64_t{1} << 40);
            args[6].clear();
            args[7] = "2";
          }
          std::string& kept = args[5];
          kept.clear();
          for (size_t i = 4; i < Size(reply); ++i) {
            if (i > 4) kept += ' ';
            kept += Str(At(reply, i));
          }
          return ListStep(t, no, std::move(args), progress, std::move(done));
        }
        std::vector<JobView> views;
        views.reserve(Size(reply) - 1);
        for (size_t i = 1; i < Size(reply); ++i)
          if (std::optional<JobView> v = PeekView(*t, At(reply, i))) views.push_back(*v);
        done(Status::Ok(), views, Int(At(reply, 0)) == 1);
      });
}

void RedisBackend::FindKey(std::string_view key, JobsDone done) {
  std::string k(key);
  if (k.empty()) return done(Status::Ok(), {});
  // One dq_peek by key in each topic with an incarnation (as TopicCounts
  // finds them), all sent at once; the topics are held until every
  // answer is in.
  RefreshRegistry([this, k, done] {
    struct Found {
      std::vector<std::pair<const Topic*, JobView>> views;
      // The answers' strings, kept while the views point into them.
      std::vector<std::shared_ptr<std::string>> texts;
      Status failed;
      size_t remaining = 0;
      std::vector<Topic*> pinned;
    };
    auto found = std::make_shared<Found>();
    for (auto& [name, t] : topics_) {
      if (!t->live && t->no < 0) continue;
      t->pins++;
      found->pinned.push_back(t.get());
    }
    auto finish = [found, done] {
      std::sort(found->views.begin(), found->views.end(),
                [](const auto& a, const auto& b) { return a.first->name < b.first->name; });
      std::vector<JobView> out;
      for (const auto& [t, v] : found->views) out.push_back(v);
      if (found->failed.ok()) {
        done(Status::Ok(), out);
      } else {
        done(found->failed, {});
      }
      for (Topic* t : found->pinned) t->pins--;
    };
    found->remaining = found->pinned.size();
    if (found->remaining == 0) return finish();
    for (Topic* t : found->pinned) {
      Run(Script::kPeek, *t, {"key", k}, [this, t, found, finish](Status st, const redisReply* r) {
        if (!st.ok()) {
          found->failed = st;
        } else if (std::optional<JobView> v = PeekView(*t, r)) {
          // The reply is freed when this returns: keep copies of its strings.
          auto key = std::make_shared<std::string>(v->key);
          auto body = std::make_shared<std::string>(v->body);
          v->key = *key;
          v->body = *body;
          found->texts.push_back(key);
          found->texts.push_back(body);
          found->views.emplace_back(t, *v);
        }
        if (--found->remaining == 0) finish();
      });
    }
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

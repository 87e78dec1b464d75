#include "server/beanstalk_handler.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iterator>
#include <utility>

#include "delayq/duration.h"
#include "delayq/version.h"

namespace delayq::server {
namespace {

using backend::Backend;
using backend::Jobs;

constexpr std::string_view kNotFound = "NOT_FOUND\r\n";
// A job this connection reserved counts as still held (no look-up of its
// topic) until this long before its TTR deadline.
constexpr TimeMs kHoldMargin = 1000;
constexpr TimeMs kSecond = 1000;

// beanstalkd sends whole seconds, truncated toward zero.
int64_t Secs(TimeMs ms) { return ms / kSecond; }

// A time left, as beanstalkd shows it: it counts nanoseconds, so a deadline
// 10 s away reads 9 once any time at all has passed. Milliseconds here:
// a whole number of seconds left reads one less.
int64_t SecsLeft(TimeMs ms) { return ms > 0 ? (ms - 1) / kSecond : 0; }

// Seconds from the wire (u32 range, checked by the decoder) to ms.
TimeMs FromSecs(uint64_t s) { return static_cast<TimeMs>(s) * kSecond; }

void AppendUint(std::string& out, uint64_t v) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<size_t>(p - buf));
}

template <typename T>
void Field(std::string& y, std::string_view key, T value) {
  y.append(key);
  y.append(": ");
  if constexpr (std::is_convertible_v<T, std::string_view>) {
    y.append(std::string_view(value));
  } else {
    y.append(std::to_string(value));
  }
  y.push_back('\n');
}

// The current-jobs-* lines, the same in stats-tube and stats.
template <typename Counts>
void JobCountFields(std::string& y, const Counts& c) {
  Field(y, "current-jobs-urgent", c.urgent);
  Field(y, "current-jobs-ready", c.ready);
  Field(y, "current-jobs-reserved", c.reserved);
  Field(y, "current-jobs-delayed", c.delayed);
  Field(y, "current-jobs-buried", c.buried);
}

std::string JobStatsYaml(const JobStats& s) {
  std::string y = "---\n";
  Field(y, "id", s.id);
  Field(y, "tube", s.topic);
  Field(y, "state", JobStateName(s.state));
  Field(y, "pri", s.priority);
  Field(y, "age", Secs(s.age_ms));
  Field(y, "delay", Secs(s.delay_ms));
  Field(y, "ttr", Secs(s.ttr_ms));
  Field(y, "time-left", SecsLeft(s.time_left_ms));
  Field(y, "file", 0);
  Field(y, "reserves", s.reserves);
  Field(y, "timeouts", s.timeouts);
  Field(y, "releases", s.releases);
  Field(y, "buries", s.buries);
  Field(y, "kicks", s.kicks);
  return y;
}

std::string TopicStatsYaml(const TopicStats& s) {
  std::string y = "---\n";
  Field(y, "name", s.name);
  JobCountFields(y, s);
  Field(y, "total-jobs", s.total_jobs);
  Field(y, "current-using", s.using_count);
  Field(y, "current-watching", s.watching);
  Field(y, "current-waiting", s.waiting);
  Field(y, "cmd-delete", s.cmd_delete);
  Field(y, "cmd-pause-tube", s.cmd_pause);
  Field(y, "pause", Secs(s.pause_ms));
  Field(y, "pause-time-left", SecsLeft(s.pause_time_left_ms));
  return y;
}

std::string ListYaml(const std::vector<std::string>& names) {
  // An empty list (beanstalkd always has `default`; a token may see no
  // topic) is written so that YAML reads a list, not nothing.
  if (names.empty()) return "--- []\n";
  std::string y = "---\n";
  for (const std::string& n : names) {
    y += "- ";
    y += n;
    y += '\n';
  }
  return y;
}

std::string TimevalText(const timeval& tv) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%ld.%06ld", static_cast<long>(tv.tv_sec),
                static_cast<long>(tv.tv_usec));
  return buf;
}

std::string ServerStatsYaml(const ServerContext& ctx, const EngineStats& e, TimeMs now) {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::string y = "---\n";
  JobCountFields(y, e);
  // cmd-put ... cmd-pause-tube: the operation table's rows with a counter.
  for (const Operation& o : kOperations) {
    if (o.stat.empty()) break;  // those rows come first
    Field(y, o.stat, ctx.counters.Of(Protocol::kBeanstalk, o.op));
  }
  Field(y, "job-timeouts", e.job_timeouts);
  Field(y, "total-jobs", e.total_jobs);
  Field(y, "max-job-size", ctx.max_job_size);
  Field(y, "current-tubes", e.topics);
  Field(y, "current-connections", ctx.counters.connections);
  Field(y, "current-producers", ctx.counters.producers);
  Field(y, "current-workers", ctx.counters.workers);
  Field(y, "current-waiting", e.waiting);
  Field(y, "total-connections", ctx.counters.total_connections);
  Field(y, "pid", static_cast<long>(getpid()));
  Field(y, "version", "\"" + std::string(kVersion) + "\"");
  Field(y, "rusage-utime", TimevalText(ru.ru_utime));
  Field(y, "rusage-stime", TimevalText(ru.ru_stime));
  Field(y, "uptime", Secs(now - ctx.started_ms));
  Field(y, "binlog-oldest-index", 0);
  Field(y, "binlog-current-index", 0);
  Field(y, "binlog-records-migrated", 0);
  Field(y, "binlog-records-written", 0);
  Field(y, "binlog-max-size", 10485760);
  Field(y, "draining", ctx.draining ? "true" : "false");
  Field(y, "id", ctx.instance_id);
  Field(y, "hostname", ctx.hostname);
  Field(y, "os", ctx.os);
  Field(y, "platform", ctx.platform);
  return y;
}

}  // namespace

std::string_view BeanReplyFor(Code code) {
  switch (code) {
    // An operation on one job that does not apply to it (no such job, not
    // in that state, held by another) is NOT_FOUND, as in beanstalkd.
    case Code::kNotFound:
    case Code::kConflict:
    case Code::kLeaseLost:
      return kNotFound;
    case Code::kInvalidArgument:
      return "BAD_FORMAT\r\n";
    case Code::kNotIgnored:
      return "NOT_IGNORED\r\n";
    case Code::kDeadlineSoon:
      return "DEADLINE_SOON\r\n";
    case Code::kTimedOut:
      return "TIMED_OUT\r\n";
    case Code::kJobTooBig:
      return "JOB_TOO_BIG\r\n";
    case Code::kDraining:
      return "DRAINING\r\n";
    case Code::kResourceExhausted:
      return "OUT_OF_MEMORY\r\n";
    case Code::kUnauthenticated:
      return kUnauthorizedReply;
    case Code::kPermissionDenied:
      return kForbiddenReply;
    case Code::kRateLimited:
      return kRateLimitedReply;
    case Code::kOk:
    case Code::kUnavailable:
    case Code::kInternal:
    case Code::kCorruption:
      break;
  }
  return "INTERNAL_ERROR\r\n";
}

BeanstalkHandler::BeanstalkHandler(ServerContext& ctx, std::function<void()> wake,
                                   std::optional<boost::asio::ip::address> peer)
    : ctx_(ctx),
      backend_(ctx.backend),
      wake_(std::move(wake)),
      caller_(ctx.access, std::move(peer)),
      decoder_(ctx.max_job_size),
      session_(ctx.backend.OpenSession()),
      pipeline_(ctx.backend.CompletesInOrder()) {
  ctx_.counters.connections++;
  ctx_.counters.total_connections++;
  ctx_.access_listeners.insert(this);
}

BeanstalkHandler::~BeanstalkHandler() {
  ctx_.access_listeners.erase(this);
  EndSession();
}

void BeanstalkHandler::EndSession() {
  if (session_ended_) return;
  session_ended_ = true;
  blocked_ = reserving_ = false;
  CountWaiting(false);
  backend_.CloseSession(session_);
  ctx_.counters.connections--;
  if (producer_) ctx_.counters.producers--;
  if (worker_) ctx_.counters.workers--;
}

void BeanstalkHandler::MarkProducer() {
  if (!producer_) {
    producer_ = true;
    ctx_.counters.producers++;
  }
}

void BeanstalkHandler::MarkWorker() {
  if (!worker_) {
    worker_ = true;
    ctx_.counters.workers++;
  }
}

void BeanstalkHandler::Process() {
  while (!blocked_ && !close_ && !output_full()) {
    BeanDecoder::Item item = decoder_.Next(in_.view());
    switch (item.kind) {
      case BeanDecoder::Kind::kNeedMore:
        in_.Consume(item.consumed);
        return;
      case BeanDecoder::Kind::kReply:
        // beanstalkd counts some failed commands in its stats anyway, and an
        // upload without its CRLF has already made it a producer and spent
        // a job id.
        if (item.counted) ctx_.counters.Count(Protocol::kBeanstalk, OperationOf(item.command.op));
        if (item.reply == kExpectedCrlfReply) {
          MarkProducer();
          backend_.DiscardJobId();
        }
        BeginReply(/*ready=*/true);
        Reply(item.reply);
        EndReply();
        break;
      case BeanDecoder::Kind::kClose:
        close_ = true;
        break;
      case BeanDecoder::Kind::kCommand:
        // A reserve waits behind no reply: it may block the connection, and
        // the completion of one that waits (a job's arrival) keeps no order
        // with the others'. It runs once the replies ahead have left
        // (ReleaseQueued wakes the connection).
        if (!queued_.empty() && (item.command.op == BeanOp::kReserve ||
                                 item.command.op == BeanOp::kReserveWithTimeout ||
                                 item.command.op == BeanOp::kReserveBatch))
          return;
        ctx_.counters.Count(Protocol::kBeanstalk, OperationOf(item.command.op));
        BeginReply(/*ready=*/false);
        blocked_ = true;  // until the command's reply is written (Done)
        in_command_ = true;
        Authorize(item.command);  // views into in_ stay valid: consumed below
        in_command_ = false;
        EndReply();
        break;
    }
    in_.Consume(item.consumed);
  }
}

void BeanstalkHandler::ReplyCode(Status st) {
  // A limit refused a client (--max-topics, --max-memory): one log line
  // per cause and 10 s, whichever protocol.
  if (st.code() == Code::kResourceExhausted)
    ctx_.warn.Warn("resource_exhausted", "protocol=beanstalkd reason=\"" + st.message() + "\"");
  Reply(BeanReplyFor(st.code()));
}

void BeanstalkHandler::ReplyJob(std::string_view word, const JobView& j) {
  sink().append(word);
  sink().push_back(' ');
  AppendUint(sink(), j.id);
  sink().push_back(' ');
  AppendUint(sink(), j.body.size());
  sink().append("\r\n");
  sink().append(j.body);
  sink().append("\r\n");
}

void BeanstalkHandler::ReplyYaml(const std::string& yaml) {
  sink().append("OK ");
  AppendUint(sink(), yaml.size());
  sink().append("\r\n");
  sink().append(yaml);
  sink().append("\r\n");
}

void BeanstalkHandler::BeginReply(bool ready) {
  if (queued_.empty()) {
    sink_ = &out_;
  } else {
    if (!ready || !queued_.back().ready) queued_.push_back(Queued{{}, ready});
    sink_ = &queued_.back().bytes;
  }
  sink_size_ = sink_->size();
}

void BeanstalkHandler::EndReply() {
  if (blocked_) {
    // On its way (a change waiting to be durable): the commands after it
    // run meanwhile, their replies queued behind its. (A reserve that
    // waits, or any command on a backend that may complete out of order,
    // blocks the connection, and runs only with nothing queued. So does
    // any command while the store is behind, Backend::StoreBehind: the
    // client's next command runs once a reply of its own has left, Done.)
    if (!reserving_ && pipeline_ && !backend_.StoreBehind()) {
      blocked_ = false;
      if (queued_.empty()) queued_.push_back(Queued{});  // its place, first
    }
  } else if (!queued_.empty() && sink_ == &queued_.back().bytes) {
    queued_.back().ready = true;  // written at once, behind others
    queued_bytes_ += sink_->size() - sink_size_;
  }
  // The next completion to come is the first queued reply's.
  sink_ = queued_.empty() ? &out_ : &queued_.front().bytes;
}

void BeanstalkHandler::ReleaseQueued() {
  while (!queued_.empty() && queued_.front().ready) {
    Queued& q = queued_.front();
    queued_bytes_ -= q.bytes.size();
    out_.append(q.bytes);
    queued_.pop_front();
  }
  sink_ = queued_.empty() ? &out_ : &queued_.front().bytes;
}

void BeanstalkHandler::Done() {
  blocked_ = false;
  if (in_command_) return;  // written at once
  // Completed later: a queued reply is the first one's (the backend
  // completes in order), which leaves with the ready ones behind it.
  if (!queued_.empty()) {
    queued_.front().ready = true;
    queued_bytes_ += queued_.front().bytes.size();
    ReleaseQueued();
  }
  if (wake_) wake_();  // resume the connection
}

bool BeanstalkHandler::CancelReserve() {
  if (!blocked_ || !reserving_ || backend_.ReserveServed(session_)) return false;
  backend_.CancelReserve(session_);
  reserving_ = false;
  CountWaiting(false);
  ReplyCode(Status::TimedOut());
  blocked_ = false;
  return true;
}

void BeanstalkHandler::AccessChanged() {
  // Served before the reload: its answer, on its way, is not taken back.
  if (!blocked_ || !reserving_ || backend_.ReserveServed(session_)) return;
  Status st = caller_.Readmit();
  if (st.ok()) {
    if (caller_.Everywhere(Scope::kConsume)) return;
    const std::vector<std::string> watched = backend_.WatchedTopics(session_);
    if (std::all_of(watched.begin(), watched.end(),
                    [this](const std::string& t) { return caller_.May(Scope::kConsume, t); }))
      return;  // it waits on as it was
  }
  backend_.CancelReserve(session_);
  reserving_ = false;
  CountWaiting(false);
  if (st.ok()) st = WatchOnlyConsumable();  // ignores the topics out of scope now
  if (!st.ok()) return Refuse(st);
  TimeMs left = -1;
  if (reserve_until_ != kNoDeadline) left = std::max<TimeMs>(0, reserve_until_ - backend_.Now());
  StartReserve(left);
}

void BeanstalkHandler::DoReserve(TimeMs timeout_ms, uint32_t count, bool batch) {
  if (Status st = WatchOnlyConsumable(); !st.ok()) return Refuse(st);
  MarkWorker();
  reserve_count_ = count;
  reserve_batch_ = batch;
  reserve_until_ = timeout_ms < 0 ? kNoDeadline : backend_.Now() + timeout_ms;
  StartReserve(timeout_ms);
}

void BeanstalkHandler::StartReserve(TimeMs timeout_ms) {
  reserving_ = true;
  backend_.Reserve(
      ReserveRequest{session_, ctx_.WaitFor(timeout_ms, "beanstalkd"), reserve_count_, false},
      [this, batch = reserve_batch_](Status st, Jobs jobs) {
        reserving_ = false;
        CountWaiting(false);
        if (!st.ok()) {
          ReplyCode(st);
        } else {
          Hold(jobs);
          if (batch) {
            sink().append("RESERVED_BATCH ");
            AppendUint(sink(), jobs.size());
            sink().append("\r\n");
          }
          for (const JobView& j : jobs) ReplyJob("RESERVED", j);
        }
        Done();
      });
  if (reserving_) CountWaiting(true);  // not answered at once: it waits
}

void BeanstalkHandler::CountWaiting(bool waits) {
  if (waits == counted_waiting_) return;
  counted_waiting_ = waits;
  waits ? ctx_.waiting++ : ctx_.waiting--;
}

void BeanstalkHandler::ReplyOkOr(Status st, std::string_view ok) {
  st.ok() ? Reply(ok) : ReplyCode(st);
  Done();
}

void BeanstalkHandler::ReplyCount(std::string_view word, const Result<uint64_t>& res) {
  if (res.ok()) {
    sink().append(word);
    AppendUint(sink(), *res);
    sink().append("\r\n");
  } else {
    ReplyCode(res.status());
  }
  Done();
}

void BeanstalkHandler::ReplyFirstJob(std::string_view word, Status st, backend::Jobs jobs) {
  if (st.ok() && !jobs.empty()) {
    ReplyJob(word, jobs.front());
  } else {
    ReplyCode(st.ok() ? Status::NotFound() : st);
  }
  Done();
}

void BeanstalkHandler::ReplyYamlOr(Status st, const std::function<std::string()>& yaml) {
  st.ok() ? ReplyYaml(yaml()) : ReplyCode(st);
  Done();
}

void BeanstalkHandler::Refuse(const Status& st) {
  ReplyCode(st);
  Done();
}

void BeanstalkHandler::Hold(backend::Jobs jobs) {
  if (caller_.token() == nullptr) return;
  if (held_.size() >= 4096) {  // reservations that ran out meanwhile go
    const TimeMs now = backend_.Now();
    std::erase_if(held_, [now](const auto& h) { return h.second.deadline <= now; });
  }
  for (const JobView& j : jobs) held_[j.id] = Held{std::string(j.topic), j.due_ms};
}

Status BeanstalkHandler::WatchOnlyConsumable() {
  if (watch_checked_ == caller_.standing() || caller_.Everywhere(Scope::kConsume))
    return Status::Ok();
  std::vector<std::string> watched = backend_.WatchedTopics(session_);
  std::vector<std::string> others;
  bool any = false;
  for (std::string& t : watched) {
    if (caller_.May(Scope::kConsume, t)) {
      any = true;
    } else {
      others.push_back(std::move(t));  // left out quietly: nothing is refused
    }
  }
  if (!any) {
    ctx_.access.forbidden++;  // one refusal, however many topics it watches
    return Status::PermissionDenied("the token may consume none of the watched topics");
  }
  for (const std::string& t : others) {
    if (auto r = backend_.Ignore(session_, t); !r.ok()) return r.status();
  }
  watch_checked_ = caller_.standing();
  return Status::Ok();
}

// Every path ends in Execute, or in Refuse (which ends in Done()).
void BeanstalkHandler::Authorize(BeanCommand& c) {
  const Operation& row = OperationOf(OperationOf(c.op));
  int64_t retry_ms = 0;
  if (Status st = caller_.Admit(row.op, &retry_ms); !st.ok()) return Refuse(st);
  Status st;
  switch (c.op) {
    // The topic is named, or is the one the connection uses.
    case BeanOp::kUse:
    case BeanOp::kWatch:
    case BeanOp::kStatsTube:
    case BeanOp::kPauseTube:
    case BeanOp::kClearTube:
      st = caller_.Check(row.scope, c.name);
      break;
    case BeanOp::kPut:
    case BeanOp::kPutEx:
      if (use_checked_ == caller_.standing() || caller_.Everywhere(Scope::kProduce)) break;
      st = caller_.Check(Scope::kProduce, backend_.UsedTopic(session_));
      if (st.ok()) use_checked_ = caller_.standing();
      break;
    case BeanOp::kPeekReady:
    case BeanOp::kPeekDelayed:
    case BeanOp::kPeekBuried:
    case BeanOp::kKick:
    case BeanOp::kDeleteKey:
    case BeanOp::kPeekKey:
      if (!caller_.Everywhere(row.scope))
        st = caller_.Check(row.scope, backend_.UsedTopic(session_));
      break;
    case BeanOp::kStats:
      if (!caller_.Everywhere(Scope::kAdmin))
        st = Status::PermissionDenied("server-wide stats need the admin right on every topic");
      break;
    // A job, by id: its topic decides. A delete of a reserved job is a
    // worker finishing it (consume; the backend refuses it unless this
    // connection holds the job); of any other job, an operator's (admin).
    // reserve-job of a ready job is a worker's (consume); of a delayed or
    // buried one, an operator's (admin): holding it, the connection could
    // then delete it, or release it ready, as a worker.
    case BeanOp::kPeek:
    case BeanOp::kStatsJob:
    case BeanOp::kReserveJob:
    case BeanOp::kRelease:
    case BeanOp::kBury:
    case BeanOp::kTouch:
    case BeanOp::kKickJob:
    case BeanOp::kDelete: {
      const bool del = c.op == BeanOp::kDelete;
      const bool reserve_job = c.op == BeanOp::kReserveJob;
      if (caller_.Everywhere(del || reserve_job ? Scope::kAdmin : row.scope)) break;
      // What a worker does to a job this connection holds: the right to
      // consume its topic. The job leaves the record (after a touch its
      // deadline is new: the next command looks it up).
      const bool worker =
          del || c.op == BeanOp::kRelease || c.op == BeanOp::kBury || c.op == BeanOp::kTouch;
      if (auto h = held_.find(c.id); worker && h != held_.end()) {
        const bool holds = backend_.Now() + kHoldMargin < h->second.deadline;
        const std::string topic = std::move(h->second.topic);
        held_.erase(h);
        if (holds) {
          st = caller_.Check(Scope::kConsume, topic);
          break;
        }
      }
      BeanCommand job_cmd = c;  // numbers only: no view into the input is used
      backend_.StatsJob(
          c.id, [this, job_cmd, del, reserve_job, scope = row.scope](Result<JobStats> r) mutable {
            if (!r.ok())
              return Refuse(r.status().code() == Code::kNotFound ? Status::NotFound() : r.status());
            const bool operators = (del && r->state != JobState::kReserved) ||
                                   (reserve_job && r->state != JobState::kReady);
            const Scope need = operators ? Scope::kAdmin : del ? Scope::kConsume : scope;
            if (Status ok = caller_.Check(need, r->topic); !ok.ok()) return Refuse(ok);
            Execute(job_cmd);
          });
      return;
    }
    // Reserves take from the topics the caller may consume (DoReserve);
    // listings show what it may see (Execute); the rest need no topic.
    default:
      break;
  }
  if (!st.ok()) return Refuse(st);
  Execute(c);
}

// Every path ends in Done(), at once or from the backend's completion.
void BeanstalkHandler::Execute(BeanCommand& c) {
  switch (c.op) {
    case BeanOp::kPut:
    case BeanOp::kPutEx: {
      MarkProducer();
      if (Status admit = ctx_.AdmitPut(); !admit.ok()) {
        // beanstalkd made the job before refusing it in drain mode
        if (admit.code() == Code::kDraining) backend_.DiscardJobId();
        return ReplyOkOr(admit, {});
      }
      PutRequest r;
      r.body = c.body;
      r.priority = c.pri;
      if (c.op == BeanOp::kPut) {
        r.delay_ms = FromSecs(c.delay);
        r.ttr_ms = std::max<TimeMs>(FromSecs(c.ttr), kSecond);
      } else {
        Status bad = Status::InvalidArgument("put-ex argument out of range");
        if (c.delay > static_cast<uint64_t>(kMaxDelayMs) ||
            c.ttr > static_cast<uint64_t>(kMaxDelayMs) || c.tries > UINT32_MAX ||
            (c.has_at && c.at > static_cast<uint64_t>(INT64_MAX / 2)))
          return ReplyOkOr(bad, {});
        r.delay_ms = static_cast<TimeMs>(c.delay);
        r.ttr_ms = std::max<TimeMs>(static_cast<TimeMs>(c.ttr), 1);
        if (c.has_at) r.run_at = static_cast<TimeMs>(c.at);
        r.key = c.key;
        r.max_tries = static_cast<uint32_t>(c.tries);
        if (!c.backoff.empty()) {
          auto b = ParseBackoff(c.backoff);
          if (!b.ok()) return ReplyOkOr(b.status(), {});
          r.backoff = std::move(b).value();
        }
      }
      bool ex = c.op == BeanOp::kPutEx;
      backend_.Put(session_, r, [this, ex](Result<PutResult> res) {
        if (res.ok()) {
          sink().append(res->created || !ex ? "INSERTED " : "EXISTS ");
          AppendUint(sink(), res->id);
          sink().append("\r\n");
        } else {
          ReplyCode(res.status());
        }
        Done();
      });
      return;
    }
    case BeanOp::kUse: {
      use_checked_ = 0;
      Status st = backend_.Use(session_, c.name);
      if (st.ok()) {
        sink().append("USING ");
        sink().append(c.name);
        sink().append("\r\n");
      } else {
        ReplyCode(st);
      }
      return Done();
    }
    case BeanOp::kReserve:
      return DoReserve(-1, 1, false);
    case BeanOp::kReserveWithTimeout:
      return DoReserve(c.timeout < 0 ? -1 : FromSecs(static_cast<uint64_t>(c.timeout)), 1, false);
    case BeanOp::kReserveBatch:
      return DoReserve(c.timeout < 0 ? -1 : FromSecs(static_cast<uint64_t>(c.timeout)),
                       static_cast<uint32_t>(c.count), true);
    case BeanOp::kReserveJob:
      backend_.ReserveJob(session_, c.id, [this](Status st, Jobs jobs) {
        if (st.ok()) MarkWorker();
        if (st.ok()) Hold(jobs);
        ReplyFirstJob("RESERVED", st, jobs);
      });
      return;
    case BeanOp::kDelete:
      backend_.Delete(session_, c.id,
                      [this](Result<JobChange> r) { ReplyOkOr(r.status(), "DELETED\r\n"); });
      return;
    case BeanOp::kDeleteKey:
      backend_.DeleteByKey(session_, backend_.UsedTopic(session_), c.key,
                           [this](Result<JobChange> r) { ReplyOkOr(r.status(), "DELETED\r\n"); });
      return;
    case BeanOp::kRelease: {
      // A delay of 0 means "no explicit delay": the job's back-off applies
      // if it has one (put-ex), else it is ready at once, as in beanstalkd.
      std::optional<TimeMs> delay;
      if (c.delay > 0) delay = FromSecs(c.delay);
      backend_.Release(session_, c.id, c.pri, delay, [this](Result<JobChange> res) {
        ReplyOkOr(res.status(),
                  res.ok() && res->state == JobState::kBuried ? "BURIED\r\n" : "RELEASED\r\n");
      });
      return;
    }
    case BeanOp::kBury:
      backend_.Bury(session_, c.id, c.pri,
                    [this](Result<JobChange> r) { ReplyOkOr(r.status(), "BURIED\r\n"); });
      return;
    case BeanOp::kTouch:
      backend_.Touch(session_, c.id,
                     [this](Result<JobChange> r) { ReplyOkOr(r.status(), "TOUCHED\r\n"); });
      return;
    case BeanOp::kWatch:
    case BeanOp::kIgnore: {
      watch_checked_ = 0;
      auto res = c.op == BeanOp::kWatch ? backend_.Watch(session_, c.name)
                                        : backend_.Ignore(session_, c.name);
      return ReplyCount("WATCHING ", res.ok() ? Result<uint64_t>(*res) : res.status());
    }
    case BeanOp::kPeek:
    case BeanOp::kPeekKey:
    case BeanOp::kPeekReady:
    case BeanOp::kPeekDelayed:
    case BeanOp::kPeekBuried: {
      using K = Backend::PeekKind;
      K kind = c.op == BeanOp::kPeek          ? K::kId
               : c.op == BeanOp::kPeekKey     ? K::kKey
               : c.op == BeanOp::kPeekReady   ? K::kReady
               : c.op == BeanOp::kPeekDelayed ? K::kDelayed
                                              : K::kBuried;
      std::string used = kind == K::kId ? std::string() : backend_.UsedTopic(session_);
      backend_.Peek(session_, kind, c.id, used, c.key, [this](Status st, Jobs jobs) {
        // beanstalkd answers NOT_FOUND for any peek that finds nothing.
        ReplyFirstJob("FOUND", st.ok() ? st : Status::NotFound(), jobs);
      });
      return;
    }
    case BeanOp::kKick:
      backend_.Kick(session_, backend_.UsedTopic(session_), static_cast<uint32_t>(c.count),
                    [this](Result<uint64_t> res) { ReplyCount("KICKED ", res); });
      return;
    case BeanOp::kKickJob:
      backend_.KickJob(session_, c.id,
                       [this](Result<JobChange> r) { ReplyOkOr(r.status(), "KICKED\r\n"); });
      return;
    case BeanOp::kStatsJob:
      backend_.StatsJob(c.id, [this](Result<JobStats> res) {
        ReplyYamlOr(res.status(), [&] { return JobStatsYaml(*res); });
      });
      return;
    case BeanOp::kStatsTube:
      backend_.StatsTopic(c.name, [this](Result<TopicStats> res) {
        ReplyYamlOr(res.status(), [&] { return TopicStatsYaml(*res); });
      });
      return;
    case BeanOp::kStats:
      backend_.Stats([this](Result<EngineStats> res) {
        ReplyYamlOr(res.status(), [&] { return ServerStatsYaml(ctx_, *res, backend_.Now()); });
      });
      return;
    case BeanOp::kListTubes:
      backend_.ListTopics([this](Result<std::vector<std::string>> res) {
        std::vector<std::string> seen;  // only the topics the caller may see
        if (res.ok())
          std::copy_if(res->begin(), res->end(), std::back_inserter(seen),
                       [&](const std::string& t) { return caller_.Sees(t); });
        ReplyYamlOr(res.status(), [&] { return ListYaml(seen); });
      });
      return;
    case BeanOp::kListTubeUsed:
      sink().append("USING ");
      sink().append(backend_.UsedTopic(session_));
      sink().append("\r\n");
      return Done();
    case BeanOp::kListTubesWatched:
      // The connection's own list: every topic in it but `default` (which
      // every connection starts with) it watched with the right to.
      return ReplyYamlOr(Status::Ok(), [&] { return ListYaml(backend_.WatchedTopics(session_)); });
    case BeanOp::kPauseTube:
      backend_.PauseTopic(c.name, FromSecs(c.delay),
                          [this](Status st) { ReplyOkOr(st, "PAUSED\r\n"); });
      return;
    case BeanOp::kClearTube:
      backend_.ClearTopic(session_, c.name, c.clear_mask,
                          [this](Result<uint64_t> res) { ReplyCount("CLEARED ", res); });
      return;
    case BeanOp::kQuit:
      close_ = true;
      return Done();
    case BeanOp::kAuth:
      if (Status st = caller_.Authenticate(c.secret); !st.ok()) {
        ctx_.warn.Warn("auth_failed", "protocol=beanstalkd peer=" + caller_.PeerText() +
                                          " reason=\"" + st.message() + "\"");
        return Refuse(st);
      }
      Reply(kAuthenticatedReply);
      return Done();
  }
  Done();
}

}  // namespace delayq::server

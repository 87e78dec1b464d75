// The Redis backend's calls to Redis (redis_backend.h): a topic's calls
// queued (Run, Enqueue) and sent together as one dq_batch, at most
// kMaxInFlight batches at once (FlushBatch), the FCALL written in RESP, the
// replies handed back to each call, and the library loaded again when Redis
// has lost it (Call).
#include <hiredis/hiredis.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <charconv>
#include <iterator>
#include <memory>
#include <span>

#include "backend/redis_backend.h"
#include "backend/redis_backend_internal.h"
#include "backend/resp.h"

namespace delayq::backend {

namespace {

// Calls of one topic sent to Redis as one batch, at most.
constexpr size_t kCallsPerBatch = 64;

// Batches of one topic awaiting their replies, at most.
constexpr int kMaxInFlight = 2;

// How long calls carry a number registered for their topic (FlushBatch).
constexpr TimeMs kFreshMs = 30'000;

}  // namespace

// ---- calls -----------------------------------------------------------------

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
               (calls[i].script == Script::kPut || calls[i].script == Script::kPause ||
                calls[i].script == Script::kFire)) {
             again.push_back(std::move(calls[i]));
             continue;
           }
           calls[i].done(Status::Ok(), one);
         }
         if (!again.empty()) RegisterFor(*tp, std::move(again), fresh);
       });
}

}  // namespace delayq::backend

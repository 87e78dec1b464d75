// redis_call_cost: sends a Redis the function calls of job lifecycles, as
// the Redis backend makes them under load, and nothing else. Driven by
// bench/redis_call_cost.sh, which runs the Redis under callgrind and counts
// the instructions it executes per job.
//
//   redis_call_cost PORT ITERATIONS [JOBS_PER_BATCH]
//
// Loads the backend's function library (the same text delayqd loads), then
// sends calls as they come in the steady state of the lifecycle benchmark
// at 50 connections (a client sends its reserve after its put's reply, its
// delete after its reserve's): each one dq_batch of JOBS_PER_BATCH puts of
// new jobs, as many reserves, and as many deletes. A reserve takes the
// oldest ready job, put 4 calls before; a delete is of a job reserved 4
// calls before. So the ready and the reserved set each hold 24 to 30 jobs
// (with 6 per call), a job is put, reserved and deleted in three calls,
// written twice (put, reserve) and read twice (reserve, and in part by the
// delete). First 4 calls of puts fill the backlog; at
// the end it is reserved and deleted, and no job key may be left, which is
// checked. ITERATIONS calls are of the steady kind; the jobs put number
// (ITERATIONS + 4) * JOBS_PER_BATCH.
#include <hiredis/hiredis.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "backend/redis_scripts.h"

namespace {

// Calls between a job's put and its reserve, and between its reserve and
// its delete: the sets hold about 4 calls' worth of jobs, as at 50
// connections.
constexpr int kLag = 4;

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

Reply Command(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  Reply r(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data())));
  if (!r) {
    std::fprintf(stderr, "redis_call_cost: %s\n", c->errstr);
    std::exit(1);
  }
  if (r->type == REDIS_REPLY_ERROR) {
    std::fprintf(stderr, "redis_call_cost: %s: %s\n", args[0].c_str(), r->str);
    std::exit(1);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: redis_call_cost PORT ITERATIONS [JOBS_PER_BATCH]\n");
    return 2;
  }
  int port = std::atoi(argv[1]);
  long iterations = std::atol(argv[2]);
  int per_batch = argc > 3 ? std::atoi(argv[3]) : 6;
  if (port <= 0 || iterations <= 0 || per_batch <= 0) {
    std::fprintf(stderr, "redis_call_cost: bad arguments\n");
    return 2;
  }
  redisContext* c = redisConnect("127.0.0.1", port);
  if (c == nullptr || c->err) {
    std::fprintf(stderr, "redis_call_cost: cannot connect to port %d\n", port);
    return 1;
  }
  Command(c, {"FLUSHALL"});
  Command(c, {"FUNCTION", "LOAD", "REPLACE", std::string(delayq::backend::redis::Library())});

  const std::string prefix = "dq:{bench}:";
  std::vector<std::string> head = {"FCALL", "dq_batch", "6"};
  for (const char* k : {"ready", "delayed", "reserved", "buried", "keys", "topic"})
    head.push_back(prefix + k);
  // The prefix, then the topic's number: 1, which the first call gives it
  // (redis_scripts.h); later calls name it alone, as an instance does.
  head.push_back(prefix);
  head.push_back("1/1");
  const std::string body(64, 'x');
  // An operation of a dq_batch: its code and argument count, then its
  // arguments (redis_scripts.h).
  using delayq::backend::redis::Code;
  using delayq::backend::redis::Script;
  const std::string kPut = Code(Script::kPut) + std::string("4");
  const std::string kReserve = Code(Script::kReserve) + std::string("1");
  const std::string kDelete = Code(Script::kDelete) + std::string("3");
  // One call: `puts` puts, `reserves` reserves, and the deletes of
  // `to_delete`; returns the members reserved.
  auto call = [&](int puts, int reserves, const std::vector<std::string>& to_delete) {
    // Put: body, priority, delay, ttr (run_at, key, max_tries and back-off
    // at their defaults, so left out).
    std::vector<std::string> a = head;
    for (int i = 0; i < puts; ++i) a.insert(a.end(), {kPut, body, "1024", "0", "60000"});
    for (int i = 0; i < reserves; ++i) a.insert(a.end(), {kReserve, "bench:1"});
    // Delete: member, caller, lease (none: the caller reserved it).
    for (const std::string& m : to_delete) a.insert(a.end(), {kDelete, m, "bench:1", ""});
    Reply r = Command(c, a);
    head.back() = "1";
    // {next_wake, {put results..., reserve results..., delete results...}};
    // a reserve of one job answers its string, which starts with its
    // 13-digit member (reserve_one in src/backend/lua/delayq.lua).
    std::vector<std::string> members;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
      const redisReply* results = r->element[1];
      for (size_t i = static_cast<size_t>(puts);
           i < static_cast<size_t>(puts + reserves) && i < results->elements; ++i) {
        const redisReply* one = results->element[i];
        if (one->type == REDIS_REPLY_STRING && one->len > 13) members.emplace_back(one->str, 13);
      }
    }
    return members;
  };
  // The backlog: kLag calls' worth of jobs wait ready, and as many reserved.
  long reserved = 0;
  for (int i = 0; i < kLag; ++i) call(per_batch, 0, {});
  std::deque<std::vector<std::string>> held;
  for (long it = 0; it < iterations; ++it) {
    std::vector<std::string> to_delete;
    if (held.size() == kLag) {
      to_delete = std::move(held.front());
      held.pop_front();
    }
    held.push_back(call(per_batch, per_batch, to_delete));
    reserved += static_cast<long>(held.back().size());
  }
  // The backlog: reserved, and deleted with the jobs held.
  std::vector<std::string> rest = call(0, kLag * per_batch, {});
  reserved += static_cast<long>(rest.size());
  for (auto& h : held) rest.insert(rest.end(), h.begin(), h.end());
  call(0, 0, rest);
  Reply left = Command(c, {"KEYS", prefix + "j:*"});
  long jobs = (iterations + kLag) * per_batch;
  if (reserved != jobs || left->elements != 0) {
    std::fprintf(stderr, "redis_call_cost: reserved %ld of %ld jobs, %zu job keys left\n", reserved,
                 jobs, left->elements);
    return 1;
  }
  redisFree(c);
  return 0;
}

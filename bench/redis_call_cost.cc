// redis_call_cost: sends a Redis the function calls of job lifecycles, as
// the Redis backend makes them under load, and nothing else. Driven by
// bench/redis_call_cost.sh, which runs the Redis under callgrind and counts
// the instructions it executes per job.
//
//   redis_call_cost PORT ITERATIONS [JOBS_PER_BATCH]
//
// Loads the backend's function library (the same text delayqd loads), then
// per iteration: one dq_batch of JOBS_PER_BATCH puts and as many reserves,
// then one dq_batch deleting the jobs reserved. The database is flushed
// first; at the end it holds the topic's meta hash only, which is checked.
#include <hiredis/hiredis.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backend/redis_scripts.h"

namespace {

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
  head.push_back(prefix);
  const std::string body(64, 'x');
  long reserved = 0;
  for (long it = 0; it < iterations; ++it) {
    // Put: body, priority, delay, ttr (run_at, key, max_tries and back-off
    // at their defaults, so left out).
    std::vector<std::string> a = head;
    for (int i = 0; i < per_batch; ++i)
      a.insert(a.end(), {"dq_put", "4", body, "1024", "0", "60000"});
    for (int i = 0; i < per_batch; ++i) a.insert(a.end(), {"dq_reserve", "2", "bench:1", "1"});
    Reply r = Command(c, a);
    // {next_wake, {put results..., reserve results...}}; a reserve result is
    // {"ok", member, key, body, priority, deadline, index}.
    std::vector<std::string> members;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
      const redisReply* results = r->element[1];
      for (size_t i = static_cast<size_t>(per_batch); i < results->elements; ++i) {
        const redisReply* one = results->element[i];
        if (one->type == REDIS_REPLY_ARRAY && one->elements > 1)
          members.emplace_back(one->element[1]->str, one->element[1]->len);
      }
    }
    reserved += static_cast<long>(members.size());
    std::vector<std::string> d = head;
    for (const std::string& m : members) d.insert(d.end(), {"dq_delete", "3", "id", m, "bench:1"});
    Command(c, d);
  }
  Reply size = Command(c, {"DBSIZE"});
  if (reserved != iterations * per_batch || size->integer != 1) {
    std::fprintf(stderr, "redis_call_cost: reserved %ld of %ld jobs, %lld keys left\n", reserved,
                 iterations * per_batch, size->integer);
    return 1;
  }
  redisFree(c);
  return 0;
}

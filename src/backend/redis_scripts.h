// The Lua functions of the Redis backend (docs/redis-backend.md, "Scripts"):
// one library of Redis Functions. Every state change of a job is one call,
// run atomically by Redis; all keys a topic function touches carry the
// topic's `{topic}` hash tag, so a call never crosses Redis Cluster slots.
#ifndef DELAYQ_BACKEND_REDIS_SCRIPTS_H_
#define DELAYQ_BACKEND_REDIS_SCRIPTS_H_

#include <cstddef>
#include <string_view>

namespace delayq::backend::redis {

// Topic functions take keys = the topic's six keys and args[1] = the
// topic's key prefix, then their own arguments. Each returns
// {next_wake, result}: next_wake is in how many ms the topic next has
// something to do (a due job, a TTR, the end of a pause), or -1 for never.
enum class Script : size_t {
  kPut,         // body, priority, delay_ms, ttr_ms[, run_at|''[, key[, max_tries[, backoff]]]]
  kReserve,     // (owner, count)..., the last count left out for 1 -> {'ok', member, key, body,
                //     priority, deadline, owner-index...}
  kTop,         // -> {} or {priority, member} of the next job to reserve; {'paused'} if paused
  kReserveJob,  // member, owner -> {} or {member, key, body, priority, deadline}
  kDelete,      // member, caller | 'key', key, caller -> 0|1 (by key: the member)
  kRelease,     // member, caller, priority, delay_ms|'' -> ''|'ready'|'delayed'|'buried'
  kBury,        // member, caller, priority -> 0|1
  kTouch,       // member, caller -> 0|new deadline
  kKick,        // bound -> count
  kKickJob,     // member -> 0|1
  kReturn,      // member, owner, undo -> 0|1 (the owner's connection closed; undo '1': the
                //     reservation is taken back uncounted)
  kPeek,        // 'id'|'key'|'ready'|'delayed'|'buried', arg -> {} or {member, key, body, state,
                // priority}
  kStatsJob,    // member -> {} or {now, field, value, ...}
  kStatsTopic,  // -> {ready, urgent, reserved, delayed, buried, total, cmd_delete, cmd_pause,
                //     pause_ms, pause_until, timeouts, now}
  kPause,       // delay_ms -> 1
  kClear,       // mask, limit -> count
  kTick,        // -> 0 (applies what is due)
  kBatch,       // (code+argc, args...)... -> {result, ...}: several operations at once
  kRegister,    // (registry keys) name -> topic number
  kCount
};

inline constexpr size_t kScriptCount = static_cast<size_t>(Script::kCount);

// The library's source, for FUNCTION LOAD REPLACE.
std::string_view Library();
// The function's name, for FCALL.
std::string_view Name(Script s);
// A topic function's code in a dq_batch (its first argument there is the
// code followed by the argument count: "p4"); '\0' for kBatch and kRegister.
char Code(Script s);

}  // namespace delayq::backend::redis

#endif  // DELAYQ_BACKEND_REDIS_SCRIPTS_H_

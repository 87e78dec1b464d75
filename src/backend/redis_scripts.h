// The Lua functions of the Redis backend (docs/redis-backend.md, "Scripts"):
// one library of Redis Functions. Every state change of a job is one call,
// run atomically by Redis; all keys a topic function touches carry the
// topic's `{topic}` hash tag, so a call never crosses Redis Cluster slots.
#ifndef DELAYQ_BACKEND_REDIS_SCRIPTS_H_
#define DELAYQ_BACKEND_REDIS_SCRIPTS_H_

#include <cstddef>
#include <string_view>

namespace delayq::backend::redis {

// Topic functions take keys = the topic's six keys, args[1] = the topic's
// key prefix and args[2] = its number as the caller knows it (-1: not
// known; when the call names jobs by member, the number of their
// incarnation) followed, when the call may give the topic an incarnation,
// by '/' and a number registered for it; then their own arguments. Each returns
// {next_wake, result} or, when the topic's number is not the one the call
// named, {next_wake, result, number} (-1: the topic has no incarnation):
// next_wake is in how many ms the topic next has something to do (a due
// job, a TTR, the end of a pause), -1 for never, -2 when the topic has no
// job and no pause. A job is named by its member (13 digits); one of an
// incarnation whose number is not the topic's is not found.
enum class Script : size_t {
  kPut,         // body, priority, delay_ms, ttr_ms[, run_at|''[, key[, max_tries[, backoff[,
                //     named]]]]] -> ... | 'N': no incarnation and no number to give it | '!u' |
                //     '!o<topic>': a named put refused
  kReserve,     // (owner, count)..., the last count left out for 1 -> {'ok', member, key, body,
                //     priority, deadline, owner-index...}
  kTop,         // -> {} or {priority, member} of the next job to reserve; {'paused'} if paused
  kReserveJob,  // member, owner -> {} or {member, key, body, priority, deadline}
  kDelete,      // member, caller, lease | 'key', key, caller, lease -> change | refusal
                //   (by key: {change, member}); change: '<state><due>,<priority>', refusal:
                //   '!n' | '!l<state>' | '!c<state>' | '!cl' | '!cs' (refusal in the Lua)
  kRelease,  // member, caller, lease, priority|'', delay_ms|''[, answer's status, text] -> change |
             // refusal
  kBury,     // member, caller, lease, priority|''[, answer's status, text] -> change | refusal
  kTouch,    // member, caller, lease -> change | refusal
  kKick,     // bound -> count
  kKickJob,  // member -> change | '!n' | '!k<state>'
  kReturn,   // member, owner, undo -> 0|1 (the owner's connection closed; undo '1': the
             //     reservation is taken back uncounted)
  kPeek,     // 'id'|'key'|'ready'|'delayed'|'buried', arg -> {} or {member, key, body, state,
             // priority, ..., max_tries[, 1: named]}
  kStatsJob,    // member -> {} or {now, field, value, ...}
  kStatsTopic,  // -> {ready, urgent, reserved, delayed, buried, total, cmd_delete, cmd_pause,
                //     pause_ms, pause_until, timeouts, now}
  kPause,       // delay_ms[, '1': only if it has a job] -> 0|1|'N' (as kPut)
  kClear,       // mask, limit -> count
  kTick,        // -> 0 (applies what is due)
  kRetire,      // number, idle_ms -> 0|1: 1 when the number may leave the registry
  kBatch,       // (code+argc, args...)... -> {result, ...}: several operations at once
  kRegister,    // (registry keys) name -> a new topic number
  kFinish,      // member, caller, lease -> change | refusal (a reserved job's delete)
  kNamed,       // (keys: the names hash) header, number, 'f'|'x'|'e', name, member|'' ->
                //     {next_wake, result, number, topic, member} | '!n': kFinish, kDelete or
                //     kPeek, by the operator, on the job a name names (docs/redis-backend.md,
                //     "Names"); member and number: of the job whose id the name is
  kList,        // state ('r'|'d'|'u'|'b'), member|'' (the cursor), limit, '1' descending,
                //     rank, members chosen, last members read, '1' last try ('2': and
                //     read no further) ->
                //     {more 0|1, job...}, each job as kPeek answers it | {2, rank, size,
                //     last members read, member...}: call again | {3}: start again
                //     (docs/redis-backend.md, "Browsing jobs"); a member of another
                //     incarnation (args[2]) starts at the beginning or answers none, as the
                //     order puts it
  kFire,        // schedule, fire_ms, revision, then kPut's arguments -> kPut's answer | '!f': that
                // firing,
                //     or a later one, was made (the cursor, dq:{T}:cursors, moves with the put)
  kObject,      // (keys: the kind's hash, the versions hash) 's'|'d', kind, name[, value] -> 1 |
                //     0: a named object set or deleted (0: a delete found none)
  kUnfire,      // schedule, fire_ms, revision, key -> 1|0: a firing made ahead taken back
                //     (Backend::UnfireSchedule)
  kCount
};

inline constexpr size_t kScriptCount = static_cast<size_t>(Script::kCount);

// The library's source, for FUNCTION LOAD REPLACE.
std::string_view Library();
// The function's name, for FCALL.
std::string_view Name(Script s);
// A topic function's code in a dq_batch (its first argument there is the
// code followed by the argument count: "p4"); '\0' for kBatch, kRegister,
// kNamed and kObject.
char Code(Script s);

}  // namespace delayq::backend::redis

#endif  // DELAYQ_BACKEND_REDIS_SCRIPTS_H_

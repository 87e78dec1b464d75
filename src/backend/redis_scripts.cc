#include "backend/redis_scripts.h"

namespace delayq::backend::redis {

namespace {

// One library of Redis Functions (FUNCTION LOAD), loaded once per
// connection; a call costs no compilation and no setup of the shared
// helpers. Keys of topic T (prefix P = "dq:{T}:"):
//   R  P.."ready"     zset  member -> priority (ties: member order = id order)
//   D  P.."delayed"   zset  member -> due time (epoch ms)
//   U  P.."reserved"  zset  member -> TTR deadline (epoch ms)
//   B  P.."buried"    zset  member -> burial sequence (oldest first)
//   K  P.."keys"      hash  user key -> member
//   M  P.."meta"      hash  seq (also the count of puts), bseq, cmd_delete, cmd_pause, pm, pu,
//                           timeouts
//   P.."j:"..member   hash  the job (docs/redis-backend.md, "Layout")
// A member is the job's sequence number in its topic, 13 digits, zero-padded.
// Time is Redis's own clock (TIME), the same for every instance (a test may
// pass its own: see context). Numbers are written with string.format('%d'):
// Lua's own formatting would turn a large due time into 1.4e+14.
constexpr std::string_view kLibrary = R"lua(
#!lua name=delayq

local function s(n) return string.format('%d', n) end
-- The call's time as a string, written once.
local function now_s(c)
  if c.ns == nil then c.ns = s(c.now) end
  return c.ns
end
local function jk(c, m) return c.P .. 'j:' .. m end

-- The lowest score of a set, or -1 when it is empty.
local function head(set)
  local h = redis.call('ZRANGE', set, 0, 0, 'WITHSCORES')
  if h[2] then return tonumber(h[2]) end
  return -1
end

-- The delayed (D) and reserved (U) sets' lowest scores as the call knows
-- them (c.dh, c.uh): a number, -1 for an empty set, or nil once unknown
-- (after a removal). next_wake asks Redis only for an unknown one.
-- text: the score already written as a string, or nil.
local function zadd_timed(c, set, score, m, text)
  redis.call('ZADD', set, text or s(score), m)
  local h = set == c.D and 'dh' or 'uh'
  if c[h] ~= nil and (c[h] < 0 or score < c[h]) then c[h] = score end
end

local function zrem_timed(c, set, m)
  redis.call('ZREM', set, m)
  if set == c.D then c.dh = nil else c.uh = nil end
end

-- Adds to a counter of the meta hash; finish writes it once per call.
local function count(c, field)
  c.counts[field] = (c.counts[field] or 0) + 1
end

-- The topic's job sequence: read once per call, written once by finish.
local function next_seq(c)
  if c.seq == nil then c.seq = tonumber(redis.call('HGET', c.M, 'seq') or '0') end
  c.seq = c.seq + 1
  c.seq_dirty = true
  return c.seq
end

-- Writes what the call kept for the end (see count and next_seq).
local function flush_meta(c)
  local set = {}
  if c.seq_dirty then
    set[#set + 1] = 'seq'
    set[#set + 1] = s(c.seq)
    c.seq_dirty = false
  end
  if #set > 0 then redis.call('HSET', c.M, unpack(set)) end
  for field, n in pairs(c.counts) do redis.call('HINCRBY', c.M, field, n) end
  c.counts = {}
end

local function may(owner, caller) return caller == '*' or owner == '' or owner == caller end

local function delay_for(bo, n)
  if bo == '' then return 0 end
  if n < 1 then n = 1 end
  if string.sub(bo, 1, 1) == 'L' then
    local list = {}
    for d in string.gmatch(string.sub(bo, 3), '[^,]+') do list[#list + 1] = tonumber(d) end
    if n > #list then n = #list end
    return list[n]
  end
  local base, cap = string.match(bo, '^E:(%d+):(%d+)$')
  base, cap = tonumber(base), tonumber(cap)
  local d, i = base, 1
  while i < n and d < cap do d = d * 2; i = i + 1 end
  if d > cap then d = cap end
  return d
end

local function make_ready(c, m, p)
  redis.call('HSET', jk(c, m), 's', 'r', 'o', '')
  redis.call('ZADD', c.R, p, m)
  c.woke = true
end

local function bury(c, m)
  redis.call('HSET', jk(c, m), 's', 'b', 'o', '')
  redis.call('HINCRBY', jk(c, m), 'bu', 1)
  redis.call('ZADD', c.B, redis.call('HINCRBY', c.M, 'bseq', 1), m)
end

-- A reservation ended without the job finishing; m is in no set.
local function come_back(c, m, explicit)
  local f = redis.call('HMGET', jk(c, m), 'rs', 'mt', 'bo', 'p')
  local rs, mt, bo = tonumber(f[1] or '0'), tonumber(f[2] or '0'), f[3] or ''
  if mt > 0 and rs >= mt then
    bury(c, m)
    return 'buried'
  end
  local d = 0
  if explicit then
    d = explicit
    redis.call('HSET', jk(c, m), 'dl', s(d))
  elseif bo ~= '' then
    d = delay_for(bo, rs)
    redis.call('HSET', jk(c, m), 'dl', s(d))
  end
  if d > 0 then
    redis.call('HSET', jk(c, m), 's', 'd', 'due', s(c.now + d), 'o', '')
    zadd_timed(c, c.D, c.now + d, m)
    return 'delayed'
  end
  make_ready(c, m, f[4])
  return 'ready'
end

local function unplace(c, m, st)
  if st == 'r' then redis.call('ZREM', c.R, m)
  elseif st == 'd' then zrem_timed(c, c.D, m)
  elseif st == 'u' then zrem_timed(c, c.U, m)
  else redis.call('ZREM', c.B, m) end
end

local function reserve_one(c, m, owner, out)
  local j = jk(c, m)
  local f = redis.call('HMGET', j, 'ttr', 'k', 'b', 'p', 'rs')
  local dl = c.now + tonumber(f[1])
  local dls = s(dl)
  redis.call('HSET', j, 's', 'u', 'o', owner, 'due', dls, 'rs', s(tonumber(f[5] or '0') + 1))
  zadd_timed(c, c.U, dl, m, dls)
  out[#out + 1] = m
  out[#out + 1] = f[2] or ''
  out[#out + 1] = f[3]
  out[#out + 1] = f[4]
  out[#out + 1] = dls
end

local function destroy(c, m, key, st)
  unplace(c, m, st)
  if key ~= '' then redis.call('HDEL', c.K, key) end
  redis.call('DEL', jk(c, m))
end

-- Everything due up to c.now: delayed jobs become ready, TTRs expire, a
-- pause ends. Bounded per call; the rest waits for the next call.
local function advance(c)
  c.dh = head(c.D)
  if c.dh >= 0 and c.dh <= c.now then
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', c.D, '-inf', now_s(c), 'LIMIT', 0, 1000)) do
      redis.call('ZREM', c.D, m)
      make_ready(c, m, redis.call('HGET', jk(c, m), 'p'))
    end
    c.dh = nil
  end
  c.uh = head(c.U)
  if c.uh >= 0 and c.uh <= c.now then
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', c.U, '-inf', now_s(c), 'LIMIT', 0, 1000)) do
      zrem_timed(c, c.U, m)
      redis.call('HINCRBY', jk(c, m), 'to', 1)
      count(c, 'timeouts')
      come_back(c, m, nil)
    end
    c.uh = nil
  end
  c.pu = tonumber(redis.call('HGET', c.M, 'pu') or '0')
  if c.pu > 0 and c.pu <= c.now then
    redis.call('HSET', c.M, 'pu', 0, 'pm', 0)
    c.pu = 0
    c.woke = true
  end
end

local function next_wake(c)
  if c.dh == nil then c.dh = head(c.D) end
  if c.uh == nil then c.uh = head(c.U) end
  local w = c.dh
  if c.uh >= 0 and (w < 0 or c.uh < w) then w = c.uh end
  if c.pu > c.now and (w < 0 or c.pu < w) then w = c.pu end
  return w
end

local function finish(c, result)
  flush_meta(c)
  if c.woke then redis.call('PUBLISH', c.P .. 'wake', '1') end
  -- Relative: the instances' clocks need not agree with Redis's.
  local w = next_wake(c)
  if w >= 0 then
    w = w - c.now
    if w < 0 then w = 0 end
  end
  return {w, result}
end

-- The state of one call of a topic function. args[1] is the topic's prefix
-- (it starts with 'd'), or, for tests that drive the backend in virtual
-- time (RedisBackend::Options::time_from_clock), '<now>|' and the prefix.
local function context(keys, args)
  local p, now = args[1], nil
  if string.byte(p) == 100 then
    local tm = redis.call('TIME')
    now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
  else
    local bar = string.find(p, '|', 1, true)
    now = tonumber(string.sub(p, 1, bar - 1))
    p = string.sub(p, bar + 1)
  end
  return {R = keys[1], D = keys[2], U = keys[3], B = keys[4], K = keys[5], M = keys[6],
          P = p, now = now, woke = false, counts = {}}
end

local ops = {}

-- A topic function: applies what is due in the topic, then acts. Its body
-- is also an operation of dq_batch. A body reads its own arguments as
-- args[o + 2] .. args[o + n + 1] (args[1] is the prefix): called alone,
-- o = 0; in a batch, o is where they start, so no copy is made.
local function topic_function(name, body)
  ops[name] = body
  redis.register_function(name, function(keys, args)
    local c = context(keys, args)
    advance(c)
    return finish(c, body(c, args, 0, #args - 1))
  end)
end

topic_function('dq_put', function(c, args, o, n)
  local key = args[o + 8]
  if key ~= '' then
    local ex = redis.call('HGET', c.K, key)
    if ex then return {0, ex, redis.call('HGET', jk(c, ex), 's')} end
  end
  local m = string.format('%013d', next_seq(c))
  local due
  if args[o + 6] ~= '' then due = tonumber(args[o + 6]) else due = c.now + tonumber(args[o + 5]) end
  local delay = due - c.now
  if delay < 0 then delay = 0 end
  local st = 'r'
  if due > c.now then st = 'd' end
  -- Fields at their defaults are left out (the layout's table): each
  -- field costs a search of the hash on every write.
  local dues = due == c.now and now_s(c) or s(due)
  local f = {'b', args[o + 3], 's', st, 'p', args[o + 4], 'due', dues, 'c', now_s(c), 'ttr', args[o + 7]}
  if delay > 0 then f[#f + 1] = 'dl'; f[#f + 1] = s(delay) end
  if key ~= '' then f[#f + 1] = 'k'; f[#f + 1] = key end
  if args[o + 9] ~= '0' then f[#f + 1] = 'mt'; f[#f + 1] = args[o + 9] end
  if args[o + 10] ~= '' then f[#f + 1] = 'bo'; f[#f + 1] = args[o + 10] end
  redis.call('HSET', jk(c, m), unpack(f))
  if key ~= '' then redis.call('HSET', c.K, key, m) end
  if st == 'd' then
    zadd_timed(c, c.D, due, m, dues)
  else
    redis.call('ZADD', c.R, args[o + 4], m)
    c.woke = true
  end
  return {1, m, st}
end)

-- Paused: {'paused', ready jobs} (a paused topic's ready jobs defer
-- DEADLINE_SOON, as in the engine).
topic_function('dq_reserve', function(c, args, o, n)
  if c.pu > c.now then return {'paused', redis.call('ZCARD', c.R)} end
  local out = {'ok'}
  local i = 2
  while i < n + 1 do
    local owner, want = args[o + i], tonumber(args[o + i + 1])
    for _ = 1, want do
      local top = redis.call('ZPOPMIN', c.R)
      if not top[1] then return out end
      reserve_one(c, top[1], owner, out)
      out[#out + 1] = (i - 2) / 2
    end
    i = i + 2
  end
  return out
end)

topic_function('dq_top', function(c, args, o, n)
  if c.pu > c.now then return {'paused', redis.call('ZCARD', c.R)} end
  local top = redis.call('ZRANGE', c.R, 0, 0, 'WITHSCORES')
  if not top[1] then return {} end
  return {top[2], top[1]}
end)

topic_function('dq_reserve_job', function(c, args, o, n)
  local m = args[o + 2]
  local st = redis.call('HGET', jk(c, m), 's')
  if not st or st == 'u' then return {} end
  unplace(c, m, st)
  local out = {}
  reserve_one(c, m, args[o + 3], out)
  return out
end)

topic_function('dq_delete', function(c, args, o, n)
  local m = args[o + 3]
  if args[o + 2] == 'key' then m = redis.call('HGET', c.K, args[o + 3]) end
  if not m then return 0 end
  local f = redis.call('HMGET', jk(c, m), 's', 'o', 'k')
  if not f[1] then return 0 end
  if f[1] == 'u' and not may(f[2] or '', args[o + 4]) then return 0 end
  destroy(c, m, f[3] or '', f[1])
  count(c, 'cmd_delete')
  -- By key, the member: the instance then knows which job went.
  if args[o + 2] == 'key' then return m end
  return 1
end)

topic_function('dq_release', function(c, args, o, n)
  local m = args[o + 2]
  local f = redis.call('HMGET', jk(c, m), 's', 'o', 'bo')
  if f[1] ~= 'u' or not may(f[2] or '', args[o + 3]) then return '' end
  zrem_timed(c, c.U, m)
  redis.call('HSET', jk(c, m), 'p', args[o + 4])
  redis.call('HINCRBY', jk(c, m), 'rl', 1)
  local d = nil
  if args[o + 5] ~= '' then d = tonumber(args[o + 5]) elseif (f[3] or '') == '' then d = 0 end
  return come_back(c, m, d)
end)

topic_function('dq_bury', function(c, args, o, n)
  local m = args[o + 2]
  local f = redis.call('HMGET', jk(c, m), 's', 'o')
  if f[1] ~= 'u' or not may(f[2] or '', args[o + 3]) then return 0 end
  zrem_timed(c, c.U, m)
  redis.call('HSET', jk(c, m), 'p', args[o + 4])
  bury(c, m)
  return 1
end)

topic_function('dq_touch', function(c, args, o, n)
  local m = args[o + 2]
  local f = redis.call('HMGET', jk(c, m), 's', 'o', 'ttr')
  if f[1] ~= 'u' or not may(f[2] or '', args[o + 3]) then return 0 end
  local dl = c.now + tonumber(f[3])
  redis.call('HSET', jk(c, m), 'due', s(dl))
  zadd_timed(c, c.U, dl, m)
  return dl
end)

topic_function('dq_kick', function(c, args, o, n)
  local bound = tonumber(args[o + 2])
  if bound <= 0 then return 0 end
  local from = c.B
  local list = redis.call('ZRANGE', c.B, 0, bound - 1)
  if #list == 0 then
    from = c.D
    list = redis.call('ZRANGE', c.D, 0, bound - 1)
  end
  for _, m in ipairs(list) do
    if from == c.D then zrem_timed(c, c.D, m) else redis.call('ZREM', from, m) end
    redis.call('HINCRBY', jk(c, m), 'ki', 1)
    make_ready(c, m, redis.call('HGET', jk(c, m), 'p'))
  end
  return #list
end)

topic_function('dq_kick_job', function(c, args, o, n)
  local m = args[o + 2]
  local st = redis.call('HGET', jk(c, m), 's')
  if st ~= 'b' and st ~= 'd' then return 0 end
  unplace(c, m, st)
  redis.call('HINCRBY', jk(c, m), 'ki', 1)
  make_ready(c, m, redis.call('HGET', jk(c, m), 'p'))
  return 1
end)

topic_function('dq_return', function(c, args, o, n)
  local m = args[o + 2]
  local f = redis.call('HMGET', jk(c, m), 's', 'o')
  if f[1] ~= 'u' or (f[2] or '') ~= args[o + 3] then return 0 end
  zrem_timed(c, c.U, m)
  if args[o + 4] == '1' then
    -- Handed to a wait that had ended: as if it had never been reserved.
    redis.call('HINCRBY', jk(c, m), 'rs', -1)
    make_ready(c, m, redis.call('HGET', jk(c, m), 'p'))
  else
    come_back(c, m, nil)
  end
  return 1
end)

topic_function('dq_peek', function(c, args, o, n)
  local kind, m = args[o + 2], nil
  if kind == 'id' then m = args[o + 3]
  elseif kind == 'key' then m = redis.call('HGET', c.K, args[o + 3])
  else
    local set = c.R
    if kind == 'delayed' then set = c.D elseif kind == 'buried' then set = c.B end
    m = redis.call('ZRANGE', set, 0, 0)[1]
  end
  if not m then return {} end
  local f = redis.call('HMGET', jk(c, m), 'k', 'b', 's', 'p')
  if not f[3] then return {} end
  return {m, f[1] or '', f[2], f[3], f[4]}
end)

topic_function('dq_stats_job', function(c, args, o, n)
  local all = redis.call('HGETALL', jk(c, args[o + 2]))
  if #all == 0 then return {} end
  table.insert(all, 1, s(c.now))
  return all
end)

topic_function('dq_stats_topic', function(c, args, o, n)
  flush_meta(c)
  local f = redis.call('HMGET', c.M, 'seq', 'cmd_delete', 'cmd_pause', 'pm', 'pu', 'timeouts')
  return {redis.call('ZCARD', c.R), redis.call('ZCOUNT', c.R, '-inf', '(1024'),
    redis.call('ZCARD', c.U), redis.call('ZCARD', c.D), redis.call('ZCARD', c.B),
    f[1] or '0', f[2] or '0', f[3] or '0', f[4] or '0', f[5] or '0', f[6] or '0', s(c.now)}
end)

topic_function('dq_pause', function(c, args, o, n)
  local d = tonumber(args[o + 2])
  redis.call('HINCRBY', c.M, 'cmd_pause', 1)
  if d > 0 then
    redis.call('HSET', c.M, 'pm', s(d), 'pu', s(c.now + d))
    c.pu = c.now + d
  else
    redis.call('HSET', c.M, 'pm', 0, 'pu', 0)
    c.pu = 0
    c.woke = true
  end
  return 1
end)

topic_function('dq_clear', function(c, args, o, n)
  local mask, limit, n = tonumber(args[o + 2]), tonumber(args[o + 3]), 0
  local sets = {}
  if mask % 2 == 1 then sets[#sets + 1] = {c.R, 'r'} end
  if math.floor(mask / 2) % 2 == 1 then sets[#sets + 1] = {c.D, 'd'} end
  if math.floor(mask / 4) % 2 == 1 then sets[#sets + 1] = {c.B, 'b'} end
  for _, set in ipairs(sets) do
    if n >= limit then break end
    for _, m in ipairs(redis.call('ZRANGE', set[1], 0, limit - n - 1)) do
      destroy(c, m, redis.call('HGET', jk(c, m), 'k') or '', set[2])
      n = n + 1
    end
  end
  return n
end)

topic_function('dq_tick', function(c, args, o, n)
  return 0
end)

-- Several operations on one topic in one call: args = prefix, then for
-- each operation its function name, its argument count and its arguments.
-- Applies what is due once, runs them in order, and answers
-- {next_wake, {result, ...}}.
redis.register_function('dq_batch', function(keys, args)
  local c = context(keys, args)
  advance(c)
  local results = {}
  local i = 2
  while i <= #args do
    local body, n = ops[args[i]], tonumber(args[i + 1])
    -- The operation's arguments start at args[i + 2], its body's args[o + 2].
    results[#results + 1] = body(c, args, i, n)
    i = i + 2 + n
  end
  return finish(c, results)
end)

-- The topic registry (keys: name -> number, number -> name; their own slot).
-- The field ' next' (a space: no topic name has one) counts topics.
redis.register_function('dq_register', function(keys, args)
  local no = redis.call('HGET', keys[1], args[1])
  if no then return tonumber(no) end
  no = redis.call('HINCRBY', keys[1], ' next', 1)
  redis.call('HSET', keys[1], args[1], no)
  redis.call('HSET', keys[2], no, args[1])
  return no
end)
)lua";

}  // namespace

std::string_view Library() { return kLibrary.substr(1); }  // from "#!lua"
std::string_view Name(Script s) {
  switch (s) {
    case Script::kPut:
      return "dq_put";
    case Script::kReserve:
      return "dq_reserve";
    case Script::kTop:
      return "dq_top";
    case Script::kReserveJob:
      return "dq_reserve_job";
    case Script::kDelete:
      return "dq_delete";
    case Script::kRelease:
      return "dq_release";
    case Script::kBury:
      return "dq_bury";
    case Script::kTouch:
      return "dq_touch";
    case Script::kKick:
      return "dq_kick";
    case Script::kKickJob:
      return "dq_kick_job";
    case Script::kReturn:
      return "dq_return";
    case Script::kPeek:
      return "dq_peek";
    case Script::kStatsJob:
      return "dq_stats_job";
    case Script::kStatsTopic:
      return "dq_stats_topic";
    case Script::kPause:
      return "dq_pause";
    case Script::kClear:
      return "dq_clear";
    case Script::kTick:
      return "dq_tick";
    case Script::kBatch:
      return "dq_batch";
    case Script::kRegister:
      return "dq_register";
    case Script::kCount:
      break;
  }
  return {};
}

}  // namespace delayq::backend::redis

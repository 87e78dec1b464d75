#include "backend/redis_scripts.h"

#include <boost/uuid/detail/sha1.hpp>
#include <cstdio>

namespace delayq::backend::redis {

namespace {

// Shared by every topic script. Keys of topic T (prefix P = "dq:{T}:"):
//   R  P.."ready"     zset  member -> priority (ties: member order = id order)
//   D  P.."delayed"   zset  member -> due time (epoch ms)
//   U  P.."reserved"  zset  member -> TTR deadline (epoch ms)
//   B  P.."buried"    zset  member -> burial sequence (oldest first)
//   K  P.."keys"      hash  user key -> member
//   M  P.."meta"      hash  seq, bseq, total, cmd_delete, cmd_pause, pm, pu, timeouts
//   P.."j:"..member   hash  the job (docs/redis-backend.md, "Layout")
// A member is the job's sequence number in its topic, 13 digits, zero-padded.
// Time is Redis's own clock (TIME), the same for every instance.
constexpr std::string_view kPrelude = R"lua(
local R, D, U, B, K, M = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local P = ARGV[1]
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local woke = false
local function s(n) return string.format('%d', n) end
local function jk(m) return P .. 'j:' .. m end
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

local function make_ready(m, p)
  redis.call('HSET', jk(m), 's', 'r', 'o', '')
  redis.call('ZADD', R, p, m)
  woke = true
end

local function bury(m)
  redis.call('HSET', jk(m), 's', 'b', 'o', '')
  redis.call('HINCRBY', jk(m), 'bu', 1)
  redis.call('ZADD', B, redis.call('HINCRBY', M, 'bseq', 1), m)
end

-- A reservation ended without the job finishing; m is in no set.
local function come_back(m, explicit)
  local f = redis.call('HMGET', jk(m), 'rs', 'mt', 'bo', 'p')
  local rs, mt = tonumber(f[1]), tonumber(f[2])
  if mt > 0 and rs >= mt then
    bury(m)
    return 'buried'
  end
  local d = 0
  if explicit then
    d = explicit
    redis.call('HSET', jk(m), 'dl', s(d))
  elseif f[3] ~= '' then
    d = delay_for(f[3], rs)
    redis.call('HSET', jk(m), 'dl', s(d))
  end
  if d > 0 then
    redis.call('HSET', jk(m), 's', 'd', 'due', s(now + d), 'o', '')
    redis.call('ZADD', D, s(now + d), m)
    return 'delayed'
  end
  make_ready(m, f[4])
  return 'ready'
end

local function unplace(m, st)
  if st == 'r' then redis.call('ZREM', R, m)
  elseif st == 'd' then redis.call('ZREM', D, m)
  elseif st == 'u' then redis.call('ZREM', U, m)
  else redis.call('ZREM', B, m) end
end

local function reserve_one(m, owner, out)
  local f = redis.call('HMGET', jk(m), 'ttr', 'k', 'b', 'p')
  local dl = now + tonumber(f[1])
  redis.call('HSET', jk(m), 's', 'u', 'o', owner, 'due', s(dl))
  redis.call('HINCRBY', jk(m), 'rs', 1)
  redis.call('ZADD', U, s(dl), m)
  out[#out + 1] = m
  out[#out + 1] = f[2]
  out[#out + 1] = f[3]
  out[#out + 1] = f[4]
  out[#out + 1] = s(dl)
end

local function destroy(m, key, st)
  unplace(m, st)
  if key ~= '' then redis.call('HDEL', K, key) end
  redis.call('DEL', jk(m))
end

-- Everything due up to now: delayed jobs become ready, TTRs expire, a
-- pause ends. Bounded per call; the rest waits for the next call.
local function advance()
  local due = redis.call('ZRANGEBYSCORE', D, '-inf', s(now), 'LIMIT', 0, 1000)
  for _, m in ipairs(due) do
    redis.call('ZREM', D, m)
    make_ready(m, redis.call('HGET', jk(m), 'p'))
  end
  local exp = redis.call('ZRANGEBYSCORE', U, '-inf', s(now), 'LIMIT', 0, 1000)
  for _, m in ipairs(exp) do
    redis.call('ZREM', U, m)
    redis.call('HINCRBY', jk(m), 'to', 1)
    redis.call('HINCRBY', M, 'timeouts', 1)
    come_back(m, nil)
  end
  local pu = tonumber(redis.call('HGET', M, 'pu') or '0')
  if pu > 0 and pu <= now then
    redis.call('HSET', M, 'pu', 0, 'pm', 0)
    woke = true
  end
end

local function next_wake()
  local w = -1
  local a = redis.call('ZRANGE', D, 0, 0, 'WITHSCORES')
  if a[2] then w = tonumber(a[2]) end
  local b = redis.call('ZRANGE', U, 0, 0, 'WITHSCORES')
  if b[2] and (w < 0 or tonumber(b[2]) < w) then w = tonumber(b[2]) end
  local pu = tonumber(redis.call('HGET', M, 'pu') or '0')
  if pu > now and (w < 0 or pu < w) then w = pu end
  return w
end

local function finish(result)
  if woke then redis.call('PUBLISH', P .. 'wake', '1') end
  return {next_wake(), result}
end

advance()
)lua";

constexpr std::string_view kPut = R"lua(
local key = ARGV[8]
if key ~= '' then
  local ex = redis.call('HGET', K, key)
  if ex then return finish({0, ex, redis.call('HGET', jk(ex), 's')}) end
end
local m = string.format('%013d', redis.call('HINCRBY', M, 'seq', 1))
local due
if ARGV[6] ~= '' then due = tonumber(ARGV[6]) else due = now + tonumber(ARGV[5]) end
local delay = due - now
if delay < 0 then delay = 0 end
local st = 'r'
if due > now then st = 'd' end
redis.call('HSET', jk(m), 't', ARGV[2], 'k', key, 'b', ARGV[3], 's', st, 'p', ARGV[4],
  'due', s(due), 'c', s(now), 'dl', s(delay), 'ttr', ARGV[7], 'rs', 0, 'to', 0, 'rl', 0,
  'bu', 0, 'ki', 0, 'mt', ARGV[9], 'bo', ARGV[10], 'o', '')
if key ~= '' then redis.call('HSET', K, key, m) end
redis.call('HINCRBY', M, 'total', 1)
if st == 'd' then
  redis.call('ZADD', D, s(due), m)
else
  redis.call('ZADD', R, ARGV[4], m)
  woke = true
end
return finish({1, m, st})
)lua";

constexpr std::string_view kReserve = R"lua(
if tonumber(redis.call('HGET', M, 'pu') or '0') > now then return finish({'paused'}) end
local out = {'ok'}
local i = 2
while i < #ARGV do
  local owner, want = ARGV[i], tonumber(ARGV[i + 1])
  for _ = 1, want do
    local top = redis.call('ZRANGE', R, 0, 0)
    if not top[1] then return finish(out) end
    redis.call('ZREM', R, top[1])
    reserve_one(top[1], owner, out)
    out[#out + 1] = (i - 2) / 2
  end
  i = i + 2
end
return finish(out)
)lua";

constexpr std::string_view kTop = R"lua(
if tonumber(redis.call('HGET', M, 'pu') or '0') > now then return finish({'paused'}) end
local top = redis.call('ZRANGE', R, 0, 0, 'WITHSCORES')
if not top[1] then return finish({}) end
return finish({top[2], top[1]})
)lua";

constexpr std::string_view kReserveJob = R"lua(
local m = ARGV[2]
local st = redis.call('HGET', jk(m), 's')
if not st or st == 'u' then return finish({}) end
unplace(m, st)
local out = {}
reserve_one(m, ARGV[3], out)
return finish(out)
)lua";

constexpr std::string_view kDelete = R"lua(
local m = ARGV[3]
if ARGV[2] == 'key' then m = redis.call('HGET', K, ARGV[3]) end
if not m then return finish(0) end
local f = redis.call('HMGET', jk(m), 's', 'o', 'k')
if not f[1] then return finish(0) end
if f[1] == 'u' and not may(f[2], ARGV[4]) then return finish(0) end
destroy(m, f[3], f[1])
redis.call('HINCRBY', M, 'cmd_delete', 1)
return finish(1)
)lua";

constexpr std::string_view kRelease = R"lua(
local m = ARGV[2]
local f = redis.call('HMGET', jk(m), 's', 'o', 'bo')
if f[1] ~= 'u' or not may(f[2], ARGV[3]) then return finish('') end
redis.call('ZREM', U, m)
redis.call('HSET', jk(m), 'p', ARGV[4])
redis.call('HINCRBY', jk(m), 'rl', 1)
local d = nil
if ARGV[5] ~= '' then d = tonumber(ARGV[5]) elseif f[3] == '' then d = 0 end
return finish(come_back(m, d))
)lua";

constexpr std::string_view kBury = R"lua(
local m = ARGV[2]
local f = redis.call('HMGET', jk(m), 's', 'o')
if f[1] ~= 'u' or not may(f[2], ARGV[3]) then return finish(0) end
redis.call('ZREM', U, m)
redis.call('HSET', jk(m), 'p', ARGV[4])
bury(m)
return finish(1)
)lua";

constexpr std::string_view kTouch = R"lua(
local m = ARGV[2]
local f = redis.call('HMGET', jk(m), 's', 'o', 'ttr')
if f[1] ~= 'u' or not may(f[2], ARGV[3]) then return finish(0) end
local dl = now + tonumber(f[3])
redis.call('HSET', jk(m), 'due', s(dl))
redis.call('ZADD', U, s(dl), m)
return finish(dl)
)lua";

constexpr std::string_view kKick = R"lua(
local bound = tonumber(ARGV[2])
if bound <= 0 then return finish(0) end
local from = B
local list = redis.call('ZRANGE', B, 0, bound - 1)
if #list == 0 then
  from = D
  list = redis.call('ZRANGE', D, 0, bound - 1)
end
for _, m in ipairs(list) do
  redis.call('ZREM', from, m)
  redis.call('HINCRBY', jk(m), 'ki', 1)
  make_ready(m, redis.call('HGET', jk(m), 'p'))
end
return finish(#list)
)lua";

constexpr std::string_view kKickJob = R"lua(
local m = ARGV[2]
local st = redis.call('HGET', jk(m), 's')
if st ~= 'b' and st ~= 'd' then return finish(0) end
unplace(m, st)
redis.call('HINCRBY', jk(m), 'ki', 1)
make_ready(m, redis.call('HGET', jk(m), 'p'))
return finish(1)
)lua";

constexpr std::string_view kReturn = R"lua(
local m = ARGV[2]
local f = redis.call('HMGET', jk(m), 's', 'o')
if f[1] ~= 'u' or f[2] ~= ARGV[3] then return finish(0) end
redis.call('ZREM', U, m)
if ARGV[4] == '1' then
  -- Handed to a wait that had ended: as if it had never been reserved.
  redis.call('HINCRBY', jk(m), 'rs', -1)
  make_ready(m, redis.call('HGET', jk(m), 'p'))
else
  come_back(m, nil)
end
return finish(1)
)lua";

constexpr std::string_view kPeek = R"lua(
local kind, m = ARGV[2], nil
if kind == 'id' then m = ARGV[3]
elseif kind == 'key' then m = redis.call('HGET', K, ARGV[3])
else
  local set = R
  if kind == 'delayed' then set = D elseif kind == 'buried' then set = B end
  m = redis.call('ZRANGE', set, 0, 0)[1]
end
if not m then return finish({}) end
local f = redis.call('HMGET', jk(m), 'k', 'b', 's', 'p')
if not f[3] then return finish({}) end
return finish({m, f[1], f[2], f[3], f[4]})
)lua";

constexpr std::string_view kStatsJob = R"lua(
local all = redis.call('HGETALL', jk(ARGV[2]))
if #all == 0 then return finish({}) end
table.insert(all, 1, s(now))
return finish(all)
)lua";

constexpr std::string_view kStatsTopic = R"lua(
local f = redis.call('HMGET', M, 'total', 'cmd_delete', 'cmd_pause', 'pm', 'pu', 'timeouts')
return finish({redis.call('ZCARD', R), redis.call('ZCOUNT', R, '-inf', '(1024'),
  redis.call('ZCARD', U), redis.call('ZCARD', D), redis.call('ZCARD', B),
  f[1] or '0', f[2] or '0', f[3] or '0', f[4] or '0', f[5] or '0', f[6] or '0', s(now)})
)lua";

constexpr std::string_view kPause = R"lua(
local d = tonumber(ARGV[2])
redis.call('HINCRBY', M, 'cmd_pause', 1)
if d > 0 then
  redis.call('HSET', M, 'pm', s(d), 'pu', s(now + d))
else
  redis.call('HSET', M, 'pm', 0, 'pu', 0)
  woke = true
end
return finish(1)
)lua";

constexpr std::string_view kClear = R"lua(
local mask, limit, n = tonumber(ARGV[2]), tonumber(ARGV[3]), 0
local sets = {}
if mask % 2 == 1 then sets[#sets + 1] = {R, 'r'} end
if math.floor(mask / 2) % 2 == 1 then sets[#sets + 1] = {D, 'd'} end
if math.floor(mask / 4) % 2 == 1 then sets[#sets + 1] = {B, 'b'} end
for _, set in ipairs(sets) do
  if n >= limit then break end
  for _, m in ipairs(redis.call('ZRANGE', set[1], 0, limit - n - 1)) do
    destroy(m, redis.call('HGET', jk(m), 'k') or '', set[2])
    n = n + 1
  end
end
return finish(n)
)lua";

constexpr std::string_view kTick = R"lua(
return finish(0)
)lua";

// KEYS: the registry's name -> number and number -> name hashes (their own
// slot). The field ' next' (a space: no topic name has one) counts topics.
constexpr std::string_view kRegister = R"lua(
local no = redis.call('HGET', KEYS[1], ARGV[1])
if no then return tonumber(no) end
no = redis.call('HINCRBY', KEYS[1], ' next', 1)
redis.call('HSET', KEYS[1], ARGV[1], no)
redis.call('HSET', KEYS[2], no, ARGV[1])
return no
)lua";

std::string HexSha1(const std::string& text) {
  boost::uuids::detail::sha1 h;
  h.process_bytes(text.data(), text.size());
  unsigned int d[5];
  h.get_digest(d);
  char buf[41];
  for (int i = 0; i < 5; ++i) std::snprintf(buf + 8 * i, 9, "%08x", d[i]);
  return std::string(buf, 40);
}

struct Table {
  std::array<std::string, kScriptCount> source, sha;
  Table() {
    auto set = [this](Script s, std::string_view body, bool topic) {
      std::string text = topic ? std::string(kPrelude) + std::string(body) : std::string(body);
      sha[static_cast<size_t>(s)] = HexSha1(text);
      source[static_cast<size_t>(s)] = std::move(text);
    };
    set(Script::kPut, kPut, true);
    set(Script::kReserve, kReserve, true);
    set(Script::kTop, kTop, true);
    set(Script::kReserveJob, kReserveJob, true);
    set(Script::kDelete, kDelete, true);
    set(Script::kRelease, kRelease, true);
    set(Script::kBury, kBury, true);
    set(Script::kTouch, kTouch, true);
    set(Script::kKick, kKick, true);
    set(Script::kKickJob, kKickJob, true);
    set(Script::kReturn, kReturn, true);
    set(Script::kPeek, kPeek, true);
    set(Script::kStatsJob, kStatsJob, true);
    set(Script::kStatsTopic, kStatsTopic, true);
    set(Script::kPause, kPause, true);
    set(Script::kClear, kClear, true);
    set(Script::kTick, kTick, true);
    set(Script::kRegister, kRegister, false);
  }
};

const Table& Scripts() {
  static const Table t;
  return t;
}

}  // namespace

const std::string& Source(Script s) { return Scripts().source[static_cast<size_t>(s)]; }
const std::string& Sha(Script s) { return Scripts().sha[static_cast<size_t>(s)]; }

}  // namespace delayq::backend::redis

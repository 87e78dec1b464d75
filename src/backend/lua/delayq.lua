-- The Lua functions of the Redis backend (docs/redis-backend.md, "Scripts"),
-- one library of Redis Functions. The build embeds this file in delayqd
-- (cmake/embed_lua.cmake -> backend/lua/delayq_lua.h, redis::Library()):
-- what Redis is given starts at the `#!lua` line below; these lines above
-- it are left out. One file of over 800 lines: Redis loads one library, its
-- helpers are locals that every function shares, and one file reads in the
-- order Redis runs it.
--
-- One library of Redis Functions (FUNCTION LOAD), loaded once per
-- connection; a call costs no compilation and no setup of the shared
-- helpers. Keys of topic T (prefix P = "dq:{T}:"), layout 2:
--   R  P.."ready"     zset    member -> priority (ties: member order = id order)
--   D  P.."delayed"   zset    member -> due time (epoch ms)
--   U  P.."reserved"  zset    member -> TTR deadline (epoch ms)
--   B  P.."buried"    zset    member -> burial sequence (oldest first)
--   K  P.."keys"      hash    user key -> member
--   M  P.."topic"     string  the topic's counters, MessagePack (see load_topic)
--   P.."j:"..member   string  the job, MessagePack (see load; docs/redis-backend.md)
--   NAMES             hash    a named job's name -> its member and its topic's prefix
-- A member is the job's sequence number in its topic, 13 digits, zero-padded.
-- Each set also holds the sentinel member SENT at +inf (see SENT below).
-- Time is Redis's own clock (TIME), the same for every instance (a test may
-- pass its own: see context), in whole milliseconds: c.now, rounded down, is
-- what falls due by; c.up, rounded up, is what every due time, TTR deadline
-- and pause end is counted from, so that none comes before its whole delay
-- has passed (docs/redis-backend.md, "Time"). A number that becomes text goes through
-- string.format('%d'), or to redis.call as a number when small (Redis
-- writes it out exactly, with '%.17g'): Lua's own formatting would turn a
-- large due time into 1.4e+14.
--
-- A call reads each job it touches once (GET) and keeps it in c.jobs; the
-- jobs it changed are written at its end with one MSET and the jobs it
-- deleted with one DEL (flush). The sets, the key hash and the topic's
-- wake channel are written at once.
#!lua name=delayq

-- MessagePack (Redis's cmsgpack), taken on the first call: a library
-- being loaded cannot see it yet (nor `string`).
local pack, unpack_mp, unpack_limit = nil, nil, nil
-- The topic functions' bodies by code, and by the code's byte (filled on
-- the first call: a library being loaded cannot see `string`).
local codes, ops = {}, nil

-- A job in a call is an array: two flags of the call's own (DIRTY: to be
-- written; FRESH: put by this call, so never written yet), then the job's
-- fields, in the order they are packed. The flags live in the job's array
-- rather than in tables of their own: each table a call makes and grows
-- costs Redis allocations and rehashes.
--
-- The fields from MT on (max_tries, back-off, and the counts of timeouts,
-- releases, buries and kicks) are rare: while all six are at their
-- defaults (0 or ''), a job's string is pack(job[ST], ..., job[BODY]), ten
-- values, else pack(job[ST], ..., job[LAST]) (pack_job). A job loaded from
-- ten values has them nil until rare(j) sets them. Each packed value costs
-- cmsgpack a Lua string of its own and a share of their concatenation: ten
-- values pack for about 8,000 instructions where sixteen took 12,900.
local ST, PRI, DUE, OWN, KEY, DL, TTR, CR, RS, BODY, MT, BO, TO, RL, BU, KI =
  3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18
local DIRTY, FRESH, LAST = 1, 2, 18
-- A job whose push try failed (docs/push.md, "Retries") keeps that try's
-- answer after the rare fields: its HTTP status (0: no answer) and the
-- first bytes of its body or of the failure's reason. Its string then
-- packs eighteen values, pack(job[ST], ..., job[AN]); AS is nil without.
local AS, AN = 19, 20
-- A named job (PutRequest::named: its key is also its name, unique across
-- topics) has NM = {key} in its array, and its string packs that array in
-- the key's place: a delete reads only a job's first five values
-- (head_of), and they tell it whether there is a name to free. A job's
-- array holds the key itself as KEY in either case (load), and an
-- ordinary job packs as before.
local NM = 21
-- The names of named jobs, across topics: name -> the job's member (13
-- digits) and its topic's key prefix ('0000000000042dq:{orders}:'). One
-- hash for every topic, so that a put can tell in the same call whether
-- another topic's job holds the name: on one Redis server only (a Redis
-- Cluster has no slot that every topic's call may reach). An entry may
-- outlive its job only if something else took the job away (a FLUSHDB of
-- the topic's keys, say): a name is held only by a live named job
-- (name_holder), so such an entry is free and is overwritten.
local NAMES = 'dq:{dq}:names'
-- How many jobs one MSET or DEL of flush names at most.
local FLUSH_CHUNK = 500
-- Each of a topic's four sets holds this member at +inf from the topic's
-- first call on: a member longer than 64 bytes (zset-max-listpack-value)
-- makes Redis keep the set as a skiplist for good. A small set (up to 128
-- members) would otherwise be a listpack, whose every insert and removal
-- walks the list and parses each score from text: with a few dozen jobs
-- reserved or ready, that doubled what a ZADD costs (docs/redis-backend.md,
-- "Cost of a call"). No job has a score of +inf, so the sentinel is last in
-- every set: readers skip it, and count a set with count_of.
local SENT = '~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~'

local function s(n) return string.format('%d', n) end
-- The text of the numbers 0 .. 255, made on the first call: a table lookup
-- costs a small fraction of a string.format.
local SMALL = nil
-- The text of the priorities seen, up to PRI_TEXT_MAX of them.
local pri_text, pri_texts, PRI_TEXT_MAX = {}, 0, 256
local function small(n) return SMALL[n] or s(n) end
local function pri_s(p)
  local t = pri_text[p]
  if t then return t end
  t = s(p)
  if pri_texts < PRI_TEXT_MAX then
    pri_text[p] = t
    pri_texts = pri_texts + 1
  end
  return t
end
-- The call's time as a string, written once.
local function now_s(c)
  if not c.ns then c.ns = s(c.now) end
  return c.ns
end
local function jk(c, m) return c.P .. 'j:' .. m end

-- A job's array from its string.
local function decode(v)
  local j = {false, false, unpack_mp(v)}
  if j[MT] ~= nil and type(j[LAST]) == 'string' then
    -- Sixteen values with the body last: written before the rare fields
    -- moved behind the body (docs/redis-backend.md, "Layout").
    j = {false, false, j[3], j[4], j[5], j[6], j[7], j[8], j[9], j[10], j[13], j[18],
         j[11], j[12], j[14], j[15], j[16], j[17]}
  end
  local k = j[KEY]
  if k ~= '' and type(k) == 'table' then j[KEY], j[NM] = k[1], k end
  return j
end

-- The job m as this call knows it, or nil when there is none.
local function load(c, m)
  local j = c.jobs[m]
  if j ~= nil then return j or nil end  -- false: deleted by this call
  local v = redis.call('GET', jk(c, m))
  if not v then return nil end
  j = decode(v)
  c.jobs[m] = j
  return j
end

-- Gives job j its rare fields (MT .. KI) when it was loaded without them.
local function rare(j)
  if j[MT] == nil then j[MT], j[BO], j[TO], j[RL], j[BU], j[KI] = 0, '', 0, 0, 0, 0 end
end

-- Job j's string: ten values while its rare fields are at their defaults.
-- A named job's key goes as its array {name} (NM).
local function pack_job(j)
  local nm = j[NM]
  if nm then j[KEY] = nm end
  local v
  if j[AS] ~= nil then
    v = pack(unpack(j, ST, AN))
  elseif j[MT] == nil or (j[MT] == 0 and j[BO] == '' and j[TO] == 0 and j[RL] == 0 and j[BU] == 0
                      and j[KI] == 0) then
    v = pack(unpack(j, ST, BODY))
  else
    v = pack(unpack(j, ST, LAST))
  end
  if nm then j[KEY] = nm[1] end
  return v
end

-- The state, owner and key of job m (nil when there is none), and
-- whether the key is its name, without reading the rest of a job this call
-- has not loaded: for a delete, which needs no more (the job's first five
-- values, cmsgpack.unpack_limit).
local function head_of(c, m)
  local j = c.jobs[m]
  if j then return j[ST], j[OWN], j[KEY], j[NM] end
  if j == false then return nil end
  local v = redis.call('GET', jk(c, m))
  if not v then return nil end
  local _, st, _, _, own, key = unpack_limit(v, KEY - ST + 1, 0)
  if key ~= '' and type(key) == 'table' then return st, own, key[1], true end
  return st, own, key
end

-- Marks job m as changed: flush writes it.
local function save(c, m, j)
  c.jobs[m] = j
  j[DIRTY] = true
end

-- Deletes job m at the end of the call (unless this call created it).
local function drop(c, m)
  local j = c.jobs[m]
  c.jobs[m] = false
  if not (j and j[FRESH]) then c.gone[#c.gone + 1] = jk(c, m) end
end

-- Writes what the call changed: its jobs and, when it changed, the topic
-- string (topic_string) in one MSET; then deletes the jobs it finished
-- with one DEL.
local function flush(c, topic)
  -- Made with room for 8 jobs (a table grows by doubling, each time a copy).
  local set, n = {nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}, 0
  if topic then
    set[1], set[2] = c.M, topic
    n = 2
  end
  for m, j in pairs(c.jobs) do
    if j and j[DIRTY] then
      set[n + 1] = jk(c, m)
      set[n + 2] = pack_job(j)
      n = n + 2
      if n >= 2 * FLUSH_CHUNK then
        redis.call('MSET', unpack(set, 1, n))
        n = 0
      end
    end
  end
  if n > 0 then redis.call('MSET', unpack(set, 1, n)) end
  local gone = c.gone
  local i = 1
  while i <= #gone do
    local last = math.min(i + FLUSH_CHUNK - 1, #gone)
    redis.call('DEL', unpack(gone, i, last))
    i = last + 1
  end
end

-- The topic's counters, one string (M): the job sequence (also the count of
-- puts), lower bounds of the delayed and reserved sets' lowest scores (-1:
-- the set is empty), the pause's end and length, the burial sequence, and
-- the counts of deletes, pauses and TTR expiries; 1 while the sets hold
-- their sentinel (SENT); want: 1 when a reserve may be waiting for the
-- next ready job (see wanted); then (layout 3) the topic's number (no); how
-- many jobs it holds (njobs), or, when it is idle, minus the time it became
-- so (c.idle; 0 while it holds a job or a pause); and, when not 0, floor, the
-- highest number retired for this name. (Each value packed costs cmsgpack a
-- string of its own: two values for the three.)
--
-- A topic exists in Redis only while it has an incarnation: from the call
-- that first puts a job into it or pauses it (incarnate), with a number
-- from the registry, to its retirement (dq_retire), a while after it
-- became idle (no job, no pause: finish deletes its sets then). A topic
-- without one reads as empty, and a call on it writes nothing. After its
-- retirement the topic string is a tombstone for RETIRED_TTL ms: no =
-- -1, and floor, below which no number is taken for it again.
local function load_topic(c)
  local v = redis.call('GET', c.M)
  if v then
    local jobs
    c.seq, c.dmin, c.umin, c.pu, c.pm, c.bseq, c.cdel, c.cpause, c.touts, c.sent, c.want, c.no,
      jobs, c.floor = unpack_mp(v)
    if jobs < 0 then
      c.njobs, c.idle = 0, -jobs
    else
      c.njobs, c.idle = jobs, 0
    end
    if not c.floor then c.floor = 0 end
  end
  if not v or c.no == -1 then
    -- No incarnation (call_state keeps the last call's values: every
    -- field is set here).
    c.seq, c.dmin, c.umin, c.pu, c.pm, c.bseq, c.cdel, c.cpause, c.touts = 0, -1, -1, 0, 0, 0, 0, 0, 0
    c.sent, c.want, c.no, c.njobs, c.idle = 0, 1, -1, 0, 0
    if not v then c.floor = 0 end
  end
end

-- Gives the topic an incarnation for a call that puts a job into it or
-- pauses it: its number stays; a topic without one takes the number the
-- caller registered for it (c.fresh, above floor; the default topic: 0).
-- An idle topic's sets come back, with their sentinel. False when it has
-- none and the caller brought no number it may take.
local function incarnate(c)
  if c.no < 0 then
    local fresh = c.fresh
    if c.E == 0 and c.P == 'dq:{default}:' then fresh = 0 end
    if not fresh or (fresh > 0 and fresh <= c.floor) then return false end
    c.no, c.idle = fresh, 0
    c.tdirty = true
  end
  if c.sent ~= 1 then
    for _, set in ipairs({c.R, c.D, c.U, c.B}) do redis.call('ZADD', set, '+inf', SENT) end
    c.sent = 1
    c.tdirty = true
  end
  return true
end

-- The topic string, when the call changed it and the topic has an
-- incarnation (for flush), else nil.
local function topic_string(c)
  if not c.tdirty or c.no < 0 then return nil end
  local jobs = c.njobs
  if c.idle ~= 0 then jobs = -c.idle end
  if c.floor == 0 then
    return pack(c.seq, c.dmin, c.umin, c.pu, c.pm, c.bseq, c.cdel, c.cpause, c.touts, c.sent, c.want,
                c.no, jobs)
  end
  return pack(c.seq, c.dmin, c.umin, c.pu, c.pm, c.bseq, c.cdel, c.cpause, c.touts, c.sent, c.want,
              c.no, jobs, c.floor)
end

-- A job named by member is one of the incarnation whose number the call
-- carries: (c.eok and member or nil) below, nil when that number is not the
-- topic's (the job's incarnation has ended).

-- How many jobs a set holds (the sentinel left out).
local function count_of(set) return redis.call('ZCOUNT', set, '-inf', '(+inf') end
-- The members of a ZRANGE answer, the sentinel taken off its end.
local function members(list)
  if list[#list] == SENT then list[#list] = nil end
  return list
end

-- The lowest score of a set, or -1 when it is empty.
local function head(set)
  local h = redis.call('ZRANGE', set, 0, 0, 'WITHSCORES')
  if h[2] and h[1] ~= SENT then return tonumber(h[2]) end
  return -1
end

-- Adds m to the delayed (D) or reserved (U) set, keeping c.dmin / c.umin a
-- lower bound of the set's lowest score. A removal leaves the bound as it
-- is: a bound below the real head only makes the topic's next call look
-- into the set once more (advance), which then reads the real head.
-- The score (a time) goes to Redis as text from string.format('%d'): a
-- number would be written out by Redis with '%.17g', which costs more for a
-- 13-digit time (docs/redis-backend.md, "Cost of a call").
--
-- The reserved set's changes wait for the end of the call (flush_reserved):
-- one ZREM and one ZADD for all the call's reservations, instead of one
-- command per job (each redis.call costs thousands of instructions, and
-- each is a command of its own in the append-only file). c.uadd maps a
-- member to its new score, c.urem holds the members to take out. Only
-- advance (at the start of a call, before anything is pending) and
-- dq_stats_topic read the set.
local function zadd_timed(c, set, score, m, text)
  if set == c.D then
    redis.call('ZADD', set, text or s(score), m)
    if c.dmin < 0 or score < c.dmin then c.dmin = score; c.tdirty = true end
    return
  end
  local a = c.uadd
  if not a then
    a = {}
    c.uadd = a
  end
  a[m] = text or s(score)
  if c.umin < 0 or score < c.umin then
    c.umin = score
    c.tdirty = true
  end
end

-- Takes m out of the reserved set at the end of the call (and drops an
-- addition of this call's).
local function zrem_reserved(c, m)
  local a, r = c.uadd, c.urem
  if a then a[m] = nil end
  if not r then
    c.urem = {m}
  else
    r[#r + 1] = m
  end
end

-- Applies the reserved set's pending changes: removals first, so that a
-- member taken out and added again in one call ends up in the set.
local function flush_reserved(c)
  local r, a = c.urem, c.uadd
  c.urem, c.uadd = false, false
  if r then
    for i = 1, #r, FLUSH_CHUNK do
      redis.call('ZREM', c.U, unpack(r, i, math.min(i + FLUSH_CHUNK - 1, #r)))
    end
  end
  if a then
    local list, n = {nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}, 0
    for m, text in pairs(a) do
      list[n + 1], list[n + 2] = text, m
      n = n + 2
      if n >= 2 * FLUSH_CHUNK then
        redis.call('ZADD', c.U, unpack(list, 1, n))
        n = 0
      end
    end
    if n > 0 then redis.call('ZADD', c.U, unpack(list, 1, n)) end
  end
end

-- Whether a job in state st, held by own (when reserved), may be acted on
-- by caller (a session's owner string, which has a ':'; '*': the operator)
-- or, when lease is not '', by that lease alone (docs/engine.md, "Leases").
-- nil: it may; else the refusal, '!' then why and what was found: 'l' and
-- the state (the lease does not hold it); 'c' and the state (not reserved,
-- unless any: a delete takes a job in any state); 'cl' / 'cs' (reserved
-- under a lease / by another connection). A missing job is '!n'.
local function refusal(st, own, caller, lease, any)
  if lease ~= '' then
    if st == 'u' and own == lease then return nil end
    return '!l' .. st
  end
  if st ~= 'u' then
    if any then return nil end
    return '!c' .. st
  end
  if caller == '*' or own == caller then return nil end
  if string.find(own, ':', 1, true) then return '!cs' end
  return '!cl'
end

-- What an operation left job j as: its state, then its due time (delayed)
-- or TTR deadline (reserved), else 0, and its priority: 'd1700000000000,1024'.
local function change(j)
  local st = j[ST]
  if st == 'd' or st == 'u' then return st .. s(j[DUE]) .. ',' .. pri_s(j[PRI]) end
  return st .. '0,' .. pri_s(j[PRI])
end

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

local function make_ready(c, m, j)
  j[ST] = 'r'
  j[OWN] = ''
  save(c, m, j)
  redis.call('ZADD', c.R, j[PRI], m)
  c.woke = true
end

local function bury(c, m, j)
  rare(j)
  j[ST] = 'b'
  j[OWN] = ''
  j[BU] = j[BU] + 1
  save(c, m, j)
  c.bseq = c.bseq + 1
  c.tdirty = true
  redis.call('ZADD', c.B, c.bseq, m)
end

-- A reservation ended without the job finishing; m is in no set.
local function come_back(c, m, j, explicit)
  rare(j)
  if j[MT] > 0 and j[RS] >= j[MT] then
    bury(c, m, j)
    return 'buried'
  end
  local d = 0
  if explicit then
    d = explicit
    j[DL] = d
  elseif j[BO] ~= '' then
    d = delay_for(j[BO], j[RS])
    j[DL] = d
  end
  if d > 0 then
    j[ST] = 'd'
    j[DUE] = c.up + d
    j[OWN] = ''
    save(c, m, j)
    zadd_timed(c, c.D, c.up + d, m)
    return 'delayed'
  end
  make_ready(c, m, j)
  return 'ready'
end

local function unplace(c, m, st)
  if st == 'r' then redis.call('ZREM', c.R, m)
  elseif st == 'd' then redis.call('ZREM', c.D, m)
  elseif st == 'u' then zrem_reserved(c, m)
  else redis.call('ZREM', c.B, m) end
end

-- Reserves job m (in no set now) for owner and answers it as the caller
-- reads it: one string, '<member><deadline>,<priority>,<index>,<key
-- length>,<key><body>' (a member has 13 digits; index: which owner of the
-- call, from 0). Redis turns a string into a reply for a fraction of what a
-- table of the same values costs it. The deadline is formatted once, for
-- the set and the answer; the other numbers come from tables of text
-- (a string.format of four numbers cost about as much as the ZADD).
--
-- An owner without a ':' is the base of the leases of a reserve made with
-- detach (HTTP; docs/engine.md, "Leases"): its n-th job of the call is held
-- by the lease owner .. '.' .. n, and its answer has the job's other
-- figures after the index: 'L<created>,<delay>,<ttr>,<reserves>,<timeouts>,
-- <releases>,<buries>,<kicks>,<max_tries>,' (the HTTP reply shows them),
-- then 'B' when the job has a back-off of its own (the push dispatcher
-- releases it without a delay then, so that the back-off applies).
-- A named job's answer has 'N' before the key length.
local function reserve_one(c, m, j, owner, index, n)
  local dl = c.up + j[TTR]
  local dls = s(dl)
  local lease = not string.find(owner, ':', 1, true) and owner ~= '*'
  j[ST] = 'u'
  j[OWN] = lease and (owner .. '.' .. small(n)) or owner
  j[DUE] = dl
  j[RS] = j[RS] + 1
  save(c, m, j)
  zadd_timed(c, c.U, dl, m, dls)
  local key = j[KEY]
  local head = m .. dls .. ',' .. pri_s(j[PRI]) .. ',' .. small(index) .. ','
  if lease then
    rare(j)
    head = head .. 'L' .. s(j[CR]) .. ',' .. s(j[DL]) .. ',' .. s(j[TTR]) .. ',' .. s(j[RS]) .. ','
      .. s(j[TO]) .. ',' .. s(j[RL]) .. ',' .. s(j[BU]) .. ',' .. s(j[KI]) .. ',' .. s(j[MT]) .. ','
    if j[BO] ~= '' then head = head .. 'B' end
  end
  if j[NM] then head = head .. 'N' end
  return head .. small(#key) .. ',' .. key .. j[BODY]
end

-- Job m ends. A named job's name is free from now on: the entry goes
-- with it, in the same call.
local function destroy(c, m, key, st, named)
  unplace(c, m, st)
  if key ~= '' then
    redis.call('HDEL', c.K, key)
    if named then redis.call('HDEL', NAMES, key) end
  end
  drop(c, m)
  c.njobs = c.njobs - 1
  c.tdirty = true
end

-- The live named job that holds `name`: its topic's prefix, its member and
-- its string; nil when none does (no entry, or one whose job is gone or
-- is no longer that name's: such an entry is free, and a put overwrites it).
local function name_holder(name)
  local v = redis.call('HGET', NAMES, name)
  if not v then return nil end
  local m, p = string.sub(v, 1, 13), string.sub(v, 14)
  local js = redis.call('GET', p .. 'j:' .. m)
  if not js then return nil end
  local _, _, _, _, _, key = unpack_limit(js, KEY - ST + 1, 0)
  if key == '' or type(key) ~= 'table' or key[1] ~= name then return nil end
  return p, m, js
end

-- Everything due up to c.now: delayed jobs become ready, TTRs expire, a
-- pause ends. Bounded per call; the rest waits for the next call.
local function advance(c)
  if c.dmin >= 0 and c.dmin <= c.now then
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', c.D, '-inf', now_s(c), 'LIMIT', 0, 1000)) do
      redis.call('ZREM', c.D, m)
      local j = load(c, m)
      if j then make_ready(c, m, j) end
    end
    c.dmin = head(c.D)
    c.tdirty = true
  end
  if c.umin >= 0 and c.umin <= c.now then
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', c.U, '-inf', now_s(c), 'LIMIT', 0, 1000)) do
      redis.call('ZREM', c.U, m)
      local j = load(c, m)
      if j then
        rare(j)
        j[TO] = j[TO] + 1
        c.touts = c.touts + 1
        come_back(c, m, j, nil)
      end
    end
    c.umin = head(c.U)
    c.tdirty = true
  end
  if c.pu > 0 and c.pu <= c.now then
    c.pu, c.pm = 0, 0
    c.tdirty = true
    c.want, c.woke = 1, true
  end
end

-- A reserve (or a look at the top) found no ready job: its caller may wait,
-- so the next call that makes a job ready publishes a wake-up (finish) and
-- sets want back to 0. A call that makes jobs ready while want is 0
-- publishes nothing: no reserve has come away empty since the last
-- wake-up, which every instance with waiters answered by trying again. In
-- the lifecycle benchmark the ready set is rarely empty, so most calls
-- publish nothing, where each used to reach every instance. (An instance
-- also tries again when Redis confirms its subscription, for a wake-up
-- published before that: RedisBackend's on_subscribed.)
local function wanted(c)
  if c.want ~= 1 then
    c.want = 1
    c.tdirty = true
  end
end

local function next_wake(c)
  local w = c.dmin
  if c.umin >= 0 and (w < 0 or c.umin < w) then w = c.umin end
  if c.pu > c.now and (w < 0 or c.pu < w) then w = c.pu end
  return w
end

-- How long a retired topic's tombstone stays (load_topic): longer than a
-- call that carries a number registered for the topic can take to come.
local RETIRED_TTL = 600000

local function finish(c, result)
  local wake = c.woke and c.want == 1
  if wake then
    c.want = 0
    c.tdirty = true
  end
  flush_reserved(c)
  local idle = c.no >= 0 and c.njobs <= 0 and c.pu == 0 and c.P ~= 'dq:{default}:'
  if idle and c.idle == 0 then
    -- Its last job went, or its pause ended: the sets go (an incarnation
    -- keeps its topic string, with its number and sequence, until
    -- dq_retire).
    redis.call('DEL', c.R, c.D, c.U, c.B, c.K)
    c.sent, c.dmin, c.umin, c.idle, c.tdirty = 0, -1, -1, c.now, true
  elseif not idle and c.idle ~= 0 then
    c.idle, c.tdirty = 0, true
  end
  local retire = c.retire
  if retire then
    c.retire = false
    if retire > c.floor then
      c.floor = retire
      c.tdirty = true
    end
    if retire == c.no then
      c.no = -1
      c.tdirty = false
    end
  end
  flush(c, topic_string(c))
  if c.no < 0 and retire then
    redis.call('SET', c.M, pack(0, -1, -1, 0, 0, 0, 0, 0, 0, 0, 1, -1, 0, c.floor), 'PX',
               RETIRED_TTL)
  end
  if wake then redis.call('PUBLISH', c.P .. 'wake', '1') end
  -- Relative: the instances' clocks need not agree with Redis's. -2: the
  -- topic has no job and no pause.
  local w = next_wake(c)
  if w >= 0 then
    w = w - c.now
    if w < 0 then w = 0 end
  elseif c.no < 0 or c.idle ~= 0 then
    w = -2
  end
  -- The topic's number when it is not the one the caller named.
  if c.no ~= c.E then return {w, result, c.no} end
  return {w, result}
end

-- The state of the call in progress: one table for every call (Redis runs
-- one call at a time), with all its fields made here, so that a call does
-- not build it and grow it field by field (dq_tick, the fixed part of every
-- call: 66,000 -> 57,000 instructions). The per-job tables are new in each
-- call: jobs (member -> job as loaded or changed, with its DIRTY and FRESH
-- flags; false: deleted) and gone (the job keys to delete). Emptying them
-- in place for the next call cost more than making them.
-- The last call's second argument, and the numbers it held (context).
local last_known, last_E, last_fresh = nil, -1, false

local call_state = {
  R = false, D = false, U = false, B = false, K = false, M = false, P = false,
  now = 0, up = 0, ns = false, woke = false, tdirty = false, want = 0, uadd = false, urem = false,
  seq = 0, dmin = 0, umin = 0, pu = 0, pm = 0, bseq = 0, cdel = 0, cpause = 0, touts = 0,
  sent = 0, no = -1, njobs = 0, idle = 0, floor = 0, E = -1, fresh = false, eok = false,
  retire = false, jobs = false, gone = false,
}

-- What the library takes on its first call (a library being loaded cannot
-- see cmsgpack or `string` yet).
local function setup()
  pack, unpack_mp, unpack_limit = cmsgpack.pack, cmsgpack.unpack, cmsgpack.unpack_limit
  ops = {}
  for code, body in pairs(codes) do ops[string.byte(code)] = body end
  SMALL = {}
  for i = 0, 255 do SMALL[i] = s(i) end
end

-- The state of one call of a topic function. args[1] is the topic's prefix
-- (it starts with 'd'), or, for tests that drive the backend in virtual
-- time (RedisBackend::Options::time_from_clock), '<microseconds>|' and the
-- prefix.
-- args[2] is the topic's number as the caller knows it (-1: not known),
-- then, when the call may give the topic an incarnation (incarnate), '/'
-- and a number the caller registered for it. The jobs the call names by
-- member are of the incarnation of that number: when it is not the
-- topic's, they are not found (c.eok).
-- keys are the topic's six keys. A call that learns its topic only as it
-- runs (dq_named) passes none: they are made from the prefix, that of
-- args[1] or, when given, `prefix` (the time still comes from args[1]);
-- with `own`, the jobs it names are of whatever incarnation the topic
-- has (the call found the job there itself).
local function context(keys, args, prefix, own)
  if pack == nil then setup() end
  local p, now, us = args[1], nil, nil
  if string.byte(p) == 100 then
    local tm = redis.call('TIME')
    now, us = tonumber(tm[1]) * 1000, tonumber(tm[2])
  else
    local bar = string.find(p, '|', 1, true)
    now, us = 0, tonumber(string.sub(p, 1, bar - 1))
    p = string.sub(p, bar + 1)
  end
  -- (fmod is exact: the microseconds' own digits, not a rounded quotient.)
  local sub = math.fmod(us, 1000)
  now = now + (us - sub) / 1000
  local c = call_state
  local known = args[2]
  if known ~= last_known then
    -- (Most calls name the number the last one did: tonumber costs a strtod.)
    last_known, last_E, last_fresh = known, tonumber(known), false
    if not last_E then
      local slash = string.find(known, '/', 1, true)
      last_E = tonumber(string.sub(known, 1, slash - 1))
      last_fresh = tonumber(string.sub(known, slash + 1))
    end
  end
  c.E, c.fresh = last_E, last_fresh
  if keys then
    c.R, c.D, c.U, c.B, c.K, c.M = keys[1], keys[2], keys[3], keys[4], keys[5], keys[6]
  else
    p = prefix or p
    c.R, c.D, c.U, c.B, c.K, c.M = p .. 'ready', p .. 'delayed', p .. 'reserved', p .. 'buried',
      p .. 'keys', p .. 'topic'
  end
  c.P, c.now, c.ns, c.woke, c.tdirty, c.retire = p, now, false, false, false, false
  c.up = now
  if sub > 0 then c.up = now + 1 end
  c.jobs, c.gone, c.uadd, c.urem = {}, {}, false, false
  load_topic(c)
  if own then c.E = c.no end
  c.eok = c.no >= 0 and c.no == c.E
  return c
end

-- A topic function: applies what is due in the topic, then acts. Its body
-- is also an operation of dq_batch, named there by the byte `code`. A body
-- reads its own arguments as args[o + 2] .. args[o + n + 1] (args[1] and
-- args[2] are the prefix and the number): called alone, o = 1; in a batch,
-- o is where they start, less one, so no copy is made.
local function topic_function(name, code, body)
  codes[code] = body
  redis.register_function(name, function(keys, args)
    local c = context(keys, args)
    advance(c)
    return finish(c, body(c, args, 1, #args - 2))
  end)
end

-- Arguments: body, priority, delay, ttr, then run_at, key, max_tries,
-- backoff and named ('1': the key is also the job's name, NM), which the
-- caller leaves out from the last one not at its default ('', '', 0, '',
-- ''): a plain put sends four. Answers the new job's state and member in
-- one string ('r0000000000042'; delayed: its due time after the member,
-- 'd00000000000421700000000000'), or, when its key names a job already,
-- {0, member, state, due time or 0}: a table costs Redis several times what
-- a string does to turn into a reply. A named put the name's rules refuse
-- answers '!u' (a job without a name holds the key in this topic) or '!o'
-- and the topic of the job that holds the name.
topic_function('dq_put', 'p', function(c, args, o, n)
  local key = n >= 6 and args[o + 7] or ''
  local named = n >= 9 and args[o + 10] == '1' and key ~= ''
  if key ~= '' then
    if named then
      local p = name_holder(key)
      if p and p ~= c.P then return '!o' .. string.sub(p, 5, -3) end
    end
    local ex = redis.call('HGET', c.K, key)
    if ex then
      local j = load(c, ex)
      if not j then return {0, ex, ''} end
      if named and not j[NM] then return '!u' end
      local due = 0
      if j[ST] == 'd' then due = j[DUE] end
      return {0, ex, j[ST], s(due)}
    end
  end
  -- No incarnation, and no number to take: the caller registers one and
  -- calls again.
  if (c.no < 0 or c.sent ~= 1) and not incarnate(c) then return 'N' end
  c.seq = c.seq + 1
  c.njobs = c.njobs + 1
  c.tdirty = true
  local m = string.format('%013d', c.seq)
  local due, delay
  if n >= 5 and args[o + 6] ~= '' then
    due = tonumber(args[o + 6])
    delay = due - c.now
    if delay < 0 then delay = 0 end
  else
    delay = tonumber(args[o + 4])
    due = c.now
    if delay > 0 then due = c.up + delay end
  end
  local st = 'r'
  if due > c.now then st = 'd' end
  local j = {false, true, st, tonumber(args[o + 3]), due, '', key, delay, tonumber(args[o + 5]), c.now,
             0, args[o + 2]}
  if n >= 7 then
    rare(j)
    j[MT], j[BO] = tonumber(args[o + 8]), n >= 8 and args[o + 9] or ''
  end
  save(c, m, j)
  if key ~= '' then redis.call('HSET', c.K, key, m) end
  if named then
    j[NM] = {key}
    redis.call('HSET', NAMES, key, m .. c.P)
  end
  if st == 'd' then
    zadd_timed(c, c.D, due, m)
  else
    redis.call('ZADD', c.R, args[o + 3], m)
    c.woke = true
  end
  if st == 'd' then return st .. m .. s(due) end
  return st .. m
end)

-- dq_reserve's answer: one job alone as its string (reserve_one), else
-- {'ok', job string, ...}.
local function reserved(out)
  if #out == 2 then return out[2] end
  return out
end

-- Arguments: (owner, count) pairs; the last count may be left out for 1.
-- Paused: {'paused', ready jobs} (a paused topic's ready jobs defer
-- DEADLINE_SOON, as in the engine).
topic_function('dq_reserve', 'r', function(c, args, o, n)
  if c.pu > c.now then return {'paused', count_of(c.R)} end
  local out = {'ok', nil}
  local i = 2
  while i <= n + 1 do
    local owner, want = args[o + i], 1
    if i <= n then want = tonumber(args[o + i + 1]) end
    local got = 0
    for _ = 1, want do
      local top = redis.call('ZPOPMIN', c.R)
      if not top[1] or top[1] == SENT then
        if top[1] then redis.call('ZADD', c.R, '+inf', SENT) end
        wanted(c)
        return reserved(out)
      end
      local j = load(c, top[1])
      if j then
        got = got + 1
        out[#out + 1] = reserve_one(c, top[1], j, owner, (i - 2) / 2, got)
      end
    end
    i = i + 2
  end
  return reserved(out)
end)

topic_function('dq_top', 't', function(c, args, o, n)
  if c.pu > c.now then return {'paused', count_of(c.R)} end
  local top = redis.call('ZRANGE', c.R, 0, 0, 'WITHSCORES')
  if not top[1] or top[1] == SENT then
    wanted(c)
    return {}
  end
  return {top[2], top[1]}
end)

topic_function('dq_reserve_job', 'j', function(c, args, o, n)
  local m = (c.eok and args[o + 2] or nil)
  if not m then return {} end
  local j = load(c, m)
  if not j or j[ST] == 'u' then return {} end
  unplace(c, m, j[ST])
  return reserve_one(c, m, j, args[o + 3], 0, 1)
end)

-- Arguments: member, caller, lease (by id), or 'key', key, caller, lease.
-- Answers change() of the job as it was found, or the refusal.
topic_function('dq_delete', 'x', function(c, args, o, n)
  local m, a = nil, o + 3
  if args[o + 2] == 'key' then
    m, a = redis.call('HGET', c.K, args[o + 3]), o + 4
  else
    m = (c.eok and args[o + 2] or nil)
  end
  if not m then return '!n' end
  local st, own, key, named = head_of(c, m)
  if not st then return '!n' end
  local no = refusal(st, own, args[a], args[a + 1], true)
  if no then return no end
  local j = c.jobs[m]
  local what = j and change(j) or (st .. '0,0')
  destroy(c, m, key, st, named)
  c.cdel = c.cdel + 1
  c.tdirty = true
  -- By key, the member too: the instance then knows which job went.
  if args[o + 2] == 'key' then return {what, m} end
  return what
end)

-- The job m if caller or lease may act on it as a reserved job (refusal),
-- else nil and the refusal.
local function held(c, m, caller, lease)
  if not m then return nil, '!n' end
  local j = load(c, m)
  if not j then return nil, '!n' end
  local no = refusal(j[ST], j[OWN], caller, lease, false)
  if no then return nil, no end
  return j
end

-- Arguments: member, caller, lease. A reserved job's delete.
topic_function('dq_finish', 'f', function(c, args, o, n)
  local m = (c.eok and args[o + 2] or nil)
  local j, no = held(c, m, args[o + 3], args[o + 4])
  if not j then return no end
  local what = change(j)
  destroy(c, m, j[KEY], 'u', j[NM])
  c.cdel = c.cdel + 1
  c.tdirty = true
  return what
end)

-- Keeps a push try's answer with job j when the operation was given one:
-- its status and text as args[at] and args[at + 1].
local function keep_answer(j, args, at, given)
  if not given then return end
  rare(j)
  j[AS], j[AN] = tonumber(args[at]), args[at + 1]
end

-- Arguments: member, caller, lease, priority ('': the job's), delay ('':
-- none given), then a push try's answer (status, text) or nothing.
topic_function('dq_release', 'l', function(c, args, o, n)
  local m = (c.eok and args[o + 2] or nil)
  local j, no = held(c, m, args[o + 3], args[o + 4])
  if not j then return no end
  zrem_reserved(c, m)
  rare(j)
  keep_answer(j, args, o + 7, n >= 7)
  if args[o + 5] ~= '' then j[PRI] = tonumber(args[o + 5]) end
  j[RL] = j[RL] + 1
  local d = nil
  if args[o + 6] ~= '' then d = tonumber(args[o + 6]) elseif j[BO] == '' then d = 0 end
  come_back(c, m, j, d)
  return change(j)
end)

-- Arguments: member, caller, lease, priority ('': the job's), then a push
-- try's answer (status, text) or nothing.
topic_function('dq_bury', 'b', function(c, args, o, n)
  local m = (c.eok and args[o + 2] or nil)
  local j, no = held(c, m, args[o + 3], args[o + 4])
  if not j then return no end
  zrem_reserved(c, m)
  keep_answer(j, args, o + 6, n >= 6)
  if args[o + 5] ~= '' then j[PRI] = tonumber(args[o + 5]) end
  bury(c, m, j)
  return change(j)
end)

-- Arguments: member, caller, lease.
topic_function('dq_touch', 'h', function(c, args, o, n)
  local m = (c.eok and args[o + 2] or nil)
  local j, no = held(c, m, args[o + 3], args[o + 4])
  if not j then return no end
  local dl = c.up + j[TTR]
  j[DUE] = dl
  save(c, m, j)
  zadd_timed(c, c.U, dl, m)
  return change(j)
end)

-- Kicks up to `bound` buried jobs, or when there are none up to `bound`
-- delayed ones (beanstalkd's kick); with a second argument 'b' or 'd',
-- only that state's (the next chunk of one kick: the caller asks a chunk at
-- a time, so that no call holds Redis long). Answers {kicked, 'b' or 'd',
-- how many that state held before}: the caller kicks no more than that in
-- all, so that a kick ends even while others bury or delay jobs as fast.
topic_function('dq_kick', 'k', function(c, args, o, n)
  local bound = tonumber(args[o + 2])
  local only = n >= 2 and args[o + 3] or ''
  if bound <= 0 then return {0, only, 0} end
  local from, took, list = c.B, 'b', {}
  if only ~= 'd' then list = members(redis.call('ZRANGE', c.B, 0, bound - 1)) end
  if #list == 0 and only ~= 'b' then
    from, took = c.D, 'd'
    list = members(redis.call('ZRANGE', c.D, 0, bound - 1))
  end
  for _, m in ipairs(list) do
    redis.call('ZREM', from, m)
    local j = load(c, m)
    if j then
      rare(j)
      j[KI] = j[KI] + 1
      make_ready(c, m, j)
    end
  end
  return {#list, took, #list + count_of(from)}
end)

-- Answers change(), or '!n', or '!k' and the state (neither buried nor
-- delayed).
topic_function('dq_kick_job', 'K', function(c, args, o, n)
  local m = (c.eok and args[o + 2] or nil)
  if not m then return '!n' end
  local j = load(c, m)
  if not j then return '!n' end
  if j[ST] ~= 'b' and j[ST] ~= 'd' then return '!k' .. j[ST] end
  unplace(c, m, j[ST])
  rare(j)
  j[KI] = j[KI] + 1
  make_ready(c, m, j)
  return change(j)
end)

topic_function('dq_return', 'n', function(c, args, o, n)
  local m = (c.eok and args[o + 2] or nil)
  if not m then return 0 end
  local j = load(c, m)
  if not j or j[ST] ~= 'u' or j[OWN] ~= args[o + 3] then return 0 end
  zrem_reserved(c, m)
  if args[o + 4] == '1' then
    -- Handed to a wait that had ended: as if it had never been reserved.
    j[RS] = j[RS] - 1
    make_ready(c, m, j)
  else
    come_back(c, m, j, nil)
  end
  return 1
end)

-- A job as dq_peek and dq_list answer it. A named job's answer has a 16th
-- value, 1; a job with a push try's answer has a 16th value (1 or 0), then
-- the answer's status and text.
local function peek_answer(m, j)
  rare(j)
  local due = 0
  if j[ST] == 'd' or j[ST] == 'u' then due = j[DUE] end
  if j[AS] ~= nil then
    return {m, j[KEY], j[BODY], j[ST], j[PRI], s(due), s(j[CR]), s(j[DL]), j[TTR], j[RS], j[TO],
            j[RL], j[BU], j[KI], j[MT], j[NM] and 1 or 0, j[AS], j[AN]}
  end
  return {m, j[KEY], j[BODY], j[ST], j[PRI], s(due), s(j[CR]), s(j[DL]), j[TTR], j[RS], j[TO],
          j[RL], j[BU], j[KI], j[MT], j[NM] and 1 or nil}
end

topic_function('dq_peek', 'e', function(c, args, o, n)
  local kind, m = args[o + 2], nil
  if kind == 'id' then m = (c.eok and args[o + 3] or nil)
  elseif kind == 'key' then m = redis.call('HGET', c.K, args[o + 3])
  else
    local set = c.R
    if kind == 'delayed' then set = c.D elseif kind == 'buried' then set = c.B end
    m = members(redis.call('ZRANGE', set, 0, 0))[1]
  end
  if not m then return {} end
  local j = load(c, m)
  if not j then return {} end
  return peek_answer(m, j)
end)

-- Arguments: the state ('r', 'd', 'u' or 'b'), the member the page starts
-- after ('': from the start), the limit, '1' for newest first, and for a
-- call after the first: the rank the last one stopped at, the members the
-- calls so far chose, the last members it read (each space-separated), and
-- '1' when the caller starts again no more ('2': nor reads further, so
-- more may follow whatever was kept).
-- The cursor is a member of the incarnation args[2] names: when that is
-- not the topic's, every job of this incarnation lies after an older one's
-- cursor (or before a newer one's). The set is read a thousand members at
-- a time, at most LIST_BUDGET members a call, and the page's members chosen
-- as it goes (sorted and cut back to limit + 1 whenever twice as many
-- gathered): O(n log limit) for the n jobs of the topic in that state, in
-- calls of bounded length (docs/redis-backend.md, "Browsing jobs"). A call
-- goes on right after the last member read by the call before that is
-- still in the set (members leave the front of a set between calls: a
-- reserve takes the first ready job); at the rank it stopped at when none
-- is. Answers {2, rank, size of the set, last members read, member, ...}
-- when the set goes on past what this call read: the caller calls again;
-- {3} when members chosen by earlier calls left the state meanwhile, so
-- that others cut back for them may be missing (the caller starts again);
-- else {more, job, ...}: more is 1 when more jobs follow (or, when the
-- caller starts again no more, may follow); each job as dq_peek answers it.
local LIST_BUDGET = 20000
topic_function('dq_list', 'L', function(c, args, o, n)
  local st, after, limit = args[o + 2], args[o + 3], tonumber(args[o + 4])
  local desc = args[o + 5] == '1'
  local from = n >= 5 and tonumber(args[o + 6]) or 0
  local kept = n >= 6 and args[o + 7] or ''
  local resume = n >= 7 and args[o + 8] or ''
  local last_try = n >= 8 and (args[o + 9] == '1' or args[o + 9] == '2')
  local cut_short = n >= 8 and args[o + 9] == '2'
  if c.no < 0 then return {0} end
  if after ~= '' and not c.eok then
    if (c.E < c.no) == desc then return {0} end
    after = ''
  end
  local set = c.R
  if st == 'd' then set = c.D elseif st == 'b' then set = c.B elseif st == 'u' then
    flush_reserved(c)
    set = c.U
  end
  if resume ~= '' then
    local last = {}
    for m in string.gmatch(resume, '%S+') do last[#last + 1] = m end
    for k = #last, 1, -1 do
      local r = redis.call('ZRANK', set, last[k])
      if r then
        from = r + 1
        break
      end
    end
  end
  local cmp = function(a, b) return a < b end
  if desc then cmp = function(a, b) return a > b end end
  local keep, picked, np, earlier = limit + 1, {}, 0, 0
  for m in string.gmatch(kept, '%S+') do
    np = np + 1
    picked[np] = m
  end
  earlier = np
  -- Sorted, each member once (a member may be read twice when calls go
  -- on from a moved rank), at most `keep`.
  local function trim()
    table.sort(picked, cmp)
    local w = 0
    for k = 1, np do
      if w == 0 or picked[k] ~= picked[w] then
        w = w + 1
        picked[w] = picked[k]
      end
    end
    if w > keep then w = keep end
    for k = np, w + 1, -1 do picked[k] = nil end
    np = w
  end
  local read, ended, chunk = 0, false, {}
  while true do
    chunk = redis.call('ZRANGE', set, from, from + 999)
    for i = 1, #chunk do
      local m = chunk[i]
      if m ~= SENT and (after == '' or cmp(after, m)) then
        np = np + 1
        picked[np] = m
        if np >= 2 * keep then trim() end
      end
    end
    if #chunk < 1000 then
      ended = true
      break
    end
    from = from + 1000
    read = read + 1000
    if read >= LIST_BUDGET then break end
  end
  trim()
  if not ended then
    local tail = {}
    for i = math.max(1, #chunk - 15), #chunk do tail[#tail + 1] = chunk[i] end
    local out = {2, from, redis.call('ZCARD', set), table.concat(tail, ' ')}
    for k = 1, np do out[k + 4] = picked[k] end
    return out
  end
  -- Members an earlier call chose may have left the state since.
  local w = 0
  for k = 1, np do
    if redis.call('ZSCORE', set, picked[k]) then
      w = w + 1
      picked[w] = picked[k]
    end
  end
  if w < np and earlier > 0 and not last_try then return {3} end
  local out = {0}
  if w > limit or (w < np and np > limit) or (cut_short and w > 0) then out[1] = 1 end
  for k = np, w + 1, -1 do picked[k] = nil end
  np = w
  for k = 1, math.min(np, limit) do
    local j = load(c, picked[k])
    if j then out[#out + 1] = peek_answer(picked[k], j) end
  end
  return out
end)

-- {now, field, value, ...} with the field names of docs/redis-backend.md.
-- The time left is counted from c.up (as the deadlines are): it reads
-- rounded down, as beanstalkd's truncated seconds expect (right after a
-- reserve with a TTR of 10 s, 9 s left).
topic_function('dq_stats_job', 's', function(c, args, o, n)
  local m = (c.eok and args[o + 2] or nil)
  if not m then return {} end
  local j = load(c, m)
  if not j then return {} end
  rare(j)
  return {s(c.up), 'k', j[KEY], 'b', j[BODY], 's', j[ST], 'p', j[PRI], 'due', s(j[DUE]),
          'c', s(j[CR]), 'dl', j[DL], 'ttr', j[TTR], 'rs', j[RS], 'to', j[TO], 'rl', j[RL],
          'bu', j[BU], 'ki', j[KI], 'mt', j[MT]}
end)

-- The pause's time left is counted from c.up too (dq_stats_job).
topic_function('dq_stats_topic', 'S', function(c, args, o, n)
  flush_reserved(c)
  return {count_of(c.R), redis.call('ZCOUNT', c.R, '-inf', '(1024'),
    count_of(c.U), count_of(c.D), count_of(c.B),
    s(c.seq), s(c.cdel), s(c.cpause), s(c.pm), s(c.pu), s(c.touts), s(c.up)}
end)

-- Arguments: delay_ms, and '1' when the topic must hold a job already (it
-- exists for the caller only so). 0: nothing done; 'N': see dq_put.
topic_function('dq_pause', 'z', function(c, args, o, n)
  local d = tonumber(args[o + 2])
  if n >= 2 and args[o + 3] == '1' and c.njobs <= 0 then return 0 end
  if not incarnate(c) then return 'N' end
  c.cpause = c.cpause + 1
  c.tdirty = true
  if d > 0 then
    c.pm, c.pu = d, c.up + d
  else
    c.pm, c.pu = 0, 0
    c.want, c.woke = 1, true
  end
  return 1
end)

topic_function('dq_clear', 'c', function(c, args, o, n)
  local mask, limit, n = tonumber(args[o + 2]), tonumber(args[o + 3]), 0
  local sets = {}
  if mask % 2 == 1 then sets[#sets + 1] = {c.R, 'r'} end
  if math.floor(mask / 2) % 2 == 1 then sets[#sets + 1] = {c.D, 'd'} end
  if math.floor(mask / 4) % 2 == 1 then sets[#sets + 1] = {c.B, 'b'} end
  for _, set in ipairs(sets) do
    if n >= limit then break end
    for _, m in ipairs(members(redis.call('ZRANGE', set[1], 0, limit - n - 1))) do
      local j = load(c, m)
      destroy(c, m, j and j[KEY] or '', set[2], j and j[NM])
      n = n + 1
    end
  end
  return n
end)

topic_function('dq_tick', 'i', function(c, args, o, n)
  return 0
end)

-- Arguments: a number the registry gives this topic, and how long (ms) an
-- idle topic keeps its incarnation. 1: the number may leave the registry
-- (the topic's incarnation of that number, idle that long, ends now, or it
-- has another number or none; either way floor keeps the number from being
-- taken for it again); 0: it is the number of the topic's incarnation,
-- which holds a job or a pause or has not been idle that long.
topic_function('dq_retire', 'q', function(c, args, o, n)
  local no, keep = tonumber(args[o + 2]), tonumber(args[o + 3])
  if no == c.no and (c.njobs > 0 or c.pu > 0 or c.idle == 0 or c.now - c.idle < keep) then
    return 0
  end
  c.retire = no
  return 1
end)

-- A schedule's cursor's fire time: the value is "<fire_ms> <revision>
-- <the fire time before>", or a bare "<fire_ms>" (written before firings
-- were made ahead); -1 when there is none.
local function cursor_at(v)
  if not v then return -1 end
  return tonumber(string.match(v, '^%-?%d+')) or -1
end

-- A schedule's firing (docs/schedules.md, "Exactly once"): args = the
-- schedule's name, the fire time (epoch ms), the schedule's revision, then
-- dq_put's arguments. The cursor, field <name> of the hash dq:{T}:cursors
-- in the job's topic's own slot, holds the last fire time made, the
-- revision that made it and the fire time before (cursor_at); it is
-- checked and moved in the same
-- call as the put, so two instances firing the same time put one job, and
-- a firing made before a restart is not made again. Answers '!f' when that
-- firing (or a later one) was made; else dq_put's answer, the cursor moved
-- only when the put answered a job (made, or found by its key).
topic_function('dq_fire', 'F', function(c, args, o, n)
  local ck, name, fire = c.P .. 'cursors', args[o + 2], args[o + 3]
  local was = cursor_at(redis.call('HGET', ck, name))
  if was >= tonumber(fire) then return '!f' end
  local out = codes.p(c, args, o + 3, n - 3)
  local t, b = type(out), type(out) == 'string' and string.byte(out)
  if (t == 'table' and out.err == nil) or b == 114 or b == 100 then
    redis.call('HSET', ck, name, fire .. ' ' .. args[o + 4] .. ' ' .. s(was))
  end
  return out
end)

-- Arguments: schedule, fire_ms, revision, key. Takes back a firing made
-- ahead of its time whose schedule changed since (Backend::UnfireSchedule):
-- when the cursor says that revision made that firing, its time has not
-- come and its job is still delayed, deletes the job and gives the cursor
-- back the fire time it held before. Answers 1 when it did, else 0.
topic_function('dq_unfire', 'U', function(c, args, o, n)
  local ck, name, fire, rev = c.P .. 'cursors', args[o + 2], args[o + 3], args[o + 4]
  local v = redis.call('HGET', ck, name)
  if not v or rev == '' or c.now >= tonumber(fire) then return 0 end
  local at, r, before = string.match(v, '^(%-?%d+) (%S+) (%-?%d+)$')
  if at ~= fire or r ~= rev then return 0 end
  local m = redis.call('HGET', c.K, args[o + 5])
  if not m then return 0 end
  local st, _, key, named = head_of(c, m)
  if st ~= 'd' then return 0 end
  destroy(c, m, key, st, named)
  if tonumber(before) < 0 then
    redis.call('HDEL', ck, name)
  else
    redis.call('HSET', ck, name, before)
  end
  return 1
end)

-- Several operations on one topic in one call: args = prefix, number, then for
-- each operation one argument naming it, its code (topic_function) and its
-- argument count in decimal ('p4': a put of four arguments), then its
-- arguments. Applies what is due once, runs them in order, and answers
-- {next_wake, {result, ...}}.
redis.register_function('dq_batch', function(keys, args)
  local c = context(keys, args)
  advance(c)
  -- Room for 16 results.
  local results = {nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}
  local i = 3
  while i <= #args do
    local a = args[i]
    local op, n = string.byte(a, 1, 2)
    if #a == 2 then n = n - 48 else n = tonumber(string.sub(a, 2)) end
    -- The operation's arguments start at args[i + 1], its body's args[o + 2].
    results[#results + 1] = ops[op](c, args, i - 1, n)
    i = i + 1 + n
  end
  return finish(c, results)
end)

-- An operation on the job a name names, from any topic, in one call (the
-- Youzan-style routes: docs/redis-backend.md, "Names"). keys: NAMES.
-- args: the time and prefix as a topic function's args[1], where the
-- prefix is that of the topic of the job whose id the name is in decimal
-- ('dq:' when it is none); that job's number, as args[2]; the operation
-- ('f' dq_finish, 'x' dq_delete or 'e' dq_peek, run by the operator); the
-- name; that job's member ('': the name is no id).
-- The job is the live named job that holds the name (name_holder), else
-- the job of that id if it has no name. The call then runs as one of its
-- topic (context, advance, the operation's body, finish) and answers
-- {next_wake, result, number, topic, member}; '!n' when neither job is
-- there (the job of that id missing or named: result '!n' or {}).
redis.register_function('dq_named', function(keys, args)
  if pack == nil then setup() end
  local code, name, m = args[3], args[4], args[5]
  local p, held, js = name_holder(name)
  local c
  if p then
    m = held
    c = context(nil, args, p, true)
    -- Read by name_holder already: the call keeps it (as load would).
    c.jobs[m] = decode(js)
  elseif m ~= '' then
    c = context(nil, args)
  else
    return '!n'
  end
  advance(c)
  local result
  if not p then
    -- The id's job, if it is still there and has no name.
    local j = c.eok and load(c, m)
    if not j or j[NM] then
      result = '!n'
      if code == 'e' then result = {} end
    end
  end
  if not result then
    local a = {false, false, m, '*', ''}
    if code == 'e' then a[3], a[4], a[5] = 'id', m, nil end
    result = ops[string.byte(code)](c, a, 1, code == 'e' and 2 or 3)
  end
  local out = finish(c, result)
  out[3], out[4], out[5] = c.no, string.sub(c.P, 5, -3), m
  return out
end)

-- The topic registry (keys: the counter of numbers, number -> name; their
-- own slot): a new number for the topic args[1], never given before. A
-- number goes when its topic's incarnation ends (dq_retire), and is never
-- given again: an id carries its topic's number, which names one topic
-- for good. The field ' next' (a space: no topic name has one) counts
-- numbers; a job id has 24 bits for one.
redis.register_function('dq_register', function(keys, args)
  -- args[2]: the most topics registered at once (--max-topics; 0: none)
  local max = tonumber(args[2] or '0') or 0
  if max > 0 and redis.call('HLEN', keys[2]) >= max then
    return redis.error_reply('TOPICS delayq: too many topics')
  end
  local no = redis.call('HINCRBY', keys[1], ' next', 1)
  if no >= 16777216 then return redis.error_reply('ERR delayq: topic numbers used up') end
  redis.call('HSET', keys[2], no, args[1])
  return no
end)

-- Named objects (docs/redis-backend.md, "Named objects"; keys: the kind's
-- hash, name -> value, and the versions hash, kind -> a counter; both in
-- the slot of {dq}): args[1] 's' sets args[3] to args[4], 'd' deletes
-- args[3]; args[2] is the kind's name. Answers 1, or 0 for a delete of a
-- name that has no object. The version moves with every change, so that an
-- instance polls the hash only when it moved.
redis.register_function('dq_object', function(keys, args)
  local changed
  if args[1] == 's' then
    redis.call('HSET', keys[1], args[3], args[4])
    changed = 1
  else
    changed = redis.call('HDEL', keys[1], args[3])
  end
  if changed == 1 then redis.call('HINCRBY', keys[2], args[2], 1) end
  return changed
end)

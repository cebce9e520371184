--[[
  A tool's `context.once(key, fn)` (docs/design.md §4, "once"): at most one stored result per
  chat and key, written only by the turn that holds the chat's fence.

  `begin` comes before fn runs: a stored result answers the call (fn does not run); otherwise
  a `run` record counts the attempt and fn runs. `end` comes after fn returned: it stores the
  result, unless one is already stored (that one stands). A worker that dies while fn runs
  leaves the `run` record: the next begin runs fn again, as attempt n + 1.

  KEYS[1] meta     hash: fence
  KEYS[2] once     hash: key -> record JSON
                   { s = 'run' | 'done', n = attempt, f = fence, r = runId, t = ms,
                     v = the result's JSON text (done; absent for no value),
                     e = why the result is not kept (done; fn ran all the same) }
  KEYS[3] onceAt   zset: key -> ms of its record's last write
  KEYS[4] events

  ARGV[1] 'begin' | 'end'
  ARGV[2] fence of the calling turn
  ARGV[3] max events
  ARGV[4] runId
  ARGV[5] key
  ARGV[6] keep ms: a record not written for this long is dropped (up to 100 a call), and both
          keys expire this long after their last write
  ARGV[7] max keys: a new key past it drops the keys written longest ago
  ARGV[8] end: the result's JSON text ('' = no value)
  ARGV[9] end: '' or why the result is not kept (over the size cap, not JSON)

  Returns
    begin  { 'done', record } (fn must not run) | { 'run', attempt } | { 'fenced-out', currentFence }
    end    { 'stored', record } | { 'done', record } (an earlier result stands)
           | { 'fenced-out', currentFence } (nothing written: fn ran, its result is not kept)
  A stale turn gets 'fenced-out' from either, with `fence.rejected` (op 'once'), and writes nothing.
]]
-- @include "fence"
-- @include "now"
if currentFence(KEYS[1]) ~= ARGV[2] then
  return { 'fenced-out', rejectFence(KEYS[1], KEYS[4], ARGV[3], 'once', ARGV[2], ARGV[4]) }
end
local now = nowMs()
local keepMs = tonumber(ARGV[6])
local key = ARGV[5]

local old = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now - keepMs, 'LIMIT', 0, 100)
if #old > 0 then
  redis.call('HDEL', KEYS[2], unpack(old))
  redis.call('ZREM', KEYS[3], unpack(old))
end

local raw = redis.call('HGET', KEYS[2], key)
local record = raw and cjson.decode(raw) or nil
if record and record.s == 'done' then
  if ARGV[1] == 'begin' then
    addEvent(KEYS[4], ARGV[3], 'once.reused', { key = key, runId = ARGV[4], attempt = record.n })
  end
  return { 'done', raw }
end

if not record then
  -- A new key: room for it first, the keys written longest ago go.
  local over = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[7]) + 1
  if over > 0 then
    local evicted = redis.call('ZPOPMIN', KEYS[3], over)
    for i = 1, #evicted, 2 do
      redis.call('HDEL', KEYS[2], evicted[i])
    end
  end
end

local written
if ARGV[1] == 'begin' then
  written = { s = 'run', n = (record and record.n or 0) + 1, f = ARGV[2], r = ARGV[4], t = now }
else
  written = { s = 'done', n = record and record.n or 1, f = ARGV[2], r = ARGV[4], t = now }
  if ARGV[8] ~= '' then
    written.v = ARGV[8]
  end
  if ARGV[9] ~= '' then
    written.e = ARGV[9]
  end
end
local encoded = cjson.encode(written)
redis.call('HSET', KEYS[2], key, encoded)
redis.call('ZADD', KEYS[3], now, key)
redis.call('PEXPIRE', KEYS[2], keepMs)
redis.call('PEXPIRE', KEYS[3], keepMs)
if ARGV[1] == 'begin' then
  return { 'run', written.n }
end
addEvent(KEYS[4], ARGV[3], 'once.stored',
  { key = key, runId = ARGV[4], attempt = written.n, bytes = #ARGV[8], kept = (ARGV[9] == '') })
return { 'stored', encoded }

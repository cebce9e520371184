--[[
  Append UI message chunks to a turn's reply stream, iff the caller still holds the fence
  (a fenced-out worker's chunks are dropped: the takeover owns what clients see).

  KEYS[1] meta
  KEYS[2] this turn's reply stream
  KEYS[3] events
  KEYS[4] open: the reply stream meta.uiRun names (the half reply of a turn that never
          closed it, e.g. a killed worker); otherwise KEYS[2] again

  ARGV[1] fence
  ARGV[2] runId
  ARGV[3] max length of the reply stream (MAXLEN ~)
  ARGV[4] TTL of the reply stream in ms (re-armed by every write)
  ARGV[5] max events
  ARGV[6] mode: open | append | close
  ARGV[7] event type, or '' for none
  ARGV[8] event data (JSON), or ''
  ARGV[9..] entries, as field/value pairs: c = a UI chunk (JSON), m = the message ids
          (JSON array) the reply answers from here on

  open: a half reply left open by an earlier turn gets an `abort` chunk first, then
  meta.uiRun = runId. close: meta.uiRun is cleared iff it names this run.
  Returns 'ok' | 'stop' (an operator asked this fence to stop: meta.stop) | 'fenced-out'
]]
-- @include "events"
-- @include "fence"
-- @include "reply"
if currentFence(KEYS[1]) ~= ARGV[1] then
  -- No fence.rejected event per chunk: the turn's next fenced write records it once.
  return 'fenced-out'
end
local maxLen = ARGV[3]
local ttl = ARGV[4]
if ARGV[6] == 'open' then
  local previous = redis.call('HGET', KEYS[1], 'uiRun')
  if previous and previous ~= ARGV[2] and KEYS[4] ~= KEYS[2] and redis.call('EXISTS', KEYS[4]) == 1 then
    redis.call('XADD', KEYS[4], 'MAXLEN', '~', maxLen, '*', 'c', '{"type":"abort"}')
    redis.call('PEXPIRE', KEYS[4], ttl)
  end
  redis.call('HSET', KEYS[1], 'uiRun', ARGV[2])
end
appendReply(KEYS[2], maxLen, ttl, 9, #ARGV)
if ARGV[6] == 'close' then
  closeReply(KEYS[1], ARGV[2])
end
if ARGV[7] ~= '' then
  addEventJson(KEYS[3], ARGV[5], ARGV[7], ARGV[8])
end
if stopAsked(KEYS[1], ARGV[1]) then
  return 'stop'
end
return 'ok'

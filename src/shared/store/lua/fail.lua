--[[
  A batch of messages that cannot be processed, iff fenced: consume their inbox entries,
  append them to history (marked failed by the caller), write the one notice to the outbox
  and record turn.failed, all at once. Because the inbox entries are consumed in the same
  script, a retry of the same batch finds them gone ('missing') and writes nothing: exactly
  one notice per failed batch, whatever crashes around it.

  KEYS[1] meta
  KEYS[2] hist
  KEYS[3] inbox
  KEYS[4] events
  KEYS[5] outbox
  KEYS[6] uncommitted  sends of runs that never committed: dropped like a commit drops them
                       (they are in the outbox; the failed batch they answered is settled)
  KEYS[7] usage        the chat's model usage (includes/usage.lua): the failed turn's calls were billed

  ARGV[1] fence
  ARGV[2] max events
  ARGV[3] outbox items kept beyond what delivery still needs (outbox-trim)
  ARGV[4] runId
  ARGV[5] notice text
  ARGV[6] ts (ms)
  ARGV[7] tokens added (sum of metadata.tokens of the messages)
  ARGV[8] event data JSON, merged into the turn.failed event
  ARGV[9] usage day (UTC YYYY-MM-DD; '' = no usage to record)
  ARGV[10] usage: drop days before this one on the day's first write ('' = keep all)
  ARGV[11] usage: the turn's model calls, JSON (also put on the event as `calls`)
  ARGV[12] n = number of consumed inbox stream ids
  ARGV[13 .. 12+n]   consumed inbox stream ids
  ARGV[13+n .. #ARGV] message JSONs, in history order

  Returns { 'ok', outboxId, routed } | { 'fenced-out', currentFence }
        | { 'missing', streamId } (an inbox entry was already consumed: nothing written)
]]
-- @include "fence"
-- @include "consume"
-- @include "outbox-trim"
-- @include "usage"
if currentFence(KEYS[1]) ~= ARGV[1] then
  return { 'fenced-out', rejectFence(KEYS[1], KEYS[4], ARGV[2], 'fail', ARGV[1], ARGV[4]) }
end

local n = tonumber(ARGV[12])
local missing = firstMissing(KEYS[3], 13, n)
if missing then
  return { 'missing', missing }
end
consumeIntoHistory(KEYS[1], KEYS[3], KEYS[2], KEYS[6], 13, n, ARGV[7])

local id = redis.call('XADD', KEYS[5], '*',
  'runId', ARGV[4], 'text', ARGV[5], 'ts', ARGV[6], 'notice', 'failure')
trimOutbox(KEYS[1], KEYS[5], ARGV[3])
local data = cjson.decode(ARGV[8])
data.runId = ARGV[4]
data.fence = ARGV[1]
data.consumed = n
data.notice = id
local calls = recordUsage(KEYS[7], ARGV[9], ARGV[10], ARGV[11])
if #calls > 0 then
  data.calls = calls
end
addEvent(KEYS[4], ARGV[2], 'turn.failed', data)
return { 'ok', id, redis.call('HEXISTS', KEYS[1], 'route') }

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

  ARGV[1] fence
  ARGV[2] max events
  ARGV[3] outbox items kept beyond what delivery still needs (outbox-trim)
  ARGV[4] runId
  ARGV[5] notice text
  ARGV[6] ts (ms)
  ARGV[7] tokens added (sum of metadata.tokens of the messages)
  ARGV[8] event data JSON, merged into the turn.failed event
  ARGV[9] n = number of consumed inbox stream ids
  ARGV[10 .. 9+n]   consumed inbox stream ids
  ARGV[10+n .. #ARGV] message JSONs, in history order

  Returns { 'ok', outboxId, routed } | { 'fenced-out', currentFence }
        | { 'missing', streamId } (an inbox entry was already consumed: nothing written)
]]
-- @include "fence"
-- @include "consume"
-- @include "outbox-trim"
if currentFence(KEYS[1]) ~= ARGV[1] then
  return { 'fenced-out', rejectFence(KEYS[1], KEYS[4], ARGV[2], 'fail', ARGV[1], ARGV[4]) }
end

local n = tonumber(ARGV[9])
local missing = firstMissing(KEYS[3], 10, n)
if missing then
  return { 'missing', missing }
end
consumeIntoHistory(KEYS[1], KEYS[3], KEYS[2], KEYS[6], 10, n, ARGV[7])

local id = redis.call('XADD', KEYS[5], '*',
  'runId', ARGV[4], 'text', ARGV[5], 'ts', ARGV[6], 'notice', 'failure')
trimOutbox(KEYS[1], KEYS[5], ARGV[3])
local data = cjson.decode(ARGV[8])
data.runId = ARGV[4]
data.fence = ARGV[1]
data.consumed = n
data.notice = id
addEvent(KEYS[4], ARGV[2], 'turn.failed', data)
return { 'ok', id, redis.call('HEXISTS', KEYS[1], 'route') }

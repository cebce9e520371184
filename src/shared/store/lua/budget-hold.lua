--[[
  The daily token budget (CHAT_DAILY_TOKEN_BUDGET), checked before a turn calls the model, iff
  fenced. Under the budget: nothing is written. Over it: the turn's messages go into history
  as they are (the model reads them on the chat's next turn, the next day), its inbox entries
  are consumed, and on the day's first hold the one notice goes to the outbox; a
  `budget.exceeded` event records it. Consuming the entries in the same script makes a retry
  find them gone ('missing') and write nothing: one notice per chat per day.

  KEYS[1] meta
  KEYS[2] hist
  KEYS[3] inbox
  KEYS[4] events
  KEYS[5] outbox
  KEYS[6] uncommitted  sends of runs that never committed: in the history now, like a commit
  KEYS[7] usage        `<day>|total` (what the budget counts) and `<day>|notice`

  ARGV[1] fence
  ARGV[2] max events
  ARGV[3] outbox items kept beyond what delivery still needs (outbox-trim)
  ARGV[4] runId
  ARGV[5] notice text
  ARGV[6] ts (ms)
  ARGV[7] day (UTC YYYY-MM-DD)
  ARGV[8] the budget: tokens per day
  ARGV[9] tokens added to history (sum of metadata.tokens of the messages)
  ARGV[10] n = number of consumed inbox stream ids
  ARGV[11 .. 10+n]   consumed inbox stream ids
  ARGV[11+n .. #ARGV] message JSONs, in history order

  Returns { 'under', used } | { 'held', noticeId ('' when today's notice was already sent),
  routed (1|0), used } | { 'fenced-out', currentFence } | { 'missing', streamId }
]]
-- @include "fence"
-- @include "consume"
-- @include "outbox-trim"
if currentFence(KEYS[1]) ~= ARGV[1] then
  return { 'fenced-out', rejectFence(KEYS[1], KEYS[4], ARGV[2], 'budget-hold', ARGV[1], ARGV[4]) }
end

local used = tonumber(redis.call('HGET', KEYS[7], ARGV[7] .. '|total') or '0')
if used < tonumber(ARGV[8]) then
  return { 'under', used }
end

local n = tonumber(ARGV[10])
local missing = firstMissing(KEYS[3], 11, n)
if missing then
  return { 'missing', missing }
end
consumeIntoHistory(KEYS[1], KEYS[3], KEYS[2], KEYS[6], 11, n, ARGV[9])

local id = ''
if redis.call('HSETNX', KEYS[7], ARGV[7] .. '|notice', 1) == 1 then
  id = redis.call('XADD', KEYS[5], '*',
    'runId', ARGV[4], 'text', ARGV[5], 'ts', ARGV[6], 'notice', 'budget')
  trimOutbox(KEYS[1], KEYS[5], ARGV[3])
end
addEvent(KEYS[4], ARGV[2], 'budget.exceeded', {
  runId = ARGV[4], fence = ARGV[1], consumed = n, day = ARGV[7], used = used,
  budget = tonumber(ARGV[8]), notice = id })
local routed = 0
if id ~= '' then
  routed = redis.call('HEXISTS', KEYS[1], 'route')
end
return { 'held', id, routed, used }

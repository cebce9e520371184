--[[
  Release the turn lease, iff fenced, and say whether the chat needs another turn.

  KEYS[1] meta
  KEYS[2] inbox
  KEYS[3] events
  KEYS[4] usage   the chat's model usage (includes/usage.lua)
  KEYS[5] watch   string: someone can watch the chat's replies (read only)

  ARGV[1] fence
  ARGV[2] owner token
  ARGV[3] max events
  ARGV[4] runId
  ARGV[5] usage day (UTC YYYY-MM-DD; '' = no usage to record)
  ARGV[6] usage: drop days before this one on the day's first write ('' = keep all)
  ARGV[7] usage: model calls of the turn that no commit or fail wrote (a turn that failed
          on the model or was stopped still paid for the calls before); recorded, with a
          `turn.usage` event, only by the finish that releases the lease: once, and never
          by a turn that was fenced out

  A release that is not a commit's, while the chat is watched, adds `turn.released`: a reader
  that follows an unstreamed turn (whose reply would have come with its commit) stops waiting.

  Returns { 'ok', pending } | { 'fenced-out', pending }
    ok also when this fence's lease is already released (by commit.lua, or a finish resent
    after a reconnect): no owner and the fence unchanged means no turn took the chat since.
]]
-- @include "fence"
-- @include "lease"
-- @include "usage"
local pending = redis.call('XLEN', KEYS[2])
if currentFence(KEYS[1]) == ARGV[1] and not redis.call('HGET', KEYS[1], 'owner') then
  return { 'ok', pending }
end
if currentFence(KEYS[1]) ~= ARGV[1] or not releaseLease(KEYS[1], ARGV[2]) then
  rejectFence(KEYS[1], KEYS[3], ARGV[3], 'finish', ARGV[1], ARGV[4])
  return { 'fenced-out', pending }
end
local calls = recordUsage(KEYS[4], ARGV[5] or '', ARGV[6] or '', ARGV[7] or '[]')
if #calls > 0 then
  addEvent(KEYS[3], ARGV[3], 'turn.usage', { runId = ARGV[4], fence = ARGV[1], calls = calls })
end
if redis.call('EXISTS', KEYS[5]) == 1 then
  addEvent(KEYS[3], ARGV[3], 'turn.released', { runId = ARGV[4], fence = ARGV[1] })
end
return { 'ok', pending }

--[[
  Release the turn lease, iff fenced, and say whether the chat needs another turn.

  KEYS[1] meta
  KEYS[2] inbox
  KEYS[3] events

  ARGV[1] fence
  ARGV[2] owner token
  ARGV[3] max events
  ARGV[4] runId

  Returns { 'ok', pending } | { 'fenced-out', pending }
    ok also when this fence's lease is already released (by commit.lua, or a finish resent
    after a reconnect): no owner and the fence unchanged means no turn took the chat since.
]]
-- @include "fence"
-- @include "lease"
local pending = redis.call('XLEN', KEYS[2])
if currentFence(KEYS[1]) == ARGV[1] and not redis.call('HGET', KEYS[1], 'owner') then
  return { 'ok', pending }
end
if currentFence(KEYS[1]) ~= ARGV[1] or not releaseLease(KEYS[1], ARGV[2]) then
  rejectFence(KEYS[1], KEYS[3], ARGV[3], 'finish', ARGV[1], ARGV[4])
  return { 'fenced-out', pending }
end
return { 'ok', pending }

--[[
  Extend the turn lease, iff the caller still holds the fence.

  KEYS[1] meta
  KEYS[2] events

  ARGV[1] owner token
  ARGV[2] fence
  ARGV[3] lease in ms
  ARGV[4] max events
  ARGV[5] runId (for the event)

  Returns 1 | 0 (lease lost; a fence.rejected event is recorded)
]]
-- @include "now"
-- @include "fence"
if currentFence(KEYS[1]) ~= ARGV[2] or redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
  rejectFence(KEYS[1], KEYS[2], ARGV[4], 'renew', ARGV[2], ARGV[5])
  return 0
end
redis.call('HSET', KEYS[1], 'leaseUntil', nowMs() + tonumber(ARGV[3]))
return 1

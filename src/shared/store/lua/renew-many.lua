--[[
  Extend the turn leases of many chats in one call (a worker's renewals due at one check),
  each iff its caller still holds that chat's fence: renew.lua for each lease. Not on Redis
  Cluster, where the chats' keys are in different slots: there each lease sends renew.lua.

  KEYS[2i-1] meta of lease i
  KEYS[2i]   events of lease i

  ARGV[1] max events
  ARGV[4i-2 .. 4i+1] lease i: owner token, fence, lease in ms, runId (for the event)

  Returns { 1 | 0 per lease, in order } (0: lease lost; a fence.rejected event is recorded)
]]
-- @include "now"
-- @include "fence"
local now = nowMs()
local renewed = {}
for i = 1, #KEYS / 2 do
  local meta, events = KEYS[2 * i - 1], KEYS[2 * i]
  local owner, fence, leaseMs, runId = ARGV[4 * i - 2], ARGV[4 * i - 1], ARGV[4 * i], ARGV[4 * i + 1]
  if currentFence(meta) ~= fence or redis.call('HGET', meta, 'owner') ~= owner then
    rejectFence(meta, events, ARGV[1], 'renew', fence, runId)
    renewed[i] = 0
  else
    redis.call('HSET', meta, 'leaseUntil', now + tonumber(leaseMs))
    renewed[i] = 1
  end
end
return renewed

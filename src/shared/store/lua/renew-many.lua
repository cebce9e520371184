--[[
  Extend the turn leases of many chats in one call (a worker's renewals due at one check),
  each iff its caller still holds that chat's fence: what renew.lua does (renewLease), for
  each lease. Not on Redis Cluster, where the chats' keys are in different slots: there each
  lease sends renew.lua.

  KEYS[2i-1] meta of lease i
  KEYS[2i]   events of lease i

  ARGV[1] max events
  ARGV[4i-2 .. 4i+1] lease i: owner token, fence, lease in ms, runId (for the event)

  Returns { 1 | 0 per lease, in order } (0: lease lost; a fence.rejected event is recorded)
]]
-- @include "now"
-- @include "fence"
-- @include "lease"
local now = nowMs()
local renewed = {}
for i = 1, #KEYS / 2 do
  renewed[i] = renewLease(KEYS[2 * i - 1], KEYS[2 * i], ARGV[1],
    ARGV[4 * i - 2], ARGV[4 * i - 1], ARGV[4 * i], ARGV[4 * i + 1], now)
end
return renewed

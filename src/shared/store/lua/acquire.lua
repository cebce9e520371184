--[[
  Take the chat's turn lease and a new fence.

  KEYS[1] meta    hash: fence, owner, leaseUntil, ...
  KEYS[2] events

  ARGV[1] owner token (unique per attempt)
  ARGV[2] lease in ms
  ARGV[3] max events

  Returns { 'ok', fence } | { 'busy', ttlMs }
]]
-- @include "now"
-- @include "events"
local now = nowMs()
local owner = redis.call('HGET', KEYS[1], 'owner')
local leaseUntil = tonumber(redis.call('HGET', KEYS[1], 'leaseUntil') or '0')

if owner and owner ~= ARGV[1] and leaseUntil > now then
  return { 'busy', leaseUntil - now }
end

local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'leaseUntil', now + tonumber(ARGV[2]))
if owner and owner ~= ARGV[1] then
  -- The previous holder's lease ran out without a finish: it stalled or died. expiredMs
  -- (how long the lease had been expired) tells a slow retry from a slow lease.
  addEvent(KEYS[2], ARGV[3], 'lease.takeover',
    { previousOwner = owner, owner = ARGV[1], fence = fence, expiredMs = now - leaseUntil })
end
return { 'ok', fence }

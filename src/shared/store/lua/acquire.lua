--[[
  Take the chat's turn lease and a new fence.

  KEYS[1] meta    hash: fence, owner, leaseUntil, ...
  KEYS[2] events
  KEYS[3] uncommitted  list: sends of turns that never committed (written by outbox.lua)

  ARGV[1] owner token (unique per attempt)
  ARGV[2] lease in ms
  ARGV[3] max events

  Returns { 'ok', fence, send JSON ... } | { 'busy', ttlMs }
    the sends are what earlier runs of this chat said without committing: the new turn must
    know them (they reached the person) so it continues instead of answering again
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
local result = redis.call('LRANGE', KEYS[3], 0, -1)
table.insert(result, 1, fence)
table.insert(result, 1, 'ok')
return result

--[[
  What the sweeper needs to know about one chat, read at one instant (read-only).

  KEYS[1] meta    hash: owner, leaseUntil, ...
  KEYS[2] inbox   stream of accepted, not yet consumed messages

  (no ARGV)

  Returns { lease, pending, ms }
    lease    'free'    no owner (never taken, or released by finish)
             'live'    an owner whose lease runs past now; ms = time left
             'expired' an owner whose lease ran out without a finish; ms = how long ago
    pending  number of inbox entries
  Leases are judged by Redis's clock (TIME), never a worker's.
]]
-- @include "now"
local pending = redis.call('XLEN', KEYS[2])
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then
  return { 'free', pending, 0 }
end
local now = nowMs()
local leaseUntil = tonumber(redis.call('HGET', KEYS[1], 'leaseUntil') or '0')
if leaseUntil > now then
  return { 'live', pending, leaseUntil - now }
end
return { 'expired', pending, now - leaseUntil }

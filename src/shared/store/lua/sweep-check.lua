--[[
  What the sweeper needs to know about one chat, read at one instant (read-only).

  KEYS[1] meta    hash: owner, leaseUntil, route, deliveredTo, ...
  KEYS[2] inbox   stream of accepted, not yet consumed messages
  KEYS[3] outbox  stream of replies
  KEYS[4] relay   stream of contact sends not yet written to their target chat

  (no ARGV)

  Returns { lease, pending, ms, undelivered, relays }
    lease    'free'    no owner (never taken, or released by finish)
             'live'    an owner whose lease runs past now; ms = time left
             'expired' an owner whose lease ran out without a finish; ms = how long ago
    pending  number of inbox entries
    undelivered  1 when the chat has a reply route and outbox items after its delivery cursor
    relays   contact sends a crash left half done
  Leases are judged by Redis's clock (TIME), never a worker's.
]]
-- @include "now"
local pending = redis.call('XLEN', KEYS[2])
local undelivered = 0
if redis.call('HEXISTS', KEYS[1], 'route') == 1 then
  local last = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)[1]
  if last and last[1] ~= (redis.call('HGET', KEYS[1], 'deliveredTo') or '0-0') then
    undelivered = 1
  end
end
local relays = redis.call('XLEN', KEYS[4])
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then
  return { 'free', pending, 0, undelivered, relays }
end
local now = nowMs()
local leaseUntil = tonumber(redis.call('HGET', KEYS[1], 'leaseUntil') or '0')
if leaseUntil > now then
  return { 'live', pending, leaseUntil - now, undelivered, relays }
end
return { 'expired', pending, now - leaseUntil, undelivered, relays }

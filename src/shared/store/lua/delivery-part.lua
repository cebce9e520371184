--[[
  Record that one more part of a split outbox item went out (its per-part cursor), by
  compare-and-set, iff we hold the delivery lease. The item's last part moves the cursor
  instead (delivery-advance), which clears this record.

  KEYS[1] meta    hash: deliveredTo, dOwner, dLeaseUntil, dTry, dPart ('<item id> <sent> <parts> <format>')

  ARGV[1] owner token
  ARGV[2] expected cursor (the item is the next one after it)
  ARGV[3] item id
  ARGV[4] parts the record says went out, as the caller's claim read it or its last write set it
  ARGV[5] parts that went out now (one more; or 1, when the item is sent again from its first
          part because its split changed)
  ARGV[6] parts the item has in all
  ARGV[7] the split's format id (the rest is sent from the same split after a crash)
  ARGV[8] lease in ms (renewed)

  Returns { 'ok' } | { 'lost', currentOwner } | { 'moved', currentCursor, currentPart }
  A stalled duplicate job cannot record a part twice or out of order: the owner check stops
  it once another job took the lease, and the compare-and-set on the cursor and the part
  count whatever happened in between. A recorded part resets the attempt count (dTry): the
  next part gets its own attempts.
]]
-- @include "now"
local owner = redis.call('HGET', KEYS[1], 'dOwner')
if owner ~= ARGV[1] then
  return { 'lost', owner or '' }
end
local cursor = redis.call('HGET', KEYS[1], 'deliveredTo') or '0-0'
local part = redis.call('HGET', KEYS[1], 'dPart') or ''
local sent = 0
local item, count = string.match(part, '^(%S+) (%d+) ')
if item == ARGV[3] then
  sent = tonumber(count)
end
if cursor ~= ARGV[2] or sent ~= tonumber(ARGV[4]) then
  return { 'moved', cursor, part }
end
redis.call('HSET', KEYS[1],
  'dPart', ARGV[3] .. ' ' .. ARGV[5] .. ' ' .. ARGV[6] .. ' ' .. ARGV[7],
  'dLeaseUntil', nowMs() + tonumber(ARGV[8]))
redis.call('HDEL', KEYS[1], 'dTry')
return { 'ok' }

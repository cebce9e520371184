--[[
  Move the chat's delivery cursor past one item, by compare-and-set, iff we hold the lease.

  KEYS[1] meta    hash: deliveredTo, dOwner, dLeaseUntil, dTry
  KEYS[2] events
  KEYS[3] posts   hash (PLATFORM_STREAMING only): its waiting post is cleared with the move,
                  and the item's reply stream part is recorded as done (doneRun, done)

  ARGV[1] owner token
  ARGV[2] expected cursor (what the caller's claim read, or its last advance wrote)
  ARGV[3] new cursor (the item's outbox id)
  ARGV[4] lease in ms (renewed)
  ARGV[5] max events
  ARGV[6] '' when the item was accepted, else the JSON of its `delivery.failed` event
  ARGV[7] the item's runId (with KEYS[3])
  ARGV[8] the item's reply stream part ('' none): its text is delivered, so it is not streamed
          into a post of its own when its turn writes the part's end after the item

  Returns { 'ok' } | { 'lost', currentOwner } | { 'moved', currentCursor }
  A stalled duplicate job can neither move the cursor backwards nor skip an item: the
  owner check stops it once another job took the lease, and the compare-and-set stops it
  whatever happened in between. The waiting post goes in the same step as the move: a post
  left behind a moved cursor would be taken for the next item's and edited into it.
]]
-- @include "now"
-- @include "events"
local owner = redis.call('HGET', KEYS[1], 'dOwner')
if owner ~= ARGV[1] then
  return { 'lost', owner or '' }
end
local cursor = redis.call('HGET', KEYS[1], 'deliveredTo') or '0-0'
if cursor ~= ARGV[2] then
  return { 'moved', cursor }
end
redis.call('HSET', KEYS[1], 'deliveredTo', ARGV[3], 'dLeaseUntil', nowMs() + tonumber(ARGV[4]))
redis.call('HDEL', KEYS[1], 'dTry')
if KEYS[3] then
  redis.call('HDEL', KEYS[3], 'part', 'msg', 'text', 'end')
  if ARGV[8] ~= '' then
    redis.call('HSET', KEYS[3], 'doneRun', ARGV[7], 'done', ARGV[8])
  end
end
if ARGV[6] ~= '' then
  addEvent(KEYS[2], ARGV[5], 'delivery.failed', cjson.decode(ARGV[6]))
end
return { 'ok' }

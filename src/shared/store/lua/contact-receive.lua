--[[
  Write a contact send into the target chat's outbox, once per send id.

  KEYS[1] meta     (target chat) has a reply route?
  KEYS[2] outbox   (target chat)
  KEYS[3] events   (target chat)
  KEYS[4] relayed  (target chat) zset send id -> time (idempotency window)

  ARGV[1] send id
  ARGV[2] sender chatKey
  ARGV[3] runId of the sending turn
  ARGV[4] text
  ARGV[5] ts (ms)
  ARGV[6] outbox items kept beyond what delivery still needs (outbox-trim)
  ARGV[7] max events
  ARGV[8] idempotency window in ms

  Returns { 'ok', outboxId, routed } | { 'duplicate', '', routed }
    routed  1 when the target chat has a reply route (the caller triggers its delivery job)
]]
-- @include "now"
-- @include "events"
-- @include "outbox-trim"
local now = nowMs()
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', '(' .. (now - tonumber(ARGV[8])))
local routed = redis.call('HEXISTS', KEYS[1], 'route')
if redis.call('ZSCORE', KEYS[4], ARGV[1]) then
  return { 'duplicate', '', routed }
end
local id = redis.call('XADD', KEYS[2], '*',
  'runId', ARGV[3], 'text', ARGV[4], 'ts', ARGV[5], 'from', ARGV[2])
trimOutbox(KEYS[1], KEYS[2], ARGV[6])
redis.call('ZADD', KEYS[4], now, ARGV[1])
-- The ids live no longer than the window: an idle chat's set expires whole.
redis.call('PEXPIRE', KEYS[4], ARGV[8])
addEvent(KEYS[3], ARGV[7], 'contact.received', { sendId = ARGV[1], from = ARGV[2], itemId = id })
return { 'ok', id, routed }

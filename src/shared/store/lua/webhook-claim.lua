--[[
  Claim a signed generic webhook's id for a chat, once per source (Standard Webhooks ids are
  unique per source): the first chat to claim it holds it for the idempotency window.

  KEYS[1] claim   string: the chatKey holding the id (webhookIdKey)

  ARGV[1] chatKey
  ARGV[2] idempotency window in ms

  Returns { 'new' } when this call claimed it, { 'same' } when the chat already holds it (a
  redelivery, or a retry after a failed ingest), { 'other', chatKey } when another chat does.
]]
local holder = redis.call('GET', KEYS[1])
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
  return { 'new' }
end
if holder == ARGV[1] then
  return { 'same' }
end
return { 'other', holder }

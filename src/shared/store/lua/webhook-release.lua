--[[
  Give back a webhook id claim whose message was not stored (the ingest refused it or failed),
  so the sender's retry, for any chat, is judged afresh and a refusal leaves nothing behind.

  KEYS[1] claim   string: the chatKey holding the id (webhookIdKey)

  ARGV[1] chatKey that claimed it

  Returns 1 when the claim was deleted, 0 when another chat holds it (or nobody).
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0

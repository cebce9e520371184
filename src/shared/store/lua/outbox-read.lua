--[[
  A page of the outbox with each item's part count (read-only): the items and how many
  messages each went out as, at one instant.

  KEYS[1] outbox  stream of replies
  KEYS[2] parts   hash: outbox item id -> messages it went out as (2 or more; delivery-advance)

  ARGV[1] XRANGE start ('-' or '(<id>': after the caller's cursor)
  ARGV[2] max items

  Returns { entries, counts }: counts[i] is entries[i]'s part count, or nil when it has none
]]
local entries = redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[2])
if #entries == 0 or redis.call('EXISTS', KEYS[2]) == 0 then
  return { entries, {} }
end
local ids = {}
for i, entry in ipairs(entries) do
  ids[i] = entry[1]
end
return { entries, redis.call('HMGET', KEYS[2], unpack(ids)) }

--[[
  Record what delivery streamed to a platform (PLATFORM_STREAMING), iff we hold the lease.

  KEYS[1] meta    hash: dOwner, dLeaseUntil
  KEYS[2] posts   hash: run, after (the reply stream followed, read up to there); while a
                  streamed post waits for its outbox item: part, msg, text, end

  ARGV[1] owner token
  ARGV[2] lease in ms (renewed)
  ARGV[3] '1': first drop the waiting post (removed from the platform, or replaced), else ''
  ARGV[4..] field, value pairs to set (none: the lease is only renewed)

  Returns { 'ok' } | { 'lost', currentOwner }
]]
-- @include "now"
local owner = redis.call('HGET', KEYS[1], 'dOwner')
if owner ~= ARGV[1] or tonumber(redis.call('HGET', KEYS[1], 'dLeaseUntil') or '0') <= nowMs() then
  return { 'lost', owner or '' }
end
redis.call('HSET', KEYS[1], 'dLeaseUntil', nowMs() + tonumber(ARGV[2]))
if ARGV[3] == '1' then
  redis.call('HDEL', KEYS[2], 'part', 'msg', 'text', 'end')
end
if #ARGV > 3 then
  redis.call('HSET', KEYS[2], unpack(ARGV, 4))
end
return { 'ok' }

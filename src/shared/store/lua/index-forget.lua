--[[
  Remove a deleted chat from the activity index, unless it was touched since it was read.

  KEYS[1] chats index  zset chatKey -> last activity (ms)

  ARGV[1] chatKey
  ARGV[2] the score read before the chat was deleted

  Returns 1 when removed, 0 when absent or touched since (a new message: the chat lives on).
]]
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) <= tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0

--[[
  Take a platform's fleet-wide poller lease when nobody holds it.

  KEYS[1] lease (string `<fence>:<holder>`, with a TTL)
  KEYS[2] fence counter

  ARGV[1] holder id
  ARGV[2] lease in ms

  Returns the new lease value (`<fence>:<holder>`), or false while another holder's lease lives.
]]
if redis.call('EXISTS', KEYS[1]) == 1 then
  return false
end
local fence = redis.call('INCR', KEYS[2])
local value = fence .. ':' .. ARGV[1]
redis.call('SET', KEYS[1], value, 'PX', tonumber(ARGV[2]))
return value

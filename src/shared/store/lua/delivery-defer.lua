--[[
  Count one failed attempt at the item after the cursor and hand the chat back: the delivery
  job retries later (a delayed job, never a sleep holding a worker slot).

  KEYS[1] meta    hash: dOwner, dLeaseUntil, dTry ('<item id> <tries>')

  ARGV[1] owner token
  ARGV[2] item id

  Returns { 'ok', tries } | { 'lost' }
]]
if redis.call('HGET', KEYS[1], 'dOwner') ~= ARGV[1] then
  return { 'lost' }
end
local tries = 1
local try = redis.call('HGET', KEYS[1], 'dTry')
if try then
  local sep = string.find(try, ' ', 1, true)
  if sep and string.sub(try, 1, sep - 1) == ARGV[2] then
    tries = (tonumber(string.sub(try, sep + 1)) or 0) + 1
  end
end
redis.call('HSET', KEYS[1], 'dTry', ARGV[2] .. ' ' .. tries)
redis.call('HDEL', KEYS[1], 'dOwner', 'dLeaseUntil')
return { 'ok', tries }

--[[
  Release the chat's delivery lease iff we hold it.

  KEYS[1] meta

  ARGV[1] owner token

  Returns 1 when released, 0 when someone else holds it (or nobody).
]]
if redis.call('HGET', KEYS[1], 'dOwner') ~= ARGV[1] then
  return 0
end
redis.call('HDEL', KEYS[1], 'dOwner', 'dLeaseUntil')
return 1

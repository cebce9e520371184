--[[
  Extend a poller lease, iff the caller still holds it (same fence and holder), or give it
  up (ARGV[2] = 0).

  KEYS[1] lease

  ARGV[1] the lease value the caller got from poller-acquire
  ARGV[2] lease in ms; 0 releases the lease

  Returns 1 (extended / released) | 0 (lost: expired, or another holder with a newer fence)
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if tonumber(ARGV[2]) == 0 then
  redis.call('DEL', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
end
return 1

-- Release the turn lease iff `owner` holds it; returns whether it did. Shared by finish.lua
-- and commit.lua (a commit that ends its turn releases in the same script).
local function releaseLease(metaKey, owner)
  if redis.call('HGET', metaKey, 'owner') ~= owner then
    return false
  end
  redis.call('HDEL', metaKey, 'owner', 'leaseUntil')
  return true
end

-- Extend the turn lease to `now` + `leaseMs` iff `owner` holds it under `fence`; else record
-- fence.rejected. Returns 1 | 0. Shared by renew.lua and renew-many.lua (needs "fence").
local function renewLease(metaKey, eventsKey, maxEvents, owner, fence, leaseMs, runId, now)
  if currentFence(metaKey) ~= fence or redis.call('HGET', metaKey, 'owner') ~= owner then
    rejectFence(metaKey, eventsKey, maxEvents, 'renew', fence, runId)
    return 0
  end
  redis.call('HSET', metaKey, 'leaseUntil', now + tonumber(leaseMs))
  return 1
end

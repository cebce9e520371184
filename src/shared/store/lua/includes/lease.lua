-- Release the turn lease iff `owner` holds it; returns whether it did. Shared by finish.lua
-- and commit.lua (a commit that ends its turn releases in the same script).
local function releaseLease(metaKey, owner)
  if redis.call('HGET', metaKey, 'owner') ~= owner then
    return false
  end
  redis.call('HDEL', metaKey, 'owner', 'leaseUntil')
  return true
end

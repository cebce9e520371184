-- The first of the inbox entries ARGV[from .. from+n-1] that no longer exists, or nil.
local function firstMissing(inboxKey, from, n)
  for i = from, from + n - 1 do
    if #redis.call('XRANGE', inboxKey, ARGV[i], ARGV[i]) == 0 then
      return ARGV[i]
    end
  end
  return nil
end

-- Settle the batch: delete those entries, append ARGV[from+n .. #ARGV] to history, drop the
-- chat's uncommitted sends (the settled batch covers them) and add `tokens` to the chat's count.
-- Returns the history length and the token total.
local function consumeIntoHistory(metaKey, inboxKey, histKey, uncommittedKey, from, n, tokens)
  if n > 0 then
    redis.call('XDEL', inboxKey, unpack(ARGV, from, from + n - 1))
  end
  local histLen = redis.call('LLEN', histKey)
  for i = from + n, #ARGV do
    histLen = redis.call('RPUSH', histKey, ARGV[i])
  end
  redis.call('DEL', uncommittedKey)
  return histLen, redis.call('HINCRBY', metaKey, 'tokens', tonumber(tokens))
end

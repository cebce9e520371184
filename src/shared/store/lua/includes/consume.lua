-- The first of the inbox entries ARGV[from .. from+n-1] that no longer exists, or nil.
local function firstMissing(inboxKey, from, n)
  for i = from, from + n - 1 do
    if #redis.call('XRANGE', inboxKey, ARGV[i], ARGV[i]) == 0 then
      return ARGV[i]
    end
  end
  return nil
end

-- Delete those entries and append ARGV[from+n .. #ARGV] to history; returns its length.
local function consumeIntoHistory(inboxKey, histKey, from, n)
  if n > 0 then
    redis.call('XDEL', inboxKey, unpack(ARGV, from, from + n - 1))
  end
  local histLen = redis.call('LLEN', histKey)
  for i = from + n, #ARGV do
    histLen = redis.call('RPUSH', histKey, ARGV[i])
  end
  return histLen
end

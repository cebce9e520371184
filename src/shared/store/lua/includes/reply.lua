-- A turn's reply stream: append entries given as ARGV field/value pairs from `first` to
-- `last`, each MAXLEN ~ `maxLen`, then re-arm its TTL. Used by reply-write.lua and by
-- commit.lua, which closes a reply with its turn's commit.
local function appendReply(streamKey, maxLen, ttl, first, last)
  for i = first, last, 2 do
    redis.call('XADD', streamKey, 'MAXLEN', '~', maxLen, '*', ARGV[i], ARGV[i + 1])
  end
  redis.call('PEXPIRE', streamKey, ttl)
end

-- The reply meta.uiRun names is closed: clear it iff it is `runId`'s.
local function closeReply(metaKey, runId)
  if redis.call('HGET', metaKey, 'uiRun') == runId then
    redis.call('HDEL', metaKey, 'uiRun')
  end
end

-- An operator or a person asked the turn holding `fence` to stop (reply-stop.lua sets meta.stop).
local function stopAsked(metaKey, fence)
  return redis.call('HGET', metaKey, 'stop') == fence
end

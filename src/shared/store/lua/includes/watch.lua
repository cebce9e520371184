-- Mark the chat's replies as watched (its `watch` key) for `ttlMs`, unless `ttlMs` is '' or
-- absent (the caller leaves the key as it is). Shared by ingest.lua, approval-answer.lua and
-- ui-watch.lua: a turn that starts while the key exists streams its reply (acquire.lua), and
-- an unstreamed turn's commit writes its whole reply when it exists (commit.lua).
local function markWatched(watchKey, ttlMs)
  if ttlMs ~= nil and ttlMs ~= '' then
    redis.call('SET', watchKey, '1', 'PX', ttlMs)
  end
end

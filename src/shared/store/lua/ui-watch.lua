--[[
  A reader opens on the chat's replies (GET /v1/ui/:id/stream): which reply to follow, and,
  while a turn holds the chat, the watch key set so that turn's reply reaches the reader.

  KEYS[1] meta    hash: uiRun, owner (`<worker>:<runId>`), leaseUntil
  KEYS[2] watch   string: someone can watch the chat's replies

  ARGV[1] watch TTL in ms (the reader refreshes it while open)

  Returns { runId, streamed (1|0) } | {} (no turn holds the chat: nothing to follow, nothing set)
    streamed 1: the open reply meta.uiRun names, its turn still holding the lease (replayed
      from its first chunk); 0: a turn that does not stream holds the chat. With the watch
      key now set, its commit writes the whole reply to that run's stream (commit.lua), and a
      release without a commit says `turn.released`.
]]
-- @include "now"
-- @include "owner"
-- @include "watch"
local uiRun, owner, leaseUntil = unpack(redis.call('HMGET', KEYS[1], 'uiRun', 'owner', 'leaseUntil'))
if not owner then
  return {}
end
if uiRun and ownerIsRun(owner, uiRun) then
  markWatched(KEYS[2], ARGV[1])
  return { uiRun, 1 }
end
if tonumber(leaseUntil or '0') <= nowMs() then
  return {}
end
local runId = string.match(owner, ':([^:]+)$')
if not runId then
  return {}
end
markWatched(KEYS[2], ARGV[1])
return { runId, 0 }

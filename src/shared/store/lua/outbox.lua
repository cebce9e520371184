--[[
  Record one user-visible reply, iff fenced.

  KEYS[1] meta
  KEYS[2] outbox
  KEYS[3] events

  ARGV[1] fence
  ARGV[2] max events
  ARGV[3] outbox max length (approximate trim)
  ARGV[4] runId
  ARGV[5] text
  ARGV[6] ts (ms)

  Returns { 'ok', streamId, routed } | { 'fenced-out', currentFence }
    routed  1 when the chat has a reply route (the caller triggers its delivery job), else 0
]]
-- @include "fence"
if currentFence(KEYS[1]) ~= ARGV[1] then
  return { 'fenced-out', rejectFence(KEYS[1], KEYS[3], ARGV[2], 'outbox', ARGV[1], ARGV[4]) }
end
local id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*',
  'runId', ARGV[4], 'text', ARGV[5], 'ts', ARGV[6])
return { 'ok', id, redis.call('HEXISTS', KEYS[1], 'route') }

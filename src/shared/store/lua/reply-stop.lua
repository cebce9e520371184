--[[
  Ask the chat's running turn to stop (POST /v1/ui/:id/stop): meta.stop = the running
  turn's fence, which its next reply write reads. A turn that already ended is not touched.

  KEYS[1] meta
  KEYS[2] events

  ARGV[1] max events

  Returns { 'stopping', fence } | { 'idle', fence }
]]
-- @include "events"
local fence = redis.call('HGET', KEYS[1], 'fence') or '0'
if not redis.call('HGET', KEYS[1], 'owner') then
  return { 'idle', fence }
end
redis.call('HSET', KEYS[1], 'stop', fence)
addEvent(KEYS[2], ARGV[1], 'turn.stop-requested', { fence = fence })
return { 'stopping', fence }

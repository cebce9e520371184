--[[
  Accept one user message into the chat's inbox, once.

  KEYS[1] inbox   stream of accepted, not yet consumed messages
  KEYS[2] seen    zset message id -> accept time (idempotency window)

  ARGV[1] message id
  ARGV[2] message JSON (UIMessage)
  ARGV[3] max pending messages in the inbox
  ARGV[4] idempotency window in ms

  Returns { 'accepted', streamId } | { 'duplicate' } | { 'full', pending }
]]
-- @include "now"
local now = nowMs()
local windowStart = now - tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. windowStart)

if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return { 'duplicate' }
end

local pending = redis.call('XLEN', KEYS[1])
if pending >= tonumber(ARGV[3]) then
  return { 'full', pending }
end

local streamId = redis.call('XADD', KEYS[1], '*', 'id', ARGV[1], 'm', ARGV[2])
redis.call('ZADD', KEYS[2], now, ARGV[1])
return { 'accepted', streamId }

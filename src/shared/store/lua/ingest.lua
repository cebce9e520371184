--[[
  Accept one user message into the chat's inbox, once, and remember where replies go.

  KEYS[1] inbox   stream of accepted, not yet consumed messages
  KEYS[2] seen    zset message id -> accept time (idempotency window)
  KEYS[3] meta    hash: route (reply route JSON), deliveredTo (delivery cursor), ...
  KEYS[4] outbox  stream of replies (read only: where a new route starts delivering)
  KEYS[5] watch   string: the chat's replies can be watched (written only with ARGV[9])

  ARGV[1] message id
  ARGV[2] message JSON (UIMessage)
  ARGV[3] max pending messages in the inbox
  ARGV[4] idempotency window in ms
  ARGV[5] reply route JSON (canonical), or '' to leave the chat's route as it is
  ARGV[6] '1': also return the lane's state (the message's channel debounces), else ''
  ARGV[7] LANE_POLICY=interrupt: the chat's arrivals channel, else ''; while a turn holds the
          lease, "<streamId> <ARGV[8]>" is published there (the running turn may abort its
          model call for this message, at most ARGV[8] times)
  ARGV[9] watch TTL in ms: the sender waits for the reply (POST /v1/ui), so the turn that
          takes this message streams it; '' = leave the watch key as it is. Set for an
          accepted message and for one sent again, never for a refused one

  Returns { 'accepted', streamId } | { 'duplicate' } | { 'full', pending };
  with ARGV[6] = '1': { 'accepted', streamId, leased, oldestId, now }
    leased    1 when a turn holds the lease (owner and leaseUntil past now), else 0
    oldestId  the inbox's oldest entry (this message's own when it was empty): when the burst
              began, in the stream id's milliseconds
    now       Redis's clock (ms), against which the ingress measures the burst
]]
-- @include "now"
-- @include "watch"
local now = nowMs()
local windowStart = now - tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. windowStart)

if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  markWatched(KEYS[5], ARGV[9])
  return { 'duplicate' }
end

local pending = redis.call('XLEN', KEYS[1])
if pending >= tonumber(ARGV[3]) then
  return { 'full', pending }
end

local streamId = redis.call('XADD', KEYS[1], '*', 'id', ARGV[1], 'm', ARGV[2])
markWatched(KEYS[5], ARGV[9])
redis.call('ZADD', KEYS[2], now, ARGV[1])
-- Every id is older than the window once the newest is: an idle chat's set expires whole
-- (the trim above only runs when the next message comes).
redis.call('PEXPIRE', KEYS[2], ARGV[4])

-- The route is written only when it changed: one HGET and a string compare otherwise.
if ARGV[5] ~= '' and redis.call('HGET', KEYS[3], 'route') ~= ARGV[5] then
  redis.call('HSET', KEYS[3], 'route', ARGV[5])
  -- A chat that gains its first route starts delivering after what its outbox already holds:
  -- replies written before anyone could receive them were read over the API, not resent.
  if redis.call('HEXISTS', KEYS[3], 'deliveredTo') == 0 then
    local last = redis.call('XREVRANGE', KEYS[4], '+', '-', 'COUNT', 1)[1]
    redis.call('HSET', KEYS[3], 'deliveredTo', last and last[1] or '0-0')
  end
end
if ARGV[6] == '' and ARGV[7] == '' then
  return { 'accepted', streamId }
end
local leased = 0
local owner = redis.call('HGET', KEYS[3], 'owner')
if owner and tonumber(redis.call('HGET', KEYS[3], 'leaseUntil') or '0') > now then
  leased = 1
end
if leased == 1 and ARGV[7] ~= '' then
  redis.call('PUBLISH', ARGV[7], streamId .. ' ' .. ARGV[8])
end
if ARGV[6] == '' then
  return { 'accepted', streamId }
end
local oldest = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
return { 'accepted', streamId, leased, oldest and oldest[1] or streamId, now }

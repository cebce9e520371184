--[[
  Delete a whole chat that has been idle for the TTL (CHAT_TTL_DAYS): every key at once, or
  nothing. Run by the maintenance job; the chat's index entry (another slot) goes after.

  KEYS[1] meta      hash: owner, leaseUntil, dOwner, dLeaseUntil, route, deliveredTo, ...
  KEYS[2] inbox     stream of accepted, not yet consumed messages
  KEYS[3] outbox    stream of replies
  KEYS[4] events    stream of the chat's events
  KEYS[5] relay     stream of contact sends not yet written to their target
  KEYS[6] contexts  hash: snapshot id -> metadata
  KEYS[7 ..] every key of the chat (keys.ts allChatKeys), snapshot lists included

  ARGV[1] TTL in ms
  ARGV[2] number of snapshots the caller listed in KEYS (a new one since aborts)

  Returns { 'deleted' } | { 'gone' } (no key left) | { 'kept', reason, lastActivityMs }
    reason  'pending' | 'relay' | 'leased' | 'delivering' | 'undelivered' | 'active' | 'changed'
  Atomic with every ingest and turn write of the chat (same slot): a message accepted before
  this runs is pending (kept); one accepted after starts a new chat.
]]
-- @include "now"
local function lastGenerated(key)
  if redis.call('EXISTS', key) == 0 then
    return 0
  end
  local info = redis.call('XINFO', 'STREAM', key)
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then
      return tonumber(string.match(info[i + 1], '^(%d+)')) or 0
    end
  end
  return 0
end

if redis.call('EXISTS', unpack(KEYS, 7)) == 0 then
  return { 'gone' }
end
local now = nowMs()
local last = math.max(lastGenerated(KEYS[2]), lastGenerated(KEYS[3]), lastGenerated(KEYS[4]),
  tonumber(redis.call('HGET', KEYS[1], 'lastCompactAt') or '0'))
local function kept(reason)
  return { 'kept', reason, last }
end
if redis.call('XLEN', KEYS[2]) > 0 then
  return kept('pending')
end
if redis.call('XLEN', KEYS[5]) > 0 then
  return kept('relay')
end
if redis.call('HEXISTS', KEYS[1], 'owner') == 1
  and tonumber(redis.call('HGET', KEYS[1], 'leaseUntil') or '0') > now then
  return kept('leased')
end
if redis.call('HEXISTS', KEYS[1], 'dOwner') == 1
  and tonumber(redis.call('HGET', KEYS[1], 'dLeaseUntil') or '0') > now then
  return kept('delivering')
end
if redis.call('HEXISTS', KEYS[1], 'route') == 1 then
  local newest = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)[1]
  if newest and newest[1] ~= (redis.call('HGET', KEYS[1], 'deliveredTo') or '0-0') then
    return kept('undelivered')
  end
end
if now - last < tonumber(ARGV[1]) then
  return kept('active')
end
if redis.call('HLEN', KEYS[6]) ~= tonumber(ARGV[2]) then
  return kept('changed')
end
redis.call('DEL', unpack(KEYS, 7))
return { 'deleted' }

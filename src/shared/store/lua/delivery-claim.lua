--[[
  Take the chat's delivery lease and read the next outbox items after its delivery cursor.

  KEYS[1] meta    hash: route, deliveredTo, dOwner, dLeaseUntil, dTry, dPart
  KEYS[2] outbox
  KEYS[3] posts   hash (PLATFORM_STREAMING only): delivery's streamed post, see delivery-post
  KEYS[4] inbox   (PLATFORM_STREAMING only): messages no turn has committed yet

  ARGV[1] owner token (unique per delivery job run)
  ARGV[2] lease in ms
  ARGV[3] max items
  ARGV[4] '1' with KEYS[3]: streaming, else absent

  Returns { 'none' }                  no reply route: nothing is ever delivered
        | { 'empty' }                 nothing after the cursor (no lease taken)
        | { 'busy', ttlMs }           another live owner delivers this chat
        | { 'ok', route, cursor, tryItem, tries, entries, part }
    cursor   the delivery cursor (last outbox id accepted or skipped), '0-0' when none
    tryItem  the item whose earlier attempts failed ('' when none), tries = how many
    entries  XRANGE entries strictly after the cursor
    part     the part cursor of an item split into several messages and partly sent
             ('<item id> <sent> <parts> <format>', see delivery-part), '' when none
  Streaming adds the posts hash (HGETALL) after `part`, and where `empty` would be
  answered while a turn's reply is live or a streamed post waits for its item, it takes the
  lease and returns { 'stream', route, liveRun, posts, unanswered } (liveRun '' when no
  turn's reply is live: `meta.uiRun` whose turn still holds the chat lease; unanswered: how
  many messages wait in the inbox — after a worker died mid-reply its messages stay there
  until the takeover commits, so a waiting post is not yet a stray one).
  The lease keeps a stalled duplicate job from sending while a live one does (so items never
  overtake each other); the cursor itself only moves by compare-and-set (delivery-advance).
]]
-- @include "now"
-- @include "owner"
local route = redis.call('HGET', KEYS[1], 'route')
if not route then
  return { 'none' }
end
local now = nowMs()
local owner = redis.call('HGET', KEYS[1], 'dOwner')
local leaseUntil = tonumber(redis.call('HGET', KEYS[1], 'dLeaseUntil') or '0')
if owner and owner ~= ARGV[1] and leaseUntil > now then
  return { 'busy', leaseUntil - now }
end

local cursor = redis.call('HGET', KEYS[1], 'deliveredTo') or '0-0'
local entries = redis.call('XRANGE', KEYS[2], '(' .. cursor, '+', 'COUNT', tonumber(ARGV[3]))
local streaming = ARGV[4] == '1'
if #entries == 0 and streaming then
  local run = redis.call('HGET', KEYS[1], 'uiRun')
  local turnOwner = redis.call('HGET', KEYS[1], 'owner')
  local live = ''
  if run and turnOwner and ownerIsRun(turnOwner, run) then
    live = run
  end
  if live ~= '' or redis.call('HEXISTS', KEYS[3], 'msg') == 1 then
    redis.call('HSET', KEYS[1], 'dOwner', ARGV[1], 'dLeaseUntil', now + tonumber(ARGV[2]))
    return { 'stream', route, live, redis.call('HGETALL', KEYS[3]), redis.call('XLEN', KEYS[4]) }
  end
end
if #entries == 0 then
  if owner == ARGV[1] then
    redis.call('HDEL', KEYS[1], 'dOwner', 'dLeaseUntil')
  end
  return { 'empty' }
end

redis.call('HSET', KEYS[1], 'dOwner', ARGV[1], 'dLeaseUntil', now + tonumber(ARGV[2]))
local try = redis.call('HGET', KEYS[1], 'dTry')
local tryItem, tries = '', 0
if try then
  local sep = string.find(try, ' ', 1, true)
  if sep then
    tryItem = string.sub(try, 1, sep - 1)
    tries = tonumber(string.sub(try, sep + 1)) or 0
  end
end
local part = redis.call('HGET', KEYS[1], 'dPart') or ''
if streaming then
  return { 'ok', route, cursor, tryItem, tries, entries, part, redis.call('HGETALL', KEYS[3]) }
end
return { 'ok', route, cursor, tryItem, tries, entries, part }

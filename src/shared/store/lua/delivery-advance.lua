--[[
  Move the chat's delivery cursor past one item, by compare-and-set, iff we hold the lease.

  KEYS[1] meta    hash: deliveredTo, dOwner, dLeaseUntil, dTry, dPart (the item's part cursor, cleared)
  KEYS[2] events
  KEYS[3] parts   hash: outbox item id -> messages it went out as (2 or more), for the API
  KEYS[4] outbox  stream: its first entry bounds the parts hash
  KEYS[5] posts   hash (PLATFORM_STREAMING only): its waiting post is cleared with the move,
                  and the item's reply stream part is recorded as done (doneRun, done)

  ARGV[1] owner token
  ARGV[2] expected cursor (what the caller's claim read, or its last advance wrote)
  ARGV[3] new cursor (the item's outbox id)
  ARGV[4] lease in ms (renewed)
  ARGV[5] max events
  ARGV[6] '' when the item was accepted, else the JSON of its `delivery.failed` event
  ARGV[7] the item's runId (with KEYS[3])
  ARGV[8] the item's reply stream part ('' none): its text is delivered, so it is not streamed
          into a post of its own when its turn writes the part's end after the item
  ARGV[9] '' or the JSON of a `delivery.split` event: the item went out as several messages
          (ARGV[7] and ARGV[8] are '' without KEYS[5]); its `parts` also goes into KEYS[3]
  ARGV[10] '' or how many of the item's parts the caller knows went out before this step:
          compared with the item's part cursor (dPart; none = 0) like the cursor itself
  ARGV[11] the parts hash's cap (OUTBOX_KEEP_ITEMS): past it plus a quarter, the fields of
          items the outbox no longer holds are dropped

  Returns { 'ok' } | { 'lost', currentOwner } | { 'moved', currentCursor }
  A stalled duplicate job can neither move the cursor backwards nor skip an item: the
  owner check stops it once another job took the lease, and the compare-and-set stops it
  whatever happened in between. The waiting post goes in the same step as the move: a post
  left behind a moved cursor would be taken for the next item's and edited into it.
  The parts hash holds only fields of items delivery passed, so once its fields for items
  trimmed from the outbox are dropped it is no larger than the outbox; the drop reads the
  hash only when it is past the cap, as outbox-trim reads the outbox.
]]
-- @include "now"
-- @include "events"
local owner = redis.call('HGET', KEYS[1], 'dOwner')
if owner ~= ARGV[1] then
  return { 'lost', owner or '' }
end
local cursor = redis.call('HGET', KEYS[1], 'deliveredTo') or '0-0'
if cursor ~= ARGV[2] then
  return { 'moved', cursor }
end
if ARGV[10] and ARGV[10] ~= '' then
  local part = redis.call('HGET', KEYS[1], 'dPart') or ''
  local item, count = string.match(part, '^(%S+) (%d+) ')
  local sent = 0
  if item == ARGV[3] then
    sent = tonumber(count)
  end
  if sent ~= tonumber(ARGV[10]) then
    return { 'moved', cursor, part }
  end
end
redis.call('HSET', KEYS[1], 'deliveredTo', ARGV[3], 'dLeaseUntil', nowMs() + tonumber(ARGV[4]))
redis.call('HDEL', KEYS[1], 'dTry', 'dPart')
if KEYS[5] then
  redis.call('HDEL', KEYS[5], 'part', 'msg', 'text', 'end')
  if ARGV[8] ~= '' then
    redis.call('HSET', KEYS[5], 'doneRun', ARGV[7], 'done', ARGV[8])
  end
end
if ARGV[6] ~= '' then
  addEvent(KEYS[2], ARGV[5], 'delivery.failed', cjson.decode(ARGV[6]))
end
-- Stream ids '<ms>-<seq>' compared as numbers: the ids XADD generates (a time in ms, a small
-- sequence) are exact in a double.
local function idBefore(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, bm = tonumber(am), tonumber(bm)
  return am < bm or (am == bm and tonumber(as) < tonumber(bs))
end

if ARGV[9] and ARGV[9] ~= '' then
  local split = cjson.decode(ARGV[9])
  addEvent(KEYS[2], ARGV[5], 'delivery.split', split)
  redis.call('HSET', KEYS[3], ARGV[3], tostring(split.parts))
  local keep = tonumber(ARGV[11])
  if redis.call('HLEN', KEYS[3]) > keep + math.max(1, math.floor(keep / 4)) then
    local first = redis.call('XRANGE', KEYS[4], '-', '+', 'COUNT', 1)[1]
    if not first then
      redis.call('DEL', KEYS[3])
    else
      -- In batches: unpack takes a few thousand values at most, and the cap is a setting.
      local gone = {}
      for _, id in ipairs(redis.call('HKEYS', KEYS[3])) do
        if idBefore(id, first[1]) then
          gone[#gone + 1] = id
          if #gone == 1000 then
            redis.call('HDEL', KEYS[3], unpack(gone))
            gone = {}
          end
        end
      end
      if #gone > 0 then
        redis.call('HDEL', KEYS[3], unpack(gone))
      end
    end
  end
end
return { 'ok' }

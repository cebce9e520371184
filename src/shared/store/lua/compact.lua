--[[
  Replace the head of the history with a summary, iff the head is still what was
  summarised (compare-and-swap). Compaction holds no turn lease: turns append meanwhile,
  and appends never touch the head, so they survive; any rewrite bumps the version.

  KEYS[1] meta
  KEYS[2] hist
  KEYS[3] archive
  KEYS[4] events
  KEYS[5] usage    the chat's model usage (includes/usage.lua)

  ARGV[1]  expected history version
  ARGV[2]  n = number of head messages summarised (the previous summary included)
  ARGV[3]  id of the first of them
  ARGV[4]  id of the last of them (= sourceRange.toId)
  ARGV[5]  summary message JSON
  ARGV[6]  archive entry JSON ('' = do not archive)
  ARGV[7]  tokens of the n messages
  ARGV[8]  tokens of the summary
  ARGV[9]  max events
  ARGV[10] event data JSON (model, duration, ...) merged into compaction.applied; its `model`
           (the one that served the summary) goes on compaction.discarded too
  ARGV[11] archive: max entries kept (the oldest dropped first)
  ARGV[12] archive: max bytes kept (the newest entry is always kept)
  ARGV[13] usage day (UTC YYYY-MM-DD; '' = no usage to record)
  ARGV[14] usage: drop days before this one on the day's first write ('' = keep all)
  ARGV[15] usage: the summary's model calls, JSON. Recorded whatever the outcome (applied,
           discarded): the summary was paid for either way. One compaction job calls this
           once per summary it had made, so each call is counted once.

  meta keeps archiveBytes (bytes the archive holds) and archiveDropped (entries dropped from
  its head, so an entry's index, archiveDropped + its position, never changes).

  Returns { 'ok', version } | { 'noop' } (this range was already applied)
        | { 'stale', reason }
]]
-- @include "now"
-- @include "events"
-- @include "usage"
local calls = recordUsage(KEYS[5], ARGV[13] or '', ARGV[14] or '', ARGV[15] or '[]')
local eventData = cjson.decode(ARGV[10])
local function withCalls(data)
  if #calls > 0 then
    data.calls = calls
  end
  if data.model == nil and type(eventData.model) == 'string' then
    data.model = eventData.model
  end
  return data
end

if redis.call('HGET', KEYS[1], 'compactedToId') == ARGV[4] then
  addEvent(KEYS[4], ARGV[9], 'compaction.discarded', withCalls({ reason = 'already-applied', toId = ARGV[4] }))
  return { 'noop' }
end

local version = redis.call('HGET', KEYS[1], 'version') or '0'
if version ~= ARGV[1] then
  addEvent(KEYS[4], ARGV[9], 'compaction.discarded',
    withCalls({ reason = 'version', expected = ARGV[1], actual = version }))
  return { 'stale', 'version' }
end

local n = tonumber(ARGV[2])
local first = redis.call('LINDEX', KEYS[2], 0)
local last = redis.call('LINDEX', KEYS[2], n - 1)
if not first or not last or cjson.decode(first).id ~= ARGV[3] or cjson.decode(last).id ~= ARGV[4] then
  addEvent(KEYS[4], ARGV[9], 'compaction.discarded', withCalls({ reason = 'prefix-changed', toId = ARGV[4] }))
  return { 'stale', 'prefix' }
end

redis.call('LTRIM', KEYS[2], n, -1)
redis.call('LPUSH', KEYS[2], ARGV[5])
if ARGV[6] ~= '' then
  local len = redis.call('RPUSH', KEYS[3], ARGV[6])
  local bytes = redis.call('HINCRBY', KEYS[1], 'archiveBytes', #ARGV[6])
  local maxEntries, maxBytes = tonumber(ARGV[11]), tonumber(ARGV[12])
  local dropped = 0
  while len > 1 and (len > maxEntries or bytes > maxBytes) do
    bytes = bytes - #redis.call('LPOP', KEYS[3])
    len = len - 1
    dropped = dropped + 1
  end
  if dropped > 0 then
    -- An archive older than the byte counter may go below zero: count from here on.
    redis.call('HSET', KEYS[1], 'archiveBytes', math.max(bytes, 0))
    redis.call('HINCRBY', KEYS[1], 'archiveDropped', dropped)
  end
end
local newVersion = redis.call('HINCRBY', KEYS[1], 'version', 1)
local tokens = redis.call('HINCRBY', KEYS[1], 'tokens', tonumber(ARGV[8]) - tonumber(ARGV[7]))
redis.call('HSET', KEYS[1], 'compactedToId', ARGV[4], 'lastCompactAt', nowMs())

local data = eventData
data.tokensBefore = tokens - tonumber(ARGV[8]) + tonumber(ARGV[7])
data.tokensAfter = tokens
data.toId = ARGV[4]
data.version = newVersion
addEvent(KEYS[4], ARGV[9], 'compaction.applied', withCalls(data))
return { 'ok', newVersion }

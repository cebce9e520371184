--[[
  Switch the chat's working context, iff fenced: archive the current history as a
  snapshot (O(1) RENAME), then start empty ('new', 'clear') or from a copy of an earlier
  snapshot ('load'). Bumps the history version so an in-flight compaction is discarded.

  KEYS[1] meta
  KEYS[2] hist
  KEYS[3] contexts       hash: snapshot id -> metadata JSON
  KEYS[4] events
  KEYS[5] new snapshot's message list
  KEYS[6] snapshot to load (its message list; = KEYS[5] unless op is 'load')
  KEYS[7 ..] message lists of the oldest snapshots, oldest first: dropped while the chat
             holds more than ARGV[10] snapshots (CONTEXTS_MAX)

  ARGV[1] fence
  ARGV[2] op: 'new' | 'clear' | 'load'
  ARGV[3] new snapshot id
  ARGV[4] new snapshot metadata JSON (title, reason, createdAt, preview, checkpoint)
  ARGV[5] id of the snapshot to load ('' unless 'load')
  ARGV[6] marker message JSON appended after a loaded context ('' unless 'load')
  ARGV[7] marker tokens
  ARGV[8] max events
  ARGV[9] runId (or the operator request id)
  ARGV[10] max snapshots kept
  ARGV[11 ..] ids of the snapshots in KEYS[7 ..]

  Returns { 'ok', archivedId ('' when the history was empty), archivedCount, loadedCount }
        | { 'fenced-out', currentFence } | { 'not-found' }
]]
-- @include "now"
-- @include "fence"
if currentFence(KEYS[1]) ~= ARGV[1] then
  return { 'fenced-out', rejectFence(KEYS[1], KEYS[4], ARGV[8], 'context.' .. ARGV[2], ARGV[1], ARGV[9]) }
end

local op = ARGV[2]
local loadMeta
if op == 'load' then
  loadMeta = redis.call('HGET', KEYS[3], ARGV[5])
  if not loadMeta or redis.call('EXISTS', KEYS[6]) == 0 then
    return { 'not-found' }
  end
end

local now = nowMs()
local archivedId = ''
local archivedCount = redis.call('LLEN', KEYS[2])
if archivedCount > 0 then
  local meta = cjson.decode(ARGV[4])
  meta.messageCount = archivedCount
  meta.tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens') or '0')
  meta.archivedAt = now
  redis.call('RENAME', KEYS[2], KEYS[5])
  redis.call('HSET', KEYS[3], ARGV[3], cjson.encode(meta))
  archivedId = ARGV[3]
end

local tokens = 0
local loadedCount = 0
if op == 'load' then
  redis.call('COPY', KEYS[6], KEYS[2])
  redis.call('RPUSH', KEYS[2], ARGV[6])
  loadedCount = redis.call('LLEN', KEYS[2]) - 1
  tokens = (tonumber(cjson.decode(loadMeta).tokens) or 0) + tonumber(ARGV[7])
end

-- Snapshots beyond the cap go oldest first. The caller named them from a read before this
-- script; one no longer there is skipped, and the cap is checked on every one.
local dropped = 0
for i = 7, #KEYS do
  if redis.call('HLEN', KEYS[3]) <= tonumber(ARGV[10]) then
    break
  end
  local id = ARGV[4 + i]
  if redis.call('HDEL', KEYS[3], id) == 1 then
    redis.call('DEL', KEYS[i])
    dropped = dropped + 1
  end
end

redis.call('HSET', KEYS[1], 'tokens', tokens)
redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HDEL', KEYS[1], 'compactedToId')

local eventType = op == 'load' and 'context.loaded' or (op == 'new' and 'context.new' or 'context.cleared')
addEvent(KEYS[4], ARGV[8], eventType, {
  archivedId = archivedId, archivedCount = archivedCount,
  loadedId = ARGV[5], loadedCount = loadedCount, runId = ARGV[9], droppedSnapshots = dropped,
})
return { 'ok', archivedId, archivedCount, loadedCount }

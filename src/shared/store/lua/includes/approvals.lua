-- Tool approval requests in a turn's commit (docs/approvals.md). `plan` is the decoded JSON
-- the turn built; every record, message and event in it is a JSON string written as given
-- (never re-encoded here: cjson would turn an empty list into {}).
--   plan.open     { id, request, event }      requests the turn made: `<id>` in the approvals
--                                             hash, approval.requested
--   plan.resolve  { id, resolution, event }   requests the turn settled: `<id>:r`, the id in the
--                                             done set, approval.resolved
--   plan.rewrite  { id, json, tokens }        history messages whose tool parts it changed,
--                                             found from the newest back (200 at most)
--   plan.cards    { json, text }              one outbox item per new request (field `approval`)
--   plan.keepMs   how long the hash lives after its last write
--   plan.maxDone  settled requests kept (the oldest are forgotten: a late answer gets 404)
--   plan.outboxKeep, plan.runId, plan.ts, plan.tp
-- @include "events"
-- @include "outbox-trim"

local REWRITE_SCAN = 200

-- Replace the message `id` (the newest of that id) with `json`; its tokens replace the old
-- ones in the chat's count and the history version moves (an in-flight compaction of a range
-- holding it is discarded). Returns whether it was there.
local function rewriteMessage(metaKey, histKey, id, json, tokens)
  local len = redis.call('LLEN', histKey)
  local from = math.max(0, len - REWRITE_SCAN)
  local items = redis.call('LRANGE', histKey, from, -1)
  for i = #items, 1, -1 do
    local ok, m = pcall(cjson.decode, items[i])
    if ok and type(m) == 'table' and m.id == id then
      redis.call('LSET', histKey, from + i - 1, json)
      local old = 0
      if type(m.metadata) == 'table' then
        old = tonumber(m.metadata.tokens) or 0
      end
      redis.call('HINCRBY', metaKey, 'tokens', (tonumber(tokens) or 0) - old)
      redis.call('HINCRBY', metaKey, 'version', 1)
      return true
    end
  end
  return false
end

-- Rewrites first: the commit's appends come after.
local function rewriteForApprovals(metaKey, histKey, plan)
  for _, r in ipairs(plan.rewrite or {}) do
    rewriteMessage(metaKey, histKey, r.id, r.json, r.tokens)
  end
end

local function applyApprovals(approvalsKey, doneKey, outboxKey, metaKey, eventsKey, maxEvents, plan, now)
  local written = false
  for _, o in ipairs(plan.open or {}) do
    redis.call('HSET', approvalsKey, o.id, o.request)
    addEventJson(eventsKey, maxEvents, 'approval.requested', o.event)
    written = true
  end
  for _, r in ipairs(plan.resolve or {}) do
    redis.call('HSET', approvalsKey, r.id .. ':r', r.resolution)
    redis.call('ZADD', doneKey, now, r.id)
    addEventJson(eventsKey, maxEvents, 'approval.resolved', r.event)
    written = true
  end
  local over = redis.call('ZCARD', doneKey) - (tonumber(plan.maxDone) or 200)
  if over > 0 then
    local gone = redis.call('ZPOPMIN', doneKey, over)
    for i = 1, #gone, 2 do
      redis.call('HDEL', approvalsKey, gone[i], gone[i] .. ':a', gone[i] .. ':r')
    end
  end
  if written then
    local keep = tonumber(plan.keepMs)
    redis.call('PEXPIRE', approvalsKey, keep)
    redis.call('PEXPIRE', doneKey, keep)
  end
  local cards = 0
  for _, c in ipairs(plan.cards or {}) do
    local fields = { 'runId', plan.runId, 'text', c.text, 'ts', tostring(plan.ts), 'approval', c.json }
    if plan.tp and plan.tp ~= '' then
      table.insert(fields, 'tp')
      table.insert(fields, plan.tp)
    end
    redis.call('XADD', outboxKey, '*', unpack(fields))
    cards = cards + 1
  end
  if cards > 0 then
    trimOutbox(metaKey, outboxKey, plan.outboxKeep)
  end
  return cards
end

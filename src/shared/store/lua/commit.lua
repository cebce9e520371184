--[[
  Append a turn's messages to history and consume its inbox entries, iff fenced; with an
  owner token, also release the turn lease (iff that owner holds it), as finish.lua does;
  with reply entries, also close the turn's reply stream with them, as reply-write.lua's
  `close` does: a reply reads `finish` exactly when its turn is in history.

  KEYS[1] meta
  KEYS[2] hist
  KEYS[3] inbox
  KEYS[4] events
  KEYS[5] uncommitted  sends of runs that never committed: this commit's history holds them now
  KEYS[6] usage        the chat's model usage by day, model and kind (includes/usage.lua)
  KEYS[7] the turn's reply stream (KEYS[1] again when ARGV[10] is '')
  KEYS[8] approvals       hash: tool approval requests (includes/approvals.lua)
  KEYS[9] approvalsDone   zset: settled approval ids by time
  KEYS[10] outbox         an approval card per new request
  KEYS[11] watch          string: someone can watch the chat's replies (read only)

  ARGV[1] fence
  ARGV[2] max events
  ARGV[3] runId
  ARGV[4] tokens added (sum of metadata.tokens of the messages)
  ARGV[5] event data JSON, merged into the turn.committed event
  ARGV[6] owner token: release the lease after the commit ('' = keep it)
  ARGV[7] usage day (UTC YYYY-MM-DD; '' = no usage to record)
  ARGV[8] usage: drop days before this one on the day's first write ('' = keep all)
  ARGV[9] usage: the turn's model calls, JSON (also put on the event as `calls`)
  ARGV[10] reply stream MAXLEN ~ ('' = this commit closes no reply)
  ARGV[11] reply stream TTL in ms
  ARGV[12] the turn's approval plan JSON ('' = none; includes/approvals.lua): requests opened
          and settled, history messages rewritten, approval cards for the outbox
  ARGV[13] '' = the entries close a reply the turn streamed; else the turn did not stream
          (nobody watched when it began): the entries are its whole reply, written only when
          KEYS[11] exists now (a reader came during the turn), announced by `reply.started`
          with these message ids (JSON array) before `turn.committed`
  ARGV[14] r = number of reply entries
  ARGV[15 .. 14+2r] the reply's last entries as field/value pairs (c = a UI chunk JSON,
          m = message ids JSON), its `finish` last
  ARGV[15+2r] n = number of consumed inbox stream ids
  ARGV[16+2r .. 15+2r+n]   consumed inbox stream ids
  ARGV[16+2r+n .. #ARGV]   message JSONs, in history order

  Returns { 'ok', histLen, tokensTotal, released (1|0), pending, cards }
        | { 'fenced-out', currentFence }
        | { 'missing', streamId } (an inbox entry was already consumed: nothing written)
        | { 'missing-send', found } (ARGV[5]'s `sent` names more sends of this run than
          KEYS[5] holds: a failover took one with the old primary; nothing written)
    pending: the inbox length after the commit (what finish.lua would return)
    cards: approval cards written to the outbox (the caller triggers delivery)
]]
-- @include "fence"
-- @include "now"
-- @include "consume"
-- @include "lease"
-- @include "usage"
-- @include "reply"
-- @include "approvals"
if currentFence(KEYS[1]) ~= ARGV[1] then
  return { 'fenced-out', rejectFence(KEYS[1], KEYS[4], ARGV[2], 'commit', ARGV[1], ARGV[3]) }
end

local data = cjson.decode(ARGV[5])
-- Every send of this run is recorded in KEYS[5] until this commit (outbox.lua). One missing
-- here went with a failed primary: committing would record an answer nobody received.
local sent = tonumber(data.sent) or 0
if sent > 0 then
  local found = 0
  for _, raw in ipairs(redis.call('LRANGE', KEYS[5], 0, -1)) do
    local ok, send = pcall(cjson.decode, raw)
    if ok and type(send) == 'table' and send.runId == ARGV[3] then
      found = found + 1
    end
  end
  if found < sent then
    return { 'missing-send', tostring(found) }
  end
end

local r = tonumber(ARGV[14])
local at = 15 + 2 * r
local n = tonumber(ARGV[at])
local missing = firstMissing(KEYS[3], at + 1, n)
if missing then
  return { 'missing', missing }
end
local plan = ARGV[12] ~= '' and cjson.decode(ARGV[12]) or nil
if plan then
  rewriteForApprovals(KEYS[1], KEYS[2], plan)
end
local histLen, tokens = consumeIntoHistory(KEYS[1], KEYS[3], KEYS[2], KEYS[5], at + 1, n, ARGV[4])
redis.call('HINCRBY', KEYS[1], 'turns', 1)
data.runId = ARGV[3]
data.fence = ARGV[1]
data.consumed = n
data.appended = #ARGV - at - n
data.tokens = tokens
if ARGV[10] ~= '' and ARGV[13] ~= '' and redis.call('EXISTS', KEYS[11]) == 1 then
  -- An unstreamed turn's reply, whole, for a reader that came while it ran: announced first,
  -- so a response waiting for these messages follows it before it reads the commit.
  addEventJson(KEYS[4], ARGV[2], 'reply.started',
    '{"runId":' .. cjson.encode(ARGV[3]) .. ',"messageIds":' .. ARGV[13] .. '}')
  appendReply(KEYS[7], ARGV[10], ARGV[11], 15, at - 1)
  closeReply(KEYS[1], ARGV[3])
end
-- The same calls counted in the usage hash, on the event: each once, in one script.
local calls = recordUsage(KEYS[6], ARGV[7], ARGV[8], ARGV[9])
if #calls > 0 then
  data.calls = calls
end
addEvent(KEYS[4], ARGV[2], 'turn.committed', data)
local cards = 0
if plan then
  cards = applyApprovals(KEYS[8], KEYS[9], KEYS[10], KEYS[1], KEYS[4], ARGV[2], plan, nowMs())
end
if ARGV[10] ~= '' and ARGV[13] == '' then
  appendReply(KEYS[7], ARGV[10], ARGV[11], 15, at - 1)
  closeReply(KEYS[1], ARGV[3])
end
local released = 0
if ARGV[6] ~= '' and releaseLease(KEYS[1], ARGV[6]) then
  released = 1
end
return { 'ok', histLen, tokens, released, redis.call('XLEN', KEYS[3]), cards }

--[[
  Record one user-visible reply, iff fenced.

  KEYS[1] meta
  KEYS[2] outbox
  KEYS[3] events
  KEYS[4] uncommitted  list: this chat's sends of turns that have not committed (JSON each)
  KEYS[5] inbox        read only: whether a message arrived after ARGV[8]
  KEYS[6] the turn's reply stream (KEYS[1] again when ARGV[12] is '')

  ARGV[1] fence
  ARGV[2] max events
  ARGV[3] outbox items kept beyond what delivery still needs (outbox-trim)
  ARGV[4] runId
  ARGV[5] text
  ARGV[6] ts (ms)
  ARGV[7] '1': record the item in KEYS[4] too (chat_send), '' not (failure notices)
  ARGV[8] seen: the last inbox stream id the sending turn had given its model
  ARGV[9] max items kept in KEYS[4]
  ARGV[10] W3C traceparent of the writing span ('' when tracing is off): the delivery joins its trace
  ARGV[11] the chat_send's tool call id: the reply stream part that showed this text ('' none)
  ARGV[12] reply stream MAXLEN ~ ('' = no reply entries)
  ARGV[13] reply stream TTL in ms
  ARGV[14..] reply entries not yet written (the send's text part so far), as field/value
          pairs: appended to KEYS[6] as reply-write.lua's `append` does, a write less a step

  Returns { 'ok', streamId, routed, arrived, stop } | { 'fenced-out', currentFence }
    routed  1 when the chat has a reply route (the caller triggers its delivery job), else 0
    arrived 1 when the inbox holds a message after ARGV[8] (or ARGV[8] is ''), else 0: the
            sending turn need not read its inbox again before its next step (one round trip)
    stop    1 when reply entries came and an operator asked this fence to stop (meta.stop),
            as reply-write.lua answers 'stop', else 0
]]
-- @include "fence"
-- @include "outbox-trim"
-- @include "reply"
if currentFence(KEYS[1]) ~= ARGV[1] then
  return { 'fenced-out', rejectFence(KEYS[1], KEYS[3], ARGV[2], 'outbox', ARGV[1], ARGV[4]) }
end
local arrived = 1
if ARGV[8] ~= '' and #redis.call('XRANGE', KEYS[5], '(' .. ARGV[8], '+', 'COUNT', 1) == 0 then
  arrived = 0
end
local stop = 0
if ARGV[12] ~= '' and stopAsked(KEYS[1], ARGV[1]) then
  stop = 1
end
if ARGV[7] == '1' then
  -- The same run never sends the same text twice (chat_send dedupes it), so finding it here
  -- means this very call ran before and its reply was lost (a Redis restart under a client
  -- that resends unanswered commands): answer as then, write nothing.
  for _, raw in ipairs(redis.call('LRANGE', KEYS[4], 0, -1)) do
    local item = cjson.decode(raw)
    if item.runId == ARGV[4] and item.text == ARGV[5] then
      return { 'ok', item.id, redis.call('HEXISTS', KEYS[1], 'route'), arrived, stop }
    end
  end
end
if ARGV[12] ~= '' then
  -- Written with the item (a resent call above wrote them the first time): a reader that finds
  -- the item finds the text part it names.
  appendReply(KEYS[6], ARGV[12], ARGV[13], 14, #ARGV)
end
local fields = { 'runId', ARGV[4], 'text', ARGV[5], 'ts', ARGV[6] }
if ARGV[10] ~= '' then
  table.insert(fields, 'tp')
  table.insert(fields, ARGV[10])
end
if ARGV[11] ~= '' then
  table.insert(fields, 'part')
  table.insert(fields, ARGV[11])
end
local id = redis.call('XADD', KEYS[2], '*', unpack(fields))
trimOutbox(KEYS[1], KEYS[2], ARGV[3])
if ARGV[7] == '1' then
  -- Until the turn commits, this is the only trace that the person has seen this reply: a
  -- turn that takes the chat over after a crash reads it on acquire and does not say it again.
  redis.call('RPUSH', KEYS[4], cjson.encode({
    id = id, runId = ARGV[4], fence = ARGV[1], text = ARGV[5], ts = ARGV[6], seen = ARGV[8] }))
  redis.call('LTRIM', KEYS[4], -tonumber(ARGV[9]), -1)
end
return { 'ok', id, redis.call('HEXISTS', KEYS[1], 'route'), arrived, stop }

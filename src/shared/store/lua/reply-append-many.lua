--[[
  Append UI message chunks to many turns' reply streams in one call (a worker's writes due at
  one flush tick), each iff its caller still holds that chat's fence: reply-write.lua's
  append, for each reply. Not on Redis Cluster, where the chats' keys are in different slots:
  there each reply sends reply-write.lua.

  KEYS[2i-1] meta of reply i's chat
  KEYS[2i]   reply i's stream

  ARGV[1] max length of a reply stream (MAXLEN ~)
  ARGV[2] TTL of a reply stream in ms (re-armed by every write)
  then per reply, in KEYS order: its fence, its entry count n, then n field/value pairs
  (c = a UI chunk (JSON), m = the message ids (JSON array) the reply answers from here on)

  Returns { 'ok' | 'stop' | 'fenced-out' per reply, in order }, as reply-write.lua answers
]]
-- @include "fence"
-- @include "reply"
local results = {}
local at = 3
for i = 1, #KEYS / 2 do
  local meta = KEYS[2 * i - 1]
  local fence = ARGV[at]
  local last = at + 1 + 2 * tonumber(ARGV[at + 1])
  if currentFence(meta) ~= fence then
    -- As reply-write.lua: the turn's next fenced write records the rejection once.
    results[i] = 'fenced-out'
  else
    appendReply(KEYS[2 * i], ARGV[1], ARGV[2], at + 2, last)
    results[i] = stopAsked(meta, fence) and 'stop' or 'ok'
  end
  at = last + 1
end
return results

--[[
  Replace (or with empty content, delete) a chat's memory document.

  KEYS[1] meta
  KEYS[2] memory
  KEYS[3] events

  ARGV[1] fence: the writing turn's fence; '' for an operator's write (PUT /v1/chats/:chatKey/memory),
          which is not a turn and is not fenced (turn fences are never empty)
  ARGV[2] max events
  ARGV[3] content
  ARGV[4] runId (or the operator request id)
  ARGV[5] tokens of content (for the event)

  Returns { 'ok' } | { 'fenced-out', currentFence }
]]
-- @include "fence"
if ARGV[1] ~= '' and currentFence(KEYS[1]) ~= ARGV[1] then
  return { 'fenced-out', rejectFence(KEYS[1], KEYS[3], ARGV[2], 'memory', ARGV[1], ARGV[4]) }
end
if ARGV[3] == '' then
  redis.call('DEL', KEYS[2])
else
  redis.call('SET', KEYS[2], ARGV[3])
end
addEvent(KEYS[3], ARGV[2], 'memory.updated',
  { runId = ARGV[4], tokens = tonumber(ARGV[5]), by = (ARGV[1] == '' and 'operator' or 'turn') })
return { 'ok' }

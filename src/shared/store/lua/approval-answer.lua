--[[
  A person's answer to one open tool approval request (docs/approvals.md): stored once, and
  queued in the chat's inbox as an entry of its own, so the chat's next turn, in the lane and
  in order, applies it. The turn that settles the request writes `<id>:r` (commit.lua).

  KEYS[1] approvals  hash: <id> request JSON (with expiresAt), <id>:a answer JSON, <id>:r
                     resolution JSON
  KEYS[2] inbox      stream: the answer's entry has field `a` = the approval id (a person's
                     message has none)
  KEYS[3] watch      string: the chat's replies can be watched (written only with ARGV[6])

  ARGV[1] approval id
  ARGV[2] answer JSON (stored at <id>:a as given)
  ARGV[3] the inbox entry's message id
  ARGV[4] the inbox entry's message JSON
  ARGV[5] '1': a person's message waiting in the inbox supersedes the request
          (TOOL_APPROVAL_ON_MESSAGE=supersede), '' it does not
  ARGV[6] watch TTL in ms: the sender waits for the reply (an answer from a page, POST
          /v1/ui), so the turn that takes the answer streams it; '' = leave the watch key as it
          is. Set for 'accepted' and for 'answered' (the answer was stored before: the page sent
          it again and follows the turn that has it, as ingest.lua does for a message sent
          again), never for a refusal ('unknown', 'resolved', 'expired', 'superseded')

  Returns { 'accepted', streamId } | { 'unknown' } | { 'answered', answerJson }
        | { 'resolved', resolutionJson } | { 'expired', expiresAt } | { 'superseded' }
  Nothing is written for a refusal; 'answered' writes the watch key alone (given ARGV[6]).
]]
-- @include "now"
-- @include "watch"
local id = ARGV[1]
local request = redis.call('HGET', KEYS[1], id)
if not request then
  return { 'unknown' }
end
local resolution = redis.call('HGET', KEYS[1], id .. ':r')
if resolution then
  return { 'resolved', resolution }
end
local answer = redis.call('HGET', KEYS[1], id .. ':a')
if answer then
  markWatched(KEYS[3], ARGV[6])
  return { 'answered', answer }
end
local expiresAt = tonumber(cjson.decode(request).expiresAt) or 0
if nowMs() >= expiresAt then
  return { 'expired', expiresAt }
end
if ARGV[5] == '1' then
  local after = '-'
  repeat
    local page = redis.call('XRANGE', KEYS[2], after, '+', 'COUNT', 100)
    for _, entry in ipairs(page) do
      local isAnswer = false
      local fields = entry[2]
      for i = 1, #fields, 2 do
        if fields[i] == 'a' then
          isAnswer = true
        end
      end
      if not isAnswer then
        return { 'superseded' }
      end
    end
    if #page > 0 then
      after = '(' .. page[#page][1]
    end
  until #page < 100
end
redis.call('HSET', KEYS[1], id .. ':a', ARGV[2])
local streamId = redis.call('XADD', KEYS[2], '*', 'id', ARGV[3], 'm', ARGV[4], 'a', id)
markWatched(KEYS[3], ARGV[6])
return { 'accepted', streamId }

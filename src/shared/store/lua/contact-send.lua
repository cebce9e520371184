--[[
  Record a contact send of this chat's turn (chat_contact_send), iff fenced. The message is
  written to the other chat by contact-receive.lua: that chat lives in another slot, so no
  one script can touch both. What this script records is the durable intent; the relay
  (the tool right after, or the sweeper after a crash) carries it over exactly once.

  KEYS[1] meta    (this chat)
  KEYS[2] relay   (this chat) stream of sends not yet written to their target
  KEYS[3] events  (this chat)

  ARGV[1] fence
  ARGV[2] max events
  ARGV[3] runId
  ARGV[4] send id (unique)
  ARGV[5] target chatKey
  ARGV[6] target username (as the contact book has it)
  ARGV[7] text
  ARGV[8] ts (ms)

  Returns { 'ok', relayEntryId } | { 'fenced-out', currentFence }
]]
-- @include "fence"
if currentFence(KEYS[1]) ~= ARGV[1] then
  return { 'fenced-out', rejectFence(KEYS[1], KEYS[3], ARGV[2], 'contact-send', ARGV[1], ARGV[3]) }
end
local id = redis.call('XADD', KEYS[2], '*', 'sendId', ARGV[4], 'to', ARGV[5], 'username', ARGV[6],
  'text', ARGV[7], 'runId', ARGV[3], 'ts', ARGV[8])
addEvent(KEYS[3], ARGV[2], 'contact.sent',
  { sendId = ARGV[4], to = ARGV[5], username = ARGV[6], runId = ARGV[3] })
return { 'ok', id }

--[[
  Save a chat's exec_shell workspace (a gzipped tar), iff fenced: only the turn holding the
  chat writes it, so a turn that lost the chat (stalled past its lease) cannot overwrite
  what the newer turn's commands made.

  KEYS[1] meta
  KEYS[2] workspace  string: the archive
  KEYS[3] events

  ARGV[1] fence
  ARGV[2] max events
  ARGV[3] the archive (binary)
  ARGV[4] runId
  ARGV[5] the archive's size before compression (for the event)

  Returns { 'ok' } | { 'fenced-out', currentFence }
]]
-- @include "fence"
if currentFence(KEYS[1]) ~= ARGV[1] then
  return { 'fenced-out', rejectFence(KEYS[1], KEYS[3], ARGV[2], 'workspace', ARGV[1], ARGV[4]) }
end
redis.call('SET', KEYS[2], ARGV[3])
addEvent(KEYS[3], ARGV[2], 'workspace.saved',
  { runId = ARGV[4], bytes = tonumber(ARGV[5]), stored = string.len(ARGV[3]) })
return { 'ok' }

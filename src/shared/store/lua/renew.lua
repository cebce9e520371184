--[[
  Extend the turn lease, iff the caller still holds the fence.

  KEYS[1] meta
  KEYS[2] events

  ARGV[1] owner token
  ARGV[2] fence
  ARGV[3] lease in ms
  ARGV[4] max events
  ARGV[5] runId (for the event)

  Returns 1 | 0 (lease lost; a fence.rejected event is recorded)
]]
-- @include "now"
-- @include "fence"
-- @include "lease"
return renewLease(KEYS[1], KEYS[2], ARGV[4], ARGV[1], ARGV[2], ARGV[3], ARGV[5], nowMs())

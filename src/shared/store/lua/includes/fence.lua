-- @include "events"
-- The fence is the only authority for a turn's writes: a lock can be lost without the
-- holder knowing (GC pause, stall), a fence mismatch cannot be missed.
local function currentFence(metaKey)
  return redis.call('HGET', metaKey, 'fence') or '0'
end

local function rejectFence(metaKey, eventsKey, maxEvents, op, fence, runId)
  local current = currentFence(metaKey)
  addEvent(eventsKey, maxEvents, 'fence.rejected',
    { op = op, fence = fence, current = current, runId = runId })
  return current
end

-- Whether a turn lease owner token (`<worker>:<runId>`, turn.ts) is `runId`'s: the run whose
-- reply meta.uiRun names still holds the chat. Shared by delivery-claim.lua and ui-watch.lua.
local function ownerIsRun(owner, runId)
  return string.sub(owner, -(#runId + 1)) == ':' .. runId
end

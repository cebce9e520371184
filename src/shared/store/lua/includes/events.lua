-- Append one event to the chat's capped event stream. A script run for a process that hands
-- events to code (startChatlane's onEvent) runs with `__events` a table (scripts.ts wraps it):
-- each event is collected there too and comes back with the script's reply, so the process
-- learns what it wrote without reading it back. Otherwise `__events` is false.
local function addEventJson(eventsKey, maxEvents, eventType, json)
  local id = redis.call('XADD', eventsKey, 'MAXLEN', '~', maxEvents, '*', 'type', eventType, 'data', json)
  if __events then
    __events[#__events + 1] = { eventsKey, id, eventType, json }
  end
  return id
end

local function addEvent(eventsKey, maxEvents, eventType, data)
  return addEventJson(eventsKey, maxEvents, eventType, cjson.encode(data))
end

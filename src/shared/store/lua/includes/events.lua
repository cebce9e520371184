-- Append one event to the chat's capped event stream.
local function addEvent(eventsKey, maxEvents, eventType, data)
  return redis.call('XADD', eventsKey, 'MAXLEN', '~', maxEvents, '*',
    'type', eventType, 'data', cjson.encode(data))
end

-- Add the usage of model calls to the chat's usage hash (src/shared/usage.ts):
--   <day>|<model>|<kind>  tokens of each kind (input, cached_input, cache_write, output,
--                         reasoning) and `calls`, per model
--   <day>|total           input + output tokens of every model: what a daily budget counts
-- `callsJson` is a JSON array of { m, i, c, w, o, r } (model, input, cached input, cache
-- write, output, reasoning), one per model call. On a day's first write, days before
-- `keepFrom` are dropped ('' keeps every day): the hash holds at most the kept days.
-- Returns the decoded calls (empty when there was nothing to write) and the day's total.
local USAGE_KINDS = { { 'i', 'input' }, { 'c', 'cached_input' }, { 'w', 'cache_write' },
  { 'o', 'output' }, { 'r', 'reasoning' } }

local function recordUsage(usageKey, day, keepFrom, callsJson)
  if day == '' then
    return {}, 0
  end
  local calls = cjson.decode(callsJson)
  if #calls == 0 then
    return calls, 0
  end
  local totalField = day .. '|total'
  if keepFrom ~= '' and redis.call('HEXISTS', usageKey, totalField) == 0 then
    for _, field in ipairs(redis.call('HKEYS', usageKey)) do
      if string.sub(field, 1, 10) < keepFrom then
        redis.call('HDEL', usageKey, field)
      end
    end
  end
  local total = 0
  for _, call in ipairs(calls) do
    local prefix = day .. '|' .. tostring(call.m) .. '|'
    for _, kind in ipairs(USAGE_KINDS) do
      local v = tonumber(call[kind[1]]) or 0
      if v > 0 then
        redis.call('HINCRBY', usageKey, prefix .. kind[2], v)
      end
    end
    redis.call('HINCRBY', usageKey, prefix .. 'calls', 1)
    total = total + (tonumber(call.i) or 0) + (tonumber(call.o) or 0)
  end
  return calls, redis.call('HINCRBY', usageKey, totalField, total)
end

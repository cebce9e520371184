-- Server time in milliseconds: leases are judged by Redis's clock, never a worker's.
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

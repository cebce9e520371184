--[[
  A page of the compaction archive by index (read-only). An index counts from the chat's first
  entry ever: retention drops the oldest entries and counts them in meta archiveDropped, so
  the offset and the page are read at one instant.

  KEYS[1] meta     hash: archiveDropped
  KEYS[2] archive  list of archive entry JSONs, oldest first

  ARGV[1] first index wanted (a dropped one starts the page at the oldest kept)
  ARGV[2] max entries

  Returns { indexOfFirst, entries }
]]
local dropped = tonumber(redis.call('HGET', KEYS[1], 'archiveDropped') or '0')
local start = math.max(tonumber(ARGV[1]) - dropped, 0)
return { dropped + start, redis.call('LRANGE', KEYS[2], start, start + tonumber(ARGV[2]) - 1) }

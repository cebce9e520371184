-- Trim the outbox to its newest `keep` items, never past the delivery cursor of a chat with a
-- reply route (what delivery still needs stays). Amortised: it runs once the outbox holds a
-- quarter more than `keep`, and reads only items at or before the cursor, so a delivery
-- backlog costs a cheap empty range per write, never a scan of the backlog.
local function trimOutbox(metaKey, outboxKey, keep)
  keep = tonumber(keep)
  local len = redis.call('XLEN', outboxKey)
  if len <= keep + math.max(1, math.floor(keep / 4)) then
    return 0
  end
  local upTo = '+'
  if redis.call('HEXISTS', metaKey, 'route') == 1 then
    upTo = redis.call('HGET', metaKey, 'deliveredTo') or '0-0'
    if upTo == '0-0' then
      return 0
    end
  end
  local cut = redis.call('XRANGE', outboxKey, '-', upTo, 'COUNT', len - keep)
  if #cut == 0 then
    return 0
  end
  local last = cut[#cut][1]
  -- MINID drops what is older than `last`; `last` itself goes by id.
  redis.call('XTRIM', outboxKey, 'MINID', last)
  redis.call('XDEL', outboxKey, last)
  return #cut
end

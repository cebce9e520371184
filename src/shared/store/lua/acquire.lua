--[[
  Take the chat's turn lease and a new fence, and read what the turn starts from.

  KEYS[1] meta    hash: fence, owner, leaseUntil, route, ...
  KEYS[2] events
  KEYS[3] uncommitted  list: sends of turns that never committed (written by outbox.lua)
  KEYS[4] hist
  KEYS[5] inbox
  KEYS[6] memory
  KEYS[7] archive   list: what compaction summarised away (chat_history_search reads it)
  KEYS[8] contexts  hash: archived contexts (chat_context_list / chat_context_load read it)
  KEYS[9] watch     string: someone can watch the chat's replies (read only)

  ARGV[1] owner token (unique per attempt)
  ARGV[2] lease in ms
  ARGV[3] max events
  ARGV[4] history window: the newest n history messages (0: none)
  ARGV[5] max pending: the oldest n inbox entries (0: none)

  Returns { 'ok', fence, { send JSON ... }, route, head, { window JSON ... }, histLen,
            { inbox entry ... }, memory, archiveLen, contexts, uiRun, watched } | { 'busy', ttlMs }
    sends: what earlier runs of this chat said without committing: the new turn must know
      them (they reached the person) so it continues instead of answering again
    route: meta.route (nil without one); head: the first history message (nil when empty),
      the summary when compacted; memory: the memory document (nil without one)
    histLen, archiveLen, contexts: how much the chat holds, which decides the tools the turn
      offers (chat-tools.ts); counted only with a read (ARGV[4] > 0), else 0
    uiRun: meta.uiRun, the run whose reply stream is still open (nil when none): a turn that
      died mid-reply; the new turn's reply-write.lua `open` closes it. Only a fence holder
      writes uiRun, so it stays as read until this turn opens its own reply
    The reads are taken under the new lease, in the same round trip: nothing but the fence
    holder writes hist between them and the turn's commit.
]]
-- @include "now"
-- @include "events"
local now = nowMs()
local owner = redis.call('HGET', KEYS[1], 'owner')
local leaseUntil = tonumber(redis.call('HGET', KEYS[1], 'leaseUntil') or '0')

if owner and owner ~= ARGV[1] and leaseUntil > now then
  return { 'busy', leaseUntil - now }
end

local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'leaseUntil', now + tonumber(ARGV[2]))
if owner and owner ~= ARGV[1] then
  -- The previous holder's lease ran out without a finish: it stalled or died. expiredMs
  -- (how long the lease had been expired) tells a slow retry from a slow lease.
  addEvent(KEYS[2], ARGV[3], 'lease.takeover',
    { previousOwner = owner, owner = ARGV[1], fence = fence, expiredMs = now - leaseUntil })
end

local window = tonumber(ARGV[4])
local maxPending = tonumber(ARGV[5])
local histLen = redis.call('LLEN', KEYS[4])
local head = false
local messages = {}
if window > 0 and histLen > 0 then
  head = redis.call('LINDEX', KEYS[4], 0)
  messages = redis.call('LRANGE', KEYS[4], -window, -1)
end
local archiveLen = 0
local contexts = 0
if window > 0 then
  archiveLen = redis.call('LLEN', KEYS[7])
  contexts = redis.call('HLEN', KEYS[8])
end
local pending = {}
if maxPending > 0 then
  pending = redis.call('XRANGE', KEYS[5], '-', '+', 'COUNT', maxPending)
end
return {
  'ok', fence, redis.call('LRANGE', KEYS[3], 0, -1), redis.call('HGET', KEYS[1], 'route'),
  head, messages, histLen, pending, redis.call('GET', KEYS[6]), archiveLen, contexts,
  redis.call('HGET', KEYS[1], 'uiRun'), redis.call('EXISTS', KEYS[9]),
}

-- One sliding-window limiter decision, atomic because Redis runs a script to completion.
--
-- KEYS[1]  the tenant's log: a sorted set of admissions scored by server time in microseconds.
--          Named "rl:{<tenant>}" so that, in cluster mode, everything of a tenant shares a slot.
-- ARGV[1]  limit: admissions allowed in any window
-- ARGV[2]  window length in microseconds (>= 1)
--
-- Returns {allowed (1 or 0), admissions in the window after this decision, now (µs, server
-- clock), reset (µs until the oldest admission expires and frees a slot; 0 when the log is empty)}.
-- Rejected requests are not recorded, so a tenant that keeps retrying does not lock itself out.
-- Needs Redis >= 5 (scripts replicate their effects, so reading TIME before a write is allowed).

local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])

-- The server's clock, never the client's: every client of one Redis judges by the same time.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

-- An admission at t is inside (now - window, now]; at exactly now - window it has expired.
redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - window))
local count = redis.call('ZCARD', key)

local allowed = 0
if count < limit then
  -- Members must be unique, or ZADD overwrites an admission instead of adding one. They are
  -- formatted as integers: tostring(now) prints %.14g, which rounds to 100 µs and makes every
  -- admission of the same 100 µs collide into one member (measured: 483 admitted for a limit
  -- of 100). Two decisions in the same microsecond get a suffix.
  local stamp = string.format('%d', now)
  local member = stamp
  local n = 0
  while redis.call('ZSCORE', key, member) do
    n = n + 1
    member = stamp .. '-' .. string.format('%d', n)
  end
  redis.call('ZADD', key, stamp, member)
  -- The newest admission is the last to expire; an idle tenant's log vanishes with it.
  redis.call('PEXPIRE', key, string.format('%d', math.ceil(window / 1000)))
  count = count + 1
  allowed = 1
end

local reset = 0
if count > 0 then
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  reset = tonumber(oldest[2]) + window - now
end

return {allowed, count, now, reset}

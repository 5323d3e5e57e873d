-- One weighted sliding-window limiter decision (bytes per window, say), atomic because Redis
-- runs a script to completion.
--
-- KEYS[1]  the tenant's weighted log: a sorted set of admissions scored by server time in µs,
--          each member "<time>-<n>:<cost>", so the cost travels with the member.
-- KEYS[2]  the sum of the costs in KEYS[1]. Both keys are named "rlw:{<tenant>}…", so that, in
--          cluster mode, they share a slot with each other and with the tenant's request log.
-- ARGV[1]  limit: units (bytes) allowed in any window
-- ARGV[2]  window length in microseconds (>= 1)
-- ARGV[3]  cost of this request, in the limit's units (>= 0)
--
-- Returns {allowed (1 or 0), units in the window after this decision, now (µs, server clock),
-- reset (µs): for an admission until the oldest entry expires (0 when the log is empty), for a
-- rejection until enough units expire for the cost to fit (the window when it never can)}.
-- Rejected requests are not recorded. Needs Redis >= 5 (scripts replicate their effects).

local log = KEYS[1]
local sum = KEYS[2]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

-- The server's clock, never the client's: every client of one Redis judges by the same time.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

local function weight(member)
  return tonumber(string.match(member, ':(%d+)$'))
end

-- An admission at t is inside (now - window, now]; at exactly now - window it has expired.
local cutoff = string.format('%d', now - window)
local total
if redis.call('EXISTS', sum) == 1 then
  total = tonumber(redis.call('GET', sum))
  local expired = redis.call('ZRANGEBYSCORE', log, '-inf', cutoff)
  if #expired > 0 then
    local freed = 0
    for _, member in ipairs(expired) do
      freed = freed + weight(member)
    end
    redis.call('ZREMRANGEBYSCORE', log, '-inf', cutoff)
    total = total - freed
  end
else
  -- No total (first use, or one key lost to eviction): rebuild it from the log.
  redis.call('ZREMRANGEBYSCORE', log, '-inf', cutoff)
  total = 0
  for _, member in ipairs(redis.call('ZRANGE', log, 0, -1)) do
    total = total + weight(member)
  end
end
if redis.call('ZCARD', log) == 0 then
  total = 0
end

local allowed = 0
if total + cost <= limit then
  allowed = 1
  if cost > 0 then
    -- Unique members, formatted as integers (see redis_limiter.lua for why never tostring).
    local stamp = string.format('%d', now)
    local n = 0
    local member = stamp .. '-0:' .. string.format('%d', cost)
    while redis.call('ZSCORE', log, member) do
      n = n + 1
      member = stamp .. '-' .. string.format('%d', n) .. ':' .. string.format('%d', cost)
    end
    redis.call('ZADD', log, stamp, member)
    total = total + cost
    -- The newest admission is the last to expire; an idle tenant's keys vanish with it.
    redis.call('PEXPIRE', log, string.format('%d', math.ceil(window / 1000)))
  end
end

-- The total follows the log, expiry included, whether or not this request was admitted (the
-- entries that expired above are gone either way).
if total == 0 then
  redis.call('DEL', log, sum)
else
  local ttl = redis.call('PTTL', log)
  if ttl > 0 then
    redis.call('SET', sum, string.format('%d', total), 'PX', ttl)
  else
    redis.call('SET', sum, string.format('%d', total))
  end
end

local reset = 0
if allowed == 1 then
  if total > 0 then
    local oldest = redis.call('ZRANGE', log, 0, 0, 'WITHSCORES')
    reset = tonumber(oldest[2]) + window - now
  end
elseif cost > limit then
  reset = window
else
  -- Walk from the oldest entry until enough units have expired for the cost to fit.
  local need = total + cost - limit
  local freed = 0
  local start = 0
  reset = window
  while freed < need do
    local batch = redis.call('ZRANGE', log, start, start + 63, 'WITHSCORES')
    if #batch == 0 then
      break
    end
    for i = 1, #batch, 2 do
      freed = freed + weight(batch[i])
      if freed >= need then
        reset = tonumber(batch[i + 1]) + window - now
        break
      end
    end
    start = start + 64
  end
end

return {allowed, total, now, reset}

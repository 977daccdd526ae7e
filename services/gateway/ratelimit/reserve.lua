-- Reserve or correct a request's cost against several limits at once
-- (package ratelimit's doc has the algorithm).
--
-- ARGV[1]: 'r' reserve (all limits have room, or nothing changes) or
--          'c' correct (add signed costs, never refuse, floor at 0).
-- Then per limit: kind (1 rate, 2 window), limit, p, cost, and for a
--          window also rcost and the rollup's field of its tokens
--          (usage.BudgetField); p is the period in ms (rate) or
--          the window's end in unix ms.
-- KEYS, in the limits' order: a rate's key; a window's three: its
--          counter, its counter of reserved tokens in flight, and the
--          meter's rollup hash of the window (rediskeys.UsageRollup).
-- A rate key is a hash {l = level, t = last update ms}, living until its
-- bucket is empty. A window's level is the larger of its counter (every
-- token reserved or settled here) and the rollup's tokens (one field,
-- which the meter keeps) plus the reserved counter: the meter's count of
-- what finished, plus what is still in flight. Its counters live an hour
-- past its end; cost changes the counter, rcost the reserved one.
-- Returns: denied index (0: none), retry after ms, then per limit the
-- remaining units and the ms until it is whole (rate) or ends (window).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local correct = ARGV[1] == 'c'
local limits = {}
local a, k = 2, 1
while a <= #ARGV do
  local l = {kind = tonumber(ARGV[a]), lim = tonumber(ARGV[a + 1]), p = tonumber(ARGV[a + 2]), cost = tonumber(ARGV[a + 3]), key = k}
  if l.kind == 1 then
    a, k = a + 4, k + 1
  else
    l.rcost, l.field = tonumber(ARGV[a + 4]), ARGV[a + 5]
    a, k = a + 6, k + 3
  end
  limits[#limits + 1] = l
end
local denied, retry = 0, 0
for i, l in ipairs(limits) do
  if l.kind == 1 then
    local h = redis.call('HMGET', KEYS[l.key], 'l', 't')
    local last = tonumber(h[2]) or now
    l.cur = math.max(0, (tonumber(h[1]) or 0) - (now - last) * l.lim / l.p)
    l.new = l.cur + l.cost
    if correct then l.new = math.max(0, l.new) end
  else
    l.counter = tonumber(redis.call('GET', KEYS[l.key]) or '0')
    l.reserved = tonumber(redis.call('GET', KEYS[l.key + 1]) or '0')
    l.meter = tonumber(redis.call('HGET', KEYS[l.key + 2], l.field) or '0')
    l.cur = math.max(l.counter, l.meter + l.reserved)
    l.counter2 = l.counter + l.cost
    l.reserved2 = l.reserved + l.rcost
    if correct then
      l.counter2, l.reserved2 = math.max(0, l.counter2), math.max(0, l.reserved2)
    end
    l.new = math.max(l.counter2, l.meter + l.reserved2)
  end
  if not correct and l.new > l.lim then
    if denied == 0 then denied = i end
    if l.kind == 1 then
      retry = math.max(retry, (l.new - l.lim) * l.p / l.lim)
    else
      retry = math.max(retry, l.p - now)
    end
  end
end
-- A refused reservation changes nothing and reports the levels as they are.
local refused = denied ~= 0 and not correct
local out = {denied, math.ceil(retry)}
for _, l in ipairs(limits) do
  local level = l.new
  if refused then level = l.cur end
  out[#out + 1] = math.floor(l.lim - level)
  if l.kind == 1 then
    out[#out + 1] = math.ceil(level * l.p / l.lim)
  else
    out[#out + 1] = l.p - now
  end
end
if refused then
  return out
end
for _, l in ipairs(limits) do
  if l.kind == 1 then
    if l.new <= 0 then
      redis.call('DEL', KEYS[l.key])
    else
      redis.call('HSET', KEYS[l.key], 'l', string.format('%.17g', l.new), 't', now)
      redis.call('PEXPIRE', KEYS[l.key], math.ceil(l.new * l.p / l.lim) + 1000)
    end
  else
    redis.call('SET', KEYS[l.key], string.format('%d', l.counter2), 'PXAT', l.p + 3600000)
    redis.call('SET', KEYS[l.key + 1], string.format('%d', l.reserved2), 'PXAT', l.p + 3600000)
  end
end
return out

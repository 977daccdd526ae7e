-- Reserve or correct a request's cost against several limits at once
-- (package ratelimit's doc has the algorithm).
--
-- KEYS[i]: one limit's key.
-- ARGV[1]: 'r' reserve (all limits have room, or nothing changes) or
--          'c' correct (add signed costs, never refuse, floor at 0).
-- ARGV[2+4(i-1)..]: kind (1 rate, 2 window), limit, p, cost, where p is
--          the period in ms (rate) or the window's end in unix ms.
-- A rate key is a hash {l = level, t = last update ms}, living until its
-- bucket is empty; a window key a counter living an hour past its end.
-- Returns: denied index (0: none), retry after ms, then per key the
-- remaining units and the ms until it is whole (rate) or ends (window).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local correct = ARGV[1] == 'c'
local n = #KEYS
local cur, new = {}, {}
local denied, retry = 0, 0
for i = 1, n do
  local b = 2 + 4 * (i - 1)
  local kind, lim, p, cost = tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
  local lvl
  if kind == 1 then
    local h = redis.call('HMGET', KEYS[i], 'l', 't')
    local last = tonumber(h[2]) or now
    lvl = math.max(0, (tonumber(h[1]) or 0) - (now - last) * lim / p)
  else
    lvl = tonumber(redis.call('GET', KEYS[i]) or '0')
  end
  cur[i], new[i] = lvl, lvl + cost
  if correct then
    new[i] = math.max(0, new[i])
  elseif new[i] > lim then
    if denied == 0 then denied = i end
    if kind == 1 then
      retry = math.max(retry, (new[i] - lim) * p / lim)
    else
      retry = math.max(retry, p - now)
    end
  end
end
-- A refused reservation changes nothing and reports the levels as they are.
local level = new
if denied ~= 0 and not correct then
  level = cur
end
local out = {denied, math.ceil(retry)}
for i = 1, n do
  local b = 2 + 4 * (i - 1)
  local kind, lim, p = tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
  out[#out + 1] = math.floor(lim - level[i])
  if kind == 1 then
    out[#out + 1] = math.ceil(level[i] * p / lim)
  else
    out[#out + 1] = p - now
  end
end
if denied ~= 0 and not correct then
  return out
end
for i = 1, n do
  local b = 2 + 4 * (i - 1)
  local kind, lim, p = tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
  if kind == 1 then
    if level[i] <= 0 then
      redis.call('DEL', KEYS[i])
    else
      redis.call('HSET', KEYS[i], 'l', string.format('%.17g', level[i]), 't', now)
      redis.call('PEXPIRE', KEYS[i], math.ceil(level[i] * p / lim) + 1000)
    end
  else
    redis.call('SET', KEYS[i], string.format('%d', level[i]), 'PXAT', p + 3600000)
  end
end
return out

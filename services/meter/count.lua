-- Count a batch of one tenant's usage events, each exactly once (package
-- meter's doc has why this is atomic).
--
-- KEYS: the batch's keys, every one the tenant's (one hash tag): the seen
--       sets first, then the rollup hashes.
-- ARGV[1]: n, the number of events; ARGV[2]: the number of keys' TTLs
--          that follow (#KEYS), then one TTL in seconds per key.
-- Then the counter names: their count c, then c names.
-- Then the models: their count m, then m names; then the outcomes: their
-- count o, then o names.
-- Then per event: its request id, the index of its seen set, the indexes of
--   its minute, hour and day rollups, its model's and its outcome's
--   indexes, and c values.
-- A rollup field is "<counter>|<model>", incremented by the sum of the
-- new events' values (zero sums are not written), and
-- "outcome.<outcome>|<model>" by their number.
-- Returns one flag per event: 1 counted now, 0 counted before.
local n = tonumber(ARGV[1])
local nk = tonumber(ARGV[2])
local a = 3 + nk
local c = tonumber(ARGV[a]); a = a + 1
local counters = {}
for i = 1, c do counters[i] = ARGV[a]; a = a + 1 end
local m = tonumber(ARGV[a]); a = a + 1
local models = {}
for i = 1, m do models[i] = ARGV[a]; a = a + 1 end
local o = tonumber(ARGV[a]); a = a + 1
local outcomes = {}
for i = 1, o do outcomes[i] = 'outcome.' .. ARGV[a]; a = a + 1 end
-- fields[model][i] is counter i's field for the model, [0] the model name.
local fields = {}
local function fieldsOf(mi)
  local f = fields[mi]
  if f == nil then
    f = {[0] = models[mi]}
    for i = 1, c do f[i] = counters[i] .. '|' .. models[mi] end
    fields[mi] = f
  end
  return f
end
local sums = {} -- key index -> field -> sum
local touched = {}
local out = {}
for e = 1, n do
  local id, seen = ARGV[a], tonumber(ARGV[a + 1])
  local buckets = {tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])}
  local f = fieldsOf(tonumber(ARGV[a + 5]))
  local oi = tonumber(ARGV[a + 6])
  local v = a + 7
  a = v + c
  touched[seen] = true
  if redis.call('SADD', KEYS[seen], id) == 1 then
    out[e] = 1
    local outcome = outcomes[oi] .. '|' .. f[0]
    local x = {}
    for i = 1, c do x[i] = tonumber(ARGV[v + i - 1]) end
    for _, k in ipairs(buckets) do
      local s = sums[k]
      if s == nil then s = {}; sums[k] = s end
      for i = 1, c do
        if x[i] ~= 0 then
          s[f[i]] = (s[f[i]] or 0) + x[i]
        end
      end
      s[outcome] = (s[outcome] or 0) + 1
    end
  else
    out[e] = 0
  end
end
for k, s in pairs(sums) do
  for f, x in pairs(s) do
    redis.call('HINCRBY', KEYS[k], f, x)
  end
  touched[k] = true
end
for k in pairs(touched) do
  redis.call('EXPIRE', KEYS[k], tonumber(ARGV[2 + k]))
end
return out

-- Count a batch of one tenant's usage events, each exactly once (package
-- meter's doc has why this is atomic).
--
-- The events come grouped by model, outcome and minute, with each group's
-- counters summed over all its events: the sums are what the rollups
-- gain unless an event turns out to be counted before (rare), whose own
-- values are then taken back out of its group's sums.
--
-- KEYS: the batch's keys, every one the tenant's (one hash tag): hours'
--       sets of counted request ids, and minute, hour and day rollups.
-- ARGV[1]: n, the number of events; ARGV[2]: g, the number of groups;
-- ARGV[3]: the number of keys (#KEYS), then one TTL in seconds per key.
-- Then the counters: their count c, then c names; the token counters'
--   count t, then their t indexes among the c; the outcomes: their count
--   o, then o names.
-- Then per group: its model, its outcome's index, the indexes of its
--   hour's id set and of its minute, hour, day and month rollups, its
--   number of events, and the c sums.
-- Then per event: its request id, its group's index, and its c values
--   joined by commas (read only when it was counted before).
-- A rollup field is "<counter>|<model>", incremented by the group's sum
-- (zero sums are not written), and "outcome.<outcome>|<model>" by the
-- group's number of events; the day and month rollups (a group's third
-- and fourth) also keep "tokens|<model>" and "tokens", the sums of the
-- token counters of the model and of every model (usage.BudgetField),
-- which budgets read one field at a time.
-- Returns one flag per event: 1 counted now, 0 counted before.
local n, ng, nk = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local a = 4 + nk
local c = tonumber(ARGV[a]); a = a + 1
local counters = {}
for i = 1, c do counters[i] = ARGV[a]; a = a + 1 end
local t = tonumber(ARGV[a]); a = a + 1
local tokens = {}
for i = 1, t do tokens[i] = tonumber(ARGV[a]); a = a + 1 end
local o = tonumber(ARGV[a]); a = a + 1
local outcomes = {}
for i = 1, o do outcomes[i] = 'outcome.' .. ARGV[a]; a = a + 1 end
local groups = {}
for gi = 1, ng do
  local g = {model = ARGV[a], outcome = tonumber(ARGV[a + 1]), seen = tonumber(ARGV[a + 2]),
    keys = {tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6])},
    n = tonumber(ARGV[a + 7]), sums = {}}
  a = a + 8
  for i = 1, c do g.sums[i] = tonumber(ARGV[a]); a = a + 1 end
  groups[gi] = g
end
local out = {}
local touched = {}
for e = 1, n do
  local g = groups[tonumber(ARGV[a + 1])]
  touched[g.seen] = true
  if redis.call('SADD', KEYS[g.seen], ARGV[a]) == 1 then
    out[e] = 1
  else
    out[e] = 0
    g.n = g.n - 1
    local i = 1
    for v in string.gmatch(ARGV[a + 2], '[^,]+') do
      g.sums[i] = g.sums[i] - tonumber(v)
      i = i + 1
    end
  end
  a = a + 3
end
-- Sum the groups per key and field, then write each once.
local adds = {}
for _, g in ipairs(groups) do
  if g.n > 0 then
    local tok = 0
    for _, i in ipairs(tokens) do tok = tok + g.sums[i] end
    for ki, k in ipairs(g.keys) do
      local s = adds[k]
      if s == nil then s = {}; adds[k] = s end
      for i = 1, c do
        if g.sums[i] ~= 0 then
          local f = counters[i] .. '|' .. g.model
          s[f] = (s[f] or 0) + g.sums[i]
        end
      end
      local f = outcomes[g.outcome] .. '|' .. g.model
      s[f] = (s[f] or 0) + g.n
      if ki >= 3 and tok ~= 0 then
        f = 'tokens|' .. g.model
        s[f] = (s[f] or 0) + tok
        s['tokens'] = (s['tokens'] or 0) + tok
      end
    end
  end
end
for k, s in pairs(adds) do
  for f, x in pairs(s) do
    redis.call('HINCRBY', KEYS[k], f, x)
  end
  touched[k] = true
end
for k in pairs(touched) do
  redis.call('EXPIRE', KEYS[k], tonumber(ARGV[3 + k]))
end
return out
